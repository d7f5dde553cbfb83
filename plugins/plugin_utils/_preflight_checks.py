# -*- coding: utf-8 -*-
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pure preflight checks on facts gathered by ``gpu_facts`` (stdlib only).

Every check returns a list of messages (empty = fine); a message says what was found,
what was expected and what to do, so the preflight role can print all of them at once.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

# Minimum Linux x86_64 driver per CUDA toolkit, from NVIDIA "CUDA Toolkit Release Notes",
# Table 3 "CUDA Toolkit and Corresponding Driver Versions"
# (https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/index.html):
#   CUDA 13.0 GA >= 580.65.06; CUDA 12.9 GA >= 575.51.03 (12.9 Update 1: 575.57.08);
#   CUDA 12.8 Update 1 >= 570.124.06 (12.8 GA: 570.26; apt's cuda-toolkit-12-8 installs 12.8.1).
# The R580 branch is the first that supports CUDA 13.x at all (CUDA 13 on a 570 driver fails
# with "driver too old"; nothing falls back to the CPU).
DEFAULT_DRIVER_FLOORS = {"13.0": "580.65.06", "12.9": "575.51.03", "12.8": "570.124.06"}


def version_tuple(version):
    """``"580.65.06"`` -> ``(580, 65, 6)``; numeric per dotted component.

    Raises ValueError naming the value when a component is not a number.
    """
    text = str(version).strip()
    try:
        return tuple(int(part) for part in text.split("."))
    except ValueError:
        raise ValueError("version %r is not dotted numbers (expected e.g. 580.65.06)" % (version,))


def compare_versions(left, right):
    """-1, 0, 1 like cmp(); missing trailing components count as 0 (``580.65`` == ``580.65.0``)."""
    a, b = version_tuple(left), version_tuple(right)
    width = max(len(a), len(b))
    a, b = a + (0,) * (width - len(a)), b + (0,) * (width - len(b))
    return (a > b) - (a < b)


def index_ranges(indices):
    """``[0,1,2,3,5,7,8]`` -> ``"0-3,5,7-8"``."""
    runs = []  # [first, last] of each run of consecutive indices
    for i in sorted(set(indices)):
        if runs and i == runs[-1][1] + 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    return ",".join("%d-%d" % (a, b) if a != b else "%d" % a for a, b in runs)


def _gpus_phrase(indices):
    indices = sorted(set(indices))
    if len(indices) == 1:
        return "GPU %d has" % indices[0]
    return "GPUs %s have" % index_ranges(indices)


def driver_floor_for(cuda_version, driver_floors):
    """Floor for ``cuda_version`` (``"13.0"`` or ``"13.0.1"``: matched on major.minor); None if unknown."""
    key = ".".join(str(cuda_version).strip().split(".")[:2])
    return driver_floors.get(key)


def check_driver(driver_version, cuda_version, driver_floors=None):
    """Messages for a driver older than the CUDA floor (list of str)."""
    floors = DEFAULT_DRIVER_FLOORS if driver_floors is None else driver_floors
    if not cuda_version:
        return []
    floor = driver_floor_for(cuda_version, floors)
    if floor is None:
        return ["no driver floor known for CUDA %s (known: %s); add it to driver_floors from NVIDIA's CUDA release "
                "notes, Table 3" % (cuda_version, ", ".join(sorted(floors)) or "none")]
    if not driver_version:
        return ["CUDA %s needs driver >= %s, found no driver version (nvidia-smi reported none); check the driver "
                "installation" % (cuda_version, floor)]
    try:
        too_old = compare_versions(driver_version, floor) < 0
    except ValueError as exc:
        return ["cannot compare driver version with the CUDA %s floor %s: %s" % (cuda_version, floor, exc)]
    if too_old:
        return ["CUDA %s needs driver >= %s, found %s; install driver %s or newer (branch R%s) and reboot before "
                "the CUDA toolkit stage" % (cuda_version, floor, driver_version, floor, floor.split(".")[0])]
    return []


def check_gpus(gpus, compute_apps, expected_count, expected_compute_capability, cuda_version,
               driver_floors=None, own_pids=()):
    """Check a GPU inventory against the plan.

    :param gpus: list of dicts as returned by ``gpu_facts`` (index, name, uuid,
        compute_capability, driver_version, ...)
    :param compute_apps: list of dicts (pid, gpu_uuid, process_name, used_memory_mib)
    :param expected_count: int GPUs expected on this host (None/0 skips the check)
    :param expected_compute_capability: e.g. ``"12.0"`` (None skips the check)
    :param cuda_version: CUDA toolkit to be installed, e.g. ``"13.0"`` (None skips)
    :param driver_floors: dict CUDA major.minor -> minimum driver; default ``DEFAULT_DRIVER_FLOORS``
    :param own_pids: PIDs allowed to hold GPUs (e.g. the running service being redeployed)
    :returns: list of error messages, empty when everything matches.
    """
    errors = []
    gpus = list(gpus or [])
    compute_apps = list(compute_apps or [])

    if expected_count and len(gpus) != int(expected_count):
        errors.append("expected %d GPUs, found %d%s; check `nvidia-smi -L`, the inventory's GPU count, and that "
                      "no GPU has fallen off the bus (dmesg: Xid 79)"
                      % (int(expected_count), len(gpus),
                         (" (indices %s)" % index_ranges(g["index"] for g in gpus)) if gpus else ""))

    drivers = sorted(set(g.get("driver_version") for g in gpus if g.get("driver_version")))
    if gpus:
        errors.extend(check_driver(drivers[-1] if len(drivers) == 1 else (drivers[0] if drivers else None),
                                   cuda_version, driver_floors))

    if expected_compute_capability:
        want = str(expected_compute_capability)
        groups = {}
        for gpu in gpus:
            have = gpu.get("compute_capability")
            if have is None or str(have) != want:
                groups.setdefault((have, gpu.get("name")), []).append(gpu["index"])
        for (have, name), indices in sorted(groups.items(), key=lambda item: min(item[1])):
            if have is None:
                errors.append("%s no compute capability ([N/A]), expected %s (%s); update the driver so nvidia-smi "
                              "reports compute_cap" % (_gpus_phrase(indices), want, name or "unknown model"))
            else:
                errors.append("%s compute capability %s, expected %s (%s); this deployment is built for SM%s, use "
                              "hosts with matching GPUs or change the expected capability and the build arch list"
                              % (_gpus_phrase(indices), have, want, name or "unknown model", want.replace(".", "")))

    own = set(int(p) for p in own_pids or ())
    by_uuid = dict((g.get("uuid"), g) for g in gpus)
    for app in sorted(compute_apps, key=lambda a: (by_uuid.get(a.get("gpu_uuid"), {}).get("index", 1 << 30), a["pid"])):
        if int(app["pid"]) in own:
            continue
        gpu = by_uuid.get(app.get("gpu_uuid"))
        where = ("GPU %d (%s)" % (gpu["index"], app.get("gpu_uuid"))) if gpu else ("GPU %s" % app.get("gpu_uuid"))
        mem = app.get("used_memory_mib")
        errors.append("%s is in use by PID %d (%s, %s MiB), which is not a process of the unit being replaced; stop "
                      "it (a scheduler orphaned when its server was killed?) before deploying, or list it in preflight_allowed_gpu_pids"
                      % (where, app["pid"], app.get("process_name") or "unknown", "?" if mem is None else mem))
    return errors
