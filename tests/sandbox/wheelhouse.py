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

from role_defaults import role_default as _role_default  # a role's default from its one place

# Build backends the stand-in sources declare in pyproject.toml [build-system].
PINS = ("setuptools==80.9.0", "wheel==0.45.1")
# The run-time requirements of the stand-in FlashInfer that the real wheel has too and the node needs for real: ninja
# (flashinfer-python 0.7.2 Requires-Dist: ninja; its JIT runs `ninja` from the release venv's bin/).
RUNTIME_PINS = ("ninja==1.13.0",)


# The releases' installer (sglang_build_installer uv): the role installs uv==sglang_build_uv_version with pip.
INSTALLER_PINS = ("uv==%s" % _role_default("deployment", "sglang_build_uv_version"),)
# model_stage source hf: the staging venv's pinned huggingface_hub + hf_xet and their dependencies (Linux x86_64,
# CPython 3.11 as on the node), so the role can install them with --no-index --find-links in the sandbox.
HF_PINS = (
    "huggingface_hub==2.4.0", "hf_xet==1.8.0", "anyio==4.16.0", "click==8.5.1", "filelock==4.3.1",
    "fsspec==2026.9.0", "h11==0.16.0", "httpcore2==2.16.2", "httpx2==2.16.2", "idna==3.20", "packaging==26.4",
    "pyyaml==6.0.4", "tqdm==4.70.1", "truststore==0.10.5", "typing_extensions==4.16.0",
)


# The node: Debian 12's CPython 3.11 on x86_64, glibc 2.36 (the controller may differ, so pip is told). pip takes a
# --platform as given, without the older manylinux tags the node's pip would also accept, so each is listed: glibc
# 2.5 to 2.36 and the legacy aliases (sglang 0.5.23's wheel is manylinux_2_34, llguidance's manylinux_2_24).
NODE_TARGET = ("--python-version", "3.11", "--implementation", "cp", "--abi", "cp311", "--abi", "abi3", "--abi", "none",
               *(arg for tag in ["manylinux1_x86_64", "manylinux2010_x86_64", "manylinux2014_x86_64"]
                 + ["manylinux_2_%d_x86_64" % minor for minor in range(5, 37)] + ["linux_x86_64", "any"]
                 for arg in ("--platform", tag)))


def _norm(name: str) -> str:
    """PEP 503 name normalisation, so 'typing_extensions' and 'typing-extensions' match a wheel's file name."""
    return name.lower().replace("_", "-").replace(".", "-")


def read_lock(lock: Path) -> list[str]:
    """The ``name==version`` lines of a requirements lock, comments and blank lines dropped."""
    return [line.split("#")[0].strip() for line in lock.read_text().splitlines() if line.split("#")[0].strip()]


def download_pinned(out: Path, pins) -> list[str]:
    """Download exact ``pins`` (no dependency resolution: the pins are the closure) as binary wheels for the node
    into ``out`` unless every pin is there already; return the wheel file names in ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    wanted = {_norm(pin.split("==")[0]): pin.split("==")[1] for pin in pins}
    present = {_norm(p.name.split("-")[0]): p.name.split("-")[1] for p in out.glob("*.whl")}
    if any(present.get(name) != version for name, version in wanted.items()):
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:", *NODE_TARGET,
             "--dest", str(out), *pins],
            check=True,
        )
    return sorted(p.name for p in out.glob("*.whl"))


def build_wheelhouse(out: Path) -> list[str]:
    """The build backends, the stand-in FlashInfer's real run-time requirements, the hf staging venv's closure
    (PINS + RUNTIME_PINS + HF_PINS) and the releases' installer (INSTALLER_PINS) in ``out``."""
    return download_pinned(out, PINS + RUNTIME_PINS + INSTALLER_PINS + HF_PINS)


def build_router_wheelhouse(out: Path, lock: Path) -> list[str]:
    """The router lock (``roles/sglang_router/files/requirements-<v>.txt``: sglang-router and its exact-pinned
    closure) in ``out``. The router host installs from it with ``--no-index --find-links``, resolving the same
    lock the role uses on a real host."""
    return download_pinned(out, read_lock(lock))


if __name__ == "__main__":
    print("\n".join(build_wheelhouse(Path(sys.argv[1] if len(sys.argv) > 1 else ".sandbox/artifacts/wheelhouse"))))
