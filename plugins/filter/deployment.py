"""Inventory-level checks, before any host is contacted: what the inventory says must add up.

``inventory_hostname | deployment_inventory_problems(hostvars, groups, ...)`` -> list of messages (empty = fine),
every problem at once. It reads only inventory variables and what sglang_service published for each GPU node in
this run (``sglang_service_endpoint``, ``sglang_service_effective_options``; roles/deployment/vars/main.yml derives them), so
it runs first in every entry playbook (deploy.yml, playbooks/rolling_redeploy.yml, playbooks/rollback.yml) with no
connection to any host.

Checked:

* a GPU node runs no more scheduler processes than it has GPUs (``deployment_gpus_per_node``, or the devices its
  ``CUDA_VISIBLE_DEVICES`` lists), one GPU each;
* on one node, SGLang's HTTP port, ``--nccl-port`` and the multi-node ``--dist-init-addr`` port differ (SGLang 0.5.23
  binds each; the second bind fails with ``OSError: [Errno 98] Address already in use`` after the weights load);
* a router's workers: every host of its worker group published an endpoint the router can reach (not a server
  listening on loopback only; plugins/filter/router.py), and a router on a GPU node does not take that node's
  SGLang port;
* with the gateway in front (roles/sglang_gateway): SGLang listens on loopback only (else clients reach it without a
  key), a router host is not also a GPU node (each runs a gateway on deployment_port), and the deployment's API keys
  are usable (plugins/plugin_utils/api_keys.py; no message shows a key).
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.blackwell.sglang.plugins.plugin_utils.api_keys import key_problems


def _get(mapping, key, default=None):
    try:
        value = mapping[key]
    except (KeyError, TypeError):
        return default
    return default if value is None else value


def _int(value, what):
    try:
        return int(value)
    except (TypeError, ValueError):
        raise AnsibleFilterError(f"{what} must be an integer, got {value!r}")


def _visible_devices(environment) -> int | None:
    """How many devices ``CUDA_VISIBLE_DEVICES`` in the unit's environment lists (None when unset)."""
    raw = _get(environment or {}, "CUDA_VISIBLE_DEVICES")
    if raw is None:
        return None
    return len([d for d in str(raw).split(",") if d.strip()])


def _dist_init_port(options) -> int | None:
    addr = _get(options, "dist-init-addr") or _get(options, "dist_init_addr")
    if not addr or ":" not in str(addr):
        return None
    try:
        return int(str(addr).rsplit(":", 1)[1])
    except ValueError:
        return None


def gpu_node_problems(host: str, endpoint, options, gpus_per_node, environment) -> list[str]:
    """Problems of one GPU node from its published endpoint and effective options."""
    if not endpoint:
        return [f"{host}: sglang_service published no endpoint (the inventory check, roles/deployment validate, did not run for this host)"]
    options = options or {}
    errors = []
    gpus = _int(gpus_per_node or 0, "deployment_gpus_per_node")
    visible = _visible_devices(environment)
    have, where = (visible, "CUDA_VISIBLE_DEVICES in sglang_service_environment") if visible is not None \
        else (gpus, "deployment_gpus_per_node")
    if have and endpoint["schedulers"] > have:
        errors.append(f"{host}: the SGLang options start {endpoint['schedulers']} scheduler processes on this node "
                      f"(one GPU each: tp-size {_get(options, 'tp-size', 1)}, pp-size {_get(options, 'pp-size', 1)}, "
                      f"dp-size {_get(options, 'dp-size', 1)}, nnodes {_get(options, 'nnodes', 1)}) but it has {have} "
                      f"GPU(s) ({where})")
    if endpoint.get("gateway_url") and not endpoint.get("loopback_only"):
        errors.append(f"{host}: SGLang listens on {endpoint['host']} (--host), where clients reach it without a key; "
                      f"keep it on 127.0.0.1: the gateway ({endpoint['router_url'] or endpoint['gateway_url']}) is the "
                      f"node's public entry (remove host from sglang_service_extra_options)")
    ports = {"the HTTP port (--port)": endpoint["port"]}
    if _get(options, "nccl-port") not in (None, ""):
        ports["--nccl-port"] = _int(options["nccl-port"], "--nccl-port")
    dist = _dist_init_port(options)
    if dist is not None and _int(_get(options, "node-rank", 0), "--node-rank") == 0:
        ports["the --dist-init-addr port"] = dist
    seen = {}
    for what, port in ports.items():
        if port in seen:
            errors.append(f"{host}: {what} and {seen[port]} are both {port}; SGLang binds each, and the second bind "
                          f"fails with 'Address already in use' after the weights have loaded")
        else:
            seen[port] = what
    return errors


def router_problems(host: str, hostvars, router_port, worker_problems=()) -> list[str]:
    """Problems of one router host: its workers (sglang_router_workers' problems) and its port against the SGLang
    this host may also run."""
    errors = [f"{host}: {p}" for p in worker_problems or []]
    own = _get(_get(hostvars, host, {}), "sglang_service_endpoint")
    if own and own.get("gateway_url"):
        errors.append(f"{host}: is both a GPU node and a router host; each runs a gateway on the port clients use "
                      f"({own['gateway_url'].rsplit(':', 1)[1]}): put the router on a host of its own")
    elif own and _int(router_port, "sglang_router_port") == own["port"]:
        errors.append(f"{host}: the router and this node's SGLang both want port {own['port']}; give the router "
                      f"another sglang_router_port")
    return errors


def deployment_inventory_problems(host: str, hostvars, groups, gpu_node=None, router=None,
                                  api_keys=None) -> list[str]:
    """Every inventory problem of ``host``; empty when it adds up.

    :param hostvars: Ansible's hostvars (other hosts' published ``sglang_service_endpoint`` facts are read from it).
    :param gpu_node: for a GPU node, dict ``endpoint`` (its sglang_service_endpoint), ``options`` (effective SGLang
        options), ``gpus_per_node`` (deployment_gpus_per_node), ``environment`` (sglang_service_environment).
    :param router: for a router host, dict ``port`` (sglang_router_port) and ``worker_problems`` (the
        ``problems`` of its ``sglang_router_workers``).
    :param api_keys: deployment_api_keys, checked when given (a GPU node or router host: its gateway uses them).
    """
    errors = []
    if api_keys is not None:
        errors += [f"{host}: {p}" for p in key_problems(api_keys)]
    if gpu_node:
        errors += gpu_node_problems(host, gpu_node.get("endpoint"), gpu_node.get("options"),
                                    gpu_node.get("gpus_per_node"), gpu_node.get("environment"))
    if router:
        errors += router_problems(host, hostvars, router.get("port"), router.get("worker_problems"))
    return errors


class FilterModule:
    def filters(self):
        return {"deployment_inventory_problems": deployment_inventory_problems}
