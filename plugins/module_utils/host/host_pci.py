# -*- coding: utf-8 -*-
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""PCIe ACS and IOMMU checks for the GPUs' peer-to-peer traffic (stdlib only).

Parses ``lspci -D -vvv`` (bridges' bus ranges, ACSCap / ACSCtl, NUMA node, driver), turns nvidia-smi bus ids into
sysfs BDFs, and reads the IOMMU mode from the GPUs' ``/sys/bus/pci/devices/<bdf>/iommu_group/type``, else
``/proc/cmdline``.

Source (read it before changing a rule): NVIDIA NCCL user guide, Troubleshooting, "PCI Access Control Services (ACS)"
(https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html): IO virtualization redirects PCI
point-to-point traffic to the root complex, "causing a significant performance reduction or even a hang";
``lspci -vvv | grep ACSCtl`` shows it, ``setpci -s BDF ECAP_ACS+0x6.w=0000`` turns it off until reboot. The RTX PRO
6000 Blackwell has no NVLink: every GPU-to-GPU byte crosses PCIe.
"""

from __future__ import absolute_import, division, print_function

import re

from ansible_collections.blackwell.sglang.plugins.module_utils.host.host_values import gpus_text

__metaclass__ = type

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


def check_acs(gpus, lspci, interconnect="pcie"):
    """(errors, warnings) for ACS redirect on the GPUs' upstream bridges.

    ``gpus``: list of dicts with ``index`` and ``bdf``; ``lspci``: the ``host_facts`` lspci dict (``path``, ``rc``,
    ``output``, ``error``); ``interconnect``: ``pcie`` (no NVLink: an error) or ``nvlink`` (a warning)."""
    errors, warnings = [], []
    if not gpus:
        return errors, warnings
    lspci = lspci or {}
    if not lspci.get("path"):
        warnings.append("cannot check PCIe ACS on the GPUs' bridges: lspci is not installed (apt-get install "
                        "pciutils); with ACS redirect on, NCCL's first all-reduce over PCIe can hang with no error")
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
                by_bridge.setdefault(bridge["bdf"], {"bridge": bridge, "gpus": [], "on": on})["gpus"].append(
                    gpu["index"])
    if unlisted:
        warnings.append("lspci does not list %s (bus ids %s from nvidia-smi): their bridges' ACS was not checked"
                        % (gpus_text(unlisted), ", ".join(g.get("bdf") or "?" for g in gpus if g["index"] in unlisted)))
    if denied:
        warnings.append("lspci could not read the capabilities of bridge(s) %s (<access denied>: run it as root); "
                        "their ACS was not checked" % ", ".join(sorted(denied)))
    if by_bridge:
        parts = []
        for key in sorted(by_bridge):
            item = by_bridge[key]
            on = " ".join("%s+" % f for f, v in item["bridge"]["acs_ctl"].items() if v)
            parts.append("%s %s (above %s; ACSCtl %s)" % (key, device_name(item["bridge"]["desc"]),
                                                          gpus_text(item["gpus"]), on))
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
        return "translated", "%s in IOMMU group type %s" % (gpus_text(translated),
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
