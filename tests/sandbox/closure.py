#!/usr/bin/env python3
"""The real SGLang closure for the sandbox nodes: a per-machine wheel cache served to them as a fleet wheelhouse.

``sglang==<deployment_sglang_version>`` and its whole dependency closure (207 packages for Debian 12's CPython 3.11,
about 4.4 GB of wheels: torch 2.14.1+cu130, the CUDA 13 ``nvidia-*`` libraries, triton 3.8.0, sglang-kernel 0.4.10,
flashinfer-python 0.7.2, ...) held to the pins the product installs with (read from the roles' defaults, their one
place: ``sglang_build_torch_version``, ``sglang_build_constraints``, ``flashinfer_build_version``), plus what the
release build installs besides (``uv==sglang_build_uv_version``). Downloaded once per machine with pip into
``$SANDBOX_MACHINE_CACHE/closure/<recipe>/`` (default ``/var/cache/sglang-ansible-sandbox``, outside any clone, so a
fresh clone on a warm machine downloads nothing), then hardlinked into ``<artifacts>/wheelhouse/closure/`` (the
artifacts are mounted read-only into every node at ``/srv/sandbox``): the nodes install from
``--no-index --find-links /srv/sandbox/wheelhouse/closure`` as an air-gapped fleet installs from its wheelhouse.

CLI: ``python tests/sandbox/closure.py [ARTIFACTS_DIR]`` prints the wheels and the cache used.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import wheelhouse  # noqa: E402

NODE_DIR = "wheelhouse/closure"


def machine_cache(cache=None) -> Path:
    """Where per-machine downloads live: ``$SANDBOX_MACHINE_CACHE``, else /var/cache/sglang-ansible-sandbox when it can be
    written, else ~/.cache/sglang-ansible-sandbox."""
    if cache or os.environ.get("SANDBOX_MACHINE_CACHE"):
        return Path(cache or os.environ["SANDBOX_MACHINE_CACHE"]).resolve()
    system = Path("/var/cache/sglang-ansible-sandbox")
    try:
        system.mkdir(parents=True, exist_ok=True)
        if os.access(system, os.W_OK):
            return system
    except OSError:
        pass
    return Path.home() / ".cache" / "sglang-ansible-sandbox"


def requirements() -> list[str]:
    """What a release asks for: sglang at the deployment's version plus the installer (``uv``)."""
    return ["sglang==%s" % wheelhouse._role_default("deployment", "deployment_sglang_version"),
            "uv==%s" % wheelhouse._role_default("deployment", "sglang_build_uv_version")]


def constraints() -> list[str]:
    """The pins the product writes into a release's constraints.txt (roles/sglang_build/tasks/main.yml):
    sglang_build_constraints, torch==sglang_build_torch_version and flashinfer-python==flashinfer_build_version."""
    return (list(wheelhouse._role_default("deployment", "sglang_build_constraints"))
            + ["torch==%s" % wheelhouse._role_default("deployment", "sglang_build_torch_version"),
               "flashinfer-python==%s" % wheelhouse._role_default("flashinfer_build", "flashinfer_build_version")])


def recipe() -> str:
    """The cache key: the requirements, the pins and the node's target."""
    text = json.dumps({"requirements": requirements(), "constraints": constraints(),
                       "target": list(wheelhouse.NODE_TARGET)}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def download(cache=None, quiet=True) -> tuple[Path, bool]:
    """(directory of the closure's wheels, downloaded now?). The directory appears only complete (a download into a
    temporary sibling, renamed when pip has finished), so an interrupted run leaves nothing a later one trusts."""
    root = machine_cache(cache) / "closure"
    final = root / recipe()
    if (final / "closure.json").is_file():
        return final, False
    root.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".partial-", dir=root))
    try:
        pins = work / "constraints.txt"
        pins.write_text("\n".join(constraints()) + "\n")
        subprocess.run([sys.executable, "-m", "pip", "download", "--only-binary=:all:", *wheelhouse.NODE_TARGET,
                        *(["--quiet"] if quiet else []), "--dest", str(work), "-c", str(pins), *requirements()],
                       check=True)
        wheels = sorted(p.name for p in work.glob("*.whl"))
        (work / "closure.json").write_text(json.dumps({"requirements": requirements(), "constraints": constraints(),
                                                       "wheels": wheels}, indent=1) + "\n")
        pins.unlink()
        try:
            os.rename(work, final)
        except OSError:  # another run finished first: keep its copy
            if not (final / "closure.json").is_file():
                raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return final, True


def run(argv, log=None, env=None) -> str:
    """Run ``argv`` (paths allowed), its output appended to ``log``; its stdout, or RuntimeError naming its end."""
    done = subprocess.run([str(a) for a in argv], env=env, text=True, capture_output=True)
    if log is not None:
        log.write("$ %s\n%s%s" % (" ".join(map(str, argv)), done.stdout, done.stderr))
    if done.returncode != 0:
        raise RuntimeError("%s failed (exit %d): %s" % (" ".join(map(str, argv[:3])), done.returncode,
                                                       (done.stderr or done.stdout).strip()[-2000:]))
    return done.stdout


def venv(dest: Path, python, requirement: str, work: Path, log, cache_dir: Path, compile_bytecode=False) -> None:
    """A virtualenv at ``dest`` on ``python`` holding ``requirement`` from the machine's closure, installed as a release
    installs it: with uv (the release's installer, itself from the closure, in ``work/uv``), held to the product's
    pins, hardlinked from uv's cache in ``cache_dir``."""
    wheels, _downloaded = download()
    pins = work / "constraints.txt"
    pins.write_text("\n".join(constraints()) + "\n")
    uv_pin = next(r for r in requirements() if r.startswith("uv=="))
    run([sys.executable, "-m", "venv", work / "uv"], log)
    run([work / "uv" / "bin" / "pip", "install", "-q", "--disable-pip-version-check", "--no-index", "--find-links",
         wheels, uv_pin], log)
    run([python, "-m", "venv", "--without-pip", dest], log)
    run([work / "uv" / "bin" / "uv", "pip", "install", "--no-config", "--python", dest / "bin" / "python",
         "--cache-dir", cache_dir, "--link-mode", "hardlink", *(["--compile-bytecode"] if compile_bytecode else []),
         "--no-index", "--find-links", wheels, "-c", pins, requirement], log)


def link_into(source: Path, dest: Path) -> dict:
    """Make ``dest`` hold exactly the wheels of ``source``: hardlinks where both are on one filesystem (no bytes
    copied), else copies. Returns {"wheels": n, "bytes": total, "linked": bool}."""
    dest.mkdir(parents=True, exist_ok=True)
    wanted = {p.name: p for p in source.glob("*.whl")}
    for old in dest.glob("*.whl"):
        if old.name not in wanted:
            old.unlink()
    linked, total = True, 0
    for name, path in sorted(wanted.items()):
        target = dest / name
        total += path.stat().st_size
        if target.exists() and target.stat().st_size == path.stat().st_size:
            continue
        target.unlink(missing_ok=True)
        try:
            os.link(path, target)
        except OSError:
            linked = False
            shutil.copy2(path, target)
    return {"wheels": len(wanted), "bytes": total, "linked": linked}


def build(artifacts: Path, cache=None) -> dict:
    """Download (once per machine) and place the closure under ``artifacts/wheelhouse/closure``."""
    source, downloaded = download(cache)
    info = link_into(source, Path(artifacts) / NODE_DIR)
    info.update({"cache": str(source), "downloaded": downloaded})
    return info


if __name__ == "__main__":
    out = Path(sys.argv[1] if len(sys.argv) > 1 else ".sandbox/artifacts")
    print(json.dumps(build(out), indent=1))
