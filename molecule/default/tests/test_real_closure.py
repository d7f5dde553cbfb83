"""The node's release holds the real SGLang 0.5.23 closure, as the README's main job installs it (issue 36): installed
from the artifacts' wheelhouse/closure (tests/sandbox/closure.py), probed with the real packages, FlashInfer's sampling
module compiled by the real nvcc; only the server itself is the simulator, ahead of the real sglang for its unit alone."""

import json
import os

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
                                    "torch": "2.14.1", "triton": "3.8.0"}
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
    assert report["flashinfer JIT cache"]["with_sm_120"] == ["cached_ops/sampling/sampling"]


def test_flashinfers_sampling_module_was_compiled_into_the_release(host):
    target, release = _release(host)
    (module,) = release["flashinfer_warm"]["modules"]
    assert module["module"] == "sampling" and module["result"] == "compiled" and not module["aot"]
    assert module["path"].startswith(f"{target}/flashinfer/")
    assert host.file(module["path"]).exists


def test_the_simulator_serves_from_a_sandbox_drop_in_and_the_unit_file_is_a_real_hosts(host):
    unit = host.file(f"/etc/systemd/system/{UNIT}").content_string
    assert "PYTHONPATH" not in unit and "/srv/sandbox" not in unit
    env = host.run(f"systemctl show -p Environment {UNIT}").stdout
    assert "PYTHONPATH=/srv/sandbox/sim" in env
