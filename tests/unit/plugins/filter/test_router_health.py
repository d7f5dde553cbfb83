"""sglang_router_health_checks (plugins/filter/router.py): the router's worker health checks keep a busy worker in
rotation (SGLang 0.5.23's /health answers 503 after its own 20 s bound during a long prefill) and eject a hung one."""

import pytest

from ansible_collections.blackwell.sglang.plugins.filter.router import sglang_router_health_checks

BASE = {"interval_s": 5, "server_timeout_s": 20, "longest_prefill_s": 120}


def test_the_defaults_outlast_the_servers_bound_and_the_longest_prefill():
    got = sglang_router_health_checks(dict(BASE))
    assert got["problems"] == []
    assert got["options"] == {"health-check-interval-secs": 5, "health-check-timeout-secs": 25,
                              "health-failure-threshold": 8}
    # one failed check per 20 s at most (checks never overlap; a failed one takes the server's 20 s)
    assert got["tolerates_busy_s"] == 140 > BASE["longest_prefill_s"]


@pytest.mark.parametrize("prefill,threshold", [(0, 2), (19, 2), (20, 3), (120, 8), (600, 32)])
def test_the_threshold_is_one_more_failure_than_a_prefill_gives(prefill, threshold):
    got = sglang_router_health_checks(dict(BASE, longest_prefill_s=prefill or 0.5))
    assert got["options"]["health-failure-threshold"] == threshold
    assert got["tolerates_busy_s"] > (prefill or 0.5)


def test_a_long_interval_sets_the_pace_of_failures():
    got = sglang_router_health_checks(dict(BASE, interval_s=60))
    assert got["options"]["health-failure-threshold"] == 4 and got["tolerates_busy_s"] == 180


def test_settings_that_would_eject_a_busy_worker_are_refused_with_the_numbers_and_the_fix():
    """The product's old settings (timeout 10 s, threshold 2) took a worker out after 20 s of prefill."""
    got = sglang_router_health_checks(dict(BASE, timeout_s=10, failure_threshold=2))
    assert len(got["problems"]) == 2
    assert "timeout (10 s) must exceed the server's own /health bound (SGLANG_HEALTH_CHECK_TIMEOUT, 20 s)" in \
        got["problems"][0] and "set it to 25 or more" in got["problems"][0]
    assert "threshold of 2 takes a busy worker out of rotation after 40 s of a prefill" in got["problems"][1]
    assert "set it to 8 or more" in got["problems"][1]


def test_bad_numbers_are_named():
    got = sglang_router_health_checks({"interval_s": "x", "server_timeout_s": 0, "longest_prefill_s": 10})
    assert got["options"] == {} and len(got["problems"]) == 2
