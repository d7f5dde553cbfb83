# -*- coding: utf-8 -*-
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""NUMA checks (stdlib only): the CPUs and memory nodes a process of the unit may use (PID 1's
affinity, the cgroup cpuset, the unit's ``CPUAffinity=`` / ``AllowedCPUs=`` / ``AllowedMemoryNodes=`` /
``NUMAPolicy=``) against each GPU's NUMA node (sysfs, or SGLang's ``--numa-node``), and numactl on PATH.

Source (read it before changing a rule): SGLang 0.5.23 ``sglang/srt/utils/numa_utils.py``: ``_is_numa_available``
returns False (debug log only) when ``/sys/devices/system/node/node1`` is absent or ``numactl`` is not on PATH
(``SGLANG_NUMA_BIND_V2``, default on); ``_numactl_cpu_mem_args`` intersects the GPU's node CPUs with
``os.sched_getaffinity(0)`` and skips the binding with "NUMA node N has no CPU cores allowed by the current affinity"
when nothing is left; a ``--membind`` the cpuset refuses is relaxed to ``--preferred``, then to CPU-only
(``_probe_numactl_args``).
"""

from __future__ import absolute_import, division, print_function

from ansible_collections.blackwell.sglang.plugins.module_utils.host.host_systemd import (
    UNIT_KEYS, order_dropins, parse_ini_settings, parse_status,
)
from ansible_collections.blackwell.sglang.plugins.module_utils.host.host_values import (
    format_cpulist, gpus_text, parse_cpulist,
)

__metaclass__ = type


def unit_cpu_mems(facts):
    """(cpus, mems, cpu reasons, memory reasons, drop-in settings) for a process of the unit.

    CPUs: PID 1's affinity (what services inherit, system.conf CPUAffinity= included), within the cgroup cpuset and
    the unit's CPUAffinity= / AllowedCPUs= (drop-ins). Memory nodes: the cpuset's, within AllowedMemoryNodes=. The
    reasons name where each restriction came from."""
    pid1 = parse_status((facts.get("pid1") or {}).get("status"))
    nodes = facts.get("numa") or {}
    all_cpus = set()
    for cpus in (nodes.get("nodes") or {}).values():
        all_cpus |= parse_cpulist(cpus)
    cpus = set(pid1["cpus"]) if pid1["cpus"] else set(all_cpus)
    mems = set(int(n) for n in (nodes.get("nodes") or {}))
    reasons, mem_reasons = [], []
    if pid1["cpus"] and all_cpus and not all_cpus <= pid1["cpus"]:
        reasons.append("PID 1 runs on CPUs %s (system.conf CPUAffinity=, or a taskset on systemd)"
                       % format_cpulist(pid1["cpus"]))
    cpuset = facts.get("cpuset") or {}
    if cpuset.get("cpus"):
        allowed = parse_cpulist(cpuset["cpus"])
        if all_cpus and not all_cpus <= allowed:
            reasons.append("cgroup cpuset %s allows CPUs %s" % (cpuset.get("source") or "", format_cpulist(allowed)))
        cpus &= allowed
    if cpuset.get("mems"):
        allowed = parse_cpulist(cpuset["mems"])
        if mems and not mems <= allowed:
            mem_reasons.append("cgroup cpuset %s allows memory nodes %s" % (cpuset.get("source") or "",
                                                                            format_cpulist(allowed)))
        mems &= allowed
    settings = parse_ini_settings(order_dropins((facts.get("unit") or {}).get("dropins")), "Service", UNIT_KEYS)
    for key in ("CPUAffinity", "AllowedCPUs"):
        if settings.get(key) and settings[key]["value"]:
            allowed = parse_cpulist(settings[key]["value"])
            cpus &= allowed
            reasons.append("%s=%s in %s" % (key, format_cpulist(allowed), settings[key]["path"]))
    if settings.get("AllowedMemoryNodes") and settings["AllowedMemoryNodes"]["value"]:
        allowed = parse_cpulist(settings["AllowedMemoryNodes"]["value"])
        mems &= allowed
        mem_reasons.append("AllowedMemoryNodes=%s in %s" % (format_cpulist(allowed),
                                                            settings["AllowedMemoryNodes"]["path"]))
    return cpus, mems, reasons, mem_reasons, settings


def _env_false(value):
    return str(value).strip().lower() in ("0", "false", "no", "off")


def check_numa(gpus, facts, environment=None, numa_node_option=None):
    """(errors, warnings): the unit's CPU and memory restrictions must allow each GPU's NUMA node. Whether numactl is
    there for SGLang 0.5.23 to bind at all is ``numactl_missing``'s (the caller decides what its absence is).

    ``gpus``: dicts with ``index`` and ``bdf``; ``facts``: ``host_facts`` (``numa.nodes`` node -> cpulist,
    ``numa.numactl``, ``pci`` per GPU with ``numa_node``)."""
    errors, warnings = [], []
    env = environment or {}
    numa = facts.get("numa") or {}
    nodes = dict((int(k), parse_cpulist(v)) for k, v in (numa.get("nodes") or {}).items())
    if 1 not in nodes:
        # numa_utils._is_numa_available: no /sys/devices/system/node/node1 -> not a NUMA host, nothing to bind.
        return errors, warnings
    if _env_false(env.get("SGLANG_AUTO_NUMA_BIND", "1")) and numa_node_option in (None, "", []):
        return errors, warnings
    gpu_nodes = _gpu_nodes(gpus, facts, nodes, env, numa_node_option, errors, warnings)
    cpus, mems, reasons, mem_reasons, settings = unit_cpu_mems(facts)
    by_node = {}
    for index, node in sorted(gpu_nodes.items()):
        by_node.setdefault(node, []).append(index)
    why = ("; ".join(reasons) or "no restriction found")
    for node, indices in sorted(by_node.items()):
        node_cpus = nodes.get(node, set())
        if node_cpus and not (node_cpus & cpus):
            errors.append(
                "%s on NUMA node %d (CPUs %s) but the service may only run on CPUs %s (%s): SGLang 0.5.23 then "
                "skips binding their ranks ('NUMA node %d has no CPU cores allowed by the current affinity') and their "
                "host-side work and pinned buffers cross the socket link. Fix: allow node %d's CPUs (remove or widen "
                "that CPUAffinity= / AllowedCPUs= / cpuset)"
                % (gpus_text(indices, "sit"), node, format_cpulist(node_cpus),
                   format_cpulist(cpus), why, node, node))
        if mems and node not in mems:
            errors.append(
                "%s on NUMA node %d but the service may only allocate on memory nodes %s (%s): numactl "
                "--membind=%d is refused and SGLang falls back to --preferred, then to CPU-only binding, so their "
                "host memory lands on the other socket. Fix: allow memory node %d (AllowedMemoryNodes= / cpuset.mems)"
                % (gpus_text(indices, "sit"), node, format_cpulist(mems), "; ".join(mem_reasons) or
                   "no restriction found", node, node))
    policy = (settings.get("NUMAPolicy") or {}).get("value")
    mask = (settings.get("NUMAMask") or {}).get("value")
    if policy in ("bind", "preferred") and mask:
        allowed = parse_cpulist(mask)
        outside = sorted(n for n in by_node if n not in allowed)
        if outside:
            warnings.append("NUMAPolicy=%s NUMAMask=%s (%s) excludes the node(s) %s of GPUs %s: every allocation "
                            "SGLang does before binding (and all of them when binding is skipped) follows that policy"
                            % (policy, mask, settings["NUMAPolicy"]["path"], format_cpulist(outside),
                               format_cpulist(i for n in outside for i in by_node[n])))
    return errors, warnings


def _gpu_nodes(gpus, facts, nodes, env, numa_node_option, errors, warnings):
    """{GPU index: the NUMA node its rank binds to}: from --numa-node when given (checked against the host's nodes),
    else from each GPU's PCI device; appends what is wrong to ``errors`` and ``warnings``."""
    pci = dict((p.get("bdf"), p) for p in facts.get("pci") or [])
    gpu_nodes = {}
    if numa_node_option not in (None, "", []):
        wanted = numa_node_option if isinstance(numa_node_option, list) else str(numa_node_option).split()
        wanted = [int(n) for n in wanted]
        if len(wanted) < len(gpus):
            errors.append("--numa-node lists %d node(s) for %d GPUs and SGLang indexes it by GPU id. Fix: give one "
                          "node per GPU" % (len(wanted), len(gpus)))
        bad = sorted(set(n for n in wanted if n not in nodes))
        if bad:
            errors.append("--numa-node names node(s) %s, the host has nodes %s. Fix: name the node of each GPU "
                          "(/sys/bus/pci/devices/<bdf>/numa_node)" % (format_cpulist(bad), format_cpulist(nodes)))
        for gpu, node in zip(gpus, wanted):
            if node in nodes:
                gpu_nodes[gpu["index"]] = node
    else:
        unknown = []
        for gpu in gpus:
            node = (pci.get(gpu.get("bdf")) or {}).get("numa_node")
            if node is None or int(node) < 0:
                unknown.append(gpu["index"])
            else:
                gpu_nodes[gpu["index"]] = int(node)
        if unknown:
            warnings.append("%s no NUMA node in /sys/bus/pci/devices/<bdf>/numa_node (-1 or missing) on a host "
                            "with %d NUMA nodes: their rank is bound by NVML's memory affinity only, if at all"
                            % (gpus_text(unknown, "report"), len(nodes)))
    return gpu_nodes


def numactl_missing(gpus, facts, environment=None, numa_node_option=None):
    """The finding when SGLang 0.5.23 would bind ranks to NUMA nodes through numactl and numactl is not on PATH (a
    sentence without its fix: whether it is an error or a deferred check depends on whether the deploy installs
    numactl, which the caller knows); None when numactl is there or not needed. Not needed: a host with one NUMA
    node, binding turned off (``SGLANG_AUTO_NUMA_BIND``, ``SGLANG_NUMA_BIND_V2``), or ``--numa-node`` given (then
    SGLang binds through its own path, not numactl's)."""
    env = environment or {}
    numa = facts.get("numa") or {}
    nodes = dict((int(k), parse_cpulist(v)) for k, v in (numa.get("nodes") or {}).items())
    if numa.get("numactl") or 1 not in nodes or not gpus or numa_node_option not in (None, "", []):
        return None
    if _env_false(env.get("SGLANG_AUTO_NUMA_BIND", "1")) or _env_false(env.get("SGLANG_NUMA_BIND_V2", "1")):
        return None
    pci = dict((p.get("bdf"), p) for p in facts.get("pci") or [])
    on = set(int(n) for n in ((pci.get(g.get("bdf")) or {}).get("numa_node") for g in gpus)
             if n is not None and int(n) >= 0)
    return ("numactl is not installed on a host with %d NUMA nodes (GPUs on nodes %s): SGLang 0.5.23 binds each rank "
            "to its GPU's node only through numactl and otherwise skips it with a debug-level log line "
            "(srt/utils/numa_utils.py, _is_numa_available), so ranks run and allocate across sockets"
            % (len(nodes), format_cpulist(on) or "unknown"))
