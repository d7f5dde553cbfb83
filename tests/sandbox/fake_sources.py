#!/usr/bin/env python3
"""Stand-in source repositories (bare git repos) for things the product builds from source.

``build_flashinfer_repo(git_dir, tag="v0.7.2")`` -> commit sha of ``tag``

A bare git repo standing in for https://github.com/flashinfer-ai/flashinfer at a release tag:

* history: commit 1 "Release <version>" (annotated tag ``tag``), commit 2 on ``main`` bumps the version to
  ``<version>.post1.dev0`` -- so a product that builds ``main`` instead of the pinned tag is visible.
* a tiny project ``flashinfer-python`` (package ``flashinfer``, ``__version__`` from the tag) with an in-tree
  PEP 517 backend ``build_backend.py`` (the real FlashInfer also ships an in-tree ``build_backend.py``).
  It is stdlib-only because Debian 12's ensurepip gives setuptools 66 without ``wheel``: a setuptools
  PEP 517 build there fails with ``invalid command 'bdist_wheel'``. So
  ``pip install --no-build-isolation --no-index <checkout>`` works in a fresh python3.11 venv (and -e too).
* the build, like a real source build, needs nvcc: CUDA_HOME (else CUDA_PATH, else ``dirname(dirname(which
  nvcc))``, else /usr/local/cuda) must contain an executable ``bin/nvcc``; otherwise it fails with a clear
  message. It runs ``nvcc --version`` and refuses arch ``12.0``/``12.0a`` below CUDA 12.8 and family arch
  ``12.0f`` below CUDA 12.9. ``FLASHINFER_CUDA_ARCH_LIST`` is space separated (a comma is an error, as in
  the real parser).
* the built package contains ``flashinfer/_build_info.json``: the env vars ``FLASHINFER_CUDA_ARCH_LIST``,
  ``TORCH_CUDA_ARCH_LIST``, ``MAX_JOBS``, ``FLASHINFER_NVCC_THREADS``, ``CUDA_HOME`` (as seen, null when unset),
  plus the resolved cuda_home, nvcc path/version and ``compiled_archs`` (e.g. ``["sm_120f"]``).
  ``flashinfer.build_info()`` returns it.

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
FLASHINFER_BACKEND = r'''"""In-tree PEP 517 backend of the sandbox FlashInfer stand-in (stdlib only).

Hooks: get_requires_for_build_wheel/_sdist/_editable, prepare_metadata_for_build_wheel/_editable,
build_wheel, build_editable, build_sdist. The "compile" step checks nvcc and the arch list and records
the build environment into flashinfer/_build_info.json.
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
            "Serving (sandbox stand-in)\nRequires-Python: >=3.9\n" % (NAME, _version()))


def _wheel_file():
    return "Wheel-Version: 1.0\nGenerator: flashinfer-sandbox-backend\nRoot-Is-Purelib: false\nTag: py3-none-any\n"


def _fail(msg):
    sys.stderr.write("\nerror: flashinfer build failed: %s\n\n" % msg)
    raise SystemExit(1)


def _cuda_home():
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            return os.environ[var], var
    nvcc = shutil.which("nvcc")
    if nvcc:
        return os.path.dirname(os.path.dirname(os.path.realpath(nvcc))), "PATH"
    return "/usr/local/cuda", "default"


def compile_kernels():
    """Stand-in for the CUDA compile: validate toolchain + arch list, return the build-info dict."""
    cuda_home, source = _cuda_home()
    nvcc = os.path.join(cuda_home, "bin", "nvcc")
    if not (os.path.isfile(nvcc) and os.access(nvcc, os.X_OK)):
        _fail("nvcc not found at %s (CUDA home taken from %s). FlashInfer kernels are compiled from source: "
              "install the CUDA toolkit and set CUDA_HOME (e.g. /usr/local/cuda-13.0)." % (nvcc, source))
    try:
        out = subprocess.run([nvcc, "--version"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             check=True).stdout.decode()
    except (OSError, subprocess.CalledProcessError) as exc:
        _fail("%s --version failed: %s" % (nvcc, exc))
    m = re.search(r"release (\d+)\.(\d+), V([\d.]+)", out)
    if not m:
        _fail("cannot parse the CUDA version from `%s --version`: %r" % (nvcc, out))
    cuda = (int(m.group(1)), int(m.group(2)))
    raw = os.environ.get("FLASHINFER_CUDA_ARCH_LIST")
    archs = []
    if raw:
        for tok in raw.split():
            am = re.fullmatch(r"(\d+)\.(\d+)([af]?)", tok)
            if not am:
                _fail("invalid entry %r in FLASHINFER_CUDA_ARCH_LIST=%r (space-separated list such as "
                      "\"12.0f\" or \"9.0a 12.0f\")" % (tok, raw))
            major, minor, suffix = int(am.group(1)), int(am.group(2)), am.group(3)
            if major >= 12 and cuda < (12, 8):
                _fail("sm_%d%d needs CUDA >= 12.8, nvcc is %d.%d" % (major, minor, cuda[0], cuda[1]))
            if suffix == "f" and cuda < (12, 9):
                _fail("family arch %s needs CUDA >= 12.9 (use %d.%da on CUDA 12.8); nvcc is %d.%d"
                      % (tok, major, minor, cuda[0], cuda[1]))
            archs.append("sm_%d%d%s" % (major, minor, suffix))
    jobs = os.environ.get("MAX_JOBS") or str(os.cpu_count() or 1)
    threads = os.environ.get("FLASHINFER_NVCC_THREADS") or "1"
    sys.stderr.write("flashinfer: compiling kernels for %s with %s (CUDA %d.%d), MAX_JOBS=%s, "
                     "FLASHINFER_NVCC_THREADS=%s\n" % (" ".join(archs) or "(arch list unset: JIT at runtime)",
                                                        nvcc, cuda[0], cuda[1], jobs, threads))
    return {
        "version": _version(),
        "env": {k: os.environ.get(k) for k in RECORDED_ENV},
        "cuda_home": cuda_home,
        "cuda_home_source": source,
        "nvcc": nvcc,
        "nvcc_version": m.group(3),
        "cuda_version": "%d.%d" % cuda,
        "compiled_archs": archs,
        "max_jobs": int(jobs) if jobs.isdigit() else jobs,
        "nvcc_threads": int(threads) if threads.isdigit() else threads,
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
    info = compile_kernels()
    files = _package_files() + [("flashinfer/_build_info.json",
                                 (json.dumps(info, indent=2, sort_keys=True) + "\n").encode())]
    return _write_wheel(wheel_directory, files)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    info = compile_kernels()
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


def flashinfer_files(version):
    return {
        "pyproject.toml": (textwrap.dedent("""\
            [build-system]
            requires = []
            build-backend = "build_backend"
            backend-path = ["."]

            [project]
            name = "flashinfer-python"
            dynamic = ["version"]
            description = "FlashInfer: Kernel Library for LLM Serving (sandbox stand-in)"
            requires-python = ">=3.9"
            """), 0o644),
        "build_backend.py": (FLASHINFER_BACKEND, 0o644),
        "README.md": ("# FlashInfer (sandbox stand-in)\n\nBuild: `pip install --no-build-isolation .` "
                      "with CUDA_HOME and FLASHINFER_CUDA_ARCH_LIST (space separated, e.g. `12.0f`).\n", 0o644),
        "LICENSE": ("Apache License 2.0 (stand-in repository for tests)\n", 0o644),
        "flashinfer/_version.py": ('__version__ = "%s"\n' % version, 0o644),
        "flashinfer/__init__.py": (textwrap.dedent('''\
            """FlashInfer sandbox stand-in: no kernels, only the build record."""
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


def _recipe_hash(kind, tag):
    h = hashlib.sha256(Path(__file__).read_bytes())
    h.update(("%s:%s" % (kind, tag)).encode())
    return h.hexdigest()


def build_flashinfer_repo(git_dir, tag="v0.7.2", force=False):
    """Create (or keep) the bare repo; return the commit sha the tag points at."""
    git_dir = Path(git_dir)
    recipe = _recipe_hash("flashinfer", tag)
    stamp = git_dir / "sandbox-recipe"
    if not force and stamp.is_file() and stamp.read_text().strip() == recipe:
        try:
            return _git(git_dir, None, GIT_DATE_1, "rev-parse", tag + "^{commit}")
        except subprocess.CalledProcessError:
            pass
    if git_dir.exists():
        shutil.rmtree(git_dir)
    git_dir.parent.mkdir(parents=True, exist_ok=True)
    version = tag[1:] if tag.startswith("v") else tag
    subprocess.run(["git", "init", "--quiet", "--bare", "--initial-branch=main", str(git_dir)],
                   env=_git_env(GIT_DATE_1), check=True)
    with tempfile.TemporaryDirectory(prefix="flashinfer-src-") as work:
        work = Path(work)
        _write_tree(work, flashinfer_files(version))
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
