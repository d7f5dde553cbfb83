# shellcheck shell=bash
# Source me from bash:  source scripts/env.sh
# Puts the project's controller venv, ansible.cfg and podman configuration in this shell.
# Run scripts/bootstrap.sh first.
SGLANG_ANSIBLE_REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export SGLANG_ANSIBLE_REPO
# runc + ulimits that fit this kind of host (see tests/sandbox/containers.conf)
export CONTAINERS_CONF="$SGLANG_ANSIBLE_REPO/tests/sandbox/containers.conf"
# Memory limit (cgroup) of every sandbox node, molecule's and tests/sandbox/playbooks/sandbox.yml's: /proc/meminfo in a container
# is the VM's, so a node's own limit is what makes its HiCache budget its own (SGLang and preflight both read it).
# 13.5 GiB: SGLang's 10 GiB reserve plus a few GB for the stand-in host pools (molecule/faults sizes a case by it).
export SANDBOX_NODE_MEMORY="${SANDBOX_NODE_MEMORY:-13824m}"
export ANSIBLE_CONFIG="$SGLANG_ANSIBLE_REPO/ansible.cfg"
# The sandbox's API key is vaulted under the id "sandbox" (inventory/sandbox/group_vars/all/api_keys.yml); this
# password file guards it and nothing else. Kept beside any vault ids of your own (--vault-id prod@prompt).
export ANSIBLE_VAULT_IDENTITY_LIST="sandbox@$SGLANG_ANSIBLE_REPO/tests/sandbox/vault-password"
if [ -f "$SGLANG_ANSIBLE_REPO/.venv/bin/activate" ]; then
  # shellcheck disable=SC1091
  . "$SGLANG_ANSIBLE_REPO/.venv/bin/activate"
else
  echo "env.sh: $SGLANG_ANSIBLE_REPO/.venv missing; run scripts/bootstrap.sh" >&2
fi
