#!/usr/bin/env bash
# Create .venv-sglang/ at the repository root with the REAL sglang 0.5.23 package, enough of its
# dependencies to import `sglang.srt.server_args` on a CPU-only machine, and a CPU build of torch.
#
# Why: the project validates rendered argv against SGLang's own argparse parser and exports a
# snapshot of it (tests/contract/export_sglang_cli.py -> plugins/data/sglang_cli_0.5.23.json)
# that the SGLang simulator rebuilds its parser from.
#
# - sglang is installed with --no-deps: its full dependency set (CUDA torch, flashinfer,
#   sglang-kernel, ...) cannot run here and is not needed to build the parser.
# - torch==2.13.0 resolves to the CPU wheel on this machine's local wheel directory; the pip
#   constraint file in /etc/xdg/pip caps torch so pip never pulls a CUDA build. Do not remove it.
# - Idempotent: an existing venv whose sglang and torch versions match is left alone.
#
# Usage: tests/contract/install_real_sglang.sh            (from anywhere)
#        SGLANG_VENV=/other/path tests/contract/install_real_sglang.sh
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
VENV="${SGLANG_VENV:-$ROOT/.venv-sglang}"
PYTHON="${PYTHON:-python3}"
SGLANG_VERSION="0.5.23"
TORCH_VERSION="2.13.0"
# Light dependencies that `import sglang.srt.server_args` needs (found by importing until clean).
LIGHT_DEPS=(
  "numpy==2.4.6" "orjson==3.13.0" "psutil==7.2.2" "pybase64==1.5.1" "requests==2.34.2"
  "triton==3.9.0" "packaging==26.4" "pillow==13.0.0" "starlette==1.10.0" "msgspec==0.23.0"
  "pydantic==2.14.4" "pyzmq==27.3.0" "tqdm==4.70.1" "ipython==9.18.1" "aiohttp==3.14.5"
  # the uvicorn the release's closure resolves (sglang 0.5.23 asks uvicorn>=0.51): its lines are judged for real
  "uvicorn==0.55.0"
)

probe() {
  "$VENV/bin/python" - "$SGLANG_VERSION" "$TORCH_VERSION" <<'PY' >/dev/null 2>&1
import sys, importlib.metadata as md
assert md.version("sglang") == sys.argv[1]
assert md.version("torch").split("+")[0] == sys.argv[2]
assert md.version("uvicorn") == "0.55.0"
import argparse
from sglang.srt.server_args import ServerArgs
ServerArgs.add_cli_args(argparse.ArgumentParser())
PY
}

if [ -x "$VENV/bin/python" ] && probe; then
  echo "ok: $VENV already has sglang==$SGLANG_VERSION and torch==$TORCH_VERSION (nothing changed)"
  exit 0
fi

[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
"$VENV/bin/pip" install -q --disable-pip-version-check "torch==$TORCH_VERSION"
"$VENV/bin/pip" install -q --disable-pip-version-check --no-deps "sglang==$SGLANG_VERSION"
"$VENV/bin/pip" install -q --disable-pip-version-check "${LIGHT_DEPS[@]}" "torch==$TORCH_VERSION"

if ! probe; then
  echo "error: $VENV cannot import sglang.srt.server_args after install" >&2
  "$VENV/bin/python" -c "from sglang.srt.server_args import ServerArgs" >&2 || true
  exit 1
fi
echo "changed: $VENV has sglang==$SGLANG_VERSION with torch==$TORCH_VERSION (CPU)"
