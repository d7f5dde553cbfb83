"""sglang_health: systemctl/journalctl mocked via run_command, /proc faked, /health served locally."""

import json
import os
import sys
import threading
import time

import pytest

from ansible_collections.blackwell.sglang.plugins.modules import sglang_health
import http.server as BaseHTTPServer
from ansible_collections.blackwell.sglang.plugins.module_utils.health import sglang_journal, sglang_observe
from ansible_collections.blackwell.sglang.plugins.module_utils.host import bounded
from ansible_collections.blackwell.sglang.plugins.module_utils.health.sglang_observe import count_schedulers, parse_show, probe_health
from conftest import FIXTURES

SHOW = ("ActiveState={active}\nSubState={sub}\nResult={result}\nMainPID={pid}\nNRestarts={restarts}\n"
        "ExecMainStatus={status}\nExecMainCode={code}\nInvocationID={inv}\n"
        "ExecMainStartTimestamp=Mon 2026-05-18 10:00:00 UTC\n")


def log(name):
    with open(os.path.join(FIXTURES, "sglang_logs", name), newline="") as handle:
        return handle.read()


def script(monkeypatch, steps):
    """steps: list of dicts (show fields, log file, previous_log file, schedulers, activity, gpu, http); one per poll.
    The observer is scripted (UnitObserver itself is tested against fake systemctl/journalctl programs below)."""
    state = {"i": 0}
    clock = {"t": 0.0}

    def current():
        return steps[min(state["i"], len(steps) - 1)]

    class ScriptedObserver(object):
        def observe(self, previous=None, parse=None):
            step = current()
            clock["t"] += step.get("takes", 0.0)  # the observation's own time (systemctl, journal, /health)
            fields = dict(active="active", sub="running", result="success", pid=4242, restarts=0, status=0, code=0,
                          inv="abc123")
            fields.update(step.get("show", {}))
            obs = parse_show(SHOW.format(**fields))
            obs.update(schedulers=step.get("schedulers", 8), activity=step.get("activity"), gpu=step.get("gpu"),
                       http_code=step.get("http"))
            text = step["text"] if "text" in step else (log(step["log"]) if step.get("log") else "")
            obs["log"] = parse(text)
            if previous and previous.get("invocation_id") != obs["invocation_id"] and step.get("previous_log"):
                obs["previous_log"] = parse(log(step["previous_log"]))
            return obs

    real_sleep = time.sleep

    def sleep(seconds):
        # time.sleep is patched for the whole process: another test's leftover thread keeps its own clock
        if threading.current_thread() is not threading.main_thread():
            return real_sleep(seconds)
        state.setdefault("sleeps", []).append(round(seconds, 3))
        state["i"] += 1
        clock["t"] += step_seconds(seconds)

    def step_seconds(seconds):
        return current().get("advance", seconds)

    monkeypatch.setattr(sglang_health, "make_observer", lambda module: ScriptedObserver())
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


def test_the_interval_counts_from_the_start_of_each_observation(module_runner, monkeypatch):
    """An observation costs time (0.5.23's /health alone takes a second): the next one starts one interval after the
    last one started, not a whole interval after it ended, so the ready line is seen up to a round sooner."""
    state = script(monkeypatch, [
        {"log": "loading_multithread.log", "takes": 0.6},
        {"log": "warming.log", "http": 503, "takes": 1.2},
        {"log": "ready.log", "http": 200, "takes": 0.3},
    ])
    kind, result = module_runner(sglang_health, ARGS)
    assert kind == "exit" and result["verdict"] == "ready", result
    assert state["sleeps"][:2] == [0.4, 0.0]  # the watch's own; later ones are the journal check's bounded calls
    assert result["elapsed_s"] == 2.5  # 0.6 + 0.4 + 1.2 + 0.3; a whole interval after each observation: 4.1


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
    assert result["msg"].count("exit code 1") == 1  # the reason says it; said once
    assert result["msg"].count("Exception: Capture cuda graph failed") == 1
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


LOAD_BEGIN = "".join("[2026-12-05 10:00:00 TP%d] Load weight begin. avail mem=93.67 GB\n" % r for r in range(8))
BAR = "Multi-thread loading shards: %3d%% Completed | %d/64 [00:%02d<03:00,  3.00s/it]\n"


def test_a_load_records_each_step_of_its_progress_and_its_crash(module_runner, monkeypatch):
    """With the unit's log wrapper every redraw is a journal record: the history shows the load moving, 3 s a shard."""
    bars = [LOAD_BEGIN + "".join(BAR % (k * 100 // 64, k, k) for k in range(i + 1)) for i in (0, 1, 1, 2, 59)]
    steps = [{"text": text, "activity": n, "advance": 3.0} for n, text in enumerate(bars)]
    steps.append({"text": bars[-1] + "[2026-12-05 10:03:00 TP0] Scheduler hit an exception: Traceback (most recent "
                  "call last):\n  File \"x.py\", line 1, in f\nOSError: [Errno 5] Input/output error: "
                  "'/m/model-00060-of-000064.safetensors'\n", "schedulers": 0, "show": GONE})
    script(monkeypatch, steps)
    kind, result = module_runner(sglang_health, ARGS)
    assert kind == "fail" and result["verdict"] == "crashed"
    assert [(h["verdict"], h["progress"]) for h in result["history"]] == [
        ("loading", "0/64"), ("loading", "1/64"), ("loading", "2/64"), ("loading", "59/64"), ("crashed", "59/64")]
    assert all(isinstance(h["at_unix"], float) for h in result["history"])
    assert "model-00060-of-000064.safetensors" in result["error"]


GONE = {"active": "deactivating", "sub": "stop-sigterm", "result": "signal", "pid": 0, "code": 2, "status": 9}


def test_a_crash_seen_before_journald_stored_its_traceback_waits_once_for_the_journal(module_runner, monkeypatch):
    """systemd reports the tree killed an instant after the failing rank wrote its traceback, and journald stores a
    stream's lines asynchronously: the first observation of the crash has no cause yet, one more a second later has."""
    state = script(monkeypatch, [
        {"log": "loading_multithread.log", "activity": 10},
        {"log": "loading_multithread.log", "schedulers": 0, "show": GONE},
        {"log": "sim_crash_at_shard_43_tp8.log", "schedulers": 0, "show": GONE},
    ])
    kind, result = module_runner(sglang_health, ARGS)
    assert kind == "fail" and result["verdict"] == "crashed"
    assert "model-00043-of-000064.safetensors" in result["error"]
    assert result["traceback"].splitlines()[-1].startswith("OSError: [Errno 5] Input/output error")
    assert state["sleeps"][:2] == [1.0, sglang_health.SETTLE_S]
    assert result["elapsed_s"] == 2.0


def test_a_crash_without_any_cause_is_judged_after_one_more_look(module_runner, monkeypatch):
    state = script(monkeypatch, [
        {"log": "loading_multithread.log", "activity": 10},
        {"log": "loading_multithread.log", "schedulers": 0, "show": GONE},
    ])
    kind, result = module_runner(sglang_health, ARGS)
    assert kind == "fail" and result["verdict"] == "crashed" and result["error"] is None
    assert result["elapsed_s"] == 2.0 and result["phase"] == "loading_weights"
    assert result["progress"]["i"] == 37


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
    assert count_schedulers(100, str(tmp_path)) == 8
    assert count_schedulers(0, str(tmp_path)) == 0
    assert count_schedulers(600, str(tmp_path)) == 1


def test_activity_counts_the_ranks_not_the_parent_a_probe_wakes(tmp_path):
    """Every /health probe of a watcher touches SGLang's parent (it serves HTTP) and the log wrapper (it reads the
    probe's access line): with schedulers present only their I/O and page faults count; before any, the whole tree."""
    def proc(pid, ppid, cmdline, minflt, rchar):
        d = tmp_path / str(pid)
        d.mkdir()
        (d / "stat").write_text("%d (python3) S %d 1 1 0 -1 0 %d 0 0 0" % (pid, ppid, minflt))
        (d / "cmdline").write_bytes(cmdline)
        (d / "io").write_text("rchar: %d\nwchar: 0\nread_bytes: 0\n" % rchar)

    proc(90, 1, b"/usr/bin/python3\x00/usr/local/lib/sglang-service/sglang_log_lines.py\x00", 1000, 50000)
    proc(100, 90, b"python3\x00-m\x00sglang.launch_server\x00", 2000, 60000)
    assert sglang_observe.schedulers_ranks_and_activity(90, str(tmp_path)) == (0, [], 113000)
    proc(200, 100, b"sglang::scheduler_TP0\x00", 7, 10)
    proc(201, 100, b"sglang::scheduler_TP1\x00", 8, 20)
    assert sglang_observe.schedulers_ranks_and_activity(90, str(tmp_path)) == (2, ["TP0", "TP1"], 45)
    assert sglang_observe.tree_activity(90, str(tmp_path)) == 113045


def test_parse_show():
    obs = parse_show(SHOW.format(active="activating", sub="auto-restart", pid=0, restarts=3, status=9,
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
    assert probe_health(url, 5)[0] == 503
    assert probe_health(url + "/", 5)[0] == 200
    code, latency, error = probe_health("http://127.0.0.1:9", 5)
    assert code is None and error


FAKE_JOURNALCTL = """#!%s
import json, sys
entries = [json.loads(l) for l in open(%r)]
args = sys.argv[1:]
open(%r, "a").write(" ".join(args) + "\\n")
if "--after-cursor" in args:
    cur = args[args.index("--after-cursor") + 1]
    entries = entries[[e["__CURSOR"] for e in entries].index(cur) + 1:]
if "-n" in args:
    entries = entries[-int(args[args.index("-n") + 1]):]
for e in entries:
    print(json.dumps(e))
"""


def journal_fixture(tmp_path, lines):
    entries = tmp_path / "entries.jsonl"
    with open(entries, "w") as fh:
        for i, line in enumerate(lines):
            msg = list(line.encode()) if "\r" in line else line  # journald's byte-array form for control chars
            fh.write(json.dumps({"__CURSOR": "c%d" % i, "MESSAGE": msg}) + "\n")
    calls = tmp_path / "calls"
    prog = tmp_path / "journalctl"
    prog.write_text(FAKE_JOURNALCTL % (sys.executable, str(entries), str(calls)))
    prog.chmod(0o755)
    return str(prog), entries, calls


def test_journal_is_read_by_cursor_and_stops_at_the_ready_line(tmp_path):
    """A server that has served for a week: the first read stops at the ready line and continues from the newest
    entry, never reading the week in between; later reads only take what is new."""
    startup = ["[t] server_args={}", "Multi-thread loading shards:  50%% Completed | 32/64 [00:01<00:01, 1.00it/s]\r"
               "Multi-thread loading shards: 100% Completed | 64/64 [00:02<00:00, 1.00it/s]",
               "[t] The server is fired up and ready to roll!"]
    week = ["[t TP0] Decode batch, #running-req: 1, #token: %d" % i for i in range(5000)]
    prog, entries, calls = journal_fixture(tmp_path, startup + week)
    reader = sglang_journal.JournalReader(prog, "u.service", timeout=10)
    text = reader.text("inv1")
    assert text.splitlines()[-1] == "[t] The server is fired up and ready to roll!" and "Decode batch" not in text
    assert "64/64" in text.replace("\r", "\n")
    with open(entries, "a") as fh:
        fh.write(json.dumps({"__CURSOR": "new", "MESSAGE": "[t] Subprocess scheduler_3 (pid=9) crashed"}) + "\n")
    text = reader.text("inv1")
    assert text.endswith("crashed\n") and text.count("Decode batch") == 0
    args = open(calls).read().splitlines()
    assert "--after-cursor c5002" in args[-1] and "-n 1" in args[1]


def test_journal_falls_back_to_since_without_invocation_id(tmp_path):
    prog, _, calls = journal_fixture(tmp_path, ["x"])
    sglang_journal.JournalReader(prog, "u.service").text(None, "Mon 2026-05-18 10:00:00 UTC")
    assert open(calls).read().split()[:3] == ["-u", "u.service", "-o"]
    assert "--since 2026-05-18 10:00:00" in open(calls).read()


def test_every_observation_call_is_time_boxed(tmp_path):
    slow = tmp_path / "nvidia-smi"
    slow.write_text("#!/bin/sh\nsleep 30\n")
    slow.chmod(0o755)
    rc, _, err = bounded.run_bounded([str(slow)], 0.5)
    assert rc is None and "timed out" in err
    assert sglang_observe.gpu_observation(str(slow), [1], 0.5) is None
    assert bounded.bounded(lambda: __import__("time").sleep(5), 0.2, "default") == "default"


def test_silent_capture_with_gpu_memory_moving_is_not_stalled(module_runner, monkeypatch):
    """Real CUDA graph capture is minutes without a journal line (the tqdm bar redraws with \\r) and without I/O; the
    GPU memory its graphs take moves with every captured shape, and that change is the evidence of life."""
    silent = [{"log": "capturing.log", "advance": 10.0, "activity": 7,
               "gpu": {"memory_mib": 60000 + 50 * i, "busy_pct": 100}} for i in range(9)]
    script(monkeypatch, silent + [{"log": "ready.log", "http": 200, "gpu": {"memory_mib": 60450, "busy_pct": 0}}])
    kind, result = module_runner(sglang_health, dict(ARGS, stall_timeout=30, interval=10.0))
    assert kind == "exit", result
    assert [h["verdict"] for h in result["history"]] == ["capturing", "ready"]
    assert result["elapsed_s"] >= 3 * 30 - 10


def test_busy_gpus_with_flat_memory_and_no_log_is_stalled_with_a_hint_at_acs_iommu(module_runner, monkeypatch):
    """The PCIe/NCCL all-reduce hang: every GPU reads 100 %, nothing else moves, no error is ever logged. Utilization
    alone is never evidence of life."""
    script(monkeypatch, [{"log": "capturing.log", "advance": 10.0, "activity": 7,
                          "gpu": {"memory_mib": 61234, "busy_pct": 100}}] * 6)
    kind, result = module_runner(sglang_health, dict(ARGS, stall_timeout=30, interval=10.0))
    assert kind == "fail" and result["verdict"] == "stalled"
    assert "GPU memory flat for 30 s" in result["msg"]
    assert "GPUs are busy (100 %)" in result["msg"] and "ACS" in result["msg"] and "iommu=pt" in result["msg"]


def test_idle_gpus_with_flat_memory_stall_without_the_nccl_hint(module_runner, monkeypatch):
    script(monkeypatch, [{"log": "capturing.log", "advance": 10.0, "activity": 7,
                          "gpu": {"memory_mib": 61234, "busy_pct": 0}}] * 6)
    kind, result = module_runner(sglang_health, dict(ARGS, stall_timeout=30, interval=10.0))
    assert kind == "fail" and result["verdict"] == "stalled"
    assert "ACS" not in result["msg"]


def test_a_crash_message_says_each_fact_once_and_a_bind_error_gets_the_ports_hint():
    """Issue 14: a busy port killed SGLang after loading; the message listed capture and mem-fraction hints and the
    error twice."""
    error = "[Errno 98] error while attempting to bind on address ('127.0.0.1', 30000): address already in use"
    v = {"verdict": "crashed", "elapsed_s": 612.0, "phase": "http_server", "error": error,
         "exit_status": {"text": "exit code 3"},
         "reason": "main process gone (unit failed, Result=exit-code, exit code 3) in phase http_server: " + error}
    msg = sglang_health.failure_message("sglang-kimi.service", v)
    assert msg.count(error) == 1 and msg.count("exit code 3") == 1 and msg.count("phase http_server") == 1
    assert msg.endswith("the port is taken by another process (an old server, another service): stop it or move "
                        "--port; preflight refuses a port that is taken before it deploys")
    assert "mem-fraction" not in msg and "graph" not in msg


def test_a_port_taken_is_judged_from_uvicorns_error_line_and_names_the_holder(module_runner, monkeypatch):
    """SGLang 0.5.23 logs uvicorn's one ERROR line and lives on for the warmup's 120 polls of /model_info (2 minutes):
    the verdict comes from the line, with whoever listens on the port now (here: this test)."""
    import socket
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen(1)
    port = holder.getsockname()[1]
    bind = ("[2026-12-05 10:11:40] ERROR:    [Errno 98] error while attempting to bind on address ('127.0.0.1', %d): "
            "address already in use\n" % port)
    text = log("capturing.log") + "".join(
        line + "\n" for line in log("warming.log").splitlines() if "Application startup" in line or "Started" in line)
    try:
        script(monkeypatch, [{"log": "capturing.log"}, {"text": text + bind, "http": None}])
        kind, result = module_runner(sglang_health, ARGS)
    finally:
        holder.close()
    assert kind == "fail" and result["verdict"] == "crashed"
    assert result["elapsed_s"] == 1.0 and result["phase"] == "http_server"
    assert result["bind_failed"] == {"address": "127.0.0.1", "port": port, "error": bind.split("ERROR:    ")[1].strip()}
    assert result["error"] == result["bind_failed"]["error"]
    assert [h["pid"] for h in result["port_holders"]] == [os.getpid()]
    assert "port %d is held by pid %d" % (port, os.getpid()) in result["msg"]
    assert result["msg"].count("the port is taken") == 1 and "read the traceback" not in result["msg"]


UNBALANCED = ("[2026-12-05 10:00:01 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
              "  File \"/x/scheduler.py\", line 1, in run_scheduler_process\n"
              "RuntimeError: The memory capacity is unbalanced. Some GPUs may be occupied by other processes. "
              "pre_model_load_memory=73.73, local_gpu_memory=93.73, local_gpu_memory * 0.9=84.357\n"
              "[2026-12-05 10:00:01] Received sigquit from a child process. It usually means the child failed.\n")


def test_a_gpu_held_by_another_process_is_named_with_its_pid_and_the_hint_is_its_own(module_runner, monkeypatch):
    """0.5.23's _check_tp_memory_balance raises at the memory baseline on every rank with a free GPU: not an NCCL
    problem; the message names the GPU and the foreign process (nvidia-smi, outside the unit's cgroup)."""
    script(monkeypatch, [{"log": "starting.log"},
                         {"text": log("starting.log") + UNBALANCED, "schedulers": 0, "show": GONE}])
    seen = {}

    def foreign(nvidia_smi, own, timeout):
        seen["own"] = own
        return [{"gpu": 3, "pid": 4242, "process_name": "python3", "used_memory_mib": 20480}]
    monkeypatch.setattr(sglang_health, "foreign_gpu_processes", foreign)
    kind, result = module_runner(sglang_health, ARGS)
    assert kind == "fail" and result["verdict"] == "crashed"
    assert result["gpu_holders"] == [{"gpu": 3, "pid": 4242, "process_name": "python3", "used_memory_mib": 20480}]
    assert "GPU 3 holds 20480 MiB of PID 4242 (python3), not this unit's" in result["msg"]
    assert "another process holds memory on one of this unit's GPUs" in result["msg"]
    assert "NCCL" not in result["msg"]


def test_foreign_gpu_processes_are_the_compute_apps_outside_the_unit(tmp_path):
    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\ncase \"$1\" in\n"
                   "--query-gpu=*) printf '0, NVIDIA RTX PRO 6000, GPU-a, 12.0, 97887, 1, 580.95.05, Enabled, 00000000:18:00.0\\n"
                   "3, NVIDIA RTX PRO 6000, GPU-d, 12.0, 97887, 20481, 580.95.05, Enabled, 00000000:9A:00.0\\n' ;;\n"
                   "--query-compute-apps=*) printf '11, GPU-a, sglang::scheduler_TP0, 71000\\n"
                   "4242, GPU-d, python3, 20480\\n' ;;\nesac\n")
    smi.chmod(0o755)
    found = sglang_observe.foreign_gpu_processes(str(smi), [11], 5.0)
    assert found == [{"gpu": 3, "pid": 4242, "process_name": "python3", "used_memory_mib": 20480}]
    assert sglang_observe.foreign_gpu_processes(None, [], 5.0) == []


OOM_KERNEL = [
    "sglang::schedul invoked oom-killer: gfp_mask=0x140cca(GFP_HIGHUSER_MOVABLE|__GFP_COMP), order=0, oom_score_adj=0",
    "oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0,oom_memcg=/system.slice/"
    "sglang-kimi.service,task_memcg=/system.slice/sglang-kimi.service,task=sglang::schedul,pid=7716,uid=998",
    "Memory cgroup out of memory: Killed process 7716 (sglang::schedul) total-vm:91234567kB, anon-rss:64172851kB, "
    "file-rss:6612kB, shmem-rss:0kB, UID:998 pgtables:130000kB oom_score_adj:0",
    "oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0,oom_memcg=/system.slice/"
    "other.service,task_memcg=/system.slice/other.service,task=python3,pid=9,uid=0",
]


def test_oom_kills_of_the_unit_are_read_from_the_kernel_log_with_their_sizes():
    kills = sglang_journal.parse_oom_kills(OOM_KERNEL, "sglang-kimi.service")
    assert kills == [{"pid": 7716, "task": "sglang::schedul", "constraint": "CONSTRAINT_MEMCG",
                      "memcg": "/system.slice/sglang-kimi.service", "anon_rss_kib": 64172851, "file_rss_kib": 6612,
                      "shmem_rss_kib": 0}]


def test_a_host_oom_while_loading_is_crashed_with_the_kill_and_the_host_memory_hint(module_runner, monkeypatch):
    """sgl-project/sglang#38567: every rank SIGKILLed while loading; the parent's -9 line; the kernel says it was the
    OOM killer in the unit's memory cgroup: host RAM, never 'still loading', never the storage hint."""
    script(monkeypatch, [{"log": "loading_multithread.log"},
                         {"log": "sim_rank_dies_at_init_tp8.log", "schedulers": 0,
                          "show": {"active": "failed", "sub": "failed", "result": "oom-kill", "pid": 0, "code": 1,
                                   "status": 1}}])
    seen = {}

    def kernel(journalctl, matches, since, unit, timeout, pids=()):
        seen.update(matches=matches, since=since, unit=unit)
        return sglang_journal.parse_oom_kills(OOM_KERNEL, unit)
    monkeypatch.setattr(sglang_health, "oom_kills", kernel)
    kind, result = module_runner(sglang_health, dict(ARGS, unit="sglang-kimi.service",
                                                     kernel_log_match=["SYSLOG_IDENTIFIER=kernel"]))
    assert kind == "fail" and result["verdict"] == "crashed"
    assert seen["matches"] == ["SYSLOG_IDENTIFIER=kernel"] and seen["since"].startswith("Mon 2026-05-18")
    assert result["oom_kills"][0]["pid"] == 7716
    assert "the kernel's OOM killer killed PID 7716 (sglang::schedul, anon-rss 61.2 GiB) in " \
           "/system.slice/sglang-kimi.service (CONSTRAINT_MEMCG): host memory ran out, not GPU memory" in result["msg"]
    assert result["msg"].endswith(sglang_health.HOST_OOM_ADVICE)
    assert "NCCL" not in result["msg"] and "model_stage" not in result["msg"]


def test_oom_kills_are_attributed_by_pid_where_the_unit_has_no_memory_cgroup_of_its_own():
    """cgroup v1 without memory delegation (the sandbox's containers): the kernel names the container's memory cgroup,
    so a kill is the unit's when its PID was seen in the unit's cgroup during the watch."""
    lines = [line.replace("/system.slice/sglang-kimi.service", "/libpod_parent/libpod-46c1") for line in OOM_KERNEL]
    assert sglang_journal.parse_oom_kills(lines, "sglang-kimi.service") == []
    kills = sglang_journal.parse_oom_kills(lines, "sglang-kimi.service", pids={7716})
    assert [(k["pid"], k["memcg"], k["anon_rss_kib"]) for k in kills] == [(7716, "/libpod_parent/libpod-46c1", 64172851)]


# ---- issue 37 items 5 and 6: hung is not busy -------------------------------------------------------------------

PREFILL = ("[2026-05-18 10:20:%02d TP0] Prefill batch, #new-seq: 1, #new-token: 8192, #cached-token: 0, token usage: "
           "0.02, #running-req: 3, #queue-req: 0, #pending-token: 0, cuda graph: False, input throughput (token/s): "
           "2048.00\n")
ECHO = ("[2026-05-18 10:21:%02d] Health check failed. Server couldn't get a response from detokenizer for last 20 "
        "seconds. tic start time: 10:20:40. last_heartbeat time: 10:20:39\n"
        "[2026-05-18 10:21:%02d] INFO:     127.0.0.1:51860 - \"GET /health HTTP/1.1\" 503 Service Unavailable\n")


def test_a_busy_server_is_busy_not_stalled_and_the_task_passes(module_runner, monkeypatch):
    """After the ready line, /health 503 (a long prefill holds its one-token generation, sgl-project/sglang#22511)
    while the stats-logging rank's Prefill batch lines move: busy, a success with a warning, never stalled."""
    ready = log("ready.log")
    steps = [{"text": ready + "".join(PREFILL % s for s in range(n)), "http": 503, "advance": 21.0}
             for n in (1, 3, 5)]
    script(monkeypatch, steps)
    kind, result = module_runner(sglang_health, dict(ARGS, stall_timeout=30))
    assert kind == "exit", result
    assert result["verdict"] == "busy" and "busy, not hung" in result["reason"]
    assert [h["verdict"] for h in result["history"]] == ["unhealthy", "busy"]


def test_a_server_hung_after_ready_is_stalled_naming_where_it_stopped(module_runner, monkeypatch):
    """Hung while serving: nothing but the probes' own echoes (503 after 20 s, their access lines) is logged; those
    are not life. Stalled after stall_timeout, naming the last line the server itself wrote."""
    base = log("ready.log") + PREFILL % 1
    steps = [{"text": base + "".join(ECHO % (s, s) for s in range(n)), "http": 503, "advance": 21.0,
              "activity": 100 + n, "gpu": {"memory_mib": 61234, "busy_pct": 100}} for n in range(1, 6)]
    script(monkeypatch, steps)
    kind, result = module_runner(sglang_health, dict(ARGS, stall_timeout=60))
    assert kind == "fail" and result["verdict"] == "stalled", result
    assert result["stopped_at"].startswith("Prefill batch, #new-seq: 1")
    assert "hung while serving" in result["msg"] and "GPUs are busy (100 %)" in result["msg"]


def test_a_hang_in_the_warmup_is_crashed_by_the_scheduler_watchdog_with_its_own_hint(module_runner, monkeypatch):
    """0.5.23 recorded (simulator): the warmup's forward never finishes; every rank's scheduler watchdog logs its debug
    info, the py-spy attempts and the timeout, then SIGQUITs the parent, which kills the tree."""
    script(monkeypatch, [{"log": "sim_hang_in_warmup_tp2.log", "schedulers": 2,
                          "show": {"active": "failed", "sub": "failed", "result": "signal", "pid": 0, "status": 9,
                                   "code": 2}}])
    kind, result = module_runner(sglang_health, dict(ARGS, tp_size=2))
    assert kind == "fail" and result["verdict"] == "crashed"
    assert result["phase"] == "warmup"
    assert result["error"] == "Scheduler watchdog timeout (self.watchdog_timeout=2.0, self.soft=False)"
    assert "--watchdog-timeout" in result["msg"] and "iommu=pt" in result["msg"]
    assert "NCCL/GLOO_SOCKET_IFNAME" not in result["msg"] and "read the first traceback" not in result["msg"]


def test_a_hang_while_warming_with_only_probe_echoes_is_stalled(module_runner, monkeypatch):
    """Before the ready line /health answers 503 at once, and uvicorn logs each probe: a log that grows only by those
    lines is not moving."""
    base = log("warming.log")
    echo = "[2026-05-18 10:21:%02d] INFO:     127.0.0.1:51860 - \"GET /health HTTP/1.1\" 503 Service Unavailable\n"
    steps = [{"text": base + "".join(echo % s for s in range(n)), "http": 503, "advance": 10.0, "activity": 7,
              "gpu": {"memory_mib": 61234, "busy_pct": 100}} for n in range(1, 8)]
    script(monkeypatch, steps)
    kind, result = module_runner(sglang_health, dict(ARGS, stall_timeout=30, interval=10.0))
    assert kind == "fail" and result["verdict"] == "stalled", result
    assert "phase warmup" in result["msg"]


def test_a_probe_timeout_within_the_servers_own_bound_is_refused(module_runner, monkeypatch):
    script(monkeypatch, [{"log": "ready.log", "http": 200}])
    kind, result = module_runner(sglang_health, dict(ARGS, probe_timeout=10))
    assert kind == "fail"
    assert "probe_timeout 10 s does not exceed the server's own /health bound" in result["msg"]
    assert "use 25 or more" in result["msg"]


def test_hicache_auto_sizing_without_a_readable_cgroup_gets_its_own_hint(module_runner, monkeypatch):
    """0.5.23 recorded (simulator): auto-sizing needs the memory cgroup's headroom; with the cgroup filesystem not
    mounted every rank raises ``Cannot automatically size HiCache host memory``: the fix is an explicit size, not less
    memory."""
    script(monkeypatch, [{"log": "sim_hicache_cgroup_unmounted_tp2.log", "schedulers": 0,
                          "show": {"active": "failed", "sub": "failed", "result": "signal", "pid": 0, "status": 9,
                                   "code": 2}}])
    kind, result = module_runner(sglang_health, dict(ARGS, tp_size=2))
    assert kind == "fail" and result["verdict"] == "crashed" and result["phase"] == "hicache_alloc"
    assert "set --hicache-size explicitly (GB per rank, within the memory limit)" in result["msg"]
    assert "lower --hicache-size / --hicache-ratio" not in result["msg"]
