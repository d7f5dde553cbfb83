"""What an SGLang server has in flight, read from its Prometheus ``/metrics``, and the bounded wait until it is 0.

Facts (SGLang 0.5.23 managers/scheduler_components/metrics_reporter.py, observability/metrics_collector.py): with
``--enable-metrics`` the server exports ``sglang:num_running_reqs`` (its running batch) and ``sglang:num_queue_reqs``
(its waiting queue), one series from the stats-logging rank (attn_tp_rank 0), written when a batch is logged and at
once when the scheduler goes idle. A request still being tokenised, or whose answer is still being streamed back, is
not in them: 0 means the scheduler has nothing left, not that every HTTP answer was sent (the restart's SIGTERM drains
the rest, tokenizer_manager.py sigterm_watchdog).

Used by the sglang_drain module (on the node) and by sglang_router_workers' ``drain_timeout`` (on the router host,
right after the deregistration: one module run instead of two).

``health_after_drain``: a server a busy spell left ``UnHealthy`` (its ``/health`` answered 503 once, http_server.py
health_generate) stays so until a later ``/health`` succeeds, and its SIGTERM then force-exits instead of draining
(tokenizer_manager.py sigterm_watchdog: "Signal SIGTERM received while health check failed. Force exiting."). Out of
rotation nobody probes it, so the drain asks once itself, the scheduler idle by then.

``parse_prometheus``: Prometheus's text exposition format, read into one sum per metric (for SGLang's ``/metrics``;
the format's facts are in http/prometheus_text.py).

SGLang 0.5.23 ``/metrics`` (``--enable-metrics``): Prometheus text, one gauge line per scheduler rank,
e.g. ``sglang:num_running_reqs{...,tp_rank="0"} 3.0``.
"""

from ansible_collections.blackwell.sglang.plugins.module_utils.http.http_client import EndpointError, NoAnswer
from ansible_collections.blackwell.sglang.plugins.module_utils.http.polling import wait_until
from ansible_collections.blackwell.sglang.plugins.module_utils.http.prometheus_text import sums


def parse_prometheus(text):
    """Sum of each metric over its label sets: ``{"sglang:num_running_reqs": 3.0, ...}`` (http/prometheus_text.py)."""
    return sums(text)


IN_FLIGHT_GAUGES = ("sglang:num_running_reqs", "sglang:num_queue_reqs")
# Consecutive zero reads, POLL_INTERVAL s apart: a request the router sent just before the deregistration reaches the
# gauges within that span (they are written per logged batch; two reads in one instant would prove nothing).
SETTLE_POLLS = 2
POLL_INTERVAL = 0.5


def read_counts(client, metrics=IN_FLIGHT_GAUGES):
    """``{gauge: sum over ranks}`` from ``client``'s ``GET /metrics``; EndpointError naming the missing gauges.

    ``client`` is an http_client.JsonClient (or anything with its ``request`` and ``base_url``)."""
    status, text = client.request("GET", "/metrics", expect=(200, 404))
    if status == 404:
        raise EndpointError("%s/metrics answers 404: is the server running with --enable-metrics?" % client.base_url)
    values = parse_prometheus(text if isinstance(text, str) else "")
    missing = [m for m in metrics if m not in values]
    if missing:
        raise EndpointError("%s/metrics has no %s: is the server running with --enable-metrics?"
                            % (client.base_url, ", ".join(missing)))
    return {m: values[m] for m in metrics}


def wait_drained(client, timeout, metrics=IN_FLIGHT_GAUGES, poll_interval=POLL_INTERVAL, settle_polls=SETTLE_POLLS,
                 check_mode=False, **waits):
    """Poll until the gauges summed to 0 in ``settle_polls`` consecutive reads, at most ``timeout`` s.

    Returns ``{in_flight_initial, in_flight, counts, server_down, waited_s}`` (requests, requests, {gauge: value},
    bool, seconds). A server that does not answer at all has nothing in flight: ``server_down`` true at once. Check mode
    reads once and does not wait. Raises EndpointError with the last counts on timeout or without the gauges.
    ``waits`` may hold ``clock`` and ``sleep`` (tests)."""
    try:
        state = {"counts": read_counts(client, metrics), "zeros": 0}
    except NoAnswer:
        return {"in_flight_initial": 0, "in_flight": 0, "counts": {}, "waited_s": 0.0, "server_down": True}
    first = int(sum(state["counts"].values()))
    result = {"in_flight_initial": first, "server_down": False}
    if check_mode:
        result.update(in_flight=first, counts=state["counts"], waited_s=0.0)
        return result
    # The first read counts as a poll; every further one comes poll_interval later (wait_until sleeps between calls),
    # so settle_polls zeros span (settle_polls - 1) * poll_interval.
    state["zeros"] = 1 if first == 0 else 0
    state["first_call"] = True

    def drained():
        if state.pop("first_call", False):
            return False
        state["counts"] = read_counts(client, metrics)
        state["zeros"] = state["zeros"] + 1 if sum(state["counts"].values()) == 0 else 0
        return state["zeros"] >= settle_polls

    done, waited = wait_until(drained, timeout, poll_interval, **waits)
    now = int(sum(state["counts"].values()))
    result.update(in_flight=now, counts=state["counts"], waited_s=round(waited, 2))
    if not done:
        raise EndpointError("%s still has %d request(s) in flight after %.0f s (%s); started with %d"
                            % (client.base_url, now, waited,
                               ", ".join("%s=%g" % kv for kv in state["counts"].items()), first))
    return result


def health_after_drain(client):
    """One ``GET /health`` of a drained server (``client``'s timeout must exceed SGLang's own bound,
    SGLANG_HEALTH_CHECK_TIMEOUT): its status, 200 clearing an ``UnHealthy`` left by a busy spell; None when nothing
    answered. Never raises for a status: a 503 here is the restart's to judge."""
    try:
        status, _body = client.request("GET", "/health", expect=(200, 503))
    except NoAnswer:
        return None
    except EndpointError as exc:
        return str(exc)
    return status
