# -*- coding: utf-8 -*-
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: preflight_host_fact_problems
short_description: Every PCIe, IOMMU, NUMA, limit, journald and /dev/shm problem in a host_facts result
description:
  - Takes the registered result of the C(host_facts) module and returns a dict with the lists C(errors) and C(warnings).
  - Errors, with the numbers that prove them and the fix. ACS redirect on a bridge above the GPUs, or the IOMMU
    translating their DMA, when the GPUs talk over PCIe. A unit CPU/memory restriction that excludes a GPU's NUMA
    node. A C(Limit*=) the host cannot grant. A per-unit journald rate limit of 0, or one too small once the weights
    are staged onto the journal's filesystem. C(Storage=none). /dev/shm without the free space the ranks need.
  - Warnings for what could not be checked (GPUs not in sysfs, lspci without root) or an active IOMMU in an
    unknown mode.
  - A check whose tool is missing (C(lspci) for ACS, C(numactl) for NUMA binding on a NUMA host) is deferred when
    C(plan.installs) holds its package (pciutils, numactl). It is then listed in C(deferred) with a warning that says
    so, and host_prerequisites runs it again once the package is installed. When no package holds the tool, its
    absence is an error.
positional: gpu_facts, plan
options:
  _input:
    description: The registered C(host_facts) result.
    type: dict
    required: true
  gpu_facts:
    description: The registered C(gpu_facts) result (GPU indices and PCI bus ids).
    type: dict
    required: true
  plan:
    description:
      - What the service will ask for. C(unit), C(interconnect) (pcie or nvlink), C(limits) (memlock, nofile) and
        C(log_rate_limit) (interval_sec, burst).
      - Also C(journal_min_burst), C(model_bytes), C(environment), C(numa_node), C(ranks), C(shm_floor_bytes) and
        C(shm) (host_capacity's shm).
      - C(installs), the packages host_prerequisites installs on this host, which defer the checks their tools
        serve. C(checks), the names of the checks to run (sysfs, acs, iommu, numa, limits, journald and shm). All of
        them run by default. C(recheck), true for host_prerequisites' run after its install, where a tool that is
        still missing is an error.
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Collect the host-fact problems
  ansible.builtin.set_fact:
    host_problems: "{{ preflight_host_facts | preflight_host_fact_problems(preflight_gpu_facts, plan) }}"
"""

RETURN = r"""
_value:
  description: C(errors) and C(warnings), lists of messages, and C(deferred), the checks waiting for a tool the deploy
    installs (each with C(check), C(tool) and C(package)).
  type: dict
"""


from ansible.errors import AnsibleFilterError

from ansible_collections.blackwell.sglang.plugins.plugin_utils._host_checks import host_problems


def preflight_host_fact_problems(facts, gpu_facts, plan):
    """``host_facts_result | preflight_host_fact_problems(gpu_facts_result, plan)`` -> {errors, warnings}."""
    if not isinstance(plan, dict):
        raise AnsibleFilterError("preflight_host_fact_problems expects the plan as a dict, got %s"
                                 % type(plan).__name__)
    try:
        return host_problems(facts, gpu_facts or {}, dict(plan))
    except (KeyError, TypeError, ValueError) as exc:
        raise AnsibleFilterError("preflight_host_fact_problems could not read the host facts (%s); expected "
                                 "host_facts output" % exc)


class FilterModule(object):
    def filters(self):
        return {"preflight_host_fact_problems": preflight_host_fact_problems}
