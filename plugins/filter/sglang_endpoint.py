# -*- coding: utf-8 -*-
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters for where a deployed SGLang server and sglang-router listen, and how many scheduler processes a node runs.

``sglang_node_address``
    inventory host (+ advertised name, ansible_host, connection) -> the name other hosts reach it at.

``sglang_group_members``
    a multi-node group's hostnames + hostvars -> the other nodes' name, node rank and address.

``sglang_service_endpoint`` / ``sglang_router_metrics_endpoint``
    what a deployed server listens on (unset options at the snapshot's defaults), as the owning role publishes it:
    SGLang's probe and router URLs; the router's Prometheus listener, locally and for a scraper on another host.

``sglang_schedulers_per_node``
    SGLang options -> scheduler processes on one node (one per GPU), after 0.5.23's rank layout.

Unset options take the defaults of the release's argparse snapshot (plugins/plugin_utils/sglang_cli.py): SGLang
0.5.23's server_args (``--host`` 127.0.0.1, ``--port`` 30000, tp/pp/dp 1, one node) and sglang-router 0.3.2's
router_args.py (``--prometheus-host`` 0.0.0.0, ``--prometheus-port`` 29000).
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.blackwell.sglang.plugins.module_utils.host.listeners import is_loopback
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_cli import (
    SnapshotError, load_snapshot, normalise_options, option_index)


def _parser_default(version: str, flag: str, product: str = "sglang"):
    """The default of ``--flag`` in the argparse snapshot of SGLang (or sglang-router) ``version`` (None when the
    option has none)."""
    try:
        action = option_index(load_snapshot(str(version), product)).get("--" + flag)
    except SnapshotError as exc:
        raise AnsibleFilterError(str(exc)) from None
    return None if action is None else action.get("default")


def sglang_schedulers_per_node(options: dict, version: str) -> int:
    """Scheduler processes SGLang ``version`` starts on one node for ``options`` (each holds one GPU).

    0.5.23 (entrypoints/engine.py ``_calculate_rank_ranges`` and ``_launch_scheduler_processes``,
    managers/data_parallel_controller.py ``launch_dp_schedulers``, arg_groups/parallel_hook.py
    ``_handle_deprecated_dp_attention``): a node runs ``max(pp // nnodes, 1)`` pipeline stages of
    ``tp // max(nnodes // pp, 1)`` tensor-parallel ranks each, once per data-parallel replica (``--dp-size``).
    ``--attn-dp-size`` splits attention inside the tensor-parallel group and adds no process; the deprecated
    ``--dp-size N --enable-dp-attention`` means ``--attn-dp-size N``. Unset options take the parser's defaults.
    """
    opts = normalise_options(options)

    def num(name):
        value = opts.get(name)
        if value in (None, ""):
            value = _parser_default(version, name)
        try:
            return max(int(value if value is not None else 1), 1)
        except (TypeError, ValueError):
            raise AnsibleFilterError(f"--{name} must be an integer, got {value!r}")

    tp, pp, nnodes, dp = num("tp-size"), num("pp-size"), num("nnodes"), num("dp-size")
    if opts.get("enable-dp-attention") and num("attn-dp-size") == 1:
        dp = 1  # the old spelling: dp counted attention-DP groups, not replicas
    pp_per_node = max(pp // nnodes, 1)
    tp_per_node = tp // max(nnodes // pp, 1)
    return pp_per_node * max(tp_per_node, 1) * dp


_WILDCARD_HOSTS = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}


def _url(scheme: str, address: str, port: int) -> str:
    address = str(address)
    if ":" in address and not address.startswith("["):
        address = f"[{address}]"  # IPv6 literal
    return f"{scheme}://{address}:{port}"


_LOCAL_CONNECTIONS = {"local", "containers.podman.podman", "community.docker.docker", "docker", "podman"}


def node_address(host: str, advertise: str | None = None, ansible_host: str | None = None,
                 connection: str | None = None) -> str:
    """The name other hosts reach ``host`` at: ``advertise`` when set, else ``ansible_host`` unless the connection is
    local or a container's (its ansible_host is a container name, not an address), else the inventory name."""
    if advertise:
        return str(advertise)
    if ansible_host and (connection or "ssh") not in _LOCAL_CONNECTIONS:
        return str(ansible_host)
    return str(host)


def sglang_group_members(group: list, hostvars, this_host: str | None = None) -> list[dict]:
    """The nodes of a multi-node group other than ``this_host``: ``name``, ``node_rank`` (its place in ``group``, rank
    0 first) and ``address`` (``node_address`` from its inventory: ``sglang_service_advertise_address``, else
    ``ansible_host`` unless the connection is local or a container's, else the name). Read from the inventory, not from
    what the node published, so an unreachable node is still named."""
    out = []
    for rank, host in enumerate(group or []):
        if host == this_host:
            continue
        try:
            own = hostvars[host]
        except (KeyError, TypeError):
            own = {}
        out.append({"name": str(host), "node_rank": rank,
                    "address": node_address(host, own.get("sglang_service_advertise_address"), own.get("ansible_host"),
                                            own.get("ansible_connection"))})
    return out


def _listener(opts: dict, version: str, product: str, host_flag: str, port_flag: str) -> tuple[str, int]:
    """(host, port) a server listens on: ``--host_flag``/``--port_flag`` of the normalised ``opts``, unset ones at the
    parser defaults of ``product`` ``version``."""
    host = opts.get(host_flag)
    host = str(_parser_default(version, host_flag, product) if host in (None, "") else host)
    port = opts.get(port_flag)
    try:
        port = int(_parser_default(version, port_flag, product) if port in (None, "") else port)
    except (TypeError, ValueError):
        raise AnsibleFilterError(f"--{port_flag} must be an integer, got {opts.get(port_flag)!r}")
    return host, port


def sglang_service_endpoint(options: dict, version: str, unit: str, address: str | None = None,
                            gateway_port: int | None = None, nodes: list | None = None) -> dict:
    """What the deployed service is, for every role that talks to it (smoke_health, the router, drain, playbooks).

    :param options: the effective SGLang options (dashed names).
    :param version: SGLang release whose parser defaults fill unset options (``--host`` 127.0.0.1, ``--port``
        30000 in 0.5.23's server_args).
    :param unit: the systemd unit name.
    :param address: the name or address other hosts reach this node at (None: not known).
    :param gateway_port: the port of the gateway in front of SGLang on this node (roles/sglang_gateway; None: none).
    :param nodes: the inventory hostnames of this node's multi-node group, rank 0 first (``sglang_service_nodes``);
        empty or one name: the node serves alone.
    :returns: dict ``unit``; ``host`` and ``port`` SGLang listens on, ``loopback_only`` when that host is a loopback
        address; ``scheme`` (https with ``--ssl-certfile``);
        ``probe_url`` on the node itself, SGLang's own listener (the loopback address of the wildcard it listens on,
        else that host); ``gateway_url`` the gateway on the node itself (None without one); ``router_url`` other
        hosts use: the gateway's when there is one, else SGLang's (None when it listens on loopback only, or the
        address is unknown); ``served_model_name`` (0.5.23 serves the model path when ``--served-model-name`` is
        unset); ``schedulers`` on this node (``sglang_schedulers_per_node``); ``node_rank`` (``--node-rank``, 0 on
        one node), ``group`` (the group's hostnames, rank 0 first; ``[]`` on one node) and ``serves_api``: only rank
        0 of a group serves the API; ``rendezvous`` (``host`` and ``port`` of ``--dist-init-addr``, None without
        it). A node of rank >= 1 runs its ranks and SGLang 0.5.23's dummy health app
        (``/health``, ``/health_generate``, ``/ping``, 404 for ``/v1/*``: ``entrypoints/engine.py``), so it has no
        ``router_url``: no router, smoke or client may use it.
    """
    opts = normalise_options(options)
    host, port = _listener(opts, version, "sglang", "host", "port")
    scheme = "https" if opts.get("ssl-certfile") else "http"
    local = _WILDCARD_HOSTS.get(host, host)
    loopback_only = is_loopback(host)
    served = opts.get("served-model-name") or opts.get("model-path")
    if gateway_port not in (None, ""):
        try:
            gateway_port = int(gateway_port)
        except (TypeError, ValueError):
            raise AnsibleFilterError(f"the gateway port must be an integer, got {gateway_port!r}")
        router_url = _url("http", address, gateway_port) if address else None
        gateway_url = _url("http", "127.0.0.1", gateway_port)
    else:
        router_url = None if loopback_only or not address else _url(scheme, address, port)
        gateway_url = None
    try:
        node_rank = int(opts.get("node-rank") or 0)
    except (TypeError, ValueError):
        raise AnsibleFilterError(f"--node-rank must be an integer, got {opts.get('node-rank')!r}")
    group = [str(n) for n in nodes or []]
    rendezvous = None
    if opts.get("dist-init-addr"):
        dist_host, dummy, dist_port = str(opts["dist-init-addr"]).rpartition(":")
        try:
            rendezvous = {"host": dist_host.strip("[]"), "port": int(dist_port)}
        except ValueError:
            raise AnsibleFilterError(f"--dist-init-addr must be HOST:PORT, got {opts['dist-init-addr']!r}")
    return {"unit": unit, "host": host, "port": port, "scheme": scheme,
            "loopback_only": loopback_only, "probe_url": _url(scheme, local, port), "gateway_url": gateway_url,
            "router_url": router_url if node_rank == 0 else None,
            "node_rank": node_rank, "group": group if len(group) > 1 else [], "serves_api": node_rank == 0,
            "rendezvous": rendezvous,
            "served_model_name": None if served is None else str(served),
            "schedulers": sglang_schedulers_per_node(options, version)}


def sglang_router_metrics_endpoint(options: dict, version: str, address: str | None = None) -> dict:
    """Where sglang-router ``version`` serves its Prometheus metrics with ``options`` (its effective options).

    :param options: the router's options (dashed names); ``prometheus-host`` and ``prometheus-port`` unset take the
        parser's defaults (0.3.2's router_args.py: 0.0.0.0 and 29000).
    :param address: the name or address other hosts reach the router host at (None: not known).
    :returns: dict ``host`` and ``port`` it listens on; ``local_url`` from the router host itself (the loopback
        address of the wildcard it listens on, else that host); ``scrape_url`` other hosts use (None when it listens
        on loopback only or ``address`` is unknown).
    """
    host, port = _listener(normalise_options(options), version, "router", "prometheus-host", "prometheus-port")
    return {"host": host, "port": port, "local_url": _url("http", _WILDCARD_HOSTS.get(host, host), port),
            "scrape_url": None if is_loopback(host) or not address else _url("http", address, port)}


class FilterModule:
    def filters(self):
        return {"sglang_schedulers_per_node": sglang_schedulers_per_node,
                "sglang_service_endpoint": sglang_service_endpoint, "sglang_node_address": node_address,
                "sglang_router_metrics_endpoint": sglang_router_metrics_endpoint,
                "sglang_group_members": sglang_group_members}
