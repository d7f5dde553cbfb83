"""Unit tests for the sandbox stand-ins in tests/sandbox (fake nvidia-smi, CUDA apt repo, checkpoint,
FlashInfer source repo, artifact builder). Fast: everything is built in tmp dirs at small sizes."""

import hashlib
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

SANDBOX = Path(__file__).resolve().parents[1] / "sandbox"
sys.path.insert(0, str(SANDBOX))

import cuda_repo  # noqa: E402
import cuda_wheels  # noqa: E402
import fake_nvidia_smi  # noqa: E402
import fake_sources  # noqa: E402
import fake_torch  # noqa: E402
import real_sources  # noqa: E402

SMI = SANDBOX / "fake_nvidia_smi.py"
ALL_FIELDS = "index,name,uuid,compute_cap,memory.total,memory.used,driver_version,persistence_mode,pci.bus_id"


# ============================================================================================ nvidia-smi
def smi(*args, config=None, tmp_path=None):
    """Run the stand-in with ``config`` (the built-in default when None); live processes only from a state
    directory the test made (never the machine's /tmp/sglang-sim)."""
    env = dict(os.environ)
    config = dict(config or {})
    config.setdefault("process_state_dir", str(tmp_path / "no-live-processes"))
    path = tmp_path / "gpus.json"
    path.write_text(json.dumps(config))
    env["FAKE_NVIDIA_SMI_CONFIG"] = str(path)
    p = subprocess.run([sys.executable, str(SMI), *args], env=env, capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def test_smi_default_query_all_fields_nounits(tmp_path):
    rc, out, err = smi("--query-gpu=" + ALL_FIELDS, "--format=csv,noheader,nounits", tmp_path=tmp_path)
    assert rc == 0, err
    lines = out.splitlines()
    assert len(lines) == 8
    for i, line in enumerate(lines):
        f = line.split(", ")
        assert f[0] == str(i)
        assert f[1] == "NVIDIA RTX PRO 6000 Blackwell Server Edition"
        assert re.fullmatch(r"GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", f[2])
        assert f[3:8] == ["12.0", "97887", "0", "580.95.05", "Enabled"]
        assert re.fullmatch(r"00000000:[0-9A-F]{2}:00\.0", f[8])
    assert len({line.split(", ")[2] for line in lines}) == 8
    # UUIDs are stable across calls
    assert smi("--query-gpu=" + ALL_FIELDS, "--format=csv,noheader,nounits", tmp_path=tmp_path)[1] == out


def test_smi_csv_header_and_units(tmp_path):
    rc, out, _ = smi("--query-gpu=index,memory.total,memory.used,compute_cap", "--format=csv", tmp_path=tmp_path)
    assert rc == 0
    lines = out.splitlines()
    assert lines[0] == "index, memory.total [MiB], memory.used [MiB], compute_cap"
    assert lines[1] == "0, 97887 MiB, 0 MiB, 12.0"
    rc, out, _ = smi("--query-gpu=memory.total,name", "--format=csv,noheader", tmp_path=tmp_path)
    assert out.splitlines()[0] == "97887 MiB, NVIDIA RTX PRO 6000 Blackwell Server Edition"
    rc, out, _ = smi("--query-gpu", "gpu_name,gpu_uuid", "--format", "csv,nounits", tmp_path=tmp_path)
    assert rc == 0 and out.splitlines()[0] == "name, uuid"  # aliases, canonical header


def test_smi_unknown_field(tmp_path):
    rc, out, _ = smi("--query-gpu=index,bogus.field", "--format=csv", tmp_path=tmp_path)
    assert rc == 2
    assert out == 'Field "bogus.field" is not a valid field to query.\n\n'


def test_smi_compute_apps(tmp_path):
    rc, out, _ = smi("--query-compute-apps=pid,gpu_uuid,process_name,used_memory",
                     "--format=csv,noheader,nounits", tmp_path=tmp_path)
    assert (rc, out) == (0, "")
    rc, out, _ = smi("--query-compute-apps=pid,used_memory", "--format=csv", tmp_path=tmp_path)
    assert out == "pid, used_gpu_memory [MiB]\n"
    cfg = {"compute_apps": [{"pid": 4242, "gpu_index": 3, "process_name": "sglang::scheduler_TP3",
                             "used_memory_mib": 81000}]}
    rc, out, _ = smi("--query-compute-apps=pid,gpu_uuid,process_name,used_memory",
                     "--format=csv,noheader,nounits", config=cfg, tmp_path=tmp_path)
    uuid3 = fake_nvidia_smi._stable_uuid(3)
    assert out == "4242, %s, sglang::scheduler_TP3, 81000\n" % uuid3
    rc, out, _ = smi("--query-gpu=index,memory.used", "--format=csv,noheader,nounits", config=cfg,
                     tmp_path=tmp_path)
    assert out.splitlines()[3] == "3, 81000"
    rc, out, _ = smi(config=cfg, tmp_path=tmp_path)
    assert "sglang::scheduler_TP3" in out and "81000MiB" in out


def test_smi_lists_live_gpu_processes_from_their_state_files(tmp_path):
    """The simulator's schedulers (and any stand-in GPU program) publish their GPU and memory; the stand-in lists
    the live ones on the physical GPU CUDA_VISIBLE_DEVICES maps them to, with their process title, and forgets the
    dead ones."""
    state = tmp_path / "sim-state"
    state.mkdir()
    live = subprocess.Popen(["sleep", "30"])
    dead = subprocess.Popen(["true"])
    dead.wait()
    try:
        (state / ("%d.json" % live.pid)).write_text(json.dumps(
            {"pid": live.pid, "gpu_id": 1, "cuda_visible_devices": "2,3", "gpu_memory_used_mib": 81234,
             "gpu_busy": True}))
        (state / ("%d.json" % dead.pid)).write_text(json.dumps({"pid": dead.pid, "gpu_id": 0,
                                                                "gpu_memory_used_mib": 5000}))
        cfg = {"process_state_dir": str(state)}
        rc, out, err = smi("--query-compute-apps=pid,gpu_uuid,process_name,used_memory",
                           "--format=csv,noheader,nounits", config=cfg, tmp_path=tmp_path)
        assert rc == 0, err
        uuid3 = fake_nvidia_smi._stable_uuid(3)
        assert out == "%d, %s, sleep, 81234\n" % (live.pid, uuid3)
        rc, out, _ = smi("--query-gpu=index,memory.used,utilization.gpu,pstate", "--format=csv,noheader,nounits",
                         config=cfg, tmp_path=tmp_path)
        rows = [line.split(", ") for line in out.splitlines()]
        assert rows[3] == ["3", "81234", "100", "P0"] and rows[0] == ["0", "0", "0", "P8"]
    finally:
        live.kill()
        live.wait()
    rc, out, _ = smi("--query-compute-apps=pid", "--format=csv,noheader", config=cfg, tmp_path=tmp_path)
    assert out == ""  # the process is gone: so is its line


def test_node_baseline_has_no_controller_processes_and_shows_a_serving_gpus_memory(tmp_path, monkeypatch):
    """The gpus.json every node starts from: the same bytes whatever runs on the controller (a live simulator's state
    file in the default directory must not leak in), and memory.used left to the stand-in, so a GPU the simulator's
    scheduler holds shows that memory (a pinned 0 made a serving node's GPUs look empty)."""
    import build_artifacts

    clean = build_artifacts.default_gpus_json()
    controller = tmp_path / "controller-sim"
    controller.mkdir()
    live = subprocess.Popen(["sleep", "30"])
    try:
        (controller / ("%d.json" % live.pid)).write_text(json.dumps(
            {"pid": live.pid, "gpu_id": 0, "cuda_visible_devices": "5", "gpu_memory_used_mib": 83153}))
        monkeypatch.setattr(fake_nvidia_smi, "DEFAULT_PROCESS_STATE_DIR", str(controller))
        assert build_artifacts.default_gpus_json() == clean
        assert clean["compute_apps"] == [] and all("memory_used_mib" not in g for g in clean["gpus"])
        node = dict(clean, process_state_dir=str(controller))  # the node's own schedulers
        rc, out, err = smi("--query-gpu=index,memory.used,pstate", "--format=csv,noheader,nounits", config=node,
                           tmp_path=tmp_path)
        assert rc == 0, err
        rows = [line.split(", ") for line in out.splitlines()]
        assert rows[5] == ["5", "83153", "P0"] and rows[0] == ["0", "0", "P8"]
    finally:
        live.kill()
        live.wait()


def test_smi_list_version_table(tmp_path):
    rc, out, _ = smi("-L", tmp_path=tmp_path)
    assert rc == 0
    assert re.fullmatch(r"(GPU \d: NVIDIA RTX PRO 6000 Blackwell Server Edition \(UUID: GPU-[0-9a-f-]{36}\)\n){8}",
                        out)
    rc, out, _ = smi("--version", tmp_path=tmp_path)
    assert out.splitlines() == ["NVIDIA-SMI version  : 580.95.05", "NVML version        : 580.95",
                                "DRIVER version      : 580.95.05", "CUDA Version        : 13.0"]
    rc, out, _ = smi(tmp_path=tmp_path)
    assert rc == 0
    assert "Driver Version: 580.95.05" in out and "CUDA Version: 13.0" in out
    assert "No running processes found" in out
    assert {len(line) for line in out.splitlines()[1:] if line} == {91}


def test_smi_overrides_count_cap_driver(tmp_path):
    cfg = {"gpu_count": 7, "driver_version": "570.195.03", "gpu_defaults": {"compute_cap": "9.0",
                                                                             "name": "NVIDIA H100 80GB HBM3"}}
    rc, out, _ = smi("--query-gpu=index,name,compute_cap,driver_version", "--format=csv,noheader",
                     config=cfg, tmp_path=tmp_path)
    lines = out.splitlines()
    assert rc == 0 and len(lines) == 7
    assert lines[6] == "6, NVIDIA H100 80GB HBM3, 9.0, 570.195.03"
    rc, out, _ = smi("--version", config=cfg, tmp_path=tmp_path)
    assert "CUDA Version        : 12.8" in out  # derived from the 570 branch
    cfg = {"gpus": [{}, {"compute_cap": "8.9", "persistence_mode": "Disabled"}]}
    rc, out, _ = smi("--query-gpu=compute_cap,persistence_mode", "--format=csv,noheader", config=cfg,
                     tmp_path=tmp_path)
    assert out == "12.0, Enabled\n8.9, Disabled\n"


def test_smi_literal_device_answers(tmp_path):
    cfg = {"gpus": [{"compute_cap": "[N/A]", "memory_used_mib": "[N/A]", "persistence_mode": "[Not Supported]"}],
           "compute_apps": [{"pid": 2201, "gpu_index": 0, "process_name": "[Not Found]", "used_memory_mib": "[N/A]"}]}
    rc, out, _ = smi("--query-gpu=compute_cap,memory.total,memory.used,persistence_mode,memory.free",
                     "--format=csv,noheader", config=cfg, tmp_path=tmp_path)
    assert (rc, out) == (0, "[N/A], 97887 MiB, [N/A], [Not Supported], [N/A]\n")
    rc, out, _ = smi("--query-compute-apps=pid,process_name,used_memory", "--format=csv,noheader,nounits",
                     config=cfg, tmp_path=tmp_path)
    assert out == "2201, [Not Found], [N/A]\n"
    assert smi(config=cfg, tmp_path=tmp_path)[0] == 0


@pytest.mark.parametrize("failure,code,text", [
    ("no_devices", 6, "No devices were found\n"),
    ("nvml_error", 9, "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
                      "Make sure that the latest NVIDIA driver is installed and running.\n"),
    ("driver_mismatch", 18, "Failed to initialize NVML: Driver/library version mismatch\n"
                            "NVML library version: 580.95\n"),
])
def test_smi_failures(tmp_path, failure, code, text):
    for args in ([], ["-L"], ["--query-gpu=index", "--format=csv,noheader"]):
        rc, out, _ = smi(*args, config={"failure": failure}, tmp_path=tmp_path)
        assert (rc, out) == (code, text)
    rc, _, _ = smi("--query-gpu=index", "--format=csv", config={"gpus": []}, tmp_path=tmp_path)
    assert rc == 6


def test_smi_id_filter_and_bad_args(tmp_path):
    rc, out, _ = smi("-i", "2", "--query-gpu=index", "--format=csv,noheader", tmp_path=tmp_path)
    assert (rc, out) == (0, "2\n")
    uuid5 = fake_nvidia_smi._stable_uuid(5)
    rc, out, _ = smi("--id=%s,1" % uuid5, "--query-gpu=index", "--format=csv,noheader", tmp_path=tmp_path)
    assert out == "5\n1\n"
    assert smi("-i", "9", "-L", tmp_path=tmp_path)[:2] == (6, "No devices were found\n")
    rc, out, _ = smi("--frobnicate", tmp_path=tmp_path)
    assert rc == 2 and "Invalid combination of input arguments" in out
    assert smi("--query-gpu=index", "--format=xml", tmp_path=tmp_path)[0] == 2
    assert smi("--query-gpu=index", tmp_path=tmp_path)[0] == 2


def test_smi_missing_config_and_persistence(tmp_path):
    env = dict(os.environ, FAKE_NVIDIA_SMI_CONFIG=str(tmp_path / "nope.json"))
    p = subprocess.run([sys.executable, str(SMI), "-L"], env=env, capture_output=True, text=True)
    assert p.returncode == 255 and "nope.json" in p.stderr
    cfg = {"gpu_count": 2, "gpu_defaults": {"persistence_mode": "Disabled"}}
    rc, out, _ = smi("-pm", "1", config=cfg, tmp_path=tmp_path)
    if os.geteuid() == 0:
        assert rc == 0 and out.endswith("All done.\n")
        saved = json.loads((tmp_path / "gpus.json").read_text())
        assert [g["persistence_mode"] for g in saved["gpus"]] == ["Enabled", "Enabled"]
    else:
        assert rc == 4 and "Insufficient Permissions" in out


def test_smi_script_runs_directly_with_shebang(tmp_path):
    assert os.access(SMI, os.X_OK)
    assert SMI.read_text().startswith("#!/usr/bin/python3\n")
    if not Path("/usr/bin/python3").exists():
        pytest.skip("no /usr/bin/python3")
    env = dict(os.environ, FAKE_NVIDIA_SMI_CONFIG=str(tmp_path / "c.json"))
    (tmp_path / "c.json").write_text('{"gpu_count": 1}')
    p = subprocess.run([str(SMI), "--query-gpu=count", "--format=csv,noheader"], env=env, capture_output=True,
                       text=True)
    assert (p.returncode, p.stdout) == (0, "1\n")


# ============================================================================================ checkpoint
def _header(path):
    with open(path, "rb") as fh:
        n = struct.unpack("<Q", fh.read(8))[0]
        return json.loads(fh.read(n))


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    pytest.importorskip("numpy")
    pytest.importorskip("safetensors")
    import checkpoint
    d = tmp_path_factory.mktemp("ckpt") / "Kimi-K2.5"
    summary = checkpoint.make_checkpoint(d, num_shards=16, shard_bytes=512 * 1024)
    return d, summary


def test_checkpoint_files_and_index(ckpt):
    d, summary = ckpt
    names = ["model-%05d-of-000016.safetensors" % i for i in range(1, 17)]
    for n in names:
        assert (d / n).is_file()
    index = json.loads((d / "model.safetensors.index.json").read_text())
    assert set(index["weight_map"].values()) == set(names)
    total = 0
    seen = {}
    for n in names:
        h = _header(d / n)
        assert h.pop("__metadata__") == {"format": "pt"}
        for tname, info in h.items():
            seen[tname] = n
            total += info["data_offsets"][1] - info["data_offsets"][0]
    assert seen == index["weight_map"]
    assert index["metadata"]["total_size"] == total == summary["total_size"]
    sizes = [(d / n).stat().st_size for n in names]
    assert sizes[0] < sorted(sizes)[len(sizes) // 2]  # shard 1 is the small one


def test_checkpoint_loads_with_safe_open(ckpt):
    from safetensors import safe_open
    d, _ = ckpt
    index = json.loads((d / "model.safetensors.index.json").read_text())
    wm = index["weight_map"]
    name = "language_model.model.layers.1.mlp.experts.0.gate_proj.weight_packed"
    with safe_open(str(d / wm[name]), framework="np") as f:
        t = f.get_tensor(name)
        assert str(t.dtype) == "int32" and t.ndim == 2
    shape_name = name.replace("weight_packed", "weight_shape")
    with safe_open(str(d / wm[shape_name]), framework="np") as f:
        assert f.get_tensor(shape_name).tolist() == [t.shape[0], t.shape[1] * 8]
    scale = name.replace("weight_packed", "weight_scale")
    with safe_open(str(d / wm[scale]), framework="np") as f:
        assert f.get_slice(scale).get_dtype() == "BF16"
    for key in ("language_model.model.embed_tokens.weight", "language_model.lm_head.weight",
                "language_model.model.layers.0.self_attn.kv_a_proj_with_mqa.weight"):
        assert key in wm


def test_checkpoint_config_and_tokenizer(ckpt):
    d, summary = ckpt
    cfg = json.loads((d / "config.json").read_text())
    assert cfg["architectures"] == ["KimiK25ForConditionalGeneration"] and cfg["model_type"] == "kimi_k25"
    wm = json.loads((d / "model.safetensors.index.json").read_text())["weight_map"]
    layers = {int(m.group(1)) for k in wm for m in [re.match(r"language_model\.model\.layers\.(\d+)\.", k)] if m}
    experts = {int(m.group(1)) for k in wm for m in [re.match(r".*layers\.1\.mlp\.experts\.(\d+)\.", k)] if m}
    tc = cfg["text_config"]
    assert tc["num_hidden_layers"] == len(layers) == max(layers) + 1
    assert tc["n_routed_experts"] == len(experts) >= tc["num_experts_per_tok"]
    assert json.loads((d / "tokenizer_config.json").read_text())["tokenizer_class"]
    assert (d / "tiktoken.model").stat().st_size > 0
    sums = dict(reversed(line.split("  ", 1)) for line in (d / "SHA256SUMS").read_text().splitlines())
    assert set(sums) >= {"config.json", "model.safetensors.index.json", "model-00001-of-000016.safetensors"}
    for fname, digest in sums.items():
        assert hashlib.sha256((d / fname).read_bytes()).hexdigest() == digest


def test_checkpoint_deterministic_and_idempotent(ckpt, tmp_path):
    import checkpoint
    d, summary = ckpt
    other = tmp_path / "Kimi-K2.5"
    checkpoint.make_checkpoint(other, num_shards=16, shard_bytes=512 * 1024)
    assert (other / "SHA256SUMS").read_text() == (d / "SHA256SUMS").read_text()
    mtime = (other / "model-00002-of-000016.safetensors").stat().st_mtime_ns
    again = checkpoint.make_checkpoint(other, num_shards=16, shard_bytes=512 * 1024)
    assert again["rebuilt"] is False
    assert (other / "model-00002-of-000016.safetensors").stat().st_mtime_ns == mtime
    (other / "model-00002-of-000016.safetensors").write_bytes(b"truncated")
    assert checkpoint.make_checkpoint(other, num_shards=16, shard_bytes=512 * 1024)["rebuilt"] is True
    assert (other / "SHA256SUMS").read_text() == (d / "SHA256SUMS").read_text()


# ============================================================================================ apt repo
needs_apt_tools = pytest.mark.skipif(
    not all(shutil.which(t) for t in ("dpkg-deb", "apt-ftparchive", "gpg", "gpgv")),
    reason="dpkg-deb, apt-ftparchive, gpg and gpgv are needed")
# nvcc compiles host code with g++ (scripts/bootstrap.sh installs it on the controller)
needs_gxx = pytest.mark.skipif(not shutil.which("g++"), reason="g++ is needed (nvcc's host compiler)")
TOOLKIT_DEBS = ("cuda-nvcc-13-0_13.0.88-1", "cuda-crt-13-0_13.0.88-1", "cuda-nvvm-13-0_13.0.88-1",
                "cuda-cccl-13-0_13.0.85-1", "cuda-cudart-13-0_13.0.96-1", "cuda-cudart-dev-13-0_13.0.96-1",
                "cuda-cuobjdump-13-0_13.2.51-1")
KERNEL = SANDBOX / "kernels" / "rmsnorm.cu"


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    if not all(shutil.which(t) for t in ("dpkg-deb", "apt-ftparchive", "gpg", "gpgv")):
        pytest.skip("dpkg-deb, apt-ftparchive, gpg and gpgv are needed")
    out = tmp_path_factory.mktemp("artifacts")
    info = cuda_repo.build_cuda_repo(out)
    return out, info


@pytest.fixture(scope="module")
def cuda13():
    """The real CUDA 13.0 toolkit assembled from NVIDIA's wheels (downloaded once into .sandbox/cache)."""
    return cuda_wheels.toolkit()["home"]


def _cuobjdump(home, path):
    p = subprocess.run([str(home / "bin/cuobjdump"), "--list-elf", "--list-ptx", str(path)], capture_output=True,
                       text=True)
    return p.stdout + p.stderr


@needs_apt_tools
def test_repo_packages_index(repo):
    _, info = repo
    r = Path(info["repo"])
    text = (r / "Packages").read_text()
    stanzas = [dict(line.split(": ", 1) for line in s.splitlines() if ": " in line and not line.startswith(" "))
               for s in text.strip().split("\n\n")]
    tk = [s for s in stanzas if s["Package"] == "cuda-toolkit-13-0"]
    assert sorted(s["Version"] for s in tk) == ["13.0.0-1", "13.0.2-1"]
    assert all(s["Architecture"] == "amd64" and s["Filename"].startswith("./") for s in tk)
    update2 = next(s for s in tk if s["Version"] == "13.0.2-1")["Depends"]
    for dep in ("cuda-nvcc-13-0 (>= 13.0.88)", "cuda-cudart-dev-13-0 (>= 13.0.96)", "cuda-cccl-13-0 (>= 13.0.85)",
                "cuda-cuobjdump-13-0"):
        assert dep in update2
    nvcc = next(s for s in stanzas if s["Package"] == "cuda-nvcc-13-0")
    assert nvcc["Version"] == "13.0.88-1" and nvcc["Depends"].startswith(
        "cuda-crt-13-0 (>= 13.0.88), cuda-nvvm-13-0 (>= 13.0.88)")
    assert int(nvcc["Installed-Size"]) > 100_000  # the real compiler (~110 MB), not a script
    for deb in TOOLKIT_DEBS:
        assert (r / (deb + "_amd64.deb")).is_file(), deb
    assert (r / "cuda-keyring_1.1-1_all.deb").is_file() and (r / "3bf863cc.pub").is_file()
    # the driver, as NVIDIA's debian12 repository names it: what the cuda_toolkit role's pin must keep away
    driver = {s["Package"]: s["Version"] for s in stanzas if s["Package"] in
              ("cuda-drivers", "nvidia-open", "nvidia-driver-cuda", "nvidia-kernel-open-dkms", "libcuda1",
               "libnvidia-ml1", "nvidia-smi")}
    assert driver == dict.fromkeys(driver, "580.95.05-1") and len(driver) == 7
    release = (r / "Release").read_text()
    assert release.startswith("Origin: NVIDIA\nLabel: NVIDIA CUDA\nArchitecture: x86_64\nDate: ")
    for name in ("Packages", "Packages.gz"):
        digest = hashlib.sha256((r / name).read_bytes()).hexdigest()
        assert re.search(r"^ %s +%d %s$" % (digest, (r / name).stat().st_size, re.escape(name)), release, re.M)


@needs_apt_tools
def test_repo_signatures_verify(repo, tmp_path):
    _, info = repo
    r = Path(info["repo"])
    kr = info["keyring"]
    assert subprocess.run(["gpgv", "--keyring", kr, str(r / "InRelease")], capture_output=True).returncode == 0
    assert subprocess.run(["gpgv", "--keyring", kr, str(r / "Release.gpg"), str(r / "Release")],
                          capture_output=True).returncode == 0
    bad = tmp_path / "Release"
    bad.write_text((r / "Release").read_text().replace("NVIDIA CUDA", "EVIL CUDA"))
    assert subprocess.run(["gpgv", "--keyring", kr, str(r / "Release.gpg"), str(bad)],
                          capture_output=True).returncode != 0


@needs_apt_tools
@needs_gxx
def test_repo_toolkit_debs_hold_the_real_compiler(repo, tmp_path):
    """Unpacked like dpkg would, the debs make /usr/local/cuda-13.0 with the real nvcc: it reports V13.0.88,
    lists sm_120, compiles compute_120f to sm_120 SASS (read back with the packaged cuobjdump) and refuses
    an arch it does not know with its own message."""
    _, info = repo
    r = Path(info["repo"])
    root = tmp_path / "root"
    subprocess.run(["dpkg-deb", "-x", str(r / "cuda-keyring_1.1-1_all.deb"), str(root)], check=True)
    assert (root / "usr/share/keyrings/cuda-archive-keyring.gpg").read_bytes() == Path(info["keyring"]).read_bytes()
    assert (root / "etc/apt/sources.list.d/cuda-debian12-x86_64.list").read_text() == (
        "deb [signed-by=/usr/share/keyrings/cuda-archive-keyring.gpg] "
        "https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/ /\n")
    for deb in TOOLKIT_DEBS:
        subprocess.run(["dpkg-deb", "-x", str(r / (deb + "_amd64.deb")), str(root)], check=True)
    home = root / "usr/local/cuda-13.0"
    nvcc = str(home / "bin/nvcc")
    out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, check=True).stdout
    assert "Cuda compilation tools, release 13.0, V13.0.88\nBuild cuda_13.0.r13.0/compiler.36424714_0\n" in out
    assert "sm_120" in subprocess.run([nvcc, "--list-gpu-code"], capture_output=True, text=True).stdout.split()
    assert os.readlink(home / "lib64") == "targets/x86_64-linux/lib"
    assert os.readlink(home / "include") == "targets/x86_64-linux/include"
    assert (home / "lib64/libcudart.so.13").resolve().name == "libcudart.so.13.0.96"
    assert (home / "include/cuda_runtime.h").is_file() and (home / "include/cccl/cuda/std/version").is_file()
    obj = tmp_path / "k.o"
    subprocess.run([nvcc, "-c", "-gencode", "arch=compute_120f,code=sm_120f", "-o", str(obj), str(KERNEL)],
                   check=True, capture_output=True)
    assert re.search(r"ELF file +1: .*\.sm_120\.cubin", _cuobjdump(home, obj))
    bad = subprocess.run([nvcc, "-c", "-gencode", "arch=compute_999,code=sm_999", "-o", str(obj), str(KERNEL)],
                         capture_output=True, text=True)
    assert bad.returncode != 0 and "nvcc fatal   : Unsupported gpu architecture 'compute_999'" in bad.stderr
    post = subprocess.run(["dpkg-deb", "-I", str(r / "cuda-toolkit-13-0-config-common_13.0.96-1_all.deb"),
                           "postinst"], capture_output=True, text=True, check=True).stdout
    assert "update-alternatives --install /usr/local/cuda cuda /usr/local/cuda-13.0 130" in post


def test_toolkit_layout_of_wheel_members():
    assert cuda_wheels.toolkit_path("nvidia-cuda-nvcc", "nvidia/cu13/bin/nvcc") == ("cuda-nvcc-13-0", "bin/nvcc")
    assert cuda_wheels.toolkit_path("nvidia-cuda-crt", "nvidia/cu13/include/crt/host_config.h") == (
        "cuda-crt-13-0", "targets/x86_64-linux/include/crt/host_config.h")
    assert cuda_wheels.toolkit_path("nvidia-nvvm", "nvidia/cu13/lib/libnvvm.so.4") == (
        "cuda-nvvm-13-0", "nvvm/lib64/libnvvm.so.4")
    assert cuda_wheels.toolkit_path("nvidia-cuda-runtime", "nvidia/cu13/lib/libcudart.so.13") == (
        "cuda-cudart-13-0", "targets/x86_64-linux/lib/libcudart.so.13.0.96")
    assert cuda_wheels.toolkit_path("nvidia-cuda-runtime", "nvidia/cu13/lib/libcudart_static.a") == (
        "cuda-cudart-dev-13-0", "targets/x86_64-linux/lib/libcudart_static.a")
    assert cuda_wheels.toolkit_path("nvidia-cuda-nvcc", "nvidia/cu13/.metadata/provenance.txt") is None
    assert cuda_wheels.toolkit_path("nvidia-cuda-nvcc", "nvidia_cuda_nvcc-13.0.88.dist-info/RECORD") is None
    with pytest.raises(RuntimeError, match="no place in the toolkit layout"):
        cuda_wheels.toolkit_path("nvidia-cuda-nvcc", "nvidia/cu13/share/doc")


def test_fetch_refuses_a_wheel_whose_sha256_is_not_the_pinned_one(tmp_path):
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    (wheels / "nvidia_cuda_crt-13.0.88-py3-none-manylinux2014_x86_64.whl").write_bytes(b"not the wheel")
    pin = cuda_wheels.Wheel("nvidia-cuda-crt", "13.0.88", "0" * 64)
    with pytest.raises(RuntimeError, match="has sha256 .* pinned 0000"):
        cuda_wheels.fetch([pin], cache=tmp_path)


@needs_apt_tools
def test_repo_idempotent_key_stable(repo):
    out, info = repo
    again = cuda_repo.build_cuda_repo(out)
    assert again["rebuilt"] is False and again["fingerprint"] == info["fingerprint"]
    forced = cuda_repo.build_cuda_repo(out, force=True)
    assert forced["rebuilt"] is True and forced["fingerprint"] == info["fingerprint"]


def _apt_opts(d, sources_line):
    for sub in ("etc/sources.list.d", "etc/preferences.d", "state/lists/partial", "cache/archives/partial"):
        (d / sub).mkdir(parents=True)
    (d / "state/status").write_text("")
    (d / "etc/sources.list").write_text(sources_line)
    opts = []
    for k, v in (("Dir::Etc::sourcelist", d / "etc/sources.list"), ("Dir::Etc::sourceparts", d / "etc/sources.list.d"),
                 ("Dir::Etc::preferencesparts", d / "etc/preferences.d"), ("Dir::State", d / "state"),
                 ("Dir::State::status", d / "state/status"), ("Dir::Cache", d / "cache"),
                 ("Debug::NoLocking", "1"), ("APT::Architecture", "amd64")):
        opts += ["-o", "%s=%s" % (k, v)]
    return opts


@needs_apt_tools
@pytest.mark.skipif(not shutil.which("apt-get"), reason="apt-get needed")
def test_repo_apt_get_update_and_simulate(repo, tmp_path):
    _, info = repo
    opts = _apt_opts(tmp_path / "apt", "deb [signed-by=%s] file://%s/ /\n" % (info["keyring"], info["repo"]))
    upd = subprocess.run(["apt-get", *opts, "update"], capture_output=True, text=True)
    assert upd.returncode == 0 and "not signed" not in upd.stderr, upd.stderr
    sim = subprocess.run(["apt-get", *opts, "--simulate", "install", "cuda-toolkit-13-0=13.0.0-1"],
                         capture_output=True, text=True)
    assert sim.returncode == 0, sim.stderr
    assert "Inst cuda-toolkit-13-0 (13.0.0-1" in sim.stdout and "Inst cuda-nvcc-13-0 (13.0.88-1" in sim.stdout
    assert "Inst cuda-crt-13-0 (13.0.88-1" in sim.stdout and "Inst cuda-cuobjdump-13-0 (13.2.51-1" in sim.stdout


@needs_apt_tools
@pytest.mark.skipif(not shutil.which("apt-get"), reason="apt-get needed")
def test_debian_repo_serves_the_host_compiler_closure(tmp_path):
    """The node's Debian mirror stand-in holds real Debian packages: g++ resolves from it alone (an empty dpkg
    status, so every dependency must be in the repo), and the index is signed with the sandbox key."""
    import distro_repo
    info = distro_repo.build_debian_repo(tmp_path / "artifacts")
    names = {p.name.split("_")[0] for p in Path(info["repo"]).glob("*.deb")}
    assert {"g++", "g++-12", "gcc-12", "cpp-12", "libstdc++-12-dev", "libc6-dev", "binutils"} <= names
    assert not any("%3a" in p.name for p in Path(info["repo"]).glob("*.deb"))  # epochs are not in pool names
    assert subprocess.run(["gpgv", "--keyring", info["keyring"], str(Path(info["repo"]) / "InRelease")],
                          capture_output=True).returncode == 0
    opts = _apt_opts(tmp_path / "apt", "deb [signed-by=%s] file://%s/ /\n" % (info["keyring"], info["repo"]))
    upd = subprocess.run(["apt-get", *opts, "update"], capture_output=True, text=True)
    assert upd.returncode == 0, upd.stderr
    sim = subprocess.run(["apt-get", *opts, "--simulate", "install", "g++"], capture_output=True, text=True)
    assert sim.returncode == 0, sim.stdout + sim.stderr
    assert re.search(r"^Inst g\+\+-12 ", sim.stdout, re.M) and re.search(r"^Inst libc6-dev ", sim.stdout, re.M)
    assert distro_repo.build_debian_repo(tmp_path / "artifacts")["rebuilt"] is False


# ============================================================================================ flashinfer
@pytest.fixture(scope="module")
def fi_repo(tmp_path_factory):
    if not shutil.which("git"):
        pytest.skip("git needed")
    g = tmp_path_factory.mktemp("git") / "flashinfer.git"
    sha = fake_sources.build_flashinfer_repo(g)
    return g, sha


@pytest.fixture(scope="module")
def torch_path(tmp_path_factory):
    """The stand-in torch package, with torch 2.14.1's own cpp_extension functions, for PYTHONPATH."""
    d = tmp_path_factory.mktemp("torch")
    fake_torch.write_package(d, cpp_extension=real_sources.torch_cpp_extension())
    return d


def _build(checkout: Path, dest: Path, env_extra, torch_path, backend="build_backend"):
    """Run a stand-in's PEP 517 build_wheel as pip's build environment would: torch (the stand-in) and packaging
    importable, nothing from the host's CUDA or arch variables."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("CUDA_HOME", "CUDA_PATH", "FLASHINFER_CUDA_ARCH_LIST", "TORCH_CUDA_ARCH_LIST", "MAX_JOBS",
                        "FLASHINFER_NVCC_THREADS")}
    env["PATH"] = "/usr/bin:/bin"
    env["PYTHONPATH"] = str(torch_path)
    env["FAKE_TORCH_NVIDIA_SMI"] = str(SMI)
    env.update(env_extra)
    code = "import %s as b, sys; print(b.build_wheel(sys.argv[1]))" % backend
    return subprocess.run([sys.executable, "-c", code, str(dest)], cwd=checkout, env=env, capture_output=True,
                          text=True)


def _checkout(git_dir, tag, dest):
    subprocess.run(["git", "clone", "-q", "--branch", tag, str(git_dir), str(dest)], check=True, capture_output=True)
    return dest


def test_flashinfer_repo_tag_and_determinism(fi_repo, tmp_path):
    g, sha = fi_repo
    tags = subprocess.run(["git", "ls-remote", "--tags", str(g)], capture_output=True, text=True, check=True).stdout
    assert re.search(r"^%s\trefs/tags/v0\.7\.2\^\{\}$" % sha, tags, re.M)
    main = subprocess.run(["git", "--git-dir", str(g), "rev-parse", "main"], capture_output=True, text=True,
                          check=True).stdout.strip()
    assert main != sha  # main moved past the release
    assert fake_sources.build_flashinfer_repo(tmp_path / "again.git") == sha
    assert fake_sources.build_flashinfer_repo(g) == sha  # no-op


def test_flashinfer_repo_carries_flashinfers_own_arch_and_cache_code(fi_repo, tmp_path):
    co = _checkout(fi_repo[0], "v0.7.2", tmp_path / "src")
    real = real_sources.flashinfer_files()
    assert (co / "flashinfer/compilation_context.py").read_text() == real["flashinfer/compilation_context.py"]
    assert "class CompilationContext:" in real["flashinfer/compilation_context.py"]
    cpp_ext = (co / "flashinfer/jit/cpp_ext.py").read_text()
    assert "flashinfer-python\n0.7.2's flashinfer/jit/cpp_ext.py" in cpp_ext
    for fn in real_sources.FLASHINFER_CPP_EXT_FUNCTIONS:
        assert "\ndef %s(" % fn in cpp_ext
    env = (co / "flashinfer/jit/env.py").read_text()
    for name in real_sources.FLASHINFER_ENV_BEFORE + real_sources.FLASHINFER_ENV_AFTER:
        assert re.search(r"^%s: pathlib\.Path = " % name, env, re.M), name
    assert "\ndef _get_workspace_dir_name()" in env
    # a JIT package: Python and CUDA sources, no csrc/ compiled by the build
    assert sorted(p.name for p in (co / "flashinfer/data/csrc").glob("*.cu")) == ["sampling.cu"]
    assert not (co / "csrc").exists()
    assert 'requires = ["torch", "packaging"]' in (co / "pyproject.toml").read_text()


def test_assignments_copy_the_statements_verbatim_or_refuse():
    src = "import os\nA: int = (\n    1 +\n    2)\nB = 3\n"
    assert real_sources.assignments(src, ["B", "A"], "x.py") == "B = 3\nA: int = (\n    1 +\n    2)\n"
    with pytest.raises(RuntimeError, match="x.py no longer assigns C at top level"):
        real_sources.assignments(src, ["C"], "x.py")


def test_extract_refuses_a_function_that_needs_more_than_the_stand_in_gives():
    src = "import os\n\ndef f():\n    return os.getcwd() + helper()\n"
    with pytest.raises(RuntimeError, match="f now uses helper"):
        real_sources.extract(src, ["f"], "import os\n", "x.py")
    assert "def f():" in real_sources.extract(src.replace(" + helper()", ""), ["f"], "import os\n", "x.py")
    with pytest.raises(RuntimeError, match="no top-level function g"):
        real_sources.extract(src, ["g"], "import os\n", "x.py")


def _flashinfer_site(fi_repo, tmp_path, torch_path, env_extra=None):
    """The stand-in FlashInfer's wheel, built as pip would (here with an arch list it must ignore), unpacked."""
    co = _checkout(fi_repo[0], "v0.7.2", tmp_path / "src")
    (tmp_path / "w").mkdir()
    built = _build(co, tmp_path / "w", dict({"FLASHINFER_CUDA_ARCH_LIST": "12.0f"}, **(env_extra or {})), torch_path)
    assert built.returncode == 0, built.stderr
    site = tmp_path / "site"
    with zipfile.ZipFile(tmp_path / "w" / built.stdout.strip().splitlines()[-1]) as zf:
        names = zf.namelist()
        zf.extractall(site)
    return site, names


def _jit(site, torch_path, env_extra, code):
    env = {k: v for k, v in os.environ.items()
           if k not in ("CUDA_HOME", "CUDA_PATH", "FLASHINFER_CUDA_ARCH_LIST", "MAX_JOBS", "FLASHINFER_NVCC_THREADS")}
    env.update(PATH="/usr/bin:/bin", PYTHONPATH="%s:%s" % (site, torch_path), FAKE_TORCH_NVIDIA_SMI=str(SMI))
    env.update(env_extra)
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)


SAMPLING = ("import json, logging; logging.basicConfig(level=logging.INFO)\n"
            "from flashinfer.jit.sampling import gen_sampling_module\n"
            "spec = gen_sampling_module(); before = spec.is_compiled; spec.build()\n"
            "print(json.dumps([before, spec.is_compiled, spec.is_aot, str(spec.get_library_path())]))\n")


def test_flashinfer_wheel_is_a_jit_package_that_compiles_nothing(fi_repo, tmp_path, torch_path):
    _site, names = _flashinfer_site(fi_repo, tmp_path, torch_path)
    assert "flashinfer_python-0.7.2.dist-info/RECORD" in names
    assert "flashinfer/data/csrc/sampling.cu" in names
    assert not [n for n in names if n.endswith((".so", ".cubin"))]  # like flashinfer_python-0.7.2-py3-none-any.whl


@needs_gxx
def test_flashinfer_jit_module_compiles_sm120_into_the_cache_with_flashinfers_flags(fi_repo, tmp_path, cuda13,
                                                                                     torch_path):
    site, _names = _flashinfer_site(fi_repo, tmp_path, torch_path)
    base = tmp_path / "release" / "flashinfer"
    env = {"CUDA_HOME": str(cuda13), "FLASHINFER_CUDA_ARCH_LIST": "12.0f", "FLASHINFER_WORKSPACE_BASE": str(base),
           "MAX_JOBS": "2", "FLASHINFER_NVCC_THREADS": "2"}
    comma = _jit(site, torch_path, dict(env, FLASHINFER_CUDA_ARCH_LIST="9.0a,12.0f"), SAMPLING)
    # FlashInfer's own parser: split(" ") then "major, minor = arch.split('.')"
    assert comma.returncode != 0 and "ValueError: too many values to unpack" in comma.stderr
    disabled = _jit(site, torch_path, dict(env, FLASHINFER_DISABLE_JIT="1"), SAMPLING)
    assert disabled.returncode != 0 and "JIT compilation is disabled via FLASHINFER_DISABLE_JIT" in disabled.stderr
    ok = _jit(site, torch_path, env, SAMPLING)
    assert ok.returncode == 0, ok.stderr
    library = base / ".cache/flashinfer/0.7.2/120f/cached_ops/sampling/sampling.so"
    assert json.loads(ok.stdout) == [False, True, False, str(library)]
    assert "Building JIT module sampling; this can take several minutes on first use." in ok.stderr
    assert "-gencode=arch=compute_120f,code=sm_120f" in ok.stderr and "--threads=2" in ok.stderr
    assert re.findall(r"ELF file +\d+: (\S+)", _cuobjdump(cuda13, library)) == ["sampling.1.sm_120.cubin"]
    again = _jit(site, torch_path, env, SAMPLING)  # up to date: nothing compiled
    assert json.loads(again.stdout)[:2] == [True, True] and "Building JIT module" not in again.stderr


@needs_gxx
def test_flashinfer_jit_arch_the_compiler_refuses_fails_with_nvccs_message(fi_repo, tmp_path, cuda13, torch_path):
    site, _names = _flashinfer_site(fi_repo, tmp_path, torch_path)
    env = {"CUDA_HOME": str(cuda13), "FLASHINFER_WORKSPACE_BASE": str(tmp_path / "ws")}
    bad = _jit(site, torch_path, dict(env, FLASHINFER_CUDA_ARCH_LIST="12.0x"), SAMPLING)
    assert bad.returncode != 0
    assert "RuntimeError: Ninja build failed. Ninja output:" in bad.stderr  # the real run_ninja's words
    assert "nvcc fatal   : Unsupported gpu architecture 'compute_120x'" in bad.stderr
    # unsuffixed: FlashInfer's own _normalize_cuda_arch asks nvcc's release (13.0 >= 12.9: family "f"); 9.0 -> 9.0a
    two = _jit(site, torch_path, dict(env, FLASHINFER_CUDA_ARCH_LIST="12.0 9.0"), SAMPLING)
    assert two.returncode == 0, two.stderr
    library = Path(json.loads(two.stdout)[3])
    assert library.parts[-4] == "90a_120f"  # sorted((major, minor)), as the real one names it
    assert sorted(re.findall(r"ELF file +\d+: \S+\.(sm_\w+)\.cubin", _cuobjdump(cuda13, library))) == ["sm_120", "sm_90a"]


@needs_gxx
@pytest.mark.skipif(not Path("/usr/bin/python3").exists(), reason="needs the system python3 with venv")
def test_flashinfer_pip_install_offline_in_fresh_venv(fi_repo, tmp_path, cuda13):
    """pip builds the checkout with build isolation from a local wheelhouse (the stand-in torch and packaging),
    as the role does on a node, and the installed package carries its CUDA sources for the JIT."""
    import wheelhouse
    venv = tmp_path / "venv"
    if subprocess.run(["/usr/bin/python3", "-m", "venv", str(venv)], capture_output=True).returncode != 0:
        pytest.skip("python3 -m venv unavailable")
    house = tmp_path / "wheelhouse"
    fake_torch.build_torch_wheel(house)
    cached = cuda_wheels.cache_dir() / "wheels"
    # The sandbox wheelhouse's pins, downloaded once: packaging to build, and the ninja wheel the package requires.
    wheelhouse.download_pinned(cached, ["packaging==26.4", *wheelhouse.RUNTIME_PINS])
    for pin in ["packaging==26.4", *wheelhouse.RUNTIME_PINS]:
        shutil.copy2(next(cached.glob("%s-%s-*.whl" % tuple(pin.split("==")))), house)
    co = _checkout(fi_repo[0], "v0.7.2", tmp_path / "src")
    env = dict(os.environ, CUDA_HOME=str(cuda13), FLASHINFER_CUDA_ARCH_LIST="12.0f", PIP_DISABLE_PIP_VERSION_CHECK="1",
               PATH="/usr/bin:/bin")
    env.pop("PIP_FIND_LINKS", None)
    p = subprocess.run([str(venv / "bin/pip"), "install", "--isolated", "--no-index", "--find-links", str(house),
                        str(co)], env=env, capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr
    q = subprocess.run([str(venv / "bin/python"), "-c",
                        "import flashinfer, os; print(flashinfer.__version__, os.path.isfile(os.path.join("
                        "os.path.dirname(flashinfer.__file__), 'data', 'csrc', 'sampling.cu')))"],
                       capture_output=True, text=True, check=True)
    assert q.stdout.strip() == "0.7.2 True"




# ============================================================================================ sglang build
@pytest.fixture(scope="module")
def sglang_checkout(tmp_path_factory):
    if not shutil.which("git"):
        pytest.skip("git needed")
    sys.path.insert(0, str(SANDBOX / "sglang_sim"))
    try:
        from build_repo import build_sglang_repo
    finally:
        sys.path.remove(str(SANDBOX / "sglang_sim"))
    d = tmp_path_factory.mktemp("sglang")
    build_sglang_repo(d / "sglang.git")
    return _checkout(d / "sglang.git", "v0.5.23", d / "src") / "python"


# The fleet's release series (benchmarks/rolling_redeploy.py): r2 alone, r2 + the crash at shard 40, r2 + the
# degenerate output, r2 + a release 30 % slower (the benchmark gate's), r2 + 500s after ready (the canary soak's). The
# crash and the degenerate patch are alternatives (both set the simulator's default fault).
FLEET_SERIES = [["0001-release-r2-note.patch"], ["0001-release-r2-note.patch", "0002-crash-at-shard-40.patch"],
                ["0001-release-r2-note.patch", "0003-degenerate-moe-output.patch"],
                ["0001-release-r2-note.patch", "0004-slower-release.patch"],
                ["0001-release-r2-note.patch", "0005-errors-after-ready.patch"]]


def test_the_patch_series_apply_to_the_simulator_checkout(sglang_checkout, tmp_path):
    """Each of the fleet's release series (FLEET_SERIES, every patch file in one of them) and the releases scenario's
    applying patch apply in order to the simulator as sglang_build checks it out; the releases scenario's bad patch
    does not. A simulator change that breaks a patch fails here, not 10 minutes into a fleet rollout."""
    src = sglang_checkout.parent
    assert sorted(p.name for p in (SANDBOX / "patches").glob("*.patch")) == sorted({p for s in FLEET_SERIES for p in s})

    def apply(work, patch):
        return subprocess.run(["git", "apply", "--verbose", str(patch)], cwd=work, capture_output=True, text=True)

    for n, series in enumerate(FLEET_SERIES):
        work = tmp_path / ("series%d" % n)
        shutil.copytree(src, work, symlinks=True)
        for name in series:
            done = apply(work, SANDBOX / "patches" / name)
            assert done.returncode == 0, "%s after %s: %s" % (name, series, done.stderr)
    releases = SANDBOX.parent.parent / "molecule" / "releases" / "patches"
    work = tmp_path / "fresh"
    shutil.copytree(src, work, symlinks=True)
    assert apply(work, releases / "0001-readme-note.patch").returncode == 0
    assert apply(work, releases / "0002-does-not-apply.patch").returncode != 0


@needs_gxx
def test_sglang_build_compiles_with_torchs_arch_flags(sglang_checkout, tmp_path, cuda13, torch_path):
    """The SGLang stand-in compiles csrc/ with torch's own _get_cuda_arch_flags: TORCH_CUDA_ARCH_LIST 12.0 gives
    sm_120 SASS; 12.0f, which torch does not know, fails with torch's own message; MAX_JOBS sets the jobs."""
    (tmp_path / "w").mkdir()
    env = {"CUDA_HOME": str(cuda13), "TORCH_CUDA_ARCH_LIST": "12.0", "MAX_JOBS": "2"}
    ok = _build(sglang_checkout, tmp_path / "w", env, torch_path, backend="sim_build_backend")
    assert ok.returncode == 0, ok.stderr
    with zipfile.ZipFile(tmp_path / "w" / ok.stdout.strip().splitlines()[-1]) as zf:
        record = json.loads(zf.read("sglang/_kernels.build.json"))
        (tmp_path / "k.so").write_bytes(zf.read("sglang/_kernels.so"))
        assert any(line.startswith("sglang/_kernels.so,sha256=") for line in
                   zf.read("sglang-0.5.23.dist-info/RECORD").decode().splitlines())
    assert record["flags"][0] == "-gencode=arch=compute_120,code=sm_120" and record["jobs"] == 2
    assert record["nvcc_version"].endswith("V13.0.88")
    assert re.findall(r"ELF file +\d+: k\.\d+\.(sm_\w+)\.cubin", _cuobjdump(cuda13, tmp_path / "k.so")) == [
        "sm_120", "sm_120"]
    bad = _build(sglang_checkout, tmp_path / "w2", dict(env, TORCH_CUDA_ARCH_LIST="12.0f"), torch_path,
                 backend="sim_build_backend")
    assert bad.returncode != 0 and "ValueError: Unknown CUDA arch (12.0f) or GPU not supported" in bad.stderr


# ============================================================================================ builder
@needs_apt_tools
def test_build_all_small_and_noop(tmp_path):
    pytest.importorskip("safetensors")
    import build_artifacts
    out = tmp_path / "artifacts"
    m = build_artifacts.build_all(out, shard_mb=0.25, shards=8, quiet=True)
    assert (out / "bin/nvidia-smi").read_bytes() == SMI.read_bytes() and os.access(out / "bin/nvidia-smi", os.X_OK)
    hub = Path(build_artifacts.__file__).parent / "fake_hub.py"
    assert (out / "bin/fake-hub").read_bytes() == hub.read_bytes() and os.access(out / "bin/fake-hub", os.X_OK)
    assert m["artifacts"]["model_mirror"] == {"path": "/srv/sandbox/bin/fake-hub", "serves": "/srv/sandbox/models"}
    gpus = json.loads((out / "gpus.json").read_text())
    assert len(gpus["gpus"]) == 8 and gpus["driver_version"] == "580.95.05" and gpus["failure"] is None
    assert m["artifacts"]["cuda_repo"]["url"] == "file:///srv/sandbox/cuda-repo/debian12/x86_64/"
    assert m["artifacts"]["model"]["path"] == "/srv/sandbox/models/Kimi-K2.5"
    assert (out / "models/Kimi-K2.5/model-00008-of-000008.safetensors").is_file()
    assert (out / "git/flashinfer.git").is_dir()
    m2 = build_artifacts.build_all(out, shard_mb=0.25, shards=8, quiet=True)
    redone = [line for line in m2["summary"] if "rebuilt)" in line or "written)" in line]
    assert not redone, redone
    assert m2["artifacts"] == m["artifacts"]


def test_fake_hub_cli_logs_each_request_with_its_bytes(tmp_path):
    """The sandbox-model-mirror unit runs fake_hub.py as a process; --log lets a test count what it sent."""
    import socket
    from urllib.request import Request, urlopen

    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "a.bin").write_bytes(b"x" * 1000)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    log = tmp_path / "requests.jsonl"
    proc = subprocess.Popen([sys.executable, str(Path(__file__).parent.parent / "sandbox" / "fake_hub.py"),
                             str(tmp_path / "m"), "--port", str(port), "--log", str(log)], stdout=subprocess.PIPE)
    try:
        assert proc.stdout.readline().startswith(b"serving ")
        with urlopen(Request("http://127.0.0.1:%d/a.bin" % port, headers={"Range": "bytes=400-"}), timeout=10) as r:
            assert r.status == 206 and r.read() == b"x" * 600
        deadline = time.monotonic() + 10  # the server logs a request once its body is sent, after the client has it
        while not (log.exists() and log.read_text().endswith("\n")) and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        proc.terminate()
        proc.wait(10)
    assert [json.loads(line) for line in log.read_text().splitlines()] == [
        {"method": "GET", "path": "/a.bin", "range": "bytes=400-", "status": 206, "bytes": 600}]
