#!/usr/bin/env python3
"""Rolling redeploy of the fleet sandbox under load: failed requests, latency, time out of rotation.

    scripts/sandbox-fleet.sh                                   # once: 2 GPU nodes + the real sglang-router
    python benchmarks/rolling_redeploy.py [--clients 4] [--case both|release|crash|router-down ...] [--check]

Cases (each prints its figures; in the order router-down, release, crash whatever the order given):

router-down  the router is stopped: the play must fail before any node is touched (no restart, no release
         change on any node); the router is started again afterwards.
release  every node onto a new SGLang release (tests/sandbox/patches/0001-release-r2-note.patch) while N clients
         send chat completions (every 4th streamed) through the router; expected: the play succeeds, 0 failed requests.
crash    every node onto r2 and model revision sandbox-r2, but node 2's release also carries
         0002-crash-at-shard-40.patch (the server dies at shard 40 of 64 while loading): expected: node 1 on the new
         release and model; node 2 rolled back to its release and model and back in rotation; the play fails naming
         node 2 and the verdict; 0 failed requests.

The load generator runs here, against the router container's address on the podman network; it stops when the
playbook ends. A poller reads the router's GET /workers every 0.2 s: a worker is "out of rotation" while it is not
listed healthy. ``--check`` exits 1 when an expectation does not hold (scripts/test.sh uses it). The cases run one
after the other: on a fresh fleet "release" moves both nodes r1 -> r2; "crash" then restarts node 1 on r2 (nothing
changed) and gives node 2 r2 + the crash patch, which must be rolled back to r2. "crash" alone on a fresh fleet
moves node 1 r1 -> r2 and rolls node 2 back to r1 (scripts/test.sh runs router-down + crash).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PATCHES = os.path.join(ROOT, "tests", "sandbox", "patches")
R2 = os.path.join(PATCHES, "0001-release-r2-note.patch")
CRASH = os.path.join(PATCHES, "0002-crash-at-shard-40.patch")
NODES = ["sglang-fleet-gpu-0", "sglang-fleet-gpu-1"]


def _deployment_port():
    """deployment_port from its one place (roles/deployment/defaults/main.yml): the router's and each node's port."""
    import yaml

    with open(os.path.join(ROOT, "roles", "deployment", "defaults", "main.yml")) as fh:
        return int(yaml.safe_load(fh)["deployment_port"])


PORT = _deployment_port()
ROUTER = "sglang-fleet-router"


class Load:
    """``clients`` threads sending requests through the router until ``stop()``; bounded by ``max_s``."""

    def __init__(self, url, clients, max_s, model="Kimi-K2.5"):
        self.url, self.clients, self.max_s, self.model = url, clients, max_s, model
        self.results = []  # (start, latency_s, ok, error)
        self.lock = threading.Lock()
        self.stop_event = threading.Event()
        self.threads = []

    def _one(self, i, n):
        stream = n % 4 == 3
        # Kimi-K2.5 thinks unless the chat template is told not to (SGLang 0.5.23: the template's `thinking is defined
        # and thinking is false`); 16 tokens of thinking would leave no content to check.
        body = {"model": self.model, "max_tokens": 16, "stream": stream,
                "chat_template_kwargs": {"thinking": False},
                "messages": [{"role": "user", "content": "client %d request %d" % (i, n)}]}
        req = urllib.request.Request(self.url + "/v1/chat/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"}, method="POST")
        start = time.monotonic()
        try:
            with urllib.request.urlopen(req, timeout=120) as resp:
                raw = resp.read().decode("utf-8", "replace")
                if resp.status != 200:
                    return start, time.monotonic() - start, False, "HTTP %s" % resp.status
            if stream:
                ok = raw.rstrip().endswith("data: [DONE]") and '"finish_reason": "stop"' in raw.replace(
                    '"finish_reason":"stop"', '"finish_reason": "stop"')
                err = None if ok else "stream ended without finish_reason/[DONE]: %r" % raw[-200:]
            else:
                data = json.loads(raw)
                ok = bool(data.get("choices")) and data["choices"][0]["message"].get("content")
                err = None if ok else "no content: %r" % raw[:200]
            return start, time.monotonic() - start, bool(ok), err
        except urllib.error.HTTPError as exc:
            return start, time.monotonic() - start, False, "HTTP %s %s" % (exc.code, exc.read()[:200])
        except Exception as exc:  # noqa: BLE001 - every failure counts, whatever its kind
            return start, time.monotonic() - start, False, "%s: %s" % (type(exc).__name__, exc)

    def _client(self, i):
        n = 0
        deadline = time.monotonic() + self.max_s
        while not self.stop_event.is_set() and time.monotonic() < deadline:
            result = self._one(i, n)
            with self.lock:
                self.results.append(result)
            n += 1

    def start(self):
        self.threads = [threading.Thread(target=self._client, args=(i,), daemon=True) for i in range(self.clients)]
        for t in self.threads:
            t.start()

    def stop(self):
        self.stop_event.set()
        for t in self.threads:
            t.join(timeout=150)


class Rotation:
    """Polls GET /workers every ``interval`` s; per worker URL, the intervals it was not listed healthy."""

    def __init__(self, url, interval=0.2):
        self.url, self.interval = url, interval
        self.out_since, self.out_total, self.out_count, self.errors = {}, {}, {}, 0
        self.known = set()
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _healthy(self):
        with urllib.request.urlopen(self.url + "/workers", timeout=5) as resp:
            return {w["url"] for w in json.load(resp)["workers"] if w.get("is_healthy")}

    def _run(self):
        while not self.stop_event.is_set():
            now = time.monotonic()
            try:
                healthy = self._healthy()
            except OSError:
                self.errors += 1
                healthy = None
            if healthy is not None:
                self.known |= healthy
                for url in self.known:
                    if url not in healthy and url not in self.out_since:
                        self.out_since[url] = now
                        self.out_count[url] = self.out_count.get(url, 0) + 1
                    elif url in healthy and url in self.out_since:
                        self.out_total[url] = self.out_total.get(url, 0.0) + now - self.out_since.pop(url)
            self.stop_event.wait(self.interval)

    def start(self):
        self.known = self._healthy()
        self.thread.start()

    def stop(self):
        self.stop_event.set()
        self.thread.join(timeout=10)
        now = time.monotonic()
        for url, since in list(self.out_since.items()):
            self.out_total[url] = self.out_total.get(url, 0.0) + now - since
        return {url: round(self.out_total.get(url, 0.0), 1) for url in sorted(self.known)}


def podman(*args):
    return subprocess.run(["podman", *args], check=True, capture_output=True, text=True).stdout.strip()


def router_url():
    ip = podman("inspect", ROUTER, "--format", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}")
    return "http://%s:%d" % (ip, PORT)


def current_release(node):
    return podman("exec", node, "readlink", "/opt/sglang/current")


def current_model(node):
    return podman("exec", node, "readlink", "/srv/models/Kimi-K2.5/current")


def overlay(path, vars_by_host):
    """An inventory overlay giving each host its new release (patch series) and model revision; host vars in a
    later inventory source win over the fleet's group vars."""
    hosts = dict(vars_by_host)
    with open(path, "w") as fh:
        json.dump({"all": {"children": {"gpu_nodes": {"hosts": hosts}}}}, fh)


def ansible(args, log):
    cmd = ["ansible-playbook", "-i", os.path.join(ROOT, "inventory", "sandbox-fleet"), *args]
    start = time.monotonic()
    with open(log, "w") as fh:
        rc = subprocess.run(cmd, cwd=ROOT, stdout=fh, stderr=subprocess.STDOUT).returncode
    with open(log) as fh:
        return rc, time.monotonic() - start, fh.read()


def percentile(values, p):
    if not values:
        return float("nan")
    values = sorted(values)
    k = (len(values) - 1) * p / 100.0
    lo, hi = int(k), min(int(k) + 1, len(values) - 1)
    return values[lo] + (values[hi] - values[lo]) * (k - lo)


def run_case(name, vars_by_host, args, workdir):
    inv = os.path.join(workdir, "%s-overlay.json" % name)
    overlay(inv, vars_by_host)
    url = args.router_url or router_url()
    before = {n: current_release(n) for n in NODES}
    models_before = {n: current_model(n) for n in NODES}
    load, rotation = Load(url, args.clients, args.max_s), Rotation(url)
    rotation.start()
    load.start()
    rc, wall, out = ansible(["-i", inv, "playbooks/rolling_redeploy.yml"], os.path.join(workdir, name + ".log"))
    time.sleep(2)  # requests right after the last node came back count too
    load.stop()
    out_of_rotation = rotation.stop()
    after = {n: current_release(n) for n in NODES}
    models_after = {n: current_model(n) for n in NODES}
    lat = [r[1] for r in load.results if r[2]]
    failed = [r for r in load.results if not r[2]]
    figures = {
        "case": name, "playbook_rc": rc, "playbook_s": round(wall, 1), "clients": args.clients,
        "requests": len(load.results), "failed": len(failed),
        "p50_ms": round(percentile(lat, 50) * 1000, 1), "p99_ms": round(percentile(lat, 99) * 1000, 1),
        "max_ms": round(max(lat) * 1000, 1) if lat else None,
        "out_of_rotation_s": out_of_rotation, "router_poll_errors": rotation.errors,
        "release_before": {n: os.path.basename(v) for n, v in before.items()},
        "release_after": {n: os.path.basename(v) for n, v in after.items()},
        "model_before": {n: os.path.basename(v) for n, v in models_before.items()},
        "model_after": {n: os.path.basename(v) for n, v in models_after.items()},
        "failures_sample": [r[3] for r in failed[:5]],
        "log": os.path.join(workdir, name + ".log"),
    }
    return figures, out


def invocation(node):
    return podman("exec", node, "systemctl", "show", "--property=InvocationID", "--value", "sglang-kimi.service")


def router_down_case(workdir):
    """Stop the router, run the rollout: it must fail at the router check and leave every node as it was."""
    before = {n: (current_release(n), invocation(n)) for n in NODES}
    podman("exec", ROUTER, "systemctl", "stop", "sglang-router.service")
    try:
        rc, wall, out = ansible(["playbooks/rolling_redeploy.yml"], os.path.join(workdir, "router-down.log"))
    finally:
        podman("exec", ROUTER, "systemctl", "start", "sglang-router.service")
    after = {n: (current_release(n), invocation(n)) for n in NODES}
    message = next((line.strip() for line in out.splitlines() if "does not answer GET /workers" in line), "")
    print("== router-down: playbook rc=%s in %.0f s" % (rc, wall))
    print("   play's message: %s" % (message[:300] or "(none)"))
    print("   nodes untouched (release and service instance): %s" % (before == after))
    problems = []
    if rc == 0 or "no GPU node was touched" not in message:
        problems.append("router-down: the play did not stop at the router check (rc %s)" % rc)
    if before != after:
        problems.append("router-down: a node changed although the router was down: %s -> %s" % (before, after))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # the router is back before the next case starts
        try:
            with urllib.request.urlopen(router_url() + "/readiness", timeout=2) as resp:
                if resp.status == 200:
                    break
        except OSError:
            time.sleep(0.5)
    return problems


def print_figures(f):
    print("== %s: playbook rc=%s in %.0f s; %d clients" % (f["case"], f["playbook_rc"], f["playbook_s"], f["clients"]))
    print("   requests %d, failed %d, latency p50 %.0f ms, p99 %.0f ms, max %s ms"
          % (f["requests"], f["failed"], f["p50_ms"], f["p99_ms"], f["max_ms"]))
    for url, secs in f["out_of_rotation_s"].items():
        print("   out of rotation: %-36s %6.1f s" % (url, secs))
    for n in NODES:
        print("   %s: release %s -> %s, model %s -> %s" % (n, f["release_before"][n], f["release_after"][n],
                                                       f["model_before"][n], f["model_after"][n]))
    if f["failures_sample"]:
        print("   failures (first 5): %s" % f["failures_sample"])
    print("   playbook log: %s" % f["log"])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--clients", type=int, default=4, help="concurrent clients through the router")
    ap.add_argument("--case", choices=["both", "release", "crash", "router-down"], default=None,
                    help="both = release then crash; --case may be given more than once", action="append")
    ap.add_argument("--max-s", type=float, default=1200, help="upper bound on the load's length per case (s)")
    ap.add_argument("--router-url", default="", help="default: the router container's address")
    ap.add_argument("--workdir", default=os.path.join(ROOT, ".cache", "rolling"),
                    help="playbook logs, inventory overlays and figures.json (default .cache/rolling, overwritten)")
    ap.add_argument("--check", action="store_true", help="exit 1 when an expectation does not hold")
    args = ap.parse_args(argv)
    cases = set(args.case or ["both"])
    if "both" in cases:
        cases |= {"release", "crash"}
    workdir = args.workdir
    os.makedirs(workdir, exist_ok=True)
    problems, results = [], []

    if "router-down" in cases:
        problems += router_down_case(workdir)

    if "release" in cases:
        f, out = run_case("release", {n: {"sglang_build_patches": [R2]} for n in NODES}, args, workdir)
        results.append(f)
        print_figures(f)
        if f["playbook_rc"] != 0:
            problems.append("release: the rolling redeploy failed (rc %s), see %s" % (f["playbook_rc"], f["log"]))
        if f["failed"]:
            problems.append("release: %d failed requests" % f["failed"])
        if any(f["release_after"][n] == f["release_before"][n] for n in NODES):
            problems.append("release: not every node is on a new release: %s" % f["release_after"])

    if "crash" in cases:
        model = {"model_stage_revision": "sandbox-r2"}
        f, out = run_case("crash", {NODES[0]: {"sglang_build_patches": [R2], **model},
                                    NODES[1]: {"sglang_build_patches": [R2, CRASH], **model}}, args, workdir)
        results.append(f)
        print_figures(f)
        stopped = "Rolling redeploy stopped at %s" % NODES[1]
        message = next((line.strip() for line in out.splitlines() if stopped in line), "")
        print("   play's message: %s" % (message[:400] or "(none)"))
        if f["playbook_rc"] == 0:
            problems.append("crash: the play succeeded although node 2's release crashes")
        if stopped not in out or "crashed" not in message:
            problems.append("crash: the play's failure does not name %s and the verdict crashed" % NODES[1])
        if "release" not in cases and f["release_after"][NODES[0]] == f["release_before"][NODES[0]] \
                and f["model_after"][NODES[0]] == f["model_before"][NODES[0]]:
            problems.append("crash: %s moved to neither a new release nor a new model" % NODES[0])
        if f["release_after"][NODES[1]] != f["release_before"][NODES[1]]:
            problems.append("crash: %s was not rolled back (%s)" % (NODES[1], f["release_after"][NODES[1]]))
        if f["model_after"][NODES[1]] != f["model_before"][NODES[1]]:
            problems.append("crash: %s's model was not rolled back (%s)" % (NODES[1], f["model_after"][NODES[1]]))
        if f["model_after"][NODES[0]] != "sandbox-r2":
            problems.append("crash: %s is not on model revision sandbox-r2 (%s)" % (NODES[0], f["model_after"][NODES[0]]))
        if f["out_of_rotation_s"] and any(url.endswith("%s:%d" % (NODES[1], PORT)) and secs == 0
                                          for url, secs in f["out_of_rotation_s"].items()):
            problems.append("crash: %s never left rotation" % NODES[1])
        try:
            with urllib.request.urlopen((args.router_url or router_url()) + "/workers", timeout=5) as resp:
                healthy = {w["url"] for w in json.load(resp)["workers"] if w.get("is_healthy")}
        except OSError as exc:
            healthy = set()
            problems.append("crash: the router does not answer after the rollout (%s)" % exc)
        if not any(u.endswith("%s:%d" % (NODES[1], PORT)) for u in healthy):
            problems.append("crash: %s is not back in rotation (router lists %s)" % (NODES[1], sorted(healthy)))
        if f["failed"]:
            problems.append("crash: %d failed requests" % f["failed"])

    with open(os.path.join(workdir, "figures.json"), "w") as fh:
        json.dump(results, fh, indent=1)
    print("figures: %s" % os.path.join(workdir, "figures.json"))
    for p in problems:
        print("FAIL: " + p)
    return 1 if (problems and args.check) else 0


if __name__ == "__main__":
    sys.exit(main())
