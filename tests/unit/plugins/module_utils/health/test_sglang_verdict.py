"""sglang_verdict: classify observation sequences (fixtures/sglang_logs/classify_cases.yml) and advise on crashes."""

import pytest

from ansible_collections.blackwell.sglang.plugins.module_utils.health.sglang_log import parse_log
from ansible_collections.blackwell.sglang.plugins.module_utils.health.sglang_verdict import classify, crash_advice
from conftest import load_yaml, read_sglang_log

CLASSIFY_CASES = load_yaml("sglang_logs", "classify_cases.yml")


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
            cache[name] = parse_log(read_sglang_log(name))
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


def test_classify_empty_history():
    assert classify([], 8)["verdict"] == "starting"


def test_a_deliberate_restart_is_not_a_crash_but_an_automatic_one_is():
    """A new InvocationID with NRestarts unchanged is a handler's or operator's restart; NRestarts growth
    is Restart=on-failure at work (found in the faults scenario: a watch that began during a restart)."""
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


def test_crash_advice_follows_the_error_then_the_phase():
    assert "sm_120" in crash_advice("warmup", "AssertionError: CUDA error: no kernel image is available for execution")
    assert "--hicache-size" in crash_advice("hicache_alloc", "ValueError: Not enough host memory available.")
    assert "model_stage" in crash_advice("loading_weights", "OSError: [Errno 5] Input/output error")
    assert "port is taken" in crash_advice("http_server", "OSError: [Errno 98] Address already in use")
    unbalanced = ("RuntimeError: The memory capacity is unbalanced. Some GPUs may be occupied by other processes. "
                  "pre_model_load_memory=73.67, local_gpu_memory=93.67, local_gpu_memory * 0.9=84.303")
    assert "another process holds memory" in crash_advice("init_parallel", unbalanced)
    assert "NCCL" not in crash_advice("init_parallel", unbalanced)


def test_a_missing_shard_is_crashed_loading_with_the_staging_hint():
    """0.5.23 refuses an index whose shards are not all on disk before it reads one (every rank raises)."""
    text = "".join("[2026-12-05 10:00:00 TP%d] Load weight begin. avail mem=93.67 GB\n" % r for r in range(2))
    text += ("[2026-12-05 10:00:00 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
             "  File \"/x/weight_utils.py\", line 1, in filter_duplicate_safetensors_files\n"
             "RuntimeError: model.safetensors.index.json references 1 shard file(s) missing from "
             "/srv/models/Kimi-K2.5/current (incomplete download?): ['model-00043-of-000064.safetensors']\n"
             "[2026-12-05 10:00:00] Received sigquit from a child process. It usually means the child failed.\n")
    log = parse_log(text)
    assert log["crash_phase"] == "loading_weights"
    advice = crash_advice(log["crash_phase"], log["error"])
    assert "re-run model_stage" in advice and "storage" not in advice
