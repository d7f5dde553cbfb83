"""unit_restart: a restart watched through systemctl show (scripted), a stop stuck after SIGKILL reported within its
bound with what is left in the cgroup (a real process of this test, read from the real /proc)."""

import os

from ansible_collections.blackwell.sglang.plugins.modules import unit_restart

SHOW = "ActiveState={0}\nSubState={1}\nResult={2}\nInvocationID={3}\nControlGroup={4}\nTimeoutStopUSec={5}\nMainPID=1\n"


def scripted(monkeypatch, states, cgroup="/system.slice/sglang-kimi.service", timeout_stop="16min", pids=()):
    """``states``: (ActiveState, SubState, Result, InvocationID) per `show`, the last one repeated."""
    calls = []
    shown = {"n": 0}

    def run_command(self, argv, **kw):
        calls.append(argv[1:])
        if argv[1] == "show":
            state = states[min(shown["n"], len(states) - 1)]
            shown["n"] += 1
            return 0, SHOW.format(state[0], state[1], state[2], state[3], cgroup, timeout_stop), ""
        return 0, "", ""
    monkeypatch.setattr(unit_restart.AnsibleModule, "run_command", run_command)
    monkeypatch.setattr(unit_restart.AnsibleModule, "get_bin_path", lambda self, name, required=False: "/bin/" + name)
    clock = {"t": 0.0}
    monkeypatch.setattr(unit_restart.time, "monotonic", lambda: clock["t"])
    monkeypatch.setattr(unit_restart.time, "sleep", lambda s: clock.__setitem__("t", clock["t"] + s))
    monkeypatch.setattr(unit_restart, "cgroup_pids", lambda cg: list(pids))
    return calls


ARGS = {"name": "sglang-kimi.service", "daemon_reload": True, "stuck_after": 30, "poll_interval": 1.0}


def test_a_restart_that_drains_then_starts_is_changed_with_its_states(module_runner, monkeypatch):
    calls = scripted(monkeypatch, [("active", "running", "success", "a1")] * 2
                     + [("deactivating", "stop-sigterm", "success", "a1")] * 5
                     + [("active", "running", "success", "b2")])
    kind, result = module_runner(unit_restart, ARGS)
    assert kind == "exit" and result["changed"] is True and result["invocation_id"] == "b2"
    assert calls[0] == ["daemon-reload"] and ["restart", "--no-block", "sglang-kimi.service"] in calls
    assert [s["state"] for s in result["states"]] == ["active/running", "deactivating/stop-sigterm", "active/running"]


def test_a_stop_stuck_after_sigkill_names_each_process_left_and_its_state(module_runner, monkeypatch):
    """A process that outlives SIGKILL (in the kernel, as one stuck in the GPU driver) is named within the bound."""
    calls = scripted(monkeypatch, [("active", "running", "success", "a1")]
                     + [("deactivating", "final-sigkill", "signal", "a1")], pids=[os.getpid()])
    kind, result = module_runner(unit_restart, ARGS)
    assert kind == "fail"
    assert result["elapsed_s"] <= 33  # 30 s after SIGKILL, one poll a second
    assert result["left"][0]["pid"] == os.getpid() and result["left"][0]["state"] in ("R", "S")
    assert "sits in deactivating/final-sigkill" in result["msg"] and "PID %d (" % os.getpid() in result["msg"]
    assert len([c for c in calls if c[0] == "restart"]) == 1


def test_an_empty_cgroup_systemd_did_not_notice_is_said_so(module_runner, monkeypatch):
    scripted(monkeypatch, [("active", "running", "success", "a1")] + [("deactivating", "final-sigkill", "signal", "a1")])
    kind, result = module_runner(unit_restart, ARGS)
    assert kind == "fail" and result["left"] == []
    assert "its cgroup holds no process, yet systemd has not noticed" in result["msg"]
    assert "waits out TimeoutStopSec (960 s)" in result["msg"]


def test_a_drain_is_waited_for_up_to_timeout_stop_sec_then_reported(module_runner, monkeypatch):
    scripted(monkeypatch, [("active", "running", "success", "a1")] + [("deactivating", "stop-sigterm", "success", "a1")],
             timeout_stop="1min")
    kind, result = module_runner(unit_restart, ARGS)
    assert kind == "fail" and 90 <= result["elapsed_s"] <= 92
    assert "sits in deactivating/stop-sigterm" in result["msg"] and "SIGKILL" not in result["msg"].split(";")[0]


def test_a_unit_that_fails_to_start_again_is_reported(module_runner, monkeypatch):
    scripted(monkeypatch, [("active", "running", "success", "a1"), ("deactivating", "stop-sigterm", "success", "a1"),
                           ("failed", "failed", "exit-code", "b2")])
    kind, result = module_runner(unit_restart, ARGS)
    assert kind == "fail" and "failed to start again (failed/failed, Result=exit-code)" in result["msg"]


def test_check_mode_changes_nothing(module_runner, monkeypatch):
    calls = scripted(monkeypatch, [("active", "running", "success", "a1")])
    kind, result = module_runner(unit_restart, ARGS, check_mode=True)
    assert kind == "exit" and result["changed"] is True and calls == []


def test_systemd_time_spans():
    assert unit_restart.seconds("16min") == 960 and unit_restart.seconds("1min 30s") == 90
    assert unit_restart.seconds("500ms") == 0.5 and unit_restart.seconds("infinity") is None


def test_a_process_in_uninterruptible_sleep_gets_the_drivers_hint():
    left = [{"pid": 4242, "command": "sglang::scheduler_TP3", "state": "D", "wchan": "nv_wait_for_event"}]
    msg = unit_restart.stuck_message("sglang-kimi.service", {"ActiveState": "deactivating", "SubState": "final-sigkill"},
                                     95.0, 31.0, left, 960.0)
    assert "PID 4242 (sglang::scheduler_TP3) state D (uninterruptible sleep in the kernel), in the kernel at " \
           "nv_wait_for_event" in msg
    assert "NVRM Xid" in msg
