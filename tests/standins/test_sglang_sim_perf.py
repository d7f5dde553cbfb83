"""The simulator's performance model (tests/sandbox/sglang_sim/sglang/srt/sim_perf.py): a decode step that grows with
the running batch, EAGLE-3 that keeps about 2.24 tokens a step and pays for its drafts and verify, the prefix cache
that speculation loses; and what a client of the HTTP server sees of it (chunks, usage, /server_info)."""

import json
import re
import sys
import time
import urllib.request
from types import SimpleNamespace

import pytest

from test_sglang_sim import SIM, kimi_checkpoint, pkg, sandbox_checkpoint_module, start  # noqa: F401 (fixtures)

sys.path.insert(0, str(SIM))
try:
    from sglang.srt import sim_perf  # noqa: E402
finally:
    sys.path.remove(str(SIM))

BASE = sim_perf.Speculation(SimpleNamespace(speculative_algorithm=None))
EAGLE3 = sim_perf.Speculation(SimpleNamespace(speculative_algorithm="EAGLE3", speculative_num_steps=3,
                                              speculative_eagle_topk=1, speculative_num_draft_tokens=4))


@pytest.fixture(autouse=True)
def defaults(monkeypatch):
    for name in list(__import__("os").environ):
        if name.startswith("SGLANG_SIM_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("SGLANG_SIM_CONFIG", "")


def test_speculation_leads_a_single_stream_and_trails_a_full_batch():
    """The seed's study: EAGLE-3 ahead for one stream (about 96 tokens/s against 61), behind at 32 and 128."""
    assert sim_perf.tokens_per_second(1, BASE) == pytest.approx(61.3, abs=0.5)
    assert sim_perf.tokens_per_second(1, EAGLE3) == pytest.approx(96.0, abs=1.0)
    assert EAGLE3.accept_length() == pytest.approx(2.24, abs=0.01)
    for batch in (1, 8, 16):
        assert sim_perf.tokens_per_second(batch, EAGLE3) > sim_perf.tokens_per_second(batch, BASE), batch
    for batch in (32, 64, 128):
        assert sim_perf.tokens_per_second(batch, EAGLE3) < sim_perf.tokens_per_second(batch, BASE), batch
    assert sim_perf.tokens_per_second(128, BASE) == pytest.approx(2353, abs=5)


def test_a_step_grows_with_the_batch_and_the_scale_and_slowdown_multiply_it(monkeypatch):
    assert sim_perf.step_seconds(128, BASE, scale=1.0) > 3 * sim_perf.step_seconds(1, BASE, scale=1.0)
    assert sim_perf.step_seconds(1, BASE) == pytest.approx(0.05 * 0.0163)  # the default time scale
    assert sim_perf.step_seconds(1, BASE, floor=0.02) == pytest.approx(0.02)  # a scenario's pace (SGLANG_SIM_TOKEN_S)
    monkeypatch.setenv("SGLANG_SIM_RELEASE_SLOWDOWN", "1.3")
    assert sim_perf.step_seconds(1, BASE, scale=1.0) == pytest.approx(1.3 * 0.0163)
    # a slower release is slower under a floor too (the fleet paces at 0.02 s, above the model at its scale)
    assert sim_perf.step_seconds(1, BASE, floor=0.02) == pytest.approx(1.3 * 0.02)


def test_the_pacer_gives_the_accept_length_on_average_and_never_past_the_end():
    pacer = sim_perf.Pacer(EAGLE3)
    counts = [pacer.next_count(10 ** 6) for _ in range(1000)]
    assert set(counts) == {2, 3} and sum(counts) / 1000 == pytest.approx(2.24, abs=0.01)
    assert sim_perf.Pacer(EAGLE3).next_count(1) == 1
    assert {sim_perf.Pacer(BASE).next_count(5) for _ in range(3)} == {1}


def test_the_prefix_cache_serves_the_longest_earlier_prefix_by_whole_messages():
    cache = sim_perf.PrefixCache(capacity=8)
    count = lambda messages: len(json.dumps(messages)) // 4  # noqa: E731 (the sim's token count)
    first = [{"role": "system", "content": "x" * 4000}, {"role": "user", "content": "q1"}]
    assert cache.match_and_insert(first, count) == 0
    second = first + [{"role": "assistant", "content": "a1"}, {"role": "user", "content": "q2"}]
    assert cache.match_and_insert(second, count) == count(first)
    other = [{"role": "system", "content": "y" * 4000}, {"role": "user", "content": "q1"}]
    assert cache.match_and_insert(other, count) == 0
    assert cache.match_and_insert(first, count) == count(first) - 1  # seen whole: the last token is computed


def _chat(sim, messages, max_tokens, stream=True):
    body = {"model": "m", "messages": messages, "max_completion_tokens": max_tokens, "stream": stream,
            "ignore_eos": True, "stream_options": {"include_usage": True}}
    req = urllib.request.Request(sim.url("/v1/chat/completions"), data=json.dumps(body).encode(),
                                 headers={"content-type": "application/json"})
    started, first, chunks, usage = time.monotonic(), None, 0, None
    with urllib.request.urlopen(req, timeout=60) as res:
        for raw in res:
            line = raw.decode().strip()
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            data = json.loads(line[6:])
            usage = data.get("usage") or usage
            delta = (data.get("choices") or [{}])[0].get("delta") or {}
            if delta.get("content") or delta.get("reasoning_content"):
                chunks += 1
                first = first or time.monotonic() - started
    return {"ttft": first, "chunks": chunks, "usage": usage, "seconds": time.monotonic() - started}


def test_a_client_sees_the_model(start, tmp_path):
    """At scale 1: 64 tokens with ignore_eos take 63 steps of about 16 ms, one chunk each; with EAGLE-3 about 2.24
    tokens a chunk and /server_info's avg_spec_accept_length (the benchmark's Accept length); usage counts the
    prompt; a second turn of a conversation skips the prefill of its earlier turns, unless it speculates."""
    ckpt = kimi_checkpoint(tmp_path / "Kimi-K2.5")
    draft = tmp_path / "kimi-k2.5-eagle3"
    sandbox_checkpoint_module().make_draft(str(draft))
    env = {"SGLANG_SIM_TIME_SCALE": "1", "SGLANG_SIM_PREFILL_TOKENS_PER_S": "4000", "SGLANG_SIM_DECODE_LOG_S": "0.2"}
    base = start(["--model-path", str(ckpt), "--tp", "2", "--trust-remote-code"], env=env)
    spec = start(["--model-path", str(ckpt), "--tp", "2", "--trust-remote-code", "--speculative-algorithm", "EAGLE3",
                  "--speculative-num-steps", "3", "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens",
                  "4", "--speculative-draft-model-path", str(draft)], env=env)
    base.wait_ready(30)
    spec.wait_ready(30)
    hello = [{"role": "user", "content": "Say hello."}]
    plain, fast = _chat(base, hello, 64), _chat(spec, hello, 64)
    assert plain["usage"]["completion_tokens"] == fast["usage"]["completion_tokens"] == 64
    assert plain["usage"]["prompt_tokens"] == len(json.dumps(hello)) // 4
    assert plain["chunks"] == 64 and 0.9 <= plain["seconds"] <= 3.0, plain
    assert 26 <= fast["chunks"] <= 31 and fast["seconds"] < plain["seconds"] * 0.8, fast
    with urllib.request.urlopen(spec.url("/server_info"), timeout=5) as res:
        state = json.loads(res.read())["internal_states"][0]
    assert state["avg_spec_accept_length"] == pytest.approx(2.2, abs=0.15)  # short requests end mid-step
    with urllib.request.urlopen(base.url("/server_info"), timeout=5) as res:  # no speculation: no accept length
        assert "avg_spec_accept_length" not in json.loads(res.read())["internal_states"][0]
    # the Decode batch line (metrics_reporter.py report_decode_stats) carries the interval's accept length and rate
    # (correct drafts per draft token, 3 a step here) with speculation, and neither without it
    decode = re.compile(r"Decode batch, #running-req: \d+, .*?token usage: [\d.]+, "
                        r"(?:accept len: (?P<len>[\d.]+), accept rate: (?P<rate>[\d.]+), )?cuda graph: True")
    lines = {sim: [m for m in map(decode.search, sim.log.splitlines()) if m] for sim in (base, spec)}
    assert lines[base] and all(m["len"] is None for m in lines[base]), base.log[-2000:]
    assert lines[spec] and all(m["len"] is not None for m in lines[spec]), spec.log[-2000:]
    for m in lines[spec]:
        assert 1.0 <= float(m["len"]) <= 4.0
        assert float(m["rate"]) == pytest.approx((float(m["len"]) - 1) / 3, abs=0.01)
    # a conversation: 8000 prompt tokens at 4000/s is 2 s of prefill the first time, none the second
    turn1 = [{"role": "system", "content": "notes " * 5400}, {"role": "user", "content": "q1"}]
    turn2 = turn1 + [{"role": "assistant", "content": "a1"}, {"role": "user", "content": "q2"}]
    for sim, hit in ((base, True), (spec, False)):
        cold, warm = _chat(sim, turn1, 4), _chat(sim, turn2, 4)
        assert cold["ttft"] > 1.5, cold
        assert (warm["ttft"] < 0.5) if hit else (warm["ttft"] > 1.5), (sim.port, warm)
