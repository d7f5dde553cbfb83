# -*- coding: utf-8 -*-
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: preflight_gpu_errors
short_description: List every problem in a gpu_facts result
description:
  - Takes the registered result of the C(gpu_facts) module and returns a list of error messages, empty when the GPUs
    match the plan. Checked are the GPU count, compute capability, driver older than the CUDA floor, GPUs in use by other processes.
  - When C(gpu_facts) ran with C(fail_on_error=false) and could not read the GPUs, the list holds that error.
positional: compute_apps
options:
  _input:
    description: The C(gpus) list of C(gpu_facts), or its whole registered result (then C(compute_apps) and C(error)
      are taken from it).
    type: raw
    required: true
  compute_apps:
    description: The C(compute_apps) list of C(gpu_facts); taken from the input when it is the whole result.
    type: list
    elements: dict
  expected_count:
    description: GPUs expected on the host; 0 skips the check.
    type: int
    default: 8
  expected_compute_capability:
    description: Compute capability every GPU must report; empty skips the check.
    type: str
    default: "12.0"
  cuda_version:
    description: CUDA toolkit version to be installed (major.minor); empty skips the driver check.
    type: str
    default: "13.0"
  driver_floors:
    description: CUDA major.minor to minimum driver; defaults to NVIDIA's release-notes table for 12.8, 12.9, 13.0.
    type: dict
  own_pids:
    description: PIDs allowed to hold GPUs, besides the processes of the unit being replaced (a gpu_facts result's
      C(own_unit.pids), counted by cgroup membership).
    type: list
    elements: int
    default: []
"""

EXAMPLES = r"""
- name: Refuse hosts whose GPUs do not match the plan
  ansible.builtin.assert:
    that: gpu_problems | length == 0
    fail_msg: "{{ gpu_problems | join('; ') }}"
  vars:
    gpu_problems: "{{ preflight_gpus | preflight_gpu_errors(expected_count=8, cuda_version='13.0') }}"
"""

RETURN = r"""
_value:
  description: Error messages, one per problem.
  type: list
  elements: str
"""


from ansible.errors import AnsibleFilterError

from ansible_collections.blackwell.sglang.plugins.plugin_utils._preflight_checks import check_gpus


def preflight_gpu_errors(data, compute_apps=None, expected_count=8, expected_compute_capability="12.0",
                         cuda_version="13.0", driver_floors=None, own_pids=()):
    """``gpus | preflight_gpu_errors(compute_apps, ...)`` or ``gpu_facts_result | preflight_gpu_errors(...)``.

    Returns ``check_gpus``' list of messages; a gpu_facts result carrying ``error`` gives ``[error]``."""
    if isinstance(data, dict):
        if data.get("error"):
            return [str(data["error"])]
        if data.get("failed"):
            return [str(data.get("msg") or "gpu_facts failed without a message")]
        gpus = data.get("gpus") or []
        if compute_apps is None:
            compute_apps = data.get("compute_apps") or []
        own_pids = list(own_pids or []) + list((data.get("own_unit") or {}).get("pids") or [])
    elif isinstance(data, (list, tuple)):
        gpus = list(data)
    else:
        raise AnsibleFilterError("preflight_gpu_errors expects the gpu_facts result (dict) or its gpus list, got %s"
                                 % type(data).__name__)
    try:
        return check_gpus(
            gpus,
            list(compute_apps or []),
            expected_count=int(expected_count or 0),
            expected_compute_capability=str(expected_compute_capability) if expected_compute_capability else None,
            cuda_version=str(cuda_version) if cuda_version else None,
            driver_floors=dict(driver_floors) if driver_floors else None,
            own_pids=[int(p) for p in (own_pids or [])],
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise AnsibleFilterError("preflight_gpu_errors could not read the GPU facts (%s); expected gpu_facts output"
                                 % exc)


class FilterModule(object):
    def filters(self):
        return {"preflight_gpu_errors": preflight_gpu_errors}
