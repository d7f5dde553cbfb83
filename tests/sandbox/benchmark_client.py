#!/usr/bin/env python3
"""The benchmark client for the fleet sandbox: the real SGLang 0.5.23 closure in a virtualenv the nodes can run.

The rollout's performance gate runs ``sglang.benchmark.serving`` (roles/generation/tasks/benchmark.yml), by default
with the live release's own Python. The fleet sandbox's releases are source builds of the simulator
(inventory/sandbox-fleet/group_vars/gpu_nodes/standin.yml: their patch series needs the source method, and the real
source tree builds Rust extensions from a registry this machine cannot reach), so their ``sglang`` is the simulator and
holds no benchmark. A real source build holds it; the fleet names this client instead (``generation_benchmark_python``
in inventory/sandbox-fleet/group_vars/gpu_nodes/fleet.yml): the same wheels a real release installs (closure.py's
machine cache, the product's pins), so the client is the pinned release's own benchmark, not a second tool.

Built once per machine with uv (hardlinked from its cache, bytecode compiled as a release's is) into
``$SANDBOX_MACHINE_CACHE/benchmark-client/<recipe>/venv``, on Debian 12's ``/usr/bin/python3``: the nodes' own
interpreter at the same path, so the virtualenv runs there at any mount point (Python finds ``pyvenv.cfg`` beside its
``bin``). ``build()`` hardlinks the tree into ``<artifacts>/benchmark-client/venv`` (the nodes see it read-only at
``/srv/sandbox/benchmark-client/venv``). Measured on 2 cores: about 2 minutes and 11 GB once per machine, seconds after.

CLI: ``python tests/sandbox/benchmark_client.py [ARTIFACTS_DIR]`` prints where the client is placed and where from.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import closure  # noqa: E402
import cuda_wheels  # noqa: E402

REPO_ROOT = HERE.parent.parent
NODE_DIR = "benchmark-client"
# The nodes' interpreter (a stock Debian 12 image's python3), which the virtualenv's bin/python links to.
BASE_PYTHON = Path("/usr/bin/python3")
# What must import, with no GPU, for the module's driver (plugins/modules/sglang_benchmark.py) to run.
PROBE = "import sglang.benchmark.serving, sglang.version; print(sglang.version.__version__)"


def recipe() -> dict:
    version = subprocess.run([BASE_PYTHON, "-c", "import sys; print('%d.%d.%d' % sys.version_info[:3])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    return {"closure": closure.recipe(), "python": version, "requirement": closure.requirements()[0]}


def recipe_key(spec=None) -> str:
    return hashlib.sha256(json.dumps(spec or recipe(), sort_keys=True).encode()).hexdigest()[:16]


def install(out: Path, spec: dict, work: Path, log) -> dict:
    """``out/venv``: a virtualenv on BASE_PYTHON with the closure's sglang, installed as a release installs it (uv, the
    pins), and ``out/build.json``."""
    dest = out / "venv"
    started = time.monotonic()
    closure.venv(dest, BASE_PYTHON, spec["requirement"], work, log, out / "uv-cache", compile_bytecode=True)
    seconds = round(time.monotonic() - started, 1)
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")
    env.pop("PYTHONPATH", None)
    version = closure.run([dest / "bin" / "python", "-c", PROBE], log, env).strip().splitlines()[-1]
    info = {"recipe": spec, "install_seconds": seconds, "sglang": version}
    (out / "build.json").write_text(json.dumps(info, indent=1, sort_keys=True) + "\n")
    return info


def ensure(cache=None) -> tuple[Path, dict, bool]:
    """(the cached directory holding venv/, its build.json, built now?): once per recipe per machine. A new recipe's
    client replaces the old one (11 GB each)."""
    spec = recipe()
    root = closure.machine_cache(cache) / "benchmark-client"
    key = recipe_key(spec)
    final, info, built = cuda_wheels.build_once(root, key, lambda out, work, log: install(out, spec, work, log),
                                                "benchmark_client")
    if built:
        for stale in root.iterdir():
            if stale.is_dir() and stale.name != key and not stale.name.startswith(".partial-"):
                shutil.rmtree(stale, ignore_errors=True)
    return final, info, built


def build(artifacts: Path, cache=None) -> dict:
    """Place the machine's client under ``artifacts/benchmark-client/venv`` (hardlinks; a copy across filesystems)."""
    source, info, built = ensure(cache)
    dest = Path(artifacts) / NODE_DIR
    stamp = dest / "build.json"
    if not (stamp.is_file() and stamp.read_text() == (source / "build.json").read_text()):
        shutil.rmtree(dest, ignore_errors=True)
        dest.mkdir(parents=True)
        done = subprocess.run(["cp", "-al", str(source / "venv"), str(dest / "venv")], capture_output=True, text=True)
        if done.returncode:
            shutil.rmtree(dest / "venv", ignore_errors=True)
            shutil.copytree(source / "venv", dest / "venv", symlinks=True)
        shutil.copy2(source / "build.json", stamp)
    return dict(info, cache=str(source), built=built, python="%s/venv/bin/python" % NODE_DIR)


if __name__ == "__main__":
    placed = build(Path(sys.argv[1] if len(sys.argv) > 1 else REPO_ROOT / ".sandbox" / "artifacts"))
    print(placed["python"], "sglang", placed["sglang"], "built now" if placed["built"] else "from " + placed["cache"])
