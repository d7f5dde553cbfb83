# -*- coding: utf-8 -*-
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters for what a stock host image lacks and the product installs (roles/host_prerequisites).

``host_prerequisites_plan``
    the distribution map + a host's facts -> the packages this host needs and the problems that stop it.
``dpkg_missing``
    ``dpkg-query -W -f='${Package}\\t${db:Status-Status}\\n'`` output + the wanted packages -> those not installed.
``python_floor_problems``
    an interpreter's ``major.minor`` + the floor -> the problem naming it and the way out, or none.
``rust_toolchain_problems``
    ``rustc --version`` and ``cargo --version`` + the rustc the source build needs -> the problem, or none.
``device_access_problems``
    the GPU device files under /dev (``ansible.builtin.find``) + the service user and its groups -> errors, warnings.
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError


def host_prerequisites_plan(distributions, distribution, major_version, gpu_node=True):
    """The packages this host needs, from the map entry of its distribution; a problem when it has none."""
    if not isinstance(distributions, dict) or not distributions:
        raise AnsibleFilterError("host_prerequisites_plan: the distribution map is empty or not a mapping")
    key = "%s-%s" % (distribution, major_version)
    entry = distributions.get(key)
    if entry is None:
        return {"key": key, "packages": [], "python": None, "problems": [
            "%s %s is not a supported distribution (supported: %s; the pinned SGLang needs Python >= the floor and "
            "each distribution's package names are proven in tests/unit/plugins/filter/test_host_prerequisites.py). Use one of "
            "those, or add an entry to host_prerequisites_distributions with its package names and a test."
            % (distribution, major_version, ", ".join(sorted(distributions)))]}
    packages = entry.get("packages") or {}
    wanted = list(packages.get("all") or [])
    if gpu_node:
        wanted += list(packages.get("gpu_node") or [])
    names = sorted(dict.fromkeys(str(p) for p in wanted))
    return {"key": key, "packages": names, "python": str(entry.get("python") or ""), "problems": []}


def dpkg_missing(dpkg_query_stdout, packages):
    """The ``packages`` dpkg does not list as installed (``${db:Status-Status}`` other than ``installed``: unknown,
    config-files only, half-installed ...), in the given order."""
    status = {}
    for line in str(dpkg_query_stdout or "").splitlines():
        name, _sep, state = line.partition("\t")
        if name.strip():
            status[name.strip().split(":", 1)[0]] = state.strip()
    return [p for p in packages if status.get(p) != "installed"]


def _version_tuple(text):
    try:
        return tuple(int(part) for part in str(text).strip().split(".")[:2])
    except ValueError as exc:
        raise AnsibleFilterError("not a major.minor Python version: %r" % (text,)) from exc


def python_floor_problems(version, floor, interpreter, variable="sglang_build_python", reason=""):
    """[] when ``version`` (``major.minor`` as the interpreter printed it) reaches ``floor``; else one problem that
    names the interpreter, its version, the floor and the way out."""
    if not str(version or "").strip():
        return ["%s (%s) did not say its version: is it a Python interpreter? Set %s to a Python >= %s."
                % (interpreter, variable, variable, floor)]
    if _version_tuple(version) >= _version_tuple(floor):
        return []
    return ["%s is Python %s, older than %s%s: set %s to a Python >= %s on this host (for example a "
            "distribution whose python3 is %s or newer: Debian 12 has 3.11, Ubuntu 24.04 3.12)"
            % (interpreter, str(version).strip(), floor, (" (" + reason + ")") if reason else "", variable, floor,
               floor)]


def rust_toolchain_problems(rustc, cargo, minimum, reason=""):
    """[] when the source build's Rust toolchain is there: ``rustc`` and ``cargo`` are what ``rustc --version`` and
    ``cargo --version`` printed (the command results: ``rc`` and ``stdout``) and rustc reaches ``minimum``; else one
    problem naming what was found, what is needed and the ways out. ``minimum`` "" means the source needs no Rust."""
    if not str(minimum or "").strip():
        return []
    found = []
    version = None
    for name, result in (("rustc", rustc), ("cargo", cargo)):
        result = result or {}
        text = str(result.get("stdout") or "").strip()
        if result.get("rc", 1) != 0 or not text:
            found.append("no %s on PATH" % name)
            continue
        found.append(text.splitlines()[0])
        if name == "rustc":
            parts = text.split()
            version = parts[1].split("-")[0] if len(parts) > 1 else None
    if version and all(part.isdigit() for part in version.split(".")) and \
            tuple(int(x) for x in version.split(".")) >= tuple(int(x) for x in str(minimum).split(".")) and \
            not any(item.startswith("no ") for item in found):
        return []
    return ["sglang_build_method is source%s: it needs rustc >= %s with cargo on PATH, and found %s. Install a newer "
            "toolchain (Debian 12: apt-get install rustc-web cargo-web, from bookworm-security; Ubuntu 24.04: a "
            "versioned rustc-1.9x and cargo-1.9x with their bin directory on PATH; or rustup), and let the build reach "
            "crates.io or vendor its crates; or use sglang_build_method: wheel (prebuilt, no Rust needed)"
            % ((" (" + reason + ")") if reason else "", minimum, "; ".join(found))]


# The device files a CUDA process opens (the driver's /dev/nvidiactl, one /dev/nvidia<N> per GPU, and /dev/nvidia-uvm,
# which CUDA needs for its unified memory): the NVIDIA driver creates them with NVreg_DeviceFileMode (0666 by default)
# and NVreg_DeviceFileGID; a site that sets 0660 and a group must give the service user that group.
_DEVICE_NAMES = ("nvidiactl", "nvidia-uvm")


def _is_gpu_device(name):
    return name in _DEVICE_NAMES or (name.startswith("nvidia") and name[6:].isdigit())


def _can_read_write(mode, owner, group, user, groups):
    if owner == user:
        return mode & 0o600 == 0o600
    if group in groups:
        return mode & 0o060 == 0o060
    return mode & 0o006 == 0o006


def _mode_string(mode):
    out = ""
    for shift in (6, 3, 0):
        bits = (mode >> shift) & 7
        out += ("r" if bits & 4 else "-") + ("w" if bits & 2 else "-") + ("x" if bits & 1 else "-")
    return out


def device_access_problems(found_files, user, groups, user_exists=True):
    """{"errors", "warnings"}: can ``user`` (in ``groups``: its groups now, or those the account will get) open the
    GPU device files ``ansible.builtin.find`` listed under /dev (C(files): path, mode, pw_name, gr_name)?"""
    groups = [str(g) for g in (groups or [])]
    devices = {}
    for entry in found_files or []:
        name = str(entry.get("path", "")).rsplit("/", 1)[-1]
        if _is_gpu_device(name):
            devices[name] = entry
    errors, warnings = [], []
    if not devices:
        warnings.append("no /dev/nvidia* device files: whether %s can open the GPUs is unknown (the driver makes them "
                        "when it loads; nvidia-smi's check above says whether it did)" % user)
        return {"errors": errors, "warnings": warnings}
    if "nvidia-uvm" not in devices:
        warnings.append("no /dev/nvidia-uvm yet: CUDA creates it at its first use through nvidia-modprobe (setuid root; "
                        "the driver's nvidia-modprobe package), or load nvidia-uvm at boot")
    for name in sorted(devices, key=lambda n: (n not in _DEVICE_NAMES, len(n), n)):
        entry = devices[name]
        try:
            mode = int(str(entry.get("mode", "0")), 8)
        except ValueError:
            warnings.append("/dev/%s: unreadable mode %r" % (name, entry.get("mode")))
            continue
        owner, group = str(entry.get("pw_name", "")), str(entry.get("gr_name", ""))
        if not _can_read_write(mode, owner, group, str(user), groups):
            errors.append(
                "%s (the unit's user%s; groups %s) cannot open /dev/%s (%s %s:%s): add %s to "
                "sglang_service_supplementary_groups, or have the driver create its device files for everyone "
                "(NVreg_DeviceFileMode=0666, its default)"
                % (user, "" if user_exists else ", not created yet", ", ".join(groups) or "none", name,
                   _mode_string(mode), owner, group, group))
    return {"errors": errors, "warnings": warnings}


class FilterModule:
    def filters(self):
        return {
            "host_prerequisites_plan": host_prerequisites_plan,
            "dpkg_missing": dpkg_missing,
            "python_floor_problems": python_floor_problems,
            "rust_toolchain_problems": rust_toolchain_problems,
            "device_access_problems": device_access_problems,
        }
