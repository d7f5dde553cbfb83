#!/usr/bin/env python3
"""FlashInfer's AOT kernels for the sandbox: a ``flashinfer-jit-cache`` wheel made from one real compile per machine.

A real fleet gets FlashInfer's AOT kernels from ``flashinfer-jit-cache==0.7.2+cu130`` on FlashInfer's own index, which
this machine cannot reach. The sandbox makes the same package from the real thing instead: the real flashinfer-python
(``flashinfer_build_version``) and torch from the machine's closure wheels (``closure.py``), with the real nvcc of the
sandbox toolkit (``cuda_wheels.py``), compile the modules the product needs (``flashinfer_build_jit_modules``) for the
arch list the product derives (its ``flashinfer_arch_list`` filter: ``12.0f`` for CUDA 13.0) with the product's own warm
(``release_probe.py --warm-flashinfer``, what a release's build runs). The libraries are packed as
``flashinfer_jit_cache-<version>+cu130-cp39-abi3-manylinux_2_28_x86_64.whl`` (the real package's name and tags), whose
``flashinfer_jit_cache`` answers what the real flashinfer 0.7.2 asks of it (``flashinfer/jit/env.py``,
``_get_aot_providers``: ``__version__`` and ``get_jit_cache_providers()``, each provider with ``provider_id``,
``distribution``, ``version``, ``jit_cache_dir``, ``cuda_architectures`` and ``modules``; ``get_aot_artifacts`` then
loads ``<jit_cache_dir>/<module>/<module>.so``). Before the wheel is kept, the real FlashInfer must find every module in
it (``release_probe.py --flashinfer-only`` with an empty JIT cache: each module ``aot``).

The compile is minutes on 2 cores, so the wheel is cached per machine, keyed by FlashInfer's version, nvcc's, the arch
list and the modules (and this file): ``$SANDBOX_MACHINE_CACHE/flashinfer-jit-cache/<key>/``; a warm machine builds
nothing. ``build()`` hardlinks it into ``<artifacts>/wheelhouse/flashinfer-jit-cache/``, the index the sandbox's
``flashinfer_build_jit_cache_pip_args`` name, as a fleet names FlashInfer's.

CLI: ``python tests/sandbox/flashinfer_aot.py [ARTIFACTS_DIR]``.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import sys
import textwrap
import time
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parent.parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))
# The product's filters by their collection path (.collections/ansible_collections/blackwell/sglang is the repository).
if str(REPO_ROOT / ".collections") not in sys.path:
    sys.path.append(str(REPO_ROOT / ".collections"))

import closure  # noqa: E402
import cuda_wheels  # noqa: E402
import wheelhouse  # noqa: E402

NODE_DIR = "wheelhouse/flashinfer-jit-cache"
PROBE = REPO_ROOT / "roles" / "sglang_runtime" / "files" / "release_probe.py"
# The real package's tags (FlashInfer's flashinfer-jit-cache/build_backend.py: cp39, abi3, manylinux_2_28).
WHEEL_TAG = "cp39-abi3-manylinux_2_28_x86_64"
ZIP_DATE = (2025, 10, 1, 0, 0, 0)
# Raised when wheel_entries() lays the package out differently (part of the cache key, with SHIM's text).
PACKAGE_FORMAT = 1


def _product():
    """What the product installs and compiles, each read from its one place: FlashInfer's version and modules
    (flashinfer_build's defaults), the CUDA release and compute capability (deployment's), and the arch list and the
    package's requirement from the product's own filters."""
    from ansible_collections.blackwell.sglang.plugins.filter import build_arch

    version = wheelhouse._role_default("flashinfer_build", "flashinfer_build_version")
    cuda = wheelhouse._role_default("deployment", "deployment_cuda_release")
    capability = wheelhouse._role_default("deployment", "deployment_compute_capability")
    requirement = build_arch.flashinfer_jit_cache_requirement(version, cuda)
    return {"flashinfer": version, "cuda": cuda, "arch_list": build_arch.flashinfer_arch_list([capability], cuda),
            "modules": list(wheelhouse._role_default("flashinfer_build", "flashinfer_build_jit_modules")),
            "package_version": requirement.partition("==")[2]}


def cuda_architectures(arch_list: str) -> list[str]:
    """FLASHINFER_CUDA_ARCH_LIST ("12.0f 9.0a") as the provider names them (``sm120f``, ``sm90a``), the spelling
    flashinfer 0.7.2's ``_target_cuda_architectures`` compares with."""
    return ["sm" + arch.replace(".", "") for arch in arch_list.split()]


def recipe() -> dict:
    product = _product()
    nvcc = next(w.version for w in cuda_wheels.CUDA13_WHEELS if w.project == "nvidia-cuda-nvcc")
    # the package's own code and layout (a change to either is a new wheel; a comment elsewhere in this file is not)
    package = hashlib.sha256(("%s %s %d" % (SHIM, WHEEL_TAG, PACKAGE_FORMAT)).encode()).hexdigest()[:16]
    return dict(product, nvcc=nvcc, package=package)


def recipe_key(spec=None) -> str:
    return hashlib.sha256(json.dumps(spec or recipe(), sort_keys=True).encode()).hexdigest()[:16]


def wheel_name(package_version: str) -> str:
    return "flashinfer_jit_cache-%s-%s.whl" % (package_version, WHEEL_TAG)


SHIM = '''\
"""flashinfer_jit_cache as the sandbox builds it (tests/sandbox/flashinfer_aot.py): FlashInfer's AOT libraries for
%(modules)s, compiled by the real flashinfer-python %(flashinfer)s with nvcc %(nvcc)s for %(arch_list)s, answering what
flashinfer/jit/env.py of flashinfer-python %(flashinfer)s asks of this package (__version__, get_jit_cache_providers)."""

from dataclasses import dataclass
from pathlib import Path
from typing import FrozenSet

from ._build_meta import __version__

jit_cache_dir = Path(__file__).resolve().parent / "jit_cache"


@dataclass(frozen=True)
class JitCacheProvider:
    provider_id: str
    distribution: str
    version: str
    jit_cache_dir: Path
    cuda_architectures: FrozenSet[str]
    modules: FrozenSet[str]


def get_jit_cache_providers():
    """This package's own libraries, one provider."""
    return (JitCacheProvider("flashinfer-jit-cache", "flashinfer-jit-cache", __version__, jit_cache_dir,
                             frozenset(%(architectures)r), frozenset(%(names)r)),)


def get_jit_cache_dir():
    return str(jit_cache_dir)
'''


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d" % (name, digest, len(data))


def wheel_entries(spec: dict, libraries: dict) -> list:
    """The wheel's members as [(arcname, bytes)], RECORD last. ``libraries``: {module name: the compiled .so's bytes}."""
    version = spec["package_version"]
    names = sorted(libraries)
    shim = SHIM % dict(spec, modules=", ".join(names), names=names,
                       architectures=cuda_architectures(spec["arch_list"]))
    entries = [("flashinfer_jit_cache/__init__.py", shim.encode()),
               ("flashinfer_jit_cache/_build_meta.py",
                ('"""Build metadata for flashinfer-jit-cache package."""\n__version__ = "%s"\n' % version).encode())]
    entries += [("flashinfer_jit_cache/jit_cache/%s/%s.so" % (name, name), libraries[name]) for name in names]
    distinfo = "flashinfer_jit_cache-%s.dist-info" % version
    metadata = textwrap.dedent("""\
        Metadata-Version: 2.1
        Name: flashinfer-jit-cache
        Version: %s
        Summary: Pre-compiled JIT Cache for FlashInfer (sandbox: %s for %s, nvcc %s)
        Requires-Python: >=3.9
        """) % (version, ", ".join(names), spec["arch_list"], spec["nvcc"])
    entries += [(distinfo + "/METADATA", metadata.encode()),
                (distinfo + "/WHEEL", ("Wheel-Version: 1.0\nGenerator: flashinfer_aot\nRoot-Is-Purelib: false\n"
                                       "Tag: %s\n" % WHEEL_TAG).encode()),
                (distinfo + "/top_level.txt", b"flashinfer_jit_cache\n")]
    record = [_record_line(n, d) for n, d in entries] + [distinfo + "/RECORD,,"]
    entries.append((distinfo + "/RECORD", ("\n".join(record) + "\n").encode()))
    return entries


def write_wheel(path: Path, entries) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as zf:
        for arc, data in entries:
            info = zipfile.ZipInfo(arc, date_time=ZIP_DATE)
            info.external_attr = (0o755 if arc.endswith(".so") else 0o644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, data)
    tmp.replace(path)


def _probe(venv: Path, env: dict, flag: str, modules, log) -> dict:
    out = closure.run([venv / "bin" / "python", PROBE, flag, *("--flashinfer-module=%s" % m for m in modules)], log, env)
    return json.loads(out.strip().splitlines()[-1])


def compile_wheel(dest: Path, spec: dict, work: Path, log) -> dict:
    """The real compile: a venv with the real flashinfer-python and torch (uv, hardlinked from the closure's wheels),
    the product's warm with the sandbox toolkit's nvcc, the wheel, then the real FlashInfer's verdict on it."""
    toolkit = cuda_wheels.toolkit()
    closure.venv(work / "venv", sys.executable, "flashinfer-python==%s" % spec["flashinfer"], work, log,
                 work / "uv-cache")
    env = dict(os.environ, CUDA_HOME=str(toolkit["home"]), FLASHINFER_CUDA_ARCH_LIST=spec["arch_list"],
               FLASHINFER_WORKSPACE_BASE=str(work / "jit"), MAX_JOBS=str(os.cpu_count() or 1),
               PATH=os.pathsep.join([str(work / "venv" / "bin"), str(toolkit["home"] / "bin"), os.environ["PATH"]]))
    env.pop("PYTHONPATH", None)
    started = time.monotonic()
    warm = _probe(work / "venv", env, "--warm-flashinfer", spec["modules"], log)
    seconds = round(time.monotonic() - started, 1)
    if not warm["ok"]:
        raise RuntimeError("the real FlashInfer did not compile %s: %s" % (spec["modules"], warm["problems"]))
    libraries = {m["module"]: Path(m["path"]).read_bytes() for m in warm["modules"]}
    name = wheel_name(spec["package_version"])
    write_wheel(work / name, wheel_entries(spec, libraries))
    # The real FlashInfer must load every module from the package, and compile nothing (an empty JIT cache).
    closure.run([work / "uv" / "bin" / "uv", "pip", "install", "--no-config", "--python",
                 work / "venv" / "bin" / "python", "--cache-dir", work / "uv-cache", "--no-index", "--no-deps",
                 work / name], log)
    check = _probe(work / "venv", dict(env, FLASHINFER_WORKSPACE_BASE=str(work / "empty")), "--flashinfer-only",
                   spec["modules"], log)
    found = check.get("flashinfer_modules", [])
    missing = [m.get("module") for m in found if not m.get("aot")]
    if not check["ok"] or missing or len(found) != len(spec["modules"]):
        raise RuntimeError("flashinfer %s does not take its modules from %s: %s %s"
                           % (spec["flashinfer"], name, missing, check.get("problems")))
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copy2(work / name, dest / name)
    info = {"wheel": name, "recipe": spec, "compile_seconds": seconds,
            "modules": {m["module"]: {"generator": m["generator"], "bytes": len(libraries[m["module"]])}
                        for m in warm["modules"]}}
    (dest / "build.json").write_text(json.dumps(info, indent=1, sort_keys=True) + "\n")
    return info


def ensure(cache=None) -> tuple[Path, dict, bool]:
    """(the cached directory holding the wheel, its build.json, built now?): the compile runs once per recipe per
    machine; concurrent callers wait for the first."""
    spec = recipe()
    return cuda_wheels.build_once(closure.machine_cache(cache) / "flashinfer-jit-cache", recipe_key(spec),
                                  lambda out, work, log: compile_wheel(out, spec, work, log), "flashinfer_aot")


def build(artifacts: Path, cache=None) -> dict:
    """Place the machine's flashinfer-jit-cache wheel under ``artifacts/wheelhouse/flashinfer-jit-cache``."""
    source, info, built = ensure(cache)
    placed = closure.link_into(source, Path(artifacts) / NODE_DIR)
    return dict(info, cache=str(source), built=built, linked=placed["linked"])


if __name__ == "__main__":
    print(json.dumps(build(Path(sys.argv[1] if len(sys.argv) > 1 else REPO_ROOT / ".sandbox" / "artifacts")), indent=1))
