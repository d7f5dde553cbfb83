# -*- coding: utf-8 -*-
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Observe an SGLang server from outside (stdlib only, no Ansible import).

Used by the ``sglang_health`` module and by ``benchmarks/crash_to_verdict.py``; turns
``systemctl show`` output, ``/proc`` and ``GET /health`` into the observation dict that
``sglang_log.classify`` reads.
"""

from __future__ import absolute_import, division, print_function

import json
import os
import time

try:  # Python 3
    from urllib.error import HTTPError, URLError
    from urllib.request import Request, urlopen
except ImportError:  # pragma: no cover - Python 2
    from urllib2 import HTTPError, Request, URLError, urlopen

__metaclass__ = type

SHOW_PROPERTIES = ("ActiveState", "SubState", "Result", "MainPID", "NRestarts", "ExecMainStatus", "ExecMainCode",
                   "InvocationID", "ExecMainStartTimestamp")
# setproctitle titles: sglang::scheduler_TP<n> (also _DP<d>_TP<n>, _PP..); 0.5.23 drops the suffix at tp 1
SCHEDULER_TITLE = "sglang::scheduler"


def parse_show(text):
    """``systemctl show -p ...`` output (KEY=VALUE lines) -> observation fields."""
    raw = {}
    for line in (text or "").splitlines():
        if "=" in line:
            key, value = line.split("=", 1)
            raw[key.strip()] = value.strip()

    def num(key):
        try:
            return int(raw.get(key, ""))
        except ValueError:
            return None

    return {
        "active_state": raw.get("ActiveState"), "sub_state": raw.get("SubState"), "result": raw.get("Result") or None,
        "main_pid": num("MainPID") or 0, "n_restarts": num("NRestarts") or 0,
        "exec_main_status": num("ExecMainStatus"), "exec_main_code": num("ExecMainCode"),
        "invocation_id": raw.get("InvocationID") or None, "start_timestamp": raw.get("ExecMainStartTimestamp") or None,
    }


def is_scheduler_title(cmdline):
    """True for ``sglang::scheduler`` (tp 1) and ``sglang::scheduler_<suffix>`` (``_TP3``, ``_DP0_TP3``).
    ``cmdline`` is the raw /proc/PID/cmdline text (NUL-separated, maybe space-padded)."""
    title = cmdline.split("\0", 1)[0].strip()
    return title == SCHEDULER_TITLE or title.startswith(SCHEDULER_TITLE + "_")


def _read(path, mode="r"):
    try:
        with open(path, mode) as handle:
            return handle.read()
    except (IOError, OSError):
        return None


def process_tree(main_pid, proc_root="/proc"):
    """Descendants of ``main_pid`` (not itself), from ``<proc_root>/*/stat`` parent links. List of pids."""
    if not main_pid:
        return []
    children = {}
    try:
        entries = os.listdir(proc_root)
    except OSError:
        return []
    for entry in entries:
        if not entry.isdigit():
            continue
        stat = _read(os.path.join(proc_root, entry, "stat"))
        if not stat:
            continue
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses
        try:
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
        except (IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    out, stack, seen = [], list(children.get(main_pid, [])), set()
    while stack:
        pid = stack.pop()
        if pid in seen:
            continue
        seen.add(pid)
        out.append(pid)
        stack.extend(children.get(pid, []))
    return out


def count_schedulers(main_pid, proc_root="/proc"):
    """Scheduler processes under ``main_pid`` (see ``is_scheduler_title``). Returns int."""
    count = 0
    for pid in process_tree(main_pid, proc_root):
        raw = _read(os.path.join(proc_root, str(pid), "cmdline"), "rb")
        if raw and is_scheduler_title(raw.decode("utf-8", "replace")):
            count += 1
    return count


def tree_activity(main_pid, proc_root="/proc"):
    """A counter that grows while the process tree does I/O or touches memory; None when unreadable.

    Sum over MainPID and its descendants of ``rchar`` and ``read_bytes`` (``/proc/PID/io``, root only
    for other users' processes) and minor + major page faults (``/proc/PID/stat`` fields 10 and 12:
    safetensors reads shards through mmap, which only shows up as faults). Weight loading moves this
    every second; a hung load (storage stall, deadlock) leaves it flat. It stands in for log progress
    that journald cannot show: tqdm's ``\\r`` redraws reach the journal only when the bar ends with
    ``\\n`` (journald splits stream output at newlines)."""
    if not main_pid:
        return None
    total, seen = 0, False
    for pid in [main_pid] + process_tree(main_pid, proc_root):
        base = os.path.join(proc_root, str(pid))
        io = _read(os.path.join(base, "io"))
        if io:
            for line in io.splitlines():
                key, _, value = line.partition(":")
                if key in ("rchar", "read_bytes"):
                    try:
                        total += int(value)
                        seen = True
                    except ValueError:
                        pass
        stat = _read(os.path.join(base, "stat"))
        if stat:
            try:
                fields = stat.rsplit(")", 1)[1].split()
                total += int(fields[7]) + int(fields[9])  # minflt, majflt (stat fields 10 and 12)
                seen = True
            except (IndexError, ValueError):
                pass
    return total if seen else None


class NoAnswer(Exception):
    """Nothing answered (connection refused, timeout, name not resolved); ``reason`` says which."""

    def __init__(self, url, reason):
        Exception.__init__(self, "%s: no answer (%s)" % (url, reason))
        self.url, self.reason = url, reason


def http_request(url, body=None, timeout=10.0, headers=None, method=None):
    """GET (``body`` None) or POST ``body`` as JSON; returns ``(status int, raw bytes)``.

    An HTTP error status is an answer and is returned; NoAnswer is raised when nothing answered. Shared by
    sglang_health (``/health``), sglang_smoke (chat checks) and the router / drain modules.
    """
    headers = dict(headers or {})
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers.setdefault("Content-Type", "application/json")
    req = Request(url, data=data, headers=headers)
    if method:
        req.get_method = lambda: method
    try:
        response = urlopen(req, timeout=timeout)
        return response.getcode(), response.read()
    except HTTPError as exc:
        return exc.code, exc.read()
    except (URLError, OSError, ValueError) as exc:
        raise NoAnswer(url, getattr(exc, "reason", exc))


def probe_health(url, timeout):
    """GET ``url``/health. Returns (code int|None, latency_s float, error str|None)."""
    started = time.time()
    try:
        code, _raw = http_request(url.rstrip("/") + "/health", timeout=timeout)
        return code, time.time() - started, None
    except NoAnswer as exc:
        return None, time.time() - started, str(exc.reason)


def journal_command(journalctl, unit, invocation_id, start_timestamp):
    """argv reading one invocation's journal (``-o cat``: the messages as SGLang wrote them)."""
    cmd = [journalctl, "-u", unit, "-o", "cat", "--no-pager"]
    if invocation_id:
        cmd.append("_SYSTEMD_INVOCATION_ID=%s" % invocation_id)
    elif start_timestamp:
        parts = start_timestamp.split()
        # "Mon 2026-05-18 10:00:00 UTC" -> "2026-05-18 10:00:00"
        cmd += ["--since", " ".join(p for p in parts if p[:1].isdigit())]
    return cmd


def exit_fields(returncode):
    """Observation fields for a plain subprocess (no systemd) from ``Popen.returncode``:
    what systemd would show (ExecMainCode 1 = exited, 2 = killed; Result)."""
    if returncode is None:
        return {"active_state": "active", "sub_state": "running", "result": "success",
                "exec_main_code": 0, "exec_main_status": 0}
    if returncode < 0:
        return {"active_state": "failed", "sub_state": "failed", "result": "signal", "main_pid": 0,
                "exec_main_code": 2, "exec_main_status": -returncode}
    return {"active_state": "failed" if returncode else "inactive", "sub_state": "failed" if returncode else "dead",
            "result": "exit-code" if returncode else "success", "main_pid": 0,
            "exec_main_code": 1, "exec_main_status": returncode}
