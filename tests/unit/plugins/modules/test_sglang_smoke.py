"""sglang_smoke against the SGLang 0.5.23 simulator on 127.0.0.1 (with and without the kimi_k2 parsers)."""
import importlib.util
import os
import sys
import time
from pathlib import Path

import pytest

from ansible_collections.blackwell.sglang.plugins.modules import sglang_smoke

ROOT = Path(__file__).resolve().parents[4]
_spec = importlib.util.spec_from_file_location("crash_to_verdict", ROOT / "benchmarks" / "crash_to_verdict.py")
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)
KIMI = ["--tool-call-parser", "kimi_k2", "--reasoning-parser", "kimi_k2"]


@pytest.fixture(scope="module")
def sim_env(tmp_path_factory):
    d = tmp_path_factory.mktemp("smoke")
    return str(d), bench.sim_package(str(d / "pkg")), bench.make_checkpoint(str(d / "Kimi-K2.5"), shards=4)


def start_sim(sim_env, extra):
    workdir, pythonpath, ckpt = sim_env
    sim = bench.SimProcess(sys.executable, pythonpath, ["--model-path", ckpt, "--served-model-name", "Kimi-K2.5",
                                                        "--tp-size", "2"] + extra, {}, workdir)
    deadline = time.time() + 20
    while "The server is fired up and ready to roll!" not in sim.log():
        if time.time() > deadline or sim.proc.poll() is not None:
            sim.stop()
            raise AssertionError("simulator not ready:\n" + sim.log()[-2000:])
        time.sleep(0.05)
    return sim


@pytest.fixture(scope="module")
def kimi_sim(sim_env):
    sim = start_sim(sim_env, KIMI)
    yield sim
    sim.stop()


@pytest.fixture(scope="module")
def plain_sim(sim_env):
    sim = start_sim(sim_env, [])
    yield sim
    sim.stop()


def test_all_checks_pass_with_the_kimi_parsers(module_runner, kimi_sim):
    kind, result = module_runner(sglang_smoke, {"url": kimi_sim.url, "served_model_name": "Kimi-K2.5"})
    assert kind == "exit", result["msg"]
    assert result["changed"] is False and result["failed_checks"] == []
    by_name = {c["name"]: c for c in result["checks"]}
    assert list(by_name) == ["health", "models", "chat", "reasoning", "tool_calls", "tool_calls_stream", "answers"]
    assert by_name["answers"]["detail"] == "3 golden prompts answered right (arithmetic, fact, format)"
    assert all(c["status"] == "passed" for c in result["checks"])
    assert 'get-weather({"city": "Paris"})' in by_name["tool_calls"]["detail"]
    assert "search_docs(" in by_name["tool_calls_stream"]["detail"]
    assert "finish_reason tool_calls" in by_name["tool_calls_stream"]["detail"]


def test_without_parsers_markup_leaks_and_the_smoke_fails_naming_the_checks(module_runner, plain_sim):
    kind, result = module_runner(sglang_smoke, {"url": plain_sim.url, "served_model_name": "Kimi-K2.5"})
    assert kind == "fail"
    # chat switches thinking off, so without a reasoning parser there is no <think> markup to leak: it passes
    assert result["failed_checks"] == ["reasoning", "tool_calls", "tool_calls_stream"]
    by_name = {c["name"]: c for c in result["checks"]}
    assert by_name["health"]["status"] == "passed" and by_name["models"]["status"] == "passed"
    assert by_name["chat"]["status"] == "passed"
    assert "tool-call markup left in content" in by_name["tool_calls"]["detail"]
    assert "tool-call markup left in content" in by_name["tool_calls_stream"]["detail"]
    assert "--reasoning-parser kimi_k2" in by_name["reasoning"]["detail"]
    assert result["msg"].startswith("3 of 7 smoke checks failed")
    for name in result["failed_checks"]:
        assert name + ": " in result["msg"]


def test_wrong_served_name_fails_models(module_runner, kimi_sim):
    kind, result = module_runner(sglang_smoke, {"url": kimi_sim.url, "served_model_name": "other",
                                                "checks": ["models"]})
    assert kind == "fail" and result["failed_checks"] == ["models"]
    assert "not 'other'" in result["checks"][0]["detail"]


def test_check_mode_sends_nothing(module_runner, monkeypatch):
    def boom(*a, **k):
        raise AssertionError("request sent in check mode")
    from ansible_collections.blackwell.sglang.plugins.module_utils.http import http_client
    monkeypatch.setattr(http_client, "urlopen", boom)
    kind, result = module_runner(sglang_smoke, {"url": "http://127.0.0.1:9", "served_model_name": "x"},
                                 check_mode=True)
    assert kind == "exit" and result["changed"] is False
    assert {c["status"] for c in result["checks"]} == {"skipped"} and "check mode" in result["msg"]


def test_nothing_listening_fails_every_check_with_the_timeout(module_runner):
    kind, result = module_runner(sglang_smoke, {"url": "http://127.0.0.1:9", "served_model_name": "x",
                                                "probe_timeout": 1, "request_timeout": 1})
    assert kind == "fail" and len(result["failed_checks"]) == 7
    assert "within 5 s" in result["checks"][0]["detail"]  # probe timeouts are never below 5 s


def test_sse_parsing_joins_multiline_data_and_needs_done():
    raw = (b'data: {"choices": [{"delta": {"tool_calls": [{"index": 0, "id": "a", "function": '
           b'{"name": "get-weather", "arguments": ""}}]}}]}\r\n\r\n'
           b'data: {"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"arguments": "{\\"city\\":"}}]}}]}\n\n'
           b'data: {"choices": [{"delta": {"tool_calls":\ndata: [{"index": 0, "function": {"arguments": " 1}"}}]}}]}\n\n'
           b': keep-alive comment\n\n'
           b'data: [DONE]\n\n')
    content, reasoning, calls, finish = sglang_smoke.assemble_stream(sglang_smoke.sse_events(raw))
    assert calls == [{"id": "a", "name": "get-weather", "arguments": '{"city": 1}'}]
    with pytest.raises(sglang_smoke.CheckFailed, match="without data: \\[DONE\\]"):
        sglang_smoke.sse_events(b'data: {"choices": []}\n\n')


def test_second_call_dropped_in_stream_fails():
    with pytest.raises(sglang_smoke.CheckFailed, match="expected parsed tool_calls"):
        sglang_smoke.verify_tool_calls([{"name": "get-weather", "arguments": "{}"}], "")
    with pytest.raises(sglang_smoke.CheckFailed, match="not a JSON object"):
        sglang_smoke.verify_tool_calls([{"name": "get-weather", "arguments": "{"},
                                        {"name": "search_docs", "arguments": "{}"}], None)


def test_a_thinking_model_passes_because_thinking_is_switched_off_where_content_is_needed(module_runner, kimi_sim):
    """The simulator's model thinks for 600 tokens (SGLANG_SIM_THINK_TOKENS), more than the 256 the smoke used to
    send: with thinking left on and 256 tokens every answer ends inside the reasoning, content empty, no tool call."""
    old_way = {"url": kimi_sim.url, "served_model_name": "Kimi-K2.5", "no_thinking_kwargs": {}, "max_tokens": 256,
               "checks": ["chat", "tool_calls"]}
    kind, result = module_runner(sglang_smoke, old_way)
    assert kind == "fail" and result["failed_checks"] == ["chat", "tool_calls"]
    assert "no text in content" in result["checks"][0]["detail"]
    kind, result = module_runner(sglang_smoke, {"url": kimi_sim.url, "served_model_name": "Kimi-K2.5",
                                                "checks": ["chat", "tool_calls"]})
    assert kind == "exit", result["msg"]


def test_reasoning_cut_at_max_tokens_still_shows_the_parser_works(module_runner, kimi_sim):
    kind, result = module_runner(sglang_smoke, {"url": kimi_sim.url, "served_model_name": "Kimi-K2.5",
                                                "checks": ["reasoning"], "reasoning_max_tokens": 100})
    assert kind == "exit", result["msg"]
    assert "ended inside the reasoning at max_tokens 100" in result["checks"][0]["detail"]


def test_the_chat_completions_run_at_once_and_report_in_order(monkeypatch):
    """The smoke runs while a rolling redeploy holds the node out of rotation: its four chat completions (each a
    whole generation on the server) run at once, so it costs the longest, not the sum; the results keep the order of
    the checks asked for. Each stand-in check waits at one barrier for all four: run one after another, the first
    would wait alone and break it."""
    import threading

    barrier = threading.Barrier(4, timeout=10)

    def together(name, fail=False):
        def check(self):
            barrier.wait()
            if fail:
                raise sglang_smoke.CheckFailed("%s failed" % name)
            return name + " ok"
        return check

    for name in ("chat", "reasoning", "tool_calls", "tool_calls_stream"):
        monkeypatch.setattr(sglang_smoke.Smoke, "check_" + name, together(name, fail=name == "tool_calls"))
    monkeypatch.setattr(sglang_smoke.Smoke, "check_models", lambda self: "models ok")
    smoke = sglang_smoke.Smoke({"url": "http://127.0.0.1:9", "served_model_name": "x", "probe_timeout": 5,
                                "request_timeout": 5})
    results = smoke.run(["tool_calls_stream", "models", "chat", "tool_calls", "reasoning"])
    assert [r["name"] for r in results] == ["tool_calls_stream", "models", "chat", "tool_calls", "reasoning"]
    assert [r["status"] for r in results] == ["passed", "passed", "passed", "failed", "passed"]
    assert results[0]["detail"] == "tool_calls_stream ok" and results[3]["detail"] == "tool_calls failed"


def test_a_busy_servers_503_passes_the_health_check_as_busy(module_runner, sim_env):
    """/health answers 503 when no token came back within the server's bound (1 s here, 20 s by default): a long
    prefill does that to a healthy server (sgl-project/sglang#22511). With requests in its scheduler (/metrics) the
    health check passes and says busy; the same 503 with nothing in flight fails."""
    import json
    import threading
    import urllib.request

    workdir, pythonpath, ckpt = sim_env
    sim = bench.SimProcess(sys.executable, pythonpath, ["--model-path", ckpt, "--served-model-name", "Kimi-K2.5",
                                                        "--tp-size", "2", "--enable-metrics"],
                           {"SGLANG_HEALTH_CHECK_TIMEOUT": "1", "SGLANG_SIM_PREFILL_TOKENS_PER_S": "1000",
                            "SGLANG_SIM_HEALTH_LATENCY_S": "0.2"}, workdir)
    try:
        deadline = time.time() + 20
        while "The server is fired up and ready to roll!" not in sim.log():
            assert time.time() < deadline and sim.proc.poll() is None, sim.log()[-2000:]
            time.sleep(0.05)
        body = json.dumps({"text": "x" * 4 * 4000, "sampling_params": {"max_new_tokens": 2}}).encode()
        long_prefill = threading.Thread(target=lambda: urllib.request.urlopen(urllib.request.Request(
            sim.url + "/generate", data=body, headers={"content-type": "application/json"}), timeout=30).read())
        long_prefill.start()  # 4000 tokens at 1000 a second: the scheduler is held 4 s
        time.sleep(0.3)
        kind, result = module_runner(sglang_smoke, {"url": sim.url, "served_model_name": "Kimi-K2.5",
                                                    "checks": ["health"], "probe_timeout": 6})
        assert kind == "exit", result["msg"]
        assert result["checks"][0]["detail"].startswith("/health 503 while busy: 1 request(s) in the scheduler")
        long_prefill.join(30)
    finally:
        sim.stop()


def test_degenerate_output_fails_naming_the_repetition_while_health_is_200(module_runner, sim_env):
    """sgl-project/sglang#23264: a wrong kernel path makes the model say 'foss foss foss ...' with /health 200; the
    golden prompts get it wrong and every output is named degenerate."""
    workdir, pythonpath, ckpt = sim_env
    sim = bench.SimProcess(sys.executable, pythonpath, ["--model-path", ckpt, "--served-model-name", "Kimi-K2.5",
                                                        "--tp-size", "2"] + KIMI,
                           {"SGLANG_SIM_FAULT": "degenerate_after:0"}, workdir)
    try:
        deadline = time.time() + 20
        while "The server is fired up and ready to roll!" not in sim.log():
            assert time.time() < deadline and sim.proc.poll() is None, sim.log()[-2000:]
            time.sleep(0.05)
        kind, result = module_runner(sglang_smoke, {"url": sim.url, "served_model_name": "Kimi-K2.5",
                                                    "checks": ["health", "chat", "reasoning", "answers"]})
        assert kind == "fail"
        by_name = {c["name"]: c for c in result["checks"]}
        assert by_name["health"]["status"] == "passed"
        assert by_name["chat"]["detail"].startswith("degenerate output in content: the output repeats 'foss'")
        assert "degenerate output in reasoning_content" in by_name["reasoning"]["detail"]
        assert "repeats 'foss'" in by_name["answers"]["detail"]
    finally:
        sim.stop()


def test_long_context_finds_the_word_placed_deep_in_the_prompt(module_runner, kimi_sim):
    kind, result = module_runner(sglang_smoke, {"url": kimi_sim.url, "served_model_name": "Kimi-K2.5",
                                                "checks": ["long_context"], "long_context_tokens": 3000})
    assert kind == "exit", result["msg"]
    assert result["checks"][0]["detail"] == "the word placed past 2700 tokens came back"


def test_golden_prompts_given_without_their_fields_are_refused(module_runner):
    kind, result = module_runner(sglang_smoke, {"url": "http://127.0.0.1:9", "served_model_name": "m",
                                                "golden_prompts": [{"name": "x", "prompt": "hi"}]})
    assert kind == "fail" and "each needs name, prompt, expect" in result["msg"]
