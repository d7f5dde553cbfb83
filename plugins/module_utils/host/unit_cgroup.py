# -*- coding: utf-8 -*-
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The processes and memory of a systemd unit, by cgroup membership (stdlib only).

A re-run of the deploy, or the rolling redeploy's preflight, runs while the deployed unit still serves: its
schedulers hold every GPU (``nvidia-smi --query-compute-apps`` lists them) and its HiCache host pool holds tens of
GB per rank. Those belong to the unit being replaced, not to a foreign process, and they are freed when it
restarts. Membership in the unit's cgroup (systemd's ``ControlGroup=``) is what says so: the MainPID tree misses
processes that re-parented or daemonised, a cgroup does not.

Where the cgroup lives: cgroup v2 ``/sys/fs/cgroup/<ControlGroup>``; hybrid hosts (and containers on them) keep
systemd's tree under ``/sys/fs/cgroup/unified`` and ``/sys/fs/cgroup/systemd``; the v1 memory controller under
``/sys/fs/cgroup/memory`` when systemd delegates it. A unit's sub-cgroups belong to it too.
"""

from __future__ import absolute_import, division, print_function

import os

__metaclass__ = type

HIERARCHIES = ("", "unified", "systemd")


def show_fields(text):
    """``systemctl show -p ...`` output (KEY=VALUE lines) -> dict of the raw values (str)."""
    raw = {}
    for line in (text or "").splitlines():
        key, sep, value = line.partition("=")
        if sep:
            raw[key.strip()] = value.strip()
    return raw


def parse_show(text):
    """``systemctl show -p ControlGroup,MainPID`` -> dict (``control_group`` str or None, ``main_pid`` int)."""
    raw = show_fields(text)
    try:
        main_pid = int(raw.get("MainPID") or 0)
    except ValueError:
        main_pid = 0
    return {"control_group": raw.get("ControlGroup") or None, "main_pid": main_pid}


def cgroup_dirs(control_group, root="/sys/fs/cgroup"):
    """Existing directories of ``control_group`` under each hierarchy that may hold it."""
    if not control_group:
        return []
    rel = control_group.strip("/")
    out = []
    for hierarchy in HIERARCHIES:
        path = os.path.join(root, hierarchy, rel) if hierarchy else os.path.join(root, rel)
        if os.path.isfile(os.path.join(path, "cgroup.procs")) and path not in out:
            out.append(path)
    return out


def cgroup_pids(control_group, root="/sys/fs/cgroup"):
    """Sorted PIDs in the cgroup and its sub-cgroups (every hierarchy that has it; unreadable parts skipped)."""
    pids = set()
    for base in cgroup_dirs(control_group, root):
        for dirpath, _dirnames, filenames in os.walk(base):
            if "cgroup.procs" not in filenames:
                continue
            try:
                with open(os.path.join(dirpath, "cgroup.procs")) as handle:
                    pids.update(int(line) for line in handle.read().split() if line.strip().isdigit())
            except (IOError, OSError):
                continue
    return sorted(pids)


def anon_memory_bytes(pids, proc_root="/proc"):
    """Sum of ``RssAnon`` + ``RssShmem`` (kB in ``/proc/<pid>/status``) of ``pids``, in bytes: the memory those
    processes give back when they exit (pinned host pools are anonymous memory; page cache is not counted, it is
    already reclaimable in MemAvailable)."""
    total = 0
    for pid in pids or []:
        try:
            with open(os.path.join(proc_root, str(pid), "status")) as handle:
                for line in handle:
                    key, dummy, value = line.partition(":")
                    if key in ("RssAnon", "RssShmem"):
                        total += int(value.split()[0]) * 1024
        except (IOError, OSError, ValueError, IndexError):
            continue
    return total
