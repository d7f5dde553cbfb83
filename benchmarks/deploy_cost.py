#!/usr/bin/env python3
"""What a no-op deploy costs against a first one, on one sandbox node (on-demand benchmark; not in CI).

    source scripts/env.sh && python benchmarks/deploy_cost.py [--keep-node] [--top 15] [--fleet]

1. builds the stand-ins and the node image as scripts/sandbox-deploy.sh does, then starts a fresh sandbox node
   (``tests/sandbox/playbooks/sandbox.yml -e sandbox_fresh=true``; none of it timed);
2. times ``ansible-playbook deploy.yml`` on it (the first deploy: CUDA toolkit, both builds, the shards, the unit);
3. times the same command again (the no-op: every task reports ok, ``changed=0``), with Ansible's
   ``ansible.posix.profile_tasks`` callback, and prints the no-op's most expensive tasks and its fact gathering;
4. prints the no-op's round trips per host (module runs, one command each over the connection with pipelining) and
   its fact gatherings (benchmarks/callback_plugins/round_trips.py), and PASS/FAIL for the target: the no-op takes
   at most 25 % of the first deploy;
5. with ``--fleet``: deploys the fleet sandbox (2 GPU nodes and the router; untimed), times its no-op deploy.yml and
   prints PASS/FAIL for: fleet no-op time / single-node no-op time <= 1.2 (the hosts run in parallel, so the time per
   node stays flat as the fleet grows).

The sandbox's connection (tests/sandbox/plugins/connection/podman.py) holds a persistent channel into the node (the
counterpart of ssh's ControlPersist): a command costs ~2 ms of transport, and a task costs what Ansible itself
costs on this machine (the ``local`` row of benchmarks/connection_cost.py). ``SANDBOX_PODMAN_PERSIST=0`` runs one
``podman exec`` per command instead, which costs about what Ansible's ssh connection costs per command here
(connection_cost.py's ``ssh`` row; ssh is slower still for template/copy). The counts of tasks and fact gatherings
hold for every connection. Removes the node at the end unless ``--keep-node``.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import time

import sandbox_prep

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RECAP = re.compile(r"^(\S+)\s+: ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)\s+skipped=(\d+)", re.M)
# profile_tasks lines: "<task name> ------ 1.23s"
PROFILE = re.compile(r"^(.+?) -{3,} (\d+\.\d+)s$", re.M)
# round_trips: module runs and fact gatherings per host of a run (benchmarks/callback_plugins/round_trips.py)
CALLBACKS = os.path.join(ROOT, "benchmarks", "callback_plugins")


def playbook(args, env=None):
    start = time.perf_counter()
    proc = subprocess.run(["ansible-playbook"] + args, cwd=ROOT, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit("ansible-playbook %s failed (rc %d):\n%s" % (" ".join(args), proc.returncode,
                                                                    proc.stdout[-3000:] + proc.stderr[-2000:]))
    return wall, proc.stdout


def fleet_noop(env):
    """(wall seconds of the fleet sandbox's no-op deploy.yml, its round trips per host): the fleet deployed first
    (scripts/sandbox-fleet.sh, untimed), then deploy.yml again on it; the fleet is removed after."""
    try:
        subprocess.run(["scripts/sandbox-fleet.sh"], cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
        wall, _out = playbook(["-i", "inventory/sandbox-fleet", "deploy.yml"], env=env)
        with open(env["ROUND_TRIPS_FILE"]) as fh:
            return wall, json.load(fh)
    finally:
        subprocess.run(["scripts/sandbox-fleet.sh", "--destroy"], cwd=ROOT, capture_output=True)


def recap(output):
    """{host: (ok, changed, skipped)} of the last PLAY RECAP."""
    return dict((m.group(1), (int(m.group(2)), int(m.group(3)), int(m.group(6)))) for m in RECAP.finditer(output))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keep-node", action="store_true", help="leave the sandbox node running at the end")
    ap.add_argument("--top", type=int, default=15, help="how many of the no-op's tasks to list")
    ap.add_argument("--target", type=float, default=0.25, help="no-op / first deploy allowed (default 0.25)")
    ap.add_argument("--fleet", action="store_true",
                    help="also deploy the fleet sandbox (2 GPU nodes and the router, scripts/sandbox-fleet.sh) and time "
                         "its no-op against the single node's (its GPU nodes run in parallel: the time per node stays "
                         "flat as the fleet grows)")
    ap.add_argument("--fleet-target", type=float, default=1.2, help="fleet no-op / single-node no-op allowed")
    opts = ap.parse_args(argv)
    sandbox_prep.prepare()
    try:
        playbook(["tests/sandbox/playbooks/sandbox.yml", "-e", "sandbox_fresh=true"])
        env = dict(os.environ, ANSIBLE_CALLBACKS_ENABLED="ansible.posix.profile_tasks,round_trips",
                   ANSIBLE_CALLBACK_PLUGINS=CALLBACKS, PROFILE_TASKS_TASK_OUTPUT_LIMIT="all",
                   ROUND_TRIPS_FILE=os.path.join(ROOT, ".cache", "deploy-cost-round-trips.json"))
        first, first_out = playbook(["deploy.yml"], env=env)
        noop, noop_out = playbook(["deploy.yml"], env=env)
        with open(env["ROUND_TRIPS_FILE"]) as fh:
            trips = json.load(fh)
    finally:
        if not opts.keep_node:
            subprocess.run(["ansible-playbook", "tests/sandbox/playbooks/sandbox.yml", "-e", "sandbox_action=destroy"],
                           cwd=ROOT,
                           capture_output=True)
    fleet = fleet_noop(env) if opts.fleet else None  # after the single node is gone: the machine's memory
    first_tasks = [(name.strip(), float(sec)) for name, sec in PROFILE.findall(first_out)]
    tasks = [(name.strip(), float(sec)) for name, sec in PROFILE.findall(noop_out)]
    gathering = [t for t in tasks if t[0].startswith("Gathering Facts")]
    persist = os.environ.get("SANDBOX_PODMAN_PERSIST", "")
    print("connection: %s" % ("one podman exec per command (SANDBOX_PODMAN_PERSIST=0)" if persist == "0"
                              else "the sandbox's persistent channel"))
    print("first deploy   %7.1f s   recap %s" % (first, recap(first_out)))
    print("no-op re-run   %7.1f s   recap %s" % (noop, recap(noop_out)))
    print("the first deploy's %d most expensive tasks:" % opts.top)
    for name, sec in sorted(first_tasks, key=lambda t: -t[1])[:opts.top]:
        print("  %6.2f s  %s" % (sec, name))
    print("no-op tasks timed %d, %.1f s in all; fact gathering %d x, %.1f s" % (
        len(tasks), sum(t[1] for t in tasks), len(gathering), sum(t[1] for t in gathering)))
    print("the no-op's %d most expensive tasks:" % opts.top)
    for name, sec in sorted(tasks, key=lambda t: -t[1])[:opts.top]:
        print("  %6.2f s  %s" % (sec, name))
    for host, count in sorted(trips.items()):
        print("no-op round trips to %s: %d module runs (one command each over the connection), %d fact gathering(s)"
              % (host, count["round_trips"], count["gatherings"]))
    if fleet is not None:
        wall, fleet_trips = fleet
        ratio_fleet = wall / noop
        print("fleet no-op (inventory/sandbox-fleet: %d hosts) %.1f s against one node's %.1f s: %.2f x" % (
            len(fleet_trips), wall, noop, ratio_fleet))
        for host, count in sorted(fleet_trips.items()):
            print("  %s: %d module runs, %d fact gathering(s)" % (host, count["round_trips"], count["gatherings"]))
        print("%s fleet no-op time per node / single-node no-op time <= %.1f: %.2f" % (
            "PASS" if ratio_fleet <= opts.fleet_target else "FAIL", opts.fleet_target, ratio_fleet))
    changed = sum(c for _, c, _ in recap(noop_out).values())
    ratio = noop / first
    ok = ratio <= opts.target and changed == 0
    print("%s no-op deploy.yml <= %d %% of the first: %.1f s / %.1f s = %.0f %%, changed=%d" % (
        "PASS" if ok else "FAIL", opts.target * 100, noop, first, ratio * 100, changed))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
