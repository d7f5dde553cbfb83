"""Recorded simulator logs (fixtures/sglang_logs/sim_*.log) and a guard that they still match the simulator.

Regenerate them with ``python tests/standins/test_sglang_sim_recordings.py`` (runs the SGLang 0.5.23 simulator
on 127.0.0.1 for each scenario and stores its stderr+stdout; the temporary checkpoint and package paths are replaced by
/srv/models/Kimi-K2.5/current and the release venv's site-packages). The live test re-runs two scenarios and checks parse_log reads the same
verdict-relevant facts as from the recording.
"""
import importlib.util
import os
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FIXDIR = ROOT / "tests" / "unit" / "fixtures" / "sglang_logs"
MODEL = "/srv/models/Kimi-K2.5/current"
SITE = "/opt/sglang/current/venv/lib/python3.11/site-packages"
_spec = importlib.util.spec_from_file_location("crash_to_verdict", ROOT / "benchmarks" / "crash_to_verdict.py")
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)

KIMI = ["--trust-remote-code", "--tool-call-parser", "kimi_k2", "--reasoning-parser", "kimi_k2"]
HICACHE = ["--enable-hierarchical-cache"]
# name: (tp, fault env, until: "exit" | "ready" | substring to wait for, extra env, break config, extra args)
SCENARIOS = {
    "sim_ready_tp8.log": (8, {}, "ready", {}, False, HICACHE),
    "sim_ready_tp1.log": (1, {}, "ready", {}, False, []),
    # rank 0 hangs loading; ranks 1-7 finish loading and wait in the KV-pool all-reduce: the server is loading
    "sim_hang_at_shard_10_tp8.log": (8, {"SGLANG_SIM_FAULT": "hang_at_shard:10"}, "TP7] Load weight end",
                                     {"SGLANG_SIM_SHARD_DELAY_S": "0.05"}, False, []),
    "sim_loading_legacy_tp8.log": (8, {"SGLANG_SIM_FAULT": "hang_at_shard:13", "SGLANG_SIM_PROGRESS_FORMAT": "legacy"},
                                   "12/64", {}, False, []),
    "sim_crash_at_shard_43_tp8.log": (8, {"SGLANG_SIM_FAULT": "crash_at_shard:43"}, "exit", {}, False, HICACHE),
    "sim_oom_cuda_graph_tp8.log": (8, {"SGLANG_SIM_FAULT": "oom_at_cuda_graph"}, "exit", {}, False, HICACHE),
    "sim_empty_config_tp8.log": (8, {}, "exit", {}, True, []),
    "sim_rank_dies_at_init_tp8.log": (8, {"SGLANG_SIM_FAULT": "rank_dies_at_init:2"}, "exit", {}, False, []),
    "sim_nccl_abort_after_ready_tp2.log": (2, {"SGLANG_SIM_FAULT": "nccl_abort_after_ready"}, "exit", {}, False, []),
    "sim_host_oom_at_shard_20_tp8.log": (8, {"SGLANG_SIM_FAULT": "host_oom_at_shard:20"}, "exit",
                                         {"SGLANG_SIM_SHARD_DELAY_S": "0.05"}, False, []),
    # the warmup's forward never finishes: the scheduler watchdog (--watchdog-timeout 2 here, 300 by default) kills it
    "sim_hang_in_warmup_tp2.log": (2, {"SGLANG_SIM_FAULT": "hang_in_warmup"}, "exit", {}, False,
                                   ["--watchdog-timeout", "2"]),
    "sim_warmup_failure_tp8.log": (8, {"SGLANG_SIM_FAULT": "warmup_failure"}, "exit", {}, False, HICACHE),
    "sim_tokenizer_failure_tp8.log": (8, {"SGLANG_SIM_FAULT": "tokenizer_load_failure"}, "exit", {}, False, HICACHE),
    "sim_hicache_no_memory_tp8.log": (8, {"SGLANG_SIM_FAULT": "hicache_alloc_failure:12"}, "exit", {}, False,
                                      HICACHE + ["--hicache-size", "2"]),
    # auto-sizing with the process's memory cgroup not mounted: every rank raises before allocating
    "sim_hicache_cgroup_unmounted_tp2.log": (2, {"SGLANG_SIM_FAULT": "hicache_cgroup_unmounted"}, "exit", {}, False,
                                             HICACHE),
    "sim_log_level_warning_tp8.log": (8, {}, "ready", {}, False, HICACHE + ["--log-level", "warning"]),
    "sim_ready_deepep_tp8.log": (8, {}, "ready", {}, False, HICACHE + ["--moe-a2a-backend", "deepep"]),
}


def _healthy(url):
    """GET /health answers 200 (a --log-level warning start prints no ready line)."""
    try:
        with urllib.request.urlopen(url + "/health", timeout=5) as res:
            return res.status == 200
    except (OSError, ValueError):
        return False


def run_scenario(name, workdir, pythonpath, timeout=30.0):
    tp, fault, until, extra, break_config, args = SCENARIOS[name]
    ckpt = os.path.join(workdir, "ckpt-" + name.replace(".", "_"), "Kimi-K2.5")
    bench.make_checkpoint(ckpt)
    if break_config:
        open(os.path.join(ckpt, "config.json"), "w").close()
    env = dict(fault, SGLANG_SIM_STATE_DIR=os.path.join(workdir, "state"), **extra)
    sim = bench.SimProcess(sys.executable, pythonpath, ["--model-path", ckpt, "--tp-size", str(tp)] + KIMI + args,
                           env, workdir)
    deadline = time.time() + timeout
    try:
        while time.time() < deadline:
            log = sim.log()
            if until == "exit" and sim.proc.poll() is not None:
                break
            if until == "ready" and "The server is fired up and ready to roll!" in log:
                time.sleep(0.3)
                break
            if until == "ready" and "--log-level" in args and _healthy(sim.url):
                time.sleep(0.3)
                break
            if until not in ("exit", "ready") and until in log:
                time.sleep(0.3)
                break
            time.sleep(0.05)
        else:
            raise AssertionError("%s: timed out; log tail:\n%s" % (name, sim.log()[-2000:]))
        text = sim.log().replace(ckpt, MODEL).replace(pythonpath, SITE)
        return text, sim.proc.poll(), sim
    finally:
        sim.stop()


def record(names=None):
    with tempfile.TemporaryDirectory() as workdir:
        pythonpath = bench.sim_package(os.path.join(workdir, "simpkg"))
        for name in names or sorted(SCENARIOS):
            text, rc, _ = run_scenario(name, workdir, pythonpath)
            (FIXDIR / name).write_bytes(text.encode())
            print("%s: %d bytes, exit %s" % (name, len(text), rc))


def test_recordings_still_match_the_simulator(tmp_path):
    from ansible_collections.blackwell.sglang.plugins.module_utils.health.sglang_log import parse_log

    pythonpath = bench.sim_package(str(tmp_path / "simpkg"))
    for name in ("sim_crash_at_shard_43_tp8.log", "sim_oom_cuda_graph_tp8.log"):
        live, rc, _ = run_scenario(name, str(tmp_path), pythonpath)
        assert rc == -9  # kill_process_tree SIGKILLs the parent: systemd sees status=9/KILL
        want = parse_log((FIXDIR / name).read_bytes().decode())
        got = parse_log(live)
        for key in ("crash_phase", "error", "sigquit", "scheduler_died"):
            assert got[key] == want[key], (name, key)
        assert got["traceback"].splitlines()[-1] == want["traceback"].splitlines()[-1]


if __name__ == "__main__":
    record(sys.argv[1:])
