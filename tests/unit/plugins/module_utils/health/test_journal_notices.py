"""journald's "Suppressed N messages from <unit>" on journalctl/systemctl output recorded on real systemd 252
(tests/unit/fixtures/journal/*.yml): the health report says the log is incomplete."""

import glob
import os

import pytest

from ansible_collections.blackwell.sglang.plugins.modules import sglang_health
from ansible.module_utils import basic
from ansible_collections.blackwell.sglang.plugins.module_utils.health import _journal_notices as jn
from ansible_collections.blackwell.sglang.plugins.module_utils.health.sglang_journal import journal_command
from conftest import FIXTURES, load_yaml

CASES = sorted(os.path.basename(p)[:-4] for p in glob.glob(os.path.join(FIXTURES, "journal", "*.yml")))


def recorded(name):
    case = load_yaml("journal", name + ".yml")
    by_argv = dict((tuple(c["argv"]), c) for c in case["commands"])
    calls = []

    def run(argv):
        calls.append(list(argv))
        got = by_argv.get(tuple(argv))
        if got is None and len(argv) > 2 and argv[-2] == "-n":  # "the last N lines" of a recorded listing
            whole = by_argv.get(tuple(argv[:-2]))
            if whole is not None:
                lines = whole["stdout"].splitlines(True)
                return whole["rc"], "".join(lines[-int(argv[-1]):]), ""
        assert got is not None, "not recorded: %s" % argv
        return got["rc"], got["stdout"], ""
    return case, run, calls


def test_every_case_was_recorded_with_the_commands_the_module_runs():
    assert CASES == ["flood_then_exit_then_restart", "flood_then_line_after_interval",
                     "per_unit_zero_is_journald_default"]
    for name in CASES:
        case = load_yaml("journal", name + ".yml")
        argvs = [c["argv"] for c in case["commands"]]
        assert jn.suppressed_command("journalctl", case["unit"], case["invocation_ids"]) in argvs


def test_notice_in_the_same_run_makes_the_journal_incomplete():
    case, run, calls = recorded("flood_then_line_after_interval")
    got = jn.journal_completeness(run, "journalctl", "systemctl", case["unit"], case["invocation_ids"], [])
    assert got["complete"] is False and got["suppressed"] == 955
    assert got["notices"][0]["invocation_id"] == case["invocation_ids"][0]
    assert got["warning"].startswith("journal incomplete: journald suppressed 955 line(s) of flood.service")
    assert len(calls) == 1   # the notice answers it; no line counting needed


def test_the_per_run_query_misses_journalds_notice_and_the_object_match_finds_it():
    case, run, _calls = recorded("flood_then_line_after_interval")
    inv = case["invocation_ids"][0]
    # what sglang_observe.journal_command builds: the run's own lines only
    per_run = journal_command("journalctl", case["unit"], inv, None)
    assert "Suppressed" not in run(per_run)[1]
    both = per_run + ["+", "OBJECT_SYSTEMD_INVOCATION_ID=%s" % inv]
    assert "Suppressed 955 messages from flood.service" in run(both)[1]


def test_crash_then_restart_the_notice_comes_with_the_next_run():
    case, run, _calls = recorded("flood_then_exit_then_restart")
    first, second = case["invocation_ids"]
    got = jn.journal_completeness(run, "journalctl", "systemctl", case["unit"], [first, first, second], [])
    assert got["complete"] is False and got["suppressed"] == 955
    assert got["notices"][0]["invocation_id"] == second


def test_crash_without_a_later_line_is_maybe_incomplete_from_the_line_count():
    case, run, calls = recorded("flood_then_exit_then_restart")
    first = case["invocation_ids"][0]
    got = jn.journal_completeness(run, "journalctl", "systemctl", case["unit"], [first], [])
    assert got["complete"] is None and got["suppressed"] == 0
    assert "the last run logged 45 lines within 5 s, the unit's LogRateLimitBurst=20" in got["warning"]
    # only the run's last lines are read (a week of serving is not): 4 x the burst, at least 50000
    assert calls[-1] == jn.run_lines_command("journalctl", case["unit"], first, last=50000)


def test_per_unit_zero_falls_back_to_journald_conf():
    case, run, _calls = recorded("per_unit_zero_is_journald_default")
    show = [c for c in case["commands"] if c["argv"][0] == "systemctl"][0]["stdout"]
    assert jn.parse_rate_limit(show, []) == (30.0, 10000)
    assert jn.parse_rate_limit(show, [("/etc/systemd/journald.conf", "[Journal]\nRateLimitBurst=500\n")]) == (30.0, 500)
    got = jn.journal_completeness(run, "journalctl", "systemctl", case["unit"], case["invocation_ids"], [])
    assert got["complete"] is False and got["suppressed"] == 17500


def test_a_quiet_run_is_complete():
    def run(argv):
        if argv[0] == "systemctl":
            return 0, "LogRateLimitIntervalUSec=30s\nLogRateLimitBurst=100000\n", ""
        if any(a.startswith("MESSAGE_ID=") for a in argv):
            return 0, "", ""
        return 0, "".join('{"__MONOTONIC_TIMESTAMP":"%d","PRIORITY":"6"}\n' % (i * 1000) for i in range(500)), ""
    got = jn.journal_completeness(run, "journalctl", "systemctl", "u.service", ["abc"], [])
    assert got == {"complete": True, "suppressed": 0, "notices": [], "reason": "journald reported no dropped lines",
                   "warning": None}


def test_busiest_window_replays_journald_pools():
    second = 1000000
    lines = [(i, 6) for i in range(10)] + [(31 * second + i, 6) for i in range(3)] + [(5, 3)]
    assert jn.busiest_window(lines, 30) == (10, 0)          # info pool; the err line (priority 3) has its own pool


@pytest.mark.parametrize("ids,complete", [([], None), (None, None)])
def test_no_invocation_seen(ids, complete):
    got = jn.journal_completeness(lambda argv: (0, "", ""), "journalctl", "systemctl", "u.service", ids, [])
    assert got["complete"] is complete and got["warning"] is None


def test_sglang_health_report_says_the_log_is_incomplete(module_runner, monkeypatch):
    """The module end to end: a crashed run whose journal has journald's notice fails with that in its message."""
    case, run, _calls = recorded("flood_then_line_after_interval")
    inv = case["invocation_ids"][0]
    show = ("ActiveState=failed\nSubState=failed\nResult=exit-code\nMainPID=0\nNRestarts=0\nExecMainStatus=1\n"
            "ExecMainCode=1\nInvocationID=%s\nExecMainStartTimestamp=Tue 2026-12-01 10:02:45 UTC\n" % inv)

    def run_command(self, args, **kwargs):
        if args[:2] == ["/usr/bin/systemctl", "show"] and "LogRateLimitBurst" not in args:
            return 0, show, ""
        return run([a.replace("/usr/bin/", "") for a in args])

    class CrashedUnit(object):  # the health observation (UnitObserver is tested in test_sglang_health.py)
        def observe(self, previous=None, parse=None):
            from ansible_collections.blackwell.sglang.plugins.module_utils.health.sglang_observe import parse_show

            obs = parse_show(show)
            obs.update(schedulers=0, activity=None, gpu=None, http_code=None, log=parse(""))
            return obs

    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path", lambda self, name, *a, **k: "/usr/bin/" + name)
    monkeypatch.setattr(sglang_health, "make_observer", lambda module: CrashedUnit())
    monkeypatch.setattr(sglang_health, "run_bounded", lambda argv, timeout: run_command(None, argv))
    kind, result = module_runner(sglang_health, {"unit": "flood.service", "tp_size": 8, "timeout": 5})
    assert kind == "fail" and result["verdict"] == "crashed"
    assert result["journal"]["complete"] is False and result["journal"]["suppressed"] == 955
    assert "journal incomplete: journald suppressed 955 line(s) of flood.service" in result["msg"]
