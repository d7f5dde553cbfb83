"""sglang_router_workers and sglang_drain (sglang_router_api, sglang_inflight) without a network.

The real router and simulator are exercised in tests/contract/test_router_api.py; here fakes stand in for
the cases the real ones cannot be made to show on demand: a router that never lists the worker healthy, one
that never forgets a removed worker, a server that never drains.
"""

import json

import pytest

from ansible_collections.blackwell.sglang.plugins.modules import sglang_drain
from ansible_collections.blackwell.sglang.plugins.modules import sglang_router_workers
from ansible_collections.blackwell.sglang.plugins.module_utils.http.http_client import (
    EndpointError, NoAnswer, normalise_url,
)
from ansible_collections.blackwell.sglang.plugins.module_utils.fleet.sglang_router_api import RouterError
from ansible_collections.blackwell.sglang.plugins.filter.sglang_argv import sglang_router_argv

ROUTER_VERSION = "0.3.2"  # the snapshot these expectations were written against (plugins/data/sglang_router_cli_0.3.2.json)

class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


class FakeRouter:
    """GET/POST/DELETE /workers with a knob for each misbehaviour."""

    def __init__(self, workers=(), healthy_after=0, forget=True):
        self.list = [dict(w) for w in workers]
        self.healthy_after, self.forget = healthy_after, forget
        self.polls, self.calls = 0, []

    def workers(self):
        self.polls += 1
        for w in self.list:
            if self.polls > self.healthy_after:
                w["is_healthy"] = True
        return [dict(w) for w in self.list]

    def find(self, url):
        return [w for w in self.workers() if normalise_url(w["url"]) == normalise_url(url)]

    def add(self, url):
        self.calls.append(("POST", url))
        self.list.append({"id": "new", "url": url, "is_healthy": False})

    def remove(self, worker_id):
        self.calls.append(("DELETE", worker_id))
        if self.forget:
            self.list = [w for w in self.list if w["id"] != worker_id]


def _params(state, timeout=10):
    return {"router_url": "http://r:30000", "worker_url": "http://n1:30000/", "state": state, "timeout": timeout,
            "poll_interval": 0.5, "request_timeout": 5}


def test_present_adds_once_and_waits_for_health():
    clock = Clock()
    router = FakeRouter([{"id": "a", "url": "http://n0:30000", "is_healthy": True}], healthy_after=4)
    result = sglang_router_workers.run(_params("present"), False, router=router, clock=clock, sleep=clock.sleep)
    assert result["changed"] and result["worker"]["is_healthy"] and router.calls == [("POST", "http://n1:30000")]
    assert result["waited_s"] > 0


def test_present_fails_naming_the_worker_when_never_healthy():
    clock = Clock()
    router = FakeRouter([], healthy_after=10 ** 6)
    with pytest.raises(RouterError, match=r"does not list http://n1:30000 as healthy 10 s after adding it \(listed"):
        sglang_router_workers.run(_params("present"), False, router=router, clock=clock, sleep=clock.sleep)


def test_absent_removes_every_entry_and_fails_when_the_router_keeps_it():
    clock = Clock()
    both = [{"id": "x", "url": "http://n1:30000", "is_healthy": True},
            {"id": "y", "url": "http://N1:30000/", "is_healthy": True}]
    router = FakeRouter(both)
    result = sglang_router_workers.run(_params("absent"), False, router=router, clock=clock, sleep=clock.sleep)
    assert result["changed"] and router.calls == [("DELETE", "x"), ("DELETE", "y")] and result["workers"] == []
    stuck = FakeRouter(both[:1], forget=False)
    with pytest.raises(RouterError, match="still listed by the router"):
        sglang_router_workers.run(_params("absent"), False, router=stuck, clock=clock, sleep=clock.sleep)


def test_check_mode_changes_nothing():
    router = FakeRouter([{"id": "x", "url": "http://n1:30000", "is_healthy": True}])
    assert sglang_router_workers.run(_params("absent"), True, router=router)["changed"]
    assert router.calls == []
    assert not sglang_router_workers.run(_params("present"), True, router=router)["changed"]


def _members(path, workers, router_url="http://127.0.0.1:30000"):
    path.write_text(json.dumps({"router_url": router_url, "workers": workers}))
    return str(path)


def test_the_members_file_follows_a_join_and_a_leave_and_gives_the_router_url(tmp_path):
    """members_file: a worker joins the file only once the router lists it healthy, leaves it before its DELETE (a
    router restarted in between registers members only), and a run without router_url finds the router there."""
    clock = Clock()
    path = _members(tmp_path / "workers.json", ["http://n0:30000"])
    router = FakeRouter([{"id": "a", "url": "http://n0:30000", "is_healthy": True}], healthy_after=3)
    seen = []
    original = router.workers

    def workers():
        listed = original()
        healthy = any(w["url"] == "http://n1:30000" and w["is_healthy"] for w in listed)
        seen.append(("http://n1:30000" in json.loads(open(path).read())["workers"], healthy))
        return listed

    router.workers = workers
    params = dict(_params("present"), router_url=None, members_file=path)
    joined = sglang_router_workers.run(params, False, router=router, clock=clock, sleep=clock.sleep)
    assert joined["changed"] and joined["members"] == ["http://n0:30000", "http://n1:30000"]
    assert (True, False) not in seen and (True, True) in seen, "joined the file before it was listed healthy"
    assert json.loads(open(path).read()) == {"router_url": "http://127.0.0.1:30000",
                                             "workers": ["http://n0:30000", "http://n1:30000"]}
    again = sglang_router_workers.run(params, False, router=router, clock=clock, sleep=clock.sleep)
    assert not again["changed"]

    seen.clear()
    router.remove = lambda worker_id: seen.append(("DELETE", json.loads(open(path).read())["workers"])) or \
        router.list.clear()
    left = sglang_router_workers.run(dict(params, state="absent"), False, router=router, clock=clock, sleep=clock.sleep)
    assert left["changed"] and left["members"] == ["http://n0:30000"]
    assert ("DELETE", ["http://n0:30000"]) in seen, "the file still named the worker when the router dropped it"


def test_the_members_file_alone_is_a_change_and_check_mode_writes_nothing(tmp_path):
    """A member the router already lists healthy but the file lacks (or the reverse) is a change; check mode reports
    it and leaves the file; a missing file is an error naming it (the router was never deployed)."""
    path = _members(tmp_path / "workers.json", [])
    router = FakeRouter([{"id": "a", "url": "http://n1:30000", "is_healthy": True}])
    params = dict(_params("present"), members_file=path)
    checked = sglang_router_workers.run(params, True, router=router)
    assert checked["changed"] and checked["members"] == ["http://n1:30000"]
    assert json.loads(open(path).read())["workers"] == [] and router.calls == []
    assert sglang_router_workers.run(params, False, router=router)["changed"]
    assert not sglang_router_workers.run(params, False, router=router)["changed"]
    with pytest.raises(EndpointError, match="missing.json does not exist: the router role writes it"):
        sglang_router_workers.run(dict(params, members_file=str(tmp_path / "missing.json")), False, router=router)


class FakeServer:
    base_url = "http://n1:30000"

    def __init__(self, series):
        self.series = list(series)

    def request(self, method, path, body=None, expect=(200,)):
        running = self.series.pop(0) if len(self.series) > 1 else self.series[0]
        if running is None:
            return 404, '{"detail":"Not Found"}'
        return 200, ('sglang:num_running_reqs{tp_rank="0"} %s\nsglang:num_queue_reqs{tp_rank="0"} 0\n' % running)


DRAIN = {"url": "http://n1:30000", "metrics": ["sglang:num_running_reqs", "sglang:num_queue_reqs"], "timeout": 5,
         "poll_interval": 0.5, "settle_polls": 2, "request_timeout": 5}


def test_drain_needs_consecutive_zeros():
    clock = Clock()
    server = FakeServer([2, 0, 1, 0, 0, 5])
    result = sglang_drain.run(DRAIN, False, client=server, clock=clock, sleep=clock.sleep)
    assert result["in_flight_initial"] == 2 and result["in_flight"] == 0 and server.series == [5]


def test_drain_settle_polls_are_poll_interval_apart():
    """An idle server still gets its settle polls spread over time: the gauges are written when a batch is logged,
    so two reads in the same instant cannot show a request the router sent just before the deregistration."""
    clock = Clock()
    server = FakeServer([0, 0, 0])
    result = sglang_drain.run(DRAIN, False, client=server, clock=clock, sleep=clock.sleep)
    assert result["in_flight_initial"] == 0 and result["waited_s"] == DRAIN["poll_interval"]
    late = FakeServer([0, 1, 0, 0])
    result = sglang_drain.run(DRAIN, False, client=late, clock=clock, sleep=clock.sleep)
    assert result["in_flight"] == 0 and result["waited_s"] == 3 * DRAIN["poll_interval"]


def test_drain_times_out_with_the_numbers():
    clock = Clock()
    with pytest.raises(EndpointError, match=r"still has 3 request\(s\) in flight after 5 s .*started with 3"):
        sglang_drain.run(DRAIN, False, client=FakeServer([3]), clock=clock, sleep=clock.sleep)


def test_drain_without_metrics_says_enable_metrics():
    with pytest.raises(EndpointError, match="--enable-metrics"):
        sglang_drain.run(DRAIN, False, client=FakeServer([None]))


def test_absent_with_drain_deregisters_first_then_waits_for_zero():
    """One module run: the router forgets the worker, then its /metrics (as the router reaches it) read 0 twice."""
    clock = Clock()
    router = FakeRouter([{"id": "x", "url": "http://n1:30000", "is_healthy": True},
                         {"id": "o", "url": "http://n0:30000", "is_healthy": True}])
    order = []

    class Worker(FakeServer):
        def request(self, *a, **k):
            order.append(("metrics", list(router.calls)))
            return FakeServer.request(self, *a, **k)

    params = dict(_params("absent"), drain_timeout=30, min_healthy_others=1)
    result = sglang_router_workers.run(params, False, router=router, clock=clock, sleep=clock.sleep,
                                       worker=Worker([3, 1, 0, 0]))
    assert result["changed"] and router.calls == [("DELETE", "x")]
    assert all(calls == [("DELETE", "x")] for _what, calls in order)  # no /metrics read before the DELETE
    drain = result["drain"]
    assert drain["in_flight_initial"] == 3 and drain["in_flight"] == 0 and not drain["server_down"]
    assert drain["waited_s"] == 3 * 0.5  # sglang_inflight's spacing, not the router poll interval


def test_absent_with_drain_refused_by_the_guard_reads_no_metrics_and_times_out_with_counts():
    clock = Clock()
    lonely = FakeRouter([{"id": "x", "url": "http://n1:30000", "is_healthy": True},
                         {"id": "o", "url": "http://n0:30000", "is_healthy": False}], healthy_after=10 ** 6)
    worker = FakeServer([2])
    with pytest.raises(RouterError, match="capacity guard needs 1"):
        sglang_router_workers.run(dict(_params("absent"), drain_timeout=30, min_healthy_others=1), False,
                                  router=lonely, clock=clock, sleep=clock.sleep, worker=worker)
    assert lonely.calls == [] and worker.series == [2]
    busy = FakeRouter([])  # already out of rotation (a re-run): it still waits for what the worker holds
    with pytest.raises(EndpointError, match=r"still has 2 request\(s\) in flight after 5 s"):
        sglang_router_workers.run(dict(_params("absent"), drain_timeout=5), False, router=busy, clock=clock,
                                  sleep=clock.sleep, worker=FakeServer([2]))


def test_absent_without_drain_timeout_never_reads_metrics():
    router = FakeRouter([{"id": "x", "url": "http://n1:30000", "is_healthy": True}])

    class Untouchable:
        def request(self, *a, **k):
            raise AssertionError("read /metrics without drain_timeout")

    result = sglang_router_workers.run(dict(_params("absent"), drain_timeout=0), False, router=router,
                                       worker=Untouchable())
    assert "drain" not in result


def test_router_argv_validates_against_the_real_parser_snapshot():
    argv = sglang_router_argv({"host": "0.0.0.0", "port": 30000, "worker-urls": ["http://a:30000", "http://b:30000"],
                               "policy": "cache_aware", "health_check_interval_secs": 5}, ROUTER_VERSION)
    assert argv == ["--host", "0.0.0.0", "--port", "30000", "--worker-urls", "http://a:30000", "http://b:30000",
                    "--policy", "cache_aware", "--health-check-interval-secs", "5"]
    with pytest.raises(Exception) as err:
        sglang_router_argv({"policy": "fastest", "health-check-interval": 5, "port": "x", "api-key": "s3cret"},
                           ROUTER_VERSION)
    text = str(err.value)
    for needle in ("'fastest' is not a valid choice in sglang-router 0.3.2", "--health-check-interval is not an "
                   "option of sglang-router 0.3.2; did you mean --health-check-interval-secs",
                   "--port expects an integer", "--api-key would put a secret"):
        assert needle in text


def test_drain_of_a_stopped_server_is_immediate():
    class Down:
        base_url = "http://n1:30000"

        def request(self, *a, **k):
            raise NoAnswer("http://n1:30000/metrics", "Connection refused", "GET")

    result = sglang_drain.run(DRAIN, False, client=Down())
    assert result["server_down"] and result["in_flight"] == 0


def test_worker_urls_are_what_each_node_published():
    """The router restates no worker port or address: each GPU node's sglang_service_endpoint.router_url."""
    from ansible_collections.blackwell.sglang.plugins.filter.router import sglang_router_worker_url, sglang_router_worker_urls, sglang_router_workers

    def ep(url, host="0.0.0.0"):
        return {"sglang_service_endpoint": {"host": host, "router_url": url}}

    hostvars = {"gpu-0": ep("http://10.0.0.5:30000"), "gpu-1": ep("http://gpu-1.internal:31000"),
                "v6": ep("https://[fd00::7]:32000"), "lo": ep(None, "127.0.0.1"), "dup": ep("http://10.0.0.5:30000"),
                "bare": {}}
    assert sglang_router_worker_urls(["gpu-0", "gpu-1", "v6"], hostvars) == [
        "http://10.0.0.5:30000", "http://gpu-1.internal:31000", "https://[fd00::7]:32000"]
    with pytest.raises(Exception, match="same worker URL: http://10.0.0.5:30000"):
        sglang_router_worker_urls(["gpu-0", "dup"], hostvars)
    with pytest.raises(Exception, match="listens on 127.0.0.1 only"):
        sglang_router_worker_url("lo", hostvars)
    found = sglang_router_workers(["gpu-0", "lo", "bare", "dup"], hostvars)
    assert found["urls"] == ["http://10.0.0.5:30000", "http://10.0.0.5:30000"]
    assert [p.split(" ")[0] for p in found["problems"]] == ["lo's", "bare", "two"]
    assert sglang_router_workers([], hostvars)["problems"][0].startswith("the router's worker group has no hosts")


def test_a_multi_node_group_is_one_worker_at_rank_0s_url_and_a_follower_never_a_worker():
    """Issue 41: SGLang 0.5.23 serves a dummy health app on a node of rank >= 1 (/health 200, /v1 404): registered, the
    router would pass its health checks and send it requests it can only answer 404."""
    from ansible_collections.blackwell.sglang.plugins.filter.sglang_endpoint import sglang_service_endpoint
    from ansible_collections.blackwell.sglang.plugins.filter.router import (
        sglang_router_worker_url, sglang_router_worker_urls, sglang_router_workers)

    group = ["gpu-0", "gpu-1"]
    hostvars = {
        "gpu-0": {"sglang_service_endpoint": sglang_service_endpoint(
            {"host": "0.0.0.0", "nnodes": 2, "node-rank": 0}, "0.5.23", "u", "gpu-0", nodes=group)},
        "gpu-1": {"sglang_service_endpoint": sglang_service_endpoint(
            {"host": "0.0.0.0", "nnodes": 2, "node-rank": 1}, "0.5.23", "u", "gpu-1", nodes=group)},
        "gpu-2": {"sglang_service_endpoint": sglang_service_endpoint({"host": "0.0.0.0"}, "0.5.23", "u", "gpu-2")},
    }
    follower = hostvars["gpu-1"]["sglang_service_endpoint"]
    assert follower["router_url"] is None and follower["serves_api"] is False and follower["node_rank"] == 1
    assert follower["group"] == group and hostvars["gpu-2"]["sglang_service_endpoint"]["group"] == []
    assert sglang_service_endpoint({"nnodes": 2, "node-rank": 1, "dist-init-addr": "[fd00::1]:50000"}, "0.5.23", "u",
                                   nodes=group)["rendezvous"] == {"host": "fd00::1", "port": 50000}
    found = sglang_router_workers(["gpu-0", "gpu-1", "gpu-2"], hostvars)
    assert found == {"urls": ["http://gpu-0:30000", "http://gpu-2:30000"], "problems": []}
    assert sglang_router_worker_urls(["gpu-0", "gpu-1", "gpu-2"], hostvars) == found["urls"]
    with pytest.raises(Exception, match="gpu-1 is node rank 1 of the multi-node group gpu-0, gpu-1: only rank 0 "
                                        "serves the API"):
        sglang_router_worker_url("gpu-1", hostvars)


def test_the_capacity_guard_refuses_to_drain_a_second_node_while_another_is_unhealthy():
    """Issue 15: a node already unhealthy makes the guard refuse to take another out of rotation (nothing removed)."""
    fleet = [{"id": "x", "url": "http://n1:30000", "is_healthy": True},
             {"id": "y", "url": "http://n0:30000", "is_healthy": False}]
    router = FakeRouter(fleet, healthy_after=10 ** 6)
    with pytest.raises(RouterError, match=r"refusing to take http://n1:30000 out of rotation: 0 other worker\(s\) "
                                          r"healthy \(none\), the capacity guard needs 1; unhealthy: http://n0:30000"):
        sglang_router_workers.run(dict(_params("absent"), min_healthy_others=1), False, router=router)
    assert router.calls == []
    fleet[1]["is_healthy"] = True
    router = FakeRouter(fleet, healthy_after=10 ** 6)
    assert sglang_router_workers.run(dict(_params("absent"), min_healthy_others=1), False, router=router,
                                     clock=Clock(), sleep=Clock().sleep)["changed"]


def test_the_drain_asks_health_once_so_a_busy_spells_unhealthy_does_not_force_exit_the_restart():
    """SGLang 0.5.23 stays UnHealthy after one /health 503 until a later /health succeeds, and a SIGTERM then
    force-exits (tokenizer_manager.py sigterm_watchdog). Out of rotation nobody probes it: the drain asks once, after
    the scheduler emptied; its answer is reported, never a failure. Not asked in check mode or of a server that is
    down."""
    clock = Clock()
    router = FakeRouter([{"id": "x", "url": "http://n1:30000", "is_healthy": True},
                         {"id": "o", "url": "http://n0:30000", "is_healthy": True}])
    asked = []

    class Health:
        base_url = "http://n1:30000"

        def __init__(self, status):
            self.status = status

        def request(self, method, path, body=None, expect=(200,)):
            asked.append((method, path, list(expect)))
            return self.status, ""

    params = dict(_params("absent"), drain_timeout=30, min_healthy_others=1, health_check_timeout=20)
    result = sglang_router_workers.run(params, False, router=router, clock=clock, sleep=clock.sleep,
                                       worker=FakeServer([1, 0, 0]), health=Health(200))
    assert asked == [("GET", "/health", [200, 503])] and result["drain"]["health_after"] == 200
    router = FakeRouter([{"id": "x", "url": "http://n1:30000", "is_healthy": True},
                         {"id": "o", "url": "http://n0:30000", "is_healthy": True}])
    result = sglang_router_workers.run(params, False, router=router, clock=clock, sleep=clock.sleep,
                                       worker=FakeServer([0, 0]), health=Health(503))
    assert result["drain"]["health_after"] == 503  # reported, the switch goes on
    asked.clear()
    router = FakeRouter([{"id": "x", "url": "http://n1:30000", "is_healthy": True},
                         {"id": "o", "url": "http://n0:30000", "is_healthy": True}])
    result = sglang_router_workers.run(params, True, router=router, worker=FakeServer([0]), health=Health(200))
    assert asked == [] and result["drain"]["health_after"] is None


def test_members_adds_first_then_removes_and_writes_the_file_once(tmp_path):
    """sglang_router_members: the file is written before anything changes live; the missing worker is listed healthy
    before the extra one is deregistered (never fewer healthy workers than needed, sgl-project/sglang#38524); a
    second run changes nothing; check mode reports and touches neither the file nor the router."""
    from ansible_collections.blackwell.sglang.plugins.modules import sglang_router_members

    clock = Clock()
    path = tmp_path / "workers.json"
    router = FakeRouter([{"id": "old", "url": "http://n0:30000", "is_healthy": True}], healthy_after=3)
    order = []
    add, remove = router.add, router.remove
    router.add = lambda url: order.append(("POST", url, path.exists())) or add(url)
    router.remove = lambda worker_id: order.append(("DELETE", worker_id, [w["is_healthy"] for w in router.list
                                                                          if w["url"] == "http://n1:30000"])) \
        or remove(worker_id)
    params = {"router_url": "http://127.0.0.1:30000/", "members_file": str(path), "workers": ["http://n1:30000/"],
              "timeout": 30, "drain_timeout": 0, "poll_interval": 0.5, "request_timeout": 5}
    checked = sglang_router_members.run(params, True, router=router)
    assert checked["changed"] and checked["added"] == ["http://n1:30000"] and checked["removed"] == ["http://n0:30000"]
    assert not path.exists() and order == []
    done = sglang_router_members.run(params, False, router=router, clock=clock, sleep=clock.sleep)
    assert order == [("POST", "http://n1:30000", True), ("DELETE", "old", [True])]
    assert done["added"] == ["http://n1:30000"] and done["removed"] == ["http://n0:30000"] and done["file_changed"]
    assert json.loads(path.read_text()) == {"router_url": "http://127.0.0.1:30000", "workers": ["http://n1:30000"]}
    assert done["workers"] == [{"url": "http://n1:30000", "is_healthy": True}]
    again = sglang_router_members.run(params, False, router=router, clock=clock, sleep=clock.sleep)
    assert not again["changed"] and again["added"] == [] and again["removed"] == []


def test_members_removes_nothing_when_a_new_member_never_turns_healthy(tmp_path):
    from ansible_collections.blackwell.sglang.plugins.modules import sglang_router_members

    clock = Clock()
    router = FakeRouter([{"id": "old", "url": "http://n0:30000", "is_healthy": True}], healthy_after=10 ** 6)
    params = {"router_url": "http://127.0.0.1:30000", "members_file": str(tmp_path / "w.json"),
              "workers": ["http://n1:30000"], "timeout": 10, "drain_timeout": 0, "poll_interval": 0.5,
              "request_timeout": 5}
    with pytest.raises(RouterError, match=r"every member healthy 10 s after adding them: http://n1:30000 unhealthy; "
                                          r"nothing was removed"):
        sglang_router_members.run(params, False, router=router, clock=clock, sleep=clock.sleep)
    assert [c[0] for c in router.calls] == ["POST"]


def test_members_waits_for_a_listed_member_that_is_busy_and_reports_no_change(tmp_path):
    """Issue 59: a deploy right after a rolling redeploy said changed=1 on the router - a member listed but unhealthy at
    that instant (a busy spell) was counted as missing, although nothing was added. It is waited for, not a change."""
    from ansible_collections.blackwell.sglang.plugins.modules import sglang_router_members

    clock = Clock()
    path = tmp_path / "w.json"
    params = {"router_url": "http://127.0.0.1:30000", "members_file": str(path), "workers": ["http://n0:30000"],
              "timeout": 10, "drain_timeout": 0, "poll_interval": 0.5, "request_timeout": 5}
    path.write_text(json.dumps({"router_url": "http://127.0.0.1:30000", "workers": ["http://n0:30000"]}))
    router = FakeRouter([{"id": "a", "url": "http://n0:30000", "is_healthy": False}], healthy_after=3)
    result = sglang_router_members.run(params, False, router=router, clock=clock, sleep=clock.sleep)
    assert not result["changed"] and result["added"] == [] and router.calls == []
    assert router.polls > 3  # it waited until the member was healthy again
    never = FakeRouter([{"id": "a", "url": "http://n0:30000", "is_healthy": False}], healthy_after=10 ** 6)
    with pytest.raises(RouterError, match=r"http://n0:30000 unhealthy"):
        sglang_router_members.run(params, False, router=never, clock=clock, sleep=clock.sleep)


def _register_workers():
    import importlib.util
    import pathlib

    path = pathlib.Path(__file__).resolve().parents[4] / "roles" / "sglang_router" / "files" / "register_workers.py"
    spec = importlib.util.spec_from_file_location("register_workers", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_cold_start_registration_waits_for_liveness_and_posts_every_member(tmp_path, capsys):
    """files/register_workers.py (the router unit's ExecStartPost): no file yet is a first start (exit 0, nothing
    posted); then every member is posted once /liveness answers; a router that never answers, a refused POST or an
    unreadable file exit 1 naming it."""
    script = _register_workers()
    clock = Clock()
    calls = []
    state = {"live_after": 3}

    def request(method, url, body=None, timeout=5.0):
        calls.append((method, url, body))
        if url.endswith("/liveness"):
            state["live_after"] -= 1
            if state["live_after"] > 0:
                raise OSError("connection refused")
            return 200, "ok"
        return (202 if body["url"] != "http://bad:30000" else 400), "{}"

    path = tmp_path / "workers.json"
    assert script.main(["--members-file", str(path)], request=request, clock=clock, sleep=clock.sleep) == 0
    assert calls == [] and "no membership file" in capsys.readouterr().out
    path.write_text(json.dumps({"router_url": "http://127.0.0.1:30000/", "workers": ["http://n0:30000",
                                                                                    "http://n1:30000"]}))
    assert script.main(["--members-file", str(path)], request=request, clock=clock, sleep=clock.sleep) == 0
    assert [c for c in calls if c[0] == "POST"] == [("POST", "http://127.0.0.1:30000/workers", {"url": u})
                                                    for u in ("http://n0:30000", "http://n1:30000")]
    assert [c[0] for c in calls[:3]] == ["GET"] * 3 and "registered 2 of 2 member(s)" in capsys.readouterr().out
    path.write_text(json.dumps({"router_url": "http://127.0.0.1:30000", "workers": ["http://bad:30000"]}))
    assert script.main(["--members-file", str(path)], request=request, clock=clock, sleep=clock.sleep) == 1
    assert "POST http://127.0.0.1:30000/workers" in capsys.readouterr().err
    state["live_after"] = 10 ** 6
    assert script.main(["--members-file", str(path), "--timeout", "5"], request=request, clock=clock,
                       sleep=clock.sleep) == 1
    assert "did not answer GET /liveness within 5 s" in capsys.readouterr().err
    path.write_text("{not json")
    assert script.main(["--members-file", str(path)], request=request, clock=clock, sleep=clock.sleep) == 1
    assert "cannot read the router's membership file" in capsys.readouterr().err
