"""sglang_benchmark runs the sweep in one process of the release's Python (DRIVER), one cli_main per run with that
run's command line, the key in the environment only; it keeps the figures, names runs without a result, and runs
nothing in check mode. The release here is a stand-in package whose sglang.benchmark.serving.cli_main writes a
result line the way 0.5.23's run_benchmark appends one to --output-file."""

import json
import os
import sys

import pytest

from ansible_collections.blackwell.sglang.plugins.modules import sglang_benchmark

FAKE_SERVING = r'''
import json, os, sys

def cli_main():
    argv = sys.argv[1:]
    get = lambda flag: argv[argv.index(flag) + 1]
    concurrency = int(get("--max-concurrency"))
    with open(os.environ["FAKE_LOG"], "a") as fh:
        fh.write(json.dumps({"argv": argv, "key": os.environ.get("OPENAI_API_KEY")}) + "\n")
    if os.environ.get("FAKE_FAIL_AT") == str(concurrency):
        raise SystemExit(1)
    result = {"output_throughput": 60.0 * concurrency, "request_throughput": 1.5, "median_ttft_ms": 7.0,
              "p99_ttft_ms": 9.0 + concurrency, "median_itl_ms": 16.5, "p99_itl_ms": 17.0, "accept_length": None,
              "completed": int(get("--num-prompts")), "duration": 1.0}
    with open(get("--output-file"), "a") as fh:
        fh.write(json.dumps(result) + "\n")
'''


@pytest.fixture
def release(tmp_path, monkeypatch):
    pkg = tmp_path / "site" / "sglang" / "benchmark"
    pkg.mkdir(parents=True)
    (pkg.parent / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "serving.py").write_text(FAKE_SERVING)
    python = tmp_path / "python"
    python.write_text("#!/bin/sh\nPYTHONPATH=%s exec %s \"$@\"\n" % (tmp_path / "site", sys.executable))
    python.chmod(0o755)
    monkeypatch.setenv("FAKE_LOG", str(tmp_path / "calls.jsonl"))
    monkeypatch.setenv("OPENAI_API_KEY", "leaked-from-the-controller")
    return python


def args(tmp_path, release_python, **extra):
    out = {"python": str(release_python), "base_url": "http://127.0.0.1:30000", "api_key": "sk-client",
           "workloads": ["short_chat", "multi_turn"], "concurrency": [1, 8], "output_tokens": 32,
           "work_dir": str(tmp_path / "work"), "dest": str(tmp_path / "gen" / "current" / "benchmark-x.json"),
           "label": "x"}
    out.update(extra)
    return out


def calls(tmp_path):
    return [json.loads(line) for line in (tmp_path / "calls.jsonl").read_text().splitlines()]


def test_the_sweep_runs_once_per_workload_and_concurrency_and_keeps_the_figures(tmp_path, release, module_runner):
    kind, result = module_runner(sglang_benchmark, args(tmp_path, release))
    assert kind == "exit" and result["changed"]
    assert [(r["workload"], r["concurrency"], r["requests"]) for r in result["results"]] == [
        ("short_chat", 1, 8), ("short_chat", 8, 32), ("multi_turn", 1, 8), ("multi_turn", 8, 32)]
    assert result["results"][1]["output_tokens_per_s"] == 480.0 and result["results"][1]["failed"] == 0
    # a multi-turn run completes 4 turns a conversation: the fake's one result a conversation counts as failed turns
    assert result["results"][2]["failed"] == 8 * 3
    record = json.loads((tmp_path / "gen" / "current" / "benchmark-x.json").read_text())
    assert record["label"] == "x" and record["results"] == result["results"] and record["output_tokens"] == 32
    seen = calls(tmp_path)
    assert len(seen) == 4 and {c["key"] for c in seen} == {"sk-client"}  # the key from the module, in the environment
    assert all("sk-client" not in json.dumps(c["argv"]) for c in seen)
    dataset = seen[2]["argv"][seen[2]["argv"].index("--dataset-path") + 1]
    assert dataset.endswith("multi_turn.json") and os.path.getsize(dataset) > 1_000_000
    assert not [p for p in os.listdir(tmp_path / "work") if p.startswith("sweep-")]  # a finished sweep leaves no scratch


def test_a_run_without_a_result_fails_the_module_naming_it(tmp_path, release, module_runner, monkeypatch):
    monkeypatch.setenv("FAKE_FAIL_AT", "8")
    kind, result = module_runner(sglang_benchmark, args(tmp_path, release, workloads=["short_chat"]))
    assert kind == "fail"
    assert [f["id"] for f in result["failed_runs"]] == ["short_chat-c8"]
    assert "1 of 2 runs gave no result" in result["msg"] and "short_chat-c8: exited 1" in result["msg"]
    assert [r["concurrency"] for r in result["results"]] == [1]
    assert not (tmp_path / "gen").exists()  # no record of a half sweep


def test_check_mode_runs_nothing(tmp_path, release, module_runner):
    kind, result = module_runner(sglang_benchmark, args(tmp_path, release), check_mode=True)
    assert kind == "exit" and not result["changed"] and "would run 4 benchmark runs" in result["msg"]
    assert not (tmp_path / "calls.jsonl").exists() and not (tmp_path / "work").exists()


@pytest.mark.parametrize("extra, text", [({"workloads": ["sharegpt"]}, "known: long_prefill, multi_turn, short_chat"),
                                         ({"concurrency": [0]}, "each >= 1"), ({"python": "/nonexistent/python"},
                                                                                 "not an executable Python")])
def test_bad_input_is_refused_before_anything_runs(tmp_path, release, module_runner, extra, text):
    kind, result = module_runner(sglang_benchmark, args(tmp_path, release, **extra))
    assert kind == "fail" and text in result["msg"]
    assert not (tmp_path / "calls.jsonl").exists()
