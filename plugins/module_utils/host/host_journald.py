# -*- coding: utf-8 -*-
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""journald checks (stdlib only): whether the journal keeps the traceback lines the health
verdict needs. Reads ``journald.conf`` and its drop-ins, where the journal is stored, the space journald counts as
available and the rate-limit burst it scales from that, and parses systemd time spans and journald.conf sizes.

Sources (read them before changing a rule): src/journal/journald-rate-limit.c (``burst_modulate``: burst x
(log2(available) - 16) / 4 once more than 1 MiB is available, per priority pool, per unit), journald-server.c
``cache_space_refresh`` (available = clamp(used + free - keep_free, min_use, max_use) - used) and src/core/unit.c
``unit_export_log_rate_limit_burst`` (a per-unit 0 is not exported: journald then applies journald.conf's
RateLimitBurst). Measured on systemd 252: LogRateLimitBurst=20 let 45 lines through with 46 MB available (x2.25),
LogRateLimitBurst=0 let 22500 of 40000 through (journald's default 10000 x 2.25), and the default SystemKeepFree was
5 % of the filesystem.
"""

from __future__ import absolute_import, division, print_function

import re

from ansible_collections.blackwell.sglang.plugins.module_utils.host.host_systemd import (
    UNIT_KEYS, order_dropins, parse_ini_settings, parse_rlimit,
)
from ansible_collections.blackwell.sglang.plugins.module_utils.host.host_values import GB, GIB, MIB, human_bytes

__metaclass__ = type

PAGE = 4096
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
    zero = [name for name, value in (("LogRateLimitIntervalSec", interval_s), ("LogRateLimitBurst", burst))
            if not value]
    if zero:
        eff_interval = g_interval_s
        eff = burst_modulate(g_burst, avail_after) if g_interval_s and g_burst else None
        errors.append(
            "%s sets %s to 0 (from %s), which does not turn journald's rate limit off: a per-unit 0 means journald's "
            "own RateLimitIntervalSec=%gs / RateLimitBurst=%d (journald.conf)%s. Fix: set both to numbers (defaults "
            "30 s / 100000)"
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
