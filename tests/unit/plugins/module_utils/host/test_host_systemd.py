"""host_systemd on recorded inputs (tests/unit/fixtures/host_facts): Limit*= values, what PID 1 grants,
/proc/1/limits and /proc/1/status, drop-in order."""

import pytest

from ansible_collections.blackwell.sglang.plugins.module_utils.host import host_systemd as sd
from conftest import load_text


@pytest.mark.parametrize("value,parsed", [("infinity", ("infinity", "infinity")), ("8M", (8388608, 8388608)),
                                          ("64K", (65536, 65536)), ("1048576", (1048576, 1048576)),
                                          ("4096:8192", (4096, 8192)), ("1G:infinity", (1073741824, "infinity"))])
def test_parse_rlimit(value, parsed):
    assert sd.parse_rlimit(value) == parsed


def test_effective_rlimit_is_systemds_setrlimit_closest():
    assert sd.effective_rlimit(("infinity", "infinity"), 8388608, can_raise=False) == (8388608, 8388608)
    assert sd.effective_rlimit(("infinity", "infinity"), 8388608, can_raise=True) == ("infinity", "infinity")
    assert sd.effective_rlimit((4096, 4096), 8388608, can_raise=False) == (4096, 4096)


def test_proc_limits_and_status_of_the_recorded_sandbox_pid1():
    limits = sd.parse_proc_limits(load_text("host_facts", "pid1_limits_sandbox.txt"))
    assert limits == {"memlock": (8388608, 8388608), "nofile": (10000, 10000)}
    status = sd.parse_status(load_text("host_facts", "pid1_status_sandbox.txt"))
    assert status["cap_eff"] & (1 << sd.CAP_SYS_RESOURCE) == 0 and status["cpus"] == {0, 1}


def test_dropins_later_name_wins_and_etc_masks_usr_lib():
    files = sd.order_dropins([
        {"path": "/etc/systemd/system/u.service.d/50-a.conf", "text": "[Service]\nLimitMEMLOCK=1M\n"},
        {"path": "/usr/lib/systemd/system/u.service.d/50-a.conf", "text": "[Service]\nLimitMEMLOCK=2M\n"},
        {"path": "/usr/lib/systemd/system/u.service.d/90-b.conf", "text": "[Service]\nCPUAffinity=0-3\n"},
        {"path": "/run/systemd/system/u.service.d/95-c.conf", "text": "[Service]\nCPUAffinity=\nCPUAffinity=8\n"},
    ])
    settings = sd.parse_ini_settings(files, "Service", sd.UNIT_KEYS)
    assert settings["LimitMEMLOCK"]["value"] == "1M"
    assert settings["CPUAffinity"]["value"] == "8"                  # an empty assignment resets the merged list
