"""sglang_log: parse recorded startup logs and classify observation sequences (fixtures/sglang_logs)."""

import os

import pytest

from ansible_collections.blackwell.sglang.plugins.module_utils.sglang_log import classify, first_traceback, parse_log, split_lines
from conftest import FIXTURES, load_yaml

LOG_CASES = load_yaml("sglang_logs", "cases.yml")
CLASSIFY_CASES = load_yaml("sglang_logs", "classify_cases.yml")


def read_log(name):
    if not name:
        return ""
    with open(os.path.join(FIXTURES, "sglang_logs", name), newline="") as handle:
        return handle.read()


@pytest.mark.parametrize("name", sorted(LOG_CASES))
def test_parse_recorded_log(name):
    want = LOG_CASES[name]
    got = parse_log(read_log(name))
    if "phase" in want:
        assert got["phase"] == want["phase"]
    if "ready" in want:
        assert got["ready"] is want["ready"]
    if "progress" in want:
        if want["progress"] is None:
            assert got["progress"] is None
        else:
            assert dict((k, got["progress"][k]) for k in want["progress"]) == want["progress"]
    if "traceback" in want and want["traceback"] is None:
        assert got["traceback"] is None
    tb = got["traceback"] or ""
    if "traceback_first_line" in want:
        assert tb.splitlines()[0] == want["traceback_first_line"]
    if "traceback_last_line" in want:
        assert tb.splitlines()[-1] == want["traceback_last_line"]
        assert got["error"] == want["traceback_last_line"]
    for text in want.get("traceback_excludes", []):
        assert text not in tb
    for text in want.get("traceback_includes", []):
        assert text in tb
    if "error_startswith" in want:
        assert got["error"].startswith(want["error_startswith"])
    if "scheduler_died" in want:
        assert dict((k, got["scheduler_died"][k]) for k in ("rank", "exit_code")) == want["scheduler_died"]
    if "sigquit" in want:
        assert got["sigquit"] is want["sigquit"]
    if "crash_phase" in want:
        assert got["crash_phase"] == want["crash_phase"]
    for key, phase in (want.get("rank_phases") or {}).items():
        assert got["ranks"][key] == phase, got["ranks"]


def test_carriage_return_redraws_are_split():
    assert split_lines("a\rb\r\nc\nd") == ["a", "b", "c", "d"]
    got = parse_log("Multi-thread loading shards:   0% Completed | 0/4 [00:00<?, ?it/s]"
                    "\rMulti-thread loading shards:  50% Completed | 2/4 [00:01<00:01,  1.17s/it]")
    assert (got["progress"]["i"], got["progress"]["n"], got["progress"]["pct"]) == (2, 4, 50)


def test_only_the_first_traceback_is_reported():
    lines = ["Traceback (most recent call last):", '  File "a.py", line 1, in <module>', "ValueError: first",
             "Traceback (most recent call last):", '  File "b.py", line 1, in <module>', "KeyError: echo"]
    assert first_traceback(lines).splitlines()[-1] == "ValueError: first"


def observation(spec, cache):
    obs = {"t": 0.0, "active_state": "active", "sub_state": "running", "main_pid": 4242, "n_restarts": 0,
           "exec_main_status": None, "exec_main_code": None, "invocation_id": "inv-1", "schedulers": 8,
           "http_code": None, "activity": None}
    obs.update(spec)
    for key in ("log", "previous_log"):
        name = obs.pop(key, "")
        if key == "previous_log" and not name:
            continue
        if name not in cache:
            cache[name] = parse_log(read_log(name))
        obs[key] = cache[name]
    return obs


@pytest.mark.parametrize("name", sorted(CLASSIFY_CASES))
def test_classify(name):
    case = CLASSIFY_CASES[name]
    cache = {}
    history = [observation(o, cache) for o in case["observations"]]
    got = classify(history, case.get("tp_size", 8), stall_timeout=case.get("stall_timeout", 300),
                   timeout=case.get("timeout", 1800), log_level=case.get("log_level", "info"))
    want = case["expect"]
    assert got["verdict"] == want["verdict"], got["reason"]
    assert got["terminal"] is (want["verdict"] in ("ready", "crashed", "restart_loop", "stalled", "timeout"))
    assert got["verdict"] in ("starting", "loading", "capturing", "allocating", "warming", "ready", "crashed",
                              "restart_loop", "stalled", "timeout")
    if "phase" in want:
        assert got["phase"] == want["phase"]
    if "progress" in want:
        assert (got["progress"]["i"], got["progress"]["n"]) == (want["progress"]["i"], want["progress"]["n"])
    if "reason_contains" in want:
        assert want["reason_contains"] in got["reason"]
    if "error_startswith" in want:
        assert (got["error"] or "").startswith(want["error_startswith"]), got
    if "exit_status_text" in want:
        assert got["exit_status"]["text"] == want["exit_status_text"]
    if want["verdict"] in ("crashed", "restart_loop") and "traceback" in str(want):
        assert got["traceback"]


def test_scheduler_titles():
    from ansible_collections.blackwell.sglang.plugins.module_utils.sglang_observe import is_scheduler_title

    assert is_scheduler_title("sglang::scheduler_TP3\0")
    assert is_scheduler_title("sglang::scheduler\0")  # 0.5.23 at tp 1
    assert is_scheduler_title("sglang::scheduler_DP0_TP3" + " " * 30)
    assert not is_scheduler_title("sglang::detokenizer\0")
    assert not is_scheduler_title("python3\0-m\0sglang::scheduler_TP0\0")


def test_midline_log_prefix_is_split():
    lines = split_lines("Multi-thread loading shards:  12% Completed | 8/64 [00:00<00:03]"
                        "[2026-05-18 10:00:00 TP1] Load weight end. elapsed=3.2 s\n")
    assert lines[0].startswith("Multi-thread") and lines[1].startswith("[2026-05-18 10:00:00 TP1] Load weight end")


def test_classify_empty_history():
    assert classify([], 8)["verdict"] == "starting"


def test_a_deliberate_restart_is_not_a_crash_but_an_automatic_one_is():
    """A new InvocationID with NRestarts unchanged is a handler's or operator's restart; NRestarts growth
    is Restart=on-failure at work (found in the faults scenario: a watch that began during a restart)."""
    from ansible_collections.blackwell.sglang.plugins.module_utils.sglang_log import classify, parse_log

    ready_log = parse_log("[2026-11-29 10:00:00] The server is fired up and ready to roll!\n")
    loading_log = parse_log("Multi-thread loading shards:  10% Completed | 6/64 [00:01<00:10,  5.00it/s]\n")

    def obs(t, inv, n_restarts, log):
        return {"t": t, "active_state": "active", "sub_state": "running", "result": "success", "main_pid": 100 + t,
                "n_restarts": n_restarts, "exec_main_code": 0, "exec_main_status": 0, "invocation_id": inv,
                "schedulers": 8, "activity": t, "log": log, "http_code": None}

    deliberate = [obs(0, "a", 0, ready_log), obs(1, "b", 0, loading_log)]
    assert classify(deliberate, tp_size=8)["verdict"] == "loading"
    automatic = [obs(0, "a", 0, loading_log), obs(1, "b", 1, loading_log)]
    assert classify(automatic, tp_size=8)["verdict"] == "crashed"


def test_hicache_auto_sizing_with_nothing_left_is_a_hicache_crash():
    """hicache_auto_size.py raises before any "Allocating" line: the error, not the last phase line, names it."""
    log = ("[2026-05-18 10:10:31 TP0] Capture target decode CUDA graph end. bs=[1], elapsed=27.12 s, mem usage=0.56 GB, "
           "avail mem=9.15 GB.\n"
           "[2026-05-18 10:10:32 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
           '  File "/x/sglang/srt/mem_cache/hicache_auto_size.py", line 111, in auto_size_hicache\n'
           "    raise ValueError(\n"
           "ValueError: No host memory is left for HiCache after the 10 GiB reserve; set --hicache-ratio or "
           "--hicache-size explicitly.\n")
    got = parse_log(log)
    assert got["crash_phase"] == "hicache_alloc" and got["error"].startswith("ValueError: No host memory is left")


def test_crash_advice_follows_the_error_then_the_phase():
    from ansible_collections.blackwell.sglang.plugins.module_utils.sglang_log import crash_advice

    assert "sm_120" in crash_advice("warmup", "AssertionError: CUDA error: no kernel image is available for execution")
    assert "--hicache-size" in crash_advice("hicache_alloc", "ValueError: Not enough host memory available.")
    assert "model_stage" in crash_advice("loading_weights", "OSError: [Errno 5] Input/output error")
    assert "port is taken" in crash_advice("http_server", "OSError: [Errno 98] Address already in use")
