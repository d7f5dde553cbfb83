#!/usr/bin/env bash
# The test suite: ansible-lint (production profile), pytest unit tests, molecule whole-site scenario.
# Usage: scripts/test.sh            (everything)
#        SKIP_MOLECULE=1 scripts/test.sh   (lint + unit tests only)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh
# shellcheck source=scripts/env.sh
source scripts/env.sh

echo "== ansible-lint (profile production)"
ansible-lint
echo "== unit tests"
python -m pytest -q tests/unit
if [ -z "${SKIP_MOLECULE:-}" ]; then
  echo "== molecule test (default: create, prepare, converge, idempotence, verify, destroy)"
  molecule test -s default
fi
