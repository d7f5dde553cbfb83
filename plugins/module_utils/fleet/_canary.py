"""The canary soak: a freshly switched worker's error rate and p99 latency against the other workers', under live traffic.

Facts (measured against the real sglang-router 0.3.2 in front of two simulated workers, one failing every 20th chat
with 500; tests/contract/test_router_api.py):

* the router counts every upstream answer per worker in ``smg_worker_cb_outcomes_total{worker=URL,outcome=...}``
  (``success`` or ``failure``; a 500 is a failure), also with ``--disable-circuit-breaker``;
* it retries a 500 (``--retry-max-retries``, 5 by default) on a worker it selects again, so a client sees a 200: a
  release that fails one request in twenty is invisible to clients and to the router's own totals
  (``smg_router_upstream_responses_total`` counts the 500s, without the worker), and visible only per worker here;
* the router has no per-worker latency. Each SGLang 0.5.23 worker exports ``sglang:e2e_request_latency_seconds``
  (observability/metrics_collector.py TokenizerMetricsCollector, with ``--enable-metrics``): a histogram of the
  requests it finished, label ``is_streaming``, buckets 0.1 s to 2400 s.

The soak reads both at its start and then every poll; the figures are the increase since the start (counters and
buckets only grow while the processes live; a worker that restarted inside the soak fails it).
"""

from ansible_collections.blackwell.sglang.plugins.module_utils.http.http_client import normalise_url
from ansible_collections.blackwell.sglang.plugins.module_utils.http.prometheus_text import samples

OUTCOMES = "smg_worker_cb_outcomes_total"
E2E_BUCKET = "sglang:e2e_request_latency_seconds_bucket"


def router_outcomes(text):
    """``{worker URL: {"success": n, "failure": n}}`` from the router's /metrics."""
    found = {}
    for name, labels, value in samples(text):
        if name == OUTCOMES and labels.get("worker") and labels.get("outcome") in ("success", "failure"):
            counts = found.setdefault(normalise_url(labels["worker"]), {"success": 0.0, "failure": 0.0})
            counts[labels["outcome"]] += value
    return found


def latency_buckets(text):
    """``{upper bound: cumulative count}`` of a worker's end-to-end latency histogram, summed over its label sets
    (streamed and not); ``{}`` when it exports none yet (no request finished since it started)."""
    found = {}
    for name, labels, value in samples(text):
        if name == E2E_BUCKET and "le" in labels:
            bound = float("inf") if labels["le"] == "+Inf" else float(labels["le"])
            found[bound] = found.get(bound, 0.0) + value
    return found


def histogram_quantile(q, buckets):
    """Prometheus's histogram_quantile over cumulative ``buckets`` (linear inside the bucket that holds the rank; the
    highest finite bound when it falls into +Inf); None without observations."""
    bounds = sorted(buckets)
    if not bounds or buckets[bounds[-1]] <= 0:
        return None
    total = buckets[bounds[-1]]
    rank = q * total
    lower, below = 0.0, 0.0
    for bound in bounds:
        count = buckets[bound]
        if count >= rank:
            if bound == float("inf"):
                return lower
            if count == below:
                return bound
            return lower + (bound - lower) * (rank - below) / (count - below)
        lower, below = bound, count
    return lower


def _minus(now, start):
    """``now - start`` per key (a key new since the start counts from 0); None when a value went down (a restart)."""
    out = {}
    for key, value in now.items():
        diff = value - start.get(key, 0.0)
        if diff < 0:
            return None
        out[key] = diff
    return out


def _add(a, b):
    return {k: a.get(k, 0.0) + b.get(k, 0.0) for k in set(a) | set(b)}


def figures(start, now, canary, others):
    """The soak's figures so far, from two readings (``{"outcomes": router_outcomes, "latency": {url: buckets}}``):
    ``{"canary": {...}, "others": {...}}``, each with requests, failures, error_rate (None without requests) and
    p99_s (None without a finished request); ``restarted`` names a worker whose counters went down."""
    out, restarted = {}, []
    for side, urls in (("canary", [canary]), ("others", list(others))):
        outcome, latency = {"success": 0.0, "failure": 0.0}, {}
        for url in urls:
            counts = _minus(now["outcomes"].get(url, {}), start["outcomes"].get(url, {}))
            buckets = _minus(now["latency"].get(url, {}), start["latency"].get(url, {}))
            if counts is None or buckets is None:
                restarted.append(url)
                continue
            outcome, latency = _add(outcome, counts), _add(latency, buckets)
        requests = int(outcome.get("success", 0) + outcome.get("failure", 0))
        p99 = histogram_quantile(0.99, latency)
        out[side] = {"requests": requests, "failures": int(outcome.get("failure", 0)),
                     "error_rate": round(outcome.get("failure", 0) / requests, 4) if requests else None,
                     "p99_s": None if p99 is None else round(p99, 3)}
    out["restarted"] = restarted
    return out


def problems(found, limits, final=True):
    """What the figures break, each with the numbers; ``limits``: ``max_error_rate_increase`` (the canary's error rate
    above the others', absolute), ``max_p99_ratio`` (its p99 over theirs), ``min_requests`` (the canary's requests
    before its error rate is judged; the others' rate counts from as many), ``min_latency_requests`` (each side's
    requests before the p99s are compared: the p99 of fewer than 100 requests is their slowest one). The error rate
    is judged at every poll (a failing release leaves rotation at once); the p99 only at the end (``final``)."""
    out = []
    canary, others = found["canary"], found["others"]
    if found["restarted"]:
        out.append("restarted during the soak (its counters went down): %s" % ", ".join(found["restarted"]))
    if canary["requests"] >= limits["min_requests"]:
        base = others["error_rate"] if others["requests"] >= limits["min_requests"] else 0.0
        if canary["error_rate"] - base > limits["max_error_rate_increase"]:
            out.append("error rate %.1f %% (%d of %d requests) against %.1f %% on the other workers (%d of %d); the "
                       "limit is %.1f points above theirs" % (
                           100 * canary["error_rate"], canary["failures"], canary["requests"], 100 * base,
                           others["failures"], others["requests"], 100 * limits["max_error_rate_increase"]))
    latency_floor = limits.get("min_latency_requests", 100)
    if final and canary["p99_s"] is not None and others["p99_s"] and canary["requests"] >= latency_floor \
            and others["requests"] >= latency_floor:
        if canary["p99_s"] > others["p99_s"] * limits["max_p99_ratio"]:
            out.append("p99 latency %.2f s against %.2f s on the other workers (%.2fx; the limit is %.2fx)" % (
                canary["p99_s"], others["p99_s"], canary["p99_s"] / others["p99_s"], limits["max_p99_ratio"]))
    return out
