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
description:
  - Reads C(MemTotal) and C(MemAvailable) from C(/proc/meminfo), the memory limit and usage of this process's
    cgroup (v2 C(memory.max)/C(memory.current), the smallest limit up the hierarchy; v1
    C(memory.limit_in_bytes)/C(memory.usage_in_bytes)), the size and free space of C(/dev/shm), free space of
    the given paths (the nearest existing parent when a path does not exist yet), the CPU count and the CPUs this
    process may run on, and C(metadata.total_size) of the first readable C(model.safetensors.index.json).
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
attributes:
  check_mode:
    support: full
notes:
  - Runs on the target under its system Python, standard library only.
  - The cgroup is the module's own (the SSH session's); a container's or VM's limit shows up as an ancestor's
    limit (v2) or as the namespace root (v1, v2), which is what bounds the service too.
author:
  - SGLang deployment project
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
  description: This process's cgroup memory limit (null when unlimited or unknown) and usage.
  returned: always
  type: dict
  sample: {"version": 2, "path": "/user.slice", "limit_bytes": null, "usage_bytes": 2147483648}
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
  sample: [{"path": "/srv/models", "checked_path": "/srv", "free_bytes": 3000000000000, "total_bytes": 3840000000000}]
cpus:
  description: CPU count and the CPUs this process may use (affinity).
  returned: always
  type: dict
  sample: {"count": 128, "usable": 128}
model:
  description: Index path and C(metadata.total_size) of the first readable index (both null when none).
  returned: always
  type: dict
  sample: {"index": "/srv/models/Kimi-K2.5/current/model.safetensors.index.json", "total_size_bytes": 547000000000}
"""

import json
import os

from ansible.module_utils.basic import AnsibleModule

# cgroup v1 reports "unlimited" as a page-aligned LONG_MAX.
_V1_UNLIMITED = 1 << 60


def parse_meminfo(text):
    """``/proc/meminfo`` text -> dict name -> bytes (values in kB are multiplied by 1024)."""
    out = {}
    for line in text.splitlines():
        name, _, rest = line.partition(":")
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
    """``/proc/self/cgroup`` -> (version, path): 2 for the unified ``0::/path`` line, else 1 with the memory path."""
    v1 = None
    for line in text.splitlines():
        parts = line.strip().split(":", 2)
        if len(parts) != 3:
            continue
        if parts[0] == "0" and parts[1] == "":
            return 2, parts[2] or "/"
        if "memory" in parts[1].split(","):
            v1 = parts[2] or "/"
    if v1 is not None:
        return 1, v1
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


def cgroup_memory(root="/sys/fs/cgroup", proc_cgroup="/proc/self/cgroup"):
    """dict version, path, limit_bytes (smallest limit on the way up, None = unlimited/unknown), usage_bytes."""
    try:
        with open(proc_cgroup) as fh:
            version, path = parse_proc_cgroup(fh.read())
    except (IOError, OSError):
        version, path = None, None
    info = {"version": version, "path": path, "limit_bytes": None, "usage_bytes": None}
    if version == 2:
        rel = path.strip("/")
        # Inside a cgroup namespace the listed path may not exist under root: then root is our cgroup.
        base = os.path.join(root, rel) if rel and _exists(os.path.join(root, rel)) else root
        info["usage_bytes"] = _read_int(os.path.join(base, "memory.current"))
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
    return info


def fs_space(path):
    """(checked_path, total_bytes, free_bytes) of the filesystem holding ``path`` or its nearest existing parent."""
    here = os.path.abspath(path)
    while not os.path.exists(here) and here != os.path.dirname(here):
        here = os.path.dirname(here)
    st = os.statvfs(here)
    return here, st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize


def model_size(candidates):
    """First readable index -> dict index, total_size_bytes (None, None when none is readable)."""
    for path in candidates or []:
        try:
            with open(path) as fh:
                data = json.load(fh)
            size = int((data.get("metadata") or {}).get("total_size"))
        except (IOError, OSError, ValueError, TypeError, AttributeError):
            continue
        return {"index": path, "total_size_bytes": size}
    return {"index": None, "total_size_bytes": None}


def gather(paths=(), shm_path="/dev/shm", model_indexes=(), proc="/proc", cgroup_root="/sys/fs/cgroup"):
    with open(os.path.join(proc, "meminfo")) as fh:
        mem = parse_meminfo(fh.read())
    shm = {"path": shm_path, "size_bytes": None, "free_bytes": None}
    if os.path.isdir(shm_path):
        _, total, free = fs_space(shm_path)
        shm.update(size_bytes=total, free_bytes=free)
    disks = []
    for path in paths or []:
        checked, total, free = fs_space(path)
        disks.append({"path": path, "checked_path": checked, "total_bytes": total, "free_bytes": free})
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
    }


def main():
    module = AnsibleModule(
        argument_spec=dict(
            paths=dict(type="list", elements="path", default=[]),
            shm_path=dict(type="path", default="/dev/shm"),
            model_indexes=dict(type="list", elements="path", default=[]),
        ),
        supports_check_mode=True,
    )
    try:
        facts = gather(module.params["paths"], module.params["shm_path"], module.params["model_indexes"])
    except (IOError, OSError) as exc:
        module.fail_json(msg="cannot read host capacity: %s" % exc)
    module.exit_json(changed=False, **facts)


if __name__ == "__main__":
    main()
