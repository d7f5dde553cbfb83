# -*- coding: utf-8 -*-
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One systemd unit invocation's journal, read incrementally and time-boxed (``JournalReader``), and the kernel's
OOM killer's kills of the unit's processes in the kernel log (``oom_kills``). Used by sglang_observe's
``UnitObserver`` and the ``sglang_health`` module. Stdlib only."""

from __future__ import absolute_import, division, print_function

import json
import re
import subprocess
import threading

from ansible_collections.blackwell.sglang.plugins.module_utils.health.sglang_log import READY_LINE
from ansible_collections.blackwell.sglang.plugins.module_utils.health.sglang_log_text import FOREIGN_TEXT
from ansible_collections.blackwell.sglang.plugins.module_utils.host.bounded import run_bounded

__metaclass__ = type


def journal_since(timestamp):
    """systemd's timestamp text as journalctl's ``--since``: "Mon 2026-05-18 10:00:00 UTC" -> "2026-05-18 10:00:00"
    ("" for none)."""
    return " ".join(part for part in (timestamp or "").split() if part[:1].isdigit())


def journal_command(journalctl, unit, invocation_id, start_timestamp):
    """argv reading one invocation's journal (``-o cat``: the messages as SGLang wrote them)."""
    cmd = [journalctl, "-u", unit, "-o", "cat", "--no-pager"]
    if invocation_id:
        cmd.append("_SYSTEMD_INVOCATION_ID=%s" % invocation_id)
    elif start_timestamp:
        cmd += ["--since", journal_since(start_timestamp)]
    return cmd


# Linux mm/oom_kill.c: dump_oom_summary ("oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,
# mems_allowed=0,oom_memcg=/system.slice/x.service,task_memcg=/system.slice/x.service,task=sglang::schedul,pid=1234,
# uid=998") and __oom_kill_process ("Memory cgroup out of memory: Killed process 1234 (sglang::schedul)
# total-vm:..kB, anon-rss:..kB, file-rss:..kB, shmem-rss:..kB, UID:.. pgtables:..kB oom_score_adj:0"; "Out of memory:"
# when the whole host ran out).
OOM_SUMMARY_RE = re.compile(r"%s(?P<constraint>\w+),.*?(?:oom_memcg=(?P<oom_memcg>[^,]*),)?task_memcg=(?P<task_memcg>"
                            r"[^,]*),task=(?P<task>[^,]*),pid=(?P<pid>\d+)" % FOREIGN_TEXT["oom_kill_summary"][0])


OOM_KILLED_RE = re.compile(r"%s (?P<pid>\d+) \((?P<comm>[^)]*)\) total-vm:(?P<total_vm>\d+)kB, anon-rss:(?P<anon>\d+)kB, "
                           r"file-rss:(?P<file>\d+)kB, shmem-rss:(?P<shmem>\d+)kB" % FOREIGN_TEXT["oom_killer"][0])


def parse_oom_kills(messages, unit, pids=()):
    """The OOM killer's kills of ``unit``'s processes in kernel-log ``messages`` (the killed task's memory cgroup is the
    unit's, as on cgroup v2; or its PID was seen in the unit's cgroup, where the unit has no memory cgroup of its own,
    as on a cgroup v1 host without memory delegation): list of dicts ``pid``, ``task``,
    ``constraint`` (CONSTRAINT_MEMCG: a memory cgroup's limit; CONSTRAINT_NONE: the whole host), ``memcg``,
    ``anon_rss_kib``, ``file_rss_kib``, ``shmem_rss_kib`` (None when the kill line is missing)."""
    kills, sizes = [], {}
    for message in messages:
        match = OOM_SUMMARY_RE.search(message)
        if match and (match.group("task_memcg").rstrip("/").endswith("/" + unit) or int(match.group("pid")) in pids):
            kills.append({"pid": int(match.group("pid")), "task": match.group("task"),
                          "constraint": match.group("constraint"),
                          "memcg": match.group("oom_memcg") or match.group("task_memcg")})
        match = OOM_KILLED_RE.search(message)
        if match:
            sizes[int(match.group("pid"))] = {"anon_rss_kib": int(match.group("anon")),
                                              "file_rss_kib": int(match.group("file")),
                                              "shmem_rss_kib": int(match.group("shmem"))}
    for kill in kills:
        kill.update(sizes.get(kill["pid"], {"anon_rss_kib": None, "file_rss_kib": None, "shmem_rss_kib": None}))
    return kills


def oom_kills(journalctl, matches, since, unit, timeout, pids=()):
    """``parse_oom_kills`` of the kernel log (journal entries matching ``matches``, e.g. ``_TRANSPORT=kernel``) since
    ``since`` (systemd's timestamp text); [] when journalctl is absent or fails."""
    if not journalctl:
        return []
    argv = [journalctl, "-o", "json", "--no-pager"] + list(matches or [])
    stamp = journal_since(since)
    if stamp:
        argv += ["--since", stamp]
    rc, out, dummy = run_bounded(argv, timeout)
    if rc != 0:
        return []
    messages = []
    for raw in out.splitlines():
        try:
            messages.append(_message(json.loads(raw)))
        except ValueError:
            continue
    return parse_oom_kills(messages, unit, set(int(p) for p in pids or ()))


def _message(entry):
    """MESSAGE of a ``journalctl -o json`` entry: a string, or an array of bytes when it holds control characters
    (tqdm's ``\r`` redraws)."""
    value = entry.get("MESSAGE")
    if isinstance(value, list):
        try:
            return bytes(value).decode("utf-8", "replace")
        except (TypeError, ValueError):
            return ""
    return value if isinstance(value, str) else ""


class JournalReader(object):
    """One unit invocation's journal, read incrementally (``journalctl -o json`` and its ``__CURSOR``).

    ``text()`` returns the start-up text (every line up to and with the ready line) plus a bounded tail of what
    came after. The first read of an invocation streams from its start and stops at the ready line; after that only
    new entries are read (``--after-cursor``), and the ones that arrived between the ready line and the first read
    are skipped (a server that has served for a week logs hundreds of MB there). ``size`` counts every character
    read: it grows while the log advances."""

    def __init__(self, journalctl, unit, timeout=10.0, tail_chars=256 * 1024):
        self.journalctl, self.unit, self.timeout, self.tail_chars = journalctl, unit, timeout, tail_chars
        self.invocation = None
        self._reset(None)

    def _reset(self, invocation):
        self.invocation = invocation
        self.cursor = None
        self.startup = []
        self.ready = False
        self.skipped = False  # the first read jumped from the ready line to the newest entry
        self.tail = ""
        self.size = 0

    def _argv(self, invocation, since=None, extra=()):
        argv = [self.journalctl, "-u", self.unit, "-o", "json", "--no-pager"]
        if invocation:
            argv.append("_SYSTEMD_INVOCATION_ID=%s" % invocation)
        elif since:
            argv += ["--since", journal_since(since)]
        return argv + list(extra)

    def _stream(self, argv, stop_at_ready):
        """Read entries until EOF, ``timeout`` seconds, or (``stop_at_ready``) the ready line. Returns (messages, last
        cursor, stopped at ready); journalctl is killed at the timeout, whatever it is doing."""
        found = {"messages": [], "cursor": None, "ready": False}
        try:
            proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        except OSError:
            return [], None, False

        def consume():
            for raw in iter(proc.stdout.readline, b""):
                try:
                    entry = json.loads(raw.decode("utf-8", "replace"))
                except ValueError:
                    continue
                found["cursor"] = entry.get("__CURSOR") or found["cursor"]
                message = _message(entry)
                found["messages"].append(message)
                if stop_at_ready and READY_LINE in message:
                    found["ready"] = True
                    return

        worker = threading.Thread(target=consume)
        worker.daemon = True
        worker.start()
        worker.join(self.timeout)
        proc.kill()
        worker.join(1.0)
        proc.wait()
        return list(found["messages"]), found["cursor"], found["ready"]

    def text(self, invocation, since=None):
        if invocation != self.invocation:
            self._reset(invocation)
        if self.cursor is None:
            messages, cursor, at_ready = self._stream(self._argv(invocation, since), stop_at_ready=True)
            self.startup.extend(messages)
            self.size += sum(len(m) + 1 for m in messages)
            self.cursor = cursor
            self.ready = at_ready
            if at_ready:  # skip what was logged between the ready line and now: continue from the newest entry
                dummy, newest, dummy = self._stream(self._argv(invocation, since, ["-n", "1"]), stop_at_ready=False)
                self.skipped = bool(newest) and newest != cursor
                self.cursor = newest or cursor
        else:
            messages, cursor, dummy = self._stream(self._argv(invocation, since, ["--after-cursor", self.cursor]),
                                                   stop_at_ready=False)
            self.cursor = cursor or self.cursor
            self.size += sum(len(m) + 1 for m in messages)
            if self.ready:
                self.tail = (self.tail + "".join(m + "\n" for m in messages))[-self.tail_chars:]
            else:
                for message in messages:
                    if self.ready:
                        self.tail += message + "\n"
                    else:
                        self.startup.append(message)
                        self.ready = READY_LINE in message
                self.tail = self.tail[-self.tail_chars:]
        return self.current()

    def current(self):
        """What was read so far: the start-up text and the bounded tail (no new read)."""
        return "".join(m + "\n" for m in self.startup) + self.tail

    def skipped_tail(self, count=400):
        """After a skip, the last ``count`` lines that were skipped (an ended run's final words), read once."""
        if not self.skipped:
            return ""
        self.skipped = False
        messages, dummy, dummy = self._stream(self._argv(self.invocation, None, ["-n", str(count)]), stop_at_ready=False)
        self.tail = ("".join(m + "\n" for m in messages) + self.tail)[-self.tail_chars:]
        return self.tail
