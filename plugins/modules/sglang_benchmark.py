#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: sglang_benchmark
short_description: Measure an SGLang endpoint over a concurrency sweep with the release's own serving benchmark
extends_documentation_fragment:
  - blackwell.sglang.common
  - blackwell.sglang.common.no_diff
description:
  - Runs C(sglang.benchmark.serving) from the SGLang release on the host (its own Python, O(python)) against
    O(base_url), once per workload and concurrency, and keeps per run the output tokens/s, requests/s, time to
    first token and inter-token latency at p50 and p99, the speculative accept length and the requests that failed.
  - The workloads are the product's, fixed and seeded (C(short_chat), C(long_prefill), C(multi_turn); see
    C(module_utils/perf/_workloads.py)), written into O(work_dir) in the benchmark's own dataset formats.
  - One process imports the benchmark once and runs the sweep (C(cli_main) per run, as the command line would).
    The API key reaches it as C(OPENAI_API_KEY) in its environment, never in argv. It sees no GPU
    (C(CUDA_VISIBLE_DEVICES) empty) - importing the benchmark would otherwise open a CUDA context on a GPU the server
    holds (sgl_kernel's architecture check).
  - Writes the figures as JSON to O(dest) (through a temporary file, renamed), next to the deployment record of the
    generation they measured.
options:
  python:
    description: The release's Python (C(<release>/venv/bin/python)), which has C(sglang.benchmark.serving).
    type: path
    required: true
  base_url:
    description: The endpoint measured (a node's gateway or the router), without a path.
    type: str
    required: true
  api_key:
    description: A client API key for the endpoint; empty for none.
    type: str
    default: ""
  workloads:
    description: The workloads, in order.
    type: list
    elements: str
    default: [short_chat, long_prefill, multi_turn]
  concurrency:
    description: The concurrency levels (C(--max-concurrency)), in order.
    type: list
    elements: int
    default: [1, 8, 32, 128]
  requests_per_client:
    description: Requests per concurrent client in each run (conversations for C(multi_turn)).
    type: int
    default: 4
  min_requests:
    description: Requests of a run at least (a run at concurrency 1 needs a few to have percentiles).
    type: int
    default: 8
  output_tokens:
    description: Output tokens of each request (C(--sharegpt-output-len); the benchmark asks the server to ignore
      end of sequence, so each answer is this long).
    type: int
    default: 256
  seed:
    description: The benchmark's C(--seed).
    type: int
    default: 42
  label:
    description: What this sweep measured (the configuration's name; the runs' C(--tag)).
    type: str
    default: deployed
  work_dir:
    description: Where the workload files and the runs' raw output go.
    type: path
    required: true
  dest:
    description: The JSON file of the figures.
    type: path
    required: true
  timeout:
    description: Seconds the whole sweep may take.
    type: int
    default: 3600
attributes:
  check_mode:
    support: full
    description: Runs nothing; says how many runs it would make.
"""

EXAMPLES = r"""
- name: Measure the node's gateway over the default sweep
  blackwell.sglang.sglang_benchmark:
    python: /opt/sglang/current/venv/bin/python
    base_url: http://10.0.0.5:30000
    api_key: "{{ client_key }}"
    work_dir: /var/lib/sglang-benchmark
    dest: /var/lib/sglang-generations/current/benchmark-deployed.json
  no_log: true
"""

RETURN = r"""
results:
  description: One entry per run, in order (workload, concurrency, requests, output_tokens (asked of each request),
    output_tokens_per_s, requests_per_s, ttft_p50_ms, ttft_p99_ms, itl_p50_ms, itl_p99_ms, accept_length, completed,
    failed, duration_s).
  returned: success
  type: list
  elements: dict
failed_runs:
  description: Runs that ended without a result, with what they ended with.
  returned: always
  type: list
  elements: dict
dest:
  description: The JSON file written.
  returned: success
  type: str
"""

import json
import os
import shutil
import subprocess
import tempfile
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.blackwell.sglang.plugins.module_utils.perf import _serving_runs as serving_runs
from ansible_collections.blackwell.sglang.plugins.module_utils.perf import _workloads as workloads
from ansible_collections.blackwell.sglang.plugins.module_utils.staging.durable_files import write_json_atomic


def write_workloads(work_dir, names):
    """Each workload's file, written only where its content differs (they are the same bytes on every run)."""
    paths = {}
    for name in names:
        path = os.path.join(work_dir, workloads.WORKLOADS[name][1])
        text = workloads.render(name)
        try:
            with open(path) as fh:
                same = fh.read() == text
        except OSError:
            same = False
        if not same:
            with open(path + ".tmp", "w") as fh:
                fh.write(text)
            os.replace(path + ".tmp", path)
        paths[name] = path
    return paths


def plan(params, paths, run_dir):
    runs = []
    for name in params["workloads"]:
        dataset = workloads.WORKLOADS[name][0]
        for concurrency in params["concurrency"]:
            requests = serving_runs.requests_for(concurrency, params["requests_per_client"], params["min_requests"])
            rid = "%s-c%d" % (name, concurrency)
            output = os.path.join(run_dir, rid + ".jsonl")
            runs.append({"id": rid, "workload": name, "concurrency": concurrency, "requests": requests,
                         "output": output,
                         "argv": serving_runs.run_argv(dataset, paths[name], params["base_url"], concurrency, requests,
                                                       params["output_tokens"], params["seed"], output,
                                                       params["label"])})
    return runs


def run_driver(p, run_dir, driver_path, spec_path):
    """Run the sweep's driver with the release's Python; (its exit status or why it ended, the log's last 4000
    characters)."""
    # No GPU for the client: 0.5.23's serving benchmark imports sgl_kernel (through sglang.srt), whose architecture
    # check (sgl_kernel/load_utils.py _get_compute_capability) calls torch.cuda.current_device() when CUDA is
    # available, a CUDA context on GPU 0 beside the server that holds it; with no device visible it loads its default
    # ops and the client stays a CPU process. Offline: the tokenizer is the staged model's.
    env = dict(os.environ, PYTHONUNBUFFERED="1", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", CUDA_VISIBLE_DEVICES="")
    env.pop("OPENAI_API_KEY", None)
    if p["api_key"]:
        env["OPENAI_API_KEY"] = p["api_key"]
    log_path = os.path.join(run_dir, "benchmark.log")
    with open(log_path, "wb") as log:
        try:
            proc = subprocess.run([p["python"], driver_path, spec_path], env=env, stdout=log, stderr=subprocess.STDOUT,
                                  cwd=run_dir, timeout=p["timeout"], check=False)
            rc = proc.returncode
        except subprocess.TimeoutExpired:
            rc = "timeout after %d s" % p["timeout"]
    with open(log_path, "rb") as fh:
        log_tail = fh.read()[-4000:].decode(errors="replace")
    return rc, log_tail


def collect(p, runs, status_path, rc):
    """(each run's summary row, the runs that gave no result with why) from the runs' outputs and the driver's
    status lines."""
    statuses = {}
    if os.path.exists(status_path):
        with open(status_path) as fh:
            for line in fh:
                if line.strip():
                    row = json.loads(line)
                    statuses[row["id"]] = row
    results, failed_runs = [], []
    for run in runs:
        result = None
        if os.path.exists(run["output"]):
            with open(run["output"]) as fh:
                result = serving_runs.last_result(fh.read())
        if result is None:
            failed_runs.append({"id": run["id"], "error": statuses.get(run["id"], {}).get("error") or
                                "no result (the driver ended: %s)" % rc})
            continue
        row = serving_runs.summary(result, run["workload"], run["concurrency"], run["requests"],
                                   turns=workloads.WORKLOADS[run["workload"]][3])
        row["output_tokens"] = p["output_tokens"]  # what the run asked of each request (the gate compares like runs)
        results.append(row)
    return results, failed_runs


def main():
    module = AnsibleModule(
        argument_spec=dict(
            python=dict(type="path", required=True),
            base_url=dict(type="str", required=True),
            api_key=dict(type="str", default="", no_log=True),
            workloads=dict(type="list", elements="str", default=["short_chat", "long_prefill", "multi_turn"]),
            concurrency=dict(type="list", elements="int", default=[1, 8, 32, 128]),
            requests_per_client=dict(type="int", default=4),
            min_requests=dict(type="int", default=8),
            output_tokens=dict(type="int", default=256, no_log=False),
            seed=dict(type="int", default=42),
            label=dict(type="str", default="deployed"),
            work_dir=dict(type="path", required=True),
            dest=dict(type="path", required=True),
            timeout=dict(type="int", default=3600),
        ),
        supports_check_mode=True,
    )
    p = module.params
    unknown = [w for w in p["workloads"] if w not in workloads.WORKLOADS]
    bad = [c for c in p["concurrency"] if c < 1]
    if unknown or bad or not p["workloads"] or not p["concurrency"]:
        module.fail_json(msg="sglang_benchmark: workloads %s (known: %s), concurrency %s (each >= 1, at least one)"
                         % (p["workloads"], ", ".join(sorted(workloads.WORKLOADS)), p["concurrency"]),
                         failed_runs=[])
    if module.check_mode:
        module.exit_json(changed=False, failed_runs=[], results=[], dest=p["dest"],
                         msg="check mode: would run %d benchmark runs" % (len(p["workloads"]) * len(p["concurrency"])))
    if not os.access(p["python"], os.X_OK):
        module.fail_json(msg="sglang_benchmark: %s is not an executable Python (the release's venv)" % p["python"],
                         failed_runs=[])
    os.makedirs(p["work_dir"], mode=0o750, exist_ok=True)
    paths = write_workloads(p["work_dir"], p["workloads"])
    run_dir = tempfile.mkdtemp(prefix="sweep-", dir=p["work_dir"])
    runs = plan(p, paths, run_dir)
    spec_path, status_path = os.path.join(run_dir, "spec.json"), os.path.join(run_dir, "status.jsonl")
    driver_path = os.path.join(run_dir, "driver.py")
    with open(spec_path, "w") as fh:
        json.dump({"runs": [{"id": r["id"], "argv": r["argv"]} for r in runs], "status": status_path}, fh)
    with open(driver_path, "w") as fh:
        fh.write(serving_runs.DRIVER)
    started = time.time()
    rc, log_tail = run_driver(p, run_dir, driver_path, spec_path)
    results, failed_runs = collect(p, runs, status_path, rc)
    if failed_runs:
        named = "; ".join("%s: %s" % (f["id"], f["error"].strip().splitlines()[-1]) for f in failed_runs)
        module.fail_json(msg="sglang_benchmark: %d of %d runs gave no result (their output is in %s): %s" % (
            len(failed_runs), len(runs), run_dir, named), failed_runs=failed_runs, results=results, log_tail=log_tail)
    record = {"label": p["label"], "base_url": p["base_url"], "started": started, "seconds": round(time.time() - started, 1),
              "workloads": p["workloads"], "concurrency": p["concurrency"], "output_tokens": p["output_tokens"],
              "requests_per_client": p["requests_per_client"], "seed": p["seed"], "results": results}
    os.makedirs(os.path.dirname(p["dest"]), exist_ok=True)
    write_json_atomic(p["dest"], record)
    shutil.rmtree(run_dir, ignore_errors=True)
    module.exit_json(changed=True, results=results, failed_runs=[], dest=p["dest"], seconds=record["seconds"])


if __name__ == "__main__":
    main()
