# -*- coding: utf-8 -*-
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Ports a GPU node's services will bind, and who holds them now (``port_facts``).

``sglang_service_endpoint | preflight_wanted_ports(options, router=...)`` -> list of dicts ``port``, ``address``,
``what``, ``unit``, ``then`` (what happens if it is taken): SGLang's HTTP port, ``--nccl-port`` when set, the ``--dist-init-addr`` port on node rank 0 (SGLang
0.5.23 binds each: entrypoints/http_server.py uvicorn, the NCCL TCP store, torch.distributed's rendezvous), the
router's port when the router runs on this host too, and the gateway's (nginx.service, the port clients use).

``port_facts_result | preflight_port_problems(wanted)`` -> list of messages: each listener on a wanted port that is
not the unit being replaced, named with its PID and command line. Without this, SGLang binds after loading every
shard (10 minutes at real size) and dies with ``OSError: [Errno 98] Address already in use``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


from ansible.errors import AnsibleFilterError

from ansible_collections.blackwell.sglang.plugins.module_utils.host.listeners import clashes

_LOCALHOST = {"localhost": "127.0.0.1", "ip6-localhost": "::1"}


def _opt(options, name):
    for key in (name, name.replace("-", "_")):
        if key in (options or {}) and options[key] not in (None, ""):
            return options[key]
    return None


def preflight_wanted_ports(endpoint, options=None, router=None, gateway=None):
    """Ports this node's services will bind (see the module docstring).

    :param endpoint: sglang_service_endpoint (``port``, ``host``, ``unit``).
    :param options: the effective SGLang options.
    :param router: dict ``port``, ``host``, ``unit`` when the router runs on this host, else None.
    :param gateway: dict ``port``, ``host``, ``unit`` of the gateway (nginx) in front of SGLang or the router, else
        None.
    """
    if not isinstance(endpoint, dict) or "port" not in endpoint:
        raise AnsibleFilterError("preflight_wanted_ports expects sglang_service_endpoint, got %r" % (endpoint,))
    unit = endpoint.get("unit")
    host = str(endpoint.get("host") or "0.0.0.0")
    late = "SGLang would load every shard and then die with 'OSError: [Errno 98] Address already in use'"
    wanted = [{"port": int(endpoint["port"]), "address": host, "what": "SGLang's HTTP server (--port)", "unit": unit,
               "then": late}]
    nccl = _opt(options, "nccl-port")
    if nccl is not None:
        wanted.append({"port": int(nccl), "address": "0.0.0.0", "what": "SGLang's NCCL port (--nccl-port)",
                       "unit": unit, "then": late})
    dist = _opt(options, "dist-init-addr")
    if dist and ":" in str(dist) and int(_opt(options, "node-rank") or 0) == 0:
        wanted.append({"port": int(str(dist).rsplit(":", 1)[1]), "address": "0.0.0.0",
                       "what": "the multi-node rendezvous (--dist-init-addr, rank 0)", "unit": unit, "then": late})
    if router:
        wanted.append({"port": int(router["port"]), "address": str(router.get("host") or "0.0.0.0"),
                       "what": "sglang-router (sglang_router_port)", "unit": router.get("unit"),
                       "then": "the router would not start"})
    if gateway:
        wanted.append({"port": int(gateway["port"]), "address": str(gateway.get("host") or "0.0.0.0"),
                       "what": "the gateway (nginx, deployment_port)", "unit": gateway.get("unit"),
                       "then": "nginx would not start, and clients could not reach the endpoint"})
    return wanted


def _unseen(sock):
    """The holder of a socket whose PID preflight could not read: its user, and what would let it see the PID."""
    owner = ""
    if sock.get("uid") is not None:
        owner = " of user %s (uid %d)" % (sock.get("user") or "?", int(sock["uid"]))
    return ("a process%s whose PID preflight cannot read (naming it needs root with CAP_SYS_PTRACE, as on a host; "
            "containers drop that capability)" % owner)


def preflight_port_problems(facts, wanted):
    """Every listener on a wanted port that is not the unit that will bind it (see the module docstring)."""
    if not isinstance(facts, dict) or "listeners" not in facts:
        raise AnsibleFilterError("preflight_port_problems expects a port_facts result")
    errors = []
    for want in wanted or []:
        bind = _LOCALHOST.get(want["address"], want["address"])
        for sock in facts["listeners"]:
            if int(sock["port"]) != int(want["port"]) or not clashes(sock["address"], bind):
                continue
            if sock.get("unit") and sock["unit"] == want.get("unit"):
                continue  # the deployed unit itself: its replacement binds once it stops
            holder = ("PID %d (%s)" % (sock["pid"], sock.get("process") or "?")) if sock.get("pid") \
                else _unseen(sock)
            errors.append("port %d, which %s will bind on %s, is taken: %s listens on %s:%d%s; %s. Stop it or "
                          "choose another port" % (
                              want["port"], want["what"], bind, holder, sock["address"], sock["port"],
                              (" (a process of %s)" % sock["unit"]) if sock.get("unit") else "",
                              want.get("then") or "the service would not start"))
    return errors


class FilterModule(object):
    def filters(self):
        return {"preflight_wanted_ports": preflight_wanted_ports, "preflight_port_problems": preflight_port_problems}
