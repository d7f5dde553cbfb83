# -*- coding: utf-8 -*-
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Host facts that break multi-GPU SGLang servers: every check at once (stdlib only).

The ``host_facts`` module reads the raw inputs on the node (``lspci -D -vvv``, ``/proc/cmdline``, sysfs,
``/proc/1/status`` and ``/proc/1/limits``, systemd drop-ins, ``journald.conf``); the parsing and checks are pure so the
preflight checks run on recorded inputs in the unit tests (``tests/unit/fixtures/host_facts``). Each check lives with
the facts it reads, and its module docstring cites the sources of its rules (read them before changing one):

* ``host_pci``: PCIe ACS on the GPUs' bridges (``lspci -vvv``) and IOMMU DMA translation (``/proc/cmdline``, sysfs);
* ``host_systemd``: the unit's drop-ins and the ``Limit*=`` rlimits PID 1 grants it;
* ``host_numa``: the unit's CPUs and memory nodes against each GPU's NUMA node, and numactl;
* ``host_journald``: the journal's space and the rate-limit burst journald scales from it;
* ``host_values``: the cpulists, byte sizes and GPU lists they share.

Here: the GPUs of a ``gpu_facts`` result, free space on /dev/shm (stale NCCL segments of a killed run stay until
removed) and ``host_problems``, which runs them all for the ``preflight_host_fact_problems`` filter.

Two checks read a tool a stock image lacks: ACS needs ``lspci`` (pciutils), NUMA binding needs ``numactl``. Preflight
runs before host_prerequisites installs anything, and changes nothing, so on a bare host the tool is missing when it
looks. When the deploy installs the tool (the plan's ``installs``: host_prerequisites' packages for this host), the
check is *deferred*: ``host_problems`` lists it in ``deferred`` and says so, and host_prerequisites runs it again once
the package is installed (``checks``: only those), failing there, before the CUDA toolkit, with the numbers and the
fix. When nothing installs the tool, its absence is an error: a check that cannot run is not a pass.
"""

from __future__ import absolute_import, division, print_function

from ansible_collections.blackwell.sglang.plugins.module_utils.host.host_journald import check_journald
from ansible_collections.blackwell.sglang.plugins.module_utils.host._host_numa import check_numa, numactl_missing
from ansible_collections.blackwell.sglang.plugins.module_utils.host.host_pci import check_acs, check_iommu, normalize_bdf
from ansible_collections.blackwell.sglang.plugins.module_utils.host.host_systemd import check_limits
from ansible_collections.blackwell.sglang.plugins.module_utils.host.host_values import GB, GIB, gpus_text, human_bytes

__metaclass__ = type

# ------------------------------------------------------------------------------------------ /dev/shm


def check_shm_free(shm, ranks, floor_bytes):
    """/dev/shm must have ``floor_bytes`` free (not only that size) when more than one rank runs here: stale NCCL
    segments of a killed run stay until removed."""
    if int(ranks) < 2 or not floor_bytes or not shm or shm.get("size_bytes") is None:
        return []
    free, size = shm.get("free_bytes"), shm.get("size_bytes")
    if free is not None and int(size) >= int(floor_bytes) > int(free):
        return ["%s has %s free of %s, below the %s %d ranks need (NCCL shared-memory transport, torch IPC); old files "
                "fill it (stale nccl-* / torch_* segments of a killed run?). Fix: remove them (ls -la %s) or enlarge it"
                % (shm.get("path", "/dev/shm"), human_bytes(free), human_bytes(size), human_bytes(floor_bytes),
                   int(ranks), shm.get("path", "/dev/shm"))]
    return []


# ------------------------------------------------------------------------------------------ all at once


def gpu_list(gpu_facts):
    """gpu_facts result (or its gpus list) -> [{"index", "bdf"}]."""
    gpus = gpu_facts.get("gpus") if isinstance(gpu_facts, dict) else gpu_facts
    return [{"index": int(g.get("index", i)), "bdf": normalize_bdf(g.get("pci_bus_id"))}
            for i, g in enumerate(gpus or []) if isinstance(g, dict)]


def _option(options, name, default=None):
    for key in (name, name.replace("-", "_")):
        if key in (options or {}) and options[key] is not None:
            return options[key]
    return default


def ranks_on_host(options):
    """Scheduler ranks on this host: tp x pp / nnodes."""
    tp, pp = int(_option(options, "tp-size", 1)), int(_option(options, "pp-size", 1))
    return max((tp * pp) // max(int(_option(options, "nnodes", 1)), 1), 1)


# The checks host_problems runs, by name (the plan's ``checks`` picks some; all by default).
CHECKS = ("sysfs", "acs", "iommu", "numa", "limits", "journald", "shm")


def _missing_tool(check, gpus, facts, plan):
    """(tool, package, finding) when ``check`` needs a tool that is not on the host, else None."""
    if check == "acs" and gpus and not (facts.get("lspci") or {}).get("path"):
        return ("lspci", "pciutils", "lspci is not installed, so PCIe ACS on the GPUs' bridges cannot be read (with ACS "
                "redirect on, NCCL's first all-reduce over PCIe can hang with no error)")
    if check == "numa":
        finding = numactl_missing(gpus, facts, plan.get("environment"), _option(plan.get("options"), "numa-node"))
        if finding:
            return ("numactl", "numactl", finding)
    return None


def _tool_problem(check, tool, package, finding, installs, errors, warnings, deferred, recheck=False):
    """A missing tool: deferred (host_prerequisites installs ``package`` and runs ``check`` again) or an error."""
    if recheck:  # host_prerequisites' own run, after its install: still missing is an error, never another deferral
        errors.append("%s, even after host_prerequisites installed %s. Fix: see why `apt-get install %s` left no %s "
                      "on PATH (/usr/bin, /usr/sbin) and re-run" % (finding, package, package, tool))
    elif package in installs:
        deferred.append({"check": check, "tool": tool, "package": package})
        warnings.append("%s. Not yet a problem: host_prerequisites installs %s on this host, then runs the %s check "
                        "again and stops the deploy there if it fails" % (finding, package, check))
    else:
        errors.append("%s, and this deploy does not install it (%s is not among host_prerequisites' packages for this "
                      "host). Fix: add %s to host_prerequisites_distributions' gpu_node packages for this distribution "
                      "(or apt-get install %s)" % (finding, package, package, package))


def host_problems(facts, gpu_facts, plan):
    """Every host-fact problem: dict ``errors``, ``warnings`` (lists of messages) and ``deferred`` (the checks that
    wait for a tool the deploy installs: ``check``, ``tool``, ``package``).

    ``plan``: ``unit``, ``interconnect`` (pcie|nvlink), ``limits`` (memlock/nofile -> value), ``log_rate_limit``
    (``interval_sec``, ``burst``), ``journal_min_burst``, ``model_bytes`` (the index's total_size, None when unknown:
    then ``fallback_weights_gb``), ``environment``, ``options`` (SGLang options: tp/pp/nnodes, numa-node),
    ``shm`` (host_capacity's shm) and ``shm_floor_gib``; ``installs`` (the packages host_prerequisites installs on this
    host: a missing tool of theirs defers its check, any other missing tool is an error), ``checks`` (names of
    CHECKS to run; all when absent) and ``recheck`` (host_prerequisites' run after its install: a tool still missing
    is an error)."""
    errors, warnings, deferred = [], [], []
    if not isinstance(facts, dict) or facts.get("failed"):
        return {"errors": ["could not read the host facts: %s" % ((facts or {}).get("msg") or "host_facts failed")],
                "warnings": [], "deferred": []}
    run = set(plan.get("checks") or CHECKS)
    unknown = sorted(run - set(CHECKS))
    if unknown:
        raise ValueError("unknown host checks %s (known: %s)" % (", ".join(unknown), ", ".join(CHECKS)))
    installs = set(str(p) for p in plan.get("installs") or [])
    gpus = gpu_list(gpu_facts)
    unit = plan.get("unit") or "the SGLang unit"
    interconnect = plan.get("interconnect") or "pcie"
    pci = dict((p.get("bdf"), p) for p in facts.get("pci") or [])
    missing = [g["index"] for g in gpus if g["bdf"] and not (pci.get(g["bdf"]) or {}).get("present")]
    if missing and "sysfs" in run:
        warnings.append("%s (bus ids from nvidia-smi) %s not under /sys/bus/pci/devices: their NUMA node and IOMMU "
                        "group were not checked" % (gpus_text(missing), "is" if len(missing) == 1 else "are"))
    tools = dict((c, _missing_tool(c, gpus, facts, plan)) for c in ("acs", "numa") if c in run)
    for check, found in sorted(tools.items()):
        if found:
            _tool_problem(check, found[0], found[1], found[2], installs, errors, warnings, deferred,
                          recheck=bool(plan.get("recheck")))
    group_types = dict((g["index"], (pci.get(g["bdf"]) or {}).get("iommu_type")) for g in gpus)
    found = []
    if "acs" in run and not tools["acs"]:
        found.append(check_acs(gpus, facts.get("lspci"), interconnect))
    if "iommu" in run:
        found.append(check_iommu(facts.get("cmdline"), group_types, facts.get("iommu_units"), interconnect))
    if "numa" in run:  # the CPU and memory restrictions need no numactl: checked either way
        found.append(check_numa(gpus, facts, plan.get("environment"), _option(plan.get("options"), "numa-node")))
    for e, w in found:
        errors.extend(e)
        warnings.extend(w)
    if "limits" in run:
        errors.extend(check_limits(plan.get("limits") or {}, facts, unit))
    rate = plan.get("log_rate_limit") or {}
    model_bytes = plan.get("model_bytes") or float(plan.get("fallback_weights_gb") or 0) * GB
    if "journald" in run:
        errors.extend(check_journald(facts, unit, rate.get("interval_sec", 30), rate.get("burst", 0),
                                     model_bytes=model_bytes, min_burst=plan.get("journal_min_burst") or 0))
    if "shm" in run:
        errors.extend(check_shm_free(plan.get("shm"), ranks_on_host(plan.get("options")),
                                     float(plan.get("shm_floor_gib") or 0) * GIB))
    return {"errors": errors, "warnings": warnings, "deferred": deferred}
