#!/usr/bin/env bash
# The fleet sandbox: two stand-in GPU nodes and the real sglang-router in a third container
# (inventory/sandbox-fleet), deployed with deploy.yml by the main job's script. Then, e.g.:
#   ansible-playbook -i inventory/sandbox-fleet playbooks/rolling_redeploy.yml
#   python benchmarks/rolling_redeploy.py        (both acceptance cases under load, with figures)
# Usage: scripts/sandbox-fleet.sh [extra deploy.yml args]     Remove: scripts/sandbox-fleet.sh --destroy
set -euo pipefail
cd "$(dirname "$0")/.."
export SANDBOX_INVENTORY=inventory/sandbox-fleet SANDBOX_VARS=tests/sandbox/fleet.yml

if [ "${1:-}" = "--destroy" ]; then
  scripts/bootstrap.sh
  # shellcheck source=scripts/env.sh
  source scripts/env.sh
  exec ansible-playbook -i "$SANDBOX_INVENTORY" playbooks/sandbox.yml -e "@$SANDBOX_VARS" -e sandbox_action=destroy
fi
exec scripts/sandbox-deploy.sh "$@"
