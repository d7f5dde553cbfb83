#!/usr/bin/env python3
"""Stand-in source repositories (bare git repos) for things the product builds from source.

``build_flashinfer_repo(git_dir, tag="v0.7.2")`` -> commit sha of ``tag``

A bare git repo standing in for https://github.com/flashinfer-ai/flashinfer at a release tag:

* history: commit 1 "Release <version>" (annotated tag ``tag``), commit 2 on ``main`` bumps the version to
  ``<version>.post1.dev0`` -- so a product that builds ``main`` instead of the pinned tag is visible.
* a tiny project ``flashinfer-python`` (package ``flashinfer``, ``__version__`` from the tag) with an in-tree
  PEP 517 backend ``build_backend.py`` (the real FlashInfer also ships an in-tree ``build_backend.py``).
  Its build requirements are ``torch`` and ``packaging`` (pip's build environment takes them from the
  sandbox wheelhouse: the stand-in torch and packaging 26.4); the backend itself is stdlib only because
  Debian 12's ensurepip gives setuptools 66 without ``wheel``.
* like the real flashinfer-python 0.7.2 (a ``py3-none-any`` wheel without a ``.so`` or ``.cubin``) it is a JIT
  package: building compiles nothing, whatever ``FLASHINFER_CUDA_ARCH_LIST`` says. The wheel holds the Python package
  and its CUDA source ``flashinfer/data/csrc/sampling.cu`` (tests/sandbox/kernels/flashinfer/).
* ``flashinfer.jit.sampling.gen_sampling_module()`` is the JIT module ``sampling`` (flashinfer/jit/core.py's JitSpec,
  see its docstring): ``build()`` compiles the source with the real nvcc of CUDA_HOME into the JIT cache where the real
  FlashInfer puts it (``$FLASHINFER_WORKSPACE_BASE/.cache/flashinfer/<version>/<archs>/cached_ops/sampling/
  sampling.so``: flashinfer/jit/env.py's own assignments, copied verbatim), ``is_compiled`` says whether it is there.
  The flags are FlashInfer 0.7.2's own: the repo holds its ``flashinfer/compilation_context.py`` verbatim and the
  functions of ``flashinfer/jit/cpp_ext.py`` the build calls (real_sources.py copies them from the pinned wheel when
  the artifacts are built; they are never committed). So ``FLASHINFER_CUDA_ARCH_LIST="12.0f"`` becomes
  ``-gencode=arch=compute_120f,code=sm_120f`` and the cache directory ``120f``, ``9.0`` becomes ``compute_90a``,
  ``FLASHINFER_NVCC_THREADS`` becomes ``--threads``, ``MAX_JOBS`` bounds the parallel compiles, and a comma-separated
  list fails in FlashInfer's own parser. An arch the compiler does not know fails with nvcc's message.

Deterministic: fixed author/committer/tagger and dates, no user/system git config -> same sha every build.
Idempotent: ``<git_dir>/sandbox-recipe`` holds the recipe hash.
"""

import hashlib
import os
import shutil
import subprocess
import tempfile
import textwrap
from pathlib import Path

GIT_DATE_1 = "2026-01-20T12:00:00+00:00"
GIT_DATE_2 = "2026-01-22T09:30:00+00:00"


def _git_env(date):
    return dict(
        os.environ,
        GIT_AUTHOR_NAME="Sandbox Builder", GIT_AUTHOR_EMAIL="sandbox@invalid", GIT_AUTHOR_DATE=date,
        GIT_COMMITTER_NAME="Sandbox Builder", GIT_COMMITTER_EMAIL="sandbox@invalid", GIT_COMMITTER_DATE=date,
        GIT_CONFIG_GLOBAL=os.devnull, GIT_CONFIG_NOSYSTEM="1", LC_ALL="C", TZ="UTC",
    )


def _git(git_dir, work, date, *args):
    cmd = ["git", "--git-dir", str(git_dir)]
    if work is not None:
        cmd += ["--work-tree", str(work)]
    cmd += ["-c", "commit.gpgsign=false", "-c", "tag.gpgsign=false", "-c", "core.autocrlf=false",
            "-c", "core.fileMode=true", *args]
    return subprocess.run(cmd, env=_git_env(date), check=True, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE).stdout.decode().strip()


def _write_tree(root: Path, files):
    for rel, (content, mode) in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(content)
        os.chmod(p, mode)


# ------------------------------------------------------------------------------------------- flashinfer
FLASHINFER_BACKEND = r'''"""In-tree PEP 517 backend of the sandbox FlashInfer stand-in.

Hooks: get_requires_for_build_wheel/_sdist/_editable, prepare_metadata_for_build_wheel/_editable,
build_wheel, build_editable, build_sdist. Like the real flashinfer-python 0.7.2 (a py3-none-any wheel without a
.so or .cubin), building compiles nothing, whatever FLASHINFER_CUDA_ARCH_LIST says: the wheel holds the Python package
and its CUDA sources (flashinfer/data/csrc), which flashinfer.jit compiles with the real nvcc when a module is first
built (flashinfer/jit/core.py).
"""
import base64
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile

NAME = "flashinfer-python"
DIST = "flashinfer_python"
HERE = os.path.dirname(os.path.abspath(__file__))


def _version():
    with open(os.path.join(HERE, "flashinfer", "_version.py")) as fh:
        return re.search(r'__version__ = "([^"]+)"', fh.read()).group(1)


def _metadata():
    return ("Metadata-Version: 2.1\nName: %s\nVersion: %s\nSummary: FlashInfer: Kernel Library for LLM "
            "Serving (sandbox stand-in)\nRequires-Python: >=3.9\n"
            # The real wheel's run-time requirement that matters on the node (flashinfer_python-0.7.2 METADATA:
            # Requires-Dist: ninja): FlashInfer's JIT runs a bare `ninja` (flashinfer/jit/cpp_ext.py run_ninja), which
            # the ninja wheel puts in the release venv's bin/. pip takes it from the sandbox wheelhouse.
            "Requires-Dist: ninja\n"
            # ... and what its flashinfer.jit imports here (cpp_ext: packaging.version; Requires-Dist: packaging>=24.2,
            # torch); pip takes them from the sandbox wheelhouse (packaging 26.4, the stand-in torch).
            "Requires-Dist: packaging>=24.2\nRequires-Dist: torch\n" % (NAME, _version()))


def _wheel_file():
    return "Wheel-Version: 1.0\nGenerator: flashinfer-sandbox-backend\nRoot-Is-Purelib: false\nTag: py3-none-any\n"


def _fail(msg):
    sys.stderr.write("\nerror: flashinfer build failed: %s\n\n" % msg)
    raise SystemExit(1)


def _record_line(arcname, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d" % (arcname, digest, len(data))


def _write_wheel(wheel_directory, entries):
    ver = _version()
    distinfo = "%s-%s.dist-info" % (DIST, ver)
    entries = list(entries) + [(distinfo + "/METADATA", _metadata().encode()),
                               (distinfo + "/WHEEL", _wheel_file().encode()),
                               (distinfo + "/top_level.txt", b"flashinfer\n")]
    record = [_record_line(n, d) for n, d in entries] + [distinfo + "/RECORD,,"]
    entries.append((distinfo + "/RECORD", ("\n".join(record) + "\n").encode()))
    name = "%s-%s-py3-none-any.whl" % (DIST, ver)
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w", zipfile.ZIP_DEFLATED) as zf:
        for arc, data in entries:
            zi = zipfile.ZipInfo(arc, date_time=(2026, 1, 1, 0, 0, 0))
            zi.external_attr = 0o644 << 16
            zf.writestr(zi, data)
    return name


def _package_files():
    out = []
    pkg = os.path.join(HERE, "flashinfer")
    for root, _dirs, files in sorted(os.walk(pkg)):
        for f in sorted(files):
            if f.endswith((".py", ".cu")):
                full = os.path.join(root, f)
                with open(full, "rb") as fh:
                    out.append((os.path.relpath(full, HERE).replace(os.sep, "/"), fh.read()))
    return out


def _prepare_metadata(metadata_directory):
    distinfo = "%s-%s.dist-info" % (DIST, _version())
    d = os.path.join(metadata_directory, distinfo)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "METADATA"), "w") as fh:
        fh.write(_metadata())
    with open(os.path.join(d, "WHEEL"), "w") as fh:
        fh.write(_wheel_file())
    return distinfo


def get_requires_for_build_wheel(config_settings=None):
    return []


get_requires_for_build_sdist = get_requires_for_build_wheel
get_requires_for_build_editable = get_requires_for_build_wheel


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    return _prepare_metadata(metadata_directory)


prepare_metadata_for_build_editable = prepare_metadata_for_build_wheel


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    return _write_wheel(wheel_directory, _package_files())


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    return _write_wheel(wheel_directory, [("__editable__.flashinfer_python.pth", (HERE + "\n").encode())])


def build_sdist(sdist_directory, config_settings=None):
    base = "%s-%s" % (DIST, _version())
    name = base + ".tar.gz"
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz") as tf:
        for rel in ["pyproject.toml", "build_backend.py", "README.md"] + [n for n, _ in _package_files()]:
            tf.add(os.path.join(HERE, rel), arcname=base + "/" + rel)
        data = _metadata().encode()
        ti = tarfile.TarInfo(base + "/PKG-INFO")
        ti.size = len(data)
        tf.addfile(ti, io.BytesIO(data))
    return name
'''


HERE = Path(__file__).resolve().parent
KERNELS = HERE / "kernels"


def standin_kernel_files(csrc="csrc"):
    """The stand-in kernels (tests/sandbox/kernels/*.cu) and the shared compile helper, for a stand-in repo."""
    files = {"sandbox_cuda.py": ((HERE / "standin_cuda.py").read_text(), 0o644)}
    for cu in sorted(KERNELS.glob("*.cu")):
        files["%s/%s" % (csrc, cu.name)] = (cu.read_text(), 0o644)
    return files


def flashinfer_files(version, real_files):
    """The stand-in repository's files; ``real_files`` ({path: text}, real_sources.flashinfer_files()) are
    FlashInfer's own code the stand-in runs."""
    files = {rel: (text, 0o644) for rel, text in real_files.items()}
    files["flashinfer/jit/_sandbox_cuda.py"] = ((HERE / "standin_cuda.py").read_text(), 0o644)
    for cu in sorted((KERNELS / "flashinfer").glob("*.cu")):
        files["flashinfer/data/csrc/%s" % cu.name] = (cu.read_text(), 0o644)
    files.update(_flashinfer_own_files(version))
    return files


FLASHINFER_JIT_CORE = '''\
"""flashinfer.jit.core (sandbox stand-in): the JitSpec of flashinfer-python 0.7.2, what decides where a module's
library is and whether it is compiled.

Copied in behaviour from the real flashinfer/jit/core.py (JitSpec): ``build_dir`` and ``jit_library_path`` under
jit_env.FLASHINFER_JIT_DIR/<name>/<name>.so; ``aot_path`` (jit_env.get_aot_path); ``is_aot`` (an AOT artifact
exists); ``get_library_path`` (the AOT one when there is one, else the JIT one); ``is_compiled`` (that path exists);
``build`` refuses under FLASHINFER_DISABLE_JIT with the real message, logs the real "Building JIT module %s; this can
take several minutes on first use." on a cold build, and compiles the sources with the real nvcc at
cpp_ext.get_cuda_path() for CompilationContext().get_nvcc_flags_list() (both verbatim FlashInfer code) into
jit_library_path. A failed compile raises what the real run_ninja (flashinfer/jit/cpp_ext.py) raises:
RuntimeError("Ninja build failed. Ninja output:\\n" + the compiler's output). The real build writes build.ninja and
runs ninja, which recompiles only what changed; here a library newer than every source is kept. Output paths are
resolved, as the real ninja file's are (cpp_ext.generate_ninja_build_for_op), so a release reached through a link
finds the library its build left.
"""
import logging
import os
from pathlib import Path
from typing import List, Optional

from ..compilation_context import CompilationContext
from . import _sandbox_cuda
from . import cpp_ext
from . import env as jit_env

logger = logging.getLogger("flashinfer.jit")


class MissingJITCacheError(RuntimeError):
    def __init__(self, message: str, spec: Optional["JitSpec"] = None):
        super().__init__(message)
        self.spec = spec


class JitSpec:
    def __init__(self, name: str, sources: List[Path], extra_cuda_cflags: Optional[List[str]] = None):
        self.name = name
        self.sources = [Path(s) for s in sources]
        self.extra_cuda_cflags = list(extra_cuda_cflags or [])

    @property
    def build_dir(self) -> Path:
        return jit_env.FLASHINFER_JIT_DIR / self.name

    @property
    def jit_library_path(self) -> Path:
        return jit_env.FLASHINFER_JIT_DIR / self.name / f"{self.name}.so"

    @property
    def aot_path(self) -> Path:
        return jit_env.get_aot_path(self.name)

    @property
    def is_aot(self) -> bool:
        return self.aot_path.exists()

    def get_library_path(self) -> Path:
        if self.is_aot:
            return self.aot_path
        return self.jit_library_path

    @property
    def is_compiled(self) -> bool:
        return self.get_library_path().exists()

    def build(self, verbose: Optional[bool] = None, need_lock: bool = False) -> None:
        if os.environ.get("FLASHINFER_DISABLE_JIT"):
            raise MissingJITCacheError(
                "JIT compilation is disabled via FLASHINFER_DISABLE_JIT environment variable, "
                "but the required module is not found in the JIT cache. "
                "Please add the missing module to the JIT cache build configuration.",
                spec=self,
            )
        library = self.jit_library_path.resolve()
        if library.exists() and all(library.stat().st_mtime >= s.stat().st_mtime for s in self.sources):
            return
        logger.info("Building JIT module %s; this can take several minutes on first use.", self.name)
        nvcc = os.path.join(cpp_ext.get_cuda_path(), "bin", "nvcc")
        flags = CompilationContext().get_nvcc_flags_list() + cpp_ext.get_nvcc_parallelism_flags() + [
            "-O3", "-std=c++17"] + self.extra_cuda_cflags
        jobs = cpp_ext._get_num_workers() or (os.cpu_count() or 1) + 2
        try:
            _sandbox_cuda.compile_shared(nvcc, [str(s.resolve()) for s in self.sources], str(library), flags, jobs,
                                         str(self.build_dir.resolve()))
        except _sandbox_cuda.CompileError as e:
            raise RuntimeError("Ninja build failed. Ninja output:\\n" + str(e)) from e


def gen_jit_spec(name: str, sources: List[Path], extra_cuda_cflags: Optional[List[str]] = None) -> JitSpec:
    return JitSpec(name, sources, extra_cuda_cflags)
'''

FLASHINFER_JIT_SAMPLING = '''\
"""flashinfer.jit.sampling (sandbox stand-in): gen_sampling_module, the JIT module "sampling" the sampler of SGLang
0.5.23 builds at its first sampled batch (flashinfer/sampling.py get_sampling_module -> build_and_load). The real one
compiles data/csrc/sampling.cu, renorm.cu and flashinfer_sampling_binding.cu; the stand-in compiles its own
sampling.cu (tests/sandbox/kernels/flashinfer/sampling.cu)."""
from . import env as jit_env
from .core import JitSpec, gen_jit_spec


def gen_sampling_module() -> JitSpec:
    return gen_jit_spec("sampling", [jit_env.FLASHINFER_CSRC_DIR / "sampling.cu"])
'''


def _flashinfer_own_files(version):
    return {
        "pyproject.toml": (textwrap.dedent("""\
            [build-system]
            requires = ["torch", "packaging"]
            build-backend = "build_backend"
            backend-path = ["."]

            [project]
            name = "flashinfer-python"
            dynamic = ["version"]
            description = "FlashInfer: Kernel Library for LLM Serving (sandbox stand-in)"
            requires-python = ">=3.9"
            """), 0o644),
        "build_backend.py": (FLASHINFER_BACKEND, 0o644),
        "README.md": ("# FlashInfer (sandbox stand-in)\n\nBuild: `pip wheel .`: a JIT package, like the real "
                      "flashinfer-python 0.7.2; building compiles nothing. `flashinfer.jit.sampling.gen_sampling_module()"
                      ".build()` compiles flashinfer/data/csrc/sampling.cu with the real nvcc (CUDA_HOME) for "
                      "FLASHINFER_CUDA_ARCH_LIST into $FLASHINFER_WORKSPACE_BASE/.cache/flashinfer/.\n", 0o644),
        "LICENSE": ("Apache License 2.0 (stand-in repository for tests)\n", 0o644),
        "flashinfer/_version.py": ('__version__ = "%s"\n' % version, 0o644),
        "flashinfer/__init__.py": ('"""FlashInfer sandbox stand-in: a JIT package (flashinfer.jit), no compiled code in '
                                   'the wheel."""\nfrom ._version import __version__  # noqa: F401\n', 0o644),
        "flashinfer/jit/core.py": (FLASHINFER_JIT_CORE, 0o644),
        "flashinfer/jit/sampling.py": (FLASHINFER_JIT_SAMPLING, 0o644),
    }


def _recipe_hash(kind, tag, files):
    h = hashlib.sha256(Path(__file__).read_bytes())
    h.update(("%s:%s" % (kind, tag)).encode())
    for rel in sorted(files):
        h.update(rel.encode() + b"\0" + files[rel][0].encode() + b"\0")
    return h.hexdigest()


def build_flashinfer_repo(git_dir, tag="v0.7.2", force=False, real_files=None, cache=None):
    """Create (or keep) the bare repo; return the commit sha the tag points at. ``real_files``: FlashInfer's own
    code for the build (default: real_sources.flashinfer_files(cache), downloaded once)."""
    git_dir = Path(git_dir)
    if real_files is None:
        import real_sources
        real_files = real_sources.flashinfer_files(cache)
    version = tag[1:] if tag.startswith("v") else tag
    files = flashinfer_files(version, real_files)
    recipe = _recipe_hash("flashinfer", tag, files)
    stamp = git_dir / "sandbox-recipe"
    if not force and stamp.is_file() and stamp.read_text().strip() == recipe:
        try:
            return _git(git_dir, None, GIT_DATE_1, "rev-parse", tag + "^{commit}")
        except subprocess.CalledProcessError:
            pass
    if git_dir.exists():
        shutil.rmtree(git_dir)
    git_dir.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "--quiet", "--bare", "--initial-branch=main", str(git_dir)],
                   env=_git_env(GIT_DATE_1), check=True)
    with tempfile.TemporaryDirectory(prefix="flashinfer-src-") as work:
        work = Path(work)
        _write_tree(work, files)
        _git(git_dir, work, GIT_DATE_1, "add", "-A")
        _git(git_dir, work, GIT_DATE_1, "commit", "--quiet", "-m", "Release %s" % version)
        _git(git_dir, work, GIT_DATE_1, "tag", "-a", tag, "-m", "FlashInfer %s" % version)
        _write_tree(work, {"flashinfer/_version.py": ('__version__ = "%s.post1.dev0"\n' % version, 0o644)})
        _git(git_dir, work, GIT_DATE_2, "add", "-A")
        _git(git_dir, work, GIT_DATE_2, "commit", "--quiet", "-m", "Bump version to %s.post1.dev0" % version)
    for leftover in ("index", "COMMIT_EDITMSG"):
        (git_dir / leftover).unlink(missing_ok=True)
    sha = _git(git_dir, None, GIT_DATE_1, "rev-parse", tag + "^{commit}")
    stamp.write_text(recipe + "\n")
    return sha


if __name__ == "__main__":
    import argparse
    ap = argparse.ArgumentParser(description="Build stand-in source repos.")
    ap.add_argument("git_dir")
    ap.add_argument("--tag", default="v0.7.2")
    a = ap.parse_args()
    print(build_flashinfer_repo(a.git_dir, a.tag))
