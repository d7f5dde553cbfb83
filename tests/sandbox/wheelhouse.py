"""Offline wheelhouse for the sandbox node: the build backends pip needs for source installs.

On a real host pip fetches setuptools and wheel from the index into an isolated build environment
when it builds FlashInfer or SGLang from source. The sandbox node has no index, so the builds run with
``--no-index --find-links /srv/sandbox/wheelhouse`` and find the same backends here. Downloaded once on
the controller (which reaches PyPI); pinned so the sandbox build is reproducible.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

# Build backends the stand-in sources declare in pyproject.toml [build-system].
PINS = ("setuptools==80.9.0", "wheel==0.45.1")
# model_stage source hf: the staging venv's pinned huggingface_hub + hf_xet and their dependencies (Linux x86_64,
# CPython 3.11 as on the node), so the role can install them with --no-index --find-links in the sandbox.
HF_PINS = (
    "huggingface_hub==2.4.0", "hf_xet==1.8.0", "anyio==4.16.0", "click==8.5.1", "filelock==4.3.1",
    "fsspec==2026.9.0", "h11==0.16.0", "httpcore2==2.16.2", "httpx2==2.16.2", "idna==3.20", "packaging==26.4",
    "pyyaml==6.0.4", "tqdm==4.70.1", "truststore==0.10.5", "typing_extensions==4.16.0",
)


def build_wheelhouse(out: Path) -> list[str]:
    """Download PINS as py3 wheels into ``out`` unless already there; return the wheel file names."""
    out.mkdir(parents=True, exist_ok=True)
    pins = PINS + HF_PINS
    wanted = {pin.split("==")[0].lower(): pin.split("==")[1] for pin in pins}
    present = {p.name.split("-")[0].lower(): p.name.split("-")[1] for p in out.glob("*.whl")}
    if any(present.get(name) != version for name, version in wanted.items()):
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
             "--dest", str(out), *pins],
            check=True,
        )
    return sorted(p.name for p in out.glob("*.whl"))


if __name__ == "__main__":
    print("\n".join(build_wheelhouse(Path(sys.argv[1] if len(sys.argv) > 1 else ".sandbox/artifacts/wheelhouse"))))


def _pins(lock: Path) -> list[str]:
    return [line.split("#")[0].strip() for line in lock.read_text().splitlines() if line.split("#")[0].strip()]


def build_router_wheelhouse(out: Path, lock: Path) -> list[str]:
    """Download the router lock (``roles/sglang_router/files/requirements-<v>.txt``: sglang-router and its
    exact-pinned closure) as binary wheels for the node (CPython 3.11, manylinux x86_64) into ``out`` unless
    every pin is there already; return the wheel file names. The router host installs from it with
    ``--no-index --find-links``, resolving the same lock the role uses on a real host."""
    out.mkdir(parents=True, exist_ok=True)
    def norm(name):
        return name.lower().replace("_", "-").replace(".", "-")

    wanted = {norm(p.split("==")[0]): p.split("==")[1] for p in _pins(lock)}
    present = {norm(p.name.split("-")[0]): p.name.split("-")[1] for p in out.glob("*.whl")}
    if any(present.get(name) != version for name, version in wanted.items()):
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
             "--python-version", "3.11", "--implementation", "cp", "--abi", "cp311", "--abi", "abi3", "--abi", "none",
             "--platform", "manylinux2014_x86_64", "--platform", "manylinux_2_17_x86_64",
             "--platform", "manylinux_2_28_x86_64", "--platform", "any",
             "--dest", str(out), "-r", str(lock)],
            check=True,
        )
    return sorted(p.name for p in out.glob("*.whl"))
