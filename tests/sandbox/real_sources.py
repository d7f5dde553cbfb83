#!/usr/bin/env python3
"""The real projects' own code that the build stand-ins run, taken from the pinned releases at build time.

The FlashInfer and SGLang stand-ins (fake_sources.py, sglang_sim/) compile real ``.cu`` files with the real
compiler; the nvcc flags come from the code the real builds use to turn the product's variables into flags,
not from a copy of its logic:

* FlashInfer 0.7.2 (``flashinfer-python==0.7.2`` wheel, sha256 pinned below):
  ``flashinfer/compilation_context.py`` verbatim -- ``CompilationContext`` parses ``FLASHINFER_CUDA_ARCH_LIST``
  (space separated; ``12.0f`` kept as given, ``9.0`` -> ``9.0a``, unsuffixed ``12.0`` -> ``f``/``a`` by the nvcc
  release) and ``get_nvcc_flags_list()`` makes the ``-gencode`` flags; plus the functions it and the build
  call from ``flashinfer/jit/cpp_ext.py`` (``get_cuda_path``, ``get_cuda_version``,
  ``is_cuda_version_at_least``, ``get_nvcc_parallelism_flags`` for ``FLASHINFER_NVCC_THREADS``, and
  ``_get_num_workers`` for ``MAX_JOBS``), cut out of that file with ``ast``, their text unchanged.
* torch 2.14.1 (the release venv's torch, ``sglang_build_torch_version``): ``_find_cuda_home``,
  ``_get_cuda_arch_flags`` (``TORCH_CUDA_ARCH_LIST`` -> ``-gencode`` flags) and ``_get_num_workers`` (``MAX_JOBS``) from
  ``torch/utils/cpp_extension.py``, the same way; the stand-in torch wheel (fake_torch.py) serves them as its
  ``torch.utils.cpp_extension``. Only that one member is read from the 0.5 GB wheel, which is deleted after.

A function that starts using a module-level name the stand-in module does not provide makes extraction fail
(naming it), so a changed upstream file cannot silently run differently here. Results are cached under
``<cache>/real-sources`` (see cuda_wheels.cache_dir); nothing here is committed.
"""

from __future__ import annotations

import ast
import builtins
import hashlib
import json
import sys
import tempfile
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import cuda_wheels  # noqa: E402
import wheelhouse  # noqa: E402

FLASHINFER = cuda_wheels.Wheel("flashinfer-python", "0.7.2",
                               "770550a0aa92b2f10e6c9a1f048dd43713f0f3bb6a12710186fcf8e4e9c99bd8")
TORCH_VERSION = "2.14.1"

FLASHINFER_CPP_EXT_FUNCTIONS = ("get_cuda_path", "get_cuda_version", "is_cuda_version_at_least",
                                "get_nvcc_parallelism_flags", "_get_num_workers")
FLASHINFER_CPP_EXT_HEADER = '''\
"""flashinfer.jit.cpp_ext (sandbox stand-in).

The functions below are copied verbatim, when the sandbox artifacts are built, from flashinfer-python
{version}'s flashinfer/jit/cpp_ext.py ({wheel}, sha256 {sha256}): {names}.
The rest of the real module (ninja files, tvm_ffi bindings) is left out: the stand-in build needs only what
flashinfer/compilation_context.py (verbatim as well) and the stand-in's build_backend.py call.
"""
import functools
import logging
import os
import re
import subprocess
from typing import List, Optional

import torch
from packaging.version import Version

logger = logging.getLogger(__name__)
'''
FLASHINFER_JIT_INIT = '''\
"""flashinfer.jit (sandbox stand-in): the real package imports every JIT module; the stand-in has cpp_ext and env
(FlashInfer's own code, see their docstrings), core (JitSpec) and sampling."""
'''
# flashinfer/jit/env.py: where the JIT cache lies. Its top-level assignments and function below are copied verbatim; the
# AOT providers (flashinfer-jit-cache, flashinfer-cubin) are left out: none is installed in the sandbox, so a module's AOT
# path is the package's own data/aot fallback (get_aot_path below, as the real one answers without providers).
FLASHINFER_ENV_BEFORE = ("FLASHINFER_BASE_DIR", "FLASHINFER_CACHE_DIR", "_package_root")
FLASHINFER_ENV_FUNCTIONS = ("_get_workspace_dir_name",)
FLASHINFER_ENV_AFTER = ("FLASHINFER_AOT_DIR", "FLASHINFER_WORKSPACE_DIR", "FLASHINFER_JIT_DIR", "FLASHINFER_CSRC_DIR")
FLASHINFER_ENV_HEADER = '''\
"""flashinfer.jit.env (sandbox stand-in).

Copied verbatim, when the sandbox artifacts are built, from flashinfer-python {version}'s flashinfer/jit/env.py
({wheel}, sha256 {sha256}): the assignments {names} and the function _get_workspace_dir_name. So the JIT cache is
where the real FlashInfer puts it: $FLASHINFER_WORKSPACE_BASE (else $HOME)/.cache/flashinfer/<version>/<archs>/cached_ops.
No AOT provider package is installed in the sandbox; get_aot_path answers as the real one does without them.
"""
import os
import pathlib

from ..compilation_context import CompilationContext
from .._version import __version__ as flashinfer_version
'''
FLASHINFER_ENV_FOOTER = '''

def get_aot_path(module_name: str) -> pathlib.Path:
    """The real get_aot_path without AOT providers: the package's own data/aot fallback."""
    return FLASHINFER_AOT_DIR / module_name / f"{module_name}.so"
'''
TORCH_FUNCTIONS = ("_find_cuda_home", "_get_cuda_arch_flags", "_get_num_workers")
TORCH_HEADER = '''\
"""torch.utils.cpp_extension (sandbox stand-in).

The functions below are copied verbatim, when the sandbox artifacts are built, from torch {version}'s
torch/utils/cpp_extension.py ({wheel}, sha256 {sha256}): {names}.
They find CUDA_HOME, turn TORCH_CUDA_ARCH_LIST into nvcc -gencode flags and MAX_JOBS into a worker count, as
when a real extension is built against the release's torch.
"""
import collections
import glob
import logging
import os
import re
import shutil
import sys

import torch

IS_WINDOWS = sys.platform == 'win32'
logger = logging.getLogger(__name__)
'''


def _header_names(header: str) -> set:
    names = set()
    for node in ast.parse(header).body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


def _free_names(fn: ast.AST) -> set:
    """Names a function reads that it does not bind itself (parameters, assignments, imports, comprehensions)."""
    bound, loaded = set(), set()
    for node in ast.walk(fn):
        if isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.Name):
            (loaded if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
    return loaded - bound - set(dir(builtins))


def extract(source: str, names, header: str, origin: str) -> str:
    """``header`` + the top-level functions ``names`` of ``source``, their text (decorators included) unchanged."""
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    found = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    provided = _header_names(header) | set(names)
    parts = [header]
    for name in names:
        if name not in found:
            raise RuntimeError("%s has no top-level function %s any more" % (origin, name))
        node = found[name]
        missing = _free_names(node) - provided
        if missing:
            raise RuntimeError("%s: %s now uses %s, which the sandbox stand-in module does not provide"
                               % (origin, name, ", ".join(sorted(missing))))
        start = min([d.lineno for d in node.decorator_list] + [node.lineno])
        parts.append("\n\n" + "".join(lines[start - 1:node.end_lineno]))
    text = "".join(parts)
    compile(text, origin + " (extract)", "exec")
    return text


def assignments(source: str, names, origin: str) -> str:
    """The top-level assignments to ``names`` in ``source``, their text unchanged, in ``names``' order."""
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    found = {}
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        for target in targets:
            if isinstance(target, ast.Name):
                found[target.id] = "".join(lines[node.lineno - 1:node.end_lineno])
    missing = [name for name in names if name not in found]
    if missing:
        raise RuntimeError("%s no longer assigns %s at top level" % (origin, ", ".join(missing)))
    return "".join(found[name] for name in names)


def flashinfer_env(source: str, wheel: str) -> str:
    """The stand-in flashinfer/jit/env.py from the real one's text."""
    header = FLASHINFER_ENV_HEADER.format(version=FLASHINFER.version, wheel=wheel, sha256=FLASHINFER.sha256,
                                          names=", ".join(FLASHINFER_ENV_BEFORE + FLASHINFER_ENV_AFTER))
    header += "\n" + assignments(source, FLASHINFER_ENV_BEFORE, "flashinfer/jit/env.py")
    text = extract(source, FLASHINFER_ENV_FUNCTIONS, header, "flashinfer/jit/env.py")
    text += "\n\n" + assignments(source, FLASHINFER_ENV_AFTER, "flashinfer/jit/env.py") + FLASHINFER_ENV_FOOTER
    compile(text, "flashinfer/jit/env.py (extract)", "exec")
    return text


def _recipe() -> str:
    return hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:16]


def flashinfer_files(cache=None) -> dict:
    """{relative path: text} of FlashInfer's real code for the stand-in repository (cached)."""
    out = cuda_wheels.cache_dir(cache) / "real-sources" / ("flashinfer-%s-%s.json" % (FLASHINFER.version, _recipe()))
    if not out.is_file():
        wheel = cuda_wheels.fetch([FLASHINFER], cache)[FLASHINFER.project]
        with zipfile.ZipFile(wheel) as zf:
            context = zf.read("flashinfer/compilation_context.py").decode()
            cpp_ext = zf.read("flashinfer/jit/cpp_ext.py").decode()
            env = zf.read("flashinfer/jit/env.py").decode()
        header = FLASHINFER_CPP_EXT_HEADER.format(version=FLASHINFER.version, wheel=wheel.name,
                                                  sha256=FLASHINFER.sha256,
                                                  names=", ".join(FLASHINFER_CPP_EXT_FUNCTIONS))
        files = {
            "flashinfer/compilation_context.py": context,
            "flashinfer/jit/__init__.py": FLASHINFER_JIT_INIT,
            "flashinfer/jit/cpp_ext.py": extract(cpp_ext, FLASHINFER_CPP_EXT_FUNCTIONS, header,
                                                 "flashinfer/jit/cpp_ext.py"),
            "flashinfer/jit/env.py": flashinfer_env(env, wheel.name),
        }
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_suffix(".tmp")
        tmp.write_text(json.dumps(files, indent=1, sort_keys=True))
        tmp.replace(out)
    return json.loads(out.read_text())


def torch_cpp_extension(cache=None, version=TORCH_VERSION) -> str:
    """Text of the stand-in torch's ``torch/utils/cpp_extension.py`` (torch ``version``'s functions, cached)."""
    out = cuda_wheels.cache_dir(cache) / "real-sources" / ("torch-%s-%s-cpp_extension.py" % (version, _recipe()))
    if not out.is_file():
        scratch = cuda_wheels.cache_dir(cache)
        scratch.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="torch-wheel-", dir=scratch) as tmp:
            wheelhouse.download_pinned(Path(tmp), ["torch==%s" % version])
            wheel = next(Path(tmp).glob("torch-*.whl"))
            sha = cuda_wheels._sha256(wheel)
            with zipfile.ZipFile(wheel) as zf:
                source = zf.read("torch/utils/cpp_extension.py").decode()
            header = TORCH_HEADER.format(version=version, wheel=wheel.name, sha256=sha, names=", ".join(TORCH_FUNCTIONS))
            text = extract(source, TORCH_FUNCTIONS, header, "torch/utils/cpp_extension.py")
        out.parent.mkdir(parents=True, exist_ok=True)
        out.with_suffix(".tmp").write_text(text)
        out.with_suffix(".tmp").replace(out)
    return out.read_text()


if __name__ == "__main__":
    for rel, text in flashinfer_files().items():
        print("== %s (%d lines)" % (rel, text.count("\n")))
    print("== torch/utils/cpp_extension.py (%d lines)" % torch_cpp_extension().count("\n"))
