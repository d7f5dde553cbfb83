#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Ansible module: soak a freshly switched worker under live traffic; fail when it errs or lags beyond the others."""

DOCUMENTATION = r"""
module: sglang_canary
short_description: Soak the first switched SGLang worker under live traffic against the other workers
extends_documentation_fragment:
  - blackwell.sglang.common
  - blackwell.sglang.common.request_timeout
description:
  - Watches, for I(soak_s) seconds, the worker a rolling redeploy switched first (the canary) while the router sends
    it live traffic - its error rate from the router's per-worker outcomes (sglang-router 0.3.2
    C(smg_worker_cb_outcomes_total); the router retries a 500 elsewhere, so clients do not see what it counts) and its
    p99 end-to-end latency from its own C(sglang:e2e_request_latency_seconds) (SGLang 0.5.23, C(--enable-metrics)) -
    against the same figures of the other workers over the same window.
  - Fails as soon as the canary's error rate is beyond the others' by more than I(max_error_rate_increase) (with at
    least I(min_requests) of its requests seen), when it leaves the router's healthy list, or when a worker restarts;
    at the end, when its p99 is beyond I(max_p99_ratio) times theirs (each side with I(min_latency_requests)). The
    message names the figures.
  - Run it where the router's API and metrics answer and the workers are reached as the router reaches them (the
    router host, C(delegate_to)). Changes nothing; in check mode it reads once and does not wait.
options:
  router_url:
    description: The router's API on its host, e.g. C(http://127.0.0.1:30000) (C(GET /workers)).
    type: str
    required: true
  router_metrics_url:
    description: The router's Prometheus metrics, e.g. C(http://127.0.0.1:29000/metrics).
    type: str
    required: true
  canary:
    description: The canary's worker URL, as the router lists it.
    type: str
    required: true
  others:
    description: The other workers' URLs (the comparison). Empty - only the absolute error rate is judged.
    type: list
    elements: str
    default: []
  soak_s:
    description: Seconds of live traffic to watch.
    type: float
    required: true
  poll_interval:
    description: Seconds between readings.
    type: float
    default: 5
  max_error_rate_increase:
    description: The canary's error rate may exceed the others' by this much (a fraction, 0.01 = one point).
    type: float
    default: 0.01
  max_p99_ratio:
    description: The canary's p99 latency may be this many times the others'.
    type: float
    default: 1.5
  min_requests:
    description: Requests the canary must have served before its error rate is judged (the other workers' rate counts
      from as many). A canary that served fewer over the whole soak passes unjudged (RV(judged) false), saying so.
    type: int
    default: 20
  min_latency_requests:
    description: Requests each side must have served before the p99 latencies are compared (the p99 of fewer than
      100 requests is their slowest one); fewer - the p99s are reported, not judged.
    type: int
    default: 100
"""

EXAMPLES = r"""
- name: Soak the canary for ten minutes
  blackwell.sglang.sglang_canary:
    router_url: http://127.0.0.1:30000
    router_metrics_url: http://127.0.0.1:29000/metrics
    canary: http://gpu-node-0:30000
    others: [http://gpu-node-1:30000, http://gpu-node-2:30000]
    soak_s: 600
  delegate_to: "{{ groups['sglang_routers'][0] }}"
"""

RETURN = r"""
passed:
  description: Whether the canary passed (the module fails otherwise; the figures come with the failure too).
  returned: always
  type: bool
judged:
  description: Whether the canary served at least I(min_requests) requests over the soak.
  returned: always
  type: bool
soaked_s:
  description: Seconds watched (less than I(soak_s) when it failed early).
  returned: always
  type: float
figures:
  description: C(canary) and C(others), each with requests, failures, error_rate and p99_s over the soak; restarted.
  returned: always
  type: dict
  sample: {"canary": {"requests": 212, "failures": 11, "error_rate": 0.0519, "p99_s": 18.9},
           "others": {"requests": 230, "failures": 0, "error_rate": 0.0, "p99_s": 19.4}, "restarted": []}
problems:
  description: What the canary broke, with the numbers (empty when it passed).
  returned: always
  type: list
  elements: str
"""

import time
from urllib.parse import urlsplit

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.blackwell.sglang.plugins.module_utils.fleet._canary import (
    figures, latency_buckets, problems, router_outcomes,
)
from ansible_collections.blackwell.sglang.plugins.module_utils.fleet.sglang_router_api import Router
from ansible_collections.blackwell.sglang.plugins.module_utils.http.http_client import (
    EndpointError, JsonClient, normalise_url,
)


def _text(client, path):
    _status, text = client.request("GET", path)
    return text if isinstance(text, str) else ""


def run(params, check_mode, router=None, metrics=None, worker=None, clock=time.monotonic, sleep=time.sleep):
    """The soak; returns the module result (``failed`` set with ``msg`` when the canary broke a limit).

    ``router`` (sglang_router_api.Router), ``metrics`` (a client for the router's metrics URL) and ``worker`` (url ->
    client) are made from the parameters unless given (tests)."""
    timeout = params["request_timeout"]
    router = router or Router(params["router_url"], timeout=timeout)
    where = urlsplit(params["router_metrics_url"])
    metrics = metrics or JsonClient("%s://%s" % (where.scheme, where.netloc), timeout=timeout)
    metrics_path = where.path or "/metrics"
    worker = worker or (lambda url: JsonClient(url, timeout=timeout))
    canary = normalise_url(params["canary"])
    others = [normalise_url(u) for u in params["others"] if normalise_url(u) != canary]
    clients = {url: worker(url) for url in [canary] + others}
    limits = {k: params[k] for k in ("max_error_rate_increase", "max_p99_ratio", "min_requests",
                                     "min_latency_requests")}

    def reading():
        return {"outcomes": router_outcomes(_text(metrics, metrics_path)),
                "latency": {url: latency_buckets(_text(c, "/metrics")) for url, c in clients.items()}}

    start_at, start = clock(), reading()
    found = figures(start, start, canary, others)
    broken, final = [], False
    while not check_mode:
        elapsed = clock() - start_at
        final = elapsed >= params["soak_s"]
        if not final:
            sleep(min(params["poll_interval"], max(params["soak_s"] - elapsed, 0.0)))
        listed = [w for w in router.find(canary) if w.get("is_healthy")]
        found = figures(start, reading(), canary, others)
        broken = problems(found, limits, final=final)
        if not listed:
            broken.insert(0, "the router no longer lists %s healthy" % canary)
        if broken or final:
            break
    judged = found["canary"]["requests"] >= params["min_requests"]
    result = {"changed": False, "passed": not broken, "judged": judged, "figures": found, "problems": broken,
              "soaked_s": round(clock() - start_at, 1)}
    if broken:
        result.update(failed=True, msg="canary %s failed its soak after %.0f s of live traffic: %s" % (
            canary, result["soaked_s"], "; ".join(broken)))
    elif not check_mode and not judged:
        result["msg"] = ("canary %s served %d request(s) in %.0f s, fewer than min_requests (%d): passed unjudged"
                         % (canary, found["canary"]["requests"], result["soaked_s"], params["min_requests"]))
    return result


def main():
    module = AnsibleModule(
        argument_spec=dict(
            router_url=dict(type="str", required=True),
            router_metrics_url=dict(type="str", required=True),
            canary=dict(type="str", required=True),
            others=dict(type="list", elements="str", default=[]),
            soak_s=dict(type="float", required=True),
            poll_interval=dict(type="float", default=5),
            max_error_rate_increase=dict(type="float", default=0.01),
            max_p99_ratio=dict(type="float", default=1.5),
            min_requests=dict(type="int", default=20),
            min_latency_requests=dict(type="int", default=100),
            request_timeout=dict(type="int", default=10),
        ),
        supports_check_mode=True,
    )
    try:
        result = run(module.params, module.check_mode)
    except EndpointError as exc:
        module.fail_json(msg="the canary soak could not read its figures: %s" % exc)
    if result.get("failed"):
        module.fail_json(**{k: v for k, v in result.items() if k != "failed"})
    module.exit_json(**result)


if __name__ == "__main__":
    main()
