"""Preflight host-fact checks on recorded inputs (tests/unit/fixtures/host_facts): lspci -vvv, /proc/cmdline,
/proc/1/status and /proc/1/limits, systemd drop-ins, journald.conf, /dev/shm."""

import copy

import pytest

from ansible_collections.blackwell.sglang.plugins.module_utils import host_checks as hc
from conftest import load_lspci, load_text, load_yaml

CASES = load_yaml("host_facts", "cases.yml")["cases"]
SANDBOX_PLAN = {
    # what roles/preflight passes on the sandbox inventory (inventory/sandbox/group_vars/gpu_nodes/main.yml)
    "unit": "sglang-kimi.service", "interconnect": "pcie", "limits": {"memlock": "8M", "nofile": "10000"},
    "log_rate_limit": {"interval_sec": 30, "burst": 100000}, "journal_min_burst": 20000, "model_bytes": 134217728,
    "fallback_weights_gb": 547, "environment": {}, "options": {"tp-size": 8},
    "shm": {"path": "/dev/shm", "size_bytes": 2147483648, "free_bytes": 2147483648}, "shm_floor_gib": 1,
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


def test_every_error_names_a_fix():
    for case in CASES:
        facts, gpus, plan = build(case)
        for msg in hc.host_problems(facts, gpus, plan)["errors"]:
            assert "Fix:" in msg or "fix" in msg.lower(), msg


def test_lspci_parser_reads_bus_ranges_acs_and_numa():
    devices = hc.parse_lspci(load_lspci("lspci_8gpu_pex890xx_acs_on.txt"))
    down = devices["0000:17:00.0"]
    assert down["bridge"] == (0x17, 0x18, 0x29)
    assert down["acs_ctl"] == {"SrcValid": True, "TransBlk": False, "ReqRedir": True, "CmpltRedir": True,
                               "UpstreamFwd": True, "EgressCtrl": False, "DirectTrans": False}
    assert down["acs_cap"]["EgressCtrl"] is True and down["driver"] == "pcieport"
    assert devices["0000:98:00.0"]["acs_ctl"] == {}          # switch upstream port: no ACS capability
    gpu = devices["0000:9a:00.0"]
    assert gpu["numa_node"] == 1 and gpu["driver"] == "nvidia" and gpu["bridge"] is None
    chain = [d["bdf"] for d in hc.upstream_bridges(devices, "0000:9a:00.0")]
    assert chain == ["0000:99:00.0", "0000:98:00.0", "0000:97:01.0"]
    assert hc.upstream_bridges(devices, "0000:2a:00.0")[0]["bdf"] == "0000:17:01.0"


def test_lspci_without_domain_numbers_is_domain_0000():
    out = "00:01.0 PCI bridge: X (prog-if 00 [Normal decode])\n\tBus: primary=00, secondary=01, subordinate=01, " \
          "sec-latency=0\n\t\tACSCtl:\tSrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- " \
          "DirectTrans-\n"
    devices = hc.parse_lspci(out)
    assert list(devices) == ["0000:00:01.0"] and devices["0000:00:01.0"]["acs_ctl"]["ReqRedir"] is True


@pytest.mark.parametrize("bus_id,bdf", [("00000000:1B:00.0", "0000:1b:00.0"), ("0000:9a:00.0", "0000:9a:00.0"),
                                        ("1b:00.0", "0000:1b:00.0"), ("00000001:03:00.1", "0001:03:00.1"),
                                        ("[N/A]", None), (None, None)])
def test_normalize_bdf(bus_id, bdf):
    assert hc.normalize_bdf(bus_id) == bdf


@pytest.mark.parametrize("cmdline,mode", [
    ("ro quiet iommu=pt intel_iommu=on", "passthrough"),
    ("ro intel_iommu=on", "translated"),
    ("ro amd_iommu=on iommu.passthrough=1", "passthrough"),
    ("ro iommu.passthrough=0", "translated"),
    ("ro intel_iommu=off", "off"),
    ("ro quiet", "off"),
    ("ro quiet -- intel_iommu=on", "off"),                       # after -- the arguments belong to init
])
def test_iommu_mode_from_the_command_line(cmdline, mode):
    assert hc.iommu_mode(cmdline)[0] == mode


def test_sysfs_group_type_beats_the_command_line():
    assert hc.iommu_mode("ro iommu=pt", {0: "DMA", 1: "identity"})[0] == "translated"
    assert hc.iommu_mode("ro intel_iommu=on", {0: "identity", 1: "identity"})[0] == "passthrough"
    assert hc.iommu_mode("ro quiet", {}, ["dmar0"])[0] == "unknown"


@pytest.mark.parametrize("value,parsed", [("infinity", ("infinity", "infinity")), ("8M", (8388608, 8388608)),
                                          ("64K", (65536, 65536)), ("1048576", (1048576, 1048576)),
                                          ("4096:8192", (4096, 8192)), ("1G:infinity", (1073741824, "infinity"))])
def test_parse_rlimit(value, parsed):
    assert hc.parse_rlimit(value) == parsed


def test_effective_rlimit_is_systemds_setrlimit_closest():
    assert hc.effective_rlimit(("infinity", "infinity"), 8388608, can_raise=False) == (8388608, 8388608)
    assert hc.effective_rlimit(("infinity", "infinity"), 8388608, can_raise=True) == ("infinity", "infinity")
    assert hc.effective_rlimit((4096, 4096), 8388608, can_raise=False) == (4096, 4096)


def test_proc_limits_and_status_of_the_recorded_sandbox_pid1():
    limits = hc.parse_proc_limits(load_text("host_facts", "pid1_limits_sandbox.txt"))
    assert limits == {"memlock": (8388608, 8388608), "nofile": (10000, 10000)}
    status = hc.parse_status(load_text("host_facts", "pid1_status_sandbox.txt"))
    assert status["cap_eff"] & (1 << hc.CAP_SYS_RESOURCE) == 0 and status["cpus"] == {0, 1}


@pytest.mark.parametrize("burst,available,expected", [
    # journald-rate-limit.c burst_modulate, and what systemd 252 let through in the sandbox (46 MB available)
    (20, 46 * 1024 * 1024, 45), (10000, 46 * 1024 * 1024, 22500), (10000, 1024 * 1024, 10000), (10000, 0, 10000),
    (10000, 4 * 1024 ** 3, 10000 * 16 // 4), (100000, 3 * 1024 ** 3, 100000 * 15 // 4)])
def test_burst_modulate(burst, available, expected):
    assert hc.burst_modulate(burst, available) == expected


def test_journal_available_follows_cache_space_refresh():
    gib = 1024 ** 3
    # plenty of room: the limit is max_use
    assert hc.journal_available(1 * gib, 500 * gib, 4 * gib, 4 * gib, 16 * 1024 ** 2) == 3 * gib
    # free space down to keep_free: nothing left for the rate limit's scaling
    assert hc.journal_available(1 * gib, 3 * gib, 4 * gib, 4 * gib, 16 * 1024 ** 2) == 0


def test_journal_metrics_defaults_match_what_journald_reported():
    # the sandbox node's 12.6 GB tmpfs: journald reported DISK_KEEP_FREE=631902208 (5 %, page aligned)
    settings = {"Storage": "volatile", "RuntimeMaxUse": "64M"}
    assert hc.journal_metrics(settings, "volatile", 12637995008) == (67108864, 631902208, 16 * 1024 ** 2)
    assert hc.journal_metrics({}, "persistent", 1000204886016)[:2] == (4 * 1024 ** 3, 4 * 1024 ** 3)


def test_dropins_later_name_wins_and_etc_masks_usr_lib():
    files = hc.order_dropins([
        {"path": "/etc/systemd/system/u.service.d/50-a.conf", "text": "[Service]\nLimitMEMLOCK=1M\n"},
        {"path": "/usr/lib/systemd/system/u.service.d/50-a.conf", "text": "[Service]\nLimitMEMLOCK=2M\n"},
        {"path": "/usr/lib/systemd/system/u.service.d/90-b.conf", "text": "[Service]\nCPUAffinity=0-3\n"},
        {"path": "/run/systemd/system/u.service.d/95-c.conf", "text": "[Service]\nCPUAffinity=\nCPUAffinity=8\n"},
    ])
    settings = hc.parse_ini_settings(files, "Service", hc.UNIT_KEYS)
    assert settings["LimitMEMLOCK"]["value"] == "1M"
    assert settings["CPUAffinity"]["value"] == "8"                  # an empty assignment resets the merged list


def test_cpulists():
    assert hc.parse_cpulist("0-3,8 10-11") == {0, 1, 2, 3, 8, 10, 11}
    assert hc.format_cpulist({0, 1, 2, 3, 8, 10, 11}) == "0-3,8,10-11"
    assert hc.format_cpulist(set()) == "none"


def test_timespans():
    assert hc.parse_timespan("30s") == 30 and hc.parse_timespan("1min 30s") == 90
    assert hc.parse_timespan("500ms") == 0.5 and hc.parse_timespan("30") == 30
    with pytest.raises(ValueError):
        hc.parse_timespan("30 parsecs")


def test_failed_host_facts_is_one_error():
    got = hc.host_problems({"failed": True, "msg": "boom"}, {}, SANDBOX_PLAN)
    assert got == {"errors": ["could not read the host facts: boom"], "warnings": []}


def test_filter_plugin_wraps_host_problems():
    from ansible_collections.blackwell.sglang.plugins.filter import host_fact_problems

    filters = host_fact_problems.FilterModule().filters()
    facts, gpus, plan = build(CASES[1])
    got = filters["preflight_host_fact_problems"](facts, gpus, plan)
    assert len(got["errors"]) == 2
    with pytest.raises(Exception, match="expects the plan as a dict"):
        filters["preflight_host_fact_problems"](facts, gpus, "nope")
