"""Filters for the router side of a fleet: which URL the router reaches each SGLang worker at.

``sglang_router_worker_urls``
    inventory hostnames + hostvars -> ``["http://<address>:<port>", ...]`` in inventory order: each host's
    ``sglang_service_endpoint.router_url``, as sglang_service published it; a node of rank >= 1 of a multi-node group
    is left out (its group is one worker, at rank 0's URL) (the port, scheme and address the
    node's SGLang really serves on; see plugins/filter/sglang_endpoint.py ``sglang_service_endpoint``). The router
    restates none of them.

``sglang_router_serving``
    the worker group's hosts + hostvars -> the router's serving set: only a node whose health verdict is ``ready``
    and whose answers passed is a member; every other node is left out (or taken out), with why (see the function).

``sglang_router_health_checks``
    the router's health-check settings and the SGLang server's own /health bound -> the options the router is started
    with (interval, timeout, failure threshold) and the problems of settings that would take a busy worker out of
    rotation (see the function).
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible_collections.blackwell.sglang.plugins.module_utils.fleet.sglang_router_api import worker_health
from ansible_collections.blackwell.sglang.plugins.module_utils.http.http_client import normalise_url


def _endpoint(hostvars, host):
    try:
        host_vars = hostvars[host]
    except (KeyError, TypeError):
        return None
    try:
        return host_vars["sglang_service_endpoint"]
    except (KeyError, TypeError):
        return None


def _follower(endpoint) -> bool:
    """A node of rank >= 1 of a multi-node group: SGLang 0.5.23 serves only a dummy health app there (its /health
    answers 200, every /v1 route 404), so it is never a worker."""
    return endpoint.get("serves_api") is False


def sglang_router_worker_url(host: str, hostvars) -> str:
    """The URL the router reaches ``host``'s SGLang server at: its published ``router_url``.

    Raises AnsibleFilterError when the host published no endpoint, or one the router cannot reach (loopback)."""
    endpoint = _endpoint(hostvars, host)
    if not endpoint:
        raise AnsibleFilterError(f"{host} has no sglang_service_endpoint: sglang_service publishes it (deploy.yml's "
                                 f"first play, the inventory check, publishes it for every GPU node)")
    if _follower(endpoint):
        raise AnsibleFilterError(f"{host} is node rank {endpoint.get('node_rank')} of the multi-node group "
                                 f"{', '.join(endpoint.get('group') or [])}: only rank 0 serves the API")
    if not endpoint.get("router_url"):
        if endpoint.get("gateway_url"):
            raise AnsibleFilterError(f"{host} published no address other hosts reach its gateway at; set "
                                     f"sglang_service_advertise_address")
        raise AnsibleFilterError(f"{host}'s SGLang listens on {endpoint.get('host')} only, which the router cannot "
                                 f"reach, and no gateway fronts it")
    return str(endpoint["router_url"])


def sglang_router_workers(hosts, hostvars) -> dict:
    """``{"urls": [...], "problems": [...]}`` for the hosts of the router's worker group: each reachable host's
    published ``router_url`` in order, and every host that has none (no endpoint, loopback only) or a duplicate."""
    urls, problems = [], []
    if isinstance(hosts, str):
        hosts = [hosts]
    if not hosts:
        problems.append("the router's worker group has no hosts, so the router would have no worker; set "
                        "sglang_router_worker_group to the group of GPU nodes")
    for host in hosts or []:
        if _follower(_endpoint(hostvars, host) or {}):
            continue  # its group is the worker, at rank 0's URL
        try:
            url = sglang_router_worker_url(host, hostvars)
        except AnsibleFilterError as exc:
            problems.append(str(exc))
            continue
        if url in urls:
            problems.append(f"two inventory hosts map to the same worker URL: {url}")
        urls.append(url)
    return {"urls": urls, "problems": problems}


def sglang_router_worker_urls(hosts, hostvars) -> list[str]:
    """``sglang_router_worker_url`` of each host, in order; AnsibleFilterError on duplicates."""
    if isinstance(hosts, str):
        hosts = [hosts]
    urls = [sglang_router_worker_url(h, hostvars) for h in hosts if not _follower(_endpoint(hostvars, h) or {})]
    dupes = sorted({u for u in urls if urls.count(u) > 1})
    if dupes:
        raise AnsibleFilterError(f"two inventory hosts map to the same worker URL: {', '.join(dupes)}")
    return urls


def serving_judgement(report) -> str | None:
    """None when a health report (smoke_health's ``smoke_health_report``, or the copy published on the node) lets its
    node serve: verdict ``ready`` and answers that did not fail (the smoke passed, or was not run, as a node without
    the functional smoke). Otherwise why not, in a few words."""
    verdict = str(report.get("verdict") or "unknown")
    if verdict != "ready":
        phase, reason = report.get("phase"), " ".join(str(report.get("reason") or "").split())
        return "its health verdict was %s%s%s" % (verdict, " in phase %s" % phase if phase else "",
                                                  " (%s)" % reason[:300] if reason else "")
    smoke = str(report.get("smoke_summary") or "not run")
    if smoke.startswith(("FAILED", "unhealthy answers")) or smoke == "failed":
        return "it was ready, but its answers failed the smoke: %s" % smoke
    return None


def serving_record(report) -> dict:
    """What a node publishes of its health report for the serving set (``serving_judgement`` reads the same keys):
    the verdict, its phase and reason when not ready, and the smoke's outcome without its counts ("passed", "not run",
    or the failure), so that a re-run that judges the same writes the same."""
    report = report or {}
    verdict = str(report.get("verdict") or "unknown")
    smoke = str(report.get("smoke_summary") or "not run")
    out = {"verdict": verdict, "smoke_summary": "passed" if smoke.startswith("passed") else smoke}
    if verdict != "ready":
        out.update(phase=report.get("phase"), reason=" ".join(str(report.get("reason") or "").split())[:300])
    return out


def sglang_router_serving(hosts, hostvars, run_hosts=None, fact="sglang_serving", check_mode=False) -> dict:
    """The router's serving set, from each worker's health verdict, never from the inventory alone.

    For each serving unit of ``hosts`` (a node, or rank 0 of a multi-node group), in order:

    - a node of this run (in ``run_hosts``) that reached the router's plays with a report of this run
      (``smoke_health_report``): that report judges it (``serving_judgement``);
    - a node of this run that failed before the router's plays (no ``deployment_reached_router``) after its unit was
      (re)started in this run (``sglang_service_restarted``): left out, its published report no longer describes what
      it runs;
    - otherwise (the smoke not run in this run, e.g. ``--tags sglang_router``; a node outside ``--limit``; a node that
      failed before anything restarted it, which still serves what passed): the report last published on the node
      (``ansible_local[fact]``, gathered at the run's start) judges it; a node whose facts could not be gathered is
      left out; a reachable node that never published one is ``unknown``.

    Returns ``{"urls", "hosts", "left_out": [{"host", "url", "why"}], "unknown": [{"host", "url", "why"}],
    "left_out_lines"}``: ``urls``/``hosts`` are the members, ``left_out_lines`` one line per node left out. In check
    mode an ``unknown`` node counts as a member (its smoke would decide).
    """
    if isinstance(hosts, str):
        hosts = [hosts]
    run_hosts = list(run_hosts or [])
    members, names, left_out, unknown = [], [], [], []
    for host in hosts or []:
        endpoint = _endpoint(hostvars, host) or {}
        if _follower(endpoint):
            continue  # its group is one worker, judged at rank 0
        try:
            url = sglang_router_worker_url(host, hostvars)
        except AnsibleFilterError as exc:
            left_out.append({"host": host, "url": None, "why": str(exc)})
            continue
        try:
            hv = hostvars[host]
        except (KeyError, TypeError):
            hv = {}
        report, source = None, None
        if host in run_hosts and hv.get("smoke_health_report"):
            report, source = hv["smoke_health_report"], "this run"
        elif host in run_hosts and not hv.get("deployment_reached_router") and hv.get("sglang_service_restarted"):
            left_out.append({"host": host, "url": url, "why": "its unit was (re)started in this run and it failed "
                                                              "before its health verdict"})
            continue
        else:
            local = hv.get("ansible_local")
            if not isinstance(local, dict):
                left_out.append({"host": host, "url": url, "why": "its facts could not be gathered (unreachable?), so "
                                                                  "its last published verdict is unknown"})
                continue
            report, source = local.get(fact), "its last published report (on the node)"
        if not isinstance(report, dict) or not report:
            entry = {"host": host, "url": url,
                     "why": "%s has no health verdict of this run and never published one; deploy it (deploy.yml "
                            "--limit %s runs its health verdict and smoke)" % (host, host)}
            if check_mode:
                members.append(url)
                names.append(host)
            unknown.append(entry)
            continue
        why = serving_judgement(report)
        if why:
            left_out.append({"host": host, "url": url, "why": "%s (%s)" % (why, source)})
        else:
            members.append(url)
            names.append(host)
    return {"urls": members, "hosts": names, "left_out": left_out, "unknown": unknown,
            "left_out_lines": ["%s (%s): %s" % (e["host"], e["url"] or "no URL", e["why"]) for e in left_out]}


def sglang_router_unhealthy(listing, workers) -> list[str]:
    """The ``workers`` (URLs) the router's ``GET /workers`` answer (``listing``: its JSON, or its ``workers`` list) does
    not list healthy - unhealthy or not listed at all - in the order given; URLs compared as the router modules compare them
    (module_utils sglang_router_api ``worker_health``).
    The rolling redeploy refuses before it prepares anything while any is (its capacity guard needs every other worker
    healthy, and would refuse at the first switch, after the whole prepare)."""
    entries = listing.get("workers", []) if isinstance(listing, dict) else (listing or [])
    health = worker_health([w for w in entries if isinstance(w, dict)])  # as the router modules compare them
    return [u for u in (workers or []) if not health.get(normalise_url(u))]


def _number(settings, key, problems):
    try:
        value = float(settings.get(key))
    except (TypeError, ValueError):
        problems.append(f"{key} must be a number of seconds, got {settings.get(key)!r}")
        return None
    if value <= 0:
        problems.append(f"{key} must be above 0, got {value:g}")
        return None
    return value


def _whole(seconds):
    """``seconds`` as an int when it is whole (the router's options take integer seconds)."""
    return int(seconds) if seconds == int(seconds) else seconds


def sglang_router_health_checks(settings) -> dict:
    """The router's worker health checks, so that a busy worker stays in rotation and a hung one leaves it.

    SGLang 0.5.23's ``/health`` is a one-token generation: on a busy worker (a long prefill holds the scheduler) it
    answers 503 after the server's own bound ``server_timeout_s`` (``SGLANG_HEALTH_CHECK_TIMEOUT``, 20 s), and never
    later. sglang-router 0.3.2 checks each worker one check at a time: the next check starts ``interval_s`` after the
    previous one started, or at once when that one took longer (measured against the real router,
    tests/contract/test_router_api.py). So while a worker is busy it fails once per ``max(interval_s,
    server_timeout_s)`` at most, and a prefill of ``longest_prefill_s`` fails at most ``longest_prefill_s //
    max(interval_s, server_timeout_s) + 1`` checks in a row.

    ``settings``: ``interval_s``, ``server_timeout_s``, ``longest_prefill_s``, optionally ``timeout_s`` (default
    ``server_timeout_s + 5``: a check must outlast the server's answer, or it fails on its own timeout, every
    ``timeout_s``) and ``failure_threshold`` (default: one more failure than the longest prefill gives).

    Returns ``options`` (the router's option names -> values), ``tolerates_busy_s`` (how long a worker may fail every
    check before it leaves rotation) and ``problems`` (each with the numbers and the fix; empty when right).
    """
    if not isinstance(settings, dict):
        raise AnsibleFilterError(f"sglang_router_health_checks expects a mapping, got {settings!r}")
    problems = []
    interval = _number(settings, "interval_s", problems)
    server = _number(settings, "server_timeout_s", problems)
    prefill = _number(settings, "longest_prefill_s", problems)
    if problems:
        return {"options": {}, "tolerates_busy_s": None, "problems": problems}
    timeout = settings.get("timeout_s")
    timeout = server + 5 if timeout in (None, "") else _number(settings, "timeout_s", problems)
    period = max(interval, server)
    need = int(prefill // period) + 2
    threshold = settings.get("failure_threshold")
    try:
        threshold = need if threshold in (None, "") else int(threshold)
    except (TypeError, ValueError):
        problems.append(f"failure_threshold must be a whole number, got {threshold!r}")
        threshold = need
    if timeout is not None and timeout <= server:
        problems.append(f"the router's health-check timeout ({timeout:g} s) must exceed the server's own /health bound "
                        f"(SGLANG_HEALTH_CHECK_TIMEOUT, {server:g} s): a busy worker's check would fail on the router's "
                        f"timeout and the next one pile onto its scheduler; set it to {server + 5:g} or more")
    if threshold < need:
        problems.append(f"a health-failure threshold of {threshold} takes a busy worker out of rotation after "
                        f"{threshold * period:g} s of a prefill, and a prefill may hold it {prefill:g} s "
                        f"(deployment_longest_prefill_s; one failed check per {period:g} s): set it to {need} or more")
    return {"options": {"health-check-interval-secs": _whole(interval), "health-check-timeout-secs": _whole(timeout or 0),
                        "health-failure-threshold": threshold},
            "tolerates_busy_s": (threshold - 1) * period, "problems": problems}


class FilterModule:
    def filters(self):
        return {"sglang_router_worker_urls": sglang_router_worker_urls, "sglang_router_workers": sglang_router_workers,
                "sglang_router_worker_url": sglang_router_worker_url,
                "sglang_router_health_checks": sglang_router_health_checks,
                "sglang_router_serving": sglang_router_serving, "serving_record": serving_record,
                "sglang_router_unhealthy": sglang_router_unhealthy}
