#!/usr/bin/env bash
# The fleet sandbox: two stand-in GPU nodes and the real sglang-router in a third container
# (inventory/sandbox-fleet), deployed with deploy.yml. Then, e.g.:
#   ansible-playbook -i inventory/sandbox-fleet playbooks/rolling_redeploy.yml
#   python benchmarks/rolling_redeploy.py        (both acceptance cases under load, with figures)
# Usage: scripts/sandbox-fleet.sh [extra deploy.yml args]     Remove: scripts/sandbox-fleet.sh --destroy
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh
# shellcheck source=scripts/env.sh
source scripts/env.sh

if [ "${1:-}" = "--destroy" ]; then
  exec ansible-playbook -i inventory/sandbox-fleet playbooks/sandbox.yml -e @tests/sandbox/fleet.yml \
    -e sandbox_action=destroy
fi
start=$(date +%s)
echo "== stand-ins (tests/sandbox/build_artifacts.py)"
python tests/sandbox/build_artifacts.py --out .sandbox/artifacts
echo "== node image"
tests/sandbox/image/build-image.sh
echo "== fleet containers (2 GPU nodes + router)"
ansible-playbook -i inventory/sandbox-fleet playbooks/sandbox.yml -e @tests/sandbox/fleet.yml
echo "== deploy.yml on the fleet"
ansible-playbook -i inventory/sandbox-fleet deploy.yml "$@"
echo "== fleet ready in $(( $(date +%s) - start )) s"
