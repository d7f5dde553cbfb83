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
* the build compiles real CUDA: ``csrc/*.cu`` (tests/sandbox/kernels/) with the real nvcc of CUDA_HOME into
  ``flashinfer/_kernels.so``. The flags are FlashInfer 0.7.2's own: the repo holds its
  ``flashinfer/compilation_context.py`` verbatim and the functions of ``flashinfer/jit/cpp_ext.py`` the build
  calls (real_sources.py copies them from the pinned wheel when the artifacts are built; they are never
  committed). So ``FLASHINFER_CUDA_ARCH_LIST="12.0f"`` becomes ``-gencode=arch=compute_120f,code=sm_120f``,
  ``9.0`` becomes ``compute_90a``, ``FLASHINFER_NVCC_THREADS`` becomes ``--threads``, ``MAX_JOBS`` bounds the
  parallel compiles, and a comma-separated list fails in FlashInfer's own parser. An arch the compiler does
  not know fails with nvcc's message (``nvcc fatal   : Unsupported gpu architecture 'compute_120f'`` from a
  12.8 nvcc). No nvcc under CUDA_HOME (FlashInfer's get_cuda_path) fails with a clear message.
* the built package contains ``flashinfer/_build_info.json``: the env vars ``FLASHINFER_CUDA_ARCH_LIST``,
  ``TORCH_CUDA_ARCH_LIST``, ``MAX_JOBS``, ``FLASHINFER_NVCC_THREADS``, ``CUDA_HOME`` (as seen, null when unset),
  plus the resolved cuda_home, nvcc path/version, the nvcc flags, the job count and ``compiled_archs`` (e.g.
  ``["sm_120f"]``, from FlashInfer's TARGET_CUDA_ARCHS). ``flashinfer.build_info()`` returns it; what the
  object really holds is for cuobjdump to say (the release probe reads it).

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
build_wheel, build_editable, build_sdist. The compile step runs the real nvcc on csrc/*.cu with the flags
FlashInfer's own code derives from the environment (compile_kernels), links flashinfer/_kernels.so and records
the build into flashinfer/_build_info.json. Build requirements (pyproject.toml): torch and packaging, which
FlashInfer's compilation_context.py and jit/cpp_ext.py import.
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
RECORDED_ENV = ["FLASHINFER_CUDA_ARCH_LIST", "TORCH_CUDA_ARCH_LIST", "MAX_JOBS",
                "FLASHINFER_NVCC_THREADS", "CUDA_HOME"]


def _version():
    with open(os.path.join(HERE, "flashinfer", "_version.py")) as fh:
        return re.search(r'__version__ = "([^"]+)"', fh.read()).group(1)


def _metadata():
    return ("Metadata-Version: 2.1\nName: %s\nVersion: %s\nSummary: FlashInfer: Kernel Library for LLM "
            "Serving (sandbox stand-in)\nRequires-Python: >=3.9\n"
            # The real wheel's run-time requirement that matters on the node (flashinfer_python-0.7.2 METADATA:
            # Requires-Dist: ninja): FlashInfer's JIT runs a bare `ninja` (flashinfer/jit/cpp_ext.py run_ninja), which
            # the ninja wheel puts in the release venv's bin/. pip takes it from the sandbox wheelhouse.
            "Requires-Dist: ninja\n" % (NAME, _version()))


def _wheel_file():
    return "Wheel-Version: 1.0\nGenerator: flashinfer-sandbox-backend\nRoot-Is-Purelib: false\nTag: py3-none-any\n"


def _fail(msg):
    sys.stderr.write("\nerror: flashinfer build failed: %s\n\n" % msg)
    raise SystemExit(1)


def _ninja_default_jobs():
    # ninja's own default when no -j is given (FlashInfer's run_ninja passes -j only with MAX_JOBS): cores + 2
    return (os.cpu_count() or 1) + 2


def compile_kernels(build_dir):
    """Compile csrc/*.cu with the real nvcc into <build_dir>/flashinfer/_kernels.so; return the build-info dict.

    The flags come from FlashInfer's own code, copied verbatim into this checkout (see flashinfer/jit/cpp_ext.py
    and flashinfer/compilation_context.py): CompilationContext() parses FLASHINFER_CUDA_ARCH_LIST (or asks torch
    for the GPUs when it is unset) and get_nvcc_flags_list() makes the -gencode flags, as FlashInfer's AOT build
    does (flashinfer/aot.py); FLASHINFER_NVCC_THREADS -> --threads (get_nvcc_parallelism_flags); MAX_JOBS ->
    parallel compiles (_get_num_workers). A wrong arch string fails in nvcc, with nvcc's own message.
    """
    sys.path.insert(0, HERE)
    import sandbox_cuda
    from flashinfer.jit import cpp_ext
    from flashinfer.compilation_context import CompilationContext

    cuda_home = cpp_ext.get_cuda_path()
    nvcc = os.path.join(cuda_home, "bin", "nvcc")
    if not (os.path.isfile(nvcc) and os.access(nvcc, os.X_OK)):
        _fail("nvcc not found at %s. FlashInfer kernels are compiled from source: install the CUDA toolkit and "
              "set CUDA_HOME (e.g. /usr/local/cuda-13.0)." % nvcc)
    cuda_version = str(cpp_ext.get_cuda_version())
    context = CompilationContext()
    flags = context.get_nvcc_flags_list() + cpp_ext.get_nvcc_parallelism_flags() + ["-O3", "-std=c++17"]
    jobs = cpp_ext._get_num_workers() or _ninja_default_jobs()
    archs = sorted("sm_%d%s" % (major, minor) for major, minor in context.TARGET_CUDA_ARCHS)
    sys.stderr.write("flashinfer: compiling kernels for %s with %s (CUDA %s), %d job(s)\n"
                     % (" ".join(archs), nvcc, cuda_version, jobs))
    sources = sorted(os.path.join(HERE, "csrc", f) for f in os.listdir(os.path.join(HERE, "csrc"))
                     if f.endswith(".cu"))
    try:
        record = sandbox_cuda.compile_shared(nvcc, sources, os.path.join(build_dir, "flashinfer", "_kernels.so"),
                                             flags, jobs, os.path.join(build_dir, "obj"))
    except sandbox_cuda.CompileError as exc:
        _fail("compiling the CUDA kernels failed: %s" % exc)
    return {
        "version": _version(),
        "env": {k: os.environ.get(k) for k in RECORDED_ENV},
        "cuda_home": cuda_home,
        "nvcc": nvcc,
        "nvcc_version": record["nvcc_version"],
        "cuda_version": cuda_version,
        "compiled_archs": archs,
        "nvcc_flags": record["flags"],
        "max_jobs": jobs,
        "compile": record,
        "python": sys.version.split()[0],
    }


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
            if f.endswith(".py"):
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
    build_dir = tempfile.mkdtemp(prefix="flashinfer-build-")
    try:
        info = compile_kernels(build_dir)
        with open(os.path.join(build_dir, "flashinfer", "_kernels.so"), "rb") as fh:
            kernels = fh.read()
    finally:
        shutil.rmtree(build_dir, ignore_errors=True)
    files = _package_files() + [("flashinfer/_kernels.so", kernels),
                                ("flashinfer/_build_info.json",
                                 (json.dumps(info, indent=2, sort_keys=True) + "\n").encode())]
    return _write_wheel(wheel_directory, files)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    build_dir = tempfile.mkdtemp(prefix="flashinfer-build-")
    try:
        info = compile_kernels(build_dir)
        shutil.copy2(os.path.join(build_dir, "flashinfer", "_kernels.so"), os.path.join(HERE, "flashinfer"))
    finally:
        shutil.rmtree(build_dir, ignore_errors=True)
    with open(os.path.join(HERE, "flashinfer", "_build_info.json"), "w") as fh:
        json.dump(info, fh, indent=2, sort_keys=True)
        fh.write("\n")
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
    FlashInfer's own code the build runs."""
    files = {rel: (text, 0o644) for rel, text in real_files.items()}
    files.update(standin_kernel_files())
    files.update(_flashinfer_own_files(version))
    return files


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
        "README.md": ("# FlashInfer (sandbox stand-in)\n\nBuild: `pip wheel .` (build requirements torch and "
                      "packaging) with CUDA_HOME and FLASHINFER_CUDA_ARCH_LIST (space separated, e.g. `12.0f`): "
                      "compiles csrc/*.cu with the real nvcc into flashinfer/_kernels.so.\n", 0o644),
        "LICENSE": ("Apache License 2.0 (stand-in repository for tests)\n", 0o644),
        "flashinfer/_version.py": ('__version__ = "%s"\n' % version, 0o644),
        "flashinfer/__init__.py": (textwrap.dedent('''\
            """FlashInfer sandbox stand-in: _kernels.so (real SASS, tiny kernels) and the build record."""
            import json as _json
            import os as _os

            from ._version import __version__


            def build_info():
                """The environment the package was built with (FLASHINFER_CUDA_ARCH_LIST, CUDA_HOME, ...)."""
                path = _os.path.join(_os.path.dirname(__file__), "_build_info.json")
                with open(path) as fh:
                    return _json.load(fh)


            def get_cuda_arch_list():
                return list(build_info().get("compiled_archs", []))
            '''), 0o644),
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
