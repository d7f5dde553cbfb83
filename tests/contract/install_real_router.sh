#!/usr/bin/env bash
# Create .venv-router/ at the repository root with the REAL sglang-router 0.3.2 (Rust binary wheel) and its
# pinned dependency closure (roles/sglang_router/files/requirements-0.3.2.txt, the same lock the role installs).
#
# Why: the router's argparse parser is exported from the real package (tests/contract/export_sglang_cli.py
# --router -> plugins/data/sglang_router_cli_0.3.2.json) and the router-API contract tests run the real router
# on loopback in front of two SGLang simulators.
# Idempotent: an existing venv with sglang-router 0.3.2 is left alone.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
VENV="${ROUTER_VENV:-$ROOT/.venv-router}"
PYTHON="${PYTHON:-python3}"
LOCK="$ROOT/roles/sglang_router/files/requirements-0.3.2.txt"

probe() {
  "$VENV/bin/python" -c 'import importlib.metadata as md, sglang_router.launch_router; assert md.version("sglang-router") == "0.3.2"' >/dev/null 2>&1
}

if [ -x "$VENV/bin/python" ] && probe; then
  echo "ok: $VENV already has sglang-router==0.3.2 (nothing changed)"
  exit 0
fi
[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
"$VENV/bin/pip" install -q --disable-pip-version-check -r "$LOCK"
probe || { echo "error: $VENV cannot import sglang_router after install" >&2; exit 1; }
echo "changed: $VENV has sglang-router==0.3.2"
