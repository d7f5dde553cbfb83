"""gpu_facts: recorded nvidia-smi outputs (tests/unit/fixtures/nvidia_smi/*.yml), run_command mocked."""

import glob
import os

import pytest

from ansible_collections.blackwell.sglang.plugins.modules import gpu_facts
from ansible.module_utils import basic
from ansible_collections.blackwell.sglang.plugins.module_utils.host.nvidia_smi import NvidiaSmiError, clean, parse_compute_apps, parse_gpus
from conftest import FIXTURES, load_yaml

CASES = sorted(os.path.basename(p)[:-4] for p in glob.glob(os.path.join(FIXTURES, "nvidia_smi", "*.yml")))


def fake_run_command(case):
    def run(self, args, **kwargs):
        query = case["gpu_query"] if any(a.startswith("--query-gpu=") for a in args) else case["apps_query"]
        return query["rc"], query["stdout"], query.get("stderr", "")
    return run


@pytest.fixture
def with_smi(monkeypatch):
    """nvidia-smi at /usr/bin; no coreutils timeout (commands run as they are)."""
    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path",
                        lambda self, name, required=False, opt_dirs=None: "/usr/bin/nvidia-smi" if name == "nvidia-smi" else None)


@pytest.mark.parametrize("name", CASES)
def test_recorded_output(name, module_runner, monkeypatch, with_smi):
    case = load_yaml("nvidia_smi", name + ".yml")
    monkeypatch.setattr(basic.AnsibleModule, "run_command", fake_run_command(case))
    kind, result = module_runner(gpu_facts, {})
    assert result.get("changed", False) is False
    if "error" in case:
        assert kind == "fail"
        assert result["error_kind"] == case["error"]["kind"]
        assert pytest.importorskip("re").search(case["error"]["match"], result["msg"])
    else:
        assert kind == "exit", result
        for key, value in case["expected"].items():
            assert result[key] == value, key


@pytest.mark.parametrize("name", [n for n in CASES if "error" in load_yaml("nvidia_smi", n + ".yml")])
def test_fail_on_error_false_returns_the_error(name, module_runner, monkeypatch, with_smi):
    case = load_yaml("nvidia_smi", name + ".yml")
    monkeypatch.setattr(basic.AnsibleModule, "run_command", fake_run_command(case))
    kind, result = module_runner(gpu_facts, {"fail_on_error": False}, check_mode=True)
    assert kind == "exit"
    assert result["changed"] is False
    assert result["gpus"] == [] and result["gpu_count"] == 0
    assert case["error"]["kind"] == result["error_kind"]
    assert result["error"]


def test_missing_nvidia_smi_names_the_searched_path(module_runner, monkeypatch):
    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path", lambda self, *a, **k: None)
    monkeypatch.setenv("PATH", "/usr/sbin:/opt/bin")
    kind, result = module_runner(gpu_facts, {})
    assert kind == "fail"
    assert "nvidia-smi not found; searched /usr/sbin:/opt/bin:/usr/bin:/usr/local/bin" in result["msg"]
    assert "install the driver" in result["msg"]


def test_missing_explicit_path(module_runner, tmp_path):
    kind, result = module_runner(gpu_facts, {"nvidia_smi_path": str(tmp_path / "nvidia-smi"), "fail_on_error": False})
    assert kind == "exit"
    assert result["error_kind"] == "missing"
    assert str(tmp_path / "nvidia-smi") in result["error"]


def test_queries_ask_for_the_documented_fields(module_runner, monkeypatch, with_smi):
    seen = []

    def run(self, args, **kwargs):
        seen.append(args)
        return 0, "" if "--query-compute-apps" in args[1] else load_yaml("nvidia_smi", "rtx_pro_6000_x8_idle.yml")["gpu_query"]["stdout"], ""

    monkeypatch.setattr(basic.AnsibleModule, "run_command", run)
    kind, _ = module_runner(gpu_facts, {})
    assert kind == "exit"
    assert seen[0] == ["/usr/bin/nvidia-smi",
                       "--query-gpu=index,name,uuid,compute_cap,memory.total,memory.used,driver_version,"
                       "persistence_mode,pci.bus_id", "--format=csv,noheader,nounits"]
    assert seen[1] == ["/usr/bin/nvidia-smi", "--query-compute-apps=pid,gpu_uuid,process_name,used_memory",
                       "--format=csv,noheader,nounits"]


def test_empty_gpu_list_is_an_error(module_runner, monkeypatch, with_smi):
    monkeypatch.setattr(basic.AnsibleModule, "run_command", lambda self, args, **k: (0, "", ""))
    kind, result = module_runner(gpu_facts, {})
    assert kind == "fail" and "listed no GPUs" in result["msg"]


@pytest.mark.parametrize("raw", ["[N/A]", "N/A", "[Not Supported]", " [Unknown Error] ", ""])
def test_unavailable_values_become_none(raw):
    assert clean(raw) is None


def test_parse_lists_every_bad_row():
    with pytest.raises(NvidiaSmiError) as err:
        parse_gpus("x, a, b, 12.0, 1, 1, 580.65.06, Enabled, 0\n1, a, b, 12.0, lots, 1, 580.65.06, Maybe, 0\n")
    text = str(err.value)
    assert "row 1: index='x' is not a number" in text
    assert "row 2: memory.total='lots' is not a number" in text
    assert "row 2: persistence_mode='Maybe'" in text


def test_no_running_processes_text_is_empty():
    assert parse_compute_apps("No running processes found\n") == []


def test_a_hanging_nvidia_smi_is_killed_and_reported(module_runner, monkeypatch, tmp_path):
    """nvidia-smi hangs on a GPU that fell off the bus: the call runs under coreutils timeout and says so."""
    hang = tmp_path / "nvidia-smi"
    hang.write_text("#!/bin/sh\nsleep 30\n")
    hang.chmod(0o755)
    kind, result = module_runner(gpu_facts, {"nvidia_smi_path": str(hang), "timeout": 1, "fail_on_error": False})
    assert kind == "exit"
    assert result["error_kind"] == "timeout"
    assert "did not answer within 1 s" in result["error"] and "Xid 79" in result["error"]


def test_own_unit_is_the_units_cgroup_members_and_the_gpu_pids_among_them(tmp_path):
    """Its processes by cgroup membership (the unit's cgroup and sub-cgroups, as systemd names it), not the MainPID
    tree: a scheduler that re-parented still counts; a foreign GPU process does not."""
    cg = tmp_path / "cg"
    for rel, pids in (("systemd/system.slice/sglang-kimi.service", "4242\n"),
                      ("systemd/system.slice/sglang-kimi.service/payload", "4250\n4251\n"),
                      ("systemd/system.slice/other.service", "7777\n")):
        (cg / rel).mkdir(parents=True, exist_ok=True)
        (cg / rel / "cgroup.procs").write_text(pids)

    class Module(object):
        params = {"timeout": 0}

        def get_bin_path(self, name, *a, **k):
            return "/bin/systemctl" if name == "systemctl" else None

        def run_command(self, argv, **kw):
            assert argv == ["/bin/systemctl", "show", "sglang-kimi.service", "-p", "ControlGroup,MainPID"]
            return 0, "ControlGroup=/system.slice/sglang-kimi.service\nMainPID=4242\n", ""

    apps = [{"pid": 4250}, {"pid": 4251}, {"pid": 7777}]
    own = gpu_facts.own_unit_processes(Module(), "sglang-kimi.service", apps, cgroup_root=str(cg))
    assert own == {"name": "sglang-kimi.service", "control_group": "/system.slice/sglang-kimi.service",
                   "pids": [4242, 4250, 4251], "gpu_pids": [4250, 4251]}
    assert gpu_facts.own_unit_processes(Module(), None, apps)["pids"] == []
