#!/usr/bin/python3
"""Stand-in for ``nvidia-smi`` on sandbox nodes (stdlib only, python3 >= 3.9).

Installed on a node as ``/usr/bin/nvidia-smi`` -> ``/srv/sandbox/bin/nvidia-smi`` (a copy of this file
written by ``build_artifacts.py``). It answers the subset of the real CLI that the product uses, with the
real output formats, error texts and exit codes, from a JSON state file.

State file
----------
Looked up in this order:

1. ``$FAKE_NVIDIA_SMI_CONFIG`` (must exist when set, else exit 255 with a message on stderr),
2. ``/etc/sandbox/gpus.json`` (if it exists),
3. the built-in default: 8 x "NVIDIA RTX PRO 6000 Blackwell Server Edition", compute capability 12.0,
   97887 MiB, driver 580.95.05 (CUDA 13.0), persistence mode Enabled, no compute apps.

Schema (every key optional; missing keys take the defaults above)::

    {
      "driver_version": "580.95.05",
      "cuda_version": "13.0",            # default derived from the driver branch (570 -> 12.8, 580 -> 13.0)
      "gpu_count": 8,                    # used only when "gpus" is absent
      "gpu_defaults": {...},             # per-GPU keys applied to every generated GPU
      "gpus": [                          # explicit list; each entry is merged over the generated default
        {
          "name": "NVIDIA RTX PRO 6000 Blackwell Server Edition",
          "uuid": "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx",   # default: stable, derived from index
          "serial": "1794025000000",
          "compute_cap": "12.0",
          "memory_total_mib": 97887,
          "memory_used_mib": null,       # null -> sum of this GPU's compute_apps used_memory_mib
          "memory_reserved_mib": 566,    # memory.free = total - reserved - used (like recent drivers)
          "persistence_mode": "Enabled", # or "Disabled"
          "pci_bus_id": "00000000:1B:00.0",
          "temperature_c": 34, "power_draw_w": 37.5, "power_limit_w": 600.0,
          "utilization_gpu_pct": 0, "utilization_memory_pct": 0, "pstate": "P8",
          "vbios_version": "98.02.4B.00.01", "compute_mode": "Default",
          # GPU health (see "Health fields" below); faults are injected by setting these
          "clocks_event_reasons": [],    # active reasons besides gpu_idle, e.g. ["hw_thermal_slowdown"]
          "ecc_errors_corrected_volatile": 0, "ecc_errors_uncorrected_volatile": 0,
          "ecc_errors_corrected_aggregate": 0, "ecc_errors_uncorrected_aggregate": 0,
          "retired_pages_pending": "[N/A]",
          "remapped_rows_correctable": 0, "remapped_rows_uncorrectable": 0,
          "remapped_rows_pending": false, "remapped_rows_failure": false,
          "pcie_link_gen_max": 5, "pcie_link_gen_current": null,     # null: 1 at idle (P8), the max when busy
          "pcie_link_width_max": 16, "pcie_link_width_current": 16
        }
      ],
      "compute_apps": [
        {"pid": 4242, "gpu_uuid": "GPU-...", "process_name": "python3", "used_memory_mib": 81234}
        # "gpu_index": 0 may be given instead of "gpu_uuid"
      ],
      "failure": null                    # or "no_devices" | "nvml_error" | "driver_mismatch"
    }

Live GPU processes
------------------
A real GPU lists the processes that hold it. The SGLang simulator (and any other stand-in GPU program, e.g.
``gpu_hog.py``) publishes one JSON file per process in ``process_state_dir`` (default ``/tmp/sglang-sim``;
the simulator's ``sim_state.py`` documents the format: pid, gpu_id, cuda_visible_devices, gpu_memory_used_mib,
gpu_busy). Every file whose pid is alive (``/proc/<pid>``, not a zombie) becomes a compute app on the physical GPU
its ``gpu_id`` names through ``CUDA_VISIBLE_DEVICES`` (indices or UUIDs), with the process name nvidia-smi shows
(the first word of ``/proc/<pid>/cmdline``, so ``setproctitle`` titles such as ``sglang::scheduler_TP3`` appear)
and its used memory; a dead process's file is ignored, as a dead process leaves nothing on a real GPU. A GPU's
``memory.used`` is the sum of its apps; ``utilization.gpu`` reads 100 while one of its apps says it is busy, and
``pstate`` P0 while any app holds it. The static ``compute_apps`` above stay (foreign processes).

Any per-GPU or per-app value may also be a literal device answer such as ``"[N/A]"``, ``"[Not Supported]"``
or ``"[Not Found]"`` (process name): it is printed verbatim, without units, as the real tool does.

Health fields
-------------
The fields a health collector reads, with the names of ``nvidia-smi --help-query-gpu`` (driver R535 and later; NVIDIA's
nvidia-smi documentation) and their CSV forms:

* ``clocks_event_reasons.{gpu_idle,applications_clocks_setting,sw_power_cap,hw_slowdown,sync_boost,
  sw_thermal_slowdown,hw_thermal_slowdown,hw_power_brake_slowdown}`` print ``Active`` / ``Not Active``;
  ``clocks_event_reasons.active`` and ``.supported`` the NVML bit mask (``0x0000000000000001`` = GpuIdle). The
  older ``clocks_throttle_reasons.*`` names are accepted as aliases, as the real tool keeps them. ``gpu_idle`` is
  active while no app of the GPU is busy (and then ``pcie.link.gen.current`` reads 1: the GPU lowers its link speed
  at idle, P8), the other reasons are the state file's ``clocks_event_reasons``.
* ``ecc.errors.{corrected,uncorrected}.{volatile,aggregate}.total``: counts; ``retired_pages.pending``: ``[N/A]`` on a
  GPU with row remapping (Ampere and later) unless the state file says ``Yes``/``No``.
* ``pcie.link.gen.{current,gpucurrent,max,gpumax,hostmax}``, ``pcie.link.width.{current,max}``.
* ``--query-remapped-rows=gpu_bus_id,gpu_uuid,remapped_rows.{correctable,uncorrectable,pending,failure}``: one line
  per GPU; pending and failure print ``Yes`` / ``No`` as in ``nvidia-smi -q``'s "Remapped Rows" section.

Failure modes (message on stdout, like the real tool):

* ``no_devices``      ``No devices were found``                                             exit 6
* ``nvml_error``      ``NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA
                      driver. Make sure that the latest NVIDIA driver is installed and running.``  exit 9
* ``driver_mismatch`` ``Failed to initialize NVML: Driver/library version mismatch``
                      ``NVML library version: <major.minor of driver_version>``            exit 18

Supported command lines (``-i/--id`` filters by index, UUID or PCI bus id; an unknown id -> "No devices
were found", exit 6):

* ``nvidia-smi`` (table), ``-L/--list-gpus``, ``--version``, ``-h/--help``, ``--help-query-gpu``,
  ``--help-query-compute-apps``, ``-q`` (short detail listing),
* ``--query-gpu=F1,F2,... --format=csv[,noheader][,nounits]`` (aliases such as ``gpu_name`` accepted; the
  header shows the canonical name; unknown field -> ``Field "x" is not a valid field to query.``, exit 2),
* ``--query-compute-apps=pid,gpu_uuid,process_name,used_memory --format=...`` (nothing printed when no
  apps and ``noheader``),
* ``--query-remapped-rows=...`` (see "Health fields"),
* ``-pm 0|1`` (root only, else "Insufficient Permissions", exit 4); the new mode is written back to the
  state file when it came from a writable file.
* anything else: ``Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.`` exit 2.
"""

import datetime
import hashlib
import json
import os
import sys

DEFAULT_CONFIG_PATH = "/etc/sandbox/gpus.json"
DEFAULT_PROCESS_STATE_DIR = "/tmp/sglang-sim"
DEFAULT_DRIVER = "580.95.05"
DEFAULT_GPU_NAME = "NVIDIA RTX PRO 6000 Blackwell Server Edition"
DEFAULT_PCI_IDS = [
    "00000000:1B:00.0", "00000000:43:00.0", "00000000:52:00.0", "00000000:61:00.0",
    "00000000:9D:00.0", "00000000:C3:00.0", "00000000:D1:00.0", "00000000:DF:00.0",
]
# Driver branch -> highest CUDA version that driver supports (what nvidia-smi prints as "CUDA Version").
DRIVER_CUDA = [
    (580, "13.0"), (575, "12.9"), (570, "12.8"), (565, "12.7"), (560, "12.6"), (555, "12.5"),
    (550, "12.4"), (545, "12.3"), (535, "12.2"), (530, "12.1"), (525, "12.0"), (520, "11.8"),
]

EXIT_INVALID_ARG = 2
EXIT_NO_PERMISSION = 4
EXIT_NOT_FOUND = 6
EXIT_DRIVER_NOT_LOADED = 9
EXIT_LIB_MISMATCH = 18

MSG_INVALID_COMBO = "Invalid combination of input arguments. Please run 'nvidia-smi -h' for help."
MSG_NO_DEVICES = "No devices were found"
MSG_NO_DRIVER = ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
                 "Make sure that the latest NVIDIA driver is installed and running.")


class Exit(Exception):
    def __init__(self, code, text=""):
        super().__init__(text)
        self.code = code
        self.text = text


# ---------------------------------------------------------------------------------------------- state
def _stable_uuid(index):
    h = hashlib.sha256(("sandbox-gpu-%d" % index).encode()).hexdigest()
    return "GPU-%s-%s-%s-%s-%s" % (h[0:8], h[8:12], h[12:16], h[16:20], h[20:32])


def _pci_id(index):
    if index < len(DEFAULT_PCI_IDS):
        return DEFAULT_PCI_IDS[index]
    return "00000000:%02X:00.0" % ((0x10 + index * 0x08) & 0xFF)


def _default_gpu(index):
    return {
        "name": DEFAULT_GPU_NAME,
        "uuid": _stable_uuid(index),
        "serial": str(1794025000000 + index),
        "compute_cap": "12.0",
        "memory_total_mib": 97887,
        "memory_used_mib": None,
        "memory_reserved_mib": 566,
        "persistence_mode": "Enabled",
        "pci_bus_id": _pci_id(index),
        "temperature_c": 34 + index % 3,
        "power_draw_w": 37.5 + index,
        "power_limit_w": 600.0,
        "utilization_gpu_pct": 0,
        "utilization_memory_pct": 0,
        "pstate": "P8",
        "vbios_version": "98.02.4B.00.01",
        "compute_mode": "Default",
        "clocks_event_reasons": [],
        "ecc_errors_corrected_volatile": 0,
        "ecc_errors_uncorrected_volatile": 0,
        "ecc_errors_corrected_aggregate": 0,
        "ecc_errors_uncorrected_aggregate": 0,
        "retired_pages_pending": "[N/A]",
        "remapped_rows_correctable": 0,
        "remapped_rows_uncorrectable": 0,
        "remapped_rows_pending": False,
        "remapped_rows_failure": False,
        "pcie_link_gen_max": 5,
        "pcie_link_gen_current": None,
        "pcie_link_width_max": 16,
        "pcie_link_width_current": 16,
    }


def cuda_for_driver(driver):
    try:
        branch = int(str(driver).split(".")[0])
    except ValueError:
        return "13.0"
    for floor, cuda in DRIVER_CUDA:
        if branch >= floor:
            return cuda
    return "11.7"


def _proc_alive(pid, proc_root):
    try:
        with open(os.path.join(proc_root, str(pid), "stat"), encoding="utf-8", errors="replace") as fh:
            stat = fh.read()
        return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return False


def _proc_name(pid, proc_root):
    try:
        with open(os.path.join(proc_root, str(pid), "cmdline"), "rb") as fh:
            raw = fh.read()
        name = raw.split(b"\0", 1)[0].decode("utf-8", "replace").strip()
        if name:
            return name
        with open(os.path.join(proc_root, str(pid), "comm"), encoding="utf-8") as fh:
            return fh.read().strip()
    except OSError:
        return "[Not Found]"


def live_apps(directory, gpus, proc_root="/proc"):
    """Compute apps from the process state files in ``directory`` whose process is alive."""
    if not directory or not os.path.isdir(directory):
        return []
    out = []
    for entry in sorted(os.listdir(directory)):
        if not entry.endswith(".json"):
            continue
        try:
            with open(os.path.join(directory, entry), encoding="utf-8") as fh:
                info = json.load(fh)
            pid = int(info["pid"])
        except (OSError, ValueError, KeyError, TypeError):
            continue  # being written, or not one of ours
        if not _proc_alive(pid, proc_root):
            continue
        visible = info.get("cuda_visible_devices")
        local = int(info.get("gpu_id") or 0)
        gpu = None
        if visible not in (None, ""):
            tokens = [t.strip() for t in str(visible).split(",") if t.strip()]
            if local < len(tokens):
                tok = tokens[local]
                gpu = next((g for g in gpus if tok == str(g["index"]) or tok == g["uuid"]), None)
        elif local < len(gpus):
            gpu = gpus[local]
        if gpu is None:
            continue  # a device CUDA would not have given it
        out.append({"pid": pid, "gpu_uuid": gpu["uuid"], "process_name": _proc_name(pid, proc_root),
                    "used_memory_mib": int(info.get("gpu_memory_used_mib") or 0), "_busy": bool(info.get("gpu_busy"))})
    return out


def load_state(environ=None):
    environ = os.environ if environ is None else environ
    path = environ.get("FAKE_NVIDIA_SMI_CONFIG")
    raw = {}
    if path:
        if not os.path.isfile(path):
            raise Exit(255, "fake nvidia-smi: FAKE_NVIDIA_SMI_CONFIG=%s does not exist" % path)
    elif os.path.isfile(DEFAULT_CONFIG_PATH):
        path = DEFAULT_CONFIG_PATH
    if path:
        try:
            with open(path, encoding="utf-8") as fh:
                raw = json.load(fh)
        except (OSError, ValueError) as exc:
            raise Exit(255, "fake nvidia-smi: cannot read %s: %s" % (path, exc))
    state = normalize(raw, proc_root=environ.get("FAKE_NVIDIA_SMI_PROC", "/proc"))
    state["_path"] = path
    state["_raw"] = raw
    return state


def normalize(raw, proc_root="/proc"):
    driver = str(raw.get("driver_version") or DEFAULT_DRIVER)
    cuda = str(raw.get("cuda_version") or cuda_for_driver(driver))
    defaults = raw.get("gpu_defaults") or {}
    if "gpus" in raw and raw["gpus"] is not None:
        entries = list(raw["gpus"])
    else:
        entries = [{} for _ in range(int(raw.get("gpu_count", 8)))]
    gpus = []
    for i, entry in enumerate(entries):
        g = _default_gpu(i)
        g.update(defaults)
        g.update(entry or {})
        g["index"] = i
        g["compute_cap"] = str(g["compute_cap"])
        gpus.append(g)
    by_uuid = {g["uuid"]: g for g in gpus}
    apps = []
    for app in raw.get("compute_apps") or []:
        a = dict(app)
        if "gpu_uuid" not in a and "gpu_index" in a:
            a["gpu_uuid"] = gpus[int(a["gpu_index"])]["uuid"]
        a.setdefault("process_name", "python3")
        a.setdefault("used_memory_mib", 0)
        apps.append(a)
    apps += live_apps(raw.get("process_state_dir", DEFAULT_PROCESS_STATE_DIR), gpus, proc_root)
    for g in gpus:
        mine = [a for a in apps if a.get("gpu_uuid") == g["uuid"]]
        if g.get("memory_used_mib") is None:
            g["memory_used_mib"] = sum(int(a["used_memory_mib"]) for a in mine if not _is_marker(a["used_memory_mib"]))
        if any(a.get("_busy") for a in mine):
            g["utilization_gpu_pct"] = 100
        if mine and g.get("pstate") == "P8":
            g["pstate"] = "P0"
    for a in apps:
        g = by_uuid.get(a.get("gpu_uuid"))
        a["_gpu"] = g
    failure = raw.get("failure")
    if failure not in (None, "", "no_devices", "nvml_error", "driver_mismatch"):
        raise Exit(255, "fake nvidia-smi: unknown failure mode %r" % failure)
    return {"driver_version": driver, "cuda_version": cuda, "gpus": gpus, "compute_apps": apps,
            "failure": failure or None}


def check_failure(state):
    failure = state["failure"]
    if failure == "nvml_error":
        raise Exit(EXIT_DRIVER_NOT_LOADED, MSG_NO_DRIVER)
    if failure == "driver_mismatch":
        lib = ".".join(state["driver_version"].split(".")[:2])
        raise Exit(EXIT_LIB_MISMATCH,
                   "Failed to initialize NVML: Driver/library version mismatch\nNVML library version: %s" % lib)
    if failure == "no_devices" or not state["gpus"]:
        raise Exit(EXIT_NOT_FOUND, MSG_NO_DEVICES)


# ---------------------------------------------------------------------------------------------- fields
def _is_marker(v):
    """Literal device answers such as "[N/A]", "[Not Supported]", "[Unknown Error]" pass through verbatim."""
    return isinstance(v, str) and v.startswith("[")


def _int(v):
    return v if _is_marker(v) else str(int(v))


def _float2(v):
    return v if _is_marker(v) else "%.2f" % float(v)


def _mem_free(g):
    vals = (g["memory_total_mib"], g.get("memory_reserved_mib") or 0, g["memory_used_mib"])
    if any(_is_marker(v) for v in vals):
        return "[N/A]"
    return str(max(0, int(vals[0]) - int(vals[1]) - int(vals[2])))


def _timestamp(state):
    now = state["_now"]
    return now.strftime("%Y/%m/%d %H:%M:%S.") + "%03d" % (now.microsecond // 1000)


# NVML's nvmlClocksEventReason* bits (nvml.h), as clocks_event_reasons.active prints them.
REASON_BITS = {"gpu_idle": 0x1, "applications_clocks_setting": 0x2, "sw_power_cap": 0x4, "hw_slowdown": 0x8,
               "sync_boost": 0x10, "sw_thermal_slowdown": 0x20, "hw_thermal_slowdown": 0x40,
               "hw_power_brake_slowdown": 0x80}


def _idle(g):
    return not _is_marker(g["utilization_gpu_pct"]) and int(g["utilization_gpu_pct"]) == 0


def _active_reasons(g):
    reasons = {r for r in (g.get("clocks_event_reasons") or []) if r in REASON_BITS and r != "gpu_idle"}
    if _idle(g):
        reasons.add("gpu_idle")
    return reasons


def _link_gen(g):
    if g.get("pcie_link_gen_current") is not None:
        return g["pcie_link_gen_current"]
    return 1 if g.get("pstate") == "P8" else g["pcie_link_gen_max"]


def _yes_no(v):
    if _is_marker(v):
        return v
    if isinstance(v, str):
        return v
    return "Yes" if v else "No"


# canonical name -> (aliases, unit, getter(gpu, state) -> str)
GPU_FIELDS = {
    "timestamp": ((), None, lambda g, s: _timestamp(s)),
    "driver_version": ((), None, lambda g, s: s["driver_version"]),
    "count": ((), None, lambda g, s: str(len(s["_all_gpus"]))),
    "name": (("gpu_name",), None, lambda g, s: g["name"]),
    "serial": (("gpu_serial",), None, lambda g, s: str(g["serial"])),
    "uuid": (("gpu_uuid",), None, lambda g, s: g["uuid"]),
    "pci.bus_id": (("gpu_bus_id",), None, lambda g, s: g["pci_bus_id"]),
    "pci.domain": ((), None, lambda g, s: "0x" + g["pci_bus_id"].split(":")[0][-4:]),
    "pci.bus": ((), None, lambda g, s: "0x" + g["pci_bus_id"].split(":")[1]),
    "pci.device": ((), None, lambda g, s: "0x" + g["pci_bus_id"].split(":")[2].split(".")[0]),
    "pci.device_id": ((), None, lambda g, s: "0x2BB510DE"),
    "index": ((), None, lambda g, s: str(g["index"])),
    "vbios_version": ((), None, lambda g, s: g["vbios_version"]),
    "persistence_mode": ((), None, lambda g, s: g["persistence_mode"]),
    "compute_mode": ((), None, lambda g, s: g["compute_mode"]),
    "compute_cap": ((), None, lambda g, s: g["compute_cap"]),
    "pstate": ((), None, lambda g, s: g["pstate"]),
    "memory.total": ((), "MiB", lambda g, s: _int(g["memory_total_mib"])),
    "memory.reserved": ((), "MiB", lambda g, s: _int(g.get("memory_reserved_mib") or 0)),
    "memory.used": ((), "MiB", lambda g, s: _int(g["memory_used_mib"])),
    "memory.free": ((), "MiB", lambda g, s: _mem_free(g)),
    "utilization.gpu": ((), "%", lambda g, s: _int(g["utilization_gpu_pct"])),
    "utilization.memory": ((), "%", lambda g, s: _int(g["utilization_memory_pct"])),
    "temperature.gpu": ((), None, lambda g, s: _int(g["temperature_c"])),
    "power.draw": ((), "W", lambda g, s: _float2(g["power_draw_w"])),
    "power.limit": ((), "W", lambda g, s: _float2(g["power_limit_w"])),
    "mig.mode.current": ((), None, lambda g, s: "[N/A]"),
    "ecc.mode.current": ((), None, lambda g, s: "Enabled"),
    "clocks_event_reasons.supported": (("clocks_throttle_reasons.supported",), None,
                                       lambda g, s: "0x%016X" % sum(REASON_BITS.values())),
    "clocks_event_reasons.active": (("clocks_throttle_reasons.active",), None,
                                    lambda g, s: "0x%016X" % sum(REASON_BITS[r] for r in _active_reasons(g))),
    "ecc.errors.corrected.volatile.total": ((), None, lambda g, s: _int(g["ecc_errors_corrected_volatile"])),
    "ecc.errors.uncorrected.volatile.total": ((), None, lambda g, s: _int(g["ecc_errors_uncorrected_volatile"])),
    "ecc.errors.corrected.aggregate.total": ((), None, lambda g, s: _int(g["ecc_errors_corrected_aggregate"])),
    "ecc.errors.uncorrected.aggregate.total": ((), None, lambda g, s: _int(g["ecc_errors_uncorrected_aggregate"])),
    "retired_pages.pending": ((), None, lambda g, s: _yes_no(g["retired_pages_pending"])),
    "pcie.link.gen.current": ((), None, lambda g, s: _int(_link_gen(g))),
    "pcie.link.gen.gpucurrent": ((), None, lambda g, s: _int(_link_gen(g))),
    "pcie.link.gen.max": ((), None, lambda g, s: _int(g["pcie_link_gen_max"])),
    "pcie.link.gen.gpumax": ((), None, lambda g, s: _int(g["pcie_link_gen_max"])),
    "pcie.link.gen.hostmax": ((), None, lambda g, s: _int(g["pcie_link_gen_max"])),
    "pcie.link.width.current": ((), None, lambda g, s: _int(g["pcie_link_width_current"])),
    "pcie.link.width.max": ((), None, lambda g, s: _int(g["pcie_link_width_max"])),
}
for _reason in REASON_BITS:
    GPU_FIELDS["clocks_event_reasons." + _reason] = (
        ("clocks_throttle_reasons." + _reason,), None,
        (lambda r: lambda g, s: "Active" if r in _active_reasons(g) else "Not Active")(_reason))

REMAP_FIELDS = {
    "gpu_bus_id": ((), None, lambda g, s: g["pci_bus_id"]),
    "gpu_uuid": ((), None, lambda g, s: g["uuid"]),
    "remapped_rows.correctable": ((), None, lambda g, s: _int(g["remapped_rows_correctable"])),
    "remapped_rows.uncorrectable": ((), None, lambda g, s: _int(g["remapped_rows_uncorrectable"])),
    "remapped_rows.pending": ((), None, lambda g, s: _yes_no(g["remapped_rows_pending"])),
    "remapped_rows.failure": ((), None, lambda g, s: _yes_no(g["remapped_rows_failure"])),
}

APP_FIELDS = {
    "timestamp": ((), None, lambda a, s: _timestamp(s)),
    "gpu_name": ((), None, lambda a, s: a["_gpu"]["name"] if a["_gpu"] else "[N/A]"),
    "gpu_bus_id": ((), None, lambda a, s: a["_gpu"]["pci_bus_id"] if a["_gpu"] else "[N/A]"),
    "gpu_serial": ((), None, lambda a, s: str(a["_gpu"]["serial"]) if a["_gpu"] else "[N/A]"),
    "gpu_uuid": ((), None, lambda a, s: a.get("gpu_uuid", "[N/A]")),
    "pid": ((), None, lambda a, s: str(int(a["pid"]))),
    "process_name": (("name",), None, lambda a, s: a["process_name"]),
    "used_gpu_memory": (("used_memory",), "MiB", lambda a, s: _int(a["used_memory_mib"])),
}


def _resolve(table, names):
    out = []
    for raw in names:
        key = raw.strip()
        canon = None
        for name, (aliases, _unit, _get) in table.items():
            if key == name or key in aliases:
                canon = name
                break
        if canon is None:
            raise Exit(EXIT_INVALID_ARG, 'Field "%s" is not a valid field to query.\n\n' % key)
        out.append(canon)
    return out


def parse_format(spec):
    parts = [p.strip() for p in spec.split(",") if p.strip()]
    opts = set(parts)
    if "csv" not in opts or not opts <= {"csv", "noheader", "nounits"}:
        raise Exit(EXIT_INVALID_ARG, '"%s" is not a valid format.\n%s' % (spec, MSG_INVALID_COMBO))
    return "noheader" not in opts, "nounits" not in opts


def render_csv(table, fields, rows, state, header, units):
    lines = []
    if header:
        cols = []
        for f in fields:
            unit = table[f][1]
            cols.append("%s [%s]" % (f, unit) if unit else f)
        lines.append(", ".join(cols))
    for row in rows:
        vals = []
        for f in fields:
            unit = table[f][1]
            v = table[f][2](row, state)
            if units and unit and not v.startswith("["):
                v = "%s %s" % (v, unit)
            vals.append(v)
        lines.append(", ".join(vals))
    return "\n".join(lines) + ("\n" if lines else "")


# ---------------------------------------------------------------------------------------------- views
def select_gpus(state, ids):
    gpus = state["gpus"]
    if ids is None:
        return gpus
    chosen = []
    for tok in ids.split(","):
        tok = tok.strip()
        match = None
        for g in gpus:
            if tok == str(g["index"]) or tok == g["uuid"] or tok.upper() == g["pci_bus_id"].upper() \
                    or ("0000" + tok.upper()) == g["pci_bus_id"].upper():
                match = g
        if match is None:
            raise Exit(EXIT_NOT_FOUND, MSG_NO_DEVICES)
        chosen.append(match)
    return chosen


def render_list(gpus):
    return "".join("GPU %d: %s (UUID: %s)\n" % (g["index"], g["name"], g["uuid"]) for g in gpus)


def render_version(state):
    d = state["driver_version"]
    nvml = ".".join(d.split(".")[:2])
    return ("NVIDIA-SMI version  : %s\nNVML version        : %s\nDRIVER version      : %s\n"
            "CUDA Version        : %s\n" % (d, nvml, d, state["cuda_version"]))


def render_table(state, gpus):
    now = state["_now"]
    inner = 89                       # the real 580-series table is 91 characters wide
    widths = (41, 24, 22)

    def full(text):
        return "|" + text[:inner].ljust(inner) + "|"

    def row(*segs):
        return "|" + "|".join(seg[:w].ljust(w) for seg, w in zip(segs, widths)) + "|"

    border = "+" + "-" * inner + "+"
    sep = "+" + "+".join("-" * w for w in widths) + "+"
    out = [now.strftime("%a %b %d %H:%M:%S %Y") + "       ", border,
           full(" NVIDIA-SMI %-22s Driver Version: %-14s CUDA Version: %s" % (
               state["driver_version"], state["driver_version"], state["cuda_version"])),
           sep,
           row(" GPU  Name                 Persistence-M ", " Bus-Id          Disp.A ", " Volatile Uncorr. ECC "),
           row(" Fan  Temp   Perf          Pwr:Usage/Cap ", "           Memory-Usage ", " GPU-Util  Compute M. "),
           row("", "", "               MIG M. "),
           "|" + "+".join("=" * w for w in widths) + "|"]
    for g in gpus:
        name = g["name"] if len(g["name"]) <= 27 else g["name"][:24] + "..."
        pm = "On" if g["persistence_mode"] == "Enabled" else "Off"
        out.append(row(" %3d  %-27s %4s  " % (g["index"], name, pm),
                       "   %s Off " % g["pci_bus_id"], "0".rjust(21) + " "))
        left = " N/A  %3sC    %s" % (_int(g["temperature_c"]).strip("[]"), g["pstate"])
        pwr = "%sW / %4sW " % tuple(_int(int(float(v)) if not _is_marker(v) else v).strip("[]")
                                   for v in (g["power_draw_w"], g["power_limit_w"]))
        mem = "%sMiB / %6sMiB" % (_int(g["memory_used_mib"]).strip("[]"), _int(g["memory_total_mib"]).strip("[]"))
        out.append(row(left + pwr.rjust(41 - len(left)), mem.rjust(23) + " ",
                       ("%s%%" % _int(g["utilization_gpu_pct"]).strip("[]")).rjust(7) + g["compute_mode"].rjust(14) + " "))
        out.append(row("", "", "N/A".rjust(21) + " "))
        out.append(sep)
    out += ["", border, full(" Processes:"),
            full("  GPU   GI   CI              PID   Type   Process name                        GPU Memory "),
            full("        ID   ID                                                               Usage      "),
            "|" + "=" * inner + "|"]
    uuids = {g["uuid"]: g for g in gpus}
    apps = [a for a in state["compute_apps"] if a.get("gpu_uuid") in uuids]
    if not apps:
        out.append(full("  No running processes found"))
    for a in apps:
        g = uuids[a["gpu_uuid"]]
        pname = a["process_name"] if len(a["process_name"]) <= 34 else "..." + a["process_name"][-31:]
        out.append(full("  %3d   N/A  N/A  %15d      C   %-34s %8sMiB " % (
            g["index"], int(a["pid"]), pname, _int(a["used_memory_mib"]).strip("[]"))))
    out.append(border)
    return "\n".join(out) + "\n"


def render_query(state, gpus):
    out = ["", "==============NVSMI LOG==============", "",
           "Timestamp                                 : " + state["_now"].strftime("%a %b %d %H:%M:%S %Y"),
           "Driver Version                            : " + state["driver_version"],
           "CUDA Version                              : " + state["cuda_version"], "",
           "Attached GPUs                             : %d" % len(state["gpus"])]
    for g in gpus:
        out += ["GPU " + g["pci_bus_id"],
                "    Product Name                          : " + g["name"],
                "    Persistence Mode                      : " + g["persistence_mode"],
                "    Serial Number                         : " + str(g["serial"]),
                "    GPU UUID                              : " + g["uuid"],
                "    Minor Number                          : %d" % g["index"],
                "    VBIOS Version                         : " + g["vbios_version"],
                "    FB Memory Usage",
                "        Total                             : %s MiB" % _int(g["memory_total_mib"]),
                "        Reserved                          : %s MiB" % _int(g.get("memory_reserved_mib") or 0),
                "        Used                              : %s MiB" % _int(g["memory_used_mib"]),
                "        Free                              : %s MiB" % _mem_free(g),
                "    Compute Mode                          : " + g["compute_mode"], ""]
    return "\n".join(out) + "\n"


HELP = """NVIDIA System Management Interface -- v{driver}

NVSMI provides monitoring information for Tesla and select Quadro devices.
(sandbox stand-in: supports -L, -i, -q, -pm, --version, --query-gpu, --query-compute-apps, --format)

Usage: nvidia-smi [OPTION1 [ARG1]] [OPTION2 [ARG2]] ...

    -h,   --help                Print usage information and exit.
    -L,   --list-gpus           Display a list of GPUs connected to the system.
    -i,   --id=                 Target a specific GPU.
    -q,   --query               Display GPU or Unit info.
    -pm,  --persistence-mode=   Set persistence mode: 0/DISABLED, 1/ENABLED
    --query-gpu=                Information about GPU. Call --help-query-gpu for more info.
    --query-compute-apps=       List of currently active compute processes.
    --format=                   Comma separated list of format options: csv, noheader, nounits
    --version                   Print version information and exit.
"""


# ---------------------------------------------------------------------------------------------- main
def _set_persistence(state, gpus, value):
    enable = value.strip().upper() in ("1", "ENABLED")
    if value.strip().upper() not in ("0", "1", "ENABLED", "DISABLED"):
        raise Exit(EXIT_INVALID_ARG, MSG_INVALID_COMBO)
    if hasattr(os, "geteuid") and os.geteuid() != 0:
        lines = ["Unable to set persistence mode for GPU %s: Insufficient Permissions" % g["pci_bus_id"]
                 for g in gpus[:1]]
        raise Exit(EXIT_NO_PERMISSION, "\n".join(lines + ["Terminating early due to previous errors."]))
    out = []
    for g in gpus:
        g["persistence_mode"] = "Enabled" if enable else "Disabled"
        out.append("%s persistence mode for GPU %s." % ("Enabled" if enable else "Disabled", g["pci_bus_id"]))
    path, raw = state.get("_path"), state.get("_raw")
    if path and os.access(path, os.W_OK):
        raw = dict(raw)
        raw_gpus = list(raw.get("gpus") or [{} for _ in state["gpus"]])
        for g in gpus:
            entry = dict(raw_gpus[g["index"]] or {})
            entry["persistence_mode"] = g["persistence_mode"]
            raw_gpus[g["index"]] = entry
        raw["gpus"] = raw_gpus
        tmp = path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(raw, fh, indent=2)
        os.replace(tmp, path)
    return "\n".join(out + ["All done."]) + "\n"


def parse_args(argv):
    opts = {}
    i = 0
    takes_value = {"-i": "id", "--id": "id", "-pm": "pm", "--persistence-mode": "pm",
                   "--query-gpu": "query_gpu", "--query-compute-apps": "query_apps", "--format": "format",
                   "--query-remapped-rows": "query_remap",
                   "-f": "filename", "--filename": "filename"}
    flags = {"-h": "help", "--help": "help", "-L": "list", "--list-gpus": "list", "-q": "query",
             "--query": "query", "--version": "version", "--help-query-gpu": "help_query_gpu",
             "--help-query-compute-apps": "help_query_apps"}
    while i < len(argv):
        arg = argv[i]
        if "=" in arg and arg.startswith("--"):
            key, val = arg.split("=", 1)
            if key not in takes_value:
                raise Exit(EXIT_INVALID_ARG, MSG_INVALID_COMBO)
            opts[takes_value[key]] = val
        elif arg in takes_value:
            if i + 1 >= len(argv):
                raise Exit(EXIT_INVALID_ARG, MSG_INVALID_COMBO)
            opts[takes_value[arg]] = argv[i + 1]
            i += 1
        elif arg in flags:
            opts[flags[arg]] = True
        else:
            raise Exit(EXIT_INVALID_ARG, MSG_INVALID_COMBO)
        i += 1
    return opts


def run(argv, environ=None):
    """Return (exit_code, stdout_text, stderr_text)."""
    try:
        opts = parse_args(argv)
        state = load_state(environ)
        state["_now"] = datetime.datetime.now()
        state["_all_gpus"] = state["gpus"]
        if opts.get("help"):
            return 0, HELP.format(driver=state["driver_version"]), ""
        if opts.get("help_query_gpu"):
            return 0, "".join('"%s"\n' % k for k in GPU_FIELDS), ""
        if opts.get("help_query_apps"):
            return 0, "".join('"%s"\n' % k for k in APP_FIELDS), ""
        if opts.get("version"):
            if state["failure"] in ("nvml_error", "driver_mismatch"):
                check_failure(state)
            return 0, render_version(state), ""
        check_failure(state)
        gpus = select_gpus(state, opts.get("id"))
        modes = [k for k in ("list", "query", "query_gpu", "query_apps", "query_remap", "pm") if k in opts]
        if len(modes) > 1:
            raise Exit(EXIT_INVALID_ARG, MSG_INVALID_COMBO)
        mode = modes[0] if modes else None
        if mode in ("query_gpu", "query_apps", "query_remap"):
            if "format" not in opts:
                raise Exit(EXIT_INVALID_ARG, "Required option --format missing.\n" + MSG_INVALID_COMBO)
            header, units = parse_format(opts["format"])
            if mode == "query_gpu":
                fields = _resolve(GPU_FIELDS, opts["query_gpu"].split(","))
                return 0, render_csv(GPU_FIELDS, fields, gpus, state, header, units), ""
            if mode == "query_remap":
                fields = _resolve(REMAP_FIELDS, opts["query_remap"].split(","))
                return 0, render_csv(REMAP_FIELDS, fields, gpus, state, header, units), ""
            fields = _resolve(APP_FIELDS, opts["query_apps"].split(","))
            uuids = {g["uuid"] for g in gpus}
            apps = [a for a in state["compute_apps"] if a.get("gpu_uuid") in uuids]
            return 0, render_csv(APP_FIELDS, fields, apps, state, header, units), ""
        if "format" in opts:
            raise Exit(EXIT_INVALID_ARG, MSG_INVALID_COMBO)
        if mode == "list":
            return 0, render_list(gpus), ""
        if mode == "query":
            return 0, render_query(state, gpus), ""
        if mode == "pm":
            return 0, _set_persistence(state, gpus, opts["pm"]), ""
        return 0, render_table(state, gpus), ""
    except Exit as exc:
        text = exc.text if exc.text.endswith("\n") else exc.text + "\n"
        if exc.code == 255:
            return exc.code, "", text
        return exc.code, text, ""


def main():
    code, out, err = run(sys.argv[1:])
    if out:
        sys.stdout.write(out)
    if err:
        sys.stderr.write(err)
    sys.stdout.flush()
    return code


if __name__ == "__main__":
    sys.exit(main())
