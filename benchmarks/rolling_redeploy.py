#!/usr/bin/env python3
"""Rolling redeploy of the fleet sandbox under load: failed requests, latency, time out of rotation.

    scripts/sandbox-fleet.sh                                   # once: 2 GPU nodes + the real sglang-router
    python benchmarks/rolling_redeploy.py [--clients 4]
        [--case auth|router-down|refusals|release|crash|rollback|degenerate|gate|canary|rotate|restart|elastic ...]
                                          [--rest-s 20] [--max-rest-s 15] [--check]

Cases (each prints its figures; run in the order auth, router-down, refusals, release, crash, rollback, degenerate,
gate, canary, rotate, restart, elastic whatever the order given; default: all of them; "both" = release + crash). The
rollout's performance gate runs in the gate case alone: the others measure a window out of rotation as drain +
restart-to-ready + the rest, and the gate's sweep would add to it (-e rolling_redeploy_benchmark_gate=false there);
the canary soak runs in the gate and canary cases alone (-e generation_canary_soak_s=0 elsewhere):

auth     the router's and node 1's public ports: 401 without the key or with a wrong one, 200 with it; /health from
         the controller (no probe source) 401; the key nowhere on the router host but the gateway's keys file. Then
         client errors: 50 prompts past the context through the router get SGLang's 400, and 200 valid requests after
         them are all 200 (the router's breaker would have made them 503).
router-down  the router is stopped: the play must fail before any node is touched (no restart, no release
         change on any node); the router is started again afterwards.
refusals a bad SGLang option on node 2 fails the play in the fleet preflight; node 2's server SIGSTOPped (the router
         lists it unhealthy) makes the capacity guard refuse to take node 1 out; a lock another rollout holds refuses
         the run. In each: no node leaves rotation, no release, model or service instance changes.
release  every node onto a new SGLang release (tests/sandbox/patches/0001-release-r2-note.patch) under load;
         expected: the play succeeds, 0 failed requests, each node out of rotation no longer than its drain plus
         restart-to-ready plus --max-rest-s, no build or staging write while a node is out of rotation.
crash    every node onto r2 and model revision sandbox-r2, but node 2's release also carries
         0002-crash-at-shard-40.patch (the server dies at shard 40 of 64 while loading): expected: node 1 on the new
         release and model (within the same limits as release); node 2 rolled back to its previous generation
         (release and model) and back in rotation; the play fails naming node 2 and the verdict; 0 failed requests.
rollback playbooks/rollback.yml -e rollback_nodes=<node 1> under load: node 1's previous generation (after crash: the release and
         model it had before crash) comes back; node 2 is not touched; 0 failed requests.
degenerate  node 1 onto a release that loads, answers /health 200 and then writes only 'foss'
         (0003-degenerate-moe-output.patch; sgl-project/sglang#23264): its smoke fails on the repetition, so it is
         rolled back to the release it had and back in rotation; the play fails naming the node, "unhealthy answers"
         and the repetition; node 2 is not switched; 0 failed requests.
gate     the performance gate on node 1 (node 2 has nothing to switch in each): playbooks/benchmark.yml records the
         gate's figures of its live generation (idle fleet); a forced rollout of its own release under load passes
         against them, then passes the canary soak, judged; then a release 30 % slower (0001 +
         0004-slower-release.patch) under load: the gate fails naming the drop of output tokens/s, node 1 is rolled
         back to its release and back in rotation, the play fails, node 2 untouched, 0 failed requests.
canary   node 1 onto a release that answers one chat in twenty with 500 once ready (0001 +
         0005-errors-after-ready.patch): smoke passes, it rejoins, the canary soak sees its error rate in the router's
         per-worker outcomes and it is rolled back (drained first); the play fails naming the figures; node 2 is not
         switched; no request lost to the switch or the rollback (the router retries each 500: clients see none).
rotate   the API key rotated by re-runs of deploy.yml under load (rotate_case): a new key first while clients send
         the old one, then the old one dropped while they send the new one, then the inventory's keys back; 0 failed
         requests, no SGLang, router or nginx restart, each key 200 or 401 as the list says.
restart  a plain deploy.yml with a changed SGLang option on node 1 under load (issue 59): node 1 leaves rotation and
         drains before its restart, rejoins once ready and smoked; 0 failed requests, node 2's group untouched.
elastic  node 1 leaves (playbooks/remove_node.yml) and joins again (deploy.yml --limit node 1) under load: 0 failed
         requests, the router's PID unchanged, its worker list as expected after each step, node 2's group not
         restarted, no 0.2 s poll without a healthy worker; then (load off) the router restarted lists both again.

The load generator runs here, against the router container's address on the podman network: short chat completions
(every 4th streamed), long streaming thinking requests (every 8th: up to 1024 reasoning tokens at the fleet's
50 tokens/s, ~20 s) and long prompts (client 0's every 5th: a prefill that holds the node's scheduler 3 s past the
fleet's /health bound, so /health answers 503 on a node that is only busy, sgl-project/sglang#22511; a switching case
requires such 503s in a node's journal and no node out of rotation but for its own switch), for ``--rest-s`` before the playbook starts (latency at rest) and until it ends. A poller reads the
router's GET /workers every 0.2 s: a worker is "out of rotation" while it is not listed healthy. Per node it prints the
time out of rotation, the drain (what the play's drain waited), restart-to-ready (the unit's "Stopping" to SGLang's
ready line, from the node's journal) and what is left (deregistration, the switch, re-registration); p99 at rest,
while the nodes prepare and while they switch; and whether a build or staging log was written inside a node's window
out of rotation. ``--check`` exits 1 when an expectation does not hold (scripts/test.sh uses it). On a fresh fleet
"release" moves both nodes r1 -> r2; "crash" alone moves node 1 to r2 + sandbox-r2 and rolls node 2 back to r1 and
sandbox-r1; "rollback" then brings node 1 back to r1 and sandbox-r1 (scripts/test.sh runs auth, router-down,
refusals, crash, rollback, rotate).
"""

import argparse
import hashlib
import json
import os
import re
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
DEGENERATE = os.path.join(PATCHES, "0003-degenerate-moe-output.patch")
SLOWER = os.path.join(PATCHES, "0004-slower-release.patch")
ERRORS = os.path.join(PATCHES, "0005-errors-after-ready.patch")
# The router's workers: node 1 serves alone, node 2 is rank 0 of a two-node group (inventory/sandbox-fleet: kimi_pair)
NODES = ["sglang-fleet-gpu-0", "sglang-fleet-gpu-1"]
GROUPS = {"sglang-fleet-gpu-1": ["sglang-fleet-gpu-2"]}
ALL_NODES = NODES + [f for followers in GROUPS.values() for f in followers]


def _yaml(*path):
    import yaml

    with open(os.path.join(ROOT, *path)) as fh:
        return yaml.safe_load(fh)


# Read from their one place: roles/deployment (the router's and each node's port), roles/rollout (the lock) and the fleet's
# group vars (the SGLang options every fleet node has; a host overlay replaces the variable, so it must carry them).
DEPLOYMENT = _yaml("roles", "deployment", "defaults", "main", "main.yml")
PORT = int(DEPLOYMENT["deployment_port"])
LOCK = _yaml("roles", "rollout", "defaults", "main.yml")["rollout_lock_path"]
FLEET = _yaml("inventory", "sandbox-fleet", "group_vars", "gpu_nodes", "fleet.yml")
FLEET_OPTIONS = FLEET.get("sglang_service_extra_options") or {}
# A long prompt: its prefill holds a node's scheduler 3 s past the fleet's /health bound, so /health answers 503 on a
# node that is only busy (sgl-project/sglang#22511); the sim counts a token per 4 characters of the messages' JSON.
HEALTH_BOUND_S = float(_yaml("inventory", "sandbox-fleet", "group_vars", "all", "main.yml")[
    "deployment_health_check_timeout_s"])
PREFILL_RATE = float(FLEET["sglang_service_environment"]["SGLANG_SIM_PREFILL_TOKENS_PER_S"])
LONG_PREFILL_CHARS = int(4 * PREFILL_RATE * (HEALTH_BOUND_S + 3))
sys.path.insert(0, os.path.join(ROOT, "tests", "sandbox"))
import compiler_record  # noqa: E402 - the harness's module, above
from sandbox_keys import auth_header, sandbox_api_keys, write_vault_vars  # noqa: E402 - likewise


def open_url(url, timeout):
    """GET ``url`` through the router's gateway, with the deployment's own key (the router listens behind it)."""
    return urllib.request.urlopen(urllib.request.Request(url, headers=auth_header()), timeout=timeout)


ROUTER = "sglang-fleet-router"


def healthy_workers(url=None):
    """The worker URLs the router at ``url`` (default: the router container's) lists healthy, a set."""
    with open_url((url or router_url()) + "/workers", timeout=5) as resp:
        return {w["url"] for w in json.load(resp)["workers"] if w.get("is_healthy")}


class Load:
    """``clients`` threads sending requests through the router until ``stop()``; bounded by ``max_s``; each request
    carries ``key`` (default: the deployment's own)."""

    def __init__(self, url, clients, max_s, model="Kimi-K2.5", key=None):
        self.url, self.clients, self.max_s, self.model, self.key = url, clients, max_s, model, key
        self.run_id = time.time()
        self.results = []  # (start, latency_s, ok, error)
        self.wall_of = {}  # monotonic start -> wall-clock start (to place a request in the rest/prepare/switch phase)
        self.lock = threading.Lock()
        self.stop_event = threading.Event()
        self.threads = []

    def _one(self, i, n):
        long = n % 8 == 7  # a thinking request: 600 reasoning tokens streamed, then its answer
        stream = long or n % 4 == 3
        # client 0's every 5th: a prompt whose prefill holds the node past its /health bound. Each conversation opens
        # with its own id, as many users' do: the router's cache_aware policy sends a prompt that matches no worker's
        # cached prefixes to the worker with the least cached, so a node back in rotation gets its share at once (with
        # one shared opening it would get almost nothing until the load is lopsided, and a canary could not be judged)
        opening = hashlib.sha1(("%s %d %d" % (self.run_id, i, n)).encode()).hexdigest()[:16]
        prompt = ("%s client %d request %d " % (opening, i, n)) + ("x" * LONG_PREFILL_CHARS if i == 0 and n % 5 == 4
                                                                     else "")
        body = {"model": self.model, "max_tokens": 1024 if long else 16, "stream": stream,
                "messages": [{"role": "user", "content": prompt}]}
        if not long:
            body["chat_template_kwargs"] = {"thinking": False}
        req = urllib.request.Request(self.url + "/v1/chat/completions", data=json.dumps(body).encode(),
                                     headers=dict(auth_header(self.key), **{"Content-Type": "application/json"}),
                                     method="POST")
        start = time.monotonic()
        self.wall_of[start] = time.time()
        try:
            with urllib.request.urlopen(req, timeout=300) as resp:
                raw = resp.read().decode("utf-8", "replace")
                if resp.status != 200:
                    return start, time.monotonic() - start, False, "HTTP %s" % resp.status
            if stream:
                flat = raw.replace('"finish_reason":"', '"finish_reason": "')
                ok = raw.rstrip().endswith("data: [DONE]") and ('"finish_reason": "stop"' in flat
                                                                or (long and '"finish_reason": "length"' in flat))
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
        self.windows = []  # (url, wall-clock start, wall-clock end) of each time out of rotation
        self.wall_since = {}
        self.known = set()
        self.seen = set()  # every worker listed healthy at a poll since the caller last emptied it
        self.fewest, self.polls = None, 0  # the fewest workers listed healthy at any poll, and how many polls
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _healthy(self):
        return healthy_workers(self.url)

    def _run(self):
        while not self.stop_event.is_set():
            now = time.monotonic()
            try:
                healthy = self._healthy()
            except OSError:
                self.errors += 1
                healthy = None
            if healthy is not None:
                self.fewest = len(healthy) if self.fewest is None else min(self.fewest, len(healthy))
                self.polls += 1
                self.known |= healthy
                self.seen |= healthy
                for url in self.known:
                    if url not in healthy and url not in self.out_since:
                        self.out_since[url] = now
                        self.wall_since[url] = time.time()
                        self.out_count[url] = self.out_count.get(url, 0) + 1
                    elif url in healthy and url in self.out_since:
                        self.out_total[url] = self.out_total.get(url, 0.0) + now - self.out_since.pop(url)
                        self.windows.append((url, self.wall_since.pop(url), time.time()))
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
            self.windows.append((url, self.wall_since.get(url, time.time()), time.time()))
        return {url: round(self.out_total.get(url, 0.0), 1) for url in sorted(self.known)}


def podman(*args):
    return subprocess.run(["podman", *args], check=True, capture_output=True, text=True).stdout.strip()


class Compilers:
    """Every CUDA compiler process each GPU node starts during a case, recorded as it starts (tests/sandbox/
    compiler_record.py: a wrapper on each compiler of the node's toolkit, with its nice and what started it), to check
    that none ran on a node in rotation at the server's priority, nor on a node out of rotation (the window holds drain
    and restart). Before the case each node's record is proven live: the harness's own ``nice -n 7 nvcc --version``
    must come back from it."""

    SELF_TEST_NICE = 7

    def start(self):
        self.self_test = {}
        for node in ALL_NODES:
            # the install prints each path it wrapped: the node's nvcc is among them, or there is nothing to record
            nvcc = [p for p in podman("exec", node, "sh", "-c", compiler_record.install_script()).split()
                    if p.endswith("/bin/nvcc")]
            if not nvcc:
                raise SystemExit("FAIL: %s has no nvcc under /usr/local/cuda*/bin to record" % node)
            podman("exec", node, "nice", "-n", str(self.SELF_TEST_NICE), nvcc[0], "--version")
            mine = compiler_record.parse(podman("exec", node, "cat", compiler_record.LOG))
            if [(p["name"], p["nice"], p["rc"]) for p in mine] != [("nvcc", self.SELF_TEST_NICE, 0)]:
                raise SystemExit("FAIL: %s's compiler record did not record the harness's own nvcc at nice %d: %s"
                                 % (node, self.SELF_TEST_NICE, mine))
            self.self_test[node] = mine[0]["pid"]

    def stop(self):
        """{node: [compiler process, as compiler_record.parse reads them]}, the harness's own run left out; the real
        binaries are back in place."""
        seen = {}
        for node in ALL_NODES:
            text = podman("exec", node, "cat", compiler_record.LOG)
            podman("exec", node, "sh", "-c", compiler_record.restore_script())
            seen[node] = [p for p in compiler_record.parse(text) if p["pid"] != self.self_test.get(node)]
        return seen


def compiler_figures(procs, windows):
    """Per GPU node: the compiler processes it started, and those at the server's priority (nice 0) or while the node
    (for a group's follower: its rank 0) was out of rotation."""
    until = time.time()
    rank0 = {f: n for n, followers in GROUPS.items() for f in followers}
    return {node: compiler_record.figures(rows, [(w["start"], w["end"]) for w in windows
                                                 if w["node"] == rank0.get(node, node)], until)
            for node, rows in procs.items()}


def router_url():
    ip = podman("inspect", ROUTER, "--format", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}")
    return "http://%s:%d" % (ip, PORT)


def node_url(node):
    """A GPU node's public entry (its gateway) from the controller, which is no probe source."""
    ip = podman("inspect", node, "--format", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}")
    return "http://%s:%d" % (ip, PORT)


def _status(url, headers=None, body=None):
    req = urllib.request.Request(url, data=body, headers=dict(headers or {}, **{"Content-Type": "application/json"}),
                                 method="POST" if body else "GET")
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            resp.read()
            return resp.status
    except urllib.error.HTTPError as exc:
        return exc.code


def short_chat(content):
    """The body of a short chat completion (8 tokens, no thinking) saying ``content``."""
    return json.dumps({"model": "Kimi-K2.5", "max_tokens": 8, "chat_template_kwargs": {"thinking": False},
                       "messages": [{"role": "user", "content": content}]}).encode()


def auth_case():
    """Issue 19 on the fleet: the router's and each node's public port take a request only with the key (the
    controller is no probe source, so even /health needs it there), and the key is nowhere on the router host but
    its gateway's 0600 keys file."""
    problems = []
    key = auth_header()["Authorization"].split(" ", 1)[1]
    chat = short_chat("auth")
    wrong = {"Authorization": "Bearer " + "x" * len(key)}
    for what, url, headers, body, want in [
            ("router chat without a key", router_url() + "/v1/chat/completions", None, chat, 401),
            ("router chat with a wrong key", router_url() + "/v1/chat/completions", wrong, chat, 401),
            ("router /workers without a key", router_url() + "/workers", None, None, 401),
            ("router chat with the key", router_url() + "/v1/chat/completions", auth_header(), chat, 200),
            ("node /v1/models without a key", node_url(NODES[0]) + "/v1/models", None, None, 401),
            ("node /health from a host that is no probe source", node_url(NODES[0]) + "/health", None, None, 401),
            ("node chat with the key", node_url(NODES[0]) + "/v1/chat/completions", auth_header(), chat, 200)]:
        got = _status(url, headers, body)
        print("   %-50s %s" % (what, got))
        if got != want:
            problems.append("auth: %s answered %s, not %s" % (what, got, want))
    return problems + key_on_router_host("auth", key)


def client_errors_case():
    """Issue 38 on the fleet: 50 prompts longer than the model's context through the router's public port get
    SGLang's own 400, and the 200 valid requests after them are all served (sglang-router 0.3.2's breaker, on by
    default, counts every 400 as its worker's failure: ten would make everything 503 no_available_workers for a
    minute; roles/sglang_router disables it)."""
    from concurrent.futures import ThreadPoolExecutor

    # the staged checkpoint's context length, as the simulator reads it (configs/model_config.py: text_config's)
    with open(os.path.join(ROOT, ".sandbox", "artifacts", "models", "Kimi-K2.5", "config.json")) as fh:
        config = json.load(fh)
    context = int(config.get("max_position_embeddings") or (config.get("text_config") or {}).get(
        "max_position_embeddings") or 262144)
    over = json.dumps({"model": "Kimi-K2.5", "max_tokens": 8, "chat_template_kwargs": {"thinking": False},
                       "messages": [{"role": "user", "content": "x" * 4 * (context + 64)}]}).encode()
    url, started = router_url() + "/v1/chat/completions", time.monotonic()
    with ThreadPoolExecutor(8) as pool:
        refused = list(pool.map(lambda _: _status(url, auth_header(), over), range(50)))
        valid = list(pool.map(lambda i: _status(url, auth_header(), short_chat("valid %d" % i)), range(200)))
    print("   50 over-length: %s; then 200 valid: %s (%.0f s)" % (
        dict((s, refused.count(s)) for s in set(refused)), dict((s, valid.count(s)) for s in set(valid)),
        time.monotonic() - started))
    problems = []
    if set(refused) != {400}:
        problems.append("client errors: the over-length requests answered %s, not 400 each" % sorted(set(refused)))
    if set(valid) != {200}:
        problems.append("client errors: after 50 client errors the valid requests answered %s, not 200 each"
                        % dict((s, valid.count(s)) for s in set(valid)))
    return problems


def key_run(key):
    """The key's longest alphanumeric run: what survives the keys file's escaping."""
    return max(re.findall(r"[A-Za-z0-9]+", key), key=len)


def key_on_router_host(case, key, expected_files=("/etc/nginx/sglang-gateway-keys.conf",)):
    """Where ``key`` is on the router host beyond ``expected_files``: files, the journal, command lines, systemctl
    show (each read there and searched here: a command line that named the key would find itself)."""
    problems, run = [], key_run(key)
    files = podman("exec", ROUTER, "sh", "-c", "grep -rlF %s /etc /var/log /run /var/lib /root /tmp 2>/dev/null; "
                   "true" % run).split()
    if files != list(expected_files):
        problems.append("%s: the key is in files on the router host other than %s: %s" % (case, expected_files, files))
    for where, command in (("the journal", "journalctl --no-pager -o cat"),
                           ("process command lines", "cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' '"),
                           ("systemctl show", "systemctl show '*'")):
        if run in podman("exec", ROUTER, "sh", "-c", command):
            problems.append("%s: the key is in %s on the router host" % (case, where))
    return problems


def main_pids():
    """Per host and unit, (MainPID, InvocationID): SGLang on each node, the router, and nginx everywhere (a reload
    keeps nginx's master; a restart would not)."""
    units = [(n, u) for n in NODES for u in (UNIT, "nginx.service")] + \
        [(ROUTER, u) for u in ("sglang-router.service", "nginx.service")]
    return {"%s %s" % hu: podman("exec", hu[0], "systemctl", "show", "--property=MainPID,InvocationID", "--value", hu[1])
            for hu in units}


def answers(key):
    """What the router's and node 1's public entries answer a short chat carrying ``key``."""
    chat = short_chat("rotation")
    return {where: _status(url + "/v1/chat/completions", auth_header(key), chat)
            for where, url in (("router", router_url()), ("node", node_url(NODES[0])))}


def rotate_case(args, workdir):
    """Issue 19's rotation, by re-runs of deploy.yml under load: (1) a new key first, the old one kept, while every
    client sends the old key; (2) the old key dropped while the clients send the new one; (3) the inventory's own
    keys back (no load: the rotated key stops working). Expected: 0 failed requests, both keys answered 200 after
    (1), the old one 401 after (2), the rotated one 401 after (3); no SGLang, router or nginx restart (nginx reloads,
    its in-flight requests finish); the rotated key in no playbook output and nowhere on the router host but the
    gateway's keys file. The rotated key lives only in vault-encrypted extra-vars files (0600, removed after)."""
    import secrets

    problems = []
    old = list(sandbox_api_keys())
    new = {"name": "rotated", "key": secrets.token_urlsafe(36)}
    url = args.router_url or router_url()
    pids = main_pids()
    # deploy.yml re-run on serving nodes: every compiler run of the product there (the toolkit's nvcc --version, the
    # service's toolchain check) yields to the server (deployment_work_nice), as in the rolling redeploy's prepare
    compilers = Compilers()
    compilers.start()
    phases = [("rotate-1", [new] + old, old[0]["key"], ["deploy.yml"],
               {"router": 200, "node": 200}, {"router": 200, "node": 200}),
              ("rotate-2", [new], new["key"], ["deploy.yml", "--tags", "sglang_service,sglang_router"],
               {"router": 401, "node": 401}, {"router": 200, "node": 200}),
              ("rotate-3", None, None, ["deploy.yml", "--tags", "sglang_service,sglang_router"],
               {"router": 200, "node": 200}, {"router": 401, "node": 401})]
    try:
        for name, keys, load_key, playbook, want_old, want_new in phases:
            extra = []
            if keys is not None:
                vars_file = os.path.join(workdir, name + "-keys.vault.yml")
                write_vault_vars(vars_file, {"deployment_api_keys": keys})
                extra = ["-e", "@" + vars_file]
            load = Load(url, args.clients, args.max_s, key=load_key) if load_key else None
            if load:
                load.start()
                time.sleep(5)  # long streams in flight when nginx reloads
            log = os.path.join(workdir, name + ".log")
            rc, wall, out = ansible([playbook[0], *extra, *playbook[1:]], log)
            if load:
                time.sleep(2)
                load.stop()
            got_old, got_new = answers(old[0]["key"]), answers(new["key"])
            failed = [r for r in load.results if not r[2]] if load else []
            longs = sum(1 for r in load.results if r[1] > 5) if load else 0
            print("== %s: %s rc=%s in %.0f s; %s; old key %s, rotated key %s" % (
                name, " ".join(playbook), rc, wall,
                "%d requests (%d long streaming), %d failed" % (len(load.results), longs, len(failed)) if load
                else "no load", got_old, got_new))
            if rc != 0:
                problems.append("%s: the re-run failed (rc %s), see %s" % (name, rc, log))
            if failed:
                problems.append("%s: %d failed requests, e.g. %s" % (name, len(failed), [r[3] for r in failed[:3]]))
            if load and not longs:
                problems.append("%s: the load had no long streaming request" % name)
            if (got_old, got_new) != (want_old, want_new):
                problems.append("%s: old key %s, rotated key %s; expected %s, %s" % (
                    name, got_old, got_new, want_old, want_new))
            if key_run(new["key"]) in out:
                problems.append("%s: the rotated key is in the playbook's output (%s)" % (name, log))
            if name == "rotate-2":
                problems += key_on_router_host(name, new["key"])
    finally:
        for name, *_ in phases:
            path = os.path.join(workdir, name + "-keys.vault.yml")
            if os.path.exists(path):
                os.unlink(path)
    for node, judged in sorted(compiler_figures(compilers.stop(), []).items()):
        print("   %s: %d CUDA compiler process(es) at nice %s during the re-runs; at the server's priority: %s"
              % (node, judged["processes"], judged["nice"] or "-", judged["at_server_priority"] or "none"))
        if judged["at_server_priority"]:
            problems.append("rotate: deploy.yml ran the CUDA compiler at the server's priority on the serving node %s: %s"
                            % (node, judged["at_server_priority"]))
        if not judged["processes"]:
            problems.append("rotate: deploy.yml ran no CUDA compiler on %s (its toolkit check runs nvcc --version): "
                            "the record saw nothing" % node)
    after = main_pids()
    moved = sorted(k for k in pids if pids[k] != after[k])
    print("   restarted during the rotation: %s" % (", ".join(moved) or "nothing"))
    if moved:
        problems.append("rotate: restarted although only keys changed: %s" % moved)
    return problems


def current_release(node):
    return podman("exec", node, "readlink", "/opt/sglang/current")


def current_model(node):
    return podman("exec", node, "readlink", "/srv/models/Kimi-K2.5/current")


def overlay(path, vars_by_host):
    """An inventory overlay giving each host its new release (patch series) and model revision; host vars in a
    later inventory source win over the fleet's group vars. Node 2 is rank 0 of the fleet's two-node group: what it is
    given, the other node of the group is given too (one release and model for the group; they switch together)."""
    hosts = dict(vars_by_host)
    for node, others in GROUPS.items():
        if node in hosts:
            hosts.update({other: hosts[node] for other in others})
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


UNIT = "sglang-kimi.service"
WRITES = ("/opt/sglang/releases/*/build.log", "/opt/sglang/build/*/build.log", "/srv/models/Kimi-K2.5/.*.progress")


def journal_restarts(node, since_wall):
    """[(stopping_at, ready_at or None)] from the node's journal since ``since_wall``: each "Stopping" of the unit and
    SGLang's first ready line after it (wall-clock seconds)."""
    out = podman("exec", node, "journalctl", "-u", UNIT, "-o", "json", "--no-pager", "--since",
                 "@%d" % int(since_wall))
    events = []
    for line in out.splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        msg = entry.get("MESSAGE")
        if not isinstance(msg, str):
            continue
        t = int(entry["__REALTIME_TIMESTAMP"]) / 1e6
        if msg.startswith("Stopping " + UNIT):
            events.append([t, None])
        elif "The server is fired up and ready to roll!" in msg and events and events[-1][1] is None:
            events[-1][1] = t
    return [tuple(e) for e in events]


def journal_count(node, since_wall, text):
    """Lines of the unit's journal on ``node`` since ``since_wall`` that hold ``text``."""
    out = podman("exec", node, "journalctl", "-u", UNIT, "-o", "cat", "--no-pager", "--since", "@%d" % int(since_wall))
    return sum(1 for line in out.splitlines() if text in line)


def health_failures(node, since_wall):
    """``Health check failed`` lines in the node's journal since ``since_wall``: /health answered 503 (the router's
    checks and anything else that probed it) because no token came back within the bound."""
    return journal_count(node, since_wall, "Health check failed. Server couldn't get a response")


def forced_exits(node, since_wall):
    """SIGTERMs SGLang answered by exiting at once instead of draining: it was still UnHealthy from a /health 503
    (tokenizer_manager.py sigterm_watchdog); the drain's own /health afterwards is what prevents it."""
    return journal_count(node, since_wall, "Signal SIGTERM received while health check failed. Force exiting.")


def write_times(node):
    """Wall-clock mtimes of the node's build logs and staging progress files (what a prepare writes)."""
    code = ("import glob, json, os; print(json.dumps({p: os.stat(p).st_mtime for pat in %r for p in glob.glob(pat)}))"
            % (WRITES,))
    return json.loads(podman("exec", node, "python3", "-c", code) or "{}")


def node_of(url):
    return next((n for n in NODES if ("//%s:" % n) in url), url)


def windows_figures(windows, log, since_wall):
    """Per node: each window out of rotation, the drain the play reported, restart-to-ready from the journal, the rest."""
    drains = {}
    for host, secs in re.findall(r"drained (\S+) in ([0-9.]+) s", log):
        drains.setdefault(host, []).append(float(secs))
    restarts = {n: journal_restarts(n, since_wall) for n in NODES}
    out = []
    for url, start, end in sorted(windows, key=lambda w: w[1]):
        node = node_of(url)
        inside = [(a, b) for a, b in restarts.get(node, []) if start <= a <= end]
        stop, ready = inside[0] if inside else (None, None)
        drain = drains.get(node, [None]).pop(0) if drains.get(node) else None
        restart = (ready - stop) if stop and ready else None
        total = end - start
        rest = None if restart is None or drain is None else total - restart - drain
        out.append({"node": node, "out_s": round(total, 1), "drain_s": drain,
                    "restart_to_ready_s": None if restart is None else round(restart, 1),
                    "rest_s": None if rest is None else round(rest, 1), "start": start, "end": end})
    return out


def run_case(name, vars_by_host, args, workdir, playbook="playbooks/rolling_redeploy.yml", extra=(), gate=False,
             canary=False):
    """One playbook run under load, with its figures. The rollout's performance gate runs only where ``gate`` says:
    it adds its sweep to the first node's time out of rotation, which the other cases hold to drain + restart-to-ready
    + the rest (gate_case proves the gate); the canary soak only where ``canary`` says (canary_case, gate_case)."""
    if playbook == "playbooks/rolling_redeploy.yml" and not gate:
        extra = [*extra, "-e", "rolling_redeploy_benchmark_gate=false"]
    if playbook == "playbooks/rolling_redeploy.yml" and not canary:
        extra = [*extra, "-e", "generation_canary_soak_s=0"]
    inv = os.path.join(workdir, "%s-overlay.json" % name)
    overlay(inv, vars_by_host)
    url = args.router_url or router_url()
    before = {n: current_release(n) for n in NODES}
    models_before = {n: current_model(n) for n in NODES}
    load, rotation, compilers = Load(url, args.clients, args.max_s), Rotation(url), Compilers()
    compilers.start()
    rotation.start()
    load.start()
    time.sleep(args.rest_s)  # latency at rest, before the playbook touches anything
    started = time.time()
    load_started = started - args.rest_s
    rc, wall, out = ansible(["-i", inv, playbook, *extra], os.path.join(workdir, name + ".log"))
    time.sleep(2)  # requests right after the last node came back count too
    load.stop()
    out_of_rotation = rotation.stop()
    compiled = compilers.stop()
    after = {n: current_release(n) for n in NODES}
    models_after = {n: current_model(n) for n in NODES}
    failed = [r for r in load.results if not r[2]]
    windows = windows_figures(rotation.windows, out, started)
    first_out = min([w["start"] for w in windows] or [float("inf")])

    def p99(select):
        lat = [r[1] for r in load.results if r[2] and select(load.wall_of.get(r[0], 0))]
        return round(percentile(lat, 99) * 1000, 1) if lat else None

    writes = {n: write_times(n) for n in NODES}
    inside = sorted("%s:%s" % (n, path) for n, files in writes.items() for path, t in files.items()
                    for w in windows if w["start"] <= t <= w["end"])
    lat = [r[1] for r in load.results if r[2]]
    figures = {
        "case": name, "playbook_rc": rc, "playbook_s": round(wall, 1), "clients": args.clients,
        "requests": len(load.results), "failed": len(failed),
        "long_requests": sum(1 for r in load.results if r[1] > 5),
        "health_503": {n: health_failures(n, load_started) for n in NODES},
        "forced_exits": {n: forced_exits(n, load_started) for n in NODES},
        "p50_ms": round(percentile(lat, 50) * 1000, 1), "p99_ms": round(percentile(lat, 99) * 1000, 1),
        "max_ms": round(max(lat) * 1000, 1) if lat else None,
        "p99_rest_ms": p99(lambda t: t < started), "p99_prepare_ms": p99(lambda t: started <= t < first_out),
        "p99_switch_ms": p99(lambda t: t >= first_out),
        "out_of_rotation_s": out_of_rotation, "windows": windows, "writes_inside_windows": inside,
        "compilers": compiler_figures(compiled, windows),
        "router_poll_errors": rotation.errors,
        "release_before": {n: os.path.basename(v) for n, v in before.items()},
        "release_after": {n: os.path.basename(v) for n, v in after.items()},
        "model_before": {n: os.path.basename(v) for n, v in models_before.items()},
        "model_after": {n: os.path.basename(v) for n, v in models_after.items()},
        "failures_sample": [r[3] for r in failed[:5]],
        # a release's own 500s (the canary's) apart from what the switch or the rollback lost
        "failed_500": sum(1 for r in failed if str(r[3]).startswith("HTTP 500")),
        "fewest_healthy": rotation.fewest, "router_polls": rotation.polls,
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
            with open_url(router_url() + "/readiness", timeout=2) as resp:
                if resp.status == 200:
                    break
        except OSError:
            time.sleep(0.5)
    return problems


def node_state():
    """Per node: release, model revision and the unit's invocation (a restart changes it)."""
    return {n: (current_release(n), current_model(n), invocation(n)) for n in NODES}


def wait_router(predicate, what, timeout=120):
    """Poll GET /workers (bounded) until ``predicate(healthy_urls)``; False when it never held."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if predicate(healthy_workers()):
                return True
        except OSError:
            pass
        time.sleep(1)
    print("   (gave up waiting %d s for the router to list %s)" % (timeout, what))
    return False


def listed_healthy(node):
    return lambda healthy: any(u.endswith("%s:%d" % (node, PORT)) for u in healthy)


def refused(name, workdir, extra, expect, vars_by_host=None, playbook="playbooks/rolling_redeploy.yml"):
    """Run the rollout (or ``playbook``) expecting a refusal: rc != 0, a line with every text in ``expect``, no node
    out of rotation, nothing changed on any node (release, model, unit invocation)."""
    inv = os.path.join(workdir, "%s-overlay.json" % name)
    overlay(inv, vars_by_host or {})
    before = node_state()
    rotation = Rotation(router_url())
    rotation.start()
    rc, wall, out = ansible(["-i", inv, playbook, *extra], os.path.join(workdir, name + ".log"))
    rotation.stop()
    after = node_state()
    flat = " ".join(out.split())  # a long message may be folded over lines by the output format
    at = flat.find(expect[0])
    message = flat[max(at - 200, 0):at + 300] if at >= 0 and all(e in flat for e in expect) else ""
    print("== refusals/%s: playbook rc=%s in %.0f s" % (name, rc, wall))
    print("   play's message: %s" % (message[:400] or "(none with %s)" % (expect,)))
    print("   nodes out of rotation: %d; nodes untouched (release, model, service instance): %s"
          % (len(rotation.windows), before == after))
    problems = []
    if rc == 0 or not message:
        problems.append("refusals/%s: the play was not refused with %s (rc %s), see %s"
                        % (name, expect, rc, os.path.join(workdir, name + ".log")))
    if rotation.windows:
        problems.append("refusals/%s: a node left rotation: %s" % (name, rotation.windows))
    if before != after:
        problems.append("refusals/%s: a node changed: %s -> %s" % (name, before, after))
    return problems


def refusals_case(workdir):
    """A bad option, an unhealthy node, a held lock: each refused before any node leaves rotation."""
    problems = refused("bad-option", workdir, [], ["no host was contacted", "--no-such-option is not an option"],
                       {NODES[1]: {"sglang_service_extra_options": dict(FLEET_OPTIONS, **{"no-such-option": 1})}})
    # Node 2's server stops answering (SIGSTOP, as a hung host would): the router marks it unhealthy and the capacity
    # guard must refuse to take node 1 out (forced: nothing else would make the play switch node 1). The play checks the
    # guard first, before any prepare (issue 59's run: 110 s of prepare before the refusal; now seconds).
    podman("exec", NODES[1], "systemctl", "kill", "--signal=SIGSTOP", UNIT)
    try:
        if not wait_router(lambda healthy: not listed_healthy(NODES[1])(healthy), "%s unhealthy" % NODES[1]):
            problems.append("refusals/guard: the router never listed the stopped %s unhealthy" % NODES[1])
        else:
            problems += refused("guard", workdir, ["-e", "rolling_redeploy_force=true"],
                                ["refusing to take", "capacity guard"])
    finally:
        podman("exec", NODES[1], "systemctl", "kill", "--signal=SIGCONT", UNIT)
    if not wait_router(listed_healthy(NODES[1]), "%s healthy again" % NODES[1]):
        problems.append("refusals/guard: %s is not healthy again after SIGCONT" % NODES[1])
    # Another rollout holds the lock (taken with the play's own module): this run is refused, the lock stays its. So
    # is every other playbook that takes nodes out of rotation (issue 59: rollback.yml used to take none).
    lock = ["ansible", "-i", os.path.join(ROOT, "inventory", "sandbox-fleet"), ROUTER, "-m", "blackwell.sglang.rollout_lock", "-a"]
    other = "path=%s owner='benchmark: another rollout'" % LOCK
    subprocess.run(lock + [other], cwd=ROOT, check=True, capture_output=True)
    try:
        problems += refused("lock", workdir, ["-e", "rolling_redeploy_force=true"],
                            ["another rollout holds the lock", "benchmark: another rollout"])
        problems += refused("lock-rollback", workdir, ["-e", "rollback_nodes=%s" % NODES[0]],
                            ["another rollout holds the lock", "benchmark: another rollout"],
                            playbook="playbooks/rollback.yml")
        held = subprocess.run(["podman", "exec", ROUTER, "cat", LOCK], capture_output=True, text=True).stdout
        print("   the lock after both refusals: %s" % held.strip())
        if "benchmark: another rollout" not in held:
            problems.append("refusals/lock: a refused run released or replaced the other run's lock: %r" % held)
    finally:
        subprocess.run(lock + [other + " state=absent"], cwd=ROOT, check=True, capture_output=True)
    return problems


def rollback_case(args, workdir, expected=None):
    """playbooks/rollback.yml on node 1 (rollback_nodes) under load: its previous generation's release and model come back
    (``expected``: (release, model) names they must be, when the case before says)."""
    f, out = run_case("rollback", {}, args, workdir, playbook="playbooks/rollback.yml",
                      extra=["-e", "rollback_nodes=%s" % NODES[0]])
    print_figures(f)
    problems = window_problems("rollback", f, args.max_rest_s)
    if f["playbook_rc"] != 0:
        problems.append("rollback: playbooks/rollback.yml failed (rc %s), see %s" % (f["playbook_rc"], f["log"]))
    n = NODES[0]
    if expected and (f["release_after"][n], f["model_after"][n]) != tuple(expected):
        problems.append("rollback: %s is on %s, model %s; its previous generation was %s, model %s" % (
            n, f["release_after"][n], f["model_after"][n], expected[0], expected[1]))
    elif not expected and (f["release_after"][n] == f["release_before"][n] or f["model_after"][n] == f["model_before"][n]):
        problems.append("rollback: %s did not get both its previous release and model back: %s -> %s, %s -> %s" % (
            n, f["release_before"][n], f["release_after"][n], f["model_before"][n], f["model_after"][n]))
    if f["release_after"][NODES[1]] != f["release_before"][NODES[1]]:
        problems.append("rollback: %s (not in rollback_nodes) changed" % NODES[1])
    return f, problems


def degenerate_case(args, workdir):
    """Node 1 onto a release whose answers are garbage while /health says 200: the smoke catches it, the node is rolled
    back and the rollout stops there (see the module docstring)."""
    f, out = run_case("degenerate", {NODES[0]: {"sglang_build_patches": [R2, DEGENERATE]}}, args, workdir)
    print_figures(f)
    problems = []
    stopped = "Rolling redeploy stopped at %s" % NODES[0]
    message = next((line.strip() for line in out.splitlines() if stopped in line), "")
    print("   play's message: %s" % (message[:600] or "(none)"))
    if f["playbook_rc"] == 0:
        problems.append("degenerate: the play succeeded although node 1's new release answers garbage")
    if stopped not in out or "the output repeats 'foss'" not in out or "unhealthy answers" not in out:
        problems.append("degenerate: the play does not stop at %s naming the repetition and 'unhealthy answers'"
                        % NODES[0])
    if f["release_after"][NODES[0]] != f["release_before"][NODES[0]]:
        problems.append("degenerate: %s was not rolled back (%s)" % (NODES[0], f["release_after"][NODES[0]]))
    if f["release_after"][NODES[1]] != f["release_before"][NODES[1]]:
        problems.append("degenerate: %s was switched although the rollout stopped before it" % NODES[1])
    if not f["out_of_rotation_s"] or not any(url.endswith("%s:%d" % (NODES[0], PORT)) and secs > 0
                                             for url, secs in f["out_of_rotation_s"].items()):
        problems.append("degenerate: %s never left rotation" % NODES[0])
    # 0 failed requests, no compile or staging write out of rotation (the rolled-back node's windows hold a second
    # restart, so their length is not held to the switch's limit)
    problems += window_problems("degenerate", f, args.max_rest_s, nodes=[])
    if not wait_router(listed_healthy(NODES[0]), "%s back in rotation" % NODES[0]):
        problems.append("degenerate: %s is not back in rotation" % NODES[0])
    return problems


def gate_message(out):
    """What the gate said last in the play's output (roles/generation/tasks/gate.yml), on one line, or "". The
    callback wraps a long message over lines and quotes it."""
    found = re.findall(r"(no benchmark record of the previous generation[^\"']*|benchmark gate (?:passed|failed)[^\"']*)",
                       out)
    return " ".join(found[-1].split("\n\n")[0].split()) if found else ""


def gate_case(args, workdir):
    """The rollout's performance gate on node 1, the first node that switches (node 2 has nothing to switch): the
    serving benchmark records the gate's figures of its live generation (playbooks/benchmark.yml, idle fleet); a
    forced rollout of its own release under load is compared with them and passes, and then passes the canary soak;
    then a release 30 % slower (0004-slower-release.patch) under load: the gate fails naming the drop, the node is
    rolled back and back in rotation, the rollout stops, 0 failed requests."""
    problems = []
    # Node 1 alone switched all the same (rolling_redeploy_force as its host var; node 2 has nothing to switch).
    forced = {NODES[0]: {"rolling_redeploy_force": True}}
    # The gate's record of the live generation, made by playbooks/benchmark.yml on the idle fleet with the gate's own
    # sweep (label gate, short_chat at the gate's concurrency): what a gated rollout compares with, in a quarter of the
    # time a forced rollout takes to record it.
    sweep = {"benchmark_node": NODES[0], "generation_benchmark_label": "gate",
             "generation_benchmark_workloads": ["short_chat"],
             "generation_benchmark_concurrency": FLEET["generation_benchmark_gate_concurrency"]}
    rc, wall, out = ansible(["playbooks/benchmark.yml", "-e", json.dumps(sweep)], os.path.join(workdir, "gate-record.log"))
    print("== gate-record: playbooks/benchmark.yml rc=%s in %.0f s" % (rc, wall))
    if rc != 0:
        problems.append("gate: recording the live generation's gate figures failed (rc %s); see %s"
                        % (rc, os.path.join(workdir, "gate-record.log")))

    # ... and, back in rotation, the canary soak under the load: a healthy release passes it (canary_case fails one)
    f, out = run_case("gate-unchanged", forced, args, workdir, gate=True, canary=True)
    print_figures(f)
    said = gate_message(out)
    soak = soak_message(out)
    print("   the gate: %s\n   the soak: %s" % (said or "(nothing)", soak or "(nothing)"))
    if f["playbook_rc"] != 0 or not said.startswith("benchmark gate passed"):
        problems.append("gate-unchanged: the same release did not pass the gate against its record (rc %s): %s"
                        % (f["playbook_rc"], said or "the gate said nothing"))
    if not soak.startswith("canary soak passed") or "passed unjudged" in soak:
        problems.append("gate-unchanged: the healthy release did not pass a judged canary soak: %s"
                        % (soak or "the soak said nothing"))
    problems += window_problems("gate-unchanged", f, args.max_rest_s, nodes=[])

    f, out = run_case("gate-slower", {NODES[0]: {"sglang_build_patches": [R2, SLOWER]}}, args, workdir, gate=True)
    print_figures(f)
    stopped = "Rolling redeploy stopped at %s" % NODES[0]
    message = next((line.strip() for line in out.splitlines() if stopped in line), "")
    said = gate_message(out)
    print("   play's message: %s\n   the gate: %s" % (message[:600] or "(none)", said or "(nothing)"))
    if f["playbook_rc"] == 0:
        problems.append("gate-slower: the play succeeded although node 1's new release is 30 % slower")
    if stopped not in out or not said.startswith("benchmark gate failed at short_chat"):
        problems.append("gate-slower: the play does not stop at %s naming the gate's figures" % NODES[0])
    if f["release_after"][NODES[0]] != f["release_before"][NODES[0]]:
        problems.append("gate-slower: %s was not rolled back (%s)" % (NODES[0], f["release_after"][NODES[0]]))
    if f["release_after"][NODES[1]] != f["release_before"][NODES[1]]:
        problems.append("gate-slower: %s changed although the rollout stopped at %s" % (NODES[1], NODES[0]))
    problems += window_problems("gate-slower", f, args.max_rest_s, nodes=[])
    if not wait_router(listed_healthy(NODES[0]), "%s back in rotation" % NODES[0]):
        problems.append("gate-slower: %s is not back in rotation" % NODES[0])
    return problems


def soak_message(out):
    """The canary soak's verdict line from a play's output, on one line."""
    found = re.findall(r"(canary soak (?:passed|failed) after.*?)(?:\n\n|\nTASK|\Z)", out, re.S)
    return " ".join(found[-1].replace("''", "'").rstrip("'").split()) if found else ""


def canary_case(args, workdir):
    """The canary soak catches what ready and the smoke cannot: node 1 onto a release that answers one chat in twenty
    with 500 once it is ready (0005-errors-after-ready.patch). Its smoke passes and it rejoins; the soak sees its
    error rate against node 2's in the router's per-worker outcomes (the router retries each 500 on a worker, so no
    client sees one) and it is rolled back, drained first; the rollout stops naming the figures; node 2 (the group)
    is not switched; no request is lost to the switch or the rollback."""
    problems = []
    f, out = run_case("canary", {NODES[0]: {"sglang_build_patches": [R2, ERRORS]}}, args, workdir, canary=True)
    print_figures(f)
    stopped = "Rolling redeploy stopped at the canary %s" % NODES[0]
    message = next((line.strip() for line in out.splitlines() if stopped in line), "")
    print("   play's message: %s\n   the soak: %s" % (message[:600] or "(none)", soak_message(out) or "(nothing)"))
    print("   a client saw the canary's 500: %d; the fewest workers listed healthy at a 0.2 s poll: %s (%d polls)"
          % (f["failed_500"], f["fewest_healthy"], f["router_polls"]))
    if f["playbook_rc"] == 0:
        problems.append("canary: the play succeeded although node 1's release fails one request in twenty")
    if not message or not re.search(r"error rate \d+\.\d % \(\d+ of \d+ requests\)", message):
        problems.append("canary: the play does not stop at %s naming the canary's error rate" % NODES[0])
    if f["release_after"][NODES[0]] != f["release_before"][NODES[0]]:
        problems.append("canary: %s was not rolled back (%s)" % (NODES[0], f["release_after"][NODES[0]]))
    if f["release_after"][NODES[1]] != f["release_before"][NODES[1]]:
        problems.append("canary: %s was switched although the canary failed" % NODES[1])
    if f["failed"] - f["failed_500"]:
        problems.append("canary: %d requests lost to the switch or the rollback: %s"
                        % (f["failed"] - f["failed_500"], f["failures_sample"]))
    if not wait_router(listed_healthy(NODES[0]), "%s back in rotation" % NODES[0]):
        problems.append("canary: %s is not back in rotation" % NODES[0])
    return problems


def restart_case(args, workdir):
    """Issue 59: a plain deploy.yml (not the rolling redeploy) with a changed SGLang option on node 1, under load. SGLang
    0.5.23 admits requests after SIGTERM, so a node restarted while the router still sends to it cuts them; deploy.yml
    takes a serving node out of rotation and drains it before its restart (playbooks/tasks/before_restart.yml), the
    router play puts it back once ready and smoked. Expected: 0 failed requests, node 1 out of rotation once, no forced
    exit, node 2's group untouched."""
    group = {n: invocation(n) for n in [NODES[1], *GROUPS[NODES[1]]]}
    before = invocation(NODES[0])
    f, out = run_case("restart", {NODES[0]: {"sglang_service_extra_options": dict(FLEET_OPTIONS,
                                                                                   **{"max-running-requests": 48})}},
                      args, workdir, playbook="playbooks/deploy.yml")
    print_figures(f)
    problems = window_problems("restart", f, args.max_rest_s, nodes=[])
    if f["playbook_rc"] != 0:
        problems.append("restart: deploy.yml failed (rc %s), see %s" % (f["playbook_rc"], f["log"]))
    if invocation(NODES[0]) == before:
        problems.append("restart: %s was not restarted with its new option" % NODES[0])
    if [w["node"] for w in f["windows"]] != [NODES[0]]:
        problems.append("restart: expected %s out of rotation once, got %s" % (NODES[0], f["windows"]))
    if {n: invocation(n) for n in group} != group:
        problems.append("restart: node 2's group was restarted")
    if not wait_router(listed_healthy(NODES[0]), "%s back in rotation" % NODES[0]):
        problems.append("restart: %s is not back in rotation" % NODES[0])
    return problems


def router_pid():
    return podman("exec", ROUTER, "systemctl", "show", "--property=MainPID", "--value", "sglang-router.service")


def router_outcomes(worker):
    """The router's count of requests it sent ``worker`` and their outcome (sglang-router 0.3.2
    smg_worker_cb_outcomes_total, every outcome summed): the router's own per-worker count."""
    text = podman("exec", ROUTER, "curl", "-s", "http://127.0.0.1:29000/metrics")
    return sum(float(m.group(1)) for m in re.finditer(
        r'^smg_worker_cb_outcomes_total\{[^}]*worker="%s"[^}]*\} ([0-9.e+]+)$' % re.escape(worker), text, re.M))


def gateway_lines_from(node, address):
    """How many requests ``node``'s gateway logged from ``address`` (the router's own, whatever the path)."""
    log = podman("exec", node, "cat", "/var/log/nginx/sglang-gateway-sglang.access.log")
    return sum(1 for line in log.splitlines() if line.startswith(address + " "))


def elastic_case(args, workdir):
    """Issue 42: the fleet shrinks and grows under the load without touching its entry point. Node 1 leaves with
    playbooks/remove_node.yml (capacity guard, deregister, drain, stop); removing node 2's group then is refused (the
    last healthy worker); node 1 joins again with deploy.yml --limit node 1
    (the router play not named: the node registers itself through the router's worker API once ready and smoked).
    Expected: 0 failed requests, the router's PID unchanged throughout, the worker list as expected after each step,
    node 2's group untouched, no 0.2 s poll with no healthy worker. Then, without load, a router restart re-learns
    both workers from its membership file.
    Between the removal and the join, issue 59's serving set: a plain deploy.yml (every host, the router play
    included) gives node 1 a release whose answers are garbage while /health says 200 (0001 + 0003): its smoke fails,
    it is never a router member (the router's list at every 0.2 s poll, the router's per-worker count and node 1's
    gateway log from the router's address: 0), the play fails naming it, and node 2 serves on."""
    problems = []
    url = args.router_url or router_url()
    urls = {n: "http://%s:%d" % (n, PORT) for n in NODES}
    pid, group = router_pid(), {n: invocation(n) for n in [NODES[1], *GROUPS[NODES[1]]]}
    load, rotation = Load(url, args.clients, args.max_s), Rotation(url)
    rotation.start()
    load.start()
    time.sleep(min(args.rest_s, 5))  # the load running before the first step; no latency at rest is reported here
    garbage = os.path.join(workdir, "elastic-garbage-overlay.json")
    overlay(garbage, {NODES[0]: {"sglang_build_patches": [R2, DEGENERATE]}})
    router_address = podman("exec", ROUTER, "hostname", "-I").split()[0]
    for name, playbook_args, expected in (
            ("remove", ["playbooks/remove_node.yml", "-e", "node=%s" % NODES[0]], [urls[NODES[1]]]),
            # node 2's group is now the last healthy worker: the capacity guard refuses, nothing changes
            ("last", ["playbooks/remove_node.yml", "-e", "node=%s" % NODES[1]], [urls[NODES[1]]]),
            # a plain deploy.yml whose release answers garbage on node 1: never a member (issue 59)
            ("garbage", ["-i", garbage, "playbooks/deploy.yml"], [urls[NODES[1]]]),
            ("join", ["playbooks/deploy.yml", "--limit", NODES[0]], sorted(urls.values()))):
        if name == "garbage":
            sent_before, logged_before = router_outcomes(urls[NODES[0]]), gateway_lines_from(NODES[0], router_address)
            other_before = router_outcomes(urls[NODES[1]])
            rotation.seen = set()
        rc, wall, out = ansible(playbook_args, os.path.join(workdir, "elastic-%s.log" % name))
        listed, now_pid = sorted(healthy_workers(url)), router_pid()
        print("== elastic %s: playbook rc=%s in %.0f s; the router lists %s; its PID %s (before: %s)"
              % (name, rc, wall, listed, now_pid, pid))
        if name == "garbage":
            flat = " ".join(out.split())
            at = flat.find("%s routes to" % ROUTER)  # the run's verdict: the router's members, and who is left out
            said = flat[at:at + 500] if at >= 0 else ""
            sent = router_outcomes(urls[NODES[0]]) - sent_before
            sent_other = router_outcomes(urls[NODES[1]]) - other_before  # the counter counts: node 2 served the load
            logged = gateway_lines_from(NODES[0], router_address) - logged_before
            listed_ever = sorted(rotation.seen)
            print("   refused: %s" % (said or "(no message naming the node)"))
            print("   %s: the router sent it %d request(s) (smg_worker_cb_outcomes_total; %s: %d), its gateway logged %d "
                  "from the router's address; workers listed at any 0.2 s poll: %s"
                  % (NODES[0], sent, NODES[1], sent_other, logged, listed_ever))
            if rc == 0 or NODES[0] not in said or "answers failed the smoke" not in flat:
                problems.append("elastic garbage: the play did not fail naming %s and its failed smoke (rc %s), see %s"
                                % (NODES[0], rc, os.path.join(workdir, "elastic-garbage.log")))
            if not sent_other:
                problems.append("elastic garbage: the router's per-worker count saw no request to %s either: it counts "
                                "nothing" % NODES[1])
            if sent or logged or urls[NODES[0]] in listed_ever:
                problems.append("elastic garbage: %s was a router member or got requests (%d sent, %d logged, listed "
                                "%s)" % (NODES[0], sent, logged, listed_ever))
            if current_release(NODES[0]) == current_release(NODES[1]):
                problems.append("elastic garbage: %s does not run the garbage release" % NODES[0])
        elif name == "last":
            said = next((line.strip() for line in out.splitlines() if "the capacity guard needs 1" in line), "")
            print("   refused: %s" % (said[:300] or "(no refusal)"))
            if rc == 0 or not said:
                problems.append("elastic last: removing the last healthy worker was not refused by the capacity guard")
        elif rc != 0:
            problems.append("elastic %s: the playbook failed (rc %s), see %s" % (
                name, rc, os.path.join(workdir, "elastic-%s.log" % name)))
        if listed != expected:
            problems.append("elastic %s: the router lists %s, expected %s" % (name, listed, expected))
        if now_pid != pid:
            problems.append("elastic %s: the router restarted (PID %s -> %s)" % (name, pid, now_pid))
    time.sleep(2)
    load.stop()
    rotation.stop()
    failed = [r for r in load.results if not r[2]]
    untouched = {n: invocation(n) for n in group} == group
    print("   requests %d, failed %d; the fewest workers listed healthy at a 0.2 s poll: %s (%d polls); node 2's group "
          "untouched: %s" % (len(load.results), len(failed), rotation.fewest, rotation.polls, untouched))
    if failed:
        problems.append("elastic: %d failed requests: %s" % (len(failed), [r[3] for r in failed[:5]]))
    if not rotation.fewest or rotation.polls < 10:
        problems.append("elastic: a poll saw %s healthy workers (%d polls)" % (rotation.fewest, rotation.polls))
    if not untouched:
        problems.append("elastic: node 2's group was restarted")
    # a cold start re-learns the members (the load is off: a restart drops what is in flight)
    podman("exec", ROUTER, "systemctl", "restart", "sglang-router.service")
    start = time.monotonic()
    relearnt = wait_router(lambda healthy: sorted(healthy) == sorted(urls.values()), "both members", timeout=30)
    print("   router restarted: lists %s again after %.1f s" % (sorted(urls.values()) if relearnt else sorted(healthy_workers(url)),
                                                                time.monotonic() - start))
    if not relearnt:
        problems.append("elastic: the restarted router does not list both members")
    return problems


def print_figures(f):
    print("== %s: playbook rc=%s in %.0f s; %d clients" % (f["case"], f["playbook_rc"], f["playbook_s"], f["clients"]))
    print("   requests %d (%d long streaming), failed %d, latency p50 %.0f ms, p99 %.0f ms, max %s ms"
          % (f["requests"], f["long_requests"], f["failed"], f["p50_ms"], f["p99_ms"], f["max_ms"]))
    print("   /health 503 while busy (long prefills): %s" % ", ".join("%s %d" % kv for kv in sorted(f["health_503"].items())))
    print("   stops that force-exited (UnHealthy at SIGTERM): %s"
          % ", ".join("%s %d" % kv for kv in sorted(f["forced_exits"].items())))
    print("   p99 at rest %s ms, while preparing %s ms, while switching %s ms"
          % (f["p99_rest_ms"], f["p99_prepare_ms"], f["p99_switch_ms"]))
    for w in f["windows"]:
        print("   %-20s out of rotation %6.1f s = drain %s s + restart-to-ready %s s + the rest %s s"
              % (w["node"], w["out_s"], w["drain_s"], w["restart_to_ready_s"], w["rest_s"]))
    print("   build or staging writes inside a window out of rotation: %s" % (f["writes_inside_windows"] or "none"))
    for n, c in sorted(f["compilers"].items()):
        print("   %s: %d CUDA compiler process(es) %s at nice %s; at the server's priority: %s; out of rotation: %s"
              % (n, c["processes"], c["names"], c["nice"] or "-", c["at_server_priority"] or "none",
                 c["out_of_rotation"] or "none"))
    for n in NODES:
        print("   %s: release %s -> %s, model %s -> %s" % (n, f["release_before"][n], f["release_after"][n],
                                                           f["model_before"][n], f["model_after"][n]))
    if f["failures_sample"]:
        print("   failures (first 5): %s" % f["failures_sample"])
    print("   playbook log: %s" % f["log"])


def window_problems(name, f, max_rest_s, nodes=None):
    """The acceptance of a case that switched nodes: out of rotation - drain - restart-to-ready <= ``max_rest_s`` for
    each window of ``nodes`` (default all), no build/staging write inside a window, 0 failed, long requests present."""
    problems = []
    for w in f["windows"]:
        if nodes is not None and w["node"] not in nodes:
            continue
        if w["rest_s"] is None:
            problems.append("%s: %s's window out of rotation has no drain or restart figure: %s" % (name, w["node"], w))
        elif w["rest_s"] > max_rest_s:
            problems.append("%s: %s was out of rotation %.1f s beyond its drain and restart-to-ready (limit %.0f s)"
                            % (name, w["node"], w["rest_s"], max_rest_s))
    if f["writes_inside_windows"]:
        problems.append("%s: build or staging writes while a node was out of rotation: %s"
                        % (name, f["writes_inside_windows"]))
    for n, c in sorted(f["compilers"].items()):
        if c["at_server_priority"] or c["out_of_rotation"]:
            problems.append("%s: %s ran the CUDA compiler at the server's priority (%s) or out of rotation (%s): only the "
                            "prepare may compile, at its lower priority" % (name, n, c["at_server_priority"] or "none",
                                                                           c["out_of_rotation"] or "none"))
    if f["failed"]:
        problems.append("%s: %d failed requests" % (name, f["failed"]))
    if any(f["forced_exits"].values()):
        problems.append("%s: a stop force-exited SGLang (still UnHealthy from a busy spell) instead of draining: %s"
                        % (name, f["forced_exits"]))
    if not f["long_requests"]:
        problems.append("%s: the load had no long streaming request" % name)
    if not any(f["health_503"].values()):
        problems.append("%s: no long prefill made a serving node's /health answer 503: busy was not tested" % name)
    return problems


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--clients", type=int, default=4, help="concurrent clients through the router")
    ap.add_argument("--case", choices=["both", "auth", "router-down", "refusals", "release", "crash", "rollback",
                                       "degenerate", "gate", "canary", "rotate", "restart", "elastic"],
                    default=None, action="append",
                    help="both = release then crash; --case may be given more than once (default: all)")
    ap.add_argument("--rest-s", type=float, default=20, help="load before the playbook starts: latency at rest (s)")
    ap.add_argument("--max-rest-s", type=float, default=15,
                    help="limit on out of rotation - drain - restart-to-ready per node (s)")
    ap.add_argument("--max-s", type=float, default=1200, help="upper bound on the load's length per case (s)")
    ap.add_argument("--router-url", default="", help="default: the router container's address")
    ap.add_argument("--workdir", default=os.path.join(ROOT, ".cache", "rolling"),
                    help="playbook logs, inventory overlays and figures.json (default .cache/rolling, overwritten)")
    ap.add_argument("--check", action="store_true", help="exit 1 when an expectation does not hold")
    args = ap.parse_args(argv)
    cases = set(args.case or ["auth", "router-down", "refusals", "release", "crash", "rollback", "degenerate",
                              "gate", "canary", "rotate", "restart", "elastic"])
    if "both" in cases:
        cases |= {"release", "crash"}
    workdir = args.workdir
    os.makedirs(workdir, exist_ok=True)
    problems, results = [], []

    if "auth" in cases:
        print("== auth: the public entries without and with the key")
        problems += auth_case()
        print("== client errors: a burst of 400s, then valid requests, through the router")
        problems += client_errors_case()

    if "router-down" in cases:
        problems += router_down_case(workdir)

    if "refusals" in cases:
        problems += refusals_case(workdir)

    if "release" in cases:
        f, out = run_case("release", {n: {"sglang_build_patches": [R2]} for n in NODES}, args, workdir)
        results.append(f)
        print_figures(f)
        problems += window_problems("release", f, args.max_rest_s)
        if f["playbook_rc"] != 0:
            problems.append("release: the rolling redeploy failed (rc %s), see %s" % (f["playbook_rc"], f["log"]))
        if any(f["release_after"][n] == f["release_before"][n] for n in NODES):
            problems.append("release: not every node is on a new release: %s" % f["release_after"])

    crash = None
    if "crash" in cases:
        model = {"model_stage_revision": "sandbox-r2"}
        f, out = run_case("crash", {NODES[0]: {"sglang_build_patches": [R2], **model},
                                    NODES[1]: {"sglang_build_patches": [R2, CRASH], **model}}, args, workdir)
        results.append(f)
        print_figures(f)
        crash = f
        problems += window_problems("crash", f, args.max_rest_s, nodes=[NODES[0]])
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
            healthy = healthy_workers(args.router_url)
        except OSError as exc:
            healthy = set()
            problems.append("crash: the router does not answer after the rollout (%s)" % exc)
        if not any(u.endswith("%s:%d" % (NODES[1], PORT)) for u in healthy):
            problems.append("crash: %s is not back in rotation (router lists %s)" % (NODES[1], sorted(healthy)))

    if "rollback" in cases:
        expected = (crash["release_before"][NODES[0]], crash["model_before"][NODES[0]]) if crash else None
        f, more = rollback_case(args, workdir, expected)
        results.append(f)
        problems += more

    if "degenerate" in cases:
        problems += degenerate_case(args, workdir)

    if "gate" in cases:
        problems += gate_case(args, workdir)

    if "canary" in cases:
        problems += canary_case(args, workdir)

    if "rotate" in cases:
        problems += rotate_case(args, workdir)

    if "restart" in cases:
        problems += restart_case(args, workdir)

    if "elastic" in cases:
        problems += elastic_case(args, workdir)

    with open(os.path.join(workdir, "figures.json"), "w") as fh:
        json.dump(results, fh, indent=1)
    print("figures: %s" % os.path.join(workdir, "figures.json"))
    for p in problems:
        print("FAIL: " + p)
    return 1 if (problems and args.check) else 0


if __name__ == "__main__":
    sys.exit(main())
