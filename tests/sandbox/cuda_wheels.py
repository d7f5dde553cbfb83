#!/usr/bin/env python3
"""NVIDIA's real CUDA compilers, from the pip wheels NVIDIA publishes, laid out like the toolkit.

CUDA 13.0 (update 2) -- what the sandbox's ``cuda-toolkit-13-0`` .deb carries (``cuda_repo.py``):

==========================  ========  ======================  ==================================================
wheel                       version   deb package             what it holds
==========================  ========  ======================  ==================================================
nvidia-cuda-nvcc            13.0.88   cuda-nvcc-13-0          bin/nvcc, nvcc.profile, ptxas, nvlink, fatbinary,
                                                              cudafe++, bin2c, bin/crt/*.stub
nvidia-cuda-crt             13.0.88   cuda-crt-13-0           include/crt/ (the headers nvcc force-includes)
nvidia-nvvm                 13.0.88   cuda-nvvm-13-0          nvvm/bin/cicc, nvvm/libdevice, nvvm/lib64/libnvvm
nvidia-cuda-cccl            13.0.85   cuda-cccl-13-0          include/cccl/ (CUB, Thrust, libcu++), lib/cmake
nvidia-cuda-runtime         13.0.96   cuda-cudart-13-0        lib64/libcudart.so.13
                                      cuda-cudart-dev-13-0    include/*.h, libcudart_static.a, libcudadevrt.a
nvidia-cuda-cuobjdump       13.2.51   cuda-cuobjdump-13-0     bin/cuobjdump (13.2.51 is the oldest on PyPI; it
                                                              reads 13.0 objects)
==========================  ========  ======================  ==================================================

Every wheel unpacks to ``nvidia/cu13/``; the toolkit's own layout (``/usr/local/cuda-13.0``) is
``bin/``, ``nvvm/``, ``targets/x86_64-linux/{include,lib}`` with ``include`` and ``lib64`` symlinks into
``targets/`` -- the wheel's own ``bin/nvcc.profile`` (the real toolkit's) adds
``-I$(TOP)/$(_TARGET_DIR_)/include``, ``-isystem .../include/cccl`` and ``-L$(TOP)/$(_TARGET_DIR_)/lib64``, so
only this layout compiles and links. ``toolkit(cache)`` assembles it once per recipe under
``<cache>/cuda-13.0.2-<recipe>/root/usr/local/cuda-13.0`` (usable on the controller too: the contract tests
compile with it) with a file -> deb package map beside it.

CUDA 12.8 has no nvcc on PyPI (the cu12 ``nvidia-cuda-nvcc-cu12`` wheels hold only ptxas and libnvvm), so the
12.8 compiler here is NVIDIA's runtime compiler NVRTC 12.8 (``nvidia-cuda-nvrtc-cu12==12.8.93``: the same
front end and back end, compiling CUDA C++ to a cubin in-process): ``nvrtc_12_8(cache)``.

Downloads go to ``<cache>/wheels`` (``.sandbox/cache`` at the repo root, ``$SANDBOX_CACHE`` to move it) and
are checked against the sha256 pinned here; nothing fetched is ever committed.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import NamedTuple

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parent.parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import wheelhouse  # noqa: E402

TOOLKIT = "13.0.2"
PREFIX = "/usr/local/cuda-13.0"
TARGET = "targets/x86_64-linux"


class Wheel(NamedTuple):
    project: str
    version: str
    sha256: str

    @property
    def pin(self):
        return "%s==%s" % (self.project, self.version)


CUDA13_WHEELS = (
    Wheel("nvidia-cuda-nvcc", "13.0.88", "56fe502eb77625a12f25172caa3cdddb4e4c8ba2c8c17dba44b164761b380f03"),
    Wheel("nvidia-cuda-crt", "13.0.88", "2c8043c7c9e02492716426e9919fc78d2c5b3b2a7a768a88e952676b08aa55a4"),
    Wheel("nvidia-nvvm", "13.0.88", "c5f41ffeb6466944a026dfa5317d7d85355c119bbec279205d22f1869d1054e0"),
    Wheel("nvidia-cuda-cccl", "13.0.85", "e0da7ad981f3a8aff08241b5bfc1af868742a63e2762f53a5171c492ef242649"),
    Wheel("nvidia-cuda-runtime", "13.0.96", "7f82250d7782aa23b6cfe765ecc7db554bd3c2870c43f3d1821f1d18aebf0548"),
    Wheel("nvidia-cuda-cuobjdump", "13.2.51", "95c69d3ddf0c2c1f535ec44c3433a66aeee19f588d9d22f73356e20b25f12b50"),
    # cuRAND's headers: FlashInfer's sampling kernels include curand_kernel.h (the device-side generators, header only);
    # the wheel is the one torch 2.14.1's cuda-toolkit[curand] 13.0.3 takes. Its host library is left out.
    Wheel("nvidia-curand", "10.4.0.35", "1aee33a5da6e1db083fe2b90082def8915f30f3248d5896bcec36a579d941bfc"),
)
NVRTC_12_8 = Wheel("nvidia-cuda-nvrtc-cu12", "12.8.93",
                   "a7756528852ef889772a84c6cd89d41dfa74667e24cca16bb31f8f061e3e9994")

# deb package of each wheel (the runtime wheel is split into the library and its -dev package below)
PACKAGE_OF = {
    "nvidia-cuda-nvcc": "cuda-nvcc-13-0", "nvidia-cuda-crt": "cuda-crt-13-0", "nvidia-nvvm": "cuda-nvvm-13-0",
    "nvidia-cuda-cccl": "cuda-cccl-13-0", "nvidia-cuda-runtime": "cuda-cudart-dev-13-0",
    "nvidia-cuda-cuobjdump": "cuda-cuobjdump-13-0", "nvidia-curand": "libcurand-dev-13-0",
}
# The driver API's link stub (the real toolkit's cuda-driver-dev-13-0: targets/x86_64-linux/lib/stubs/libcuda.so, soname
# libcuda.so.1), which ``-lcuda`` links against where no driver is installed; FlashInfer's JIT links every module with
# ``-L$CUDA_HOME/lib64/stubs -lcuda``. No wheel carries it: built here with the host's gcc as an empty library with the
# stub's soname (a shared object may leave the driver's symbols undefined; the driver resolves them at load time).
STUB_PACKAGE = "cuda-driver-dev-13-0"
STUB_PATH = TARGET + "/lib/stubs/libcuda.so"
CUDART_VERSION = next(w.version for w in CUDA13_WHEELS if w.project == "nvidia-cuda-runtime")
# symlinks of the real toolkit (package, path in the prefix, target)
LINKS = (
    ("cuda-cudart-13-0", "lib64", TARGET + "/lib"),
    ("cuda-cudart-13-0", TARGET + "/lib/libcudart.so.13", "libcudart.so." + CUDART_VERSION),
    ("cuda-cudart-dev-13-0", "include", TARGET + "/include"),
    ("cuda-cudart-dev-13-0", TARGET + "/lib/libcudart.so", "libcudart.so.13"),
    ("cuda-nvvm-13-0", "nvvm/lib64/libnvvm.so", "libnvvm.so.4"),
)


def cache_dir(cache=None) -> Path:
    return Path(cache or os.environ.get("SANDBOX_CACHE") or REPO_ROOT / ".sandbox" / "cache").resolve()


@contextlib.contextmanager
def _locked(path: Path):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        yield


def build_once(root: Path, key: str, build, what: str) -> tuple[Path, dict, bool]:
    """(``root/key``, its build.json, built now?) of a per-machine cache entry: ``build(out, work, log)`` fills ``out``
    (build.json included) and returns its info, once per key per machine; concurrent callers wait for the first. The
    entry is renamed into place only when complete; a failure keeps its log as ``root/last-failure.log``."""
    final = root / key
    with _locked(root / ".lock"):
        if (final / "build.json").is_file():
            return final, json.loads((final / "build.json").read_text()), False
        work = Path(tempfile.mkdtemp(prefix=".partial-", dir=root))
        try:
            with open(work / "build.log", "w") as log:
                info = build(work / "out", work, log)
            os.rename(work / "out", final)
        except Exception:
            kept = root / "last-failure.log"
            shutil.copy2(work / "build.log", kept)
            sys.stderr.write("%s: the build failed; its log: %s\n" % (what, kept))
            raise
        finally:
            shutil.rmtree(work, ignore_errors=True)
        return final, info, True


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def fetch(wheels, cache=None) -> dict:
    """Download the pinned wheels (once) into <cache>/wheels; return {project: path}. A file whose sha256 is
    not the pinned one is an error naming both."""
    out = cache_dir(cache) / "wheels"
    with _locked(out / ".lock"):
        wheelhouse.download_pinned(out, [w.pin for w in wheels])
    found = {}
    for w in wheels:
        prefix = w.project.replace("-", "_") + "-" + w.version + "-"
        matches = sorted(p for p in out.glob("*.whl") if p.name.startswith(prefix))
        if not matches:
            raise RuntimeError("pip download %s left no %s*.whl in %s" % (w.pin, prefix, out))
        got = _sha256(matches[0])
        if got != w.sha256:
            raise RuntimeError("%s has sha256 %s, pinned %s: a different file than the one this recipe was "
                               "written for" % (matches[0], got, w.sha256))
        found[w.project] = matches[0]
    return found


def toolkit_path(project: str, member: str):
    """Where a wheel member goes in the toolkit prefix, and in which deb: (package, relpath) or None (skip)."""
    if member.endswith("/") or ".dist-info/" in member or not member.startswith("nvidia/cu13/"):
        return None
    rel = member[len("nvidia/cu13/"):]
    if rel.startswith(".metadata/") or rel.endswith("__init__.py"):
        return None
    package = PACKAGE_OF[project]
    if rel.startswith(("bin/", "nvvm/")):
        return package, rel
    if rel == "include/nvvm.h":
        return package, "nvvm/include/nvvm.h"
    if rel == "lib/libnvvm.so.4":
        return package, "nvvm/lib64/libnvvm.so.4"
    if project == "nvidia-curand" and not rel.startswith("include/"):
        return None
    if rel == "lib/libcudart.so.13":
        return "cuda-cudart-13-0", TARGET + "/lib/libcudart.so." + CUDART_VERSION
    if rel.startswith(("include/", "lib/")):
        return package, TARGET + "/" + rel
    raise RuntimeError("%s: no place in the toolkit layout for %s" % (project, member))


def recipe_hash() -> str:
    h = hashlib.sha256(Path(__file__).read_bytes())
    h.update(json.dumps([list(w) for w in CUDA13_WHEELS]).encode())
    return h.hexdigest()[:16]


def toolkit(cache=None) -> dict:
    """Assemble (once per recipe) the CUDA 13.0 toolkit; return {"root": dir whose usr/local/cuda-13.0 is the
    toolkit, "home": that prefix, "packages": {deb: [relpaths]}, "links": LINKS, "wheels": {project: version}}."""
    base = cache_dir(cache) / ("cuda-%s-%s" % (TOOLKIT, recipe_hash()))
    manifest = base / "manifest.json"
    with _locked(cache_dir(cache) / ".cuda-toolkit.lock"):
        if not manifest.is_file():
            wheels = fetch(CUDA13_WHEELS, cache)
            if base.exists():
                shutil.rmtree(base)
            home = base / "root" / PREFIX.lstrip("/")
            packages: dict = {}
            for w in CUDA13_WHEELS:
                with zipfile.ZipFile(wheels[w.project]) as zf:
                    for info in zf.infolist():
                        place = toolkit_path(w.project, info.filename)
                        if place is None:
                            continue
                        package, rel = place
                        dest = home / rel
                        dest.parent.mkdir(parents=True, exist_ok=True)
                        with zf.open(info) as src, open(dest, "wb") as dst:
                            shutil.copyfileobj(src, dst, 1 << 20)
                        # the wheels' own mode bits (cicc is rwxr--r--), normalised as dpkg would ship them
                        mode = (info.external_attr >> 16) & 0o777
                        os.chmod(dest, 0o755 if mode & 0o111 else 0o644)
                        packages.setdefault(package, []).append(rel)
            stub = home / STUB_PATH
            stub.parent.mkdir(parents=True, exist_ok=True)
            empty = base / "libcuda-stub.c"
            empty.write_text("/* the CUDA driver's link stub (cuda_wheels.STUB_PATH) */\n")
            subprocess.run(["gcc", "-shared", "-fPIC", "-nostdlib", "-Wl,-soname,libcuda.so.1", "-o", str(stub),
                            str(empty)], check=True)
            empty.unlink()
            os.chmod(stub, 0o644)
            packages.setdefault(STUB_PACKAGE, []).append(STUB_PATH)
            for package, rel, target in LINKS:
                link = home / rel
                link.parent.mkdir(parents=True, exist_ok=True)
                os.symlink(target, link)
                packages.setdefault(package, []).append(rel)
            tmp = manifest.with_suffix(".tmp")
            tmp.write_text(json.dumps({"packages": {k: sorted(v) for k, v in packages.items()},
                                       "wheels": {w.project: w.version for w in CUDA13_WHEELS}}, indent=1))
            tmp.replace(manifest)
    data = json.loads(manifest.read_text())
    root = base / "root"
    return {"root": root, "home": root / PREFIX.lstrip("/"), "packages": data["packages"], "links": LINKS,
            "wheels": data["wheels"]}


def nvrtc_12_8(cache=None) -> Path:
    """NVRTC 12.8 (the CUDA 12.8 compiler available from PyPI); return the directory holding libnvrtc.so.12."""
    lib = cache_dir(cache) / ("nvrtc-%s" % NVRTC_12_8.version) / "lib"
    with _locked(cache_dir(cache) / ".nvrtc.lock"):
        if not (lib / "libnvrtc.so.12").is_file():
            wheel = fetch([NVRTC_12_8], cache)[NVRTC_12_8.project]
            tmp = lib.with_name("lib.tmp")
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir(parents=True)
            with zipfile.ZipFile(wheel) as zf:
                for name in ("libnvrtc.so.12", "libnvrtc-builtins.so.12.8"):
                    with zf.open("nvidia/cuda_nvrtc/lib/" + name) as src, open(tmp / name, "wb") as dst:
                        shutil.copyfileobj(src, dst, 1 << 20)
            shutil.rmtree(lib, ignore_errors=True)
            tmp.replace(lib)
    return lib


if __name__ == "__main__":
    tk = toolkit()
    print(tk["home"])
    print(nvrtc_12_8())
