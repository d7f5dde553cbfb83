"""Minimal in-tree PEP 517 build backend (stdlib only).

Why not setuptools: the setuptools that ``ensurepip`` puts into a fresh python3.11 venv (65.x/66.x)
cannot build wheels without the separate ``wheel`` package (``invalid command 'bdist_wheel'``), and
the test nodes have no index to fetch it from. This backend builds the pure-Python wheel itself, so
``pip install --no-build-isolation --no-index .`` works in a bare venv.
"""
import base64
import hashlib
import os
import zipfile

NAME, VERSION = "sglang", "0.5.23"
DIST_INFO = f"{NAME}-{VERSION}.dist-info"
TAG = "py3-none-any"
ZIP_DATE = (2026, 1, 1, 0, 0, 0)
HERE = os.path.dirname(os.path.abspath(__file__))


def _metadata():
    return (f"Metadata-Version: 2.1\nName: {NAME}\nVersion: {VERSION}\n"
            "Summary: SGLang 0.5.23 simulator (test stand-in, no GPU)\nRequires-Python: >=3.10\n")


def _dist_info_files():
    return {
        f"{DIST_INFO}/METADATA": _metadata(),
        f"{DIST_INFO}/WHEEL": f"Wheel-Version: 1.0\nGenerator: sim_build_backend\nRoot-Is-Purelib: true\nTag: {TAG}\n",
        f"{DIST_INFO}/entry_points.txt": "[console_scripts]\nsglang = sglang.cli.main:main\n",
        f"{DIST_INFO}/top_level.txt": "sglang\n",
    }


def _package_files():
    out = []
    for root, dirs, files in os.walk(os.path.join(HERE, "sglang")):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for f in sorted(files):
            if f.endswith(".pyc"):
                continue
            full = os.path.join(root, f)
            out.append((os.path.relpath(full, HERE).replace(os.sep, "/"), full))
    return out


def _cuda_kernels():
    """csrc/*.cu compiled with the real nvcc and torch's own arch flags (sandbox_cuda.py, which build_repo.py
    copies from tests/sandbox/standin_cuda.py); nothing when the checkout has no csrc/."""
    if not os.path.isdir(os.path.join(HERE, "csrc")):
        return []
    import sys
    sys.path.insert(0, HERE)
    import sandbox_cuda
    try:
        return sandbox_cuda.torch_extension(HERE, "sglang/_kernels.so")
    except sandbox_cuda.CompileError as exc:
        sys.stderr.write("\nerror: compiling SGLang's CUDA kernels failed: %s\n\n" % exc)
        raise SystemExit(1)


def _record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    base = os.path.join(metadata_directory, DIST_INFO)
    os.makedirs(base, exist_ok=True)
    for name, text in _dist_info_files().items():
        with open(os.path.join(metadata_directory, name), "w", encoding="utf-8") as fh:
            fh.write(text)
    return DIST_INFO


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    wheel_name = f"{NAME}-{VERSION}-{TAG}.whl"
    records = []
    kernels = _cuda_kernels()  # first: a failed compile leaves no wheel behind
    with zipfile.ZipFile(os.path.join(wheel_directory, wheel_name), "w", zipfile.ZIP_DEFLATED) as zf:
        def add(name, data):
            info = zipfile.ZipInfo(name, ZIP_DATE)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, data)
            records.append(_record_line(name, data))
        for name, full in _package_files():
            with open(full, "rb") as fh:
                add(name, fh.read())
        for name, data in kernels:
            add(name, data)
        for name, text in _dist_info_files().items():
            add(name, text.encode())
        record = "\n".join(records + [f"{DIST_INFO}/RECORD,,"]) + "\n"
        info = zipfile.ZipInfo(f"{DIST_INFO}/RECORD", ZIP_DATE)
        info.external_attr = 0o644 << 16
        zf.writestr(info, record)
    return wheel_name


def build_sdist(sdist_directory, config_settings=None):
    import tarfile
    name = f"{NAME}-{VERSION}"
    path = os.path.join(sdist_directory, f"{name}.tar.gz")
    with tarfile.open(path, "w:gz") as tf:
        for rel in ["pyproject.toml", "sim_build_backend.py"] + [r for r, _ in _package_files()]:
            tf.add(os.path.join(HERE, rel), arcname=f"{name}/{rel}")
        data = _metadata().encode()
        import io
        ti = tarfile.TarInfo(f"{name}/PKG-INFO")
        ti.size = len(data)
        tf.addfile(ti, io.BytesIO(data))
    return f"{name}.tar.gz"
