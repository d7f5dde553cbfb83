#!/usr/bin/env python3
"""A local, signed, flat apt repository standing in for the node's Debian mirror, holding real Debian packages.

A real GPU host gets the host compiler nvcc needs (``g++``: nvcc runs it to preprocess and compile every
``.cu`` and to link) from its distribution's mirror -- NVIDIA's ``cuda-toolkit-13-0`` does not depend on it,
which is why the ``cuda_toolkit`` role installs ``cuda_toolkit_host_compiler_packages`` itself. The sandbox
node may not reach the internet (tests talk to loopback and their own containers only), so this repo carries
the real Debian 12 packages of that closure, downloaded once on the controller (which reaches the Debian
mirror) with ``apt-get download`` into ``<cache>/debian-debs`` and checked against the sha256 apt lists. The
monitoring role's packages (``prometheus``, ``prometheus-alertmanager``, ``prometheus-node-exporter``: the
distribution's Prometheus 2.42, Alertmanager 0.25 and node exporter 1.5) and the gateway's ``nginx`` (1.22) are there
for the same reason:

    <out>/debian-repo/              Packages(.gz) Release InRelease Release.gpg  *.deb
    <out>/debian-repo/sandbox-debian-keyring.gpg   the public key (the cuda-repo's throwaway key)

``tests/sandbox/playbooks/sandbox_prepare.yml`` points the node's ``/etc/apt/sources.list.d/debian.sources`` here
(``file:///srv/sandbox/debian-repo/``, ``Signed-By`` that keyring): the node installs from a local mirror as an
air-gapped host would. ``ROOTS`` are host_prerequisites' packages (python3-venv, python3-dev, python3-apt,
python3-packaging, python3-debian, git, gcc: the bare node image lacks them all) and the roles' other packages; the closure is every package those
need (Depends and Pre-Depends, recursively, no Recommends: the roles install without them), as resolved by the controller's apt -- the
same Debian 12 release and mirror the node image is built from (tests/sandbox/image/build-image.sh).
Idempotent: a stamp holds sha256(this file + the resolved file names); an unchanged closure is not rebuilt.

CLI: ``python tests/sandbox/distro_repo.py OUT``
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import cuda_repo  # noqa: E402
import cuda_wheels  # noqa: E402



def host_prerequisites(key="Debian-12") -> tuple[str, ...]:
    """What roles/host_prerequisites installs on a Debian 12 node (every package of its map entry): read from the role's
    defaults, their one place, so the mirror serves exactly what the product installs on a bare node."""
    import yaml  # the controller venv's PyYAML (requirements.txt)

    defaults = yaml.safe_load((HERE.parents[1] / "roles" / "host_prerequisites" / "defaults" / "main.yml").read_text())
    packages = defaults["host_prerequisites_distributions"][key]["packages"]
    return tuple(p for group in ("all", "gpu_node") for p in packages.get(group) or [])


# host_prerequisites' packages (the bare node image has none of them), cuda_toolkit_host_compiler_packages, the
# gateway's nginx and the monitoring role's packages (roles/*/defaults/main.yml)
ROOTS = host_prerequisites() + ("g++", "prometheus", "prometheus-alertmanager", "prometheus-node-exporter", "nginx")
KEYRING_NAME = "sandbox-debian-keyring.gpg"
NODE_URL = "file:///srv/sandbox/debian-repo/"
APT = ["-o", "APT::Sandbox::User=root", "-o", "Debug::NoLocking=1"]


def _run(cmd, **kw):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          env=dict(os.environ, LC_ALL="C"), **kw)


def closure(roots=ROOTS) -> list[str]:
    """Every real package ``roots`` need (Depends + Pre-Depends, recursive; virtual names dropped)."""
    out = _run(["apt-cache", "depends", "--recurse", "--no-recommends", "--no-suggests", "--no-conflicts",
                "--no-breaks", "--no-replaces", "--no-enhances", *roots], check=True).stdout
    return sorted({line.strip() for line in out.splitlines() if line and not line[0].isspace()
                   and not line.startswith("<")})


def _uris(names):
    """[(file name, size, sha256)] apt would download for ``names``; refreshes the apt lists once if needed."""
    for attempt in (1, 2):
        r = _run(["apt-get", *APT, "download", "--print-uris", *names])
        if r.returncode == 0:
            break
        if attempt == 2:
            raise RuntimeError("apt-get download --print-uris %s failed: %s" % (" ".join(names), r.stderr.strip()))
        _run(["apt-get", "update", "-qq"], check=True)
    files = []
    for line in r.stdout.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[3].startswith("SHA256:"):
            files.append((parts[1], int(parts[2]), parts[3].split(":", 1)[1]))
    return files


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def fetch(roots=ROOTS, cache=None) -> list[Path]:
    """Download the closure's .debs into <cache>/debian-debs unless present with the listed sha256."""
    store = cuda_wheels.cache_dir(cache) / "debian-debs"
    store.mkdir(parents=True, exist_ok=True)
    files = _uris(closure(roots))
    missing = [f for f in files if not (store / f[0]).is_file() or _sha256(store / f[0]) != f[2]]
    if missing:
        names = [f[0].split("_")[0] for f in missing]
        r = _run(["apt-get", *APT, "download", *names], cwd=store)
        if r.returncode != 0:
            raise RuntimeError("apt-get download failed: %s" % r.stderr.strip())
    for name, _size, sha in files:
        if _sha256(store / name) != sha:
            raise RuntimeError("%s: sha256 differs from the apt lists' %s" % (store / name, sha))
    return [store / f[0] for f in files]


def build_debian_repo(out, roots=ROOTS, force=False, cache=None) -> dict:
    out = Path(out).resolve()
    repo = out / "debian-repo"
    stamp = repo / ".stamp"
    debs = fetch(roots, cache)
    home, fpr = cuda_repo.ensure_key(out / ".keys")
    try:
        h = hashlib.sha256(Path(__file__).read_bytes())
        h.update(json.dumps(sorted(d.name for d in debs)).encode())
        h.update(fpr.encode())
        want = h.hexdigest()
        info = {"repo": str(repo), "node_url": NODE_URL, "keyring": str(repo / KEYRING_NAME),
                "packages": len(debs), "roots": list(roots), "rebuilt": False}
        if not force and stamp.is_file() and stamp.read_text().strip() == want and (repo / "InRelease").is_file():
            return info
        shutil.rmtree(repo, ignore_errors=True)
        repo.mkdir(parents=True)
        for deb in debs:
            # apt-get download escapes an epoch as %3a (g++_4%3a12.2.0-3_amd64.deb); pool names carry none,
            # and an escaped name would not survive the file: URI
            name = re.sub(r"_\d+%3a", "_", deb.name)
            try:
                os.link(deb, repo / name)
            except OSError:
                shutil.copy2(deb, repo / name)
        (repo / KEYRING_NAME).write_bytes(cuda_repo._gpg(home, "--export", fpr).stdout)
        cuda_repo.write_index(repo, home, fpr, origin="Debian (sandbox mirror)", label="Debian", arch="amd64")
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
    print(json.dumps(build_debian_repo(args.out, force=args.force), indent=2))


if __name__ == "__main__":
    main()
