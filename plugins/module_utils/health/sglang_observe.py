# -*- coding: utf-8 -*-
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Observe an SGLang server from outside (stdlib only, no Ansible import).

Used by the ``sglang_health`` module and by ``benchmarks/crash_to_verdict.py``; turns
``systemctl show`` output, ``/proc``, the journal, ``nvidia-smi`` and ``GET /health`` (through http_client) into the
observation dict that ``sglang_verdict.classify`` reads (``UnitObserver``).

Every call that can hang on a real host is time-boxed (``run_bounded``, ``bounded``: host/bounded.py): ``nvidia-smi``
on a GPU that fell off the bus, ``/proc/<pid>`` of a process in uninterruptible sleep, ``journalctl`` on a huge
journal. The journal is read incrementally by cursor (``JournalReader``, sglang_journal.py, with the kernel's OOM
kills), and once the ready line has been read the start-up text is complete: a week of serving logs is never read
again on each poll.
"""

from __future__ import absolute_import, division, print_function

import os
import time

from ansible_collections.blackwell.sglang.plugins.module_utils.http.http_client import NoAnswer, http_request
from ansible_collections.blackwell.sglang.plugins.module_utils.host.nvidia_smi import (
    NvidiaSmiError, apps_query_args, gpu_query_args, parse_compute_apps, parse_gpus,
)
from ansible_collections.blackwell.sglang.plugins.module_utils.host.unit_cgroup import cgroup_pids, show_fields

from ansible_collections.blackwell.sglang.plugins.module_utils.host.bounded import bounded, run_bounded
from ansible_collections.blackwell.sglang.plugins.module_utils.health.sglang_journal import JournalReader

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
