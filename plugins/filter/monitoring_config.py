# -*- coding: utf-8 -*-
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters that turn the inventory's published monitoring targets into Prometheus and Alertmanager configuration.

Every monitored host publishes one fact (roles/monitoring/tasks/publish.yml), ``monitoring_published``::

    {"node": "gpu-0", "roles": ["gpu"], "node_exporter": "gpu-0:9100",
     "sglang": {"url": "http://gpu-0:30000", "unit": "sglang-kimi.service"},       # GPU nodes only
     "router": {"url": "http://router:29000", "unit": "sglang-router.service",     # router hosts only
                "workers": 2}}

``monitoring_scrape_configs(published, settings)``
    -> the ``scrape_configs`` list: jobs ``node`` (node exporter on every host), ``sglang`` (each SGLang server's
    ``/metrics``), ``sglang_router`` (the router's Prometheus listener), ``prometheus`` and ``alertmanager``. Every
    target carries ``node`` (its inventory name: what alerts and the rolling redeploy's silences match on) and
    ``role``. ``settings.scrape_auth`` (a dict per job, e.g. ``{"sglang": {"authorization": {...}}}``) is merged into
    that job verbatim, so credentials can be added where a later change puts authentication on those paths.
``monitoring_alert_rules(published, alerts)``
    -> the rule file (``{"groups": [...]}``) with the thresholds and durations of ``alerts`` (see ``ALERT_DEFAULTS``)
    and the unit names and worker count the inventory published. Semantics are in each rule's annotations and in
    README "Monitoring".
``monitoring_alertmanager_config(receivers, route)``
    -> alertmanager.yml: the first receiver is the default route's; ``route`` is merged over ``ROUTE_DEFAULTS``.
``monitoring_node_exporter_args(units, textfile_dir, listen)``
    -> node exporter's argv (systemd collector restricted to ``units``, with NRestarts, and the textfile collector).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import re

from ansible.errors import AnsibleFilterError

# Thresholds and durations of the alert rules (roles/monitoring/defaults/main.yml restates none of them: it only
# overrides). Durations are Prometheus duration strings.
ALERT_DEFAULTS = {
    # A unit that is not active this long is down: systemd's own recovery of a crash (RestartSec, 30 s by default)
    # keeps it "activating" for less; a unit the start limit gave up on (failed) or that nobody restarts stays.
    "down_for": "5m",
    # One automatic restart (NRestarts grew by one) is reported for this long as SGLangServiceRestarted.
    "restart_window": "15m",
    # This many automatic restarts within loop_window is a restart loop (critical).
    "loop_restarts": 2,
    "loop_window": "30m",
    # /metrics not answering this long while the unit is up: longer than a cold start of Kimi-K2.5 (~10 min).
    "unreachable_for": "20m",
    # node exporter (the host itself) not answering this long.
    "host_down_for": "2m",
    # Requests waiting in the scheduler's queue above this for this long.
    "queue_high": 128,
    "queue_high_for": "5m",
    # Requests in the scheduler and no generated token over stuck_window, for stuck_for.
    "stuck_window": "5m",
    "stuck_for": "5m",
    # The router lists fewer healthy workers than the inventory has nodes, for this long.
    "router_workers_for": "2m",
    # GPU health (textfile collector): throttle reasons, PCIe link, Xid/ECC windows, a collector that stopped.
    "gpu_throttle_for": "5m",
    "gpu_pcie_for": "10m",
    "gpu_pcie_min_utilization": 0.5,
    "gpu_error_window": "30m",
    "gpu_missing_for": "2m",
    "gpu_health_stale_after_s": 300,
}

# NVIDIA's Xid catalog (docs.nvidia.com/deploy/xid-errors): errors that mean the GPU or its memory needs a reset,
# a drain or a replacement. Others (13 graphics exception, 31 MMU fault, 43 stopped channel) are mostly the
# application's; 45 (preemptive cleanup) follows every killed GPU process and is not reported at all.
XID_FATAL = (48, 61, 62, 63, 64, 74, 79, 92, 94, 95, 109, 119, 120, 136, 140, 143, 154)
XID_IGNORED = (45,)

ROUTE_DEFAULTS = {"group_by": ["alertname", "node"], "group_wait": "30s", "group_interval": "5m",
                  "repeat_interval": "4h"}

_DURATION = re.compile(r"^([0-9]+(ms|s|m|h|d|w|y))+$")


def _need_duration(name, value):
    if not isinstance(value, str) or not _DURATION.match(value):
        raise AnsibleFilterError("monitoring alert setting %s=%r is not a Prometheus duration (e.g. 30s, 5m, 1h)"
                                 % (name, value))
    return value


def _settings(alerts):
    unknown = sorted(set(alerts or {}) - set(ALERT_DEFAULTS))
    if unknown:
        raise AnsibleFilterError("unknown monitoring alert setting(s) %s; known: %s"
                                 % (", ".join(unknown), ", ".join(sorted(ALERT_DEFAULTS))))
    out = dict(ALERT_DEFAULTS)
    out.update(alerts or {})
    for key, default in ALERT_DEFAULTS.items():
        if isinstance(default, str):
            _need_duration(key, out[key])
        else:
            try:
                out[key] = type(default)(out[key])
            except (TypeError, ValueError):
                raise AnsibleFilterError("monitoring alert setting %s=%r is not a number" % (key, out[key]))
    return out


_UNIT_NAME = re.compile(r"^[A-Za-z0-9:_.@-]+$")


def _units_regex(units):
    """An RE2 alternation of exact unit names with no backslash (``.`` as ``[.]``): the same text is valid in a
    PromQL string, in node exporter's flag and in a systemd EnvironmentFile, each of which treats ``\\`` apart."""
    units = sorted({u for u in units if u})
    for unit in units:
        if not _UNIT_NAME.match(unit):
            raise AnsibleFilterError("unit name %r has characters a systemd unit name cannot have" % (unit,))
    return "|".join(u.replace(".", "[.]") for u in units)


def _published_list(published):
    if isinstance(published, dict):
        published = list(published.values())
    out = [p for p in (published or []) if isinstance(p, dict) and p.get("node")]
    names = [p["node"] for p in out]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise AnsibleFilterError("two published monitoring targets name the same node: %s" % ", ".join(dupes))
    return out


def _split_url(url):
    """``http://host:port/path`` -> (scheme, "host:port")."""
    m = re.match(r"^(https?)://([^/]+?)/?$", str(url).strip())
    if not m:
        raise AnsibleFilterError("published endpoint %r is not http(s)://host:port" % (url,))
    return m.group(1), m.group(2)


def monitoring_scrape_configs(published, settings=None):
    """The ``scrape_configs`` list (see the module docstring)."""
    settings = dict(settings or {})
    auth = dict(settings.get("scrape_auth") or {})
    unknown = sorted(set(auth) - {"node", "sglang", "sglang_router"})
    if unknown:
        raise AnsibleFilterError("scrape_auth names unknown job(s) %s; known: node, sglang, sglang_router"
                                 % ", ".join(unknown))
    hosts = _published_list(published)
    jobs = []

    def job(name, targets, extra=None):
        if not targets:
            return
        config = {"job_name": name, "static_configs": targets}
        config.update(extra or {})
        config.update(copy.deepcopy(auth.get(name) or {}))
        jobs.append(config)

    def target(address, host, role):
        return {"targets": [address], "labels": {"node": host["node"], "role": role}}

    job("node", [target(h["node_exporter"], h, "+".join(h.get("roles") or ["host"])) for h in hosts
                 if h.get("node_exporter")])
    by_scheme = {}
    for h in hosts:
        if h.get("sglang"):
            scheme, address = _split_url(h["sglang"]["url"])
            by_scheme.setdefault(scheme, []).append(target(address, h, "gpu"))
    for scheme in sorted(by_scheme):
        job("sglang" if scheme == "http" else "sglang_https", by_scheme[scheme],
            {"metrics_path": "/metrics", "scheme": scheme})
    job("sglang_router", [target(_split_url(h["router"]["url"])[1], h, "router") for h in hosts if h.get("router")],
        {"metrics_path": "/metrics"})
    server = settings.get("server") or {}
    if server.get("node"):
        job("prometheus", [{"targets": [server["prometheus"]], "labels": {"node": server["node"], "role": "monitoring"}}])
        job("alertmanager", [{"targets": [server["alertmanager"]],
                              "labels": {"node": server["node"], "role": "monitoring"}}])
    return jobs


def _new_or_grown(series, window):
    """A counter that grew within ``window``, or whose series appeared within it: the collector writes an Xid's
    series with its first event, at 1, and increase() does not count a series' first sample."""
    return "increase(%s[%s]) > 0\nor (%s unless %s offset %s) * 0 + 1" % (series, window, series, series, window)


def _rule(name, expr, severity, summary, description, for_=None):
    rule = {"alert": name, "expr": expr}
    if for_:
        rule["for"] = for_
    rule["labels"] = {"severity": severity}
    rule["annotations"] = {"summary": summary, "description": description}
    return rule


def monitoring_alert_rules(published, alerts=None):
    """The Prometheus rule file (see the module docstring and README "Monitoring")."""
    s = _settings(alerts)
    hosts = _published_list(published)
    sglang_units = _units_regex(h["sglang"].get("unit") for h in hosts if h.get("sglang"))
    router_units = _units_regex(h["router"].get("unit") for h in hosts if h.get("router"))
    workers = [int(h["router"].get("workers") or 0) for h in hosts if h.get("router")]
    restarts = 'node_systemd_service_restart_total{name=~"%s"}' % sglang_units
    return {"groups": _service_group(s, sglang_units, router_units, restarts) + _serving_group(s)
            + _router_group(s, workers, sglang_units, restarts) + _gpu_group(s, sglang_units)}


def _service_group(s, sglang_units, router_units, restarts):
    """The units: an SGLang unit restarted once, in a loop, or down; the router unit down; a host down."""
    groups = []
    service = []
    if sglang_units:
        service += [
            _rule("SGLangServiceRestarted",
                  "increase(%s[%s]) >= 1\nunless increase(%s[%s]) >= %d"
                  % (restarts, s["restart_window"], restarts, s["loop_window"], s["loop_restarts"]),
                  "warning", "{{ $labels.name }} on {{ $labels.node }} crashed and systemd restarted it",
                  "systemd restarted the unit automatically (NRestarts grew) within the last %s. One recovered "
                  "crash: read the journal of the previous run (journalctl -u {{ $labels.name }} -n 200 --no-pager "
                  "-o cat) for its first traceback. A deliberate restart (systemctl restart, the rolling redeploy) "
                  "resets NRestarts and is not reported." % s["restart_window"]),
            _rule("SGLangServiceRestartLoop",
                  "increase(%s[%s]) >= %d" % (restarts, s["loop_window"], s["loop_restarts"]),
                  "critical", "{{ $labels.name }} on {{ $labels.node }} restarts in a loop",
                  "systemd restarted the unit {{ $value | printf \"%%.0f\" }} times within %s: the same failure "
                  "comes back on every start (a restart with the same flags fails again). Once StartLimitBurst is "
                  "reached the unit stays failed and SGLangServiceDown follows." % s["loop_window"]),
            _rule("SGLangServiceDown",
                  'max by (instance, job, node, name) (node_systemd_unit_state{name=~"%s", state="active"}) == 0'
                  % sglang_units, "critical", "{{ $labels.name }} on {{ $labels.node }} is down",
                  "The unit has not been active for %s: stopped, failed after its start limit, or never started. "
                  "A crash systemd recovers from is active again after RestartSec and does not fire this."
                  % s["down_for"], s["down_for"]),
        ]
    if router_units:
        service.append(_rule(
            "SGLangRouterServiceDown",
            'max by (instance, job, node, name) (node_systemd_unit_state{name=~"%s", state="active"}) == 0'
            % router_units, "critical", "{{ $labels.name }} on {{ $labels.node }} is down",
            "The router unit has not been active for %s: no client request reaches any worker." % s["down_for"],
            s["down_for"]))
    service.append(_rule(
        "HostDown", 'up{job="node"} == 0', "critical", "{{ $labels.node }} does not answer",
        "node exporter on {{ $labels.node }} ({{ $labels.instance }}) has not answered for %s: the host is down, "
        "unreachable or its exporter stopped." % s["host_down_for"], s["host_down_for"]))
    groups.append({"name": "sglang-service", "rules": service})
    return groups


def _serving_group(s):
    """What the servers' own metrics say: unreachable, a long queue, requests held with nothing generated."""
    groups = []
    serving = [
        _rule("SGLangMetricsUnreachable",
              'up{job=~"sglang|sglang_https"} == 0', "warning",
              "SGLang on {{ $labels.node }} has not answered /metrics for %s" % s["unreachable_for"],
              "Longer than a cold start takes: the server is hung, was started without --enable-metrics, or listens "
              "elsewhere.", s["unreachable_for"]),
        _rule("SGLangQueueHigh",
              "sum by (instance, job, node) (sglang:num_queue_reqs) > %d" % s["queue_high"], "warning",
              "{{ $value | printf \"%.0f\" }} requests wait in the queue on {{ $labels.node }}",
              "More than %d requests have waited in the scheduler's queue for %s: the node is saturated (add "
              "capacity or lower the load the router sends it)." % (s["queue_high"], s["queue_high_for"]),
              s["queue_high_for"]),
        _rule("SGLangNoProgress",
              "(sum by (instance, job, node) (sglang:num_queue_reqs) + sum by (instance, job, node) "
              "(sglang:num_running_reqs)) > 0\nunless on (instance, job, node) "
              "(sum by (instance, job, node) (rate(sglang:generation_tokens_total[%s])) > 0)" % s["stuck_window"],
              "critical", "SGLang on {{ $labels.node }} holds requests and generates nothing",
              "Requests are running or queued in the scheduler, and no request finished with generated tokens over "
              "%s: a hung scheduler or NCCL collective (the process is alive, the port answers)." % s["stuck_window"],
              s["stuck_for"]),
    ]
    groups.append({"name": "sglang-serving", "rules": serving})
    return groups


def _router_group(s, workers, sglang_units, restarts):
    """The router: its metrics port down, fewer healthy workers than the inventory has nodes."""
    groups = []
    if workers:
        expected = max(workers)
        groups.append({"name": "sglang-router", "rules": [
            _rule("SGLangRouterDown", 'up{job="sglang_router"} == 0', "critical",
                  "The router on {{ $labels.node }} does not answer its metrics port",
                  "sglang-router's Prometheus listener ({{ $labels.instance }}) has not answered for %s."
                  % s["host_down_for"], s["host_down_for"]),
            _rule("SGLangRouterWorkersMissing",
                  "(\n  sum by (instance, job, node) (smg_worker_health)\n  or sum by (instance, job, node) "
                  '((up{job="sglang_router"} == 1) * 0)\n) < %d' % expected
                  + ("\nunless on () (sum (increase(%s[%s])) >= 1)" % (restarts, s["unreachable_for"])
                     if sglang_units else ""), "critical",
                  "The router on {{ $labels.node }} has {{ $value | printf \"%%.0f\" }} healthy of %d workers"
                  % expected,
                  "sglang-router lists fewer healthy workers (smg_worker_health) than the inventory has nodes (%d) "
                  "for %s: a node is unhealthy, was never registered or was removed and not re-added. Not "
                  "reported while a node recovers from a crash systemd restarted (within %s of the restart): "
                  "SGLangServiceRestarted says that, SGLangMetricsUnreachable a recovery that takes too long."
                  % (expected, s["router_workers_for"], s["unreachable_for"]), s["router_workers_for"]),
        ]})
    return groups


def _gpu_group(s, sglang_units):
    """The GPUs of the nodes that serve: missing, Xid errors, ECC, row remapping, throttling, PCIe, the collector."""
    groups = []
    if sglang_units:
        fatal = "|".join(str(x) for x in XID_FATAL)
        ignored = "|".join(str(x) for x in XID_IGNORED)
        window = s["gpu_error_window"]
        groups.append({"name": "gpu-health", "rules": [
            _rule("GPUMissing",
                  "sglang_gpus_present < sglang_gpus_expected\nor sglang_gpu_health_up == 0", "critical",
                  "{{ $labels.node }} does not see all its GPUs",
                  "nvidia-smi lists fewer GPUs than the node must have, or fails (a GPU fell off the bus, the driver "
                  "lost it): the node cannot serve its tensor-parallel group.", s["gpu_missing_for"]),
            _rule("GPUXidFatal", _new_or_grown('sglang_gpu_xid_errors_total{xid=~"%s"}' % fatal, window), "critical",
                  "Xid {{ $labels.xid }} on GPU {{ $labels.gpu }} ({{ $labels.pci_bus_id }}) of {{ $labels.node }}",
                  "The kernel log reported an Xid that NVIDIA's catalog says needs a GPU reset, a drain or a "
                  "replacement (e.g. 79 fallen off the bus, 48/94/95 ECC, 63/64 row remapping, 119/120 GSP)."),
            _rule("GPUXidError", _new_or_grown('sglang_gpu_xid_errors_total{xid!~"%s|%s"}' % (fatal, ignored), window),
                  "warning",
                  "Xid {{ $labels.xid }} on GPU {{ $labels.gpu }} ({{ $labels.pci_bus_id }}) of {{ $labels.node }}",
                  "The kernel log reported an Xid that is usually the application's (13, 31, 43): look at the "
                  "serving process's log around that time."),
            _rule("GPUEccUncorrected",
                  "increase(sglang_gpu_ecc_errors_uncorrected_volatile_total[%s]) > 0" % window, "critical",
                  "Uncorrected ECC errors on GPU {{ $labels.gpu }} of {{ $labels.node }}",
                  "The GPU counted uncorrectable memory errors since the driver loaded; the process that hit them "
                  "died, a row remap is pending."),
            _rule("GPUMemoryRepairPending",
                  "sglang_gpu_remapped_rows_pending == 1\nor sglang_gpu_retired_pages_pending == 1", "warning",
                  "GPU {{ $labels.gpu }} of {{ $labels.node }} needs a reset to repair its memory",
                  "A row remap (or page retirement) is pending: it takes effect at the next GPU reset. Drain the node "
                  "and reset the GPU (or reboot) at the next opportunity."),
            _rule("GPURowRemapFailure", "sglang_gpu_remapped_rows_failure == 1", "critical",
                  "Row remapping failed on GPU {{ $labels.gpu }} of {{ $labels.node }}",
                  "The GPU ran out of spare rows: NVIDIA's guidance is to replace it."),
            _rule("GPUThrottled",
                  'max by (instance, job, node, gpu, pci_bus_id) (sglang_gpu_clocks_event_reason_active'
                  '{reason=~"hw_slowdown|hw_thermal_slowdown|hw_power_brake_slowdown|sw_thermal_slowdown"}) == 1',
                  "warning", "GPU {{ $labels.gpu }} of {{ $labels.node }} is thermally or hardware throttled",
                  "A thermal, hardware-slowdown or power-brake clock event reason has been active for %s (the power "
                  "cap alone, sw_power_cap, is normal under load and not reported): check cooling, airflow and the "
                  "PSU." % s["gpu_throttle_for"], s["gpu_throttle_for"]),
            _rule("GPUPcieWidthDegraded",
                  "sglang_gpu_pcie_link_width_current < sglang_gpu_pcie_link_width_max", "warning",
                  "GPU {{ $labels.gpu }} of {{ $labels.node }} runs its PCIe link narrower than it can",
                  "The link trained at fewer lanes than the GPU and slot support, for %s (GPUs lower the link "
                  "speed at idle, not its width): reseat the card or check the riser." % s["gpu_pcie_for"],
                  s["gpu_pcie_for"]),
            _rule("GPUPcieGenDegraded",
                  "sglang_gpu_pcie_link_gen_current < sglang_gpu_pcie_link_gen_max\nand on (instance, job, node, gpu)"
                  " sglang_gpu_utilization_ratio >= %s" % s["gpu_pcie_min_utilization"], "warning",
                  "GPU {{ $labels.gpu }} of {{ $labels.node }} runs PCIe below its generation under load",
                  "Under load (utilization >= %d%%) the link stayed below the highest generation the GPU and the "
                  "host support, for %s (at idle the GPU lowers it on purpose): a degraded slot, riser or "
                  "BIOS setting." % (round(s["gpu_pcie_min_utilization"] * 100), s["gpu_pcie_for"]),
                  s["gpu_pcie_for"]),
            _rule("GPUHealthCollectorStale",
                  "time() - sglang_gpu_health_last_run_timestamp_seconds > %d" % s["gpu_health_stale_after_s"],
                  "warning", "The GPU health collector on {{ $labels.node }} stopped",
                  "sglang-gpu-health has not written its metrics for more than %d s: GPU faults are not seen."
                  % s["gpu_health_stale_after_s"]),
        ]})
    return groups


def monitoring_alertmanager_config(receivers, route=None):
    """alertmanager.yml (see the module docstring)."""
    receivers = list(receivers or [])
    if not receivers or not all(isinstance(r, dict) and r.get("name") for r in receivers):
        raise AnsibleFilterError("monitoring_alertmanager_receivers must list at least one receiver with a name")
    if not any(k.endswith("_configs") and v for k, v in receivers[0].items()):
        raise AnsibleFilterError(
            "receiver %r has no *_configs (webhook_configs, email_configs, pagerduty_configs, ...): alerts would "
            "reach nobody; give it one" % receivers[0]["name"])
    merged = dict(ROUTE_DEFAULTS)
    merged.update(route or {})
    merged["receiver"] = merged.get("receiver") or receivers[0]["name"]
    names = {r["name"] for r in receivers}
    if merged["receiver"] not in names:
        raise AnsibleFilterError("route receiver %r is not one of the receivers %s"
                                 % (merged["receiver"], sorted(names)))
    ordered = {"receiver": merged.pop("receiver")}
    ordered.update(merged)
    return {"route": ordered, "receivers": copy.deepcopy(receivers)}


def monitoring_node_exporter_args(units, textfile_dir, listen):
    """node exporter's argv (see the module docstring)."""
    units = sorted({u for u in (units or []) if u})
    args = ["--web.listen-address=%s" % listen,
            "--collector.textfile.directory=%s" % textfile_dir]
    if units:
        args += ["--collector.systemd", "--collector.systemd.enable-restarts-metrics",
                 "--collector.systemd.unit-include=%s" % _units_regex(units)]
    return args


class FilterModule:
    def filters(self):
        return {
            "monitoring_scrape_configs": monitoring_scrape_configs,
            "monitoring_alert_rules": monitoring_alert_rules,
            "monitoring_alertmanager_config": monitoring_alertmanager_config,
            "monitoring_node_exporter_args": monitoring_node_exporter_args,
        }
