# -*- coding: utf-8 -*-
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Is a unit's journal complete? journald's own "Suppressed N messages from <unit>" notices (stdlib only).

What journald does (src/journal/journald-server.c, dispatch_message; verified on systemd 252 in the sandbox node):

* Past the unit's rate limit (LogRateLimitIntervalSec= / LogRateLimitBurst=, scaled up by the free journal space)
  journald drops the unit's lines. It says so only when the **next** line of that unit arrives after the interval:
  it then writes ``Suppressed N messages from <unit>`` itself (``_PID`` journald's, ``_SYSTEMD_UNIT`` =
  systemd-journald.service, ``MESSAGE_ID=a596d6fe7bfa4994828e72309e95d61e``, ``N_DROPPED=N``), with ``OBJECT_*``
  fields of the process whose line triggered it, ``OBJECT_SYSTEMD_INVOCATION_ID`` included.
* ``journalctl -u UNIT`` shows the notice (its unit match includes ``_UID=0 + OBJECT_SYSTEMD_UNIT=UNIT``), but the
  per-run query ``journalctl -u UNIT _SYSTEMD_INVOCATION_ID=<id>`` (sglang_observe.journal_command) does **not**:
  the notice's ``_SYSTEMD_INVOCATION_ID`` is journald's own. ``... _SYSTEMD_INVOCATION_ID=<id> +
  OBJECT_SYSTEMD_INVOCATION_ID=<id>`` returns both.
* When 8 ranks dump and the server dies, no later line comes from that run: the notice is written with the first
  line of the **restarted** run and carries that run's invocation id (measured: a flood of 1000 lines, burst 20,
  exit; the notice appeared 7 s later with the next invocation's id). Until then only the line counts show it: a
  run whose lines reach the unit's burst within one interval may have lost the rest.

So the completeness check asks for the notices of every invocation the health wait saw, and, when there is none,
replays journald's window over the last run's line timestamps.
"""

from __future__ import absolute_import, division, print_function

import glob
import json
import os
import time

from ansible_collections.blackwell.sglang.plugins.module_utils.host.host_journald import journald_settings, parse_timespan

__metaclass__ = type

# sd-messages.h SD_MESSAGE_JOURNAL_DROPPED
DROPPED_MESSAGE_ID = "a596d6fe7bfa4994828e72309e95d61e"
# journald-rate-limit.c priority_map: one pool per group of syslog priorities
PRIORITY_POOL = {0: 0, 1: 0, 2: 0, 3: 1, 4: 2, 5: 3, 6: 3, 7: 4}
DEFAULT_INTERVAL_S, DEFAULT_BURST = 30.0, 10000


def suppressed_command(journalctl, unit, invocation_ids):
    """argv listing journald's drop notices about ``unit`` triggered by any of ``invocation_ids`` (JSON lines)."""
    cmd = [journalctl, "-u", unit, "-o", "json", "--no-pager", "MESSAGE_ID=%s" % DROPPED_MESSAGE_ID]
    return cmd + ["OBJECT_SYSTEMD_INVOCATION_ID=%s" % i for i in invocation_ids]


def run_lines_command(journalctl, unit, invocation_id, last=None):
    """argv listing the timestamps and priorities of one run's own lines (JSON lines); only its ``last`` lines when
    given (a run that served for a week has hundreds of MB of them; a crash dump is at its end)."""
    return [journalctl, "-u", unit, "-o", "json", "--no-pager", "--output-fields=PRIORITY",
            "_SYSTEMD_INVOCATION_ID=%s" % invocation_id] + (["-n", str(int(last))] if last else [])


def _json_lines(text):
    for line in (text or "").splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict):
            yield entry


def _iso(usec):
    try:
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(int(usec) / 1e6))
    except (TypeError, ValueError):
        return None


def parse_notices(text):
    """journalctl JSON lines -> [{"dropped", "invocation_id", "at", "message"}], oldest first."""
    out = []
    for entry in _json_lines(text):
        if entry.get("MESSAGE_ID") != DROPPED_MESSAGE_ID:
            continue
        try:
            dropped = int(entry.get("N_DROPPED"))
        except (TypeError, ValueError):
            continue
        out.append({"dropped": dropped, "invocation_id": entry.get("OBJECT_SYSTEMD_INVOCATION_ID"),
                    "at": _iso(entry.get("__REALTIME_TIMESTAMP")), "message": entry.get("MESSAGE")})
    return out


def busiest_window(entries, interval_s):
    """Replay journald's per-pool window (journald-rate-limit.c: a window starts with the first line after the last
    one expired and lasts the interval) over stored lines ``[(usec, priority)]``; returns (lines, start usec) of
    the fullest window."""
    pools, best = {}, (0, None)
    for usec, priority in sorted(entries):
        pool = pools.setdefault(PRIORITY_POOL.get(priority, 3), {"begin": None, "num": 0})
        if pool["begin"] is None or usec > pool["begin"] + interval_s * 1e6:
            pool["begin"], pool["num"] = usec, 0
        pool["num"] += 1
        if pool["num"] > best[0]:
            best = (pool["num"], pool["begin"])
    return best


def parse_rate_limit(show_text, journald_texts=()):
    """(interval seconds, burst) journald applies to the unit: ``systemctl show -p LogRateLimitIntervalUSec -p
    LogRateLimitBurst``, where 0 falls back to journald.conf's RateLimitIntervalSec= / RateLimitBurst= (or 30 s /
    10000)."""
    raw = dict(line.split("=", 1) for line in (show_text or "").splitlines() if "=" in line)
    try:
        interval = parse_timespan(raw.get("LogRateLimitIntervalUSec", "0") or "0")
        burst = int(raw.get("LogRateLimitBurst", "0") or 0)
    except ValueError:
        interval, burst = 0, 0
    if not interval or not burst:
        settings = journald_settings([{"path": p, "text": t} for p, t in journald_texts])
        value = settings.get("RateLimitIntervalSec", settings.get("RateLimitInterval"))
        interval = parse_timespan(value) if value else DEFAULT_INTERVAL_S
        burst = int(settings.get("RateLimitBurst") or DEFAULT_BURST)
    return interval, burst


def _journald_texts():
    paths = ["/etc/systemd/journald.conf"]
    for base in ("/etc/systemd", "/run/systemd", "/usr/lib/systemd"):
        paths += sorted(glob.glob(os.path.join(base, "journald.conf.d", "*.conf")))
    out = []
    for path in paths:
        try:
            with open(path) as handle:
                out.append((path, handle.read()))
        except (IOError, OSError):
            continue
    return out


def journal_completeness(run_command, journalctl, systemctl, unit, invocation_ids, journald_texts=None):
    """What the health report says about the journal of ``unit`` over the runs it watched.

    ``run_command``: AnsibleModule.run_command (argv -> rc, out, err); ``invocation_ids``: every InvocationID the
    wait observed, oldest first. Returns {"complete": True | False | None (maybe, or cannot tell), "suppressed":
    lines journald reported dropping, "notices": [...], "reason": text, "warning": the reason when the health report
    must say it (incomplete or maybe incomplete), else None}."""
    ids = []
    for inv in invocation_ids or []:
        if inv and inv not in ids:
            ids.append(inv)
    result = {"complete": True, "suppressed": 0, "notices": [], "reason": "journald reported no dropped lines",
              "warning": None}
    if not journalctl or not ids:
        result.update(complete=None, reason="journal completeness unknown (no journalctl or no invocation seen)")
        return result
    rc, out, _err = run_command(suppressed_command(journalctl, unit, ids))
    notices = parse_notices(out) if rc == 0 else []
    if notices:
        total = sum(n["dropped"] for n in notices)
        result.update(complete=False, suppressed=total, notices=notices, reason=(
            "journal incomplete: journald suppressed %d line(s) of %s (%s); the first traceback may be among them. "
            "Raise the unit's LogRateLimitBurst= (sglang_service_log_rate_limit_burst)"
            % (total, unit, "; ".join("%d at %s" % (n["dropped"], n["at"]) for n in notices))))
        result["warning"] = result["reason"]
        return result
    show = ""
    if systemctl:
        rc, show, _err = run_command([systemctl, "show", unit, "-p", "LogRateLimitIntervalUSec",
                                      "-p", "LogRateLimitBurst"])
        show = show if rc == 0 else ""
    interval, burst = parse_rate_limit(show, _journald_texts() if journald_texts is None else journald_texts)
    rc, out, _err = run_command(run_lines_command(journalctl, unit, ids[-1], last=max(4 * burst, 50000)))
    entries = []
    for entry in _json_lines(out if rc == 0 else ""):
        try:
            entries.append((int(entry["__MONOTONIC_TIMESTAMP"]), int(entry.get("PRIORITY", 6))))
        except (KeyError, TypeError, ValueError):
            continue
    lines, begin = busiest_window(entries, interval)
    if burst and lines >= burst:
        result.update(complete=None, reason=(
            "journal may be incomplete: the last run logged %d lines within %g s, the unit's LogRateLimitBurst=%d; "
            "journald drops what exceeds the burst (scaled by free journal space) and reports it only when the unit "
            "logs again. Raise sglang_service_log_rate_limit_burst" % (lines, interval, burst)))
        result["warning"] = result["reason"]
    return result
