#!/usr/bin/env bash
# The fleet sandbox: two stand-in GPU nodes and the real sglang-router in a third container
# (inventory/sandbox-fleet), deployed with deploy.yml by the main job's script. Then, e.g.:
#   ansible-playbook -i inventory/sandbox-fleet playbooks/rolling_redeploy.yml
#   python benchmarks/rolling_redeploy.py        (both acceptance cases under load, with figures)
# Usage: scripts/sandbox-fleet.sh [extra deploy.yml args]     Remove: scripts/sandbox-fleet.sh --destroy
set -euo pipefail
cd "$(dirname "$0")/.."
export SANDBOX_INVENTORY=inventory/sandbox-fleet SANDBOX_VARS=tests/sandbox/fleet.yml SANDBOX_BENCHMARK_CLIENT=1

exec scripts/sandbox-deploy.sh "$@"    # --destroy included
