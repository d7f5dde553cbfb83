"""Filters for the router side of a fleet: which URL the router reaches each SGLang worker at.

``sglang_router_worker_urls``
    inventory hostnames -> ``["http://<address>:<port>", ...]`` in inventory order. A host's address is its
    ``sglang_router_worker_address`` host variable, else its ``ansible_host`` when that is not a container or
    local connection, else the inventory hostname; its port is ``sglang_router_worker_port`` on the host, else
    the port of its ``sglang_service_options``/``sglang_service_extra_options``, else the default given.
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

_LOCAL_CONNECTIONS = {"local", "containers.podman.podman", "community.docker.docker", "docker", "podman"}


def _port(host_vars: dict, default_port) -> int:
    for source in (host_vars.get("sglang_router_worker_port"),
                   (host_vars.get("sglang_service_extra_options") or {}).get("port"),
                   (host_vars.get("sglang_service_options") or {}).get("port"),
                   default_port):
        if source not in (None, ""):
            try:
                return int(source)
            except (TypeError, ValueError):
                raise AnsibleFilterError(f"worker port {source!r} is not an integer")
    raise AnsibleFilterError("no worker port")


def sglang_router_worker_url(host: str, hostvars, scheme: str = "http", default_port=30000) -> str:
    """The URL the router reaches ``host``'s SGLang server at (see the module docstring)."""
    host_vars = dict(hostvars.get(host) or {}) if hasattr(hostvars, "get") else {}
    address = host_vars.get("sglang_router_worker_address")
    if not address:
        ansible_host = host_vars.get("ansible_host")
        connection = host_vars.get("ansible_connection", "ssh")
        address = ansible_host if ansible_host and connection not in _LOCAL_CONNECTIONS else host
    if scheme not in ("http", "https"):
        raise AnsibleFilterError(f"worker scheme must be http or https, got {scheme!r}")
    address = str(address)
    if ":" in address and not address.startswith("["):
        address = f"[{address}]"  # IPv6 literal
    return f"{scheme}://{address}:{_port(host_vars, default_port)}"


def sglang_router_worker_urls(hosts, hostvars, scheme: str = "http", default_port=30000) -> list[str]:
    """``sglang_router_worker_url`` of each host, in order; AnsibleFilterError on duplicates."""
    if isinstance(hosts, str):
        hosts = [hosts]
    urls = [sglang_router_worker_url(h, hostvars, scheme, default_port) for h in hosts]
    dupes = sorted({u for u in urls if urls.count(u) > 1})
    if dupes:
        raise AnsibleFilterError(f"two inventory hosts map to the same worker URL: {', '.join(dupes)}")
    return urls


class FilterModule:
    def filters(self):
        return {"sglang_router_worker_urls": sglang_router_worker_urls,
                "sglang_router_worker_url": sglang_router_worker_url}
