#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: gpu_facts
short_description: Read the NVIDIA GPU inventory and the processes using the GPUs
extends_documentation_fragment:
  - blackwell.sglang.common
description:
  - Runs C(nvidia-smi --query-gpu=index,name,uuid,compute_cap,memory.total,memory.used,driver_version,persistence_mode,pci.bus_id
    --format=csv,noheader,nounits) and C(nvidia-smi --query-compute-apps=pid,gpu_uuid,process_name,used_memory
    --format=csv,noheader,nounits) and returns the parsed rows.
  - Never changes anything on the host.
  - Fields the device cannot report (C([N/A]), C([Not Supported])) come back as C(null).
options:
  nvidia_smi_path:
    description:
      - Path of the nvidia-smi binary. When unset, C(PATH) is searched, then C(/usr/bin), C(/usr/local/bin),
        C(/usr/local/nvidia/bin), C(/usr/lib/wsl/lib).
    type: path
  own_unit:
    description:
      - A systemd unit whose processes may hold the GPUs because they are being replaced (the deployed SGLang unit
        on a re-run or a rolling redeploy). Its processes are found by membership in its cgroup
        (C(systemctl show -p ControlGroup)), not by the MainPID tree, and returned in RV(own_unit); a unit that does
        not exist yet has none.
    type: str
  timeout:
    description:
      - Seconds each nvidia-smi (and systemctl) call may take before it is killed (coreutils C(timeout)) and
        reported with RV(error_kind) C(timeout). nvidia-smi hangs on a GPU that fell off the bus (Xid 79) or a driver
        stuck in recovery; a preflight must say so rather than wait forever.
    type: int
    default: 60
  fail_on_error:
    description:
      - When true, a missing nvidia-smi, C(No devices were found), NVML errors or unparsable output fail the task.
      - When false, the task succeeds and returns the message in RV(error), so that a preflight can collect every
        problem at once.
    type: bool
    default: true
attributes:
  check_mode:
    support: full
    description: Read-only (nvidia-smi queries); runs the same in check mode.
notes:
  - Runs on the target under its system Python, standard library only.
"""

EXAMPLES = r"""
- name: Read the GPU inventory without failing, so preflight can list every problem
  gpu_facts:
    fail_on_error: false
  register: preflight_gpus

- name: Refuse hosts whose GPUs do not match the plan
  ansible.builtin.assert:
    that: preflight_gpu_problems | length == 0
    fail_msg: "{{ preflight_gpu_problems | join('\n') }}"
  vars:
    preflight_gpu_problems: "{{ preflight_gpus | preflight_gpu_errors(expected_count=8, cuda_version='13.0') }}"
"""

RETURN = r"""
gpus:
  description: One entry per GPU, sorted by index.
  returned: always (empty when nvidia-smi failed and fail_on_error is false)
  type: list
  elements: dict
  sample:
    - index: 0
      name: NVIDIA RTX PRO 6000 Blackwell Server Edition
      uuid: GPU-5b0b5e3c-8f1e-4a43-9e5e-2f3c1e0d7a11
      compute_capability: "12.0"
      memory_total_mib: 97887
      memory_used_mib: 0
      driver_version: 580.65.06
      persistence_mode: true
      pci_bus_id: "00000000:18:00.0"
compute_apps:
  description: Processes holding GPU memory (pid int, gpu_uuid, process_name, used_memory_mib int).
  returned: always
  type: list
  elements: dict
  sample:
    - pid: 1234
      gpu_uuid: GPU-5b0b5e3c-8f1e-4a43-9e5e-2f3c1e0d7a11
      process_name: python3
      used_memory_mib: 20480
driver_version:
  description: NVIDIA driver version (null when unknown).
  returned: always
  type: str
  sample: 580.65.06
gpu_count:
  description: Number of GPUs nvidia-smi lists.
  returned: always
  type: int
  sample: 8
own_unit:
  description: The O(own_unit) and its processes (cgroup members), and which of them hold a GPU.
  returned: always
  type: dict
  sample: {name: sglang-kimi.service, control_group: /system.slice/sglang-kimi.service, pids: [4242, 4250, 4251],
           gpu_pids: [4250, 4251]}
error:
  description: Why the inventory could not be read; only set when O(fail_on_error=false) and something went wrong.
  returned: when fail_on_error is false and reading failed
  type: str
  sample: "nvidia-smi reported 'No devices were found' (exit code 6): ..."
error_kind:
  description: What went wrong - C(missing), C(no_devices), C(driver), C(nvml), C(failed), C(parse) or C(timeout).
  returned: when reading failed
  type: str
  sample: timeout
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.blackwell.sglang.plugins.module_utils.host.unit_cgroup import cgroup_pids, parse_show
from ansible_collections.blackwell.sglang.plugins.module_utils.host.nvidia_smi import (
    NvidiaSmiError, apps_query_args, classify_failure, driver_version_of, gpu_query_args, parse_compute_apps,
    parse_gpus,
)

EXTRA_DIRS = ["/usr/bin", "/usr/local/bin", "/usr/local/nvidia/bin", "/usr/lib/wsl/lib"]


def find_nvidia_smi(module):
    """Return the nvidia-smi path; raise NvidiaSmiError(kind='missing') naming the places searched."""
    wanted = module.params["nvidia_smi_path"]
    if wanted:
        if os.path.isfile(wanted) and os.access(wanted, os.X_OK):
            return wanted
        raise NvidiaSmiError(
            "nvidia-smi not found at %s (nvidia_smi_path); expected an executable file there. Install the NVIDIA "
            "driver utilities (e.g. nvidia-utils-580) or fix nvidia_smi_path" % wanted, "missing")
    path = module.get_bin_path("nvidia-smi", required=False, opt_dirs=EXTRA_DIRS)
    if path:
        return path
    searched = [d for d in os.environ.get("PATH", "").split(os.pathsep) if d] + EXTRA_DIRS
    raise NvidiaSmiError(
        "nvidia-smi not found; searched %s. Expected the NVIDIA driver utilities on this GPU host; install the "
        "driver (e.g. nvidia-driver-580 / nvidia-utils-580) or set nvidia_smi_path" % ":".join(searched), "missing")


def bounded_argv(module, argv):
    """``argv`` under coreutils ``timeout`` (SIGTERM after O(timeout) s, SIGKILL 5 s later) when it is installed."""
    timeout_bin = module.get_bin_path("timeout")
    seconds = int(module.params.get("timeout") or 0)
    if not timeout_bin or seconds <= 0:
        return list(argv)
    return [timeout_bin, "-k", "5", str(seconds)] + list(argv)


def run_query(module, binary, args):
    rc, out, err = module.run_command(bounded_argv(module, [binary] + args), environ_update={"LC_ALL": "C"})
    if rc in (124, 137) and module.get_bin_path("timeout"):
        raise NvidiaSmiError(
            "nvidia-smi %s did not answer within %s s (killed). A GPU that fell off the bus (dmesg: Xid 79) or a "
            "driver in recovery hangs nvidia-smi; check `dmesg | grep -i xid` and `nvidia-smi -L` on the host"
            % (args[0], module.params["timeout"]), "timeout")
    failure = classify_failure(rc, out, err)
    if failure is not None:
        raise failure
    return out


def collect(module):
    """Return the result dict (gpus, compute_apps, driver_version, gpu_count); raises NvidiaSmiError."""
    binary = find_nvidia_smi(module)
    gpus = parse_gpus(run_query(module, binary, gpu_query_args()))
    if not gpus:
        raise NvidiaSmiError("nvidia-smi listed no GPUs (empty output); expected one row per GPU. Run "
                             "`nvidia-smi -L` on the host to see what the driver reports", "no_devices")
    apps = parse_compute_apps(run_query(module, binary, apps_query_args()))
    return dict(gpus=gpus, compute_apps=apps, driver_version=driver_version_of(gpus), gpu_count=len(gpus))


def own_unit_processes(module, unit, compute_apps, cgroup_root="/sys/fs/cgroup"):
    """dict name, control_group, pids (cgroup members), gpu_pids (those holding a GPU); empty for no unit."""
    out = {"name": unit, "control_group": None, "pids": [], "gpu_pids": []}
    if not unit:
        return out
    systemctl = module.get_bin_path("systemctl")
    if not systemctl:
        return out
    rc, text, _err = module.run_command(bounded_argv(module, [systemctl, "show", unit, "-p", "ControlGroup,MainPID"]))
    if rc != 0:
        return out
    out["control_group"] = parse_show(text)["control_group"]
    out["pids"] = cgroup_pids(out["control_group"], cgroup_root)
    members = set(out["pids"])
    out["gpu_pids"] = sorted({int(a["pid"]) for a in compute_apps if int(a["pid"]) in members})
    return out


def main():
    module = AnsibleModule(
        argument_spec=dict(
            nvidia_smi_path=dict(type="path"),
            own_unit=dict(type="str"),
            timeout=dict(type="int", default=60),
            fail_on_error=dict(type="bool", default=True),
        ),
        supports_check_mode=True,
    )
    try:
        result = collect(module)
    except NvidiaSmiError as exc:
        if module.params["fail_on_error"]:
            module.fail_json(msg=str(exc), error_kind=exc.kind, gpus=[], compute_apps=[], driver_version=None,
                             gpu_count=0, own_unit=own_unit_processes(module, module.params["own_unit"], []))
        module.exit_json(changed=False, gpus=[], compute_apps=[], driver_version=None, gpu_count=0,
                         error=str(exc), error_kind=exc.kind,
                         own_unit=own_unit_processes(module, module.params["own_unit"], []))
    result["own_unit"] = own_unit_processes(module, module.params["own_unit"], result["compute_apps"])
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
