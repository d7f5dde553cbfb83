# -*- coding: utf-8 -*-
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Whether the nodes of one multi-node SGLang group agree, before anything changes on any of them.

``sglang_group_agreement``
    one dict per node of the group (what preflight read on it) -> the problems, each naming the nodes and the values.

``interface_addresses``
    Ansible's fact of one network interface -> its IP addresses (None: no such interface).

``rollout_batches``
    the GPU nodes in order + hostvars -> the rolling redeploy's batch sizes: one per single node or whole group.

``group_not_ready``
    a group's hostnames + hostvars -> its nodes whose health report of this run is not ready.

SGLang 0.5.23 runs one model over the nodes of a group as one set of tensor-parallel ranks: every node loads its
slice of the same checkpoint with the same code, and the ranks meet over ``--dist-init-addr`` and the NCCL/Gloo
interface. A node whose GPUs, release or model revision differ does not fail at once: it loads, joins, and then the
collectives disagree (a hang, wrong output) or a rank crashes hours later. Nothing in one node's preflight can see
that; the group's can.
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

# what every node must have alike: (key, what it is, the fix)
SAME = (
    ("gpu_count", "GPU count", "every node of a group needs tp-size / nnodes GPUs (preflight_gpu_count)"),
    ("compute_capability", "GPU compute capability", "a group runs on one GPU model (one build, one kernel set)"),
    ("release", "SGLang release", "deploy the same release to every node (one inventory group, the same build vars)"),
    ("model_revision", "model revision", "stage the same model revision on every node (model_stage_revision)"),
    ("options", "SGLang options (--node-rank aside)", "set the group's options once, in its inventory group"),
)


def _fmt(value):
    if isinstance(value, dict):
        return ", ".join(f"{k}={value[k]}" for k in sorted(value))
    return str(value)


def interface_addresses(fact) -> list[str] | None:
    """The IP addresses of one interface from Ansible's network facts (``ansible_facts[<name>]``: ``ipv4``,
    ``ipv4_secondaries``, ``ipv6``); None when there is no such interface (no fact)."""
    if not fact:
        return None
    if not isinstance(fact, dict):
        raise AnsibleFilterError(f"interface_addresses expects an interface fact (a dict), got {fact!r}")
    out = []
    ipv4 = fact.get("ipv4")
    for entry in ([ipv4] if isinstance(ipv4, dict) else []) + list(fact.get("ipv4_secondaries") or []) \
            + list(fact.get("ipv6") or []):
        if isinstance(entry, dict) and entry.get("address"):
            out.append(str(entry["address"]))
    return out


def sglang_group_agreement(nodes, names=None) -> list[str]:
    """Problems of a group, ``nodes`` in rank order, each a dict ``name``, ``node_rank`` and what preflight read:
    ``gpu_count``, ``compute_capability``, ``release`` (what the build will install, as a comparable value),
    ``model_revision``, ``options`` (the SGLang options less ``node-rank``), ``ifname`` and ``addresses`` (the
    NCCL/Gloo interface and its addresses on the node; None when the interface is missing), ``rendezvous`` (on a node
    of rank >= 1, module tcp_reach's result for rank 0's ``--dist-init-addr``); or ``unchecked`` true for
    a node preflight did not reach (named from ``names``, the group's hostnames in rank order). A key a node lacks
    (``None``) is not compared. Every problem names the nodes and values, and the fix."""
    if not isinstance(nodes, list) or not all(isinstance(n, dict) for n in nodes):
        raise AnsibleFilterError(f"sglang_group_agreement expects a list of dicts, got {nodes!r}")
    names = list(names or [])
    problems = [f"{n.get('name') or (names[i] if i < len(names) else '?')} (node rank {n.get('node_rank', i)}) was not "
                f"checked (unreachable, or left out of this run by --limit): the nodes of a group deploy and start "
                f"together" for i, n in enumerate(nodes) if n.get("unchecked")]
    nodes = [n for n in nodes if not n.get("unchecked")]
    if len(nodes) < 2:
        return problems
    for key, what, fix in SAME:
        seen = {}
        for node in nodes:
            value = node.get(key)
            if value is None:
                continue
            seen.setdefault(_fmt(value), []).append(f"{node.get('name')} (node rank {node.get('node_rank')})")
        if len(seen) > 1:
            problems.append(f"the nodes of the group disagree on the {what}: " + "; ".join(
                f"{value} on {', '.join(names)}" for value, names in sorted(seen.items())) + f": {fix}")
    options = nodes[0].get("options")
    rendezvous = options.get("dist-init-addr") if isinstance(options, dict) else None
    for node in nodes:
        reach = node.get("rendezvous")
        if isinstance(reach, dict) and reach.get("reached") is False:
            problems.append(f"{node.get('name')} (node rank {node.get('node_rank')}) does not reach rank 0's "
                            f"--dist-init-addr{' ' + str(rendezvous) if rendezvous else ''} ({reach.get('state')}: "
                            f"{reach.get('error')}): its "
                            f"ranks could never join the group; open the port between the nodes or fix the address "
                            f"(sglang_service_dist_init_host)")
        ifname = node.get("ifname")
        if ifname and not node.get("addresses"):
            why = "it has no such interface" if node.get("addresses") is None else "the interface has no IP address"
            problems.append(f"{node.get('name')} (node rank {node.get('node_rank')}) has no address on {ifname}, the "
                            f"NCCL/Gloo interface (sglang_service_socket_ifname): {why}; the ranks of the group reach "
                            f"each other over it")
    return problems


def group_not_ready(group, hostvars) -> list[str]:
    """The nodes of a multi-node group whose health report (``smoke_health_report``, this run's) is not ``ready``, as
    ``"<node> (node rank N): <verdict>[ in phase P]"``; a node without a report (its switch failed before the verdict)
    is ``no verdict``. Empty when the whole group is ready."""
    out = []
    for rank, host in enumerate(group or []):
        try:
            report = hostvars[host].get("smoke_health_report") or {}
        except (KeyError, TypeError, AttributeError):
            report = {}
        verdict = report.get("verdict") or "no verdict"
        if verdict != "ready":
            phase = report.get("phase")
            out.append(f"{host} (node rank {rank}): {verdict}{' in phase ' + str(phase) if phase else ''}")
    return out


def rollout_batches(hosts, hostvars) -> list[int]:
    """The rolling redeploy's ``serial`` batches over ``hosts`` (the GPU nodes in the play's order): one batch per
    serving unit, a single node or the whole of a multi-node group (``sglang_service_endpoint.group``), whose nodes
    switch together because none of them can run without the others. A group's nodes must be listed one after the
    other (and all of them); AnsibleFilterError names the group otherwise."""
    hosts = [str(h) for h in hosts or []]
    sizes, i = [], 0
    while i < len(hosts):
        try:
            group = list(hostvars[hosts[i]]["sglang_service_endpoint"].get("group") or [])
        except (KeyError, TypeError, AttributeError):
            group = []
        if not group:
            sizes.append(1)
            i += 1
            continue
        here = hosts[i:i + len(group)]
        if sorted(here) != sorted(group):
            raise AnsibleFilterError(
                f"the multi-node group {', '.join(group)} must be listed together, all of it, in the GPU nodes' "
                f"inventory group (found {', '.join(here)} from {hosts[i]} on): its nodes switch as one batch")
        sizes.append(len(group))
        i += len(group)
    return sizes or [1]


class FilterModule:
    def filters(self):
        return {"sglang_group_agreement": sglang_group_agreement, "interface_addresses": interface_addresses,
                "rollout_batches": rollout_batches, "group_not_ready": group_not_ready}
