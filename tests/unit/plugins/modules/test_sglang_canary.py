"""The canary soak (module sglang_canary, module_utils/fleet/_canary.py) without a network: the router's and the
workers' /metrics as the real ones write them (tests/contract/test_router_api.py reads the real router's)."""

import pytest

from ansible_collections.blackwell.sglang.plugins.module_utils.fleet._canary import (
    figures, histogram_quantile, latency_buckets, problems, router_outcomes,
)
from ansible_collections.blackwell.sglang.plugins.module_utils.http.prometheus_text import samples
from ansible_collections.blackwell.sglang.plugins.modules import sglang_canary
from test_router_modules import Clock  # the same fake clock

A, B, C = "http://gpu-0:30000", "http://gpu-1:30000", "http://gpu-2:30000"
BOUNDS = (0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400, 600, 1200, 1800, 2400)


def router_text(outcomes):
    """sglang-router 0.3.2's lines (as the real one wrote them, contract test)."""
    lines = ["# TYPE smg_worker_cb_outcomes_total counter"]
    for url, (ok, bad) in outcomes.items():
        lines.append('smg_worker_cb_outcomes_total{worker="%s",outcome="success"} %d' % (url, ok))
        if bad:
            lines.append('smg_worker_cb_outcomes_total{worker="%s",outcome="failure"} %d' % (url, bad))
    lines.append('smg_router_upstream_responses_total{router_type="http",status_code="200",error_code=""} 7')
    return "\n".join(lines) + "\n"


def worker_text(latencies):
    """SGLang 0.5.23's histogram (metrics_collector.py), split over is_streaming."""
    lines = []
    for streaming, part in (("false", latencies[::2]), ("true", latencies[1::2])):
        labels = 'engine_type="unified",is_streaming="%s",model_name="Kimi-K2.5"' % streaming
        for bound in BOUNDS:
            lines.append('sglang:e2e_request_latency_seconds_bucket{%s,le="%s"} %.1f'
                         % (labels, float(bound), sum(1 for x in part if x <= bound)))
        lines.append('sglang:e2e_request_latency_seconds_bucket{%s,le="+Inf"} %.1f' % (labels, len(part)))
        lines.append('sglang:e2e_request_latency_seconds_count{%s} %.1f' % (labels, len(part)))
    return "\n".join(lines) + "\n"


def test_samples_keep_labels_with_commas_braces_and_escapes():
    text = 'm{a="x, y",b="{z}",c="q\\"uote"} 3\n# HELP m x\nbad line\nn 4 1700000000\n'
    assert samples(text) == [("m", {"a": "x, y", "b": "{z}", "c": 'q"uote'}, 3.0), ("n", {}, 4.0)]


def test_histogram_quantile_is_prometheus_linear_interpolation():
    assert histogram_quantile(0.99, {}) is None
    # 100 observations: 90 at or below 1 s, 10 in (1, 2]: rank 99 lies 9/10 into (1, 2]
    assert histogram_quantile(0.99, {0.5: 50.0, 1.0: 90.0, 2.0: 100.0, float("inf"): 100.0}) == pytest.approx(1.9)
    assert histogram_quantile(0.5, {0.5: 50.0, 1.0: 90.0, float("inf"): 100.0}) == pytest.approx(0.5)
    # the rank in +Inf: the highest finite bound
    assert histogram_quantile(0.99, {1.0: 10.0, float("inf"): 100.0}) == 1.0


def test_figures_are_the_increase_since_the_start_and_a_restart_is_named():
    start = {"outcomes": router_outcomes(router_text({A: (100, 0), B: (80, 0), C: (5, 0)})),
             "latency": {A: latency_buckets(worker_text([0.5] * 10)), B: latency_buckets(worker_text([0.5] * 10)),
                         C: {}}}
    now = {"outcomes": router_outcomes(router_text({A: (157, 3), B: (140, 0), C: (25, 0)})),
           "latency": {A: latency_buckets(worker_text([0.5] * 10 + [1.5] * 60)),
                       B: latency_buckets(worker_text([0.5] * 70)), C: latency_buckets(worker_text([0.5] * 20))}}
    found = figures(start, now, A, [B, C])
    assert found["canary"] == {"requests": 60, "failures": 3, "error_rate": 0.05, "p99_s": pytest.approx(1.99, 0.01)}
    assert found["others"]["requests"] == 80 and found["others"]["failures"] == 0
    assert found["others"]["p99_s"] == pytest.approx(0.59, 0.02) and found["restarted"] == []
    restarted = dict(now, outcomes=router_outcomes(router_text({A: (157, 3), B: (3, 0), C: (25, 0)})))
    assert figures(start, restarted, A, [B, C])["restarted"] == [B]


def test_problems_name_the_figures_and_wait_for_enough_requests():
    limits = {"max_error_rate_increase": 0.01, "max_p99_ratio": 1.5, "min_requests": 20, "min_latency_requests": 50}
    bad = {"canary": {"requests": 60, "failures": 3, "error_rate": 0.05, "p99_s": 2.0},
           "others": {"requests": 80, "failures": 0, "error_rate": 0.0, "p99_s": 1.0}, "restarted": []}
    said = problems(bad, limits)
    assert said[0] == ("error rate 5.0 % (3 of 60 requests) against 0.0 % on the other workers (0 of 80); the limit "
                       "is 1.0 points above theirs")
    assert said[1] == "p99 latency 2.00 s against 1.00 s on the other workers (2.00x; the limit is 1.50x)"
    assert len(problems(bad, limits, final=False)) == 1, "the p99 is judged at the end only"
    few = dict(bad, canary=dict(bad["canary"], requests=19))
    assert problems(few, limits) == []
    tail = dict(bad, canary=dict(bad["canary"], failures=0, error_rate=0.0))
    assert len(problems(tail, limits)) == 1 and problems(tail, dict(limits, min_latency_requests=100)) == [], \
        "a p99 of fewer requests than min_latency_requests is not judged"
    same = dict(bad, canary={"requests": 60, "failures": 1, "error_rate": 0.0167, "p99_s": 1.4},
                others={"requests": 80, "failures": 1, "error_rate": 0.0125, "p99_s": 1.0})
    assert problems(same, limits) == []


class Text:
    def __init__(self, texts):
        self.texts = list(texts)

    def request(self, method, path, *args, **kwargs):
        return 200, self.texts.pop(0) if len(self.texts) > 1 else self.texts[0]


class Listed:
    def __init__(self, healthy=True):
        self.healthy = healthy

    def find(self, url):
        return [{"url": url, "is_healthy": self.healthy}]


def _params(**kw):
    return dict({"router_url": "http://127.0.0.1:30000", "router_metrics_url": "http://127.0.0.1:29000/metrics",
                 "canary": A, "others": [B], "soak_s": 30, "poll_interval": 5, "max_error_rate_increase": 0.01,
                 "max_p99_ratio": 1.5, "min_requests": 20, "min_latency_requests": 100, "request_timeout": 5}, **kw)


def test_a_canary_that_fails_one_in_twenty_is_stopped_at_the_first_poll_that_shows_it():
    clock = Clock()
    router = Text([router_text({A: (0, 0), B: (0, 0)}), router_text({A: (38, 2), B: (40, 0)})])
    workers = {A: Text([worker_text([])]), B: Text([worker_text([])])}
    result = sglang_canary.run(_params(), False, router=Listed(), metrics=router, worker=workers.get, clock=clock,
                               sleep=clock.sleep)
    assert result["failed"] and not result["passed"] and result["soaked_s"] == 5.0
    assert result["msg"].startswith("canary http://gpu-0:30000 failed its soak after 5 s of live traffic: error rate "
                                    "5.0 % (2 of 40 requests)")


def test_a_healthy_canary_passes_after_the_whole_soak_and_a_quiet_one_passes_unjudged():
    clock = Clock()
    router = Text([router_text({A: (0, 0), B: (0, 0)}), router_text({A: (30, 0), B: (31, 0)})])
    workers = {A: Text([worker_text([]), worker_text([0.5] * 30)]), B: Text([worker_text([]), worker_text([0.5] * 31)])}
    result = sglang_canary.run(_params(), False, router=Listed(), metrics=router, worker=workers.get, clock=clock,
                               sleep=clock.sleep)
    assert result["passed"] and result["judged"] and result["soaked_s"] == 30.0 and not result.get("failed")
    clock = Clock()
    quiet = sglang_canary.run(_params(), False, router=Listed(), metrics=Text([router_text({A: (0, 0)})]),
                              worker={A: Text([""]), B: Text([""])}.get, clock=clock, sleep=clock.sleep)
    assert quiet["passed"] and not quiet["judged"] and "passed unjudged" in quiet["msg"]


def test_a_canary_the_router_dropped_fails_at_once_and_check_mode_reads_once():
    clock = Clock()
    workers = {A: Text([""]), B: Text([""])}
    result = sglang_canary.run(_params(), False, router=Listed(healthy=False), metrics=Text([router_text({})]),
                               worker=workers.get, clock=clock, sleep=clock.sleep)
    assert result["failed"] and "the router no longer lists http://gpu-0:30000 healthy" in result["msg"]
    clock = Clock()
    checked = sglang_canary.run(_params(), True, router=Listed(healthy=False), metrics=Text([router_text({})]),
                                worker=workers.get, clock=clock, sleep=clock.sleep)
    assert checked["passed"] and checked["soaked_s"] == 0.0
