#!/usr/bin/env python3
"""The fleet sandbox's two-node group (issue 41): who serves, how a dead rank and a missing node are reported, how the
group stops.

    scripts/sandbox-fleet.sh              # once: gpu-0 alone, gpu-1 + gpu-2 one model (tp 16 over two nodes), router
    python benchmarks/multinode_group.py [--check]

Steps, each printing its figures:

1. the router's workers: gpu-0 and the group's rank 0 (gpu-1), never the follower (gpu-2), whose /health answers 200
   (SGLang 0.5.23's dummy health app) and whose /v1/models is 404;
2. the group stopped the way the product stops it (rank 0 first: its ShutdownReq ends the follower's ranks): the
   follower's unit is inactive after S seconds, against its TimeoutStopSec; a follower stopped first would wait it out;
3. rank 0 started without the follower: its health check (with the group, as smoke_health passes it) is ``stalled`` in
   ``init_parallel`` naming gpu-2; then gpu-2 starts and the group is ready, and back in the router;
4. a rank of the follower killed (SIGKILL to one ``sglang::scheduler_TP*`` on gpu-2): the product's health check there
   (sglang_health, as smoke_health runs it) says ``crashed`` naming the rank, its own time and the time from the kill;
   the follower's parent and its /health stay up (0.5.23 joins its schedulers one by one). Rank 0's next forward waits
   for the lost rank for ever, so the group is left broken unless ``--restore`` kills and starts it again.

``--check`` exits 1 when an expectation does not hold (scripts/test.sh uses it).
"""

import argparse
import json
import os
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rolling_redeploy import DEPLOYMENT, ROOT, _yaml, open_url, router_url  # noqa: E402

UNIT = "sglang-kimi.service"
SINGLE, RANK0, FOLLOWER = "sglang-fleet-gpu-0", "sglang-fleet-gpu-1", "sglang-fleet-gpu-2"
BACKEND = "http://127.0.0.1:%d" % int(DEPLOYMENT["deployment_backend_port"])
DIST_PORT = int(_yaml("roles", "deployment", "defaults", "main", "sglang_service.yml")["sglang_service_dist_init_port"])


def sh(node, *argv, check=True):
    return subprocess.run(["podman", "exec", node, *argv], capture_output=True, text=True, check=check).stdout.strip()


def workers():
    with open_url(router_url() + "/workers", timeout=10) as resp:
        return json.load(resp)["workers"]


def local_status(node, path):
    """HTTP status of ``path`` on the node's SGLang listener, from the node itself."""
    return sh(node, "curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "5", BACKEND + path,
              check=False)


def health(node, tp_size=8, group=None, stall_timeout=60, timeout=120):
    """The product's health check on ``node`` (the sglang_health module, as smoke_health calls it), ad hoc."""
    params = {"unit": UNIT, "url": BACKEND, "tp_size": tp_size, "timeout": timeout, "stall_timeout": stall_timeout,
              "health_check_timeout": float(DEPLOYMENT.get("deployment_health_check_timeout_s", 5)),
              "interval": 1.0, "kernel_log_match": ["SYSLOG_IDENTIFIER=kernel"]}
    if group:
        params.update(group=group, dist_init_port=DIST_PORT)
    started = time.monotonic()
    out = subprocess.run(["ansible", "-i", os.path.join(ROOT, "inventory", "sandbox-fleet"), node, "-o", "-m",
                          "blackwell.sglang.sglang_health", "-a", json.dumps(params)],
                         cwd=ROOT, capture_output=True, text=True).stdout
    wall = time.monotonic() - started
    text = out[out.index("{"):] if "{" in out else "{}"
    try:
        result = json.loads(text)
    except ValueError:
        result = {"verdict": "?", "msg": out[-800:]}
    return result, wall


def active(node):
    return sh(node, "systemctl", "is-active", UNIT, check=False)


def wait(predicate, timeout, step=0.2):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return False


def rank0_listed_healthy():
    return any(w.get("is_healthy") and RANK0 in w["url"] for w in workers())


def restart_group():
    """The group after a rank died: rank 0's next forward (the router's /health checks are generations) waits for
    the lost rank for ever, so nothing drains; both units are killed and started again at once, then both must be
    ready (their own health checks)."""
    for node in (RANK0, FOLLOWER):
        sh(node, "systemctl", "kill", "--signal=SIGKILL", UNIT, check=False)
    for node in (RANK0, FOLLOWER):
        wait(lambda n=node: active(n) != "active", 30)
        sh(node, "systemctl", "reset-failed", UNIT, check=False)
    threads = [threading.Thread(target=sh, args=(n, "systemctl", "restart", UNIT)) for n in (RANK0, FOLLOWER)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return [health(n, timeout=240)[0].get("verdict") for n in (RANK0, FOLLOWER)]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="exit 1 when an expectation does not hold")
    ap.add_argument("--restore", action="store_true",
                    help="kill and start the group again at the end (it is left with a dead rank otherwise)")
    args = ap.parse_args(argv)
    problems = []

    verdicts = [health(n, timeout=240)[0].get("verdict") for n in (SINGLE, RANK0, FOLLOWER)]
    if verdicts != ["ready"] * 3 or not wait(rank0_listed_healthy, 120, 1):
        print("the fleet is not ready (gpu-0, gpu-1, gpu-2: %s): run scripts/sandbox-fleet.sh" % verdicts)
        return 1
    print("== 1. who serves")
    urls = sorted(w["url"] for w in workers())
    print("   router workers: %s" % urls)
    print("   follower: /health %s, /v1/models %s; rank 0: /v1/models %s" % (
        local_status(FOLLOWER, "/health"), local_status(FOLLOWER, "/v1/models"), local_status(RANK0, "/v1/models")))
    if any(FOLLOWER in u for u in urls) or not any(RANK0 in u for u in urls) or not any(SINGLE in u for u in urls):
        problems.append("the router's workers are not gpu-0 and the group's rank 0 alone: %s" % urls)
    if local_status(FOLLOWER, "/v1/models") != "404" or local_status(FOLLOWER, "/health") != "200":
        problems.append("the follower does not serve the dummy health app alone")

    print("== 2. the group stops from rank 0")
    timeout_stop = sh(FOLLOWER, "systemctl", "show", "-p", "TimeoutStopUSec", "--value", UNIT)
    started = time.monotonic()
    sh(RANK0, "systemctl", "stop", UNIT)
    rank0_s = time.monotonic() - started
    gone = wait(lambda: active(FOLLOWER) in ("inactive", "failed"), 300)
    follower_s = time.monotonic() - started
    print("   rank 0 stopped in %.1f s; the follower's unit %s after %.1f s (its TimeoutStopSec %s)"
          % (rank0_s, active(FOLLOWER), follower_s, timeout_stop))
    if not gone:
        problems.append("the follower did not stop with rank 0 within 300 s")

    print("== 3. rank 0 without its follower")
    sh(RANK0, "systemctl", "reset-failed", UNIT, check=False)  # a start limit an earlier case left behind
    sh(RANK0, "systemctl", "start", UNIT)
    group = [{"name": FOLLOWER, "node_rank": 1, "address": FOLLOWER}]
    result, wall = health(RANK0, group=group, stall_timeout=20, timeout=90)
    print("   verdict %s in phase %s after %s s" % (result.get("verdict"), result.get("phase"), result.get("elapsed_s")))
    print("   reason: %s" % (result.get("reason") or result.get("msg", ""))[:500])
    print("   rendezvous: %s" % result.get("rendezvous"))
    if result.get("verdict") != "stalled" or result.get("phase") != "init_parallel" \
            or FOLLOWER not in (result.get("reason") or ""):
        problems.append("rank 0 alone was not reported stalled in init_parallel naming %s: %s" % (FOLLOWER, result))
    sh(FOLLOWER, "systemctl", "reset-failed", UNIT, check=False)
    sh(FOLLOWER, "systemctl", "start", UNIT)
    result, wall = health(RANK0, timeout=240)
    print("   follower started: rank 0 %s after %s s more" % (result.get("verdict"), result.get("elapsed_s")))
    if result.get("verdict") != "ready" or not wait(rank0_listed_healthy, 120, 1):
        problems.append("the group was not ready and back in the router once the follower started")

    print("== 4. a rank of the follower killed")
    pids = sh(FOLLOWER, "pgrep", "-f", "^sglang::scheduler_TP").split()
    victim = pids[-1]
    title = sh(FOLLOWER, "cat", "/proc/%s/cmdline" % victim).split("\0")[0]
    killed = time.monotonic()
    sh(FOLLOWER, "kill", "-9", victim)
    result, wall = health(FOLLOWER)
    since_kill = time.monotonic() - killed
    print("   killed %s (pid %s); verdict %s after %s s of the check (%.1f s from the kill, ansible's start included)"
          % (title, victim, result.get("verdict"), result.get("elapsed_s"), since_kill))
    print("   reason: %s" % (result.get("reason") or result.get("msg", ""))[:400])
    print("   follower unit %s, its /health %s" % (active(FOLLOWER), local_status(FOLLOWER, "/health")))
    rank = title.replace("sglang::scheduler_", "")
    if result.get("verdict") != "crashed" or ("gone: %s" % rank) not in (result.get("reason") or ""):
        problems.append("the follower's dead rank %s was not reported crashed by name: %s" % (rank, result))
    elif (result.get("elapsed_s") or 99) > 3:
        problems.append("the dead rank took %s s to report (target 3)" % result.get("elapsed_s"))
    if args.restore:
        verdicts = restart_group()
        print("   the group killed and started again: rank 0 %s, follower %s" % tuple(verdicts))
        if verdicts != ["ready", "ready"] or not wait(rank0_listed_healthy, 120, 1):
            problems.append("the group did not come back after its restart: %s" % verdicts)

    for p in problems:
        print("PROBLEM: " + p)
    print("== %s" % ("all expectations hold" if not problems else "%d problem(s)" % len(problems)))
    return 1 if problems and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
