"""The release installer as sglang_build runs it (``release_install_command``), with the real uv the role pins.

Two releases of the same stack installed with uv share every package file with its cache (one inode, hardlinked),
each release stays complete when the other and the cache are gone, and its bytecode is its own. pip copies. The
index arguments are the sandbox's: torch from a ``file://`` PEP 503 index, the rest with ``--no-index --find-links``.
"""

import base64
import hashlib
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from ansible_collections.blackwell.sglang.plugins.filter.build_release import release_install_command

SANDBOX = Path(__file__).resolve().parents[1] / "sandbox"
sys.path.insert(0, str(SANDBOX))

import cuda_wheels  # noqa: E402
import wheelhouse  # noqa: E402


def _wheel(house: Path, name: str, version: str, files: dict) -> Path:
    """A pure-Python wheel with a correct RECORD."""
    dist = "%s-%s.dist-info" % (name, version)
    entries = dict(files)
    entries[dist + "/METADATA"] = "Metadata-Version: 2.1\nName: %s\nVersion: %s\n" % (name, version)
    entries[dist + "/WHEEL"] = "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    record = []
    for path, text in entries.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append("%s,sha256=%s,%d" % (path, digest, len(text.encode())))
    entries[dist + "/RECORD"] = "\n".join(record + [dist + "/RECORD,,"]) + "\n"
    out = house / ("%s-%s-py3-none-any.whl" % (name, version))
    with zipfile.ZipFile(out, "w") as archive:
        for path, text in entries.items():
            archive.writestr(path, text)
    return out


@pytest.fixture(scope="module")
def uv(tmp_path_factory):
    """uv==sglang_build_uv_version (the wheelhouse reads the role's pin), in a venv of its own as the role puts it."""
    cached = cuda_wheels.cache_dir() / "wheels"
    wheelhouse.download_pinned(cached, wheelhouse.INSTALLER_PINS)
    name, version = wheelhouse.INSTALLER_PINS[0].split("==")
    root = tmp_path_factory.mktemp("uv")
    subprocess.run([sys.executable, "-m", "venv", str(root)], check=True)
    subprocess.run([str(root / "bin/python"), "-m", "pip", "install", "--quiet", "--isolated", "--no-index",
                    str(next(cached.glob("%s-%s-*.whl" % (name, version))))], check=True)
    return root / "bin" / "uv"


@pytest.fixture()
def house(tmp_path):
    """A wheelhouse with a stand-in torch behind a file:// simple index and one package beside it."""
    house = tmp_path / "house"
    (house / "simple" / "torch").mkdir(parents=True)
    torch = _wheel(house, "torch", "2.14.1", {"torch/__init__.py": "__version__ = '2.14.1'\n"})
    _wheel(house, "pkga", "1.0", {"pkga/__init__.py": "ANSWER = 42\n", "pkga/big.py": "DATA = %r\n" % ("x" * 4096)})
    (house / "simple" / "index.html").write_text('<a href="torch/">torch</a>\n')
    (house / "simple" / "torch" / "index.html").write_text('<a href="../../%s">%s</a>\n' % (torch.name, torch.name))
    return house


def _release(tmp_path: Path, name: str) -> Path:
    release = tmp_path / "releases" / name
    release.mkdir(parents=True)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(release / "venv")], check=True)
    (release / "constraints.txt").write_text("torch==2.14.1\npkga==1.0\n")
    return release


def _install(release: Path, house: Path, installer: str, uv=None, compile_bytecode=True):
    command = release_install_command({
        "release": str(release), "installer": installer, "uv": str(uv) if uv else "",
        "cache_dir": str(release.parent / ".package-cache"), "compile_bytecode": compile_bytecode, "nice": 0,
        "pip_args": ["--no-index", "--find-links", str(house)],
        "torch": {"version": "2.14.1", "index_url": (house / "simple").as_uri(), "pip_args": []},
        "requirements": ["", "pkga==1.0"]})
    # This machine's own pip configuration (its find-links hold the real torch) stays out: only ``house`` is read.
    env = dict({k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_"))}, PIP_CONFIG_FILE=os.devnull)
    done = subprocess.run(["bash", "-c", command], env=env, capture_output=True, text=True)
    log = (release / "build.log").read_text()
    assert done.returncode == 0, log
    return log


def _site(release: Path) -> Path:
    return next((release / "venv" / "lib").glob("python3*/site-packages"))


def _imports(release: Path) -> str:
    return subprocess.run([str(release / "venv/bin/python"), "-c", "import pkga, torch; print(pkga.ANSWER, torch.__version__)"],
                          capture_output=True, text=True, check=True).stdout.strip()


def test_uv_releases_share_package_files_and_stay_complete_on_their_own(uv, house, tmp_path):
    first, second = _release(tmp_path, "a" * 16), _release(tmp_path, "b" * 16)
    log = _install(first, house, "uv", uv)
    assert "+ torch==2.14.1" in log and "+ pkga==1.0" in log
    _install(second, house, "uv", uv)
    for member in ("pkga/big.py", "torch/__init__.py"):
        one, two = (_site(r) / member for r in (first, second))
        assert one.stat().st_ino == two.stat().st_ino, member
        assert one.stat().st_nlink == 3, member  # the two releases and uv's cache
    pyc_first, pyc_second = (next((_site(r) / "pkga" / "__pycache__").glob("big.*.pyc")) for r in (first, second))
    assert pyc_first.stat().st_ino != pyc_second.stat().st_ino  # each release's bytecode is its own
    shutil.rmtree(first)
    shutil.rmtree(tmp_path / "releases" / ".package-cache")
    assert _imports(second) == "42 2.14.1"


def test_uv_without_bytecode_leaves_none(uv, house, tmp_path):
    release = _release(tmp_path, "c" * 16)
    _install(release, house, "uv", uv, compile_bytecode=False)
    assert not (_site(release) / "pkga" / "__pycache__").exists()


def test_pip_copies_every_file(house, tmp_path):
    release = tmp_path / "releases" / ("d" * 16)
    release.mkdir(parents=True)
    subprocess.run([sys.executable, "-m", "venv", str(release / "venv")], check=True)
    (release / "constraints.txt").write_text("torch==2.14.1\npkga==1.0\n")
    _install(release, house, "pip")
    assert (_site(release) / "pkga" / "big.py").stat().st_nlink == 1
    assert _imports(release) == "42 2.14.1"


def test_a_failed_install_fails_the_command_and_logs_why(uv, house, tmp_path):
    release = _release(tmp_path, "e" * 16)
    (release / "constraints.txt").write_text("torch==2.14.1\npkga==2.0\n")
    command = release_install_command({
        "release": str(release), "installer": "uv", "uv": str(uv), "cache_dir": str(tmp_path / "cache"),
        "pip_args": ["--no-index", "--find-links", str(house)], "requirements": ["pkga"]})
    assert subprocess.run(["bash", "-c", command], capture_output=True).returncode != 0
    assert "pkga" in (release / "build.log").read_text()
