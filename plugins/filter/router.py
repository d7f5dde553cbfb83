"""Filters for the router side of a fleet: which URL the router reaches each SGLang worker at.

``sglang_router_worker_urls``
    inventory hostnames + hostvars -> ``["http://<address>:<port>", ...]`` in inventory order: each host's
    ``sglang_service_endpoint.router_url``, as sglang_service published it (the port, scheme and address the
    node's SGLang really serves on; see plugins/filter/sglang_endpoint.py ``sglang_service_endpoint``). The router
    restates none of them.
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError


def _endpoint(hostvars, host):
    try:
        host_vars = hostvars[host]
    except (KeyError, TypeError):
        return None
    try:
        return host_vars["sglang_service_endpoint"]
    except (KeyError, TypeError):
        return None


def sglang_router_worker_url(host: str, hostvars) -> str:
    """The URL the router reaches ``host``'s SGLang server at: its published ``router_url``.

    Raises AnsibleFilterError when the host published no endpoint, or one the router cannot reach (loopback)."""
    endpoint = _endpoint(hostvars, host)
    if not endpoint:
        raise AnsibleFilterError(f"{host} has no sglang_service_endpoint: sglang_service publishes it (deploy.yml's "
                                 f"first play runs its options step for every GPU node)")
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
    urls = [sglang_router_worker_url(h, hostvars) for h in hosts]
    dupes = sorted({u for u in urls if urls.count(u) > 1})
    if dupes:
        raise AnsibleFilterError(f"two inventory hosts map to the same worker URL: {', '.join(dupes)}")
    return urls


class FilterModule:
    def filters(self):
        return {"sglang_router_worker_urls": sglang_router_worker_urls, "sglang_router_workers": sglang_router_workers,
                "sglang_router_worker_url": sglang_router_worker_url}
