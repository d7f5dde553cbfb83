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
        cuda-cudart-13-0_*, cuda-cudart-dev-13-0_*, cuda-toolkit-*config-common_*, cuda-13-0_*,
        cuda-drivers_* (a trap: see below)
    <out>/.keys/cuda-repo-signing.sec.asc   the throwaway secret key (kept so the key stays stable)

Packages (versions follow the real 13.0 update 2 / 13.0 GA packaging):

* ``cuda-keyring 1.1-1 all``: ``/usr/share/keyrings/cuda-archive-keyring.gpg`` (our public key, binary
  keyring) and ``/etc/apt/sources.list.d/cuda-debian12-x86_64.list`` pointing at NVIDIA's REAL URL with
  ``signed-by`` that keyring -- exactly like the real package. On an offline node that list makes
  ``apt-get update`` fail until the role replaces/overrides it with the configured repo URL.
* ``cuda-toolkit-13-0`` 13.0.2-1 (and 13.0.0-1 for pinning tests) -> ``cuda-nvcc-13-0``, ``cuda-cudart-13-0``,
  ``cuda-cudart-dev-13-0`` (``>=`` dependencies, like the real metapackage), ``cuda-toolkit-13-0-config-common``,
  ``cuda-toolkit-13-config-common``, ``cuda-toolkit-config-common``; owns ``/usr/local/cuda-13.0/version.json``.
* ``cuda-nvcc-13-0``: ``/usr/local/cuda-13.0/bin/nvcc`` (shell script; ``--version`` prints the real text,
  ``--list-gpu-arch``/``--list-gpu-code`` list compute_75..compute_121; real compiles are refused).
* ``cuda-cudart-13-0``: ``targets/x86_64-linux/lib/libcudart.so.13*`` and the ``lib64 -> targets/x86_64-linux/lib``
  symlink (CUDA lives in lib64, not lib). The library is a minimal valid x86-64 ELF with SONAME
  ``libcudart.so.13``: ldconfig indexes it, dlopen succeeds, but it exports no symbols.
* ``cuda-toolkit-13-0-config-common``: postinst ``update-alternatives --install /usr/local/cuda cuda
  /usr/local/cuda-13.0 130`` and ``... /usr/local/cuda-13 cuda-13 /usr/local/cuda-13.0 130`` (priority = major*10
  + minor, as the real packages do); prerm removes them.
* ``cuda-toolkit-config-common`` / ``cuda-toolkit-13-config-common``: ``/etc/ld.so.conf.d/000_cuda.conf`` and
  ``988_cuda-13.conf`` + ldconfig.
* ``cuda-13-0`` -> ``cuda-runtime-13-0``-like dependency on ``cuda-drivers (>= 580.65.06)``; ``cuda-drivers``
  580.95.05-1 exists but its preinst FAILS (a container cannot take a kernel driver): installing the ``cuda``
  metapackages instead of ``cuda-toolkit-13-0`` is caught, as it would be caught on a real host by a driver swap.

Idempotent: a stamp holds sha256(this file + params + key fingerprint); a matching stamp and present
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

DISTRO = "debian12"
ARCH_DIR = "x86_64"
DEB_ARCH = "amd64"
REAL_URL = "https://developer.download.nvidia.com/compute/cuda/repos/%s/%s/" % (DISTRO, ARCH_DIR)
KEY_FILE_NAME = "3bf863cc.pub"
KEYRING_PATH = "/usr/share/keyrings/cuda-archive-keyring.gpg"
SOURCE_DATE_EPOCH = 1759276800  # 2025-10-01T00:00:00Z: fixed, in the past (apt rejects future Dates)
MAINTAINER = "cudatools <cudatools@nvidia.com>"
KEY_UID = "Sandbox CUDA repo signing key (throwaway, tests only) <sandbox-cuda@invalid>"

# toolkit version -> component versions and nvcc --version text (13.0.2 = V13.0.88, real text)
RELEASES = {
    "13.0.2": {
        "nvcc": "13.0.88", "cudart": "13.0.96",
        "built_on": "Wed_Aug_20_01:58:59_PM_PDT_2025",
        "build": "cuda_13.0.r13.0/compiler.36424714_0",
    },
    "13.0.0": {
        "nvcc": "13.0.48", "cudart": "13.0.48",
        "built_on": "Fri_Jul_25_05:41:38_PM_PDT_2025",   # approximated
        "build": "cuda_13.0.r13.0/compiler.36260728_0",  # approximated
    },
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
              description="", scripts=None, conffiles=(), section="devel", extra_control=None):
    """files: (path, content, mode); links: (path, target); scripts: {"postinst": "..."}."""
    root = work / ("%s_%s" % (name, version))
    if root.exists():
        shutil.rmtree(root)
    (root / "DEBIAN").mkdir(parents=True)
    for path, content, mode in files:
        _write(root, path, content, mode)
    for path, target in links:
        _symlink(root, path, target)
    size_kb = max(1, sum(f.stat().st_size for f in root.rglob("*") if f.is_file() and "DEBIAN" not in f.parts)
                  // 1024)
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
    for p in sorted(root.rglob("*"), reverse=True):
        os.utime(p, (SOURCE_DATE_EPOCH, SOURCE_DATE_EPOCH), follow_symlinks=False)
    deb = out_dir / ("%s_%s_%s.deb" % (name, version, arch))
    env = dict(os.environ, SOURCE_DATE_EPOCH=str(SOURCE_DATE_EPOCH))
    subprocess.run(["dpkg-deb", "--root-owner-group", "-Zxz", "--build", str(root), str(deb)],
                   env=env, check=True, stdout=subprocess.DEVNULL)
    shutil.rmtree(root)
    return deb


def elf_stub_so(soname: str, size=4096) -> bytes:
    """A minimal, valid x86-64 ELF shared object with a DT_SONAME (no code, no symbols).

    Enough for ``ldconfig`` to index it (``ldconfig -p`` lists it) and for ``file``/``readelf`` to
    recognise it; loading it with dlopen succeeds but it exports nothing."""
    import struct
    strtab = b"\0" + soname.encode() + b"\0"
    str_off, hash_off, sym_off, dyn_off = 0x100, 0x120, 0x140, 0x160
    dyn = [(14, 1), (4, hash_off), (5, str_off), (6, sym_off), (10, len(strtab)), (11, 24), (0, 0)]
    dyn_bytes = b"".join(struct.pack("<qQ", t, v) for t, v in dyn)
    ehdr = struct.pack("<16sHHIQQQIHHHHHH", b"\x7fELF\x02\x01\x01" + b"\0" * 9, 3, 62, 1, 0, 64, 0, 0,
                       64, 56, 2, 64, 0, 0)
    load = struct.pack("<IIQQQQQQ", 1, 6, 0, 0, 0, size, size, 0x1000)  # RW: ld.so relocates .dynamic
    dynamic = struct.pack("<IIQQQQQQ", 2, 6, dyn_off, dyn_off, dyn_off, len(dyn_bytes), len(dyn_bytes), 8)
    buf = bytearray(size)
    buf[0:64] = ehdr
    buf[64:64 + 56] = load
    buf[120:120 + 56] = dynamic
    buf[str_off:str_off + len(strtab)] = strtab
    buf[hash_off:hash_off + 16] = struct.pack("<IIII", 1, 1, 0, 0)  # DT_HASH: 1 bucket, 1 (null) symbol
    buf[dyn_off:dyn_off + len(dyn_bytes)] = dyn_bytes
    return bytes(buf)


def nvcc_script(toolkit, rel):
    ver = rel["nvcc"]
    archs = [75, 80, 86, 87, 88, 89, 90, 100, 103, 110, 120, 121]
    return textwrap.dedent("""\
        #!/bin/sh
        # Sandbox stand-in for nvcc %(ver)s (CUDA %(toolkit)s). Prints the real version text; cannot compile.
        case "$1" in
          --version|-V)
            cat <<'EOF'
        nvcc: NVIDIA (R) Cuda compiler driver
        Copyright (c) 2005-2025 NVIDIA Corporation
        Built on %(built_on)s
        Cuda compilation tools, release %(mm)s, V%(ver)s
        Build %(build)s
        EOF
            exit 0 ;;
          --list-gpu-arch|-arch-ls)
            printf '%%s\\n' %(arch_list)s
            exit 0 ;;
          --list-gpu-code|-code-ls)
            printf '%%s\\n' %(code_list)s
            exit 0 ;;
        esac
        echo "nvcc fatal   : sandbox stand-in nvcc cannot compile (args: $*)" >&2
        exit 1
        """) % {"ver": ver, "toolkit": toolkit, "built_on": rel["built_on"], "build": rel["build"],
                "mm": ".".join(toolkit.split(".")[:2]),
                "arch_list": " ".join("compute_%d" % a for a in archs),
                "code_list": " ".join("sm_%d" % a for a in archs)}


def version_json(toolkit, rel):
    data = {
        "cuda": {"name": "CUDA SDK", "version": toolkit},
        "cuda_cudart": {"name": "CUDA Runtime (cudart)", "version": rel["cudart"]},
        "cuda_nvcc": {"name": "CUDA NVCC", "version": rel["nvcc"]},
    }
    return json.dumps(data, indent=3, sort_keys=True) + "\n"


def build_packages(work: Path, repo: Path, pub_binary: bytes, params):
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

    prefix = "/usr/local/cuda-13.0"
    tlib = prefix + "/targets/x86_64-linux/lib"
    for toolkit in params["toolkit_versions"]:
        rel = RELEASES[toolkit]
        cudart_v = rel["cudart"]
        debs.append(build_deb(
            work, repo, "cuda-nvcc-13-0", rel["nvcc"] + "-1", DEB_ARCH,
            files=[(prefix + "/bin/nvcc", nvcc_script(toolkit, rel), 0o755),
                   (prefix + "/bin/nvcc.profile", "PATH += $(TOP)/bin\nINCLUDES += \"-I$(TOP)/include\"\n", 0o644)],
            depends=["cuda-toolkit-13-0-config-common"],
            description="CUDA nvcc (sandbox stand-in)"))
        debs.append(build_deb(
            work, repo, "cuda-cudart-13-0", cudart_v + "-1", DEB_ARCH,
            files=[(tlib + "/libcudart.so." + cudart_v, elf_stub_so("libcudart.so.13"), 0o644)],
            links=[(tlib + "/libcudart.so.13", "libcudart.so." + cudart_v),
                   (prefix + "/lib64", "targets/x86_64-linux/lib")],
            depends=["cuda-toolkit-13-0-config-common", "cuda-toolkit-13-config-common",
                     "cuda-toolkit-config-common"],
            scripts={"postinst": "#!/bin/sh\nset -e\nldconfig || true\n"},
            description="CUDA Runtime native Libraries (sandbox stand-in)"))
        debs.append(build_deb(
            work, repo, "cuda-cudart-dev-13-0", cudart_v + "-1", DEB_ARCH,
            files=[(prefix + "/targets/x86_64-linux/include/cuda_runtime_api.h",
                    "/* sandbox stand-in */\n#define CUDART_VERSION 13000\n", 0o644)],
            links=[(tlib + "/libcudart.so", "libcudart.so.13"),
                   (prefix + "/include", "targets/x86_64-linux/include")],
            depends=["cuda-cudart-13-0 (>= %s)" % cudart_v],
            description="CUDA Runtime native dev links, headers (sandbox stand-in)"))
        debs.append(build_deb(
            work, repo, "cuda-toolkit-13-0", toolkit + "-1", DEB_ARCH,
            files=[(prefix + "/version.json", version_json(toolkit, rel), 0o644)],
            depends=["cuda-nvcc-13-0 (>= %s)" % rel["nvcc"], "cuda-cudart-13-0 (>= %s)" % cudart_v,
                     "cuda-cudart-dev-13-0 (>= %s)" % cudart_v, "cuda-toolkit-13-0-config-common",
                     "cuda-toolkit-13-config-common", "cuda-toolkit-config-common"],
            description="CUDA Toolkit 13.0 meta-package (sandbox stand-in)"))
        debs.append(build_deb(
            work, repo, "cuda-13-0", toolkit + "-1", DEB_ARCH,
            depends=["cuda-toolkit-13-0 (>= %s)" % toolkit, "cuda-drivers (>= 580.65.06)"],
            description="CUDA 13.0 meta-package (toolkit + driver)"))

    drv = params["driver_version"]
    debs.append(build_deb(
        work, repo, "cuda-drivers", drv + "-1", DEB_ARCH,
        scripts={"preinst": textwrap.dedent("""\
            #!/bin/sh
            echo "cuda-drivers (sandbox): refusing to install an NVIDIA kernel driver on a sandbox node." >&2
            echo "A real host would now replace its driver and need a reboot; install cuda-toolkit-13-0, not cuda." >&2
            exit 1
            """)},
        description="CUDA Driver meta-package (sandbox trap: its preinst fails)"))
    return debs


# ------------------------------------------------------------------------------------------- index
def _hashes(path: Path):
    data = path.read_bytes()
    return {alg: getattr(hashlib, alg)(data).hexdigest() for alg in ("md5", "sha1", "sha256", "sha512")}, len(data)


def write_index(repo: Path, home: Path, fpr: str):
    env = dict(os.environ, LC_ALL="C")
    packages = subprocess.run(["apt-ftparchive", "packages", "."], cwd=repo, env=env, check=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE).stdout
    (repo / "Packages").write_bytes(packages)
    buf = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buf, mtime=0) as gz:
        gz.write(packages)
    (repo / "Packages.gz").write_bytes(buf.getvalue())
    import email.utils
    lines = ["Origin: NVIDIA", "Label: NVIDIA CUDA", "Architecture: %s" % ARCH_DIR,
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
    return h.hexdigest()


def build_cuda_repo(out, params=None, force=False):
    """Build (or keep) the repo under <out>/cuda-repo. Returns a dict describing it."""
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
        with tempfile.TemporaryDirectory(prefix="cuda-repo-work-") as work:
            build_packages(Path(work), repo, pub_bin, params)
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
