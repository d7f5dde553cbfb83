# -*- coding: utf-8 -*-
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters for how much of the host a FlashInfer or SGLang build may take.

``build_jobs``
    MemAvailable + CPU count -> parallel compile jobs (``MAX_JOBS``).
``priority_prefix``
    a niceness -> the ``nice``/``ionice`` shell prefix a build command runs under.

The facts: nvcc peaks at 3-8 GB of RAM per job on CUTLASS units, so job counts come from available memory, not from
cores (the roles' ``*_gb_per_job`` default is 8); a rolling redeploy builds on a node that serves, so the build runs
at lower CPU priority and in util-linux ionice's idle I/O class (ionice(1): the disk only when nothing else uses it),
as plugins/module_utils/host/_priority.py does for model_stage.
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError


def build_jobs(mem_available_mb, cores, gb_per_job=8, headroom=0.25, max_jobs=None) -> int:
    """Return how many parallel compile jobs fit: floor(MemAvailable x (1 - headroom) / gb_per_job).

    ``mem_available_mb`` is MemAvailable in MiB (/proc/meminfo, or Ansible's
    ``ansible_memory_mb.nocache.free``), ``cores`` the CPU count, ``gb_per_job`` the peak RAM of one
    nvcc job in GiB (3-8 GB on CUTLASS units; job counts from cores alone OOM-kill the build), ``headroom`` the
    fraction kept for the linker, pip and the rest of the host. Result is at least 1 and at most ``cores`` (and
    ``max_jobs``).
    Example: 32 cores, 64 GiB available -> floor(64 x 0.75 / 8) = 6 jobs, not 32.
    Raises AnsibleFilterError on non-numbers or a non-positive ``gb_per_job``.
    """
    try:
        mem_gb = float(mem_available_mb) / 1024.0
        cores = int(cores)
        gb_per_job = float(gb_per_job)
        headroom = float(headroom)
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError(f"build_jobs needs numbers: {exc}") from exc
    if gb_per_job <= 0 or not 0 <= headroom < 1:
        raise AnsibleFilterError("build_jobs needs gb_per_job > 0 and 0 <= headroom < 1")
    jobs = int(mem_gb * (1.0 - headroom) // gb_per_job)
    jobs = max(1, min(jobs, cores))
    if max_jobs:
        jobs = max(1, min(jobs, int(max_jobs)))
    return jobs


def priority_prefix(nice) -> str:
    """Shell prefix that runs a command at lower CPU and I/O priority: ``"nice -n N ionice -c 3 "`` for ``nice`` 1-19
    (util-linux's ionice, idle class: the disk only when nothing else uses it), ``""`` for 0. A rolling redeploy builds
    on a node that serves: the build yields to the server."""
    try:
        value = int(nice or 0)
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError(f"nice must be a number 0-19, got {nice!r}") from exc
    if not 0 <= value <= 19:
        raise AnsibleFilterError(f"nice must be 0-19, got {value}")
    return f"nice -n {value} ionice -c 3 " if value else ""


class FilterModule:
    def filters(self):
        return {
            "build_jobs": build_jobs,
            "priority_prefix": priority_prefix,
        }
