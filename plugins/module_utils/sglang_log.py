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
                # a line matching a later phase wins over an earlier pattern on the same line
                if phase is None or name != phase:
                    phase = name
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
