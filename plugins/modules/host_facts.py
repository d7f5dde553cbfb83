#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: host_facts
short_description: Read the host facts that break multi-GPU servers (PCIe ACS, IOMMU, NUMA, limits, journald)
extends_documentation_fragment:
  - blackwell.sglang.common
  - blackwell.sglang.common.read_only
description:
  - Reads, and never changes, what the preflight role checks before a deploy touches the host. C(lspci -D -vvv)
    (ACS capability and control of every bridge; skipped when pciutils is not installed). C(/proc/cmdline) and, per
    GPU, C(/sys/bus/pci/devices/<bdf>/numa_node) and C(iommu_group/type), plus the entries of C(/sys/class/iommu).
  - Also the NUMA nodes' CPUs (C(/sys/devices/system/node/node*/cpulist)) and whether C(numactl) is on PATH.
  - For the limits and CPU/memory restrictions the unit will get it reads C(/proc/1/status) and C(/proc/1/limits)
    (systemd's capabilities, affinity and hard limits), the cgroup cpuset the unit's slice grants, and the unit's
    drop-ins (C(<unit>.d), the dash-prefix and C(service.d) directories under /etc, /run and /usr/lib).
  - For journald it reads C(journald.conf) and its drop-ins, the journal directory's filesystem (size, free,
    journal files' bytes, device) and journald's own last usage line (MAX_USE, DISK_KEEP_FREE). It also reads the
    model store's filesystem device and free space.
  - Parsing and checks live in C(module_utils/host_checks.py) (the C(preflight_host_fact_problems) filter) and the
    C(host_pci), C(host_systemd), C(host_numa), C(host_journald) and C(host_values) module_utils it runs.
options:
  gpu_bus_ids:
    description: PCI bus ids of the GPUs as nvidia-smi prints them (C(00000000:1B:00.0)), in GPU index order.
    type: list
    elements: str
    default: []
  unit:
    description: systemd unit the service runs as (its drop-ins are read).
    type: str
    required: true
  store:
    description: Model store (its filesystem is compared with the journal's).
    type: path
    default: /srv/models
  lspci:
    description: Run C(lspci -D -vvv) when pciutils is installed (needs root for the ACS lines).
    type: bool
    default: true
"""

EXAMPLES = r"""
- name: Read PCIe, NUMA, limit and journald facts
  host_facts:
    gpu_bus_ids: "{{ preflight_gpu_facts.gpus | map(attribute='pci_bus_id') | list }}"
    unit: sglang-kimi.service
    store: /srv/models
  register: preflight_host_facts
"""

RETURN = r"""
cmdline:
  description: C(/proc/cmdline).
  returned: always
  type: str
lspci:
  description: Path of lspci (null when not installed), exit status, output and stderr of C(lspci -D -vvv).
  returned: always
  type: dict
  sample: {"path": "/usr/bin/lspci", "rc": 0, "output": "0000:00:01.0 PCI bridge: ...", "error": ""}
pci:
  description: One entry per GPU bus id.
  returned: always
  type: list
  elements: dict
  sample: [{"bus_id": "00000000:1B:00.0", "bdf": "0000:1b:00.0", "present": true, "numa_node": 0,
            "iommu_group": "34", "iommu_type": "identity"}]
iommu_units:
  description: Entries of C(/sys/class/iommu) (empty when no IOMMU is active).
  returned: always
  type: list
  elements: str
numa:
  description: NUMA node id -> cpulist, and the numactl path (null when not installed).
  returned: always
  type: dict
  sample: {"nodes": {"0": "0-31", "1": "32-63"}, "numactl": "/usr/bin/numactl"}
pid1:
  description: Texts of C(/proc/1/status) and C(/proc/1/limits).
  returned: always
  type: dict
cpuset:
  description: CPUs and memory nodes the cgroup cpuset of the system slice grants, and the file they came from.
  returned: always
  type: dict
  sample: {"cpus": "0-63", "mems": "0-1", "source": "/sys/fs/cgroup/system.slice"}
unit:
  description: The unit name and its drop-in files (path, text) in priority order.
  returned: always
  type: dict
journald:
  description: journald.conf and drop-ins (path, text), whether /var/log/journal exists, journald's last usage line.
  returned: always
  type: dict
journal_fs:
  description: Filesystem of the journal directory (path, checked_path, total_bytes, free_bytes, used_bytes, dev).
  returned: always
  type: dict
store_fs:
  description: Filesystem of the model store (path, checked_path, free_bytes, dev).
  returned: always
  type: dict
"""

import glob
import json
import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.blackwell.sglang.plugins.module_utils.host.host_journald import journal_storage, journald_settings
from ansible_collections.blackwell.sglang.plugins.module_utils.host.host_pci import normalize_bdf
from ansible_collections.blackwell.sglang.plugins.module_utils.host.host_systemd import order_dropins

UNIT_DIRS = ("/etc/systemd/system", "/run/systemd/system", "/usr/local/lib/systemd/system", "/usr/lib/systemd/system",
             "/lib/systemd/system")
CONF_DIRS = ("/etc/systemd", "/run/systemd", "/usr/local/lib/systemd", "/usr/lib/systemd", "/lib/systemd")
# sd-messages.h SD_MESSAGE_JOURNAL_USAGE: "<journal> is X, max Y, Z free." with MAX_USE and DISK_KEEP_FREE fields.
JOURNAL_USAGE_ID = "ec387f577b844b8fa948f33cad9a75e6"


def read(path):
    try:
        with open(path) as handle:
            return handle.read()
    except (IOError, OSError, UnicodeDecodeError):
        return None


def existing(path):
    path = os.path.abspath(path)
    while not os.path.exists(path) and path != os.path.dirname(path):
        path = os.path.dirname(path)
    return path


def conf_files(dirs, names):
    """(path, text) of every ``*.conf`` in ``<dir>/<name>`` for dirs x names, in that priority order, each real
    directory once (/lib may be /usr/lib)."""
    out, seen = [], set()
    for name in names:
        for base in dirs:
            d = os.path.join(base, name)
            real = os.path.realpath(d)
            if real in seen or not os.path.isdir(d):
                continue
            seen.add(real)
            for path in sorted(glob.glob(os.path.join(d, "*.conf"))):
                text = read(path)
                if text is not None:
                    out.append({"path": path, "text": text})
    return out


def unit_dropin_dirs(unit):
    """``sglang-kimi.service`` -> [``sglang-kimi.service.d``, ``sglang-.service.d``, ``service.d``]: the unit's own,
    its dash prefixes, its type (systemd.unit(5)), most specific first."""
    name, dummy, kind = unit.rpartition(".")
    dirs = [unit + ".d"]
    parts = name.split("-")
    for i in range(len(parts) - 1, 0, -1):
        dirs.append("-".join(parts[:i]) + "-." + kind + ".d")
    dirs.append(kind + ".d")
    return dirs


def pci_facts(bus_ids, sysfs="/sys/bus/pci/devices"):
    out = []
    for bus_id in bus_ids:
        bdf = normalize_bdf(bus_id)
        dev = os.path.join(sysfs, bdf) if bdf else None
        entry = {"bus_id": bus_id, "bdf": bdf, "present": bool(dev and os.path.exists(dev)), "numa_node": None,
                 "iommu_group": None, "iommu_type": None}
        if entry["present"]:
            text = read(os.path.join(dev, "numa_node"))
            try:
                entry["numa_node"] = int(text) if text is not None else None
            except ValueError:
                pass
            group = os.path.join(dev, "iommu_group")
            if os.path.exists(group):
                entry["iommu_group"] = os.path.basename(os.path.realpath(group))
                entry["iommu_type"] = (read(os.path.join(group, "type")) or "").strip() or None
        out.append(entry)
    return out


def numa_nodes(root="/sys/devices/system/node"):
    nodes = {}
    for path in glob.glob(os.path.join(root, "node[0-9]*")):
        text = read(os.path.join(path, "cpulist"))
        if text is not None:
            nodes[os.path.basename(path)[4:]] = text.strip()
    return nodes


def cpuset(root="/sys/fs/cgroup"):
    """CPUs / memory nodes the cpuset grants a unit in system.slice (v2), or the namespace root's cpuset (v1: systemd
    does not manage the cpuset controller there)."""
    if os.path.exists(os.path.join(root, "cgroup.controllers")):
        for base in (os.path.join(root, "system.slice"), root):
            cpus = read(os.path.join(base, "cpuset.cpus.effective"))
            if cpus is not None:
                return {"cpus": cpus.strip(), "mems": (read(os.path.join(base, "cpuset.mems.effective")) or "").strip(),
                        "source": base}
    v1 = os.path.join(root, "cpuset")
    for cpus_name, mems_name in (("cpuset.effective_cpus", "cpuset.effective_mems"), ("cpuset.cpus", "cpuset.mems")):
        cpus = read(os.path.join(v1, cpus_name))
        if cpus is not None:
            return {"cpus": cpus.strip(), "mems": (read(os.path.join(v1, mems_name)) or "").strip(), "source": v1}
    return {"cpus": None, "mems": None, "source": None}


def journal_usage(module, storage_dir):
    """journald's latest usage line for ``storage_dir`` -> {"max_use", "keep_free", "journal_path"}, or None."""
    journalctl = module.get_bin_path("journalctl")
    if not journalctl or not storage_dir:
        return None
    rc, out, _err = module.run_command([journalctl, "-b", "-o", "json", "--no-pager", "-n", "20",
                                        "MESSAGE_ID=%s" % JOURNAL_USAGE_ID])
    if rc != 0:
        return None
    found = None
    for line in out.splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if str(entry.get("JOURNAL_PATH", "")).startswith(storage_dir):
            try:
                found = {"max_use": int(entry["MAX_USE"]), "keep_free": int(entry["DISK_KEEP_FREE"]),
                         "journal_path": entry["JOURNAL_PATH"]}
            except (KeyError, ValueError, TypeError):
                continue
    return found


def journal_fs(storage_dir):
    if not storage_dir:
        return {"path": None, "checked_path": None, "total_bytes": None, "free_bytes": None, "used_bytes": None,
                "dev": None}
    checked = existing(storage_dir)
    st = os.statvfs(checked)
    used = 0
    for dirpath, _dirs, names in os.walk(checked if checked == storage_dir else storage_dir):
        for name in names:
            if name.endswith(".journal") or name.endswith(".journal~"):
                try:
                    used += os.lstat(os.path.join(dirpath, name)).st_blocks * 512
                except OSError:
                    pass
    return {"path": storage_dir, "checked_path": checked, "total_bytes": st.f_blocks * st.f_frsize,
            "free_bytes": st.f_bavail * st.f_bsize, "used_bytes": used, "dev": os.stat(checked).st_dev}


def gather(module):
    p = module.params
    facts = {"cmdline": (read("/proc/cmdline") or "").strip()}
    lspci = module.get_bin_path("lspci", opt_dirs=["/usr/sbin", "/sbin"]) if p["lspci"] else None
    facts["lspci"] = {"path": lspci, "rc": None, "output": None, "error": None}
    if lspci:
        rc, out, err = module.run_command([lspci, "-D", "-vvv"])
        facts["lspci"].update(rc=rc, output=out, error=err)
    facts["pci"] = pci_facts(p["gpu_bus_ids"])
    facts["iommu_units"] = sorted(os.listdir("/sys/class/iommu")) if os.path.isdir("/sys/class/iommu") else []
    facts["numa"] = {"nodes": numa_nodes(), "numactl": module.get_bin_path("numactl")}
    facts["pid1"] = {"status": read("/proc/1/status"), "limits": read("/proc/1/limits")}
    facts["cpuset"] = cpuset()
    facts["unit"] = {"name": p["unit"], "dropins": order_dropins(conf_files(UNIT_DIRS, unit_dropin_dirs(p["unit"])))}
    files = [{"path": "/etc/systemd/journald.conf", "text": read("/etc/systemd/journald.conf")}]
    files = [f for f in files if f["text"] is not None] + order_dropins(conf_files(CONF_DIRS, ["journald.conf.d"]))
    var_log = os.path.isdir("/var/log/journal")
    _storage, storage_dir = journal_storage(journald_settings(files), var_log)
    facts["journald"] = {"files": files, "var_log_journal": var_log, "usage": journal_usage(module, storage_dir)}
    facts["journal_fs"] = journal_fs(storage_dir)
    store = existing(p["store"])
    st = os.statvfs(store)
    facts["store_fs"] = {"path": p["store"], "checked_path": store, "free_bytes": st.f_bavail * st.f_bsize,
                         "dev": os.stat(store).st_dev}
    return facts


def main():
    module = AnsibleModule(
        argument_spec=dict(
            gpu_bus_ids=dict(type="list", elements="str", default=[]),
            unit=dict(type="str", required=True),
            store=dict(type="path", default="/srv/models"),
            lspci=dict(type="bool", default=True),
        ),
        supports_check_mode=True,
    )
    try:
        facts = gather(module)
    except (IOError, OSError) as exc:
        module.fail_json(msg="cannot read the host facts: %s" % exc)
    module.exit_json(changed=False, **facts)


if __name__ == "__main__":
    main()
