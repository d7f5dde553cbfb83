"""sglang_health: systemctl/journalctl mocked via run_command, /proc faked, /health served locally."""

import os
import threading

import pytest

import sglang_health
from ansible.module_utils import basic
import http.server as BaseHTTPServer
from conftest import FIXTURES

SHOW = ("ActiveState={active}\nSubState={sub}\nResult={result}\nMainPID={pid}\nNRestarts={restarts}\n"
        "ExecMainStatus={status}\nExecMainCode={code}\nInvocationID={inv}\n"
        "ExecMainStartTimestamp=Mon 2026-05-18 10:00:00 UTC\n")


def log(name):
    with open(os.path.join(FIXTURES, "sglang_logs", name), newline="") as handle:
        return handle.read()


def script(monkeypatch, steps):
    """steps: list of dicts (show fields, log file, schedulers, http); one per poll."""
    state = {"i": 0, "cmds": []}
    clock = {"t": 0.0}

    def current():
        return steps[min(state["i"], len(steps) - 1)]

    def run_command(self, args, **kwargs):
        state["cmds"].append(args)
        step = current()
        if args[1] == "show":
            fields = dict(active="active", sub="running", result="success", pid=4242, restarts=0, status=0, code=0,
                          inv="abc123")
            fields.update(step.get("show", {}))
            return 0, SHOW.format(**fields), ""
        if any(a.startswith("_SYSTEMD_INVOCATION_ID=") and a != "_SYSTEMD_INVOCATION_ID=%s" % step.get(
                "show", {}).get("inv", "abc123") for a in args):
            name = step.get("previous_log")  # the ended invocation's journal, re-read
            return 0, log(name) if name else "", ""
        return 0, log(step["log"]) if step.get("log") else "", ""

    def sleep(seconds):
        state["i"] += 1
        clock["t"] += step_seconds(seconds)

    def step_seconds(seconds):
        return current().get("advance", seconds)

    monkeypatch.setattr(basic.AnsibleModule, "run_command", run_command)
    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path", lambda self, name, *a, **k: "/usr/bin/" + name)
    monkeypatch.setattr(sglang_health, "count_schedulers", lambda pid: current().get("schedulers", 8))
    monkeypatch.setattr(sglang_health, "tree_activity", lambda pid: current().get("activity"))
    monkeypatch.setattr(sglang_health, "probe_health", lambda url, timeout: (current().get("http"), 0.01, None))
    monkeypatch.setattr(sglang_health.time, "sleep", sleep)
    monkeypatch.setattr(sglang_health.time, "monotonic", lambda: clock["t"])
    return state


ARGS = {"unit": "sglang@kimi.service", "tp_size": 8, "interval": 1.0}


def test_ready_after_loading_capturing_warming(module_runner, monkeypatch):
    state = script(monkeypatch, [
        {"log": "starting.log", "schedulers": 0, "show": {"active": "activating", "sub": "start"}},
        {"log": "loading_multithread.log"},
        {"log": "capturing.log"},
        {"log": "warming.log", "http": 503},
        {"log": "ready.log", "http": 200},
    ])
    kind, result = module_runner(sglang_health, ARGS)
    assert kind == "exit", result
    assert result["changed"] is False
    assert result["verdict"] == "ready" and result["http_code"] == 200
    assert [h["verdict"] for h in result["history"]] == ["starting", "loading", "capturing", "warming", "ready"]
    assert result["history"][1]["progress"] == "37/64"
    assert result["elapsed_s"] == 4.0
    show = state["cmds"][0]
    assert show == ["/usr/bin/systemctl", "show", "sglang@kimi.service", "-p",
                    "ActiveState,SubState,Result,MainPID,NRestarts,ExecMainStatus,ExecMainCode,InvocationID,"
                    "ExecMainStartTimestamp"]
    assert state["cmds"][1] == ["/usr/bin/journalctl", "-u", "sglang@kimi.service", "-o", "cat", "--no-pager",
                                "_SYSTEMD_INVOCATION_ID=abc123"]


def test_crash_fails_with_phase_exit_and_first_traceback(module_runner, monkeypatch):
    script(monkeypatch, [
        {"log": "capturing.log"},
        {"log": "crash_oom_capture.log", "schedulers": 0,
         "show": {"active": "failed", "sub": "failed", "pid": 0, "status": 1, "code": 1}},
    ])
    kind, result = module_runner(sglang_health, ARGS, check_mode=True)
    assert kind == "fail"
    assert result["verdict"] == "crashed" and result["phase"] == "decode_graph_capture"
    assert result["exit_status"]["code"] == 1
    assert result["traceback"].splitlines()[-1].startswith("Exception: Capture cuda graph failed: CUDA out of memory")
    assert "torch.OutOfMemoryError: CUDA out of memory" in result["traceback"]
    assert "Received sigquit" not in result["traceback"]
    assert result["msg"].startswith("sglang@kimi.service: crashed after 1 s")
    assert "exit code 1" in result["msg"] and "first error: Exception: Capture cuda graph failed" in result["msg"]
    # the hint is the capture phase's, said once
    assert result["msg"].count("--cuda-graph-max-bs-decode") == 1 and "model_stage" not in result["msg"]


def test_one_restart_is_crashed_with_the_ended_runs_phase(module_runner, monkeypatch):
    script(monkeypatch, [
        {"log": "loading_multithread.log"},
        {"log": "", "previous_log": "sim_crash_at_shard_43_tp8.log", "schedulers": 0,
         "show": {"restarts": 1, "inv": "def456", "active": "activating", "sub": "start"}},
    ])
    kind, result = module_runner(sglang_health, ARGS)
    assert kind == "fail" and result["verdict"] == "crashed"
    assert result["phase"] == "loading_weights"
    assert result["traceback"].splitlines()[-1].startswith("OSError: [Errno 5] Input/output error")
    assert "NRestarts 0 -> 1" in result["msg"]


def test_restart_loop(module_runner, monkeypatch):
    script(monkeypatch, [
        {"log": "loading_multithread.log", "advance": 60.0},
        {"log": "", "schedulers": 0, "show": {"restarts": 2, "inv": "def456", "active": "activating", "sub": "start"}},
    ])
    kind, result = module_runner(sglang_health, ARGS)
    assert kind == "fail" and result["verdict"] == "restart_loop"
    assert "TimeoutStartSec" in result["msg"]


def test_sandbox_deactivating_after_sigkill_is_crashed_at_once(module_runner, monkeypatch):
    """Field finding: systemd in podman on cgroup v1 keeps deactivating/stop-sigterm until the stop timeout."""
    script(monkeypatch, [
        {"log": "sim_hang_at_shard_10_tp8.log", "activity": 10},
        {"log": "sim_crash_at_shard_43_tp8.log", "schedulers": 0,
         "show": {"active": "deactivating", "sub": "stop-sigterm", "result": "signal", "pid": 0, "code": 2,
                  "status": 9}},
    ])
    kind, result = module_runner(sglang_health, ARGS)
    assert kind == "fail" and result["verdict"] == "crashed"
    assert [h["verdict"] for h in result["history"]] == ["loading", "crashed"]
    assert result["elapsed_s"] == 1.0
    assert result["exit_status"]["signal"] == "SIGKILL" and result["phase"] == "loading_weights"
    assert "model-00043-of-000064.safetensors" in result["error"]
    assert "killed by SIGKILL (9)" in result["msg"]


def test_stalled(module_runner, monkeypatch):
    script(monkeypatch, [{"log": "loading_multithread.log", "advance": 100.0}] * 5)
    kind, result = module_runner(sglang_health, dict(ARGS, stall_timeout=300))
    assert kind == "fail" and result["verdict"] == "stalled"
    assert [h["verdict"] for h in result["history"]] == ["loading", "stalled"]


def test_timeout(module_runner, monkeypatch):
    script(monkeypatch, [{"log": "starting.log", "advance": 10.0}, {"log": "loading_legacy.log", "advance": 10.0},
                         {"log": "loading_multithread.log", "advance": 10.0}])
    kind, result = module_runner(sglang_health, dict(ARGS, timeout=20))
    assert kind == "fail" and result["verdict"] == "timeout"


def test_count_schedulers_walks_the_tree(tmp_path):
    def proc(pid, ppid, cmdline, comm="python3"):
        d = tmp_path / str(pid)
        d.mkdir()
        (d / "stat").write_text("%d (%s) S %d 1 1 0 -1" % (pid, comm, ppid))
        (d / "cmdline").write_bytes(cmdline)

    proc(100, 1, b"python3\x00-m\x00sglang.launch_server\x00")
    for rank in range(8):
        proc(200 + rank, 100, ("sglang::scheduler_TP%d" % rank).encode() + b"\x00" * 20, comm="sglang::schedul")
    proc(300, 100, b"sglang::detokenizer\x00")
    proc(301, 200, b"python3\x00-c\x00from multiprocessing.resource_tracker import main\x00")
    proc(400, 1, b"sglang::scheduler_TP0\x00")  # orphan from an earlier run: not under MainPID
    proc(600, 1, b"python3\x00-m\x00sglang.launch_server\x00")  # tp 1: 0.5.23 drops the _TP0 suffix
    proc(601, 600, b"sglang::scheduler\x00")
    proc(602, 600, b"sglang::detokenizer\x00")
    proc(500, 1, b"weird) name\x00", comm="a) b")
    (tmp_path / "self").mkdir()
    assert sglang_health.count_schedulers(100, str(tmp_path)) == 8
    assert sglang_health.count_schedulers(0, str(tmp_path)) == 0
    assert sglang_health.count_schedulers(600, str(tmp_path)) == 1


def test_parse_show():
    obs = sglang_health.parse_show(SHOW.format(active="activating", sub="auto-restart", pid=0, restarts=3, status=9,
                                               code=2, inv="", result="signal"))
    assert obs["result"] == "signal"
    assert obs["active_state"] == "activating" and obs["sub_state"] == "auto-restart"
    assert obs["n_restarts"] == 3 and obs["exec_main_code"] == 2 and obs["invocation_id"] is None


@pytest.fixture
def http_server():
    codes = []

    class Handler(BaseHTTPServer.BaseHTTPRequestHandler):
        def do_GET(self):
            code = codes.pop(0) if codes else 200
            self.send_response(code)
            self.end_headers()
            self.wfile.write(b"")

        def log_message(self, *args):
            pass

    server = BaseHTTPServer.HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever)
    thread.daemon = True
    thread.start()
    yield "http://127.0.0.1:%d" % server.server_address[1], codes
    server.shutdown()


def test_probe_health_codes_and_refused(http_server):
    url, codes = http_server
    codes.append(503)
    assert sglang_health.probe_health(url, 5)[0] == 503
    assert sglang_health.probe_health(url + "/", 5)[0] == 200
    code, latency, error = sglang_health.probe_health("http://127.0.0.1:9", 5)
    assert code is None and error


def test_journal_falls_back_to_since_without_invocation_id(monkeypatch):
    seen = []

    class M(object):
        def get_bin_path(self, name, required=False):
            return "/usr/bin/" + name

        def run_command(self, cmd):
            seen.append(cmd)
            return 0, "x", ""

    sglang_health.read_journal(M(), "u.service", None, "Mon 2026-05-18 10:00:00 UTC")
    assert seen[0][:2] == ["/usr/bin/journalctl", "-u"]
    assert seen[0][-2:] == ["--since", "2026-05-18 10:00:00"]
