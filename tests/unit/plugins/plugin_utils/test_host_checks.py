"""host_problems on recorded inputs (tests/unit/fixtures/host_facts/cases.yml): every host-fact check at once, as
the preflight_host_fact_problems filter runs it."""

import copy

import pytest

from ansible_collections.blackwell.sglang.plugins.plugin_utils import _host_checks as hc
from conftest import load_lspci, load_text, load_yaml

CASES = load_yaml("host_facts", "cases.yml")["cases"]
LIMITS_CASE = next(c for c in CASES if c["name"].startswith("sandbox node, unit asks for LimitMEMLOCK=infinity"))
SANDBOX_PLAN = {
    # what roles/preflight passes on the sandbox inventory (inventory/sandbox/group_vars/gpu_nodes/main.yml)
    "unit": "sglang-kimi.service", "interconnect": "pcie", "limits": {"memlock": "8M", "nofile": "10000"},
    "log_rate_limit": {"interval_sec": 30, "burst": 100000}, "journal_min_burst": 20000, "model_bytes": 134217728,
    "fallback_weights_gb": 547, "environment": {}, "options": {"tp-size": 8},
    "shm": {"path": "/dev/shm", "size_bytes": 2147483648, "free_bytes": 2147483648}, "shm_floor_gib": 1,
    # host_prerequisites_plan.packages of a Debian 12 GPU node (roles/host_prerequisites/defaults/main.yml)
    "installs": ["gcc", "git", "numactl", "pciutils", "python3-apt", "python3-debian", "python3-dev",
                 "python3-packaging", "python3-venv"],
}


def merge(base, over):
    out = copy.deepcopy(base)
    for key, value in (over or {}).items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def patch_status(status, fields):
    lines = []
    for line in status.splitlines():
        key = line.split(":", 1)[0]
        lines.append("%s:\t%s" % (key, fields[key]) if key in (fields or {}) else line)
    return "\n".join(lines) + "\n"


def patch_limits(limits, rows):
    lines = []
    for line in limits.splitlines():
        for name, (soft, hard) in (rows or {}).items():
            if line.startswith(name):
                unit = line.split()[-1]
                line = "%-26s%-21s%-21s%s" % (name, soft, hard, unit)
        lines.append(line)
    return "\n".join(lines) + "\n"


def build(case):
    base = load_yaml("host_facts", "sandbox_node.yml")
    base["pid1"] = {"status": load_text("host_facts", base["pid1"]["status_file"]),
                    "limits": load_text("host_facts", base["pid1"]["limits_file"])}
    facts = merge(base, case.get("facts"))
    facts["pid1"]["status"] = patch_status(facts["pid1"]["status"], case.get("pid1_status"))
    facts["pid1"]["limits"] = patch_limits(facts["pid1"]["limits"], case.get("pid1_limits"))
    if case.get("lspci"):
        facts["lspci"] = {"path": "/usr/bin/lspci", "rc": 0, "output": load_lspci(case["lspci"]), "error": ""}
    gpus = case.get("gpus")
    if gpus == "rtx_pro_6000_x8_idle":
        gpus = load_yaml("nvidia_smi", "rtx_pro_6000_x8_idle.yml")["expected"]["gpus"]
    elif gpus is None:
        gpus = [{"index": i, "pci_bus_id": "00000000:%02X:00.0" % (0x18 + i)} for i in range(8)]
    return facts, {"gpus": gpus}, merge(SANDBOX_PLAN, case.get("plan"))


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_case(case):
    facts, gpus, plan = build(case)
    got = hc.host_problems(facts, gpus, plan)
    expect = case["expect"]
    for kind in ("errors", "warnings"):
        for needle in expect.get(kind, []):
            assert any(needle in msg for msg in got[kind]), "%r not in %s: %s" % (needle, kind, got[kind])
        if kind[:-1] + "_count" in expect:
            assert len(got[kind]) == expect[kind[:-1] + "_count"], got[kind]
    if "deferred" in expect:
        assert got["deferred"] == expect["deferred"]


def test_every_error_names_a_fix():
    for case in CASES:
        facts, gpus, plan = build(case)
        for msg in hc.host_problems(facts, gpus, plan)["errors"]:
            assert "Fix:" in msg or "fix" in msg.lower(), msg


def test_failed_host_facts_is_one_error():
    got = hc.host_problems({"failed": True, "msg": "boom"}, {}, SANDBOX_PLAN)
    assert got == {"errors": ["could not read the host facts: boom"], "warnings": [], "deferred": []}


def test_the_sandbox_plan_installs_what_the_map_gives_a_debian_12_gpu_node():
    """SANDBOX_PLAN's installs is what preflight passes (host_prerequisites_plan.packages), not a list of its own."""
    import pathlib

    import yaml
    from ansible_collections.blackwell.sglang.plugins.filter.host_prerequisites import host_prerequisites_plan

    root = pathlib.Path(__file__).resolve().parents[4]
    the_map = yaml.safe_load((root / "roles/host_prerequisites/defaults/main.yml").read_text())
    plan = host_prerequisites_plan(the_map["host_prerequisites_distributions"], "Debian", "12")
    assert plan["packages"] == SANDBOX_PLAN["installs"]


def test_checks_runs_only_the_named_ones_and_refuses_unknown_names():
    facts, gpus, plan = build(dict(LIMITS_CASE, plan=dict(LIMITS_CASE["plan"], installs=[])))  # limits, no lspci
    assert len(hc.host_problems(facts, gpus, plan)["errors"]) == 3  # 2 limits + lspci nothing installs
    only_acs = hc.host_problems(facts, gpus, dict(plan, checks=["acs", "numa"]))["errors"]
    assert len(only_acs) == 1 and only_acs[0].startswith("lspci is not installed")
    assert len(hc.host_problems(facts, gpus, dict(plan, checks=["limits"]))["errors"]) == 2
    with pytest.raises(ValueError, match="unknown host checks acs2"):
        hc.host_problems(facts, gpus, dict(plan, checks=["acs2"]))


def test_filter_plugin_wraps_host_problems():
    from ansible_collections.blackwell.sglang.plugins.filter import preflight_host_facts

    filters = preflight_host_facts.FilterModule().filters()
    facts, gpus, plan = build(LIMITS_CASE)
    got = filters["preflight_host_fact_problems"](facts, gpus, plan)
    assert len(got["errors"]) == 2
    with pytest.raises(Exception, match="expects the plan as a dict"):
        filters["preflight_host_fact_problems"](facts, gpus, "nope")
