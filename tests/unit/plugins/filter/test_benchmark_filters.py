"""The serving benchmark's filters: the table, configurations side by side, the rolling redeploy's gate and the options
a configuration runs with."""

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.blackwell.sglang.plugins.filter.sglang_benchmark import (
    sglang_benchmark_compare,
    sglang_benchmark_gate,
    sglang_benchmark_option_errors,
    sglang_benchmark_options,
    sglang_benchmark_runs,
    sglang_benchmark_table,
)


def run(workload, concurrency, tok_s, ttft99, accept=None):
    return {"workload": workload, "concurrency": concurrency, "output_tokens_per_s": tok_s, "requests_per_s": 1.0,
            "ttft_p50_ms": ttft99 / 2, "ttft_p99_ms": ttft99, "itl_p50_ms": 16.5, "itl_p99_ms": 20.0,
            "accept_length": accept, "failed": 0}


BASELINE = [run("short_chat", 1, 61.0, 10.0), run("short_chat", 128, 2350.0, 400.0)]
EAGLE3 = [run("short_chat", 1, 96.0, 9.0, 2.24), run("short_chat", 128, 1470.0, 520.0, 2.24)]


def test_table_has_one_line_a_run_with_every_figure():
    lines = sglang_benchmark_table(EAGLE3).splitlines()
    assert lines[0].split()[:3] == ["workload", "conc", "out"]
    assert set(lines[1]) == {"-"}
    assert len(lines) == 4
    first = lines[2].split()
    assert first[:3] == ["short_chat", "1", "96.0"] and "2.24" in first and first[-1] == "0"
    assert sglang_benchmark_table(BASELINE).splitlines()[2].split()[-2] == "-"  # no speculation: no accept length


def test_compare_names_the_configuration_ahead_at_each_concurrency_and_by_how_much():
    out = sglang_benchmark_compare(EAGLE3, BASELINE, "baseline", "eagle3")
    rows = {r["concurrency"]: r for r in out["rows"]}
    assert rows[1]["winner"] == "eagle3" and rows[1]["output_change_pct"] == pytest.approx(57.4, abs=0.1)
    assert rows[128]["winner"] == "baseline" and rows[128]["output_change_pct"] == pytest.approx(-37.4, abs=0.1)
    lines = out["table"].splitlines()
    assert "eagle3 by 57.4%" in lines[2] and "baseline by 37.4%" in lines[3]
    assert out["unmatched"] == []


def test_compare_lists_runs_only_one_configuration_made():
    out = sglang_benchmark_compare(EAGLE3[:1], BASELINE, "a", "b")
    assert [r["concurrency"] for r in out["rows"]] == [1]
    assert out["unmatched"] == ["short_chat c128"]


def test_gate_without_a_previous_record_records_and_passes_saying_so():
    gate = sglang_benchmark_gate(BASELINE, None, 1, 10, 25)
    assert gate["passed"] and gate["recorded_only"] and gate["problems"] == []
    assert "no benchmark record of the previous generation" in gate["msg"] and "61.0" in gate["msg"]


def test_gate_compares_only_the_same_sweep():
    """A record of other requests or other output tokens a request is no reference (a slower-looking sweep of longer
    answers must not fail a release, nor a faster-looking one pass it): recorded and passed, saying why."""
    before = [dict(run("short_chat", 8, 496.5, 202.5), requests=32, output_tokens=32)]
    longer = [dict(run("short_chat", 8, 300.0, 400.0), requests=32, output_tokens=128)]
    gate = sglang_benchmark_gate(longer, before, 8, 10, 25)
    assert gate["passed"] and gate["recorded_only"] and gate["problems"] == []
    assert gate["msg"].startswith("the previous generation's record at short_chat c8 ran another sweep "
                                  "(output_tokens 32, now 128): the gate recorded this one (300.0")
    same = [dict(run("short_chat", 8, 300.0, 400.0), requests=32, output_tokens=32)]
    assert not sglang_benchmark_gate(same, before, 8, 10, 25)["passed"]
    # a record from before runs carried output_tokens is compared as it stands
    assert not sglang_benchmark_gate(longer, [run("short_chat", 8, 496.5, 202.5)], 8, 10, 25)["passed"]


def test_gate_passes_within_the_thresholds():
    now = [run("short_chat", 1, 57.0, 11.0)]  # -6.6 % throughput, +10 % p99 TTFT
    gate = sglang_benchmark_gate(now, BASELINE, 1, 10, 25)
    assert gate["passed"] and not gate["recorded_only"]
    assert gate["msg"].startswith("benchmark gate passed at short_chat c1: output tokens/s 61.0 -> 57.0 (-6.6%)")


@pytest.mark.parametrize("now, expected", [
    ([run("short_chat", 1, 47.0, 10.0)], ["output tokens/s at short_chat c1 fell 23.0% (61.0 -> 47.0; the limit is 10.0%)"]),
    ([run("short_chat", 1, 61.0, 14.0)], ["p99 TTFT at short_chat c1 rose 40.0% (10.0 ms -> 14.0 ms; the limit is 25.0%)"]),
    ([run("short_chat", 1, 47.0, 14.0)], ["output tokens/s at short_chat c1 fell 23.0%", "p99 TTFT at short_chat c1 rose 40.0%"]),
])
def test_gate_fails_naming_each_figure_beyond_its_threshold(now, expected):
    gate = sglang_benchmark_gate(now, BASELINE, 1, 10, 25)
    assert not gate["passed"] and len(gate["problems"]) == len(expected)
    for problem, text in zip(gate["problems"], expected):
        assert problem.startswith(text)
    assert gate["msg"].startswith("benchmark gate failed at short_chat c1")


def test_gate_refuses_a_sweep_without_the_reference_run_and_thresholds_that_are_not_numbers():
    with pytest.raises(AnsibleFilterError, match="no short_chat run at concurrency 8"):
        sglang_benchmark_gate(BASELINE, BASELINE, 8, 10, 25)
    with pytest.raises(AnsibleFilterError, match="must be numbers"):
        sglang_benchmark_gate(BASELINE, BASELINE, 1, "ten", 25)


NODE = {"model-path": "/m", "tp-size": 8, "speculative-algorithm": "EAGLE3", "speculative-num-steps": 2,
        "speculative-draft-model-path": "/d", "cuda-graph-max-bs-decode": 128}


def test_options_replace_every_speculative_option_with_the_configurations_eagle3():
    off = sglang_benchmark_options(NODE, {"label": "baseline", "eagle3": {"enabled": False}}, {})
    assert off == {"model-path": "/m", "tp-size": 8, "cuda-graph-max-bs-decode": 128}
    on = sglang_benchmark_options(NODE, {"label": "eagle3"}, {"speculative-algorithm": "EAGLE3",
                                                              "speculative-num-steps": 3})
    assert on["speculative-num-steps"] == 3 and "speculative-draft-model-path" not in on


def test_options_keep_the_nodes_speculation_without_eagle3_and_null_removes_an_option():
    out = sglang_benchmark_options(NODE, {"label": "small-graphs", "options": {"cuda-graph-max-bs-decode": 32,
                                                                               "tp-size": None}}, None)
    assert out["cuda-graph-max-bs-decode"] == 32 and "tp-size" not in out
    assert out["speculative-algorithm"] == "EAGLE3"
    assert NODE["tp-size"] == 8  # the node's options are not changed


@pytest.mark.parametrize("config", [{}, {"label": ""}, {"label": "a/b"}, {"label": "on off"}, "baseline"])
def test_options_refuse_a_configuration_without_a_label_fit_for_a_file_name(config):
    with pytest.raises(AnsibleFilterError):
        sglang_benchmark_options(NODE, config, None)


def test_option_errors_name_each_configuration():
    runs = [{"label": "good", "options": {"model-path": "/m", "tp-size": 8}},
            {"label": "bad", "options": {"model-path": "/m", "tp-size": 8, "no-such-option": 1}}]
    problems = sglang_benchmark_option_errors(runs, "0.5.23")
    assert problems and all(p.startswith("bad: ") for p in problems)
    assert any("no-such-option" in p for p in problems)


def test_option_errors_refuse_fewer_than_two_configurations_and_repeated_labels():
    one = [{"label": "a", "options": {"model-path": "/m"}}]
    assert sglang_benchmark_option_errors(one, "0.5.23") == ["two configurations are needed at least, got 1"]
    twice = one + one
    assert sglang_benchmark_option_errors(twice, "0.5.23") == ["labels must differ, got a, a"]


def test_runs_pass_the_staged_draft_only_to_a_configuration_that_turns_eagle3_on():
    node = {"model-path": "/m", "tp-size": 8, "served-model-name": "Kimi-K2.5"}
    configs = [{"label": "baseline", "eagle3": {"enabled": False}},
               {"label": "eagle3", "eagle3": {"enabled": True, "num_steps": 3, "eagle_topk": 1, "num_draft_tokens": 4}},
               {"label": "as-deployed", "options": {"cuda-graph-max-bs-decode": 64}}]
    runs = sglang_benchmark_runs(configs, node, node, None, "0.5.23", staged_draft="/srv/models/draft/d1")
    assert [r["label"] for r in runs] == ["baseline", "eagle3", "as-deployed"]
    assert not any(k.startswith("speculative-") for k in runs[0]["options"])  # a staged draft with EAGLE-3 off: fine
    assert runs[1]["options"]["speculative-algorithm"] == "EAGLE3"
    assert runs[1]["options"]["speculative-draft-model-path"] == "/srv/models/draft/d1"
    assert runs[1]["options"]["speculative-num-steps"] == 3
    assert runs[2]["options"] == dict(node, **{"cuda-graph-max-bs-decode": 64})
