# -*- coding: utf-8 -*-
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""systemd settings of the unit and the ``Limit*=`` rlimits it gets (stdlib only).

Orders the unit's drop-ins and reads their ``[Section]`` keys (systemd.unit(5), systemd.exec(5)), parses ``Limit*=``
values, ``/proc/<pid>/limits`` and ``/proc/<pid>/status`` (PID 1's capabilities and affinity), and checks each limit
the unit needs against what PID 1 grants.

Source (read it before changing a rule): systemd ``setrlimit_closest()`` (src/basic/rlimit-util.c): when setting
``Limit*=`` fails with EPERM (PID 1 without CAP_SYS_RESOURCE) it sets min(requested, its own hard limit) without an
error. Measured in the sandbox node (systemd 252, no CAP_SYS_RESOURCE, hard memlock 8 MiB):
``systemd-run -p LimitMEMLOCK=infinity`` gives the process 8388608/8388608.
"""

from __future__ import absolute_import, division, print_function

import re

from ansible_collections.blackwell.sglang.plugins.module_utils.host.host_values import INFINITY, human_bytes, parse_cpulist

__metaclass__ = type

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


def _le(a, b):
    """a <= b where either may be INFINITY."""
    if b == INFINITY:
        return True
    if a == INFINITY:
        return False
    return int(a) <= int(b)


def _min(a, b):
    return a if _le(a, b) else b


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
