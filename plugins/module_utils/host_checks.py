# -*- coding: utf-8 -*-
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Host facts that break multi-GPU SGLang servers: parsing and checks (stdlib only).

The ``host_facts`` module reads the raw inputs on the node (``lspci -D -vvv``, ``/proc/cmdline``, sysfs,
``/proc/1/status`` and ``/proc/1/limits``, systemd drop-ins, ``journald.conf``); everything here is pure so the
preflight checks run on recorded inputs in the unit tests (``tests/unit/fixtures/host_facts``).

Sources of each rule (read them before changing one):

* ACS / IOMMU: NVIDIA NCCL user guide, Troubleshooting, "PCI Access Control Services (ACS)"
  (https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html): IO virtualization
  redirects PCI point-to-point traffic to the root complex, "causing a significant performance reduction or even a
  hang"; ``lspci -vvv | grep ACSCtl`` shows it, ``setpci -s BDF ECAP_ACS+0x6.w=0000`` turns it off until reboot.
  The RTX PRO 6000 Blackwell has no NVLink: every GPU-to-GPU byte crosses PCIe.
* NUMA: SGLang 0.5.23 ``sglang/srt/utils/numa_utils.py``: ``_is_numa_available`` returns False (debug log only) when
  ``/sys/devices/system/node/node1`` is absent or ``numactl`` is not on PATH (``SGLANG_NUMA_BIND_V2``, default on);
  ``_numactl_cpu_mem_args`` intersects the GPU's node CPUs with ``os.sched_getaffinity(0)`` and skips the binding
  with "NUMA node N has no CPU cores allowed by the current affinity" when nothing is left; a ``--membind`` the
  cpuset refuses is relaxed to ``--preferred``, then to CPU-only (``_probe_numactl_args``).
* Limits: systemd ``setrlimit_closest()`` (src/basic/rlimit-util.c): when setting ``Limit*=`` fails with EPERM
  (PID 1 without CAP_SYS_RESOURCE) it sets min(requested, its own hard limit) without an error. Measured in the
  sandbox node (systemd 252, no CAP_SYS_RESOURCE, hard memlock 8 MiB): ``systemd-run -p LimitMEMLOCK=infinity``
  gives the process 8388608/8388608.
* journald: src/journal/journald-rate-limit.c (``burst_modulate``: burst x (log2(available) - 16) / 4 once more
  than 1 MiB is available, per priority pool, per unit), journald-server.c ``cache_space_refresh`` (available =
  clamp(used + free - keep_free, min_use, max_use) - used) and src/core/unit.c ``unit_export_log_rate_limit_burst``
  (a per-unit 0 is not exported: journald then applies journald.conf's RateLimitBurst). Measured on systemd 252:
  LogRateLimitBurst=20 let 45 lines through with 46 MB available (x2.25), LogRateLimitBurst=0 let 22500 of 40000
  through (journald's default 10000 x 2.25), and the default SystemKeepFree was 5 % of the filesystem.
"""

from __future__ import absolute_import, division, print_function

import re

__metaclass__ = type

MIB = 1024 ** 2
GIB = 1024 ** 3
GB = 1000 ** 3
INFINITY = "infinity"
PAGE = 4096

# ------------------------------------------------------------------------------------------ small helpers


def parse_cpulist(text):
    """``"0-3,8,10-11"`` (sysfs / systemd list; commas or whitespace) -> set of ints; ``""`` -> empty set."""
    out = set()
    for part in re.split(r"[\s,]+", (text or "").strip()):
        if not part:
            continue
        if "-" in part:
            lo, hi = part.split("-", 1)
            out.update(range(int(lo), int(hi) + 1))
        else:
            out.add(int(part))
    return out


def format_cpulist(values):
    """set of ints -> ``"0-3,8"`` (``"none"`` when empty)."""
    values = sorted(set(values))
    if not values:
        return "none"
    parts, start, prev = [], values[0], values[0]
    for v in values[1:] + [None]:
        if v is not None and v == prev + 1:
            prev = v
            continue
        parts.append("%d-%d" % (start, prev) if prev != start else "%d" % start)
        if v is not None:
            start = prev = v
    return ",".join(parts)


def human_bytes(value):
    """Bytes -> ``"8 MiB"`` / ``"3.8 GiB"`` for messages (``"infinity"`` stays)."""
    if value == INFINITY or value is None:
        return "infinity" if value == INFINITY else "unknown"
    value = int(value)
    for unit, size in (("TiB", 1024 ** 4), ("GiB", GIB), ("MiB", MIB), ("KiB", 1024)):
        if value >= size:
            q = float(value) / size
            return ("%d %s" % (q, unit)) if q == int(q) else ("%.1f %s" % (q, unit))
    return "%d B" % value


def _le(a, b):
    """a <= b where either may be INFINITY."""
    if b == INFINITY:
        return True
    if a == INFINITY:
        return False
    return int(a) <= int(b)


def _min(a, b):
    return a if _le(a, b) else b


# ------------------------------------------------------------------------------------------ PCI: lspci -vvv

_LSPCI_HEADER = re.compile(r"^(?:(?P<domain>[0-9a-fA-F]{4,8}):)?(?P<bus>[0-9a-fA-F]{2}):(?P<dev>[0-9a-fA-F]{2})\."
                           r"(?P<fn>[0-7])\s+(?P<desc>.*)$")
_LSPCI_BUS = re.compile(r"Bus:\s+primary=([0-9a-fA-F]+),\s*secondary=([0-9a-fA-F]+),\s*subordinate=([0-9a-fA-F]+)")
_FLAG = re.compile(r"([A-Za-z]+)([+-])(?=\s|$)")
# ACSCtl bits that send peer-to-peer requests/completions upstream instead of across the switch (PCIe base spec
# 7.7.8.3: P2P Request Redirect, P2P Completion Redirect, P2P Egress Control).
ACS_REDIRECT_FLAGS = ("ReqRedir", "CmpltRedir", "EgressCtrl")


def normalize_bdf(bus_id):
    """nvidia-smi's ``00000000:1B:00.0`` (or lspci's ``1b:00.0``) -> sysfs ``0000:1b:00.0``; None if unreadable."""
    text = str(bus_id or "").strip().lower()
    parts = text.split(":")
    try:
        if len(parts) == 2:
            domain, bus, rest = 0, int(parts[0], 16), parts[1]
        elif len(parts) == 3:
            domain, bus, rest = int(parts[0], 16), int(parts[1], 16), parts[2]
        else:
            return None
        dev, fn = rest.split(".")
        return "%04x:%02x:%02x.%d" % (domain, bus, int(dev, 16), int(fn))
    except ValueError:
        return None


def _flags(text):
    return dict((name, sign == "+") for name, sign in _FLAG.findall(text))


def parse_lspci(text):
    """``lspci -D -vvv`` (or without ``-D``: domain 0000) -> dict bdf -> device.

    A device: ``bdf``, ``desc`` (class and name as printed), ``bridge`` (primary/secondary/subordinate bus numbers
    or None), ``acs_cap``/``acs_ctl`` (flag -> bool, empty without an ACS capability), ``caps_denied`` (lspci ran
    without root: ``Capabilities: <access denied>``), ``numa_node``, ``driver``."""
    devices, current = {}, None
    for raw in (text or "").splitlines():
        line = raw.rstrip()
        if not line:
            continue
        if not raw[:1].isspace():
            match = _LSPCI_HEADER.match(line)
            if not match:
                current = None
                continue
            bdf = "%04x:%s:%s.%s" % (int(match.group("domain") or "0", 16), match.group("bus").lower(),
                                     match.group("dev").lower(), match.group("fn"))
            current = {"bdf": bdf, "desc": match.group("desc"), "bridge": None, "acs_cap": {}, "acs_ctl": {},
                       "acs_ctl_line": None, "caps_denied": False, "numa_node": None, "driver": None}
            devices[bdf] = current
            continue
        if current is None:
            continue
        body = line.strip()
        bus = _LSPCI_BUS.search(body)
        if bus:
            current["bridge"] = tuple(int(g, 16) for g in bus.groups())
        elif body.startswith("ACSCap:"):
            current["acs_cap"] = _flags(body[len("ACSCap:"):])
        elif body.startswith("ACSCtl:"):
            current["acs_ctl"] = _flags(body[len("ACSCtl:"):])
            current["acs_ctl_line"] = " ".join(body.split())
        elif body.startswith("Capabilities:") and "<access denied>" in body:
            current["caps_denied"] = True
        elif body.startswith("NUMA node:"):
            try:
                current["numa_node"] = int(body.split(":", 1)[1])
            except ValueError:
                pass
        elif body.startswith("Kernel driver in use:"):
            current["driver"] = body.split(":", 1)[1].strip()
    return devices


def device_name(desc):
    """``PCI bridge: Broadcom / LSI PEX890xx PCIe Gen 5 Switch (rev b0) (prog-if 00 [Normal decode])`` ->
    ``Broadcom / LSI PEX890xx PCIe Gen 5 Switch``."""
    name = desc.split(": ", 1)[-1]
    for cut in (" (prog-if", " (rev "):
        name = name.split(cut, 1)[0]
    return name.strip()


def upstream_bridges(devices, bdf):
    """Bridges whose secondary..subordinate bus range holds ``bdf``'s bus (same domain), nearest first."""
    domain, bus = bdf.split(":")[0], int(bdf.split(":")[1], 16)
    chain = []
    for dev in devices.values():
        rng = dev.get("bridge")
        if not rng or dev["bdf"] == bdf or dev["bdf"].split(":")[0] != domain:
            continue
        if rng[1] <= bus <= rng[2]:
            chain.append(dev)
    chain.sort(key=lambda d: (d["bridge"][2] - d["bridge"][1], -d["bridge"][1]))
    return chain


def _gpus_text(indices, verb=None):
    """``GPU 3`` / ``GPUs 0-3``; with ``verb`` (plural form) also ``GPU 3 sits`` / ``GPUs 0-3 sit``."""
    indices = sorted(set(indices))
    one = len(indices) == 1
    text = ("GPU %d" % indices[0]) if one else ("GPUs %s" % format_cpulist(indices))
    if verb:
        text += " " + ({"are": "is", "have": "has"}.get(verb, verb + "s") if one else verb)
    return text


def check_acs(gpus, lspci, interconnect="pcie"):
    """(errors, warnings) for ACS redirect on the GPUs' upstream bridges.

    ``gpus``: list of dicts with ``index`` and ``bdf``; ``lspci``: the ``host_facts`` lspci dict (``path``, ``rc``,
    ``output``, ``error``); ``interconnect``: ``pcie`` (no NVLink: an error) or ``nvlink`` (a warning)."""
    errors, warnings = [], []
    if not gpus:
        return errors, warnings
    lspci = lspci or {}
    if not lspci.get("path"):
        warnings.append("cannot check PCIe ACS on the GPUs' bridges: lspci is not installed (apt-get install pciutils); "
                        "with ACS redirect on, NCCL's first all-reduce over PCIe can hang with no error")
        return errors, warnings
    if lspci.get("rc"):
        warnings.append("cannot check PCIe ACS: `lspci -D -vvv` exited %s (%s)"
                        % (lspci.get("rc"), (lspci.get("error") or "").strip()[:200] or "no message"))
        return errors, warnings
    devices = parse_lspci(lspci.get("output") or "")
    by_bridge, denied, unlisted = {}, set(), []
    for gpu in gpus:
        bdf = gpu.get("bdf")
        if not bdf or bdf not in devices:
            unlisted.append(gpu["index"])
            continue
        for bridge in upstream_bridges(devices, bdf):
            if bridge["caps_denied"]:
                denied.add(bridge["bdf"])
            on = [f for f in ACS_REDIRECT_FLAGS if bridge["acs_ctl"].get(f)]
            if on:
                by_bridge.setdefault(bridge["bdf"], {"bridge": bridge, "gpus": [], "on": on})["gpus"].append(gpu["index"])
    if unlisted:
        warnings.append("lspci does not list %s (bus ids %s from nvidia-smi): their bridges' ACS was not checked"
                        % (_gpus_text(unlisted), ", ".join(g.get("bdf") or "?" for g in gpus if g["index"] in unlisted)))
    if denied:
        warnings.append("lspci could not read the capabilities of bridge(s) %s (<access denied>: run it as root); "
                        "their ACS was not checked" % ", ".join(sorted(denied)))
    if by_bridge:
        parts = []
        for key in sorted(by_bridge):
            item = by_bridge[key]
            on = " ".join("%s+" % f for f, v in item["bridge"]["acs_ctl"].items() if v)
            parts.append("%s %s (above %s; ACSCtl %s)" % (key, device_name(item["bridge"]["desc"]),
                                                          _gpus_text(item["gpus"]), on))
        msg = ("PCIe ACS redirect is on at %d bridge(s) above the GPUs: %s. %s, so ACS sends their peer-to-peer "
               "traffic up to the root complex: NCCL's first all-reduce can hang with no error and leave the GPUs busy "
               "until reset. Fix: turn ACS off in the BIOS (PCIe ACS / IO virtualization), or after every boot run "
               "`setpci -s <bridge> ECAP_ACS+0x6.w=0000` on each bridge listed (NCCL troubleshooting guide, PCI "
               "Access Control Services)"
               % (len(by_bridge), "; ".join(parts),
                  "These GPUs talk over PCIe (no NVLink)" if interconnect == "pcie" else
                  "Peer-to-peer traffic that does not use NVLink (GPUDirect to NICs, PCIe fallbacks) crosses them"))
        (errors if interconnect == "pcie" else warnings).append(msg)
    return errors, warnings


# ------------------------------------------------------------------------------------------ IOMMU: /proc/cmdline


def parse_cmdline(text):
    """``/proc/cmdline`` -> dict name -> value (``""`` for bare flags; the last occurrence wins). Arguments after
    ``--`` belong to init and are ignored."""
    params = {}
    for token in (text or "").split():
        if token == "--":
            break
        name, dummy, value = token.partition("=")
        params[name] = value
    return params


def iommu_mode(cmdline, group_types=None, iommu_units=None):
    """(mode, evidence): mode is ``passthrough``, ``off``, ``translated`` or ``unknown`` (an IOMMU is active and
    neither sysfs nor the command line says how it maps the GPUs).

    ``group_types``: dict GPU index -> ``/sys/bus/pci/devices/<bdf>/iommu_group/type`` (``identity``, ``DMA``,
    ``DMA-FQ``; None when the GPU has no IOMMU group); ``iommu_units``: entries of ``/sys/class/iommu``."""
    params = parse_cmdline(cmdline)
    types = dict((i, t) for i, t in (group_types or {}).items() if t)
    translated = sorted(i for i, t in types.items() if t.upper().startswith("DMA"))
    if translated:
        return "translated", "%s in IOMMU group type %s" % (_gpus_text(translated),
                                                            "/".join(sorted(set(types[i] for i in translated))))
    if types and all(t == "identity" for t in types.values()):
        return "passthrough", "IOMMU group type identity"
    if params.get("iommu") == "pt" or params.get("iommu.passthrough") in ("1", "on", "y"):
        return "passthrough", "iommu=pt on the kernel command line"
    enabled = [k for k in ("intel_iommu", "amd_iommu") if params.get(k, "").split(",")[0] == "on"]
    if params.get("iommu.passthrough") in ("0", "off", "n") or params.get("iommu") == "nopt":
        return "translated", "iommu.passthrough=0 / iommu=nopt on the kernel command line"
    if enabled:
        return "translated", "%s=on on the kernel command line without iommu=pt" % enabled[0]
    if params.get("iommu") == "off" or any(params.get(k, "").split(",")[0] == "off"
                                           for k in ("intel_iommu", "amd_iommu")):
        return "off", "IOMMU off on the kernel command line"
    if iommu_units:
        return "unknown", "IOMMU units %s active, no iommu=pt on the kernel command line" % ", ".join(
            sorted(iommu_units)[:4])
    return "off", "no IOMMU active"


def check_iommu(cmdline, group_types=None, iommu_units=None, interconnect="pcie"):
    """(errors, warnings) for IOMMU DMA translation of the GPUs."""
    mode, evidence = iommu_mode(cmdline, group_types, iommu_units)
    fix = ("Fix: add iommu=pt to GRUB_CMDLINE_LINUX in /etc/default/grub, run update-grub and reboot (or turn "
           "VT-d / AMD-Vi off in the BIOS)")
    if mode == "translated":
        msg = ("the IOMMU translates the GPUs' DMA (%s): %s, so peer-to-peer transfers go through the IOMMU and "
               "NCCL's first all-reduce can hang with no error or Xid, the GPUs busy until reset. %s"
               % (evidence, "these GPUs talk over PCIe (no NVLink)" if interconnect == "pcie" else
                  "traffic off NVLink crosses it", fix))
        return ([msg], []) if interconnect == "pcie" else ([], [msg])
    if mode == "unknown":
        return [], ["%s: most distribution kernels then translate DMA (IOMMU group type DMA-FQ), which can make NCCL's "
                    "first all-reduce over PCIe hang; %s" % (evidence, fix)]
    return [], []


# ------------------------------------------------------------------------------------------ systemd settings

UNIT_KEYS = ("CPUAffinity", "AllowedCPUs", "AllowedMemoryNodes", "NUMAPolicy", "NUMAMask", "LimitMEMLOCK",
             "LimitNOFILE", "LogRateLimitIntervalSec", "LogRateLimitBurst")


def parse_ini_settings(files, section, keys):
    """systemd-style files (list of dicts ``path``, ``text``, in the order systemd reads them) -> dict key ->
    {"value", "path"}. The last assignment wins; ``CPUAffinity=`` assignments merge and an empty one resets it
    (systemd.exec(5))."""
    out = {}
    for item in files or []:
        current = None
        for raw in (item.get("text") or "").splitlines():
            line = raw.strip()
            if not line or line[0] in "#;":
                continue
            if line.startswith("[") and line.endswith("]"):
                current = line[1:-1].strip()
                continue
            if current != section or "=" not in line:
                continue
            key, value = [p.strip() for p in line.split("=", 1)]
            if key not in keys:
                continue
            if key == "CPUAffinity" and value and key in out and out[key]["value"]:
                value = out[key]["value"] + " " + value
            out[key] = {"value": value, "path": item.get("path")}
    return out


def order_dropins(files):
    """Drop-in files -> the order systemd applies them: one file per name (the first in the priority order given,
    /etc before /run before /usr/lib), then sorted by file name (systemd.unit(5), "drop-in" directories)."""
    seen = {}
    for item in files or []:
        name = (item.get("path") or "").rsplit("/", 1)[-1]
        seen.setdefault(name, item)
    return [seen[name] for name in sorted(seen)]


def parse_rlimit(value):
    """systemd ``Limit*=`` value -> (soft, hard); ``infinity`` stays INFINITY; K/M/G/T suffixes are powers of 1024
    (systemd.exec(5))."""
    def one(text):
        text = text.strip()
        if text in ("infinity", "unlimited"):
            return INFINITY
        match = re.match(r"^(\d+)\s*([KMGTPE]?)i?B?$", text, re.IGNORECASE)
        if not match:
            raise ValueError("cannot read limit %r (expected a number, a K/M/G suffix or infinity)" % text)
        return int(match.group(1)) * 1024 ** " KMGTPE".index((match.group(2) or " ").upper())
    text = str(value).strip()
    if ":" in text:
        soft, hard = text.split(":", 1)
        return one(soft), one(hard)
    v = one(text)
    return v, v


_PROC_LIMITS = {"Max locked memory": "memlock", "Max open files": "nofile"}


def parse_proc_limits(text):
    """``/proc/<pid>/limits`` -> dict ``memlock``/``nofile`` -> (soft, hard) (``unlimited`` -> INFINITY)."""
    out = {}
    for line in (text or "").splitlines():
        for label, key in _PROC_LIMITS.items():
            if line.startswith(label):
                fields = line[len(label):].split()
                vals = [INFINITY if f == "unlimited" else int(f) for f in fields[:2]]
                if len(vals) == 2:
                    out[key] = tuple(vals)
    return out


CAP_SYS_RESOURCE = 24


def parse_status(text):
    """``/proc/<pid>/status`` -> dict ``cap_eff`` (int), ``cpus`` (set), ``mems`` (set)."""
    out = {"cap_eff": None, "cpus": None, "mems": None}
    for line in (text or "").splitlines():
        key, dummy, value = line.partition(":")
        value = value.strip()
        if key == "CapEff":
            out["cap_eff"] = int(value, 16)
        elif key == "Cpus_allowed_list":
            out["cpus"] = parse_cpulist(value)
        elif key == "Mems_allowed_list":
            out["mems"] = parse_cpulist(value)
    return out


def effective_rlimit(requested, pid1_hard, can_raise):
    """What a unit asking for ``requested`` (soft, hard) gets: all of it when PID 1 may raise limits, else systemd's
    setrlimit_closest() lowers both to PID 1's own hard limit."""
    if can_raise or pid1_hard is None:
        return tuple(requested)
    return _min(requested[0], pid1_hard), _min(requested[1], pid1_hard)


def check_limits(requested, facts, unit):
    """Errors for every ``Limit*=`` the unit needs that it will not get.

    ``requested``: dict ``memlock``/``nofile`` -> the role's value (``infinity``, ``8M``, ``1048576``), what the service
    needs. A drop-in of the unit may ask for something else; PID 1 without CAP_SYS_RESOURCE grants at most its own
    hard limit. ``facts``: the ``host_facts`` result (``pid1.status``, ``pid1.limits``, ``unit.dropins``)."""
    errors = []
    pid1 = facts.get("pid1") or {}
    status = parse_status(pid1.get("status"))
    limits = parse_proc_limits(pid1.get("limits"))
    can_raise = status["cap_eff"] is None or bool(status["cap_eff"] & (1 << CAP_SYS_RESOURCE))
    dropins = parse_ini_settings(order_dropins((facts.get("unit") or {}).get("dropins")), "Service", UNIT_KEYS)
    for key, setting in (("memlock", "LimitMEMLOCK"), ("nofile", "LimitNOFILE")):
        value = requested.get(key)
        if value in (None, ""):
            continue
        asked, where = value, None
        if setting in dropins:
            asked, where = dropins[setting]["value"], dropins[setting]["path"]
        try:
            need, ask = parse_rlimit(value), parse_rlimit(asked)
        except ValueError as exc:
            errors.append("%s=%s%s: %s" % (setting, asked, (" in %s" % where) if where else "", exc))
            continue
        hard = (limits.get(key) or (None, None))[1]
        got = effective_rlimit(ask, hard, can_raise)
        if _le(need[0], got[0]) and _le(need[1], got[1]):
            continue
        causes = []
        if where and ask != need:
            causes.append("the drop-in %s sets %s=%s" % (where, setting, asked))
        if got != ask:
            causes.append("systemd (PID 1) lacks CAP_SYS_RESOURCE (CapEff %x) and its own hard limit is %s, so it "
                          "lowers the unit's limit to that without an error (setrlimit_closest)"
                          % (status["cap_eff"] or 0, _fmt_limit(key, hard)))
        errors.append(
            "%s needs %s=%s (sglang_service_limit_%s) but will get %s: %s%s. Fix: %s"
            % (unit, setting, value, key, _fmt_limit(key, got[0]), "; ".join(causes),
               "; NCCL and RDMA register memory against it" if key == "memlock" else
               "; SGLang raises its soft open-files limit to 65535 (set_ulimit) and only warns when it cannot",
               "remove that drop-in or set %s=%s in it" % (setting, value) if where and ask != need and got == ask else
               "give PID 1 the limit (containers: --ulimit %s and CAP_SYS_RESOURCE), or set sglang_service_limit_%s "
               "to what the host grants (%s)" % ("memlock=-1" if key == "memlock" else "nofile=%s:%s" % (value, value),
                                                 key, _fmt_limit(key, hard))))
    return errors


def _fmt_limit(key, value):
    if value == INFINITY:
        return "infinity"
    if value is None:
        return "unknown"
    return ("%d bytes (%s)" % (value, human_bytes(value))) if key == "memlock" else str(value)


# ------------------------------------------------------------------------------------------ NUMA


def unit_cpu_mems(facts):
    """(cpus, mems, cpu reasons, memory reasons, drop-in settings) for a process of the unit.

    CPUs: PID 1's affinity (what services inherit, system.conf CPUAffinity= included), within the cgroup cpuset and
    the unit's CPUAffinity= / AllowedCPUs= (drop-ins). Memory nodes: the cpuset's, within AllowedMemoryNodes=. The
    reasons name where each restriction came from."""
    pid1 = parse_status((facts.get("pid1") or {}).get("status"))
    nodes = facts.get("numa") or {}
    all_cpus = set()
    for cpus in (nodes.get("nodes") or {}).values():
        all_cpus |= parse_cpulist(cpus)
    cpus = set(pid1["cpus"]) if pid1["cpus"] else set(all_cpus)
    mems = set(int(n) for n in (nodes.get("nodes") or {}))
    reasons, mem_reasons = [], []
    if pid1["cpus"] and all_cpus and not all_cpus <= pid1["cpus"]:
        reasons.append("PID 1 runs on CPUs %s (system.conf CPUAffinity=, or a taskset on systemd)"
                       % format_cpulist(pid1["cpus"]))
    cpuset = facts.get("cpuset") or {}
    if cpuset.get("cpus"):
        allowed = parse_cpulist(cpuset["cpus"])
        if all_cpus and not all_cpus <= allowed:
            reasons.append("cgroup cpuset %s allows CPUs %s" % (cpuset.get("source") or "", format_cpulist(allowed)))
        cpus &= allowed
    if cpuset.get("mems"):
        allowed = parse_cpulist(cpuset["mems"])
        if mems and not mems <= allowed:
            mem_reasons.append("cgroup cpuset %s allows memory nodes %s" % (cpuset.get("source") or "",
                                                                            format_cpulist(allowed)))
        mems &= allowed
    settings = parse_ini_settings(order_dropins((facts.get("unit") or {}).get("dropins")), "Service", UNIT_KEYS)
    for key in ("CPUAffinity", "AllowedCPUs"):
        if settings.get(key) and settings[key]["value"]:
            allowed = parse_cpulist(settings[key]["value"])
            cpus &= allowed
            reasons.append("%s=%s in %s" % (key, format_cpulist(allowed), settings[key]["path"]))
    if settings.get("AllowedMemoryNodes") and settings["AllowedMemoryNodes"]["value"]:
        allowed = parse_cpulist(settings["AllowedMemoryNodes"]["value"])
        mems &= allowed
        mem_reasons.append("AllowedMemoryNodes=%s in %s" % (format_cpulist(allowed),
                                                            settings["AllowedMemoryNodes"]["path"]))
    return cpus, mems, reasons, mem_reasons, settings


def _env_false(value):
    return str(value).strip().lower() in ("0", "false", "no", "off")


def check_numa(gpus, facts, environment=None, numa_node_option=None):
    """(errors, warnings): the unit's CPU and memory restrictions must allow each GPU's NUMA node, and numactl must
    be there for SGLang 0.5.23 to bind at all.

    ``gpus``: dicts with ``index`` and ``bdf``; ``facts``: ``host_facts`` (``numa.nodes`` node -> cpulist,
    ``numa.numactl``, ``pci`` per GPU with ``numa_node``)."""
    errors, warnings = [], []
    env = environment or {}
    numa = facts.get("numa") or {}
    nodes = dict((int(k), parse_cpulist(v)) for k, v in (numa.get("nodes") or {}).items())
    if 1 not in nodes:
        # numa_utils._is_numa_available: no /sys/devices/system/node/node1 -> not a NUMA host, nothing to bind.
        return errors, warnings
    if _env_false(env.get("SGLANG_AUTO_NUMA_BIND", "1")) and numa_node_option in (None, "", []):
        return errors, warnings
    pci = dict((p.get("bdf"), p) for p in facts.get("pci") or [])
    gpu_nodes = {}
    if numa_node_option not in (None, "", []):
        wanted = numa_node_option if isinstance(numa_node_option, list) else str(numa_node_option).split()
        wanted = [int(n) for n in wanted]
        if len(wanted) < len(gpus):
            errors.append("--numa-node lists %d node(s) for %d GPUs and SGLang indexes it by GPU id. Fix: give one node "
                          "per GPU" % (len(wanted), len(gpus)))
        bad = sorted(set(n for n in wanted if n not in nodes))
        if bad:
            errors.append("--numa-node names node(s) %s, the host has nodes %s. Fix: name the node of each GPU "
                          "(/sys/bus/pci/devices/<bdf>/numa_node)" % (format_cpulist(bad), format_cpulist(nodes)))
        for gpu, node in zip(gpus, wanted):
            if node in nodes:
                gpu_nodes[gpu["index"]] = node
    else:
        unknown = []
        for gpu in gpus:
            node = (pci.get(gpu.get("bdf")) or {}).get("numa_node")
            if node is None or int(node) < 0:
                unknown.append(gpu["index"])
            else:
                gpu_nodes[gpu["index"]] = int(node)
        if unknown:
            warnings.append("%s no NUMA node in /sys/bus/pci/devices/<bdf>/numa_node (-1 or missing) on a host "
                            "with %d NUMA nodes: their rank is bound by NVML's memory affinity only, if at all"
                            % (_gpus_text(unknown, "report"), len(nodes)))
        if not numa.get("numactl"):
            if not _env_false(env.get("SGLANG_NUMA_BIND_V2", "1")):
                warnings.append(
                    "numactl is not installed on a host with %d NUMA nodes (GPUs on nodes %s): SGLang 0.5.23 binds each "
                    "rank to its GPU's node only through numactl and otherwise skips it with a debug-level log line "
                    "(srt/utils/numa_utils.py, _is_numa_available), so ranks run and allocate across sockets. Fix: "
                    "apt-get install numactl" % (len(nodes), format_cpulist(set(gpu_nodes.values())) or "unknown"))
    cpus, mems, reasons, mem_reasons, settings = unit_cpu_mems(facts)
    by_node = {}
    for index, node in sorted(gpu_nodes.items()):
        by_node.setdefault(node, []).append(index)
    why = ("; ".join(reasons) or "no restriction found")
    for node, indices in sorted(by_node.items()):
        node_cpus = nodes.get(node, set())
        if node_cpus and not (node_cpus & cpus):
            errors.append(
                "%s on NUMA node %d (CPUs %s) but the service may only run on CPUs %s (%s): SGLang 0.5.23 then "
                "skips binding their ranks ('NUMA node %d has no CPU cores allowed by the current affinity') and their "
                "host-side work and pinned buffers cross the socket link. Fix: allow node %d's CPUs (remove or widen "
                "that CPUAffinity= / AllowedCPUs= / cpuset)"
                % (_gpus_text(indices, "sit"), node, format_cpulist(node_cpus),
                   format_cpulist(cpus), why, node, node))
        if mems and node not in mems:
            errors.append(
                "%s on NUMA node %d but the service may only allocate on memory nodes %s (%s): numactl "
                "--membind=%d is refused and SGLang falls back to --preferred, then to CPU-only binding, so their "
                "host memory lands on the other socket. Fix: allow memory node %d (AllowedMemoryNodes= / cpuset.mems)"
                % (_gpus_text(indices, "sit"), node, format_cpulist(mems), "; ".join(mem_reasons) or
                   "no restriction found", node, node))
    policy = (settings.get("NUMAPolicy") or {}).get("value")
    mask = (settings.get("NUMAMask") or {}).get("value")
    if policy in ("bind", "preferred") and mask:
        allowed = parse_cpulist(mask)
        outside = sorted(n for n in by_node if n not in allowed)
        if outside:
            warnings.append("NUMAPolicy=%s NUMAMask=%s (%s) excludes the node(s) %s of GPUs %s: every allocation SGLang "
                            "does before binding (and all of them when binding is skipped) follows that policy"
                            % (policy, mask, settings["NUMAPolicy"]["path"], format_cpulist(outside),
                               format_cpulist(i for n in outside for i in by_node[n])))
    return errors, warnings


# ------------------------------------------------------------------------------------------ journald

JOURNALD_KEYS = ("Storage", "RateLimitIntervalSec", "RateLimitInterval", "RateLimitBurst", "SystemMaxUse",
                 "SystemKeepFree", "RuntimeMaxUse", "RuntimeKeepFree")
DEFAULT_RATE_LIMIT_INTERVAL_S = 30.0     # journald-server.c DEFAULT_RATE_LIMIT_INTERVAL
DEFAULT_RATE_LIMIT_BURST = 10000         # journald-server.c DEFAULT_RATE_LIMIT_BURST

_TIMESPAN_UNITS = {"us": 1e-6, "usec": 1e-6, "ms": 1e-3, "msec": 1e-3, "s": 1.0, "sec": 1.0, "second": 1.0,
                   "seconds": 1.0, "m": 60.0, "min": 60.0, "minute": 60.0, "minutes": 60.0, "h": 3600.0,
                   "hr": 3600.0, "hour": 3600.0, "hours": 3600.0, "d": 86400.0, "day": 86400.0, "days": 86400.0}


def parse_timespan(text):
    """systemd time span (``30s``, ``1min 30s``, ``500ms``, a bare number = seconds) -> seconds (float)."""
    text = str(text).strip()
    if not text:
        raise ValueError("empty time span")
    if re.match(r"^\d+(\.\d+)?$", text):
        return float(text)
    total, pos = 0.0, 0
    for match in re.finditer(r"\s*(\d+(?:\.\d+)?)\s*([a-z]+)", text):
        if match.start() != pos or match.group(2) not in _TIMESPAN_UNITS:
            raise ValueError("cannot read time span %r" % text)
        total += float(match.group(1)) * _TIMESPAN_UNITS[match.group(2)]
        pos = match.end()
    if pos != len(text):
        raise ValueError("cannot read time span %r" % text)
    return total


def parse_size(text):
    """journald.conf size (``64M``, ``4G``, ``10%`` -> None for percentages we do not resolve) -> bytes (1024-based)."""
    text = str(text).strip()
    if not text or text.endswith("%"):
        return None
    return parse_rlimit(text)[0]


def journald_settings(files):
    """journald.conf then its drop-ins (already in the order journald reads them) -> dict key -> value."""
    settings = parse_ini_settings(files, "Journal", JOURNALD_KEYS)
    return dict((k, v["value"]) for k, v in settings.items())


def journal_storage(settings, var_log_journal_exists):
    """(storage, directory) journald writes to: Storage= volatile -> /run/log/journal, persistent -> /var/log/journal,
    auto -> /var/log/journal when it exists (journald.conf(5)), none -> (none, None)."""
    storage = (settings.get("Storage") or "auto").strip().lower()
    if storage == "none":
        return "none", None
    if storage == "volatile" or (storage == "auto" and not var_log_journal_exists):
        return "volatile", "/run/log/journal"
    return "persistent", "/var/log/journal"


def _page_align(value):
    return (int(value) + PAGE - 1) // PAGE * PAGE


def journal_metrics(settings, storage, fs_size, usage=None):
    """(max_use, keep_free, min_use) journald applies: its own usage message's MAX_USE / DISK_KEEP_FREE when given,
    else SystemMaxUse= / RuntimeMaxUse= (resp. KeepFree) or the defaults: max_use 10 % of the filesystem in
    [1 MiB, 4 GiB], keep_free 5 % capped at 4 GiB (measured on systemd 252), min_use 2 % in [1 MiB, 16 MiB]."""
    prefix = "Runtime" if storage == "volatile" else "System"
    usage = usage or {}
    max_use = usage.get("max_use") or parse_size(settings.get(prefix + "MaxUse") or "")
    keep_free = usage.get("keep_free")
    if keep_free is None:
        keep_free = parse_size(settings.get(prefix + "KeepFree") or "")
    fs_size = int(fs_size or 0)
    if max_use is None:
        max_use = min(max(_page_align(fs_size // 10), MIB), 4 * GIB) if fs_size else MIB
    if keep_free is None:
        keep_free = min(_page_align(fs_size // 20), 4 * GIB) if fs_size else MIB
    min_use = min(max(_page_align(fs_size // 50), MIB), 16 * MIB) if fs_size else MIB
    return int(max_use), int(keep_free), int(min_use)


def journal_available(used, free, keep_free, max_use, min_use):
    """journald-server.c cache_space_refresh: bytes journald counts as available for the rate limit."""
    avail = max(0, int(free) - int(keep_free))
    limit = min(max(int(used) + avail, int(min_use)), int(max_use))
    return max(0, limit - int(used))


def burst_modulate(burst, available):
    """journald-rate-limit.c burst_modulate: burst x (log2(available) - 16) / 4 above 1 MiB, else burst."""
    k = int(available).bit_length() - 1 if int(available) > 1 else 0
    if k <= 20:
        return int(burst)
    return int(burst) * (k - 16) // 4


def check_journald(facts, unit, interval_sec, burst, model_bytes=0, min_burst=0):
    """Errors for a journal that cannot keep the traceback lines the health verdict needs.

    ``interval_sec``/``burst``: the unit's LogRateLimitIntervalSec= / LogRateLimitBurst= (a drop-in of the unit
    overrides them); ``model_bytes``: the weights model_stage writes (onto the journal's filesystem when
    ``store_fs.dev`` equals ``journal_fs.dev``); ``min_burst``: lines one crash of every rank must be able to log
    within one interval."""
    errors = []
    journald = facts.get("journald") or {}
    settings = journald_settings(journald.get("files"))
    storage, _path = journal_storage(settings, journald.get("var_log_journal"))
    if storage == "none":
        return ["journald stores nothing (Storage=none in %s): the health verdict reads %s's journal for the phase and "
                "the first traceback. Fix: Storage=auto or persistent" % (_where(journald.get("files"), "Storage"),
                                                                          unit)]
    dropins = parse_ini_settings(order_dropins((facts.get("unit") or {}).get("dropins")), "Service", UNIT_KEYS)
    where_i, where_b = "sglang_service_log_rate_limit_interval_sec", "sglang_service_log_rate_limit_burst"
    if "LogRateLimitIntervalSec" in dropins:
        interval_sec, where_i = dropins["LogRateLimitIntervalSec"]["value"], dropins["LogRateLimitIntervalSec"]["path"]
    if "LogRateLimitBurst" in dropins:
        burst, where_b = dropins["LogRateLimitBurst"]["value"], dropins["LogRateLimitBurst"]["path"]
    try:
        interval_s = parse_timespan(interval_sec)
        burst = int(burst)
    except (TypeError, ValueError) as exc:
        return ["cannot read %s's LogRateLimitIntervalSec=%s / LogRateLimitBurst=%s: %s" % (unit, interval_sec, burst,
                                                                                            exc)]
    g_interval = settings.get("RateLimitIntervalSec", settings.get("RateLimitInterval"))
    g_interval_s = parse_timespan(g_interval) if g_interval not in (None, "") else DEFAULT_RATE_LIMIT_INTERVAL_S
    g_burst = int(settings["RateLimitBurst"]) if settings.get("RateLimitBurst") not in (None, "") else \
        DEFAULT_RATE_LIMIT_BURST
    fs = facts.get("journal_fs") or {}
    usage = journald.get("usage") or {}
    max_use, keep_free, min_use = journal_metrics(settings, storage, fs.get("total_bytes"), usage)
    used, free = int(fs.get("used_bytes") or 0), int(fs.get("free_bytes") or 0)
    store = facts.get("store_fs") or {}
    same_fs = bool(store.get("dev") is not None and store.get("dev") == fs.get("dev"))
    after_free = max(0, free - int(model_bytes or 0)) if same_fs else free
    avail_now = journal_available(used, free, keep_free, max_use, min_use)
    avail_after = journal_available(used, after_free, keep_free, max_use, min_use)
    zero = [name for name, value in (("LogRateLimitIntervalSec", interval_s), ("LogRateLimitBurst", burst)) if not value]
    if zero:
        eff_interval = g_interval_s
        eff = burst_modulate(g_burst, avail_after) if g_interval_s and g_burst else None
        errors.append(
            "%s sets %s to 0 (from %s), which does not turn journald's rate limit off: a per-unit 0 means journald's own "
            "RateLimitIntervalSec=%gs / RateLimitBurst=%d (journald.conf)%s. Fix: set both to numbers (defaults 30 s / "
            "100000)"
            % (unit, " and ".join("%s" % z for z in zero), where_b if "LogRateLimitBurst" in zero else where_i,
               eff_interval, g_burst,
               (", %d lines per %gs with %s of journal space available after staging" % (eff, eff_interval,
                                                                                         human_bytes(avail_after)))
               if eff is not None else " (off, since journald.conf sets 0)"))
        return errors
    eff_now, eff_after = burst_modulate(burst, avail_now), burst_modulate(burst, avail_after)
    if min_burst and eff_after < int(min_burst):
        errors.append(
            "journald lets %s log %d lines per %gs (LogRateLimitBurst=%d from %s, scaled for %s of journal space "
            "available%s) and drops the rest, but one crash of every rank can print %d lines at once: the first "
            "traceback the health verdict needs can be among the dropped ones. Fix: raise "
            "sglang_service_log_rate_limit_burst (or lower preflight_journal_min_burst), or keep the journal on a "
            "filesystem the weights do not fill (%sMaxUse= / %sKeepFree= in journald.conf)"
            % (unit, eff_after, interval_s, burst, where_b, human_bytes(avail_after),
               (" after staging %.0f GB onto the journal's filesystem (%s free now, %d lines per %gs)"
                % (float(model_bytes) / GB, human_bytes(free), eff_now, interval_s)) if same_fs and model_bytes else "",
               int(min_burst), "Runtime" if storage == "volatile" else "System",
               "Runtime" if storage == "volatile" else "System"))
    return errors


def _where(files, key):
    for item in reversed(files or []):
        if re.search(r"^\s*%s\s*=" % re.escape(key), item.get("text") or "", re.MULTILINE):
            return item.get("path")
    return "journald.conf"


# ------------------------------------------------------------------------------------------ /dev/shm


def check_shm_free(shm, ranks, floor_bytes):
    """/dev/shm must have ``floor_bytes`` free (not only that size) when more than one rank runs here: stale NCCL
    segments of a killed run stay until removed."""
    if int(ranks) < 2 or not floor_bytes or not shm or shm.get("size_bytes") is None:
        return []
    free, size = shm.get("free_bytes"), shm.get("size_bytes")
    if free is not None and int(size) >= int(floor_bytes) > int(free):
        return ["%s has %s free of %s, below the %s %d ranks need (NCCL shared-memory transport, torch IPC); old files "
                "fill it (stale nccl-* / torch_* segments of a killed run?). Fix: remove them (ls -la %s) or enlarge it"
                % (shm.get("path", "/dev/shm"), human_bytes(free), human_bytes(size), human_bytes(floor_bytes),
                   int(ranks), shm.get("path", "/dev/shm"))]
    return []


# ------------------------------------------------------------------------------------------ all at once


def gpu_list(gpu_facts):
    """gpu_facts result (or its gpus list) -> [{"index", "bdf"}]."""
    gpus = gpu_facts.get("gpus") if isinstance(gpu_facts, dict) else gpu_facts
    return [{"index": int(g.get("index", i)), "bdf": normalize_bdf(g.get("pci_bus_id"))}
            for i, g in enumerate(gpus or []) if isinstance(g, dict)]


def _option(options, name, default=None):
    for key in (name, name.replace("-", "_")):
        if key in (options or {}) and options[key] is not None:
            return options[key]
    return default


def ranks_on_host(options):
    """Scheduler ranks on this host: tp x pp / nnodes."""
    tp, pp = int(_option(options, "tp-size", 1)), int(_option(options, "pp-size", 1))
    return max((tp * pp) // max(int(_option(options, "nnodes", 1)), 1), 1)


def host_problems(facts, gpu_facts, plan):
    """Every host-fact problem: dict ``errors`` and ``warnings`` (lists of messages).

    ``plan``: ``unit``, ``interconnect`` (pcie|nvlink), ``limits`` (memlock/nofile -> value), ``log_rate_limit``
    (``interval_sec``, ``burst``), ``journal_min_burst``, ``model_bytes`` (the index's total_size, None when unknown:
    then ``fallback_weights_gb``), ``environment``, ``options`` (SGLang options: tp/pp/nnodes, numa-node),
    ``shm`` (host_capacity's shm) and ``shm_floor_gib``."""
    errors, warnings = [], []
    if not isinstance(facts, dict) or facts.get("failed"):
        return {"errors": ["could not read the host facts: %s" % ((facts or {}).get("msg") or "host_facts failed")],
                "warnings": []}
    gpus = gpu_list(gpu_facts)
    unit = plan.get("unit") or "the SGLang unit"
    interconnect = plan.get("interconnect") or "pcie"
    pci = dict((p.get("bdf"), p) for p in facts.get("pci") or [])
    missing = [g["index"] for g in gpus if g["bdf"] and not (pci.get(g["bdf"]) or {}).get("present")]
    if missing:
        warnings.append("%s (bus ids from nvidia-smi) %s not under /sys/bus/pci/devices: their NUMA node and IOMMU "
                        "group were not checked" % (_gpus_text(missing), "is" if len(missing) == 1 else "are"))
    group_types = dict((g["index"], (pci.get(g["bdf"]) or {}).get("iommu_type")) for g in gpus)
    for e, w in (check_acs(gpus, facts.get("lspci"), interconnect),
                 check_iommu(facts.get("cmdline"), group_types, facts.get("iommu_units"), interconnect),
                 check_numa(gpus, facts, plan.get("environment"), _option(plan.get("options"), "numa-node"))):
        errors.extend(e)
        warnings.extend(w)
    errors.extend(check_limits(plan.get("limits") or {}, facts, unit))
    rate = plan.get("log_rate_limit") or {}
    model_bytes = plan.get("model_bytes") or float(plan.get("fallback_weights_gb") or 0) * GB
    errors.extend(check_journald(facts, unit, rate.get("interval_sec", 30), rate.get("burst", 0),
                                 model_bytes=model_bytes, min_burst=plan.get("journal_min_burst") or 0))
    errors.extend(check_shm_free(plan.get("shm"), ranks_on_host(plan.get("options")),
                                 float(plan.get("shm_floor_gib") or 0) * GIB))
    return {"errors": errors, "warnings": warnings}
