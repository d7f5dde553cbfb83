# -*- coding: utf-8 -*-
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Parse ``nvidia-smi --query-*`` CSV output (stdlib only; runs on the target node).

Source of the facts: ``nvidia-smi --help-query-gpu`` and ``--help-query-compute-apps``
(NVIDIA driver R570/R580). With ``--format=csv,noheader,nounits`` every row is one
comma-separated line, fields in the order requested; fields the device cannot report
print as ``[N/A]`` or ``[Not Supported]`` (older drivers print ``N/A``). Memory is in MiB
when ``nounits`` is given. ``compute_cap`` prints ``major.minor`` (``12.0`` on SM120).
A host without visible GPUs prints ``No devices were found`` (exit code 6); a kernel
module / user-space mismatch prints ``Failed to initialize NVML: Driver/library version
mismatch`` (exit code 18); a missing kernel module prints ``NVIDIA-SMI has failed because
it couldn't communicate with the NVIDIA driver`` (exit code 9).
"""

from __future__ import absolute_import, division, print_function

import csv

__metaclass__ = type

GPU_QUERY_FIELDS = (
    "index",
    "name",
    "uuid",
    "compute_cap",
    "memory.total",
    "memory.used",
    "driver_version",
    "persistence_mode",
    "pci.bus_id",
)
APPS_QUERY_FIELDS = ("pid", "gpu_uuid", "process_name", "used_memory")

# Values nvidia-smi prints for "this device cannot tell".
UNAVAILABLE = frozenset(
    ["[N/A]", "N/A", "[Not Supported]", "Not Supported", "[Unknown Error]", "[Insufficient Permissions]", ""]
)

# Output fragments that mean "nvidia-smi could not look at the GPUs at all",
# mapped to the advice given with them.
KNOWN_FAILURES = (
    ("No devices were found",
     "the NVIDIA driver is loaded but sees no GPU; check `lspci | grep -i nvidia`, "
     "that the GPUs are not bound to vfio-pci, and dmesg for NVRM errors"),
    ("Failed to initialize NVML: Driver/library version mismatch",
     "the loaded kernel module and the user-space driver differ (usually after a driver upgrade "
     "without reboot); reboot the host or reload the nvidia kernel modules"),
    ("Failed to initialize NVML",
     "NVML could not start; check that the nvidia kernel module is loaded (`lsmod | grep nvidia`) "
     "and that this user may open /dev/nvidia*"),
    ("couldn't communicate with the NVIDIA driver",
     "the nvidia kernel module is not loaded; install the driver for this kernel "
     "(DKMS build) and reboot"),
)


class NvidiaSmiError(Exception):
    """nvidia-smi failed or printed something we cannot parse.

    ``kind`` is one of ``missing``, ``no_devices``, ``nvml``, ``driver``, ``failed``,
    ``parse``; ``str(err)`` is the full human message (found / expected / what to do).
    """

    def __init__(self, message, kind="failed"):
        super(NvidiaSmiError, self).__init__(message)
        self.kind = kind


def query_args(fields, what="gpu"):
    """Return the nvidia-smi argv tail (list of str) for ``--query-<what>=fields``."""
    return ["--query-%s=%s" % (what, ",".join(fields)), "--format=csv,noheader,nounits"]


def gpu_query_args():
    """argv tail for the GPU inventory query (fields: ``GPU_QUERY_FIELDS``)."""
    return query_args(GPU_QUERY_FIELDS, "gpu")


def apps_query_args():
    """argv tail for the compute-process query (fields: ``APPS_QUERY_FIELDS``)."""
    return query_args(APPS_QUERY_FIELDS, "compute-apps")


def clean(value):
    """Strip a raw CSV field; return None for the N/A family (see ``UNAVAILABLE``)."""
    if value is None:
        return None
    value = value.strip()
    return None if value in UNAVAILABLE else value


def _int(value, field, row_no, problems):
    value = clean(value)
    if value is None:
        return None
    try:
        return int(float(value)) if "." in value else int(value)
    except ValueError:
        problems.append("row %d: %s=%r is not a number" % (row_no, field, value))
        return None


def _bool_enabled(value, field, row_no, problems):
    value = clean(value)
    if value is None:
        return None
    low = value.lower()
    if low in ("enabled", "on", "1", "yes"):
        return True
    if low in ("disabled", "off", "0", "no"):
        return False
    problems.append("row %d: %s=%r is neither Enabled nor Disabled" % (row_no, field, value))
    return None


def classify_failure(rc, stdout, stderr):
    """Turn a failed nvidia-smi run into an ``NvidiaSmiError`` (or None when rc == 0 and
    the output holds no known failure text).

    :param rc: exit status (int)
    :param stdout, stderr: captured text
    """
    text = "\n".join(t for t in (stdout or "", stderr or "") if t).strip()
    for fragment, advice in KNOWN_FAILURES:
        if fragment in text:
            kind = "no_devices" if fragment.startswith("No devices") else (
                "driver" if "communicate" in fragment else "nvml")
            first = [line for line in text.splitlines() if fragment in line][0].strip()
            return NvidiaSmiError("nvidia-smi reported %r (exit code %s): %s" % (first, rc, advice), kind)
    if rc != 0:
        return NvidiaSmiError(
            "nvidia-smi exited with code %s; output: %r; expected CSV rows. Run it by hand on the "
            "host to see why" % (rc, text[:500]), "failed")
    return None


def _rows(text):
    lines = [line for line in (text or "").splitlines() if line.strip()]
    return list(csv.reader(lines, skipinitialspace=True))


def parse_gpus(text):
    """Parse the GPU query (``GPU_QUERY_FIELDS`` order) into a list of dicts.

    Each dict: ``index`` int, ``name`` str, ``uuid`` str, ``compute_capability`` str
    (``"12.0"``) or None, ``memory_total_mib`` int|None, ``memory_used_mib`` int|None,
    ``driver_version`` str|None, ``persistence_mode`` bool|None, ``pci_bus_id`` str|None.
    Sorted by index. Raises ``NvidiaSmiError(kind="parse")`` naming every bad row.
    """
    gpus, problems = [], []
    for row_no, row in enumerate(_rows(text), 1):
        if len(row) != len(GPU_QUERY_FIELDS):
            problems.append("row %d has %d fields, expected %d (%s): %r"
                            % (row_no, len(row), len(GPU_QUERY_FIELDS), ",".join(GPU_QUERY_FIELDS), ",".join(row)))
            continue
        raw = dict(zip(GPU_QUERY_FIELDS, row))
        index = _int(raw["index"], "index", row_no, problems)
        if index is None:
            problems.append("row %d: index is missing" % row_no)
            continue
        gpus.append({
            "index": index,
            "name": clean(raw["name"]),
            "uuid": clean(raw["uuid"]),
            "compute_capability": clean(raw["compute_cap"]),
            "memory_total_mib": _int(raw["memory.total"], "memory.total", row_no, problems),
            "memory_used_mib": _int(raw["memory.used"], "memory.used", row_no, problems),
            "driver_version": clean(raw["driver_version"]),
            "persistence_mode": _bool_enabled(raw["persistence_mode"], "persistence_mode", row_no, problems),
            "pci_bus_id": clean(raw["pci.bus_id"]),
        })
    if problems:
        raise NvidiaSmiError("cannot parse nvidia-smi GPU query output: %s" % "; ".join(problems), "parse")
    return sorted(gpus, key=lambda g: g["index"])


def parse_compute_apps(text):
    """Parse the compute-apps query (``APPS_QUERY_FIELDS`` order).

    Returns a list of dicts: ``pid`` int, ``gpu_uuid`` str, ``process_name`` str|None,
    ``used_memory_mib`` int|None. Empty output (no processes) gives ``[]``; the text
    ``No running processes found`` is also accepted as empty.
    """
    apps, problems = [], []
    text = "\n".join(line for line in (text or "").splitlines() if "No running processes found" not in line)
    for row_no, row in enumerate(_rows(text), 1):
        if len(row) != len(APPS_QUERY_FIELDS):
            problems.append("row %d has %d fields, expected %d: %r" % (row_no, len(row), len(APPS_QUERY_FIELDS), ",".join(row)))
            continue
        raw = dict(zip(APPS_QUERY_FIELDS, row))
        pid = _int(raw["pid"], "pid", row_no, problems)
        if pid is None:
            problems.append("row %d: pid is missing" % row_no)
            continue
        apps.append({
            "pid": pid,
            "gpu_uuid": clean(raw["gpu_uuid"]),
            "process_name": clean(raw["process_name"]),
            "used_memory_mib": _int(raw["used_memory"], "used_memory", row_no, problems),
        })
    if problems:
        raise NvidiaSmiError("cannot parse nvidia-smi compute-apps output: %s" % "; ".join(problems), "parse")
    return apps


def driver_version_of(gpus):
    """The driver version shared by ``gpus`` (str), None if none reports one.

    Raises ``NvidiaSmiError`` if GPUs disagree (cannot happen with one loaded module;
    seen only with corrupted output)."""
    versions = sorted(set(g["driver_version"] for g in gpus if g.get("driver_version")))
    if len(versions) > 1:
        raise NvidiaSmiError("GPUs report different driver versions %s; expected one" % ", ".join(versions), "parse")
    return versions[0] if versions else None
