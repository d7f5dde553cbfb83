#!/usr/bin/env bash
# The main job on the embedded sandbox: build the stand-ins and the node image, create the sandbox GPU
# node(s), run deploy.yml against them, and print each node's health report.
# Usage: scripts/sandbox-deploy.sh [extra ansible-playbook args, e.g. --check or -v]
#        scripts/sandbox-deploy.sh --destroy      (removes the node(s) and their network; nothing else)
# Another sandbox inventory (scripts/sandbox-fleet.sh uses this): SANDBOX_INVENTORY=inventory/sandbox-fleet
# SANDBOX_VARS=tests/sandbox/fleet.yml (overrides of tests/sandbox/nodes.yml for tests/sandbox/playbooks/sandbox.yml),
# SANDBOX_BENCHMARK_CLIENT=1 (the fleet's benchmark client, tests/sandbox/benchmark_client.py).
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)  # the whole job, the controller's bootstrap included
scripts/bootstrap.sh
# shellcheck source=scripts/env.sh
source scripts/env.sh

inventory="${SANDBOX_INVENTORY:-inventory/sandbox}"
sandbox_args=(-i "$inventory")
if [ -n "${SANDBOX_VARS:-}" ]; then sandbox_args+=(-e "@$SANDBOX_VARS"); fi
if [ "${1:-}" = "--destroy" ]; then
  exec ansible-playbook "${sandbox_args[@]}" tests/sandbox/playbooks/sandbox.yml -e sandbox_action=destroy
fi
echo "== stand-ins (tests/sandbox/build_artifacts.py)"
python tests/sandbox/build_artifacts.py --out .sandbox/artifacts
if [ -n "${SANDBOX_BENCHMARK_CLIENT:-}" ]; then
  echo "== the benchmark client (tests/sandbox/benchmark_client.py: once per machine)"
  python tests/sandbox/benchmark_client.py .sandbox/artifacts
fi
echo "== node image"
tests/sandbox/image/build-image.sh
echo "== sandbox node(s) of $inventory"
ansible-playbook "${sandbox_args[@]}" tests/sandbox/playbooks/sandbox.yml
echo "== deploy.yml"
ansible-playbook -i "$inventory" deploy.yml "$@"
echo "== done in $(( $(date +%s) - start )) s; health reports in reports/"
