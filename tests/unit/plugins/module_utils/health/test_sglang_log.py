"""sglang_log: parse recorded startup logs (fixtures/sglang_logs/cases.yml and the logs it names)."""

import pytest

from ansible_collections.blackwell.sglang.plugins.module_utils.health.sglang_log import first_traceback, parse_log, split_lines
from conftest import load_yaml, read_sglang_log

LOG_CASES = load_yaml("sglang_logs", "cases.yml")


@pytest.mark.parametrize("name", sorted(LOG_CASES))
def test_parse_recorded_log(name):
    want = LOG_CASES[name]
    got = parse_log(read_sglang_log(name))
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


def test_midline_log_prefix_is_split():
    lines = split_lines("Multi-thread loading shards:  12% Completed | 8/64 [00:00<00:03]"
                        "[2026-05-18 10:00:00 TP1] Load weight end. elapsed=3.2 s\n")
    assert lines[0].startswith("Multi-thread") and lines[1].startswith("[2026-05-18 10:00:00 TP1] Load weight end")


def test_hicache_auto_sizing_with_nothing_left_is_a_hicache_crash():
    """hicache_auto_size.py raises before any "Allocating" line: the error, not the last phase line, names it."""
    log = ("[2026-05-18 10:10:31 TP0] Capture target decode CUDA graph end. bs=[1], elapsed=27.12 s, mem usage=0.56 "
           "GB, avail mem=9.15 GB.\n"
           "[2026-05-18 10:10:32 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
           '  File "/x/sglang/srt/mem_cache/hicache_auto_size.py", line 111, in auto_size_hicache\n'
           "    raise ValueError(\n"
           "ValueError: No host memory is left for HiCache after the 10 GiB reserve; set --hicache-ratio or "
           "--hicache-size explicitly.\n")
    got = parse_log(log)
    assert got["crash_phase"] == "hicache_alloc" and got["error"].startswith("ValueError: No host memory is left")


def test_batch_lines_and_the_probes_echoes_are_told_apart():
    """The stats-logging rank's batch lines are the server working; a /health probe's access line and its
    ``Health check failed`` are the watcher's own echo, left out of ``last_line`` and counted in ``echo_size``."""
    prefill = ("[2026-05-18 10:20:01 TP0] Prefill batch, #new-seq: 1, #new-token: 8192, #cached-token: 0, token usage: "
               "0.02, #running-req: 3, #queue-req: 0, #pending-token: 0, cuda graph: False, input throughput (token/s): "
               "2048.00")
    decode = ("[2026-05-18 10:20:02 TP0] Decode batch, #running-req: 3, #token: 192, token usage: 0.00, cuda graph: "
              "True, gen throughput (token/s): 150.00, #queue-req: 0")
    echo = ["[2026-05-18 10:20:22] Health check failed. Server couldn't get a response from detokenizer for last 20 "
            "seconds. tic start time: 10:20:02. last_heartbeat time: 10:20:01",
            '[2026-05-18 10:20:22] INFO:     127.0.0.1:51860 - "GET /health HTTP/1.1" 503 Service Unavailable']
    got = parse_log("\n".join([prefill, decode] + echo) + "\n")
    assert got["batches"] == 2 and got["last_batch"].startswith("Decode batch, #running-req: 3")
    assert got["echo_size"] == sum(len(line) + 1 for line in echo)
    assert got["last_line"].startswith("Decode batch") and got["error"] is None and got["crash_phase"] is None


def test_a_soft_watchdog_dump_is_not_a_failure():
    line = "[2026-05-18 10:20:01 TP0] Scheduler watchdog timeout (self.watchdog_timeout=60.0, self.soft=True)"
    got = parse_log(line + "\n")
    assert got["watchdog_timeout"] is None and got["error"] is None
