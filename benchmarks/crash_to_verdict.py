#!/usr/bin/env python3
"""Crash-to-verdict latency: how long after SGLang crashes does the health classification say "crashed"?

Runs the SGLang 0.5.23 simulator N times (default 20) with ``SGLANG_SIM_FAULT=crash_at_shard:43`` on a
64-shard checkpoint, observes it every ``--interval`` s with the same code the ``sglang_health`` module
uses (``plugins/module_utils/health/sglang_observe.py`` + ``sglang_log.parse_log`` + ``sglang_verdict.classify``) and measures
from the crash (the ``Scheduler hit an exception`` line, logged with milliseconds: ``SGLANG_LOG_MS=1``)
to the first ``crashed`` verdict. Prints every run, then median and max; exits 1 when max > --target.

Modes:

* ``--mode subprocess`` (default; no systemd, no root): the simulator is a plain child process. The log
  is its stderr file (tqdm ``\\r`` redraws visible at once, unlike the journal); the systemd fields are
  derived from ``Popen.returncode`` (MainPID 0 + ExecMainCode 2/ExecMainStatus 9 + Result=signal once
  the parent SIGKILLed itself, as systemd reports it). Scheduler counting, /proc activity, /health
  probing, log parsing and classification are the module's code, unchanged.
* ``--mode systemd`` (inside a sandbox node, as root): each run is a transient unit
  (``systemd-run --unit sglang-bench-N``) and the observation is exactly the module's: ``systemctl show``,
  ``journalctl _SYSTEMD_INVOCATION_ID=``, /proc under MainPID. This includes journald latency and the
  sandbox's cgroup-v1 "deactivating until the stop timeout" window.

Not the same in subprocess mode: no journald (latency, line splitting), no systemd states
(deactivating/auto-restart/NRestarts), no KillMode; the crash sequence inside the simulator is identical.

Usage (repository checkout, simulator from tests/sandbox/sglang_sim):
    python3 benchmarks/crash_to_verdict.py
On a sandbox node (simulator installed as the SGLang release, checkpoint staged):
    python3 /tmp/bench/benchmarks/crash_to_verdict.py --mode systemd \\
        --python /opt/sglang/current/venv/bin/python --model-path /srv/models/Kimi-K2.5/current
Stdlib only.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import re
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FAST = {"SGLANG_SIM_SHARD_DELAY_S": "0.01", "SGLANG_SIM_CAPTURE_S": "0.1", "SGLANG_SIM_WARMUP_S": "0.1",
        "SGLANG_SIM_HEALTH_LATENCY_S": "0.05", "SGLANG_SIM_READY_POLL_S": "0.3", "SGLANG_SIM_DRAIN_POLL_S": "0.2",
        "SGLANG_SIM_FAULT_DELAY_S": "0.3"}
CRASH_LINE_RE = re.compile(r"\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)\.(\d{3})[^\]]*\] Scheduler hit an exception")


COLLECTION = "ansible_collections.blackwell.sglang"


def load_plugin(name, plugins_dir):
    """``plugins_dir``/module_utils/``name``.py (``name`` dotted: ``health.sglang_log``) imported as the collection's
    ``ansible_collections.blackwell.sglang.plugins.module_utils.<name>``, the path its own imports use, also on a
    node without Ansible (the faults scenario unpacks plugins/module_utils there): the collection package is made to
    point at the directory above ``plugins_dir`` unless it is imported already (the unit tests import it from the
    checkout's .collections)."""
    import types
    if COLLECTION not in sys.modules:
        root = os.path.dirname(os.path.abspath(plugins_dir))
        for package, path in (("ansible_collections", []), ("ansible_collections.blackwell", []), (COLLECTION, [root])):
            if package not in sys.modules:
                module = types.ModuleType(package)
                module.__path__ = path
                sys.modules[package] = module
    return importlib.import_module(COLLECTION + ".plugins.module_utils." + name)


# ---------------------------------------------------------------- simulator helpers (also used by tests)

def write_safetensors(path, tensors):
    """Minimal safetensors writer: ``tensors`` maps name -> (dtype 'F32', shape, raw bytes)."""
    header, data, offset = {}, b"", 0
    for name, (dtype, shape, raw) in sorted(tensors.items()):
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + len(raw)]}
        data += raw
        offset += len(raw)
    blob = json.dumps(header, separators=(",", ":")).encode()
    blob += b" " * (-len(blob) % 8)
    with open(path, "wb") as fh:
        fh.write(struct.pack("<Q", len(blob)) + blob + data)


def make_checkpoint(path, shards=64, total=64, config=True):
    """A Kimi-K2.5-named checkpoint (``model-00001-of-000064.safetensors`` ...), index and config."""
    os.makedirs(path, exist_ok=True)
    weight_map, size = {}, 0
    for i in range(1, shards + 1):
        name = "model-%05d-of-%06d.safetensors" % (i, total)
        raw = struct.pack("<16f", *([float(i)] * 16))
        write_safetensors(os.path.join(path, name), {"model.layers.%d.mlp.weight" % i: ("F32", (4, 4), raw)})
        weight_map["model.layers.%d.mlp.weight" % i] = name
        size += len(raw)
    with open(os.path.join(path, "model.safetensors.index.json"), "w") as fh:
        json.dump({"metadata": {"total_size": size}, "weight_map": weight_map}, fh)
    if config:
        with open(os.path.join(path, "config.json"), "w") as fh:
            json.dump({"architectures": ["KimiK25ForConditionalGeneration"], "model_type": "kimi_k25",
                       "max_position_embeddings": 262144}, fh)
    return path


def sim_package(dest):
    """Copy tests/sandbox/sglang_sim/sglang with the CLI snapshot into ``dest``; returns the PYTHONPATH."""
    pkg = os.path.join(dest, "sglang")
    if not os.path.isdir(pkg):
        shutil.copytree(os.path.join(ROOT, "tests", "sandbox", "sglang_sim", "sglang"), pkg,
                        ignore=shutil.ignore_patterns("__pycache__"))
        shutil.copy2(os.path.join(ROOT, "plugins", "data", "sglang_cli_0.5.23.json"),
                     os.path.join(pkg, "cli_snapshot.json"))
    return dest


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class SimProcess:
    """The simulator as a plain subprocess on 127.0.0.1 in its own session; stderr+stdout to files."""

    def __init__(self, python, pythonpath, args, env, workdir, port=None):
        self.port = port or free_port()
        self.err_path = os.path.join(workdir, "sim-%d.err" % self.port)
        self.out_path = os.path.join(workdir, "sim-%d.out" % self.port)
        full_env = dict(os.environ, SGLANG_SIM_CONFIG="", **FAST)
        full_env.pop("SGLANG_SIM_FAULT", None)
        # its own process state directory: simulators sharing one see each other's ranks on "their" GPUs, and 0.5.23's
        # memory-balance check refuses to start beside another server (as it would on real GPUs)
        full_env["SGLANG_SIM_STATE_DIR"] = os.path.join(workdir, "sim-state-%d" % self.port)
        if pythonpath:
            full_env["PYTHONPATH"] = pythonpath
        full_env.update(env or {})
        with open(self.out_path, "wb") as out, open(self.err_path, "wb") as err:
            self.proc = subprocess.Popen(
                [python, "-m", "sglang.launch_server"] + list(args) + ["--host", "127.0.0.1", "--port",
                                                                        str(self.port)],
                stdout=out, stderr=err, env=full_env, start_new_session=True, cwd=workdir)
        self.url = "http://127.0.0.1:%d" % self.port

    def log(self):
        """stderr then stdout, bytes decoded without newline translation (tqdm's \\r stays)."""
        with open(self.err_path, "rb") as e, open(self.out_path, "rb") as o:
            return (e.read() + o.read()).decode("utf-8", "replace")

    def stop(self):
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass


# ---------------------------------------------------------------- observation per mode

def observe_subprocess(sim, obs_mod, log_mod, probe_timeout):
    rc = sim.proc.poll()
    obs = {"main_pid": sim.proc.pid if rc is None else 0, "n_restarts": 0, "invocation_id": "bench"}
    obs.update(obs_mod.exit_fields(rc))
    obs["schedulers"] = obs_mod.count_schedulers(obs["main_pid"])
    obs["activity"] = obs_mod.tree_activity(obs["main_pid"])
    obs["log"] = log_mod.parse_log(sim.log())
    obs["http_code"], _, _ = obs_mod.probe_health(sim.url, probe_timeout) if rc is None else (None, 0, None)
    return obs


def observe_systemd(observer, log_mod, previous):
    """What the sglang_health module observes: the same UnitObserver."""
    return observer.observe(previous, parse=log_mod.parse_log)


def crash_time(log_text):
    m = CRASH_LINE_RE.search(log_text or "")
    if not m:
        return None
    return time.mktime(time.strptime(m.group(1), "%Y-%m-%d %H:%M:%S")) + int(m.group(2)) / 1000.0


def one_run(n, opts, obs_mod, log_mod, verdict_mod, workdir, pythonpath):
    env = {"SGLANG_SIM_FAULT": "crash_at_shard:%d" % opts.crash_shard, "SGLANG_LOG_MS": "1",
           "SGLANG_SIM_SHARD_DELAY_S": str(opts.shard_delay),
           # not the GPU stand-in's: beside a serving node's own server, 0.5.23's memory-balance check would refuse
           "SGLANG_SIM_STATE_DIR": os.path.join(workdir, "sim-state-%d" % n)}
    args = ["--model-path", opts.model_path, "--tp-size", str(opts.tp_size), "--trust-remote-code",
            "--tool-call-parser", "kimi_k2", "--reasoning-parser", "kimi_k2"]
    sim, unit = None, None
    if opts.mode == "subprocess":
        sim = SimProcess(opts.python, pythonpath, args, env, workdir)
        url = sim.url
    else:
        port = free_port()
        url = "http://127.0.0.1:%d" % port
        unit = "sglang-bench-%d" % n
        subprocess.run(["systemctl", "stop", unit], capture_output=True)
        subprocess.run(["systemctl", "reset-failed", unit], capture_output=True)
        props = []
        for k, v in sorted(dict(FAST, **env).items()):
            props += ["-p", "Environment=%s=%s" % (k, v)]
        subprocess.run(["systemd-run", "--unit", unit, "-p", "KillMode=mixed", "-p", "TimeoutStopSec=3"] + props
                       + [opts.python, "-m", "sglang.launch_server"] + args
                       + ["--host", "127.0.0.1", "--port", str(port)], check=True, capture_output=True)
    history, verdict, t0 = [], None, time.monotonic()
    observer = None if sim is not None else obs_mod.UnitObserver(unit + ".service", url, opts.probe_timeout,
                                                                  nvidia_smi=shutil.which("nvidia-smi"))
    try:
        while time.monotonic() - t0 < opts.run_timeout:
            if sim is not None:
                obs = observe_subprocess(sim, obs_mod, log_mod, opts.probe_timeout)
            else:
                obs = observe_systemd(observer, log_mod, history[-1] if history else None)
            obs["t"] = time.monotonic() - t0
            history.append(obs)
            verdict = verdict_mod.classify(history, opts.tp_size, stall_timeout=60, timeout=opts.run_timeout)
            if verdict["terminal"]:
                break
            time.sleep(opts.interval)
        at = time.time()
        if sim is not None:
            text = sim.log()
        else:
            text = subprocess.run(["journalctl", "-u", unit, "-o", "cat", "--no-pager"], capture_output=True,
                                  text=True, errors="replace").stdout
        crashed_at = crash_time(text)
    finally:
        if sim is not None:
            sim.stop()
        else:
            subprocess.run(["systemctl", "stop", unit], capture_output=True)
            subprocess.run(["systemctl", "reset-failed", unit], capture_output=True)
    latency = (at - crashed_at) if crashed_at else None
    return {"run": n, "verdict": verdict["verdict"] if verdict else None, "phase": verdict and verdict["phase"],
            "error": verdict and verdict["error"], "exit": verdict and (verdict["exit_status"] or {}).get("text"),
            "latency_s": None if latency is None else round(latency, 3)}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mode", choices=("subprocess", "systemd"), default="subprocess")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--interval", type=float, default=1.0, help="seconds between observations (module default 1)")
    ap.add_argument("--probe-timeout", type=float, default=5.0)
    ap.add_argument("--tp-size", type=int, default=8)
    ap.add_argument("--crash-shard", type=int, default=43)
    ap.add_argument("--shard-delay", type=float, default=0.05, help="SGLANG_SIM_SHARD_DELAY_S")
    ap.add_argument("--python", default=sys.executable, help="interpreter that can import sglang (the simulator)")
    ap.add_argument("--model-path", default="", help="checkpoint; default: a generated 64-shard one")
    ap.add_argument("--plugins", default=os.path.join(ROOT, "plugins"))
    ap.add_argument("--run-timeout", type=float, default=60.0)
    ap.add_argument("--target", type=float, default=3.0, help="max latency allowed (s)")
    ap.add_argument("--json", action="store_true", help="print the runs as JSON too")
    opts = ap.parse_args(argv)
    log_mod = load_plugin("health.sglang_log", opts.plugins)
    verdict_mod = load_plugin("health.sglang_verdict", opts.plugins)
    obs_mod = load_plugin("health.sglang_observe", opts.plugins)
    workdir = tempfile.mkdtemp(prefix="crash_to_verdict-")
    try:
        if not opts.model_path:
            opts.model_path = make_checkpoint(os.path.join(workdir, "Kimi-K2.5"))
        pythonpath = None
        if opts.mode == "subprocess" and subprocess.run([opts.python, "-c", "import sglang"],
                                                        capture_output=True).returncode != 0:
            pythonpath = sim_package(os.path.join(workdir, "simpkg"))
        runs = []
        for n in range(1, opts.runs + 1):
            r = one_run(n, opts, obs_mod, log_mod, verdict_mod, workdir, pythonpath)
            runs.append(r)
            print("run %2d: %-8s phase=%-16s latency=%s s  %s | %s" % (
                r["run"], r["verdict"], r["phase"], r["latency_s"], r["exit"], (r["error"] or "")[:70]))
            sys.stdout.flush()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    lat = [r["latency_s"] for r in runs if r["latency_s"] is not None]
    bad = [r for r in runs if r["verdict"] != "crashed" or r["latency_s"] is None]
    if opts.json:
        print(json.dumps(runs, indent=1))
    if lat:
        print("mode=%s interval=%.1fs runs=%d crashed=%d median=%.3fs max=%.3fs target<=%.1fs" % (
            opts.mode, opts.interval, len(runs), len(runs) - len(bad), statistics.median(lat), max(lat), opts.target))
    ok = lat and not bad and max(lat) <= opts.target
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
