# -*- coding: utf-8 -*-
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the gateway (roles/sglang_gateway, nginx in front of SGLang or the router) is configured from.

``deployment_api_keys | sglang_gateway_keys`` -> list of dicts ``name``, ``pattern``: each key's case-sensitive
match of the Authorization header (plugins/plugin_utils/api_keys.py); fails, listing every problem and never a key,
when a key is unusable.

``groups['sglang_routers'] | sglang_gateway_probe_sources(hostvars, extra)`` -> sorted list of networks (CIDR) that
may GET the probe paths without a key: loopback, every address the named hosts' gathered facts list
(``all_ipv4_addresses``, ``all_ipv6_addresses``), and ``extra`` (addresses or networks). The router asks a worker for
/health, /server_info and /model_info without any Authorization header (sglang-router 0.3.2,
tests/contract/test_auth_contract.py), and Prometheus scrapes /metrics without one.

``sglang_gateway_backend_url | sglang_gateway_backend`` -> ``host:port`` nginx proxies to; fails unless the host is
a loopback address or name (listeners.is_loopback): a backend beyond loopback would take requests without a key.
"""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

from ansible.errors import AnsibleFilterError

from ansible_collections.blackwell.sglang.plugins.plugin_utils.api_keys import bearer_pattern, key_problems
from ansible_collections.blackwell.sglang.plugins.module_utils.host.listeners import is_loopback

LOOPBACK = ("127.0.0.1/32", "::1/128")


def sglang_gateway_keys(keys, where="deployment_api_keys"):
    """``keys`` (list of dicts ``name``, ``key``) -> list of dicts ``name``, ``pattern`` (see the module docstring).

    :raises AnsibleFilterError: every problem of ``keys`` (api_keys.key_problems), none of them showing a key.
    """
    problems = key_problems(keys, where)
    if problems:
        raise AnsibleFilterError("; ".join(problems))
    return [{"name": entry["name"], "pattern": bearer_pattern(entry["key"])} for entry in keys]


def _network(value, what):
    try:
        return ipaddress.ip_network(str(value).strip(), strict=False)
    except ValueError:
        raise AnsibleFilterError(f"{what}: {value!r} is not an IP address or network") from None


def sglang_gateway_probe_sources(hosts, hostvars, extra=()):
    """Networks allowed to GET the probe paths without a key (see the module docstring).

    :param hosts: inventory hostnames whose addresses are allowed (the router hosts on a GPU node, the monitoring
        hosts everywhere): their gathered addresses, else their ansible_host when it is an IP address.
    :param hostvars: Ansible's hostvars.
    :param extra: more addresses or networks (sglang_gateway_probe_extra_sources).
    :raises AnsibleFilterError: a host without gathered addresses or an address as ansible_host, or an extra entry
        that is not an address.
    """
    networks = {_network(n, "loopback") for n in LOOPBACK}
    for host in hosts or []:
        host_vars = hostvars.get(host) or {}
        facts = host_vars.get("ansible_facts") or {}
        addresses = list(facts.get("all_ipv4_addresses") or []) + list(facts.get("all_ipv6_addresses") or [])
        if not addresses:
            # not gathered in this run (--limit): its ansible_host, when that is an address
            try:
                addresses = [str(ipaddress.ip_address(str(host_vars.get("ansible_host") or host)))]
            except ValueError:
                raise AnsibleFilterError(f"{host}: no gathered addresses (ansible_facts.all_ipv4_addresses) and no "
                                         f"address as its ansible_host; the gateway lets it probe by address, so "
                                         f"gather its facts in this run (do not --limit it out), or list its "
                                         f"addresses in sglang_gateway_probe_extra_sources") from None
        networks.update(_network(a, host) for a in addresses)
    networks.update(_network(n, "sglang_gateway_probe_extra_sources") for n in extra or [])
    return [str(n) for n in sorted(networks, key=lambda n: (n.version, n))]


def sglang_gateway_backend(url, label="the backend"):
    """The ``host:port`` of ``url`` (http://127.0.0.1:30001) that nginx proxies to (see the module docstring).

    :param label: what the gateway fronts (sglang, router), for the error.
    :raises AnsibleFilterError: a URL without host and port, or a host beyond loopback.
    """
    try:
        parts = urlsplit(str(url))
        port = parts.port
    except ValueError as exc:
        raise AnsibleFilterError(f"the gateway's backend {url!r} is not a URL: {exc}") from None
    if not parts.hostname or port is None:
        raise AnsibleFilterError(f"the gateway's backend {url!r} names no host and port (http://127.0.0.1:PORT)")
    if not is_loopback(parts.hostname):
        raise AnsibleFilterError(
            f"the gateway fronts {url}, which is not on loopback: clients could reach it without a key. {label} must "
            f"listen on 127.0.0.1 (deployment_backend_port) behind the gateway")
    return parts.netloc


class FilterModule:
    def filters(self):
        return {"sglang_gateway_backend": sglang_gateway_backend,
                "sglang_gateway_keys": sglang_gateway_keys,
                "sglang_gateway_probe_sources": sglang_gateway_probe_sources}
