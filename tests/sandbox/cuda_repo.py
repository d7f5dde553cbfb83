#!/usr/bin/env python3
"""Build a local, signed, flat apt repository that stands in for NVIDIA's CUDA network repo.

Real:     https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/
Stand-in: <out>/cuda-repo/debian12/x86_64/   (on a sandbox node: file:///srv/sandbox/cuda-repo/debian12/x86_64/)

Layout (flat repository, like NVIDIA's; a sources line is ``deb [signed-by=...] <url> /``)::

    <out>/cuda-repo/
      cuda-archive-keyring.gpg          binary public keyring (convenience copy for hosts/tests)
      .stamp                            recipe hash (no-op rebuild detection)
      debian12/x86_64/
        Packages  Packages.gz  Release  Release.gpg  InRelease
        3bf863cc.pub                    ASCII-armoured public key (same *file name* NVIDIA uses; our key
                                        is a throwaway one, so its id does NOT end in 3bf863cc)
        cuda-keyring_1.1-1_all.deb      like NVIDIA: the keyring package sits at the repo root
        cuda-toolkit-13-0_13.0.2-1_amd64.deb, cuda-toolkit-13-0_13.0.0-1_amd64.deb, cuda-nvcc-13-0_*,
        cuda-crt-13-0_*, cuda-nvvm-13-0_*, cuda-cccl-13-0_*, cuda-cudart-13-0_*, cuda-cudart-dev-13-0_*,
        cuda-cuobjdump-13-0_*, cuda-toolkit-*config-common_*, cuda-13-0_*, cuda-drivers_* (a trap: see below),
        nvidia-open_*, nvidia-driver-cuda_*, nvidia-kernel-open-dkms_*, libcuda1_*, libnvidia-ml1_*,
        nvidia-smi_* (the driver: traps too)
    <out>/.keys/cuda-repo-signing.sec.asc   the throwaway secret key (kept so the key stays stable)

Packages (versions follow the real 13.0 update 2 / 13.0 GA packaging):

* ``cuda-keyring 1.1-1 all``: ``/usr/share/keyrings/cuda-archive-keyring.gpg`` (our public key, binary
  keyring) and ``/etc/apt/sources.list.d/cuda-debian12-x86_64.list`` pointing at NVIDIA's REAL URL with
  ``signed-by`` that keyring -- exactly like the real package. On an offline node that list makes
  ``apt-get update`` fail until the role replaces/overrides it with the configured repo URL.
* ``cuda-toolkit-13-0`` 13.0.2-1 (and 13.0.0-1 for pinning tests) -> ``cuda-nvcc-13-0``, ``cuda-cudart-13-0``,
  ``cuda-cudart-dev-13-0``, ``cuda-cccl-13-0`` (``>=`` dependencies, like the real metapackage),
  ``cuda-cuobjdump-13-0``, ``cuda-toolkit-13-0-config-common``, ``cuda-toolkit-13-config-common``,
  ``cuda-toolkit-config-common``; owns ``/usr/local/cuda-13.0/version.json``. 13.0.0-1 is only the metapackage:
  its ``>=`` dependencies resolve to the update-2 components.
* the components are NVIDIA's real CUDA 13.0 compiler, unpacked from NVIDIA's pip wheels into the toolkit's own
  layout by ``cuda_wheels.py`` (see its table): ``cuda-nvcc-13-0`` 13.0.88 (``bin/nvcc`` -- the real one,
  V13.0.88 --, ptxas, nvlink, fatbinary, cudafe++; depends on ``cuda-crt-13-0`` and ``cuda-nvvm-13-0``),
  ``cuda-crt-13-0``, ``cuda-nvvm-13-0`` (cicc, libdevice, libnvvm), ``cuda-cccl-13-0`` 13.0.85,
  ``cuda-cudart-13-0`` 13.0.96 (``targets/x86_64-linux/lib/libcudart.so.13*`` and the ``lib64 ->
  targets/x86_64-linux/lib`` symlink: CUDA lives in lib64, not lib), ``cuda-cudart-dev-13-0`` (headers, static
  runtime, ``include -> targets/x86_64-linux/include``) and ``cuda-cuobjdump-13-0`` 13.2.51 (the oldest on PyPI).
  They compile SM120 code on a machine without a GPU (``-gencode arch=compute_120f,code=sm_120f``), given a host
  compiler (g++, from the distribution: see distro_repo.py). Built once per recipe into ``<cache>/cuda-debs-*``
  (zstd, about 3 s for the 270 MB) and linked into the repo; the wheels are never committed.
* ``cuda-toolkit-13-0-config-common``: postinst ``update-alternatives --install /usr/local/cuda cuda
  /usr/local/cuda-13.0 130`` and ``... /usr/local/cuda-13 cuda-13 /usr/local/cuda-13.0 130`` (priority = major*10
  + minor, as the real packages do); prerm removes them.
* ``cuda-toolkit-config-common`` / ``cuda-toolkit-13-config-common``: ``/etc/ld.so.conf.d/000_cuda.conf`` and
  ``988_cuda-13.conf`` + ldconfig.
* ``cuda-13-0`` -> ``cuda-runtime-13-0``-like dependency on ``cuda-drivers (>= 580.65.06)``; ``cuda-drivers``
  580.95.05-1 exists but its preinst FAILS (a container cannot take a kernel driver): installing the ``cuda``
  metapackages instead of ``cuda-toolkit-13-0`` is caught, as it would be caught on a real host by a driver swap.
* the driver, as NVIDIA's debian12 repository names it (Debian's naming; DRIVER_PACKAGES): ``nvidia-open`` ->
  ``nvidia-driver-cuda`` + ``nvidia-kernel-open-dkms``, ``nvidia-driver-cuda`` -> ``libcuda1``, ``libnvidia-ml1``
  and ``nvidia-smi``, all 580.95.05-1 and all with the failing preinst. No sandbox node has a driver package
  installed, so each is newer than what is installed: on a deployed node the cuda_toolkit role's pin
  (/etc/apt/preferences.d/cuda-driver-pin.pref) must show them with ``Candidate: (none)`` and priority -1.

Idempotent: a stamp holds sha256(this file + params + key fingerprint + the compiler recipe); a matching stamp and present
outputs mean nothing is rebuilt. The signing key is generated once (ed25519, no passphrase, temp GNUPGHOME)
and reused while ``<out>/.keys`` exists.

CLI: ``python tests/sandbox/cuda_repo.py OUT``
"""

import argparse
import gzip
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import cuda_wheels  # noqa: E402

DISTRO = "debian12"
ARCH_DIR = "x86_64"
DEB_ARCH = "amd64"
REAL_URL = "https://developer.download.nvidia.com/compute/cuda/repos/%s/%s/" % (DISTRO, ARCH_DIR)
KEY_FILE_NAME = "3bf863cc.pub"
KEYRING_PATH = "/usr/share/keyrings/cuda-archive-keyring.gpg"
SOURCE_DATE_EPOCH = 1759276800  # 2025-10-01T00:00:00Z: fixed, in the past (apt rejects future Dates)
MAINTAINER = "cudatools <cudatools@nvidia.com>"
KEY_UID = "Sandbox CUDA repo signing key (throwaway, tests only) <sandbox-cuda@invalid>"

# toolkit version -> the component versions cuda-toolkit-13-0 depends on (">=", like NVIDIA's metapackage).
# 13.0.2 (update 2) is the real compiler carried here (cuda_wheels: nvcc V13.0.88); 13.0.0-1 (GA) is only the
# metapackage, for pinning tests: its ">=" dependencies resolve to the 13.0.2 components, as they would in
# NVIDIA's repo once update 2 is published.
_W = {w.project: w.version for w in cuda_wheels.CUDA13_WHEELS}
RELEASES = {
    "13.0.2": {"nvcc": _W["nvidia-cuda-nvcc"], "cudart": _W["nvidia-cuda-runtime"], "cccl": _W["nvidia-cuda-cccl"],
               "curand": _W["nvidia-curand"]},
    "13.0.0": {"nvcc": "13.0.48", "cudart": "13.0.48", "cccl": "13.0.50", "curand": "10.4.0.35"},
}
DEFAULT_PARAMS = {"toolkit_versions": ["13.0.2", "13.0.0"], "driver_version": "580.95.05"}


def log(msg):
    print(msg, file=sys.stderr)


# ------------------------------------------------------------------------------------------- gpg key
def _gpg(home, *args, input_bytes=None, check=True):
    env = dict(os.environ, GNUPGHOME=str(home), LC_ALL="C")
    return subprocess.run(["gpg", "--batch", "--quiet", "--no-tty", *args], env=env, input=input_bytes,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=check)


def _new_home():
    home = Path(tempfile.mkdtemp(prefix="cuda-repo-gnupg-"))
    os.chmod(home, 0o700)
    return home


def ensure_key(keys_dir: Path):
    """Return (gnupg_home, fingerprint). The caller removes gnupg_home."""
    keys_dir.mkdir(parents=True, exist_ok=True)
    sec = keys_dir / "cuda-repo-signing.sec.asc"
    home = _new_home()
    if not sec.exists():
        _gpg(home, "--passphrase", "", "--pinentry-mode", "loopback", "--faked-system-time",
             "%d!" % SOURCE_DATE_EPOCH, "--quick-gen-key", KEY_UID, "ed25519", "sign", "never")
        data = _gpg(home, "--armor", "--export-secret-keys").stdout
        tmp = sec.with_suffix(".tmp")
        tmp.write_bytes(data)
        os.chmod(tmp, 0o600)
        os.replace(tmp, sec)
    else:
        _gpg(home, "--import", str(sec))
    out = _gpg(home, "--with-colons", "--list-secret-keys").stdout.decode()
    fpr = next(line.split(":")[9] for line in out.splitlines() if line.startswith("fpr:"))
    return home, fpr


# ------------------------------------------------------------------------------------------- debs
def _write(root: Path, rel: str, content, mode=0o644):
    p = root / rel.lstrip("/")
    p.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, str):
        content = content.encode()
    p.write_bytes(content)
    os.chmod(p, mode)


def _symlink(root: Path, rel: str, target: str):
    p = root / rel.lstrip("/")
    p.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(target, p)


def build_deb(work: Path, out_dir: Path, name, version, arch, files=(), links=(), depends=(),
              description="", scripts=None, conffiles=(), section="devel", extra_control=None, tree=None):
    """files: (path, content, mode); links: (path, target); scripts: {"postinst": "..."};
    tree: (source prefix dir, install prefix, [relpaths]) -- files and symlinks hardlinked/copied from an
    assembled tree (the real toolkit from cuda_wheels.toolkit())."""
    root = work / ("%s_%s" % (name, version))
    if root.exists():
        shutil.rmtree(root)
    (root / "DEBIAN").mkdir(parents=True)
    for path, content, mode in files:
        _write(root, path, content, mode)
    for path, target in links:
        _symlink(root, path, target)
    if tree:
        src_home, prefix, rels = tree
        for rel in rels:
            src, dst = Path(src_home) / rel, root / prefix.lstrip("/") / rel
            dst.parent.mkdir(parents=True, exist_ok=True)
            if src.is_symlink():
                os.symlink(os.readlink(src), dst)
                continue
            try:
                os.link(src, dst)
            except OSError:
                shutil.copy2(src, dst)
    size_kb = max(1, sum(f.lstat().st_size for f in root.rglob("*")
                         if f.is_file() and not f.is_symlink() and "DEBIAN" not in f.parts) // 1024)
    control = [
        "Package: %s" % name, "Version: %s" % version, "Priority: optional", "Section: %s" % section,
        "Maintainer: %s" % MAINTAINER, "Installed-Size: %d" % size_kb, "Architecture: %s" % arch,
    ]
    if depends:
        control.append("Depends: %s" % ", ".join(depends))
    for key, val in (extra_control or {}).items():
        control.append("%s: %s" % (key, val))
    desc = description.strip().splitlines() or [name]
    control.append("Description: %s" % desc[0])
    control += [" " + (line if line.strip() else ".") for line in desc[1:]]
    _write(root, "DEBIAN/control", "\n".join(control) + "\n")
    if conffiles:
        _write(root, "DEBIAN/conffiles", "".join(c + "\n" for c in conffiles))
    for sname, body in (scripts or {}).items():
        _write(root, "DEBIAN/" + sname, body, 0o755)
    deb = out_dir / ("%s_%s_%s.deb" % (name, version, arch))
    env = dict(os.environ, SOURCE_DATE_EPOCH=str(SOURCE_DATE_EPOCH))
    # zstd: the toolkit's debs hold ~270 MB; xz takes ~100 s for them on 2 cores, zstd -3 about 3 s, and
    # Debian 12's dpkg (1.21.22) unpacks zstd. Determinism: dpkg-deb clamps every member's mtime to
    # SOURCE_DATE_EPOCH (everything here is written later), so hardlinked sources keep their own mtimes.
    subprocess.run(["dpkg-deb", "--root-owner-group", "-Zzstd", "-z3", "--build", str(root), str(deb)],
                   env=env, check=True, stdout=subprocess.DEVNULL)
    shutil.rmtree(root)
    return deb


def version_json(toolkit, rel):
    data = {
        "cuda": {"name": "CUDA SDK", "version": toolkit},
        "cuda_cccl": {"name": "CUDA C++ Core Compute Libraries", "version": rel["cccl"]},
        "cuda_cudart": {"name": "CUDA Runtime (cudart)", "version": rel["cudart"]},
        "cuda_nvcc": {"name": "CUDA NVCC", "version": rel["nvcc"]},
    }
    return json.dumps(data, indent=3, sort_keys=True) + "\n"


# (deb package, RELEASES key of its version) that cuda-toolkit-13-0 depends on with ">=", like NVIDIA's
TOOLKIT_COMPONENTS = (("cuda-nvcc-13-0", "nvcc"), ("cuda-cudart-13-0", "cudart"), ("cuda-cudart-dev-13-0", "cudart"),
                      ("cuda-cccl-13-0", "cccl"), ("cuda-cuobjdump-13-0", None), ("libcurand-dev-13-0", "curand"),
                      ("cuda-driver-dev-13-0", "cudart"))
# the real compiler's packages: (package, wheel project whose version it takes, depends, description)
COMPONENTS = (
    ("cuda-nvcc-13-0", "nvidia-cuda-nvcc", ["cuda-crt-13-0 (>= {nvidia-cuda-crt})", "cuda-nvvm-13-0 (>= {nvidia-nvvm})",
                                            "cuda-toolkit-13-0-config-common"],
     "CUDA nvcc\n nvcc, ptxas, nvlink, fatbinary, cudafe++ from NVIDIA's nvidia-cuda-nvcc wheel."),
    ("cuda-crt-13-0", "nvidia-cuda-crt", [], "CUDA crt\n The crt/ headers nvcc includes (nvidia-cuda-crt wheel)."),
    ("cuda-nvvm-13-0", "nvidia-nvvm", [], "CUDA nvvm\n cicc, libdevice and libnvvm (nvidia-nvvm wheel)."),
    ("cuda-cccl-13-0", "nvidia-cuda-cccl", [], "CUDA CCCL\n CUB, Thrust and libcu++ headers (nvidia-cuda-cccl wheel)."),
    ("cuda-cudart-13-0", "nvidia-cuda-runtime", ["cuda-toolkit-13-0-config-common", "cuda-toolkit-13-config-common",
                                                 "cuda-toolkit-config-common"],
     "CUDA Runtime native Libraries\n libcudart.so.13 (nvidia-cuda-runtime wheel)."),
    ("cuda-cudart-dev-13-0", "nvidia-cuda-runtime", ["cuda-cudart-13-0 (>= {nvidia-cuda-runtime})"],
     "CUDA Runtime native dev links, headers\n The runtime headers, libcudart_static.a, libcudadevrt.a."),
    ("libcurand-dev-13-0", "nvidia-curand", [],
     "CURAND native dev links, headers\n The cuRAND headers (nvidia-curand wheel; its host library is left out)."),
    ("cuda-driver-dev-13-0", "nvidia-cuda-runtime", [],
     "CUDA Driver native dev stub library\n lib64/stubs/libcuda.so, what -lcuda links against without a driver "
     "(sandbox: an empty library with the stub's soname, cuda_wheels.STUB_PATH)."),
    ("cuda-cuobjdump-13-0", "nvidia-cuda-cuobjdump", [],
     "CUDA cuobjdump\n From the nvidia-cuda-cuobjdump 13.2.51 wheel, the oldest on PyPI (it reads 13.0 objects)."),
)


def _components_recipe(tk):
    h = hashlib.sha256(Path(__file__).read_bytes())
    h.update(cuda_wheels.recipe_hash().encode())
    h.update(json.dumps(tk["wheels"], sort_keys=True).encode())
    return h.hexdigest()[:16]


def toolkit_packages(work: Path, repo: Path, cache=None):
    """The real CUDA 13.0 compiler as NVIDIA's component debs, built once per recipe into the cache and linked
    into ``repo``: a repo rebuild (or a test's) re-signs an index instead of re-packing 270 MB."""
    tk = cuda_wheels.toolkit(cache)
    cached = cuda_wheels.cache_dir(cache) / ("cuda-debs-%s" % _components_recipe(tk))
    if not (cached / ".done").is_file():
        shutil.rmtree(cached, ignore_errors=True)
        cached.mkdir(parents=True)
        for name, project, depends, description in COMPONENTS:
            version = tk["wheels"][project]
            build_deb(work, cached, name, version + "-1", DEB_ARCH,
                      depends=[d.format(**tk["wheels"]) for d in depends], description=description,
                      tree=(tk["home"], cuda_wheels.PREFIX, tk["packages"][name]),
                      scripts={"postinst": "#!/bin/sh\nset -e\nldconfig || true\n"} if name == "cuda-cudart-13-0"
                      else None)
        (cached / ".done").write_text("\n")
    debs = []
    for deb in sorted(cached.glob("*.deb")):
        dest = repo / deb.name
        try:
            os.link(deb, dest)
        except OSError:
            shutil.copy2(deb, dest)
        debs.append(dest)
    return debs


# The driver's packages as NVIDIA's debian12 repository names them (Debian's naming, not Ubuntu's
# libnvidia-compute-580 / nvidia-driver-580-open): NVIDIA's driver installation guide installs "nvidia-open" (or
# "nvidia-driver-cuda nvidia-kernel-open-dkms" for a compute-only node) on Debian; libcuda1, libnvidia-ml1 and
# nvidia-smi are what nvidia-driver-cuda pulls in. (package, depends at the same version, section, description)
DRIVER_PACKAGES = (
    ("nvidia-open", ("nvidia-driver-cuda", "nvidia-kernel-open-dkms"), "non-free/metapackages",
     "NVIDIA driver with open kernel modules (metapackage)"),
    ("nvidia-driver-cuda", ("libcuda1", "libnvidia-ml1", "nvidia-smi"), "non-free/libs",
     "NVIDIA driver CUDA integration components"),
    ("nvidia-kernel-open-dkms", (), "non-free/kernel", "NVIDIA open kernel module DKMS source"),
    ("libcuda1", (), "non-free/libs", "NVIDIA CUDA Driver Library"),
    ("libnvidia-ml1", (), "non-free/libs", "NVIDIA Management Library (NVML) runtime library"),
    ("nvidia-smi", (), "non-free/utils", "NVIDIA System Management Interface"),
)


def _driver_trap(name):
    return textwrap.dedent("""\
        #!/bin/sh
        echo "%s (sandbox): refusing to install an NVIDIA driver package on a sandbox node." >&2
        echo "A real host would now replace its driver and need a reboot; the cuda_toolkit role pins NVIDIA's" >&2
        echo "driver packages away (/etc/apt/preferences.d/cuda-driver-pin.pref): install cuda-toolkit-13-0, not cuda." >&2
        exit 1
        """ % name)


def build_packages(work: Path, repo: Path, pub_binary: bytes, params, cache=None):
    debs = []
    list_line = "deb [signed-by=%s] %s /\n" % (KEYRING_PATH, REAL_URL)
    debs.append(build_deb(
        work, repo, "cuda-keyring", "1.1-1", "all",
        files=[(KEYRING_PATH, pub_binary, 0o644),
               ("/etc/apt/sources.list.d/cuda-%s-%s.list" % (DISTRO, ARCH_DIR), list_line, 0o644)],
        conffiles=["/etc/apt/sources.list.d/cuda-%s-%s.list" % (DISTRO, ARCH_DIR)],
        section="non-free/admin",
        description="GPG keyring for the CUDA repository\n install GPG keyring for the CUDA repository"))

    # config-common packages (real: cuda-toolkit-config-common, cuda-toolkit-13-config-common,
    # cuda-toolkit-13-0-config-common); version them with the newest cudart like NVIDIA does.
    newest = RELEASES[params["toolkit_versions"][0]]["cudart"] + "-1"
    debs.append(build_deb(
        work, repo, "cuda-toolkit-config-common", newest, "all",
        files=[("/etc/ld.so.conf.d/000_cuda.conf", "/usr/local/cuda/targets/x86_64-linux/lib\n", 0o644)],
        scripts={"postinst": "#!/bin/sh\nset -e\nldconfig || true\n"},
        description="Common config package for CUDA Toolkit."))
    debs.append(build_deb(
        work, repo, "cuda-toolkit-13-config-common", newest, "all",
        files=[("/etc/ld.so.conf.d/988_cuda-13.conf", "/usr/local/cuda-13/targets/x86_64-linux/lib\n", 0o644)],
        scripts={"postinst": "#!/bin/sh\nset -e\nldconfig || true\n"},
        description="Common config package for CUDA Toolkit 13."))
    debs.append(build_deb(
        work, repo, "cuda-toolkit-13-0-config-common", newest, "all",
        scripts={
            "postinst": textwrap.dedent("""\
                #!/bin/sh
                set -e
                if [ "$1" = configure ]; then
                    update-alternatives --install /usr/local/cuda cuda /usr/local/cuda-13.0 130
                    update-alternatives --install /usr/local/cuda-13 cuda-13 /usr/local/cuda-13.0 130
                fi
                """),
            "prerm": textwrap.dedent("""\
                #!/bin/sh
                set -e
                if [ "$1" = remove ] || [ "$1" = deconfigure ]; then
                    update-alternatives --remove cuda /usr/local/cuda-13.0 || true
                    update-alternatives --remove cuda-13 /usr/local/cuda-13.0 || true
                fi
                """)},
        description="Common config package for CUDA Toolkit 13.0."))

    debs += toolkit_packages(work, repo, cache)
    for toolkit in params["toolkit_versions"]:
        rel = RELEASES[toolkit]
        debs.append(build_deb(
            work, repo, "cuda-toolkit-13-0", toolkit + "-1", DEB_ARCH,
            files=[(cuda_wheels.PREFIX + "/version.json", version_json(toolkit, rel), 0o644)],
            depends=["%s (>= %s)" % (pkg, rel[comp]) if comp else pkg for pkg, comp in TOOLKIT_COMPONENTS]
            + ["cuda-toolkit-13-0-config-common", "cuda-toolkit-13-config-common", "cuda-toolkit-config-common"],
            description="CUDA Toolkit 13.0 meta-package"))
        debs.append(build_deb(
            work, repo, "cuda-13-0", toolkit + "-1", DEB_ARCH,
            depends=["cuda-toolkit-13-0 (>= %s)" % toolkit, "cuda-drivers (>= 580.65.06)"],
            description="CUDA 13.0 meta-package (toolkit + driver)"))

    drv = params["driver_version"]
    debs.append(build_deb(
        work, repo, "cuda-drivers", drv + "-1", DEB_ARCH,
        scripts={"preinst": _driver_trap("cuda-drivers")},
        description="CUDA Driver meta-package (sandbox trap: its preinst fails)"))
    for name, depends, section, description in DRIVER_PACKAGES:
        debs.append(build_deb(
            work, repo, name, drv + "-1", DEB_ARCH, section=section,
            depends=["%s (= %s-1)" % (dep, drv) for dep in depends],
            scripts={"preinst": _driver_trap(name)},
            description=description + "\n Sandbox stand-in: its preinst fails (a container cannot take a driver)."))
    return debs



# ------------------------------------------------------------------------------------------- index
def _hashes(path: Path):
    data = path.read_bytes()
    return {alg: getattr(hashlib, alg)(data).hexdigest() for alg in ("md5", "sha1", "sha256", "sha512")}, len(data)


def write_index(repo: Path, home: Path, fpr: str, origin="NVIDIA", label="NVIDIA CUDA", arch=ARCH_DIR):
    """Packages, Packages.gz and the signed Release. The Release has the fields of NVIDIA's own flat repositories
    (.../cuda/repos/debian12/x86_64/Release): Origin NVIDIA, Label NVIDIA CUDA, Architecture x86_64, Date and the
    checksums, and no Suite, Codename, Version or Components -- apt-cache policy shows NVIDIA's repository as
    ``release o=NVIDIA,l=NVIDIA CUDA,c=``, as it shows this one. The cuda_toolkit role's driver pin names the
    repository by these two fields (``Pin: release o=NVIDIA,l=NVIDIA CUDA``), so the stand-in must keep them."""
    env = dict(os.environ, LC_ALL="C")
    packages = subprocess.run(["apt-ftparchive", "packages", "."], cwd=repo, env=env, check=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE).stdout
    (repo / "Packages").write_bytes(packages)
    buf = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buf, mtime=0) as gz:
        gz.write(packages)
    (repo / "Packages.gz").write_bytes(buf.getvalue())
    import email.utils
    lines = ["Origin: %s" % origin, "Label: %s" % label, "Architecture: %s" % arch,
             "Date: %s" % email.utils.formatdate(SOURCE_DATE_EPOCH, usegmt=True)]
    for title, alg in (("MD5Sum", "md5"), ("SHA1", "sha1"), ("SHA256", "sha256"), ("SHA512", "sha512")):
        lines.append(title + ":")
        for name in ("Packages", "Packages.gz"):
            h, size = _hashes(repo / name)
            lines.append(" %s %16d %s" % (h[alg], size, name))
    (repo / "Release").write_text("\n".join(lines) + "\n")
    for f in ("InRelease", "Release.gpg"):
        (repo / f).unlink(missing_ok=True)
    common = ["--faked-system-time", "%d!" % SOURCE_DATE_EPOCH, "--local-user", fpr, "--digest-algo", "SHA512"]
    _gpg(home, *common, "--clearsign", "--output", str(repo / "InRelease"), str(repo / "Release"))
    _gpg(home, *common, "--armor", "--detach-sign", "--output", str(repo / "Release.gpg"), str(repo / "Release"))


# ------------------------------------------------------------------------------------------- main
def recipe_hash(params, fpr):
    h = hashlib.sha256()
    h.update(Path(__file__).read_bytes())
    h.update(json.dumps(params, sort_keys=True).encode())
    h.update(fpr.encode())
    h.update(cuda_wheels.recipe_hash().encode())
    return h.hexdigest()


def build_cuda_repo(out, params=None, force=False, cache=None):
    """Build (or keep) the repo under <out>/cuda-repo. Returns a dict describing it. ``cache``: where the
    compiler's wheels and component debs are kept (cuda_wheels.cache_dir)."""
    params = dict(DEFAULT_PARAMS, **(params or {}))
    out = Path(out).resolve()
    base = out / "cuda-repo"
    repo = base / DISTRO / ARCH_DIR
    stamp = base / ".stamp"
    home, fpr = ensure_key(out / ".keys")
    try:
        want = recipe_hash(params, fpr)
        info = {"base": str(base), "repo": str(repo), "fingerprint": fpr,
                "keyring": str(base / "cuda-archive-keyring.gpg"), "pubkey": str(repo / KEY_FILE_NAME),
                "node_url": "file:///srv/sandbox/cuda-repo/%s/%s/" % (DISTRO, ARCH_DIR), "rebuilt": False}
        if not force and stamp.exists() and stamp.read_text().strip() == want and \
                all((repo / f).exists() for f in ("InRelease", "Release.gpg", "Packages", KEY_FILE_NAME)):
            return info
        if base.exists():
            shutil.rmtree(base)
        repo.mkdir(parents=True)
        pub_bin = _gpg(home, "--export", fpr).stdout
        pub_asc = _gpg(home, "--armor", "--export", fpr).stdout
        (base / "cuda-archive-keyring.gpg").write_bytes(pub_bin)
        (repo / KEY_FILE_NAME).write_bytes(pub_asc)
        scratch = cuda_wheels.cache_dir(cache)
        scratch.mkdir(parents=True, exist_ok=True)
        # scratch on the cache's filesystem: the toolkit's files are hardlinked into the package roots
        with tempfile.TemporaryDirectory(prefix="cuda-repo-work-", dir=scratch) as work:
            build_packages(Path(work), repo, pub_bin, params, cache)
        write_index(repo, home, fpr)
        stamp.write_text(want + "\n")
        info["rebuilt"] = True
        return info
    finally:
        shutil.rmtree(home, ignore_errors=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", nargs="?", default=".sandbox/artifacts")
    ap.add_argument("--force", action="store_true")
    args = ap.parse_args(argv)
    info = build_cuda_repo(args.out, force=args.force)
    print(json.dumps(info, indent=2))


if __name__ == "__main__":
    main()
