"""Contract with the REAL sglang-router 0.3.2 (.venv-router, tests/contract/install_real_router.sh).

The real router runs on loopback in front of two SGLang simulators (tests/sandbox/sglang_sim). The modules
sglang_router_workers and sglang_drain are driven through their ``run`` functions against them:
deregister -> the router stops listing the worker and sends it nothing; re-register -> listed healthy;
drain waits for a long request to finish; the committed router parser snapshot equals a fresh export.

Skipped, with the reason, when .venv-router/bin/python is absent.
"""

import json
import pathlib
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import pytest

from ansible_collections.blackwell.sglang.plugins.modules import sglang_drain
from ansible_collections.blackwell.sglang.plugins.modules import sglang_router_workers
from ansible_collections.blackwell.sglang.plugins.module_utils.http.http_client import EndpointError
from ansible_collections.blackwell.sglang.plugins.module_utils.fleet.sglang_router_api import Router

ROOT = pathlib.Path(__file__).resolve().parents[2]
ROUTER_PY = ROOT / ".venv-router" / "bin" / "python"
MODEL = ROOT / ".sandbox" / "artifacts" / "models" / "Kimi-K2.5"
pytestmark = pytest.mark.skipif(
    not ROUTER_PY.exists(),
    reason=".venv-router/bin/python is absent: run tests/contract/install_real_router.sh (about 30 s)",
)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_http(url, timeout=60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:
                if resp.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"{url} did not answer 200 within {timeout} s")


def _post_chat(base, timeout=30):
    req = urllib.request.Request(base + "/v1/chat/completions", method="POST", headers={"Content-Type": "application/json"},
                                 data=json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode())
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return resp.status


def _sim_package(directory):
    """The simulator package with the CLI snapshot inside, under ``directory``."""
    if not (MODEL / "model.safetensors.index.json").exists():
        pytest.skip("stand-in checkpoint absent: run python tests/sandbox/build_artifacts.py")
    shutil.copytree(ROOT / "tests" / "sandbox" / "sglang_sim" / "sglang", directory / "sglang")
    shutil.copy(ROOT / "plugins" / "data" / "sglang_cli_0.5.23.json", directory / "sglang" / "cli_snapshot.json")
    return directory


def _start_sim(procs, package, env=None, args=()):
    """One simulated worker (tp 1) on a free loopback port, appended to ``procs``; its URL."""
    port = _free_port()
    full_env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(package), "SGLANG_SIM_CONFIG": "",
                "SGLANG_SIM_SHARD_DELAY_S": "0", "SGLANG_SIM_READY_POLL_S": "0.2", "SGLANG_SIM_HEALTH_LATENCY_S": "0.1"}
    full_env.update(env or {})
    procs.append(subprocess.Popen(
        [sys.executable, "-m", "sglang.launch_server", "--model-path", str(MODEL), "--tp-size", "1",
         "--host", "127.0.0.1", "--port", str(port), "--trust-remote-code", *args],
        env=full_env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True))
    return f"http://127.0.0.1:{port}"


def _start_router(procs, workers, options, port=None):
    """The real router in front of ``workers`` (none: no --worker-urls, as roles/sglang_router renders it now) with
    ``options`` (name -> value; True: a bare flag), on ``port`` (default a free one); its URL."""
    rport = port or _free_port()
    argv = [str(ROUTER_PY), "-m", "sglang_router.launch_router", "--host", "127.0.0.1", "--port", str(rport),
            *(["--worker-urls", *workers] if workers else []), "--log-level", "warn"]
    for key, value in options.items():
        argv += ["--" + key] if value is True else ["--" + key, str(value)]
    procs.append(subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True))
    return f"http://127.0.0.1:{rport}"


def _stop(procs):
    for p in procs:
        p.terminate()
    for p in procs:
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    """Two simulated workers (the second answers each request in 2 s) and the real router in front."""
    sim = _sim_package(tmp_path_factory.mktemp("sim"))
    procs = []
    try:
        workers = [_start_sim(procs, sim, {"SGLANG_SIM_REQUEST_S": request_s}, ["--enable-metrics"])
                   for request_s in ("0.05", "2.0")]
        for w in workers:
            _wait_http(w + "/health", 90)
        mport = _free_port()
        router = _start_router(procs, workers[:1], {"health-check-interval-secs": 1, "prometheus-host": "127.0.0.1",
                                                    "prometheus-port": mport})
        _wait_http(router + "/readiness", 60)
        yield {"router": router, "workers": workers, "metrics": f"http://127.0.0.1:{mport}/metrics"}
    finally:
        _stop(procs)


def _params(router, worker, state):
    return {"router_url": router, "worker_url": worker, "state": state, "timeout": 30, "poll_interval": 0.2,
            "request_timeout": 5}


def test_add_remove_and_idempotence(fleet):
    router, (w0, w1) = fleet["router"], fleet["workers"]
    added = sglang_router_workers.run(_params(router, w1 + "/", "present"), check_mode=False)
    assert added["changed"] and added["worker"]["is_healthy"] and added["worker"]["url"] == w1
    again = sglang_router_workers.run(_params(router, w1, "present"), check_mode=False)
    assert not again["changed"]
    assert sorted(w["url"] for w in again["workers"]) == sorted([w0, w1])

    check = sglang_router_workers.run(_params(router, w1, "absent"), check_mode=True)
    assert check["changed"] and len(Router(router).find(w1)) == 1, "check mode must not remove the worker"

    removed = sglang_router_workers.run(_params(router, w1, "absent"), check_mode=False)
    assert removed["changed"] and removed["worker"] == {}
    assert [w["url"] for w in removed["workers"]] == [w0]
    assert not sglang_router_workers.run(_params(router, w1, "absent"), check_mode=False)["changed"]


def test_removed_worker_gets_no_traffic(fleet):
    router, (w0, w1) = fleet["router"], fleet["workers"]
    sglang_router_workers.run(_params(router, w1, "absent"), check_mode=False)
    for _ in range(6):
        assert _post_chat(router) == 200
    with urllib.request.urlopen(w1 + "/metrics", timeout=5) as resp:
        assert "sglang:num_running_reqs" in resp.read().decode()
    # the slow worker (2 s per request) would show up in the latency if the router still sent it anything
    start = time.monotonic()
    for _ in range(4):
        _post_chat(router)
    assert time.monotonic() - start < 4.0


def test_drain_waits_for_the_running_request(fleet):
    w1 = fleet["workers"][1]
    thread = threading.Thread(target=_post_chat, args=(w1,))
    thread.start()
    time.sleep(0.3)
    params = {"url": w1, "metrics": ["sglang:num_running_reqs", "sglang:num_queue_reqs"], "timeout": 20,
              "poll_interval": 0.2, "settle_polls": 2, "request_timeout": 5}
    checked = sglang_drain.run(params, check_mode=True)
    assert checked["in_flight_initial"] == 1 and checked["waited_s"] == 0.0
    result = sglang_drain.run(params, check_mode=False)
    thread.join()
    assert result["in_flight_initial"] == 1 and result["in_flight"] == 0
    assert result["waited_s"] >= 1.0, result


def test_deregister_and_drain_in_one_run(fleet):
    """state=absent with drain_timeout, against the real router and a simulated worker: a request the worker holds
    (sent through the router) is waited for after the router forgot it."""
    router, (_w0, w1) = fleet["router"], fleet["workers"]
    sglang_router_workers.run(_params(router, w1, "present"), check_mode=False)
    thread = threading.Thread(target=_post_chat, args=(w1,))
    thread.start()
    time.sleep(0.3)
    result = sglang_router_workers.run(dict(_params(router, w1, "absent"), drain_timeout=20), check_mode=False)
    done_at = time.monotonic()
    thread.join()
    assert result["changed"] and not Router(router).find(w1)
    drain = result["drain"]
    assert drain["in_flight_initial"] == 1 and drain["in_flight"] == 0 and not drain["server_down"], drain
    assert drain["waited_s"] >= 1.0 and time.monotonic() - done_at < 1.0, drain


def test_drain_names_missing_metrics(fleet):
    params = {"url": fleet["router"], "metrics": ["sglang:num_running_reqs"], "timeout": 1, "poll_interval": 0.2,
              "settle_polls": 1, "request_timeout": 5}
    with pytest.raises(EndpointError, match="--enable-metrics"):
        sglang_drain.run(params, check_mode=False)


def test_router_snapshot_matches_the_real_parser(tmp_path):
    out = tmp_path / "router.json"
    subprocess.run([str(ROUTER_PY), str(ROOT / "tests" / "contract" / "export_sglang_cli.py"), "--router", str(out)],
                   check=True, capture_output=True)
    assert json.loads(out.read_text()) == json.loads(
        (ROOT / "plugins" / "data" / "sglang_router_cli_0.3.2.json").read_text())


def _router_health(metrics_url):
    with urllib.request.urlopen(metrics_url, timeout=5) as resp:
        text = resp.read().decode()
    return {m.group(1): float(m.group(2))
            for m in re.finditer(r'^smg_worker_health\{worker="([^"]+)"\} ([0-9.]+)$', text, re.M)}


def test_router_metrics_the_alert_rules_read(fleet):
    """SGLangRouterWorkersMissing sums smg_worker_health: one series per registered worker, 1 while healthy, gone
    once the worker is removed (roles/monitoring, plugins/filter/monitoring_config.py)."""
    router, (w0, w1), metrics = fleet["router"], fleet["workers"], fleet["metrics"]
    sglang_router_workers.run(_params(router, w1, "present"), check_mode=False)
    deadline = time.monotonic() + 20
    while _router_health(metrics) != {w0: 1.0, w1: 1.0} and time.monotonic() < deadline:
        time.sleep(0.3)
    assert _router_health(metrics) == {w0: 1.0, w1: 1.0}
    sglang_router_workers.run(_params(router, w1, "absent"), check_mode=False)
    deadline = time.monotonic() + 20
    while w1 in _router_health(metrics) and time.monotonic() < deadline:
        time.sleep(0.3)
    assert _router_health(metrics) == {w0: 1.0}


def test_the_rendered_health_checks_keep_a_busy_worker_that_the_old_ones_ejected(tmp_path):
    """SGLang 0.5.23's /health answers 503 after its own bound (2 s here, 20 s by default) while a long prefill holds
    the scheduler. Two real routers check the same worker through such a prefill: the one started with the checks
    sglang_router_health_checks renders keeps it healthy throughout; one with a timeout under the bound and a threshold
    of 2 (the product's settings before, time-scaled) lists it unhealthy, for being busy."""
    from ansible_collections.blackwell.sglang.plugins.filter.router import sglang_router_health_checks

    sim = _sim_package(tmp_path / "sim")
    rendered = sglang_router_health_checks({"interval_s": 1, "server_timeout_s": 2, "longest_prefill_s": 8})
    assert rendered["problems"] == [] and rendered["options"]["health-check-timeout-secs"] == 7
    old = {"health-check-interval-secs": 1, "health-check-timeout-secs": 1, "health-failure-threshold": 2}
    assert sglang_router_health_checks({"interval_s": 1, "server_timeout_s": 2, "longest_prefill_s": 8,
                                        "timeout_s": 1, "failure_threshold": 2})["problems"]
    procs = []
    try:
        worker = _start_sim(procs, sim, {"SGLANG_SIM_HEALTH_LATENCY_S": "0.2", "SGLANG_HEALTH_CHECK_TIMEOUT": "2",
                                         "SGLANG_SIM_PREFILL_TOKENS_PER_S": "1000",
                                         "SGLANG_SIM_STATE_DIR": str(tmp_path / "state")})
        _wait_http(worker + "/health", 90)
        routers = {name: _start_router(procs, [worker], dict(options, **{"prometheus-port": _free_port()}))
                   for name, options in (("rendered", rendered["options"]), ("old", old))}
        for url in routers.values():
            _wait_http(url + "/readiness", 60)
        body = json.dumps({"text": "x" * 4 * 6000, "sampling_params": {"max_new_tokens": 2}}).encode()
        prefill = threading.Thread(target=lambda: urllib.request.urlopen(urllib.request.Request(
            worker + "/generate", data=body, headers={"Content-Type": "application/json"}), timeout=60).read())
        prefill.start()  # 6000 tokens at 1000 a second: the scheduler is held 6 s, /health 503 after 2 s
        unhealthy = {name: 0 for name in routers}
        deadline = time.monotonic() + 9
        while time.monotonic() < deadline:
            for name, url in routers.items():
                if not any(w.get("is_healthy") for w in Router(url).workers()):
                    unhealthy[name] += 1
            time.sleep(0.2)
        prefill.join(30)
        assert unhealthy["rendered"] == 0, unhealthy
        assert unhealthy["old"] > 0, unhealthy
    finally:
        _stop(procs)


def _router_options_from_the_role():
    """The router options roles/sglang_router renders (the base role's sglang_router model; the templated ones left out)."""
    import yaml

    defaults = yaml.safe_load((ROOT / "roles" / "deployment" / "defaults" / "main" / "sglang_router.yml").read_text())
    return {k: v for k, v in defaults["sglang_router_options"].items() if "{{" not in str(v)}


def test_client_errors_stay_the_clients_and_a_killed_worker_still_leaves(tmp_path):
    """sgl-project/sglang#25811, measured: the real router counts a worker's 400 (SGLang 0.5.23 refusing a prompt
    longer than the context) as the worker's failure; with its default breaker, a burst of them makes every valid
    request 503 no_available_workers. With the options roles/sglang_router renders, 50 over-length requests get
    SGLang's own 400 and the 200 valid ones after them all succeed; a worker killed outright still leaves routing
    after health-failure-threshold failed checks (meanwhile cache_aware may still send a prompt there, which fails:
    the price of no breaker, bounded by threshold x interval), and every request after is served."""
    options = _router_options_from_the_role()
    assert options.get("disable-circuit-breaker") is True
    sim = _sim_package(tmp_path / "sim")
    procs = []

    def chat(router, content, timeout=30):
        req = urllib.request.Request(router + "/v1/chat/completions", method="POST",
                                     headers={"Content-Type": "application/json"},
                                     data=json.dumps({"model": "m", "max_tokens": 8, "messages": [
                                         {"role": "user", "content": content}]}).encode())
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                return resp.status, resp.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()

    try:
        workers = [_start_sim(procs, sim, {"SGLANG_SIM_STATE_DIR": str(tmp_path / ("state%d" % i))},
                              ["--context-length", "1000"]) for i in range(2)]
        for w in workers:
            _wait_http(w + "/health", 90)
        checks = {"health-check-interval-secs": 1, "health-failure-threshold": 3, "prometheus-port": _free_port()}
        routers = {"rendered": _start_router(procs, workers, dict(
            {k: v for k, v in options.items() if k not in ("prometheus-host", "prometheus-port", "log-level")},
            **checks)), "default": _start_router(procs, workers, dict(checks, **{"prometheus-port": _free_port()}))}
        for url in routers.values():
            _wait_http(url + "/readiness", 60)
        over = "x" * 4000  # past the 1000-token context
        for name, url in routers.items():
            refused = [chat(url, over) for _ in range(50)]
            valid = [chat(url, "hello")[0] for _ in range(200 if name == "rendered" else 20)]
            if name == "rendered":
                assert all(s == 400 and "is longer than the model's context length" in b for s, b in refused), \
                    refused[:3]
                assert valid == [200] * 200, sorted(set(valid))
            else:  # the test can fail: the router's defaults do what the issue says
                assert 503 in valid, sorted(set(valid))
        procs[1].kill()  # the second worker dies outright
        url, killed, deadline = routers["rendered"], time.monotonic(), time.monotonic() + 15
        while time.monotonic() < deadline:
            chat(url, "hello")  # cache_aware sends this prompt where it went before: maybe to the dead worker
            healthy = [w["url"] for w in Router(url).workers() if w.get("is_healthy")]
            if healthy == [workers[0]]:
                break
            time.sleep(0.1)
        # out after its health checks fail health-failure-threshold times (3 x 1 s here); every request served after
        assert healthy == [workers[0]], healthy
        assert time.monotonic() - killed < 3 * 1 + 3
        assert [chat(url, "hello %d" % i)[0] for i in range(20)] == [200] * 20
    finally:
        _stop(procs)


# The options of the routers started with no worker below: checks every second, no breaker (as the role renders it).
BARE = {"disable-circuit-breaker": True, "health-check-interval-secs": 1}


def _register(members_file):
    """The router unit's ExecStartPost, as systemd runs it."""
    script = ROOT / "roles" / "sglang_router" / "files" / "register_workers.py"
    return subprocess.run([sys.executable, str(script), "--members-file", str(members_file), "--timeout", "30"],
                          capture_output=True, text=True, timeout=60)


class HealthyPoller:
    """GET /workers every 0.2 s (the acceptance's poll): the fewest workers listed healthy at any poll."""

    def __init__(self, router):
        self.router, self.fewest, self.polls, self.stop = router, None, 0, threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self.stop.is_set():
            healthy = sum(1 for w in Router(self.router).workers() if w.get("is_healthy"))
            self.fewest = healthy if self.fewest is None else min(self.fewest, healthy)
            self.polls += 1
            self.stop.wait(0.2)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(timeout=5)


def test_a_restarted_router_relearns_every_member_and_only_them(tmp_path):
    """The real router keeps nothing of POST /workers across a restart. The unit's ExecStartPost (register_workers.py)
    registers the membership file's workers: a member that joined through the module (members_file) is listed healthy
    again after a restart, and one that left is not."""
    sim = _sim_package(tmp_path / "sim")
    procs = []
    try:
        workers = [_start_sim(procs, sim, {"SGLANG_SIM_STATE_DIR": str(tmp_path / ("s%d" % i))}) for i in range(3)]
        for w in workers:
            _wait_http(w + "/health", 90)
        router = _start_router(procs, [], BARE)
        members = tmp_path / "workers.json"
        first = _register(members)
        assert first.returncode == 0 and "no membership file" in first.stdout
        members.write_text(json.dumps({"router_url": router, "workers": workers[:1]}))
        assert _register(members).returncode == 0
        params = {"members_file": str(members), "state": "present", "timeout": 30, "poll_interval": 0.2,
                  "request_timeout": 5}
        for w in workers[1:]:
            sglang_router_workers.run(dict(params, worker_url=w), check_mode=False)
        sglang_router_workers.run(dict(params, worker_url=workers[1], state="absent"), check_mode=False)
        before = sorted(w["url"] for w in Router(router).workers() if w["is_healthy"])
        assert before == sorted([workers[0], workers[2]])

        procs[-1].terminate()
        procs[-1].wait(timeout=30)
        restarted = _start_router(procs, [], BARE, port=int(router.rsplit(":", 1)[1]))
        registered = _register(members)
        assert registered.returncode == 0, registered.stderr
        assert "registered 2 of 2 member(s)" in registered.stdout
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            after = sorted(w["url"] for w in Router(restarted).workers() if w["is_healthy"])
            if after == before:
                break
            time.sleep(0.2)
        assert after == before
    finally:
        _stop(procs)


def test_an_add_and_a_remove_back_to_back_never_leave_the_router_without_a_healthy_worker(tmp_path):
    """sgl-project/sglang#38524: the router's add and remove are independent background jobs. Through the product
    (sglang_router_workers: present waits until the new worker is listed healthy; absent's capacity guard), an add of
    B then a remove of A back to back, and the same pair started at the same instant, never leave a 0.2 s poll with
    no healthy worker; the concurrent remove is refused by the guard or waits its turn, never runs first."""
    sim = _sim_package(tmp_path / "sim")
    procs = []
    try:
        a, b = [_start_sim(procs, sim, {"SGLANG_SIM_STATE_DIR": str(tmp_path / ("s%d" % i))}) for i in range(2)]
        for w in (a, b):
            _wait_http(w + "/health", 90)
        router = _start_router(procs, [], BARE)
        _wait_http(router + "/liveness", 30)
        members = tmp_path / "workers.json"
        members.write_text(json.dumps({"router_url": router, "workers": [a]}))
        assert _register(members).returncode == 0
        params = {"members_file": str(members), "timeout": 30, "poll_interval": 0.2, "request_timeout": 5,
                  "min_healthy_others": 1}
        sglang_router_workers.run(dict(params, worker_url=a, state="present"), check_mode=False)  # A is serving
        with HealthyPoller(router) as back_to_back:
            time.sleep(0.5)
            sglang_router_workers.run(dict(params, worker_url=b, state="present"), check_mode=False)
            sglang_router_workers.run(dict(params, worker_url=a, state="absent"), check_mode=False)
            time.sleep(0.5)
        assert back_to_back.fewest == 1 and back_to_back.polls >= 3
        assert [w["url"] for w in Router(router).workers()] == [b]
        assert json.loads(members.read_text())["workers"] == [b]

        outcome = {}

        def job(name, worker, state):
            try:
                outcome[name] = sglang_router_workers.run(dict(params, worker_url=worker, state=state), False)
            except EndpointError as exc:
                outcome[name] = exc

        with HealthyPoller(router) as concurrent:
            jobs = [threading.Thread(target=job, args=("add", a, "present")),
                    threading.Thread(target=job, args=("remove", b, "absent"))]
            for t in jobs:
                t.start()
            for t in jobs:
                t.join(timeout=60)
            time.sleep(0.5)
        assert concurrent.fewest >= 1, "a poll saw no healthy worker"
        assert not isinstance(outcome["add"], Exception) and outcome["add"]["worker"]["is_healthy"]
        if isinstance(outcome["remove"], Exception):
            assert "the capacity guard needs 1" in str(outcome["remove"])
    finally:
        _stop(procs)


def test_the_canary_soak_catches_a_worker_that_fails_one_request_in_twenty(tmp_path):
    """The real router retries the 500 elsewhere, so every client request succeeds; the soak (module sglang_canary)
    still sees the canary's 5 % in the router's per-worker outcomes and fails naming it; the same soak over a healthy
    canary passes, judged."""
    from ansible_collections.blackwell.sglang.plugins.modules import sglang_canary

    sim = _sim_package(tmp_path / "sim")
    procs = []
    try:
        good = _start_sim(procs, sim, {"SGLANG_SIM_STATE_DIR": str(tmp_path / "g")}, ["--enable-metrics"])
        bad = _start_sim(procs, sim, {"SGLANG_SIM_STATE_DIR": str(tmp_path / "b"), "SGLANG_SIM_ERROR_FRACTION": "0.05"},
                         ["--enable-metrics"])
        for w in (good, bad):
            _wait_http(w + "/health", 90)
        mport = _free_port()
        router = _start_router(procs, [], dict(BARE, **{"policy": "round_robin", "prometheus-host": "127.0.0.1",
                                                        "prometheus-port": mport}))
        _wait_http(router + "/liveness", 30)
        for w in (good, bad):
            sglang_router_workers.run(_params(router, w, "present"), check_mode=False)
        stop, codes = threading.Event(), []

        def load():
            body = {"model": "m", "max_tokens": 8, "chat_template_kwargs": {"thinking": False},
                    "messages": [{"role": "user", "content": "hi"}]}
            while not stop.is_set():
                req = urllib.request.Request(router + "/v1/chat/completions", data=json.dumps(body).encode(),
                                             method="POST", headers={"Content-Type": "application/json"})
                try:
                    with urllib.request.urlopen(req, timeout=30) as resp:
                        codes.append(resp.status)
                except urllib.error.HTTPError as exc:
                    codes.append(exc.code)

        threads = [threading.Thread(target=load, daemon=True) for _ in range(4)]
        for thread in threads:
            thread.start()
        params = {"router_url": router, "router_metrics_url": f"http://127.0.0.1:{mport}/metrics", "soak_s": 8,
                  "poll_interval": 1, "max_error_rate_increase": 0.01, "max_p99_ratio": 1.5, "min_requests": 20,
                  "min_latency_requests": 20, "request_timeout": 5}
        try:
            caught = sglang_canary.run(dict(params, canary=bad, others=[good]), check_mode=False)
            passed = sglang_canary.run(dict(params, canary=good, others=[bad], max_p99_ratio=3.0), check_mode=False)
        finally:
            stop.set()
            for thread in threads:
                thread.join(timeout=30)
        assert caught.get("failed") and re.search(r"error rate \d+\.\d % \(\d+ of \d+ requests\)", caught["msg"]), caught
        assert caught["figures"]["canary"]["failures"] >= 1 and caught["figures"]["others"]["failures"] == 0
        assert caught["soaked_s"] < 8, "a failing canary is stopped at the first poll that shows it"
        assert passed["passed"] and passed["judged"] and passed["soaked_s"] >= 8, passed
        assert passed["figures"]["canary"]["p99_s"] is not None
        assert set(codes) == {200}, "the router retried every 500: clients saw none"
    finally:
        _stop(procs)
