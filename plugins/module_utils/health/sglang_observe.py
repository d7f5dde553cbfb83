# -*- coding: utf-8 -*-
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Observe an SGLang server from outside (stdlib only, no Ansible import).

Used by the ``sglang_health`` module and by ``benchmarks/crash_to_verdict.py``; turns
``systemctl show`` output, ``/proc``, the journal, ``nvidia-smi`` and ``GET /health`` (through http_client) into the
observation dict that ``sglang_verdict.classify`` reads (``UnitObserver``).

Every call that can hang on a real host is time-boxed (``run_bounded``, ``bounded``): ``nvidia-smi`` on a GPU
that fell off the bus, ``/proc/<pid>`` of a process in uninterruptible sleep, ``journalctl`` on a huge journal. The
journal is read incrementally by cursor (``JournalReader``), and once the ready line has been read the start-up
text is complete: a week of serving logs is never read again on each poll.
"""

from __future__ import absolute_import, division, print_function

import json
import os
import re
import subprocess
import threading
import time

from ansible_collections.blackwell.sglang.plugins.module_utils.http.http_client import NoAnswer, http_request
from ansible_collections.blackwell.sglang.plugins.module_utils.host.nvidia_smi import (
    NvidiaSmiError, apps_query_args, gpu_query_args, parse_compute_apps, parse_gpus,
)
from ansible_collections.blackwell.sglang.plugins.module_utils.health.sglang_log import READY_LINE
from ansible_collections.blackwell.sglang.plugins.module_utils.health.sglang_log_text import FOREIGN_TEXT
from ansible_collections.blackwell.sglang.plugins.module_utils.host.unit_cgroup import cgroup_pids, show_fields

__metaclass__ = type

SHOW_PROPERTIES = ("ActiveState", "SubState", "Result", "MainPID", "NRestarts", "ExecMainStatus", "ExecMainCode",
                   "InvocationID", "ExecMainStartTimestamp", "ControlGroup")
# setproctitle titles: sglang::scheduler_TP<n> (also _DP<d>_TP<n>, _PP..); 0.5.23 drops the suffix at tp 1
SCHEDULER_TITLE = "sglang::scheduler"


def parse_show(text):
    """``systemctl show -p ...`` output (KEY=VALUE lines) -> observation fields."""
    raw = show_fields(text)

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
        "control_group": raw.get("ControlGroup") or None,
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


def scheduler_pids(pids, proc_root="/proc"):
    """The scheduler processes among ``pids`` (see ``is_scheduler_title``)."""
    return [pid for pid in pids if is_scheduler_title(
        (_read(os.path.join(proc_root, str(pid), "cmdline"), "rb") or b"").decode("utf-8", "replace"))]


def count_schedulers(main_pid, proc_root="/proc"):
    """Scheduler processes under ``main_pid`` (see ``is_scheduler_title``). Returns int."""
    return len(scheduler_pids(process_tree(main_pid, proc_root), proc_root))


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
    return processes_activity([main_pid] + process_tree(main_pid, proc_root), proc_root)


def rank_of_title(cmdline):
    """The rank key of a scheduler's title, as its log prefix writes it: ``sglang::scheduler_DP0_TP3`` -> ``"DP0
    TP3"``, plain ``sglang::scheduler`` (tp 1) -> ``""``."""
    title = cmdline.split("\0", 1)[0].strip()
    return title[len(SCHEDULER_TITLE) + 1:].replace("_", " ")


def schedulers_ranks_and_activity(main_pid, proc_root="/proc"):
    """One walk of the tree: (scheduler processes under ``main_pid``, their rank keys sorted (``rank_of_title``), the
    activity of those ranks, or of the whole tree before there are any). The ranks load the weights and capture the
    graphs; the parent serves HTTP, so every ``/health`` probe of a watcher touches it, and the log wrapper reads
    every line the server writes, a probe's own access line included: neither is the server moving."""
    if not main_pid:
        return 0, [], None
    pids = [main_pid] + process_tree(main_pid, proc_root)
    ranks = scheduler_pids(pids[1:], proc_root)
    keys = sorted(rank_of_title((_read(os.path.join(proc_root, str(pid), "cmdline"), "rb") or b"").decode(
        "utf-8", "replace")) for pid in ranks)
    return len(ranks), keys, processes_activity(ranks or pids, proc_root)


def processes_activity(pids, proc_root="/proc"):
    """``tree_activity``'s counter over ``pids``; None when none could be read."""
    total, seen = 0, False
    for pid in pids:
        base = os.path.join(proc_root, str(pid))
        io = _read(os.path.join(base, "io"))
        if io:
            for line in io.splitlines():
                key, dummy, value = line.partition(":")
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


def probe_health(url, timeout):
    """GET ``url``/health. Returns (code int|None, latency_s float, error str|None)."""
    started = time.time()
    try:
        code, _raw = http_request(url.rstrip("/") + "/health", timeout=timeout)
        return code, time.time() - started, None
    except NoAnswer as exc:
        return None, time.time() - started, str(exc.reason)


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


# ---------------------------------------------------------------- time-boxed calls


def run_bounded(argv, timeout, env=None):
    """Run ``argv``; returns ``(rc, stdout, stderr)``, or ``(None, partial stdout, "timed out after N s")`` when it
    did not finish within ``timeout`` seconds (the process is killed)."""
    try:  # its own process group, so a timeout kills whatever it started too (they would hold the pipe open)
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, preexec_fn=os.setsid)
    except OSError as exc:
        return 127, "", str(exc)
    try:
        out, err = proc.communicate(timeout=timeout)
        return proc.returncode, out.decode("utf-8", "replace"), err.decode("utf-8", "replace")
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, 9)
        except OSError:
            proc.kill()
        out, dummy = proc.communicate()
        return None, out.decode("utf-8", "replace"), "timed out after %g s" % timeout


def bounded(fn, timeout, default=None):
    """``fn()`` in a daemon thread; ``default`` when it does not return within ``timeout`` seconds (the thread is
    abandoned: a /proc read blocked on a process in D state cannot be interrupted)."""
    box = {}

    def target():
        try:
            box["value"] = fn()
        except Exception as exc:  # noqa: BLE001 - reported as the default
            box["error"] = exc

    worker = threading.Thread(target=target)
    worker.daemon = True
    worker.start()
    worker.join(timeout)
    if worker.is_alive() or "value" not in box:
        return default
    return box["value"]


# ---------------------------------------------------------------- GPUs


def gpu_observation(nvidia_smi, pids, timeout):
    """GPU memory and utilization of the GPUs ``pids`` hold: dict ``memory_mib`` (sum of their used memory),
    ``busy_pct`` (highest utilization.gpu of those GPUs), ``processes`` (how many of ``pids`` hold a GPU); None when
    nvidia-smi is absent, fails or times out.

    GPU memory that moves is evidence of life in a phase that logs nothing for minutes (CUDA graph capture);
    utilization alone is not: a hung NCCL all-reduce keeps the GPUs at 100 % with nothing moving."""
    if not nvidia_smi:
        return None
    rc, apps_text, dummy = run_bounded([nvidia_smi, "--query-compute-apps=pid,gpu_uuid,used_memory",
                                        "--format=csv,noheader,nounits"], timeout)
    if rc != 0:
        return None
    rc, gpus_text, dummy = run_bounded([nvidia_smi, "--query-gpu=uuid,utilization.gpu", "--format=csv,noheader,nounits"],
                                       timeout)
    if rc != 0:
        return None
    wanted = set(int(p) for p in pids or [])
    used, uuids, count = 0, set(), 0
    for line in apps_text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 3 or not parts[0].isdigit() or int(parts[0]) not in wanted:
            continue
        count += 1
        uuids.add(parts[1])
        if parts[2].isdigit():
            used += int(parts[2])
    busy = 0
    for line in gpus_text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 2 and parts[0] in uuids and parts[1].isdigit():
            busy = max(busy, int(parts[1]))
    return {"memory_mib": used, "busy_pct": busy, "processes": count}


def foreign_gpu_processes(nvidia_smi, own_pids, timeout):
    """The compute processes on the GPUs that are not ``own_pids`` (the unit's cgroup members): list of dicts ``gpu``
    (index), ``pid``, ``process_name``, ``used_memory_mib``, sorted by GPU; [] when nvidia-smi is absent or fails."""
    if not nvidia_smi:
        return []
    rc, gpus_text, dummy = run_bounded([nvidia_smi] + gpu_query_args(), timeout)
    if rc != 0:
        return []
    rc, apps_text, dummy = run_bounded([nvidia_smi] + apps_query_args(), timeout)
    if rc != 0:
        return []
    try:
        index = dict((g["uuid"], g["index"]) for g in parse_gpus(gpus_text))
        apps = parse_compute_apps(apps_text)
    except NvidiaSmiError:
        return []
    own = set(int(p) for p in own_pids or [])
    out = [{"gpu": index.get(a["gpu_uuid"]), "pid": a["pid"], "process_name": a["process_name"],
            "used_memory_mib": a["used_memory_mib"]} for a in apps if a["pid"] not in own]
    return sorted(out, key=lambda a: (a["gpu"] if a["gpu"] is not None else -1, a["pid"]))


# ---------------------------------------------------------------- the kernel's OOM killer

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


# ---------------------------------------------------------------- journal


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


# ---------------------------------------------------------------- one observation of a unit


class UnitObserver(object):
    """Observations of one systemd unit for ``sglang_verdict.classify``: systemd's view, the schedulers under MainPID
    and their I/O, the GPU memory of the unit's cgroup members, the journal and ``GET /health``; every external call
    time-boxed by ``call_timeout``."""

    def __init__(self, unit, url, probe_timeout, systemctl="systemctl", journalctl="journalctl", nvidia_smi=None,
                 call_timeout=10.0, proc_root="/proc", cgroup_root="/sys/fs/cgroup"):
        self.unit, self.url, self.probe_timeout = unit, url, probe_timeout
        self.systemctl, self.nvidia_smi, self.call_timeout = systemctl, nvidia_smi, call_timeout
        self.proc_root, self.cgroup_root = proc_root, cgroup_root
        self.journal = JournalReader(journalctl, unit, call_timeout)

    def show(self):
        rc, out, err = run_bounded([self.systemctl, "show", self.unit, "-p", ",".join(SHOW_PROPERTIES)],
                                   self.call_timeout)
        if rc != 0:
            raise RuntimeError("systemctl show %s failed (%s): %s" % (
                self.unit, "timed out" if rc is None else "exit %d" % rc, (err or out).strip()))
        return parse_show(out)

    def observe(self, previous=None, parse=None):
        """One observation (dict, see ``sglang_verdict.classify``); ``parse`` is ``sglang_log.parse_log``."""
        obs = self.show()
        main_pid = obs["main_pid"]
        proc = bounded(lambda: schedulers_ranks_and_activity(main_pid, self.proc_root), self.call_timeout,
                       (None, None, None))
        obs["schedulers"], obs["scheduler_ranks"], obs["activity"] = proc
        pids = bounded(lambda: cgroup_pids(obs["control_group"], self.cgroup_root), self.call_timeout, [])
        obs["gpu"] = gpu_observation(self.nvidia_smi, pids, self.call_timeout)
        obs["pids"] = pids
        invocation = obs["invocation_id"]
        ended = None
        if previous and previous.get("invocation_id") and previous["invocation_id"] != invocation:
            ended, self.journal = self.journal, JournalReader(self.journal.journalctl, self.unit, self.call_timeout)
        self.journal.text(invocation, obs["start_timestamp"])
        if obs["result"] not in (None, "success") or obs["active_state"] in ("failed", "inactive"):
            self.journal.skipped_tail()  # it ended after a skip: its last words are in what was skipped
        obs["log"] = parse(self.journal.current())
        obs["log"]["size"] = self.journal.size
        if ended is not None:  # the ended invocation, read once more: its last lines may have come late
            ended.text(previous["invocation_id"])
            ended.skipped_tail()
            obs["previous_log"] = parse(ended.current())
        obs["http_code"], obs["http_latency_s"], obs["http_error"] = probe_health(self.url, self.probe_timeout)
        return obs
