"""The SGLang unit's environment (plugins/filter/sglang_environment.py): what FlashInfer's JIT and Triton's launcher
build need on PATH and in CUDA_HOME, one derivation for the unit and the release probe, and what systemd can read."""


import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.blackwell.sglang.plugins.filter import sglang_environment as se

RUNTIME = {"home": "/var/lib/sglang", "cuda_home": "/usr/local/cuda-13.0", "environment": {}, "socket_ifname": ""}


def test_the_unit_finds_the_venv_and_cuda_first_then_systemds_default_path():
    env = se.sglang_unit_environment(RUNTIME, "/opt/sglang/current")
    assert env["PATH"] == ("/opt/sglang/current/venv/bin:/usr/local/cuda-13.0/bin:"
                           "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
    assert env["CUDA_HOME"] == "/usr/local/cuda-13.0"
    assert list(env)[:5] == ["HOME", "HF_HOME", "XDG_CACHE_HOME", "TRITON_CACHE_DIR", "FLASHINFER_WORKSPACE_BASE"]
    assert env["TRITON_CACHE_DIR"] == "/var/lib/sglang/cache/triton"
    assert "NCCL_SOCKET_IFNAME" not in env


def test_the_probe_gets_the_same_environment_for_a_release_not_current_yet():
    unit = se.sglang_unit_environment(RUNTIME, "/opt/sglang/current")
    probe = se.sglang_unit_environment(RUNTIME, "/opt/sglang/releases/abc123/")
    assert probe["PATH"].startswith("/opt/sglang/releases/abc123/venv/bin:")
    own = ("PATH", "FLASHINFER_WORKSPACE_BASE")
    assert {k: v for k, v in probe.items() if k not in own} == {k: v for k, v in unit.items() if k not in own}


def test_flashinfers_jit_cache_is_the_releases_own_for_the_archs_it_was_warmed_for():
    runtime = dict(RUNTIME, flashinfer_arch_list="12.0f")
    assert se.sglang_unit_environment(runtime, "/opt/sglang/current")["FLASHINFER_WORKSPACE_BASE"] == (
        "/opt/sglang/current/flashinfer")
    probe = se.sglang_unit_environment(runtime, "/opt/sglang/releases/abc123/")
    assert probe["FLASHINFER_WORKSPACE_BASE"] == "/opt/sglang/releases/abc123/flashinfer"
    assert probe["FLASHINFER_CUDA_ARCH_LIST"] == "12.0f"
    assert "FLASHINFER_CUDA_ARCH_LIST" not in se.sglang_unit_environment(RUNTIME, "/opt/sglang/current")


def test_the_operators_environment_comes_last_and_wins():
    runtime = dict(RUNTIME, socket_ifname="ens1", environment={"PATH": "/usr/bin:/bin", "NCCL_DEBUG": "WARN"})
    env = se.sglang_unit_environment(runtime, "/opt/sglang/current")
    assert env["PATH"] == "/usr/bin:/bin"  # the toolchain check refuses it (test_release_probe.py)
    assert env["NCCL_SOCKET_IFNAME"] == env["GLOO_SOCKET_IFNAME"] == "ens1"
    assert list(env)[-1] == "NCCL_DEBUG"  # a new variable after the unit's own; an override keeps its place


def test_environment_file_text_and_what_it_refuses():
    assert se.sglang_environment_file({"A": "1", "B": "x y", "C": None}) == "A=1\nB=x y\nC=\n"
    with pytest.raises(AnsibleFilterError, match="BAD has a line break"):
        se.sglang_environment_file({"BAD": "a\nEVIL=1"})
    with pytest.raises(AnsibleFilterError, match="'1X' is not a variable name"):
        se.sglang_environment_file({"1X": "v"})
    with pytest.raises(AnsibleFilterError, match="needs cuda_home"):
        se.sglang_unit_environment({"home": "/h"}, "/r")


def test_the_servers_health_bound_comes_from_the_deployment_and_is_not_overridden():
    env = se.sglang_unit_environment(dict(RUNTIME, health_check_timeout_s=20), "/opt/sglang/current")
    assert env["SGLANG_HEALTH_CHECK_TIMEOUT"] == "20"
    with pytest.raises(AnsibleFilterError, match="set deployment_health_check_timeout_s instead"):
        se.sglang_unit_environment(dict(RUNTIME, health_check_timeout_s=20,
                                        environment={"SGLANG_HEALTH_CHECK_TIMEOUT": "5"}), "/opt/sglang/current")
