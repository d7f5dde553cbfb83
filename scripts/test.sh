#!/usr/bin/env bash
# The test suite: ansible-lint (production profile), pytest unit tests, molecule whole-site scenario.
# Usage: scripts/test.sh                                   (everything)
#        SKIP_MOLECULE=1 scripts/test.sh                   (lint + unit tests only)
#        MOLECULE_SCENARIOS="preflight" scripts/test.sh    (only these molecule scenarios)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh
# shellcheck source=scripts/env.sh
source scripts/env.sh

echo "== ansible-lint (profile production)"
ansible-lint
echo "== the real SGLang 0.5.23 parser for the contract tests (.venv-sglang, a no-op when present)"
tests/contract/install_real_sglang.sh
echo "== unit and contract tests"
python -m pytest -q tests/unit tests/contract
if [ -z "${SKIP_MOLECULE:-}" ]; then
  for scenario in ${MOLECULE_SCENARIOS:-default preflight releases}; do
    echo "== molecule test -s $scenario"
    molecule test -s "$scenario"
  done
fi
