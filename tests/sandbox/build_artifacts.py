#!/usr/bin/env python3
"""Build every sandbox stand-in artifact into one directory (default ``.sandbox/artifacts`` at the repo root).

The directory is bind-mounted read-only into each sandbox node at ``/srv/sandbox``, so everything that
refers to a path inside it uses ``/srv/sandbox/...``.

    bin/nvidia-smi               fake nvidia-smi (copy of fake_nvidia_smi.py); node: /usr/bin/nvidia-smi -> it
    bin/gpu-hog                  a foreign process that holds a GPU (copy of gpu_hog.py), for preflight tests
    lib/standin_driver.py        the NVIDIA driver as the real torch sees it (copy of standin_driver.py); node: Debian's
                                 /etc/python3.11/sitecustomize.py (tests/sandbox/playbooks/sandbox_prepare.yml)
    sim/sglang/                  the SGLang simulator (sglang_sim/sglang + its CLI snapshot), ahead of the release's real
                                 sglang for the server unit alone (a sandbox-only drop-in's PYTHONPATH)
    bin/fake-hub                 the loopback model mirror (copy of fake_hub.py); node: the sandbox-model-mirror
                                 unit serves models/ on 127.0.0.1:8081 (tests/sandbox/playbooks/sandbox_prepare.yml)
    gpus.json                    the default GPU state (8 x RTX PRO 6000 Blackwell, driver 580.95.05); node:
                                 copy it to /etc/sandbox/gpus.json (writable) and edit to inject faults
    cuda-repo/debian12/x86_64/   signed flat apt repo (node URL file:///srv/sandbox/cuda-repo/debian12/x86_64/);
                                 its cuda-toolkit-13-0 carries NVIDIA's real CUDA 13.0 compiler (cuda_wheels.py)
    cuda-repo/cuda-archive-keyring.gpg
    debian-repo/                 the node's Debian mirror: real Debian 12 packages the product installs from the
                                 distribution (g++ and its closure; distro_repo.py)
    models/Kimi-K2.5/            small real-format checkpoint + index + config + SHA256SUMS
    models/kimi-k2.5-eagle3/     its EAGLE3 draft as published: config + one model.safetensors (no index) + SHA256SUMS
    git/flashinfer.git           bare repo, tag v0.7.2 (with FlashInfer 0.7.2's own arch-flag code, real_sources.py)
    git/sglang.git               bare repo from sglang_sim.build_repo (skipped with a warning if absent)
    wheelhouse/router/           the real sglang-router 0.3.2 wheel and its pinned closure (router host)
    wheelhouse/closure/          the real sglang 0.5.23 closure (208 wheels, 4.4 GB) the GPU nodes' releases install
                                 from, hardlinked from the per-machine cache (closure.py: downloaded once per machine)
    wheelhouse/flashinfer-jit-cache/  FlashInfer's AOT kernels as flashinfer-jit-cache==0.7.2+cu130, made from one real
                                 compile per machine (flashinfer_aot.py: the real flashinfer-python and nvcc)
    wheelhouse/                  build backends + the stand-in torch wheel (fake_torch.py, with torch 2.14.1's own
                                 cpp_extension arch-flag functions), with a PEP 503 index in wheelhouse/simple/
                                 (node index URL file:///srv/sandbox/wheelhouse/simple)
    MANIFEST.json                what was built: node paths, tag shas, key fingerprint, sizes

Every step is idempotent (recipe stamps); a no-op rebuild takes about a second. Downloads (NVIDIA's compiler
wheels, the FlashInfer and torch wheels the real code is read from, the Debian packages) are kept in
``.sandbox/cache`` (``$SANDBOX_CACHE``), so a new artifacts directory costs no download.

CLI: ``python tests/sandbox/build_artifacts.py [--out DIR] [--shards N] [--shard-mb X] [--force]``
(needs numpy + safetensors for the checkpoint, e.g. the project venv).
"""

import argparse
import inspect
import json
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parent.parent
NODE_MOUNT = "/srv/sandbox"
ROUTER_LOCK = REPO_ROOT / "roles" / "sglang_router" / "files" / "requirements-0.3.2.txt"
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import cuda_repo  # noqa: E402
import distro_repo  # noqa: E402
import fake_nvidia_smi  # noqa: E402
import fake_sources  # noqa: E402
import fake_torch  # noqa: E402
import real_sources  # noqa: E402


def _write_if_changed(path: Path, data: bytes, mode=0o644):
    if path.is_file() and path.read_bytes() == data:
        if (path.stat().st_mode & 0o777) != mode:
            os.chmod(path, mode)
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.chmod(tmp, mode)
    os.replace(tmp, path)
    return True


def default_gpus_json():
    """The node's baseline GPU state: 8 idle GPUs, nothing of this machine's in it.

    Built without a process state directory (the controller's own simulators, e.g. the contract tests', would
    otherwise land in every node's file, and the file would differ from build to build), and without memory.used:
    the stand-in on the node derives it from the processes that hold each GPU, as a real GPU shows its processes'
    memory (a pinned 0 would show a serving GPU as empty)."""
    state = fake_nvidia_smi.normalize({"process_state_dir": None})
    derived = ("index", "memory_used_mib")
    gpus = [{k: v for k, v in g.items() if k not in derived} for g in state["gpus"]]
    return {"driver_version": state["driver_version"], "cuda_version": state["cuda_version"],
            "gpus": gpus, "compute_apps": [], "failure": None}


def _node(path: Path, out: Path):
    return NODE_MOUNT + "/" + str(path.relative_to(out))


def build_sglang(out: Path, snapshot=None, tag="v0.5.23"):
    try:
        from sglang_sim.build_repo import build_sglang_repo
    except ImportError as exc:
        return None, "skipped: sglang_sim.build_repo not importable yet (%s)" % exc
    kwargs = {}
    params = inspect.signature(build_sglang_repo).parameters
    if "tag" in params:
        kwargs["tag"] = tag
    if "snapshot" in params:
        if snapshot is not None:
            kwargs["snapshot"] = Path(snapshot)
        elif params["snapshot"].default is inspect.Parameter.empty:
            return None, "skipped: build_sglang_repo needs snapshot=...; pass --sglang-snapshot PATH"
    sha = build_sglang_repo(out / "git" / "sglang.git", **kwargs)
    return sha, None


def build_all(out=None, shard_mb=2, shards=64, force=False, sglang_snapshot=None, quiet=False):
    """Build everything; return the manifest dict (also written to <out>/MANIFEST.json)."""
    out = Path(out) if out else REPO_ROOT / ".sandbox" / "artifacts"
    out = out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    manifest = {"node_mount": NODE_MOUNT, "artifacts": {}}
    lines = []

    def step(name, fn):
        t0 = time.monotonic()
        detail = fn()
        lines.append("%-22s %6.2fs  %s" % (name, time.monotonic() - t0, detail))
        if not quiet:
            print(lines[-1], flush=True)

    def nvsmi():
        if force:
            (out / "bin" / "nvidia-smi").unlink(missing_ok=True)
        changed = _write_if_changed(out / "bin" / "nvidia-smi", (HERE / "fake_nvidia_smi.py").read_bytes(), 0o755)
        manifest["artifacts"]["nvidia_smi"] = {"path": _node(out / "bin" / "nvidia-smi", out)}
        return "%s %s" % (_node(out / "bin" / "nvidia-smi", out), "(written)" if changed else "(unchanged)")

    def hog():
        changed = _write_if_changed(out / "bin" / "gpu-hog", (HERE / "gpu_hog.py").read_bytes(), 0o755)
        return "%s %s" % (_node(out / "bin" / "gpu-hog", out), "(written)" if changed else "(unchanged)")

    def driver():
        changed = _write_if_changed(out / "lib" / "standin_driver.py", (HERE / "standin_driver.py").read_bytes())
        return "%s %s" % (_node(out / "lib" / "standin_driver.py", out), "(written)" if changed else "(unchanged)")

    def simulator():
        from sglang_sim.build_repo import DEFAULT_SNAPSHOT
        src, dest = HERE / "sglang_sim" / "sglang", out / "sim" / "sglang"
        files = {p.relative_to(src): p.read_bytes() for p in src.rglob("*")
                 if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc" and p.name != "cli_snapshot.json"}
        files[Path("cli_snapshot.json")] = DEFAULT_SNAPSHOT.read_bytes()
        changed = sum(_write_if_changed(dest / rel, data) for rel, data in files.items())
        for old in [p for p in dest.rglob("*") if p.is_file() and p.relative_to(dest) not in files]:
            old.unlink()
            changed += 1
        return "%s %d files %s" % (_node(dest, out), len(files), "(%d written)" % changed if changed else "(unchanged)")

    def mirror():
        changed = _write_if_changed(out / "bin" / "fake-hub", (HERE / "fake_hub.py").read_bytes(), 0o755)
        manifest["artifacts"]["model_mirror"] = {"path": _node(out / "bin" / "fake-hub", out),
                                                 "serves": _node(out / "models", out)}
        return "%s %s" % (_node(out / "bin" / "fake-hub", out), "(written)" if changed else "(unchanged)")

    def gpus():
        data = (json.dumps(default_gpus_json(), indent=2) + "\n").encode()
        changed = _write_if_changed(out / "gpus.json", data)
        manifest["artifacts"]["gpus_json"] = {"path": _node(out / "gpus.json", out)}
        return "%s 8 GPUs %s" % (_node(out / "gpus.json", out), "(written)" if changed else "(unchanged)")

    def repo():
        info = cuda_repo.build_cuda_repo(out, force=force)
        manifest["artifacts"]["cuda_repo"] = {
            "url": info["node_url"], "base_url": "file://%s/cuda-repo" % NODE_MOUNT,
            "keyring": _node(Path(info["keyring"]), out),
            "pubkey": _node(Path(info["pubkey"]), out), "fingerprint": info["fingerprint"]}
        return "%s key %s %s" % (info["node_url"], info["fingerprint"][-16:],
                                 "(rebuilt)" if info["rebuilt"] else "(unchanged)")

    def debian():
        info = distro_repo.build_debian_repo(out, force=force)
        manifest["artifacts"]["debian_repo"] = {"url": info["node_url"], "keyring": _node(Path(info["keyring"]), out),
                                                "roots": info["roots"], "packages": info["packages"]}
        return "%s %d packages for %s %s" % (info["node_url"], info["packages"], " ".join(info["roots"]),
                                             "(rebuilt)" if info["rebuilt"] else "(unchanged)")

    def model():
        import checkpoint
        d = out / "models" / "Kimi-K2.5"
        s = checkpoint.make_checkpoint(d, num_shards=shards, shard_bytes=int(shard_mb * 1024 * 1024), force=force)
        manifest["artifacts"]["model"] = {"path": _node(d, out), "num_shards": s["num_shards"],
                                          "total_size": s["total_size"], "tensors": s["tensors"]}
        return "%s %d shards, total_size %d %s" % (_node(d, out), s["num_shards"], s["total_size"],
                                                   "(rebuilt)" if s["rebuilt"] else "(unchanged)")

    def draft():
        import checkpoint
        d = out / "models" / "kimi-k2.5-eagle3"
        s = checkpoint.make_draft(d, force=force)
        manifest["artifacts"]["draft_model"] = {"path": _node(d, out), "total_size": s["total_size"],
                                                "tensors": s["tensors"]}
        return "%s total_size %d %s" % (_node(d, out), s["total_size"], "(rebuilt)" if s["rebuilt"] else "(unchanged)")

    def flashinfer():
        g = out / "git" / "flashinfer.git"
        sha = fake_sources.build_flashinfer_repo(g, tag="v0.7.2", force=force)
        manifest["artifacts"]["flashinfer_git"] = {"path": _node(g, out), "tag": "v0.7.2", "sha": sha}
        return "%s v0.7.2 = %s" % (_node(g, out), sha[:12])

    def sglang():
        sha, why = build_sglang(out, sglang_snapshot)
        if sha is None:
            print("WARNING: git/sglang.git %s" % why, file=sys.stderr)
            return why
        g = out / "git" / "sglang.git"
        manifest["artifacts"]["sglang_git"] = {"path": _node(g, out), "tag": "v0.5.23", "sha": sha}
        return "%s v0.5.23 = %s" % (_node(g, out), sha[:12])

    def wheels():
        import wheelhouse
        names = wheelhouse.build_wheelhouse(out / "wheelhouse")
        manifest["artifacts"]["wheelhouse"] = {"path": _node(out / "wheelhouse", out), "wheels": names}
        return "%s %s" % (_node(out / "wheelhouse", out), ", ".join(names))

    def router_wheels():
        import wheelhouse
        names = wheelhouse.build_router_wheelhouse(out / "wheelhouse" / "router", ROUTER_LOCK)
        manifest["artifacts"]["router_wheelhouse"] = {"path": _node(out / "wheelhouse" / "router", out),
                                                      "wheels": names}
        return "%s %d wheels (sglang-router and its pinned closure)" % (_node(out / "wheelhouse" / "router", out),
                                                                        len(names))

    def closure_wheels():
        import closure
        info = closure.build(out)
        manifest["artifacts"]["closure_wheelhouse"] = {"path": _node(out / closure.NODE_DIR, out),
                                                       "wheels": info["wheels"], "bytes": info["bytes"]}
        return "%s %d wheels, %.1f GB %s from %s" % (
            _node(out / closure.NODE_DIR, out), info["wheels"], info["bytes"] / 1e9,
            "hardlinked" if info["linked"] else "copied", info["cache"] + (" (downloaded now)" if info["downloaded"]
                                                                         else ""))

    def flashinfer_jit_cache():
        import flashinfer_aot
        info = flashinfer_aot.build(out)
        manifest["artifacts"]["flashinfer_jit_cache"] = {"path": _node(out / flashinfer_aot.NODE_DIR, out),
                                                         "wheel": info["wheel"], "modules": sorted(info["modules"])}
        return "%s %s (%s) %s" % (_node(out / flashinfer_aot.NODE_DIR, out), info["wheel"], ", ".join(sorted(info["modules"])),
                                  "compiled now in %.0f s" % info["compile_seconds"] if info["built"]
                                  else "from " + info["cache"])

    def torch_wheel():
        name, changed = fake_torch.build_torch_wheel(out / "wheelhouse",
                                                     cpp_extension=real_sources.torch_cpp_extension())
        manifest["artifacts"]["torch_wheel"] = {"path": _node(out / "wheelhouse" / name, out),
                                                "index_url": "file://%s/wheelhouse/simple" % NODE_MOUNT,
                                                "version": fake_torch.DEFAULT_VERSION}
        return "%s %s" % (_node(out / "wheelhouse" / name, out), "(written)" if changed else "(unchanged)")

    t0 = time.monotonic()
    step("wheelhouse/torch", torch_wheel)  # first: the wheelhouse step lists every wheel
    step("wheelhouse", wheels)
    step("wheelhouse/router", router_wheels)
    step("wheelhouse/closure", closure_wheels)
    step("bin/nvidia-smi", nvsmi)
    step("bin/gpu-hog", hog)
    step("bin/fake-hub", mirror)
    step("lib/standin_driver.py", driver)
    step("sim/sglang", simulator)
    step("gpus.json", gpus)
    step("cuda-repo", repo)
    # after the closure and the toolkit: the real FlashInfer compiles its modules with the real nvcc, once per machine
    step("wheelhouse/flashinfer-jit-cache", flashinfer_jit_cache)
    step("debian-repo", debian)
    step("models/Kimi-K2.5", model)
    step("models/kimi-k2.5-eagle3", draft)
    step("git/flashinfer.git", flashinfer)
    step("git/sglang.git", sglang)
    _write_if_changed(out / "MANIFEST.json", (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode())
    if not quiet:
        print("%-22s %6.2fs  %s" % ("total", time.monotonic() - t0, out))
    manifest["summary"] = lines
    return manifest


def main(argv=None):
    ap = argparse.ArgumentParser(description="Build the sandbox stand-in artifacts.")
    ap.add_argument("--out", default=None, help="output dir (default: <repo>/.sandbox/artifacts)")
    ap.add_argument("--shards", type=int, default=64)
    ap.add_argument("--shard-mb", type=float, default=2)
    ap.add_argument("--force", action="store_true", help="rebuild everything (the signing key is kept)")
    ap.add_argument("--sglang-snapshot", default=None, help="passed to sglang_sim.build_repo if it needs one")
    a = ap.parse_args(argv)
    build_all(a.out, shard_mb=a.shard_mb, shards=a.shards, force=a.force, sglang_snapshot=a.sglang_snapshot)


if __name__ == "__main__":
    main()
