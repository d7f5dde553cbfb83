#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: host_capacity
short_description: Read host memory, cgroup memory limit, /dev/shm, free disk, CPU cores and a model's size
extends_documentation_fragment:
  - blackwell.sglang.common
description:
  - Reads C(MemTotal) and C(MemAvailable) from C(/proc/meminfo), the memory limit and usage of this process's
    cgroup (v2 C(memory.max)/C(memory.current), the smallest limit up the hierarchy; v1
    C(memory.limit_in_bytes)/C(memory.usage_in_bytes)), the size and free space of C(/dev/shm), free space of
    the given paths (the nearest existing parent when a path does not exist yet), the CPU count and the CPUs this
    process may run on, and C(metadata.total_size) of the first readable C(model.safetensors.index.json).
  - The cgroup's usage is counted as SGLang 0.5.23 counts it (C(mem_cache/host_memory.py)) - without its file pages
    (v2 C(active_file) + C(inactive_file), v1 C(total_active_file) + C(total_inactive_file) of C(memory.stat)); page
    cache is reclaimable, and staging 547 GB of weights fills a container's page cache.
  - With O(own_unit), the anonymous memory its processes hold (cgroup members; C(RssAnon) + C(RssShmem)) is
    returned in RV(own_unit) - the running service's HiCache pool, freed when that unit restarts.
  - Never changes anything on the host.
options:
  paths:
    description: Paths whose filesystem's free space is reported (e.g. the model store, the release directory).
    type: list
    elements: path
    default: []
  shm_path:
    description: Shared-memory mount to measure.
    type: path
    default: /dev/shm
  model_indexes:
    description: Candidate C(model.safetensors.index.json) files; the first readable one gives RV(model).
    type: list
    elements: path
    default: []
  staged_revision:
    description: The model revision directory this deploy stages (C(<store>/<name>/<revision>)); RV(staging) says
      whether it is complete (its C(.manifest.json) is there) and how many bytes an interrupted run left in
      C(<revision>.partial), so preflight knows what the stage will still write.
    type: path
  own_unit:
    description: A systemd unit being replaced by this deploy; the memory its processes hold is reported in
      RV(own_unit) (its cgroup's members, as systemd's C(ControlGroup=) names them).
    type: str
attributes:
  check_mode:
    support: full
    description: Read-only (/proc, statvfs, the model index); runs the same in check mode.
notes:
  - Runs on the target under its system Python, standard library only.
  - The cgroup is the module's own (the SSH session's); a container's or VM's limit shows up as an ancestor's
    limit (v2) or as the namespace root (v1, v2), which is what bounds the service too.
"""

EXAMPLES = r"""
- name: Read host capacity for the HiCache and /dev/shm checks
  host_capacity:
    paths: [/srv/models, /opt/sglang]
    model_indexes: [/srv/models/Kimi-K2.5/current/model.safetensors.index.json]
  register: preflight_host
"""

RETURN = r"""
memory:
  description: Bytes from /proc/meminfo.
  returned: always
  type: dict
  sample: {"total_bytes": 1081627885568, "available_bytes": 1040187392000}
cgroup:
  description: This process's cgroup memory limit (null when unlimited or unknown), usage without page cache, and
    the page cache left out of it.
  returned: always
  type: dict
  sample: {"version": 2, "path": "/user.slice", "limit_bytes": null, "usage_bytes": 2147483648, "file_bytes": 0}
own_unit:
  description: The O(own_unit), its cgroup, its processes and the anonymous memory they hold (bytes).
  returned: always
  type: dict
  sample: {"name": "sglang-kimi.service", "control_group": "/system.slice/sglang-kimi.service",
           "pids": [4242, 4250], "memory_bytes": 161061273600}
shm:
  description: Size and free space of the shared-memory mount (size null when it is not a mount we can stat).
  returned: always
  type: dict
  sample: {"path": "/dev/shm", "size_bytes": 540813942784, "free_bytes": 540813942784}
disks:
  description: Free space per requested path.
  returned: always
  type: list
  elements: dict
  sample: [{"path": "/srv/models", "checked_path": "/srv", "free_bytes": 3000000000000, "total_bytes": 3840000000000,
            "device": 2049}]
cpus:
  description: CPU count and the CPUs this process may use (affinity).
  returned: always
  type: dict
  sample: {"count": 128, "usable": 128}
model:
  description: Index path and C(metadata.total_size) of the first readable index (both null when none), and why
    each candidate before it could not be read (C(unreadable)).
  returned: always
  type: dict
  sample: {"index": "/srv/models/Kimi-K2.5/current/model.safetensors.index.json", "total_size_bytes": 547000000000,
           "unreadable": ["/srv/models/Kimi-K2.5/r2/model.safetensors.index.json: No such file or directory"]}
staging:
  description: The O(staged_revision) - whether it is complete and the bytes its C(.partial) directory holds (null
    without O(staged_revision)).
  returned: always
  type: dict
  sample: {"path": "/srv/models/Kimi-K2.5/r2", "complete": false, "partial_bytes": 120000000000}
"""

import json
import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.blackwell.sglang.plugins.module_utils.staging.durable_files import tree_bytes
from ansible_collections.blackwell.sglang.plugins.module_utils.host.unit_cgroup import anon_memory_bytes, cgroup_pids, parse_show

# cgroup v1 reports "unlimited" as a page-aligned LONG_MAX.
_V1_UNLIMITED = 1 << 60


def parse_meminfo(text):
    """``/proc/meminfo`` text -> dict name -> bytes (values in kB are multiplied by 1024)."""
    out = {}
    for line in text.splitlines():
        name, dummy, rest = line.partition(":")
        parts = rest.split()
        if not parts:
            continue
        try:
            value = int(parts[0])
        except ValueError:
            continue
        out[name.strip()] = value * 1024 if len(parts) > 1 and parts[1] == "kB" else value
    return out


def parse_proc_cgroup(text):
    """``/proc/self/cgroup`` -> (version, path) of the hierarchy that holds the memory controller: 1 with the v1
    ``memory`` line's path when there is one, else 2 with the unified ``0::/path`` line's.

    A hybrid host (systemd's default on Ubuntu 20.04 and RHEL 8, and these sandbox VMs) lists both: the ``0::`` line
    is systemd's unified tree without controllers, the memory limit lives in the v1 ``memory`` hierarchy."""
    v1 = v2 = None
    for line in text.splitlines():
        parts = line.strip().split(":", 2)
        if len(parts) != 3:
            continue
        if parts[0] == "0" and parts[1] == "":
            v2 = parts[2] or "/"
        elif "memory" in parts[1].split(","):
            v1 = parts[2] or "/"
    if v1 is not None:
        return 1, v1
    if v2 is not None:
        return 2, v2
    return None, None


def _read_int(path):
    try:
        with open(path) as fh:
            text = fh.read().strip()
    except (IOError, OSError):
        return None
    if text in ("max", ""):
        return None
    try:
        return int(text)
    except ValueError:
        return None


def _exists(path):
    return os.path.exists(path)


def _file_pages(directory, keys):
    """Sum of ``keys`` in ``<directory>/memory.stat`` (bytes); 0 when unreadable."""
    total = 0
    try:
        with open(os.path.join(directory, "memory.stat")) as fh:
            for line in fh:
                name, dummy, value = line.partition(" ")
                if name in keys:
                    total += int(value)
    except (IOError, OSError, ValueError):
        return 0
    return total


def cgroup_memory(root="/sys/fs/cgroup", proc_cgroup="/proc/self/cgroup"):
    """dict version, path, limit_bytes (smallest limit on the way up, None = unlimited/unknown), usage_bytes
    (without file pages, as SGLang counts it), file_bytes (the page cache left out)."""
    try:
        with open(proc_cgroup) as fh:
            version, path = parse_proc_cgroup(fh.read())
    except (IOError, OSError):
        version, path = None, None
    info = {"version": version, "path": path, "limit_bytes": None, "usage_bytes": None, "file_bytes": None}
    if version == 2:
        rel = path.strip("/")
        # Inside a cgroup namespace the listed path may not exist under root: then root is our cgroup.
        base = os.path.join(root, rel) if rel and _exists(os.path.join(root, rel)) else root
        info["usage_bytes"] = _read_int(os.path.join(base, "memory.current"))
        info["file_bytes"] = _file_pages(base, ("active_file", "inactive_file"))
        limits = []
        here = base
        while True:
            for name in ("memory.max", "memory.high"):
                value = _read_int(os.path.join(here, name))
                if value is not None:
                    limits.append(value)
            if os.path.normpath(here) == os.path.normpath(root):
                break
            here = os.path.dirname(here)
        info["limit_bytes"] = min(limits) if limits else None
    elif version == 1:
        mem_root = os.path.join(root, "memory")
        rel = path.strip("/")
        base = os.path.join(mem_root, rel) if rel and _exists(os.path.join(mem_root, rel)) else mem_root
        limit = _read_int(os.path.join(base, "memory.limit_in_bytes"))
        info["limit_bytes"] = limit if limit is not None and limit < _V1_UNLIMITED else None
        info["usage_bytes"] = _read_int(os.path.join(base, "memory.usage_in_bytes"))
        info["file_bytes"] = _file_pages(base, ("total_active_file", "total_inactive_file"))
    if info["usage_bytes"] is not None and info["file_bytes"]:
        info["usage_bytes"] = max(info["usage_bytes"] - info["file_bytes"], 0)
    return info


def fs_space(path):
    """(checked_path, total_bytes, free_bytes) of the filesystem holding ``path`` or its nearest existing parent."""
    here = nearest_existing(path)
    st = os.statvfs(here)
    return here, st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize


def nearest_existing(path):
    """``path`` or its nearest existing parent."""
    here = os.path.abspath(path)
    while not os.path.exists(here) and here != os.path.dirname(here):
        here = os.path.dirname(here)
    return here


def staging_state(revision_dir):
    """dict ``path``, ``complete`` (its .manifest.json exists), ``partial_bytes`` (what ``<revision>.partial`` holds)."""
    if not revision_dir:
        return None
    return {"path": revision_dir, "complete": os.path.isfile(os.path.join(revision_dir, ".manifest.json")),
            "partial_bytes": tree_bytes(revision_dir.rstrip("/") + ".partial")}


def model_size(candidates):
    """First readable index -> dict index, total_size_bytes (None, None when none is readable) and unreadable (each
    candidate tried before it, as ``<path>: <why>``)."""
    unreadable = []
    for path in candidates or []:
        try:
            with open(path) as fh:
                data = json.load(fh)
        except (IOError, OSError) as exc:
            unreadable.append("%s: %s" % (path, exc.strerror or exc))
            continue
        except ValueError as exc:
            unreadable.append("%s: not JSON (%s)" % (path, exc))
            continue
        try:
            size = int((data.get("metadata") or {}).get("total_size"))
        except (ValueError, TypeError, AttributeError):
            unreadable.append("%s: no metadata.total_size" % path)
            continue
        return {"index": path, "total_size_bytes": size, "unreadable": unreadable}
    return {"index": None, "total_size_bytes": None, "unreadable": unreadable}


def gather(paths=(), shm_path="/dev/shm", model_indexes=(), proc="/proc", cgroup_root="/sys/fs/cgroup",
           staged_revision=None):
    with open(os.path.join(proc, "meminfo")) as fh:
        mem = parse_meminfo(fh.read())
    shm = {"path": shm_path, "size_bytes": None, "free_bytes": None}
    if os.path.isdir(shm_path):
        dummy, total, free = fs_space(shm_path)
        shm.update(size_bytes=total, free_bytes=free)
    disks = []
    for path in paths or []:
        checked, total, free = fs_space(path)
        disks.append({"path": path, "checked_path": checked, "total_bytes": total, "free_bytes": free,
                      "device": os.stat(checked).st_dev})
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - non-Linux
        usable = os.cpu_count()
    return {
        "memory": {"total_bytes": mem.get("MemTotal"), "available_bytes": mem.get("MemAvailable")},
        "cgroup": cgroup_memory(cgroup_root, os.path.join(proc, "self", "cgroup")),
        "shm": shm,
        "disks": disks,
        "cpus": {"count": os.cpu_count(), "usable": usable},
        "model": model_size(model_indexes),
        "staging": staging_state(staged_revision),
    }


def own_unit_memory(module, unit, proc="/proc", cgroup_root="/sys/fs/cgroup"):
    """dict name, control_group, pids, memory_bytes of a unit (empty for no unit or one systemd does not know)."""
    out = {"name": unit, "control_group": None, "pids": [], "memory_bytes": 0}
    systemctl = module.get_bin_path("systemctl") if unit else None
    if not systemctl:
        return out
    rc, text, _err = module.run_command([systemctl, "show", unit, "-p", "ControlGroup,MainPID"])
    if rc != 0:
        return out
    out["control_group"] = parse_show(text)["control_group"]
    out["pids"] = cgroup_pids(out["control_group"], cgroup_root)
    out["memory_bytes"] = anon_memory_bytes(out["pids"], proc)
    return out


def main():
    module = AnsibleModule(
        argument_spec=dict(
            paths=dict(type="list", elements="path", default=[]),
            shm_path=dict(type="path", default="/dev/shm"),
            model_indexes=dict(type="list", elements="path", default=[]),
            own_unit=dict(type="str"),
            staged_revision=dict(type="path"),
        ),
        supports_check_mode=True,
    )
    try:
        facts = gather(module.params["paths"], module.params["shm_path"], module.params["model_indexes"],
                       staged_revision=module.params["staged_revision"])
    except (IOError, OSError) as exc:
        module.fail_json(msg="cannot read host capacity: %s" % exc)
    facts["own_unit"] = own_unit_memory(module, module.params["own_unit"])
    module.exit_json(changed=False, **facts)


if __name__ == "__main__":
    main()
