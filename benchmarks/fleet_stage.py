#!/usr/bin/env python3
"""Fleet fan-out: the fleet sandbox's GPU nodes staging at once from one mirror (on-demand benchmark; not in CI).

    source scripts/env.sh && python benchmarks/fleet_stage.py [--gb 1] [--shards 16] [--keep]

What a fleet does with ``model_stage_fleet_mirror_url``: every node stages the same revision over HTTP from one
mirror. Here the mirror is tests/sandbox/fake_hub.py (sendfile, Range) in the fleet's router container, bound on the
fleet network (``http://sglang-fleet-router:8090/``), and the clients are the fleet's GPU node containers
(inventory/sandbox-fleet); each stages with the collection's own module, ``blackwell.sglang.model_stage``
(``source: http``, full sha256, durable before it records a file), run by ``ansible`` ad hoc on all nodes at once.

1. creates the fleet sandbox nodes when they are not running (``tests/sandbox/playbooks/sandbox.yml
   -e @tests/sandbox/fleet.yml``; the nodes only, no deploy; not timed) and writes a real-format checkpoint of
   ``--gb`` GB into the stand-in artifacts directory, which every container sees at /srv/sandbox;
2. the mirror's egress: each node reads every file from the mirror with 4 connections and throws the bytes away
   (no disk, no hash), first one node, then all nodes at once;
3. model_stage on one node, then on all nodes at once (a fresh revision directory each time);
4. prints one row per run (wall s, bytes, aggregate GB/s, this host's CPU seconds per GB and iowait seconds over
   the run, every container counted) and the fan-out's share of the mirror's egress.

Every container shares this host's cores, disk and page cache, so the figures are a lower bound for a real fleet,
where each node hashes on its own cores and writes its own disk and the mirror's NIC is the shared resource: the
question answered here is whether N nodes at once slow each other down more than the mirror's egress does. The
ad-hoc rows include one ``ansible`` round trip per node (the ``ping`` row measures it). Removes the checkpoint and
the staged copies at the end unless ``--keep``; leaves the fleet's containers as they were found.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

import sandbox_prep  # noqa: E402
from stage_bench import make_checkpoint  # noqa: E402

INVENTORY = "inventory/sandbox-fleet"
NODES = ["sglang-fleet-gpu-0", "sglang-fleet-gpu-1"]
MIRROR_HOST = "sglang-fleet-router"
MIRROR_PORT = 8090
ARTIFACTS = os.path.join(ROOT, ".sandbox", "artifacts")
MOUNT = "/srv/sandbox"  # tests/sandbox/nodes.yml sandbox_artifacts_mount
STORE = "/var/tmp/fleet-bench"
GB = 1e9

# Run inside a node with its python3: GET every file of the mirror with 4 threads, discard the body.
DRAIN = r"""
import json, sys, threading, time, urllib.request
base, names = sys.argv[1], json.loads(sys.argv[2])
todo = list(names); lock = threading.Lock(); total = [0]
def worker():
    while True:
        with lock:
            if not todo: return
            name = todo.pop()
        with urllib.request.urlopen(base + name) as r:
            while True:
                b = r.read(1 << 22)
                if not b: break
                with lock: total[0] += len(b)
start = time.monotonic()
ts = [threading.Thread(target=worker) for _ in range(4)]
[t.start() for t in ts]; [t.join() for t in ts]
print(json.dumps({"bytes": total[0], "seconds": time.monotonic() - start}))
"""


def run(argv, **kw):
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, **kw)
    if proc.returncode != 0:
        raise SystemExit("%s failed (rc %d):\n%s" % (" ".join(argv[:6]), proc.returncode,
                                                     (proc.stdout[-2000:] + proc.stderr[-2000:])))
    return proc.stdout


def running(name):
    proc = subprocess.run(["podman", "container", "inspect", "-f", "{{.State.Running}}", name],
                          capture_output=True, text=True)
    return proc.returncode == 0 and proc.stdout.strip() == "true"


def at_once(argvs):
    """Start every command, wait for all; wall seconds and each stdout."""
    start = time.perf_counter()
    procs = [subprocess.Popen(a, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for a in argvs]
    outs = []
    for argv, proc in zip(argvs, procs):
        out, err = proc.communicate()
        if proc.returncode != 0:
            raise SystemExit("%s failed (rc %d):\n%s" % (" ".join(argv[:6]), proc.returncode,
                                                         out[-2000:] + err[-2000:]))
        outs.append(out)
    return time.perf_counter() - start, outs


def adhoc(nodes, module, args):
    """``ansible`` ad hoc on ``nodes`` at once (forks >= nodes); wall seconds and {host: result}."""
    env = dict(os.environ, ANSIBLE_LOAD_CALLBACK_PLUGINS="true", ANSIBLE_STDOUT_CALLBACK="ansible.posix.json")
    argv = ["ansible", "-i", INVENTORY, ":".join(nodes), "-m", module]
    if args:  # ad hoc reads "-a '{...}'" as JSON, but an empty "{}" as a raw parameter
        argv += ["-a", json.dumps(args)]
    start = time.perf_counter()
    out = run(argv, env=env)
    wall = time.perf_counter() - start
    report = json.loads(out)
    results = report["plays"][0]["tasks"][0]["hosts"]
    bad = [h for h, r in results.items() if r.get("failed") or r.get("unreachable")]
    if bad:
        raise SystemExit("%s failed on %s: %s" % (module, ", ".join(bad), [results[h].get("msg") for h in bad]))
    return wall, results


def host_cpu():
    """(busy, iowait) CPU seconds of this whole host so far (/proc/stat's cpu line: user+nice+system+irq+softirq,
    and iowait); every container's processes count, as they share the host's cores."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    tick = os.sysconf("SC_CLK_TCK")
    user, nice, system, _idle, iowait, irq, softirq = fields[:7]
    return (user + nice + system + irq + softirq) / tick, iowait / tick


def row(label, wall, nbytes, cpu, note=""):
    busy, iowait = cpu
    print("%-40s %6.2f s %5.2f GB %5.2f GB/s  host CPU %5.2f s/GB, iowait %5.2f s  %s" % (
        label, wall, nbytes / GB, nbytes / GB / wall, busy / (nbytes / GB), iowait, note))


def timed(fn, *args):
    """fn(*args) with the host's CPU seconds over the call: (fn's result, (busy, iowait))."""
    before = host_cpu()
    out = fn(*args)
    after = host_cpu()
    return out, (after[0] - before[0], after[1] - before[1])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gb", type=float, default=1.0, help="checkpoint size in GB (default 1)")
    ap.add_argument("--shards", type=int, default=16)
    ap.add_argument("--parallel", type=int, default=4, help="model_stage's parallel downloads per node")
    ap.add_argument("--keep", action="store_true", help="keep the checkpoint and the staged copies")
    opts = ap.parse_args(argv)
    created = False
    if not all(running(n) for n in NODES + [MIRROR_HOST]):
        sandbox_prep.prepare()
        run(["ansible-playbook", "-i", INVENTORY, "tests/sandbox/playbooks/sandbox.yml", "-e",
             "@tests/sandbox/fleet.yml"])
        created = True
    bench = os.path.join(ARTIFACTS, "bench-fleet")
    shutil.rmtree(bench, ignore_errors=True)
    files = make_checkpoint(bench, opts.shards, int(opts.gb * GB / opts.shards))["files"]
    total = sum(files.values())
    mirror = None
    try:
        mirror = subprocess.Popen(["podman", "exec", MIRROR_HOST, "python3", MOUNT + "/bin/fake-hub",
                                   MOUNT + "/bench-fleet", "--bind", "0.0.0.0", "--port", str(MIRROR_PORT)],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        mirror.stdout.readline()  # "serving ..." once it listens
        url = "http://%s:%d/" % (MIRROR_HOST, MIRROR_PORT)
        print("checkpoint %.2f GB in %d shards; mirror %s in %s; clients %s; %d cores on this host"
              % (total / GB, opts.shards, url, MIRROR_HOST, ", ".join(NODES), os.cpu_count()))
        wall, _ = adhoc(NODES, "ansible.builtin.ping", {})
        print("%-44s %7.2f s   (one ad-hoc round trip to %d nodes)" % ("ansible ping, all nodes", wall, len(NODES)))
        names = json.dumps(sorted(files))
        drains = {}
        for nodes in ([NODES[0]], NODES):
            (wall, outs), cpu = timed(at_once, [["podman", "exec", n, "python3", "-c", DRAIN, url, names]
                                                for n in nodes])
            got = sum(json.loads(o)["bytes"] for o in outs)
            drains[len(nodes)] = got / wall
            row("mirror egress, %d node(s), discard" % len(nodes), wall, got, cpu)
        results = {}
        for i, nodes in enumerate(([NODES[0]], NODES)):
            args = {"name": "Kimi-K2.5", "revision": "bench%d" % i, "source": "http", "url": url.rstrip("/"),
                    "store": STORE, "parallel": opts.parallel, "progress_interval": 1.0}
            (wall, res), cpu = timed(adhoc, nodes, "blackwell.sglang.model_stage", args)
            got = sum(r["total_bytes"] for r in res.values())
            assert all(r["verified"] for r in res.values()), res
            last = "; ".join("%s: %s" % (h, r["progress"][-1]) for h, r in sorted(res.items()))
            results[len(nodes)] = got / wall
            row("model_stage http+sha256, %d node(s)" % len(nodes), wall, got, cpu, last)
        n = len(NODES)
        print("fan-out: %d nodes at once stage %.2f GB/s in all, %.0f %% of the mirror's egress to %d nodes "
              "(%.2f GB/s) and %.2fx one node alone" % (n, results[n] / GB, 100 * results[n] / drains[n], n,
                                                       drains[n] / GB, results[n] / results[1]))
    finally:
        if mirror is not None:
            mirror.terminate()
            subprocess.run(["podman", "exec", MIRROR_HOST, "pkill", "-f", "fake-hub .*bench-fleet"],
                           capture_output=True)
        if not opts.keep:
            shutil.rmtree(bench, ignore_errors=True)
            for node in NODES:
                subprocess.run(["podman", "exec", node, "rm", "-rf", STORE], capture_output=True)
        if created:
            print("(created the fleet's nodes; remove them with scripts/sandbox-fleet.sh --destroy)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
