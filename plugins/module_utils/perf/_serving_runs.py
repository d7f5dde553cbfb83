# -*- coding: utf-8 -*-
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A concurrency sweep with SGLang's own serving benchmark, and the figures the product keeps of it.

The benchmark is the release's ``sglang.benchmark.serving`` (0.5.23 marks ``sglang.bench_serving`` deprecated), run
by the release's own Python. ``DRIVER`` imports it once and calls its ``cli_main`` once per run with that run's
command line, as ``python -m sglang.benchmark.serving ARGS`` would (the module parses ``sys.argv``); importing
sglang, torch and transformers takes seconds, so one process serves the whole sweep. Each run appends its result
line to its ``--output-file`` (JSONL, ``run_benchmark``); the driver writes what each run ended with to a status
file, so a run that fails (the server gone, every request refused) is named and the others still count.

The client sends the API key as ``OPENAI_API_KEY`` from its environment (``get_auth_headers``), never in argv.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

# What the product keeps of a run's result line (sglang/benchmark/serving.py run_benchmark's ``result``), by its name.
FIGURES = {
    "output_throughput": "output_tokens_per_s",
    "request_throughput": "requests_per_s",
    "median_ttft_ms": "ttft_p50_ms",
    "p99_ttft_ms": "ttft_p99_ms",
    "median_itl_ms": "itl_p50_ms",
    "p99_itl_ms": "itl_p99_ms",
    "accept_length": "accept_length",
    "completed": "completed",
    "duration": "duration_s",
}

DRIVER = r'''
import json, sys, traceback
spec = json.load(open(sys.argv[1]))
from sglang.benchmark import serving
for run in spec["runs"]:
    sys.argv = ["sglang.benchmark.serving"] + run["argv"]
    status = {"id": run["id"], "ok": True, "error": ""}
    try:
        serving.cli_main()
    except SystemExit as exc:
        if exc.code not in (None, 0):
            status = {"id": run["id"], "ok": False, "error": "exited %s" % exc.code}
    except Exception:
        status = {"id": run["id"], "ok": False, "error": traceback.format_exc()[-2000:]}
    with open(spec["status"], "a") as fh:
        fh.write(json.dumps(status) + "\n")
    sys.stdout.flush()
'''


def requests_for(concurrency, per_client, minimum):
    """How many requests (conversations, for a multi-turn workload) a run at this concurrency sends."""
    return max(int(concurrency) * int(per_client), int(minimum))


def run_argv(dataset, dataset_path, base_url, concurrency, requests, output_tokens, seed, output_file, tag):
    """The serving benchmark's command line for one run (a chat backend: the multi-turn replay needs it)."""
    return ["--backend", "sglang-oai-chat", "--base-url", base_url.rstrip("/"),
            "--dataset-name", dataset, "--dataset-path", dataset_path,
            "--num-prompts", str(requests), "--max-concurrency", str(concurrency),
            "--sharegpt-output-len", str(output_tokens), "--seed", str(seed),
            "--output-file", output_file, "--tag", tag, "--disable-tqdm"]


def last_result(jsonl_text):
    """The last result line of a run's output file (None when the run wrote none)."""
    lines = [line for line in (jsonl_text or "").splitlines() if line.strip()]
    return json.loads(lines[-1]) if lines else None


def summary(result, workload, concurrency, requests, turns=1):
    """The figures kept of one run: throughput, TTFT and inter-token latency at p50 and p99, the accept length
    (speculative decoding; None without), and how many requests did not complete (a multi-turn run counts each
    turn: the benchmark flattens a conversation's outputs)."""
    out = {"workload": workload, "concurrency": int(concurrency), "requests": int(requests)}
    for key, name in FIGURES.items():
        value = result.get(key)
        out[name] = round(float(value), 3) if isinstance(value, (int, float)) and not isinstance(value, bool) else value
    out["completed"] = int(out["completed"] or 0)
    out["failed"] = max(int(requests) * turns - int(result.get("completed") or 0), 0)
    return out
