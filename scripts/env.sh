# shellcheck shell=bash
# Source me from bash:  source scripts/env.sh
# Puts the project's controller venv, ansible.cfg and podman configuration in this shell.
# Run scripts/bootstrap.sh first.
SGLANG_ANSIBLE_REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export SGLANG_ANSIBLE_REPO
# runc + ulimits that fit this kind of host (see tests/sandbox/containers.conf)
export CONTAINERS_CONF="$SGLANG_ANSIBLE_REPO/tests/sandbox/containers.conf"
export ANSIBLE_CONFIG="$SGLANG_ANSIBLE_REPO/ansible.cfg"
if [ -f "$SGLANG_ANSIBLE_REPO/.venv/bin/activate" ]; then
  # shellcheck disable=SC1091
  . "$SGLANG_ANSIBLE_REPO/.venv/bin/activate"
else
  echo "env.sh: $SGLANG_ANSIBLE_REPO/.venv missing; run scripts/bootstrap.sh" >&2
fi
