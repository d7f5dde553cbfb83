# -*- coding: utf-8 -*-
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Read SGLang's startup log and decide where the server is (stdlib only).

Wording checked against sgl-project/sglang (0.5.8 .. 0.5.23):

* ``srt/model_loader/weight_utils.py``: tqdm bars with ``bar_format
  "{desc}: {percentage:3.0f}% Completed | {n_fmt}/{total_fmt} [{elapsed}<{remaining}, {rate_fmt}]"``;
  desc ``Multi-thread loading shards`` (0.5.12+, refreshed with ``\\r``) or
  ``Loading safetensors checkpoint shards`` (0.5.8/0.5.9, one line per update).
* ``srt/model_executor/model_runner.py``: ``Init torch distributed begin.``, ``Load weight begin.``,
  ``Load weight end.``, ``KV Cache is allocated.``, ``Memory pool end.``,
  ``Capture cuda graph begin.``, ``Capture cuda graph end.``.
* ``srt/managers/scheduler.py``: ``Scheduler hit an exception: Traceback ...``.
* ``srt/entrypoints/engine.py``: ``Received sigquit from a child process. It usually means the child
  failed.`` and ``Rank N scheduler died during initialization (exit code: C)``.
* ``srt/entrypoints/http_server.py``: uvicorn ``Uvicorn running on``, then after warmup
  ``The server is fired up and ready to roll!``.
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
    ("launching", re.compile(r"server_args=ServerArgs\(")),
    ("init_distributed", re.compile(r"Init torch distributed begin")),
    ("loading_weights", re.compile(r"Load weight begin|" + PROGRESS_RE.pattern)),
    ("weights_loaded", re.compile(r"Load weight end")),
    ("kv_cache", re.compile(r"KV Cache is allocated|Memory pool end")),
    ("capturing_cuda_graph", re.compile(r"Capture cuda graph begin|Capturing batches")),
    ("cuda_graph_captured", re.compile(r"Capture cuda graph end")),
    ("http_server", re.compile(r"Uvicorn running on|Application startup complete")),
    ("ready", re.compile(r"The server is fired up and ready to roll!")),
)
PHASE_ORDER = [name for name, _ in PHASES]

READY_LINE = "The server is fired up and ready to roll!"
TRACEBACK_START = "Traceback (most recent call last):"
CHAIN_LINES = ("During handling of the above exception, another exception occurred:",
               "The above exception was the direct cause of the following exception:")
SIGQUIT_LINE = "Received sigquit from a child process"
DIED_RE = re.compile(r"Rank (?P<rank>\d+) scheduler died during initialization \(exit code: (?P<code>-?\d+)\)")
# Fatal lines that come without a Python traceback (signals, OOM killer, C++ aborts).
FATAL_RE = re.compile(r"Fatal Python error|Segmentation fault|CUDA error: out of memory|torch\.OutOfMemoryError|"
                      r"OutOfMemoryError|Killed process|NCCL error|terminate called after")
LOG_PREFIX_RE = re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:[^\]]*)\]\s*")


def split_lines(text):
    """Split on ``\\n``, ``\\r\\n`` and bare ``\\r`` (tqdm redraws); drop empty pieces' whitespace-only noise."""
    return [line for line in re.split(r"\r\n|\r|\n", text or "")]


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


def current_phase(lines):
    """Latest startup phase named in ``lines`` (one of ``PHASE_ORDER``) or None."""
    phase = None
    for line in lines:
        for name, pattern in PHASES:
            if pattern.search(line):
                phase = name  # on one line, the later phase wins
    return phase


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
        if SIGQUIT_LINE in line:
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


def parse_log(text):
    """Summarise a startup log.

    :returns: dict ``phase`` (str|None, see ``PHASE_ORDER``), ``progress`` (see
        ``last_progress``), ``ready`` (bool), ``traceback`` (str|None), ``error`` (the
        traceback's last line, the ``scheduler died`` line, or another fatal line; str|None),
        ``scheduler_died`` (dict rank, exit_code | None), ``sigquit`` (bool), ``size``
        (int, characters -- grows while the log advances).
    """
    lines = split_lines(text)
    tb = first_traceback(lines)
    died = None
    fatal = None
    sigquit = False
    for line in lines:
        if died is None:
            match = DIED_RE.search(line)
            if match:
                died = {"rank": int(match.group("rank")), "exit_code": int(match.group("code")),
                        "line": strip_prefix(line).strip()}
        if SIGQUIT_LINE in line:
            sigquit = True
        if fatal is None and FATAL_RE.search(line):
            fatal = strip_prefix(line).strip()
    error = exception_line(tb) or (died and died["line"]) or fatal
    return {
        "phase": current_phase(lines),
        "progress": last_progress(lines),
        "ready": any(READY_LINE in line for line in lines),
        "traceback": tb,
        "error": error,
        "scheduler_died": died,
        "sigquit": sigquit,
        "size": len(text or ""),
    }


# ---------------------------------------------------------------- verdicts

TERMINAL_VERDICTS = ("ready", "crashed", "restart_loop", "stalled", "timeout")
ALIVE_STATES = ("active", "activating", "reloading")
PHASE_VERDICT = {
    None: "starting", "launching": "starting", "init_distributed": "starting",
    "loading_weights": "loading",
    "weights_loaded": "capturing", "kv_cache": "capturing", "capturing_cuda_graph": "capturing",
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


def classify(history, tp_size, stall_timeout=300.0, timeout=1800.0):
    """Decide the server's state from observations, oldest first.

    Each observation is a dict: ``t`` (float s since the wait began), ``active_state``,
    ``sub_state``, ``main_pid`` (int), ``n_restarts`` (int), ``exec_main_status``,
    ``exec_main_code``, ``invocation_id``, ``schedulers`` (int processes titled
    ``sglang::scheduler_TP*`` under MainPID), ``log`` (``parse_log`` dict of the current
    invocation's journal), ``http_code`` (int|None; None = no answer).

    Returns dict ``verdict`` (starting | loading | capturing | warming | ready | crashed |
    restart_loop | stalled | timeout), ``terminal`` (bool), ``phase``, ``progress``,
    ``exit_status``, ``traceback`` (first one seen in any observation), ``error``,
    ``reason`` (str), ``http_code``, ``schedulers``.

    Rules (field notes "Startup as seen from outside"): NRestarts growing is a restart loop;
    a dead unit, a traceback / dead-rank / sigquit line, or fewer schedulers than were seen
    earlier is a crash; ``/health`` 200 with every scheduler alive is ready; no new log
    output for ``stall_timeout`` s while alive is stalled; connection refused counts as
    loading only while every scheduler is alive and the log advances.
    """
    if not history:
        return _verdict("starting", {}, {}, reason="no observation yet")
    first, last = history[0], history[-1]
    log = last.get("log") or {}
    tb = next((o["log"]["traceback"] for o in history if (o.get("log") or {}).get("traceback")), None)
    error = next((o["log"]["error"] for o in history if (o.get("log") or {}).get("error")), None)
    phase = log.get("phase")
    if tb or error:
        log = dict(log, error=error)
        if phase is None:  # a fresh invocation's log is empty: keep the phase the crash happened in
            phase = next((o["log"]["phase"] for o in reversed(history) if (o.get("log") or {}).get("phase")), None)
            log["phase"] = phase
    restarts_first, restarts_last = _int(first.get("n_restarts"), 0), _int(last.get("n_restarts"), 0)
    tp_size = _int(tp_size, 0)
    schedulers = _int(last.get("schedulers"), 0)
    full = schedulers >= tp_size
    seen_full = tp_size > 0 and any(_int(o.get("schedulers"), 0) >= tp_size for o in history)
    exit_status = describe_exit(last)
    elapsed = float(last.get("t", 0.0)) - float(first.get("t", 0.0))

    if restarts_last > restarts_first or (
            first.get("invocation_id") and last.get("invocation_id")
            and first["invocation_id"] != last["invocation_id"]):
        return _verdict("restart_loop", last, log, traceback=tb, exit_status=exit_status,
                        reason="systemd restarted the unit %d time(s) while waiting (NRestarts %d -> %d)"
                        % (max(restarts_last - restarts_first, 1), restarts_first, restarts_last))

    state, sub = last.get("active_state"), last.get("sub_state")
    alive = state in ALIVE_STATES and sub != "auto-restart" and _int(last.get("main_pid"), 0) > 0
    if not alive:
        return _verdict("crashed", last, log, traceback=tb, exit_status=exit_status,
                        reason="unit is %s/%s%s" % (state, sub, (", " + exit_status["text"]) if exit_status else ""))

    died = log.get("scheduler_died")
    if tb or died or log.get("sigquit"):
        if died and not exit_status:
            exit_status = {"code": died["exit_code"], "signal": None,
                           "text": "rank %d scheduler exit code %d" % (died["rank"], died["exit_code"])}
        return _verdict("crashed", last, log, traceback=tb, exit_status=exit_status,
                        reason="the log shows a failure while the unit is still %s: %s" % (
                            state, error or "Received sigquit from a child process"))
    if seen_full and not full:
        return _verdict("crashed", last, log, traceback=tb, exit_status=exit_status,
                        reason="only %d of %d scheduler processes are alive (all %d were seen earlier); a rank died "
                               "while the parent keeps running (field case R1)" % (schedulers, tp_size, tp_size))

    if last.get("http_code") == 200 and full:
        return _verdict("ready", last, log, reason="/health answered 200 with %d/%d schedulers alive"
                        % (schedulers, tp_size))

    # time of the last log change
    size = log.get("size", 0)
    t_change = float(first.get("t", 0.0))
    for obs in reversed(history):
        if (obs.get("log") or {}).get("size", 0) != size:
            break
        t_change = float(obs.get("t", 0.0))
    quiet = float(last.get("t", 0.0)) - t_change
    if quiet >= stall_timeout:
        return _verdict("stalled", last, log,
                        reason="no new log output for %.0f s (stall_timeout %.0f s) in phase %s while the unit is "
                               "alive with %d/%d schedulers" % (quiet, stall_timeout, phase, schedulers, tp_size))
    if elapsed >= timeout:
        return _verdict("timeout", last, log, reason="not ready after %.0f s (timeout %.0f s); last phase %s"
                        % (elapsed, timeout, phase))

    verdict = PHASE_VERDICT.get(phase, "starting")
    if last.get("http_code") is not None and verdict in ("starting", "loading", "capturing"):
        verdict = "warming"  # the port answers (503 until warmup is done)
    if verdict == "loading" and not full:
        return _verdict("starting", last, log, reason="%d of %d scheduler processes up" % (schedulers, tp_size))
    reasons = {
        "starting": "%d of %d scheduler processes up, phase %s" % (schedulers, tp_size, phase),
        "loading": "loading weights, log advanced %.0f s ago" % quiet,
        "capturing": "weights loaded; KV cache / CUDA graph capture (phase %s)" % phase,
        "warming": "HTTP up (answer %s), waiting for warmup" % last.get("http_code"),
    }
    return _verdict(verdict, last, log, reason=reasons[verdict])
