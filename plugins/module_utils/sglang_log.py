# -*- coding: utf-8 -*-
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Read SGLang's startup log and decide where the server is (stdlib only).

Wording checked against sgl-project/sglang (0.5.8 .. 0.5.23) and the project's 0.5.23 simulator
(tests/sandbox/sglang_sim, recordings in tests/unit/fixtures/sglang_logs/sim_*.log):

* ``srt/model_loader/weight_utils.py``: tqdm bars with ``bar_format
  "{desc}: {percentage:3.0f}% Completed | {n_fmt}/{total_fmt} [{elapsed}<{remaining}, {rate_fmt}]"``;
  desc ``Multi-thread loading shards`` (0.5.12+, refreshed with ``\\r``) or
  ``Loading safetensors checkpoint shards`` (0.5.8/0.5.9, one line per update).
* ``srt/model_executor/model_runner.py``: ``Init torch distributed begin.``, ``Load weight begin.``,
  ``Load weight end.``, ``KV Cache is allocated.``, ``Memory pool end.``, ``Capture target decode CUDA
  graph begin.`` / ``... end.`` (0.5.23; older ``Capture cuda graph begin.``), the ``Capturing batches``
  bar, and on failure ``Exception: Capture cuda graph failed: ...``.
* ``srt/managers/scheduler.py``: ``Scheduler hit an exception: Traceback ...``.
* ``srt/entrypoints/engine.py``: ``Received sigquit from a child process. It usually means the child
  failed.`` and ``Rank N scheduler died during initialization (exit code: C)``; after ready the
  subprocess watchdog logs ``Subprocess scheduler_N (pid=P) crashed with exit code C`` and
  ``SIGQUIT received. signum=None, frame=None. It usually means one child failed.``
* ``srt/entrypoints/http_server.py``: uvicorn ``Uvicorn running on``, then after warmup
  ``The server is fired up and ready to roll!``.

Under systemd the log is the journal: journald splits stream output at ``\\n`` only, so tqdm's ``\\r``
redraws appear when a bar ends (or the process exits), not while it runs; see ``sglang_observe.tree_activity``.
"""

from __future__ import absolute_import, division, print_function

import re

__metaclass__ = type

PROGRESS_RE = re.compile(
    r"(?P<desc>Multi-thread loading shards|Loading safetensors checkpoint shards):\s*(?P<pct>\d+)% Completed \| "
    r"(?P<i>\d+)/(?P<n>\d+)")
PROGRESS_FORMATS = {"Multi-thread loading shards": "multithread", "Loading safetensors checkpoint shards": "legacy"}

# (phase, pattern); order = startup order. The phase is the latest line that matches any.
PHASES = (
    ("starting", re.compile(r"server_args=ServerArgs\(")),
    ("init_distributed", re.compile(r"Init torch distributed begin")),
    ("loading_weights", re.compile(r"Load weight begin|Using model weights format|" + PROGRESS_RE.pattern)),
    ("weights_loaded", re.compile(r"Load weight end")),
    ("kv_cache", re.compile(r"KV Cache is allocated|Memory pool end")),
    ("cuda_graph_capture", re.compile(r"Capture (?:target \w+ )?cuda graph begin|Capturing batches|"
                                      r"Capture cuda graph failed", re.IGNORECASE)),
    ("cuda_graph_captured", re.compile(r"Capture (?:target \w+ )?cuda graph end", re.IGNORECASE)),
    ("http_server", re.compile(r"Uvicorn running on|Application startup complete")),
    ("ready", re.compile(r"The server is fired up and ready to roll!")),
)
PHASE_ORDER = [name for name, _ in PHASES]

READY_LINE = "The server is fired up and ready to roll!"
TRACEBACK_START = "Traceback (most recent call last):"
CHAIN_LINES = ("During handling of the above exception, another exception occurred:",
               "The above exception was the direct cause of the following exception:")
SIGQUIT_LINE = "Received sigquit from a child process"
SIGQUIT_RE = re.compile(r"Received sigquit from a child process|SIGQUIT received\. signum=")
DIED_RE = re.compile(r"Rank (?P<rank>\d+) scheduler died during initialization \(exit code: (?P<code>-?\d+)\)")
# 0.5.23 after ready: the subprocess watchdog
SUBPROCESS_CRASH_RE = re.compile(r"Subprocess (?P<name>\w+?)(?:_(?P<rank>\d+))? \(pid=\d+\) crashed with exit code "
                                 r"(?P<code>-?\d+)")
CONFIG_ERROR_RE = re.compile(r"config\.json|config file|does not appear to have a file named config")
# Fatal lines that come without a Python traceback (signals, OOM killer, C++ aborts).
FATAL_RE = re.compile(r"Fatal Python error|Segmentation fault|CUDA error: out of memory|torch\.OutOfMemoryError|"
                      r"OutOfMemoryError|Killed process|NCCL error|terminate called after")
MIDLINE_PREFIX_RE = re.compile(r"(?<=.)(?=\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d[.,\d]*(?: TP\d+| DP\d+| PP\d+)*\] )")
LOG_PREFIX_RE = re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:[^\]]*)\]\s*")


def split_lines(text):
    """Split on ``\\n``, ``\\r\\n`` and bare ``\\r`` (tqdm redraws), and before a log prefix that starts
    mid-line (a tqdm bar without newline followed by another rank's ``[2026-05-18 10:00:00 TP1] ...``)."""
    out = []
    for line in re.split(r"\r\n|\r|\n", text or ""):
        out.extend(MIDLINE_PREFIX_RE.split(line))
    return out


def strip_prefix(line):
    """Remove SGLang's ``[2026-05-18 10:00:00 TP0] `` prefix."""
    return LOG_PREFIX_RE.sub("", line, count=1)


def last_progress(lines):
    """Last loading progress in ``lines``: dict ``i``, ``n``, ``pct`` (ints), ``format``
    (``multithread``|``legacy``), ``line`` (str) -- or None. A line may hold several redraws;
    the last one wins."""
    found = None
    for line in lines:
        for match in PROGRESS_RE.finditer(line):
            found = match
    if found is None:
        return None
    return {"i": int(found.group("i")), "n": int(found.group("n")), "pct": int(found.group("pct")),
            "format": PROGRESS_FORMATS[found.group("desc")], "line": found.group(0)}


RANK_RE = re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d[^\]]*? TP(?P<rank>\d+)\]")
# phases the parent (HTTP server) reaches only after every scheduler is ready
PARENT_PHASES = ("http_server", "ready")


def _line_phase(line):
    found = None
    for name, pattern in PHASES:
        if pattern.search(line):
            found = name  # on one line, the later phase wins
    return found


def phases_by_rank(lines):
    """(dict rank -> latest scheduler phase, latest phase of any line). Lines prefixed ``[... TPn]``
    belong to rank n; unprefixed scheduler lines (rank 0's tqdm bars) to rank 0 when ranks are
    prefixed (tp > 1), else to rank None (tp 1 has no prefix)."""
    prefixed = any(RANK_RE.match(line) for line in lines)
    ranks, latest = {}, None
    for line in lines:
        phase = _line_phase(line)
        if phase is None:
            continue
        latest = phase
        if phase in PARENT_PHASES or phase == "starting":
            continue
        match = RANK_RE.match(line)
        rank = int(match.group("rank")) if match else (0 if prefixed else None)
        ranks[rank] = phase
    return ranks, latest


def current_phase(lines):
    """Startup phase (one of ``PHASE_ORDER``) or None: the parent's HTTP phases once reached, else the
    least advanced scheduler rank's latest phase (every rank must finish before the port opens, so a
    rank stuck loading keeps the server loading while the others finished capture)."""
    ranks, latest = phases_by_rank(lines)
    if latest in PARENT_PHASES or not ranks:
        return latest
    return min(ranks.values(), key=PHASE_ORDER.index)


def first_traceback(lines):
    """The first Python traceback in ``lines`` (str, chained parts included) or None.

    Later tracebacks are echoes from other ranks or the parent; the ``Received sigquit``
    line is never part of it (field case R3)."""
    start = None
    for pos, line in enumerate(lines):
        if TRACEBACK_START in line:
            start = pos
            break
    if start is None:
        return None
    out = [TRACEBACK_START]
    pos = start + 1
    while pos < len(lines):
        line = lines[pos]
        if SIGQUIT_RE.search(line):
            break
        if line.startswith((" ", "\t")) or line.strip() in ("^^^^^^^^^^", ""):
            if line.strip():
                out.append(line.rstrip())
            pos += 1
            continue
        # first unindented line: the exception itself
        out.append(strip_prefix(line).rstrip())
        pos += 1
        # continuation lines of a multi-line exception message, then maybe a chained traceback
        while pos < len(lines) and lines[pos].strip() == "":
            pos += 1
        if pos < len(lines) and lines[pos].strip() in CHAIN_LINES:
            out.extend(["", lines[pos].strip(), ""])
            pos += 1
            while pos < len(lines) and lines[pos].strip() == "":
                pos += 1
            if pos < len(lines) and TRACEBACK_START in lines[pos]:
                out.append(TRACEBACK_START)
                pos += 1
                continue
        break
    return "\n".join(out)


def exception_line(traceback_text):
    """Last line of a traceback (``ErrType: message``) or None."""
    if not traceback_text:
        return None
    lines = [l for l in traceback_text.splitlines() if l.strip()]
    return lines[-1] if lines else None


def crash_phase(lines, failure_at, error, died=None):
    """Phase the server was in when it failed: the latest phase named before line ``failure_at``;
    ``cuda_graph_capture`` when the error says so; ``config`` when the parent failed on config.json
    before any scheduler phase (a staging error, field case R3)."""
    if failure_at is None:
        return None
    if error and "Capture cuda graph failed" in error:
        return "cuda_graph_capture"
    before = lines[:failure_at]
    match = RANK_RE.match(lines[failure_at]) or RANK_RE.search(lines[failure_at])
    ranks, _ = phases_by_rank(before)
    if died is not None and ranks and current_phase(before) not in PARENT_PHASES:
        phase = ranks.get(died["rank"], "starting")  # a rank that never logged died as it started
    elif match and int(match.group("rank")) in ranks:  # the rank that failed
        phase = ranks[int(match.group("rank"))]
    else:
        phase = current_phase(before)
    if phase in (None, "starting") and error and CONFIG_ERROR_RE.search(error):
        return "config"
    return phase or "starting"


def parse_log(text):
    """Summarise a startup log.

    :returns: dict ``phase`` (str|None, see ``PHASE_ORDER``), ``progress`` (see
        ``last_progress``), ``ready`` (bool), ``traceback`` (str|None), ``error`` (the
        traceback's last line, the ``scheduler died`` line, or another fatal line; str|None),
        ``scheduler_died`` (dict rank, exit_code, line | None; also the watchdog's ``Subprocess
        ... crashed`` after ready), ``sigquit`` (bool), ``crash_phase`` (phase at the first
        failure line, ``config`` for a bad config.json; None without failure), ``size`` (int,
        characters -- grows while the log advances).
    """
    lines = split_lines(text)
    tb = first_traceback(lines)
    died = None
    fatal = None
    sigquit = False
    failure_at = None
    for pos, line in enumerate(lines):
        hit = False
        if died is None:
            match = DIED_RE.search(line)
            if match:
                died = {"rank": int(match.group("rank")), "exit_code": int(match.group("code")),
                        "line": strip_prefix(line).strip()}
                hit = True
            else:
                match = SUBPROCESS_CRASH_RE.search(line)
                if match:
                    died = {"rank": int(match.group("rank") or 0), "exit_code": int(match.group("code")),
                            "line": strip_prefix(line).strip()}
                    hit = True
        if SIGQUIT_RE.search(line):
            sigquit = hit = True
        if fatal is None and FATAL_RE.search(line):
            fatal = strip_prefix(line).strip()
            hit = True
        if TRACEBACK_START in line:
            hit = True
        if hit and failure_at is None:
            failure_at = pos
    error = exception_line(tb) or (died and died["line"]) or fatal
    return {
        "phase": current_phase(lines),
        "progress": last_progress(lines),
        "ready": any(READY_LINE in line for line in lines),
        "traceback": tb,
        "error": error,
        "scheduler_died": died,
        "sigquit": sigquit,
        "crash_phase": crash_phase(lines, failure_at, error, died),
        "size": len(text or ""),
    }


# ---------------------------------------------------------------- verdicts

TERMINAL_VERDICTS = ("ready", "crashed", "restart_loop", "stalled", "timeout")
PHASE_VERDICT = {
    None: "starting", "starting": "starting", "init_distributed": "starting",
    "loading_weights": "loading",
    "weights_loaded": "capturing", "kv_cache": "capturing", "cuda_graph_capture": "capturing",
    "cuda_graph_captured": "warming", "http_server": "warming", "ready": "warming",
}
SIGNALS = {1: "SIGHUP", 2: "SIGINT", 3: "SIGQUIT", 4: "SIGILL", 6: "SIGABRT", 7: "SIGBUS", 8: "SIGFPE",
           9: "SIGKILL", 11: "SIGSEGV", 13: "SIGPIPE", 15: "SIGTERM"}


def describe_exit(obs):
    """Exit of the unit's main process from systemd's ExecMainCode/ExecMainStatus
    (CLD_EXITED=1: status is the exit code; CLD_KILLED=2/CLD_DUMPED=3: status is the signal).
    Returns dict ``code`` (int|None), ``signal`` (str|None), ``text`` -- or None when unknown."""
    code, status = _int(obs.get("exec_main_code")), _int(obs.get("exec_main_status"))
    if code in (2, 3) and status:
        name = SIGNALS.get(status, "signal %d" % status)
        return {"code": None, "signal": name,
                "text": "killed by %s (%d)%s" % (name, status, ", core dumped" if code == 3 else "")}
    if code == 1 and status is not None:
        return {"code": status, "signal": None, "text": "exit code %d" % status}
    return None


def main_process_gone(obs):
    """True when systemd says the service's main process has ended, whatever ActiveState says.

    ``Result`` other than ``success`` (signal, exit-code, core-dump, timeout, oom-kill, ...) is a failed
    run even while the unit still reads ``deactivating``/``stop-sigterm`` (systemd waits for the cgroup
    to empty; in a container on cgroup v1 it never hears so and waits out TimeoutStopSec) or
    ``activating``/``auto-restart`` (Restart=on-failure). MainPID 0 with ExecMainCode set (1 exited,
    2 killed, 3 dumped) is an ended main process; ``failed``/``inactive`` units have none. MainPID 0
    with nothing recorded yet (before ExecStart forked) is not gone."""
    result = obs.get("result")
    if result and result != "success":
        return True
    if _int(obs.get("main_pid"), 0) > 0:
        return False
    return _int(obs.get("exec_main_code"), 0) in (1, 2, 3) or obs.get("active_state") in ("failed", "inactive")


def _int(value, default=None):
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def _verdict(verdict, obs, log, **extra):
    out = {"verdict": verdict, "terminal": verdict in TERMINAL_VERDICTS, "phase": log.get("phase"),
           "progress": log.get("progress"), "exit_status": None, "traceback": None, "error": log.get("error"),
           "reason": "", "http_code": obs.get("http_code"), "schedulers": obs.get("schedulers")}
    out.update(extra)
    return out


def _logs(history):
    """Every parsed log in the history, oldest first: an observation's ``previous_log`` (the journal of
    the invocation that just ended, re-read when InvocationID changed) comes before its ``log``."""
    for obs in history:
        for key in ("previous_log", "log"):
            if obs.get(key):
                yield obs[key]


def _failure(history):
    """(log, traceback, error, phase) of the first failure (traceback, dead rank, SIGQUIT) seen in any log
    of the history, else Nones. The phase is where it failed (``crash_phase``)."""
    for log in _logs(history):
        if log.get("traceback") or log.get("scheduler_died") or log.get("sigquit"):
            return log, log.get("traceback"), log.get("error"), log.get("crash_phase") or log.get("phase")
    return None, None, None, None


def _ended_run_log(history):
    """The log of the run that ended: the last ``previous_log``, else the last log of an earlier
    invocation, else the current one."""
    last = history[-1]
    if last.get("previous_log"):
        return last["previous_log"]
    for obs in reversed(history):
        if obs.get("invocation_id") != last.get("invocation_id") and obs.get("log"):
            return obs["log"]
    return last.get("log") or {}


def _restarts(history):
    """Automatic restarts seen while watching: NRestarts growth (systemd >= 235 counts only the restarts
    that Restart= made). A new InvocationID with NRestarts unchanged is a deliberate restart (a handler,
    an operator's `systemctl restart`), not a failure, so it does not count."""
    first, last = history[0], history[-1]
    return max(_int(last.get("n_restarts"), 0) - _int(first.get("n_restarts"), 0), 0)


def _last_advance(history, key):
    """``t`` of the last observation where ``key(obs)`` changed (first observation's ``t`` if never)."""
    value = key(history[-1])
    t_change = float(history[0].get("t", 0.0))
    for obs in reversed(history):
        if key(obs) != value:
            break
        t_change = float(obs.get("t", 0.0))
    return t_change


def classify(history, tp_size, stall_timeout=300.0, timeout=1800.0):
    """Decide the server's state from observations, oldest first.

    Each observation is a dict: ``t`` (float s since the wait began), ``active_state``,
    ``sub_state``, ``result`` (systemd Result), ``main_pid`` (int), ``n_restarts`` (int),
    ``exec_main_status``, ``exec_main_code``, ``invocation_id``, ``schedulers`` (int scheduler
    processes under MainPID), ``activity`` (int|None, ``sglang_observe.tree_activity``), ``log``
    (``parse_log`` dict of the current invocation's journal), optionally ``previous_log`` (the
    ended invocation's journal), ``http_code`` (int|None; None = no answer).

    Returns dict ``verdict`` (starting | loading | capturing | warming | ready | crashed |
    restart_loop | stalled | timeout), ``terminal`` (bool), ``phase`` (for a crash: the phase it
    crashed in), ``progress``, ``exit_status``, ``traceback`` (the first one seen), ``error``,
    ``reason`` (str), ``http_code``, ``schedulers``.

    Rules, first match wins:

    1. two or more restarts while watching (NRestarts growth or new InvocationIDs) -> restart_loop;
    2. one restart -> crashed, with the phase, exit and traceback of the run that ended;
    3. main process gone (``main_process_gone``: Result != success, or MainPID 0 with ExecMainCode
       set, or failed/inactive) -> crashed, whatever ActiveState says (deactivating, auto-restart);
    4. a traceback, dead-rank, SIGQUIT or fatal line in the log -> crashed (the parent may still run);
    5. fewer schedulers than tp_size after all were seen -> crashed (a rank died, field case R1);
    6. ``/health`` 200 with tp_size schedulers -> ready;
    7. neither the log nor the tree's I/O activity advanced for ``stall_timeout`` s -> stalled;
    8. ``timeout`` s elapsed -> timeout;
    9. otherwise the phase decides: starting, loading (only with all tp_size schedulers alive),
       capturing, warming (port answers, 503 until warmup ends).
    """
    if not history:
        return _verdict("starting", {}, {}, reason="no observation yet")
    first, last = history[0], history[-1]
    log = dict(last.get("log") or {})
    restarts = _restarts(history)
    fail_log, tb, error, fail_phase = _failure(history)
    if fail_log is None and (restarts or main_process_gone(last)):
        ended = _ended_run_log(history)  # no traceback: a signal, the OOM killer, a fatal line
        fail_log, error = ended, ended.get("error")
        fail_phase = ended.get("crash_phase") or ended.get("phase")
    if fail_log is not None:
        log.update(error=error, phase=fail_phase, progress=fail_log.get("progress") or log.get("progress"))
    phase = log.get("phase")
    restarts_first, restarts_last = _int(first.get("n_restarts"), 0), _int(last.get("n_restarts"), 0)
    tp_size = _int(tp_size, 0)
    schedulers = _int(last.get("schedulers"), 0)
    full = schedulers >= tp_size
    seen_full = tp_size > 0 and any(_int(o.get("schedulers"), 0) >= tp_size for o in history)
    exit_status = describe_exit(last)
    if exit_status is None:  # after a restart the ended run's exit is in an earlier observation
        exit_status = next((describe_exit(o) for o in reversed(history) if main_process_gone(o)
                            and describe_exit(o)), None)
    elapsed = float(last.get("t", 0.0)) - float(first.get("t", 0.0))
    died = (fail_log or {}).get("scheduler_died")
    if died and not exit_status:
        exit_status = {"code": died["exit_code"], "signal": None,
                       "text": "rank %d scheduler exit code %d" % (died["rank"], died["exit_code"])}
    where = (" in phase %s" % phase) if phase else ""
    cause = (": %s" % error) if error else ""

    if restarts >= 2:
        return _verdict("restart_loop", last, log, traceback=tb, exit_status=exit_status,
                        reason="systemd restarted the unit %d times while waiting (NRestarts %d -> %d); first failure"
                        "%s%s" % (restarts, restarts_first, restarts_last, where, cause))
    if restarts == 1:
        return _verdict("crashed", last, log, traceback=tb, exit_status=exit_status,
                        reason="crashed%s%s%s; systemd restarted it (NRestarts %d -> %d, Restart=on-failure) and the "
                        "same flags usually fail the same way" % (
                            where, (", " + exit_status["text"]) if exit_status else "", cause,
                            restarts_first, restarts_last))

    state, sub = last.get("active_state"), last.get("sub_state")
    if main_process_gone(last):
        return _verdict("crashed", last, log, traceback=tb, exit_status=exit_status,
                        reason="main process gone (unit %s/%s, Result=%s%s)%s%s" % (
                            state, sub, last.get("result") or "?",
                            (", " + exit_status["text"]) if exit_status else "", where, cause))

    if tb or died or (fail_log or {}).get("sigquit"):
        return _verdict("crashed", last, log, traceback=tb, exit_status=exit_status,
                        reason="the log shows a failure%s while the unit is still %s/%s: %s" % (
                            where, state, sub, error or "SIGQUIT from a child process"))
    if seen_full and not full:
        return _verdict("crashed", last, log, traceback=tb, exit_status=exit_status,
                        reason="only %d of %d scheduler processes are alive (all %d were seen earlier); a rank died "
                               "while the parent keeps running (field case R1)" % (schedulers, tp_size, tp_size))

    if last.get("http_code") == 200 and full:
        return _verdict("ready", last, log, reason="/health answered 200 with %d/%d schedulers alive"
                        % (schedulers, tp_size))

    now = float(last.get("t", 0.0))
    log_quiet = now - _last_advance(history, lambda o: (o.get("log") or {}).get("size", 0))
    activity_quiet = now - _last_advance(history, lambda o: o.get("activity"))
    quiet = min(log_quiet, activity_quiet) if last.get("activity") is not None else log_quiet
    if quiet >= stall_timeout:
        return _verdict("stalled", last, log,
                        reason="no new log output for %.0f s and no I/O by the process tree for %.0f s (stall_timeout "
                        "%.0f s) in phase %s while the unit is alive with %d/%d schedulers"
                        % (log_quiet, activity_quiet, stall_timeout, phase, schedulers, tp_size))
    if elapsed >= timeout:
        return _verdict("timeout", last, log, reason="not ready after %.0f s (timeout %.0f s); last phase %s"
                        % (elapsed, timeout, phase))

    verdict = PHASE_VERDICT.get(phase, "starting")
    if last.get("http_code") is not None and verdict in ("starting", "loading", "capturing"):
        verdict = "warming"  # the port answers (503 until warmup is done)
    if verdict == "loading" and not full:
        return _verdict("starting", last, log, reason="%d of %d scheduler processes up; loading counts only with "
                        "every rank alive" % (schedulers, tp_size))
    reasons = {
        "starting": "%d of %d scheduler processes up, phase %s" % (schedulers, tp_size, phase),
        "loading": "loading weights with %d/%d schedulers alive; log advanced %.0f s ago, tree I/O %.0f s ago"
                   % (schedulers, tp_size, log_quiet, activity_quiet),
        "capturing": "weights loaded; KV cache / CUDA graph capture (phase %s)" % phase,
        "warming": "HTTP up (answer %s), waiting for warmup" % last.get("http_code"),
    }
    return _verdict(verdict, last, log, reason=reasons[verdict])
