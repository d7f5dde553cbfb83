"""sglang_router_serving (plugins/filter/router.py): the router's members are the nodes whose health verdict is ready
and whose answers passed (issue 59: a plain deploy.yml used to make every inventory node a member, the one whose
answers are garbage included)."""

import pytest

from ansible_collections.blackwell.sglang.plugins.filter.router import sglang_router_serving, serving_judgement

READY = {"verdict": "ready", "phase": "ready", "smoke_summary": "passed 7/7"}
GARBAGE = {"verdict": "ready", "phase": "ready", "smoke_summary": "unhealthy answers: FAILED answers,chat"}
CRASHED = {"verdict": "crashed", "phase": "loading_weights", "reason": "scheduler died at shard 44/64",
           "smoke_summary": "not run"}


def node(name, report=None, reached=True, published=None, gathered=True, rank=0):
    hv = {"sglang_service_endpoint": {"router_url": "http://%s:30000" % name, "serves_api": rank == 0,
                                      "node_rank": rank}}
    if report is not None:
        hv["smoke_health_report"] = report
    if reached:
        hv["deployment_reached_router"] = True
    if gathered:
        hv["ansible_local"] = {"sglang_serving": published} if published is not None else {}
    return hv


def serving(hostvars, run_hosts=None, check_mode=False):
    return sglang_router_serving(list(hostvars), hostvars, list(hostvars) if run_hosts is None else run_hosts,
                                 "sglang_serving", check_mode)


def test_a_node_whose_answers_failed_is_left_out_naming_the_smoke():
    got = serving({"g0": node("g0", READY), "g1": node("g1", GARBAGE)})
    assert got["urls"] == ["http://g0:30000"] and got["hosts"] == ["g0"]
    assert [e["host"] for e in got["left_out"]] == ["g1"]
    assert "answers failed the smoke: unhealthy answers: FAILED answers,chat (this run)" in got["left_out"][0]["why"]
    assert got["left_out_lines"] == ["g1 (http://g1:30000): " + got["left_out"][0]["why"]]


def test_a_node_not_ready_is_left_out_with_its_verdict_and_phase():
    got = serving({"g0": node("g0", CRASHED)})
    assert got["urls"] == []
    assert got["left_out"][0]["why"].startswith("its health verdict was crashed in phase loading_weights "
                                                "(scheduler died at shard 44/64)")


def test_a_node_restarted_in_this_run_that_failed_before_its_verdict_is_left_out_whatever_it_published():
    restarted = dict(node("g0", None, reached=False, published=READY), sglang_service_restarted=True)
    got = serving({"g0": restarted, "g1": node("g1", READY)})
    assert got["hosts"] == ["g1"]
    assert got["left_out"] == [{"host": "g0", "url": "http://g0:30000", "why": "its unit was (re)started in this run "
                                                                               "and it failed before its health verdict"}]


def test_a_node_that_failed_before_anything_restarted_it_still_serves_what_passed():
    # e.g. a package mirror down in host_prerequisites: the node still runs what its published verdict judged, and
    # taking every such node out would empty the fleet for an apt error (seen in the sandbox)
    hv = {"g0": node("g0", None, reached=False, published=READY), "g1": node("g1", None, reached=False,
                                                                              published=GARBAGE)}
    got = serving(hv)
    assert got["hosts"] == ["g0"] and [e["host"] for e in got["left_out"]] == ["g1"]
    assert serving({"g0": node("g0", None, reached=False)})["unknown"][0]["host"] == "g0"


def test_without_a_report_of_this_run_the_published_one_judges():
    # --tags sglang_router (no smoke in this run), or a node outside --limit (not in run_hosts)
    hv = {"g0": node("g0", None, published=READY), "g1": node("g1", None, published=GARBAGE),
          "g2": node("g2", None, reached=False, published=READY)}
    got = serving(hv, run_hosts=["g0", "g1"])
    assert got["hosts"] == ["g0", "g2"]
    assert "(its last published report (on the node))" in got["left_out"][0]["why"]


def test_this_runs_report_wins_over_the_published_one():
    assert serving({"g0": node("g0", GARBAGE, published=READY)})["hosts"] == []
    assert serving({"g0": node("g0", READY, published=GARBAGE)})["hosts"] == ["g0"]


def test_a_node_whose_facts_were_not_gathered_is_left_out():
    got = serving({"g0": node("g0", None, gathered=False)}, run_hosts=[])
    assert got["hosts"] == [] and "could not be gathered" in got["left_out"][0]["why"]


@pytest.mark.parametrize("check_mode,members", [(False, []), (True, ["g0"])])
def test_a_reachable_node_that_never_published_a_verdict_is_unknown(check_mode, members):
    got = serving({"g0": node("g0", None)}, check_mode=check_mode)
    assert got["hosts"] == members
    assert [e["host"] for e in got["unknown"]] == ["g0"] and got["unknown"][0]["why"].startswith("g0 has no health verdict")
    assert got["left_out"] == []


def test_a_follower_is_not_judged_its_group_is_one_worker_at_rank_0():
    got = serving({"g1": node("g1", READY), "g2": node("g2", None, reached=False, rank=1)})
    assert got == {"urls": ["http://g1:30000"], "hosts": ["g1"], "left_out": [], "unknown": [], "left_out_lines": []}


def test_a_node_the_router_cannot_reach_is_left_out_with_the_endpoint_problem():
    hv = {"g0": {"sglang_service_endpoint": {"host": "127.0.0.1", "serves_api": True}, "smoke_health_report": READY}}
    got = serving(hv)
    assert got["hosts"] == [] and "which the router cannot reach" in got["left_out"][0]["why"]


@pytest.mark.parametrize("report,why", [
    (READY, None),
    (dict(READY, smoke_summary="not run"), None),  # the functional smoke off: the verdict alone
    (dict(READY, smoke_summary="skipped"), None),  # check mode
    (dict(READY, smoke_summary="FAILED tool_calls"), "it was ready, but its answers failed the smoke: FAILED tool_calls"),
    (dict(READY, smoke_summary="failed"), "it was ready, but its answers failed the smoke: failed"),
    ({"verdict": "removed", "reason": "left the fleet"}, "its health verdict was removed (left the fleet)"),
    ({}, "its health verdict was unknown"),
])
def test_the_judgement(report, why):
    assert serving_judgement(report) == why


def test_the_published_record_has_no_counts_or_times_and_judges_as_the_report_does():
    from ansible_collections.blackwell.sglang.plugins.filter.router import serving_record
    in_rotation = dict(READY, elapsed_s=41, reason="ready after 41 s", history=[1, 2])
    out_of_rotation = dict(READY, smoke_summary="passed 6/6", elapsed_s=12)
    assert serving_record(in_rotation) == serving_record(out_of_rotation) == {"verdict": "ready",
                                                                              "smoke_summary": "passed"}
    for report in (READY, GARBAGE, CRASHED, {}):
        assert serving_judgement(serving_record(report)) == serving_judgement(report)
    assert serving_record(CRASHED)["reason"] == "scheduler died at shard 44/64"


def test_the_workers_the_router_does_not_list_healthy():
    from ansible_collections.blackwell.sglang.plugins.filter.router import sglang_router_unhealthy
    listing = {"workers": [{"url": "http://g0:30000", "is_healthy": True}, {"url": "http://g1:30000/", "is_healthy": False}]}
    assert sglang_router_unhealthy(listing, ["http://g0:30000/", "http://g1:30000", "http://g2:30000"]) == [
        "http://g1:30000", "http://g2:30000"]
    assert sglang_router_unhealthy(listing["workers"][:1], ["http://g0:30000"]) == []
    assert sglang_router_unhealthy({}, ["http://g0:30000"]) == ["http://g0:30000"]
