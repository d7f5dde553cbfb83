"""The serving benchmark's workloads: the same bytes everywhere, in the dataset formats of SGLang 0.5.23's own
benchmark (openai: messages and max_tokens per line; agentic-trace: conversations of turns), sized as documented."""

import hashlib
import json

import pytest

from ansible_collections.blackwell.sglang.plugins.module_utils.perf import _serving_runs as serving_runs
from ansible_collections.blackwell.sglang.plugins.module_utils.perf import _workloads as workloads


@pytest.mark.parametrize("name", sorted(workloads.WORKLOADS))
def test_a_workload_is_the_same_bytes_on_every_render(name):
    assert workloads.render(name) == workloads.render(name)


def test_the_workloads_are_fixed():
    """A change of the text changes what every record measured: it must be deliberate (update these digests)."""
    digests = {name: hashlib.sha256(workloads.render(name).encode()).hexdigest()[:16] for name in workloads.WORKLOADS}
    assert digests == EXPECTED_DIGESTS


EXPECTED_DIGESTS = {"short_chat": "faeff6808160fc28", "long_prefill": "97851ca3785e67ff", "multi_turn": "8b9c2487d73dece2"}


def _chars(messages):
    return sum(len(m["content"]) for m in messages)


def test_one_turn_workloads_are_openai_lines_of_the_documented_size():
    for name, (low, high) in {"short_chat": (60, 400), "long_prefill": (3000 * 4.5, 3000 * 4.5 + 1200)}.items():
        dataset, _, count, turns = workloads.WORKLOADS[name]
        rows = [json.loads(line) for line in workloads.render(name).splitlines()]
        assert dataset == "openai" and turns == 1 and len(rows) == count
        assert all(set(r) == {"messages", "max_tokens"} and r["messages"][0]["role"] == "user" for r in rows)
        sizes = [_chars(r["messages"]) for r in rows]
        assert low <= min(sizes) and max(sizes) <= high, (name, min(sizes), max(sizes))
        assert len({r["messages"][0]["content"] for r in rows}) > count * 0.9  # requests differ


def test_multi_turn_is_an_agentic_trace_whose_turns_share_a_long_system_prompt():
    dataset, _, count, turns = workloads.WORKLOADS["multi_turn"]
    data = json.loads(workloads.render("multi_turn"))
    assert dataset == "agentic-trace" and len(data["conversations"]) == count
    for conversation in data["conversations"][:20]:
        assert len(conversation) == turns == workloads.MULTI_TURN_TURNS
        first = conversation[0]["messages"]
        assert first[0]["role"] == "system" and len(first[0]["content"]) >= 1500 * 4.5
        assert all(t["messages"] and all(m["role"] == "user" for m in t["messages"]) for t in conversation[1:])
    systems = [c[0]["messages"][0]["content"] for c in data["conversations"]]
    assert len(set(systems)) == len(systems)  # each conversation its own prefix


def test_unknown_workload_is_refused_naming_the_known_ones():
    with pytest.raises(KeyError, match="long_prefill, multi_turn, short_chat"):
        workloads.render("sharegpt")


def test_run_argv_is_the_benchmarks_command_line_without_the_key():
    argv = serving_runs.run_argv("openai", "/w/short_chat.jsonl", "http://n:30000/", 8, 32, 64, 42, "/o.jsonl", "base")
    assert argv[:4] == ["--backend", "sglang-oai-chat", "--base-url", "http://n:30000"]
    assert argv[argv.index("--max-concurrency") + 1] == "8" and argv[argv.index("--num-prompts") + 1] == "32"
    assert argv[argv.index("--sharegpt-output-len") + 1] == "64" and "--disable-tqdm" in argv
    assert not any("key" in a.lower() for a in argv)


def test_requests_scale_with_concurrency_with_a_floor():
    assert serving_runs.requests_for(1, 4, 8) == 8
    assert serving_runs.requests_for(128, 4, 8) == 512


def test_summary_keeps_the_figures_and_counts_failed_turns():
    result = {"output_throughput": 61.04, "request_throughput": 1.9, "median_ttft_ms": 7.1, "p99_ttft_ms": 8.2,
              "median_itl_ms": 16.5, "p99_itl_ms": 16.8, "accept_length": None, "completed": 30, "duration": 9.1}
    out = serving_runs.summary(result, "multi_turn", 8, 8, turns=4)
    assert out == {"workload": "multi_turn", "concurrency": 8, "requests": 8, "output_tokens_per_s": 61.04,
                   "requests_per_s": 1.9, "ttft_p50_ms": 7.1, "ttft_p99_ms": 8.2, "itl_p50_ms": 16.5,
                   "itl_p99_ms": 16.8, "accept_length": None, "completed": 30, "duration_s": 9.1, "failed": 2}
    assert serving_runs.last_result('{"a": 1}\n{"a": 2}\n') == {"a": 2}
    assert serving_runs.last_result("") is None
