"""The sandbox's real SGLang closure (tests/sandbox/closure.py) and the driver stand-in the real torch meets on a node
(tests/sandbox/standin_driver.py).

The closure is what the README's main job installs into every release: its pins must be the product's own (read from
the roles' defaults, one place), and the cache must hold exactly those versions of the stack, so a node's release holds
sglang 0.5.23, sglang-kernel 0.4.10, torch 2.14.1 and flashinfer-python 0.7.2 because the product asked for them.
"""

import importlib.util
import os
import pathlib
import re
import subprocess
import sys
import textwrap
import types

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "sandbox"))

import closure  # noqa: E402
from role_defaults import role_default  # noqa: E402

ROLES = ROOT / "roles"


_default = role_default  # a role's default from its one place (tests/sandbox/role_defaults.py)


def _wheel_versions(directory):
    """{canonical project: version} of the wheels in ``directory``."""
    found = {}
    for wheel in directory.glob("*.whl"):
        name, version = wheel.name.split("-")[:2]
        found[re.sub(r"[-_.]+", "-", name).lower()] = version
    return found


def test_the_closure_is_asked_for_with_the_products_own_pins():
    assert closure.requirements() == ["sglang==" + _default("deployment", "deployment_sglang_version"),
                                      "uv==" + _default("deployment", "sglang_build_uv_version")]
    pins = closure.constraints()
    assert "torch==" + _default("deployment", "sglang_build_torch_version") in pins
    assert "flashinfer-python==" + _default("flashinfer_build", "flashinfer_build_version") in pins
    for pin in _default("deployment", "sglang_build_constraints"):
        assert pin in pins


def test_a_changed_pin_is_a_new_cache_entry(monkeypatch):
    before = closure.recipe()
    monkeypatch.setattr(closure, "constraints", lambda: ["torch==2.14.0"])
    assert closure.recipe() != before


# The artifacts (tests/sandbox/build_artifacts.py, run by scripts/test.sh before the tests) hold the closure.
ARTIFACTS_CLOSURE = ROOT / ".sandbox" / "artifacts" / closure.NODE_DIR


@pytest.mark.skipif(not ARTIFACTS_CLOSURE.is_dir(), reason="no .sandbox/artifacts: run tests/sandbox/build_artifacts.py")
def test_the_nodes_wheelhouse_holds_the_pinned_stack_and_its_installer():
    versions = _wheel_versions(ARTIFACTS_CLOSURE)
    assert versions["sglang"] == "0.5.23"
    assert versions["sglang-kernel"] == "0.4.10"
    assert versions["torch"] == "2.14.1"
    assert versions["flashinfer-python"] == "0.7.2"
    assert versions["triton"] == "3.8.0"
    assert versions["uv"] == _default("deployment", "sglang_build_uv_version")
    # the closure, not a sample: the CUDA 13 libraries torch and sglang-kernel load come with it
    assert {"nvidia-cublas", "nvidia-cudnn-cu13", "nvidia-nccl-cu13", "ninja", "apache-tvm-ffi"} <= set(versions)
    assert len(versions) > 150


def test_link_into_hardlinks_and_drops_what_the_closure_no_longer_holds(tmp_path):
    source, dest = tmp_path / "cache", tmp_path / "artifacts"
    source.mkdir()
    dest.mkdir()
    (source / "a-1-py3-none-any.whl").write_bytes(b"a" * 10)
    (source / "b-2-py3-none-any.whl").write_bytes(b"b" * 5)
    (dest / "old-0-py3-none-any.whl").write_bytes(b"stale")
    info = closure.link_into(source, dest)
    assert info == {"wheels": 2, "bytes": 15, "linked": True}
    assert sorted(p.name for p in dest.iterdir()) == ["a-1-py3-none-any.whl", "b-2-py3-none-any.whl"]
    assert (dest / "a-1-py3-none-any.whl").stat().st_ino == (source / "a-1-py3-none-any.whl").stat().st_ino
    assert closure.link_into(source, dest)["wheels"] == 2  # again: nothing to do


def test_an_interrupted_download_leaves_no_entry_a_later_run_trusts(tmp_path, monkeypatch):
    def failing_pip(*args, **kwargs):
        raise subprocess.CalledProcessError(1, args[0])

    monkeypatch.setattr(closure.subprocess, "run", failing_pip)
    with pytest.raises(subprocess.CalledProcessError):
        closure.download(tmp_path)
    assert list((tmp_path / "closure").iterdir()) == []


def test_the_machine_cache_is_outside_the_clone(monkeypatch):
    monkeypatch.delenv("SANDBOX_MACHINE_CACHE", raising=False)
    assert ROOT not in closure.machine_cache().parents


# The driver stand-in, loaded as a node loads it (as a module of its own), against a torch-shaped module.
def _driver(monkeypatch, tmp_path, smi_lines, visible=None):
    smi = tmp_path / "bin" / "nvidia-smi"
    smi.parent.mkdir(exist_ok=True)
    body = "\n".join("echo '%s'" % line for line in smi_lines) if smi_lines is not None else "exit 9"
    smi.write_text("#!/bin/sh\n%s\n" % body)
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", "%s:%s" % (smi.parent, os.environ["PATH"]))
    if visible is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    spec = importlib.util.spec_from_file_location("standin_driver_under_test", ROOT / "tests/sandbox/standin_driver.py")
    module = importlib.util.module_from_spec(spec)
    before = list(sys.meta_path)
    spec.loader.exec_module(module)
    sys.meta_path[:] = before  # the hook is exercised in a subprocess below, not in this interpreter
    return module


def _torch_like(arch_list):
    cuda = types.SimpleNamespace()
    cuda.get_arch_list = lambda: arch_list if cuda.is_available() else []
    return types.SimpleNamespace(cuda=cuda, ones=lambda *size, **kw: ("ones", size, kw))


BLACKWELL = "NVIDIA RTX PRO 6000 Blackwell Server Edition, 12.0"


def test_the_driver_answers_from_the_nodes_gpus(monkeypatch, tmp_path):
    driver = _driver(monkeypatch, tmp_path, [BLACKWELL, BLACKWELL])
    torch = _torch_like(["sm_90", "sm_100", "sm_120"])
    driver.install_into(torch)
    assert torch.cuda.is_available() and torch.cuda.device_count() == 2
    assert torch.cuda.get_device_name(1) == "NVIDIA RTX PRO 6000 Blackwell Server Edition"
    assert torch.cuda.get_device_capability("cuda:1") == (12, 0)
    assert torch.ones(4, device="cuda") == ("ones", (4,), {"device": "cpu"})
    with pytest.raises(RuntimeError, match="invalid device ordinal"):
        torch.cuda.get_device_capability(2)


def test_a_torch_without_an_image_for_the_gpu_fails_its_first_kernel_as_the_runtime_does(monkeypatch, tmp_path):
    driver = _driver(monkeypatch, tmp_path, [BLACKWELL])
    torch = _torch_like(["sm_80", "sm_90", "sm_100"])  # sm_100 SASS does not run on 12.0; no PTX
    driver.install_into(torch)
    with pytest.raises(RuntimeError, match="^CUDA error: no kernel image is available for execution on the device"):
        torch.ones(4, device="cuda")
    assert driver.has_image(["compute_90"], (12, 0))  # PTX of an older arch is JIT-compiled by the driver
    assert driver.has_image(["sm_120"], (12, 1)) and not driver.has_image(["sm_121"], (12, 0))


def test_no_driver_and_hidden_devices_mean_no_cuda(monkeypatch, tmp_path):
    driver = _driver(monkeypatch, tmp_path, None)
    torch = _torch_like(["sm_120"])
    driver.install_into(torch)
    assert not torch.cuda.is_available() and torch.cuda.get_arch_list() == []
    with pytest.raises(RuntimeError, match="^Found no NVIDIA driver on your system"):
        torch.cuda.get_device_name(0)
    hidden = _driver(monkeypatch, tmp_path, [BLACKWELL, BLACKWELL], visible="1")
    assert len(hidden.gpus()) == 1
    assert _driver(monkeypatch, tmp_path, [BLACKWELL], visible="").gpus() == []


REAL_TORCH = ROOT / ".venv-sglang" / "bin" / "python"


@pytest.mark.skipif(not REAL_TORCH.exists(), reason=".venv-sglang is absent: run tests/contract/install_real_sglang.sh")
def test_the_hook_answers_for_the_real_torch_as_sitecustomize(tmp_path):
    """As a node runs it: the stand-in is the interpreter's sitecustomize and a real torch (2.13.0, the CPU build the
    contract venv holds) is imported afterwards."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_bytes((ROOT / "tests/sandbox/standin_driver.py").read_bytes())
    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho '%s'\necho '%s'\n" % (BLACKWELL, BLACKWELL))
    smi.chmod(0o755)
    env = dict(os.environ, PYTHONPATH=str(site), PATH="%s:%s" % (tmp_path, os.environ["PATH"]))
    env.pop("CUDA_VISIBLE_DEVICES", None)
    code = textwrap.dedent("""\
        import torch
        print(torch.cuda.is_available(), torch.cuda.device_count(), torch.cuda.get_device_capability(0))
        print(torch.ones(2).sum().item())
        """)
    out = subprocess.run([str(REAL_TORCH), "-c", code], env=env, capture_output=True, text=True, timeout=300,
                         check=True).stdout.split("\n")
    assert out[0] == "True 2 (12, 0)"
    assert out[1] == "2.0"  # a CPU tensor is the real torch's own
