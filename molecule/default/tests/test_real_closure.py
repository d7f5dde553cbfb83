"""The node's release holds the real SGLang 0.5.23 closure, as the README's main job installs it (issue 36): installed
from the artifacts' wheelhouse/closure (tests/sandbox/closure.py), probed with the real packages, FlashInfer's sampling
module loaded from its AOT package (flashinfer-jit-cache, made from one real compile per machine:
tests/sandbox/flashinfer_aot.py), so no nvcc ran on the node; only the server itself is the simulator, ahead of the real
sglang for its unit alone. side_effect.yml prepared a second release beside it, as the rolling redeploy prepares one, on
the product's default FlashInfer path: its warm compiled the real sampling module with the real nvcc on the node; it came
from the node's package cache alone and shares every package file with the first."""

import json
import os
import re

import testinfra.utils.ansible_runner

testinfra_hosts = [
    f"podman://{name}"
    for name in testinfra.utils.ansible_runner.AnsibleRunner(os.environ["MOLECULE_INVENTORY_FILE"]).get_hosts(
        "gpu_nodes"
    )
]

UNIT = "sglang-kimi.service"


def _release(host):
    target = host.file("/opt/sglang/current").linked_to
    return target, json.loads(host.file(f"{target}/release.json").content_string)


def test_the_release_holds_the_pinned_real_stack(host):
    target, release = _release(host)
    assert release["installed"] == {"flashinfer-python": "0.7.2", "sglang": "0.5.23", "sglang-kernel": "0.4.10",
                                    "torch": "2.14.1", "triton": "3.8.0", "flashinfer-jit-cache": "0.7.2+cu130"}
    freeze = host.file(f"{target}/freeze.txt").content_string
    assert "torch==2.14.1" in freeze.splitlines()
    assert len(freeze.splitlines()) > 150  # the whole closure, not a stand-in's handful
    # the real torch, the CUDA 13.0 build
    assert release["probe"]["torch"] == "2.14.1+cu130" and release["probe"]["torch_cuda"] == "13.0"


def test_the_probe_read_the_real_kernels_sass(host):
    _target, release = _release(host)
    report = release["probe"]["kernel_report"]
    assert "sgl_kernel/sm100/common_ops" in report["sglang-kernel"]["with_sm_120"]
    assert set(report["sglang-kernel"]["unloaded_sm_120"]) == {"sgl_kernel/flash_ops", "sgl_kernel/flashmla_ops"}
    # FlashInfer's module, read where the server loads it: the AOT package's library
    assert report["flashinfer-jit-cache"]["with_sm_120"] == ["flashinfer_jit_cache/jit_cache/sampling/sampling"]
    assert report["flashinfer JIT cache"]["with_sm_120"] == ["flashinfer_jit_cache/jit_cache/sampling/sampling"]


def test_flashinfers_sampling_module_comes_from_its_aot_package_and_no_nvcc_ran(host):
    target, release = _release(host)
    (module,) = release["flashinfer_warm"]["modules"]
    assert module["module"] == "sampling" and module["result"] == "aot" and module["aot"]
    assert module["path"] == f"{target}/venv/lib/python3.11/site-packages/flashinfer_jit_cache/jit_cache/sampling/sampling.so"
    # the release's JIT cache compiled nothing: no object, no library (only FlashInfer's log may be there)
    assert host.run(f"find {target}/flashinfer -name '*.o' -o -name '*.so' -o -name build.ninja").stdout == ""


def _second(host):
    """The release side_effect.yml prepared: complete, not current."""
    current = host.file("/opt/sglang/current").linked_to
    done = host.run("ls -d /opt/sglang/releases/*/release.json").stdout.split()
    (second,) = [path.rsplit("/", 1)[0] for path in done if not path.startswith(current + "/")]
    return current, second


def test_the_second_release_compiled_flashinfers_real_module_on_the_node_without_the_aot_package(host):
    _current, second = _second(host)
    release = json.loads(host.file(f"{second}/release.json").content_string)
    assert "flashinfer-jit-cache" not in release["installed"]
    (module,) = release["flashinfer_warm"]["modules"]
    assert module["module"] == "sampling" and module["result"] == "compiled" and not module["aot"]
    assert module["path"].startswith(f"{second}/flashinfer/") and host.file(module["path"]).exists
    assert release["probe"]["kernel_report"]["flashinfer JIT cache"]["with_sm_120"] == ["cached_ops/sampling/sampling"]


def test_a_second_release_installs_from_the_package_cache_alone_and_shares_its_files(host):
    current, second = _second(host)
    assert host.file("/opt/sglang/current").linked_to == current  # prepared: current untouched
    log = host.file(f"{second}/build.log").content_string
    # uv read no wheel: every package came from the node's package cache ("Prepared N packages" is each one unpacked)
    assert re.search(r"^Installed \d{3} packages", log, re.M) and "Prepared" not in log, log
    freeze = [set(host.file(f"{path}/freeze.txt").content_string.splitlines()) for path in (current, second)]
    assert freeze[0] - freeze[1] == {"flashinfer-jit-cache==0.7.2+cu130"} and freeze[1] <= freeze[0]
    # one inode for each package file: the serving release, the second one and uv's package cache
    torch_lib = "venv/lib/python3.11/site-packages/torch/lib/libtorch_cuda.so"
    inodes = host.run(f"stat -c '%i %h' {current}/{torch_lib} {second}/{torch_lib}").stdout.splitlines()
    assert len(set(inodes)) == 1 and int(inodes[0].split()[1]) >= 3, inodes
    # what the second adds on disk: its own bytecode, its compiled module and the links, not the 9.5 GB of packages
    first, added = (int(line.split()[0]) for line in host.run(f"du -sb {current} {second}").stdout.splitlines())
    assert first > 8e9 and added < 2e9, (first, added)


def test_the_simulator_serves_from_a_sandbox_drop_in_and_the_unit_file_is_a_real_hosts(host):
    unit = host.file(f"/etc/systemd/system/{UNIT}").content_string
    assert "PYTHONPATH" not in unit and "/srv/sandbox" not in unit
    env = host.run(f"systemctl show -p Environment {UNIT}").stdout
    assert "PYTHONPATH=/srv/sandbox/sim" in env
