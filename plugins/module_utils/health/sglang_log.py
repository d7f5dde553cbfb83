# -*- coding: utf-8 -*-
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Read SGLang's startup log: phases per rank, loading progress, the first traceback, the crash phase (stdlib only).

``parse_log`` summarises a journal; ``sglang_verdict.classify`` reads its summaries. Every piece of text this
module looks for is named once in ``sglang_log_text`` (``WHEEL_TEXT``: printed by SGLang 0.5.23 itself, with the
wheel file that prints it; ``FOREIGN_TEXT``: printed by another program), and every regex below is built from
those entries, except the log prefix's, whose source is named where it is built.

Startup of SGLang 0.5.23 as the log shows it (``[<time>{ DP d}{ PP p}{ ATTN_CP c}{ MOE_DP m}{ TP t}{ EP e}] msg``
on scheduler lines, ``managers/scheduler.py configure_scheduler_process``; a bare ``[<time>]`` on the parent's):
``server_args={...}``; per rank ``Init parallel begin.`` / ``Init parallel ends.`` / ``Memory baseline taken.``;
``Load weight begin.`` with rank 0's tqdm bar on stderr (``\\r`` redraws, which journald shows only when the bar
ends with ``\\n``; see ``sglang_observe.tree_activity``), ``Load weight end.``; ``KV Cache is allocated.``,
``Memory pool end.``; CUDA graphs, prefill first (``Capture target prefill CUDA graph begin/end``), then decode
(or verify, and a speculative draft's decode/extend); the HiCache host pool (``Allocating MLA hierarchical KV
host pool``); then the parent's subprocess watchdog, uvicorn, the warmup request and ``The server is fired up and
ready to roll!``. ``--log-level warning`` removes every one of these phase lines (failures are ERROR and stay).

A rank's phase only moves forward (the latest *furthest* phase it logged), so the end of prefill capture does
not read as "captured" before decode capture begins.
"""

from __future__ import absolute_import, division, print_function

import re

from ansible_collections.blackwell.sglang.plugins.module_utils.health.sglang_log_text import (
    FOREIGN_TEXT, WHEEL_FUNCTIONS, WHEEL_TEXT, any_text_re, text_re,
)

__metaclass__ = type

TRACEBACK_START = "Traceback (most recent call last):"
CHAIN_LINES = ("During handling of the above exception, another exception occurred:",
               "The above exception was the direct cause of the following exception:")

PROGRESS_RE = re.compile(r"(?P<desc>%s|%s)%s" % (WHEEL_TEXT["bar_multithread"][0], WHEEL_TEXT["bar_prefetch"][0],
                                                 WHEEL_TEXT["bar_format"][0]))
PROGRESS_FORMATS = {"Multi-thread loading shards": "multithread", "Loading safetensors checkpoint shards": "legacy"}

# (phase, text names); order = startup order. A rank's phase is the furthest one it logged.
PHASES = (
    ("starting", ("server_args",)),
    ("init_parallel", ("init_parallel_begin", "init_parallel_end", "memory_baseline")),
    ("loading_weights", ("load_weight_begin", "weights_format", "bar_multithread", "bar_prefetch")),
    ("weights_loaded", ("load_weight_end",)),
    ("kv_cache", ("kv_cache_allocated", "memory_pool_end")),
    ("prefill_graph_capture", ("capture_prefill_begin", "capture_prefill_end", "capture_prefill_bar")),
    ("decode_graph_capture", ("capture_decode_begin", "capture_decode_end", "capture_verify_begin",
                              "capture_verify_end", "capture_draft_extend_begin", "capture_draft_extend_end",
                              "capture_decode_bar")),
    ("hicache_alloc", ("hicache_pool",)),
    ("http_server", ("uvicorn_startup", "uvicorn_running")),
    ("warmup", ("warmup_image", "uvicorn_warmup_request")),
    # a node of rank >= 1 never logs the ready line: its dummy health app's start is its own "ready"
    ("ready", ("ready", "follower_serving")),
)
PHASE_ORDER = [name for name, dummy in PHASES]
_PHASE_RES = [(name, any_text_re(*names)) for name, names in PHASES]
# phases the parent (HTTP server) reaches only after every scheduler is ready
PARENT_PHASES = ("http_server", "warmup", "ready")
CAPTURE_PHASES = ("prefill_graph_capture", "decode_graph_capture")

READY_LINE = "The server is fired up and ready to roll!"
# A node of rank >= 1 logs this once every rank it hosts is ready; it never logs the ready line.
FOLLOWER_SERVING_RE = text_re("follower_serving")
SIGQUIT_RE = any_text_re("sigquit_launch", "sigquit_running")
DIED_RE = text_re("scheduler_died")
SUBPROCESS_CRASH_RE = text_re("subprocess_crashed")
CONFIG_ERROR_RE = text_re("config_invalid")
# The scheduler's watchdog: a forward that did not finish within --watchdog-timeout; it SIGQUITs the parent 5 s later
WATCHDOG_RE = text_re("watchdog_timeout")
# The stats-logging rank's batch lines: one per prefill batch (each chunk of a long prompt), one per decode log
# interval; they move while the server works, even while /health waits behind a long prefill
BATCH_RE = any_text_re("prefill_batch", "decode_batch")
# What a /health probe itself makes the server log (its access line; 503 after the bound): an echo of the watcher,
# not a sign of the server's life
PROBE_ECHO_RE = any_text_re("uvicorn_health_request", "health_check_failed")
# Fatal lines that come without a Python traceback (signals, OOM killer, C++ aborts).
FATAL_RE = any_text_re("faulthandler", "segfault", "cuda_oom", "torch_oom", "oom_killer", "nccl_error", "cpp_terminate")
# uvicorn's one ERROR line when the port is taken (no traceback; the process lives on for the warmup's 120 polls):
# "[2026-12-05 10:00:00] ERROR:    [Errno 98] error while attempting to bind on address ('127.0.0.1', 30000): ..."
BIND_RE = re.compile(r"(?P<error>\[Errno \d+\] (?:%s) \((?P<address>.*?), (?P<port>\d+)\): .*)$"
                     % FOREIGN_TEXT["bind_failed"][0])
TOKENIZER_FRAME_RE = re.compile(r", in (?:%s)$" % "|".join(WHEEL_FUNCTIONS))
# What the first error says about where it happened, checked in this order (error text or failure line).
ERROR_PHASES = (
    (text_re("bind_failed"), "http_server"),
    (text_re("warmup_failed"), "warmup"),
    (text_re("hicache_no_memory"), "hicache_alloc"),
    (text_re("hicache_nothing_left"), "hicache_alloc"),
    (text_re("hicache_cannot_size"), "hicache_alloc"),
    (text_re("capture_failed"), "cuda_graph_capture"),
)

# Log line prefix: "[2026-05-18 10:00:00{.mmm}{ DP0}{ PP0}{ TP3}{ EP3}] " (utils/common.py configure_logger format
# "[%(asctime)s{maybe_ms}{prefix}] %(message)s"; prefix tokens from managers/scheduler.py configure_scheduler_process)
_PREFIX = r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?(?P<tokens>(?: [A-Z][A-Z_]*\d+)*)\] "
LOG_PREFIX_RE = re.compile("^" + _PREFIX)
MIDLINE_PREFIX_RE = re.compile(r"(?<=.)(?=\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?(?: [A-Z][A-Z_]*\d+)*\] )")
_TOKEN_RE = re.compile(r"([A-Z][A-Z_]*)(\d+)")


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


def rank_key(line):
    """The rank a log line belongs to: its prefix tokens (``"TP3"``, ``"DP0 TP3"``, ``"TP3 EP3"``), ``""`` for a
    bare ``[<time>]`` prefix (the parent, or a scheduler at tp 1), None for a line without prefix."""
    match = LOG_PREFIX_RE.match(line)
    if not match:
        return None
    return match.group("tokens").strip()


def _tp_of(key):
    tokens = dict(_TOKEN_RE.findall(key or ""))
    return int(tokens["TP"]) if "TP" in tokens else None


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


def _line_phase(line):
    found = None
    for name, pattern in _PHASE_RES:
        if pattern.search(line):
            found = name  # on one line, the later phase wins
    return found


def _later(a, b):
    if a is None:
        return b
    if b is None:
        return a
    return a if PHASE_ORDER.index(a) >= PHASE_ORDER.index(b) else b


def phases_by_rank(lines):
    """(dict rank key -> furthest scheduler phase, furthest phase of any line). A line prefixed
    ``[... TPn ...]`` belongs to the rank its prefix tokens name; a line without prefix (rank 0's tqdm bars)
    to the rank with TP0 when ranks are prefixed, else to ``""`` (tp 1: no tokens at all)."""
    keys = [k for k in (rank_key(line) for line in lines) if k]
    zero = next((k for k in keys if _tp_of(k) == 0), keys[0] if keys else "")
    ranks, furthest = {}, None
    for line in lines:
        phase = _line_phase(line)
        if phase is None:
            continue
        furthest = _later(furthest, phase)
        if phase in PARENT_PHASES or phase == "starting":
            continue
        key = rank_key(line)
        if key is None or (key == "" and keys):
            key = zero
        ranks[key] = _later(ranks.get(key), phase)
    return ranks, furthest


def current_phase(lines):
    """Startup phase (one of ``PHASE_ORDER``) or None: the parent's HTTP phases once reached, else the
    least advanced scheduler rank's furthest phase (every rank must finish before the port opens, so a
    rank stuck loading keeps the server loading while the others finished capture)."""
    ranks, furthest = phases_by_rank(lines)
    if furthest in PARENT_PHASES or not ranks:
        return furthest
    return min(ranks.values(), key=PHASE_ORDER.index)


def first_traceback(lines):
    """The first Python traceback in ``lines`` (str, chained parts included) or None.

    Later tracebacks are echoes from other ranks or the parent; the ``Received sigquit``
    line is never part of it: it hides the cause."""
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


def crash_phase(lines, failure_at, error, died=None, traceback=None):
    """Phase the server was in when it failed.

    What the failure says wins: a warmup error, or a rank's failure after the port opened (the warmup request's
    forward) -> ``warmup``; no host memory for HiCache -> ``hicache_alloc``;
    a failed CUDA graph capture -> the capture phase of that rank (``decode_graph_capture`` when unknown); a
    traceback through the tokenizer/processor loaders -> ``tokenizer_load``. Otherwise the phase the failing
    rank had reached before line ``failure_at`` (a rank that never logged died as it started); ``config`` when
    the parent failed on config.json before any scheduler phase (a staging error: an empty config.json);
    ``serving`` for a failure after the ready line (a node of rank >= 1: its dummy health app's start line)."""
    if failure_at is None:
        return None
    if any(READY_LINE in line or FOLLOWER_SERVING_RE.search(line) for line in lines[:failure_at]):
        return "serving"  # it was ready: a failure while serving (a dead rank, the watchdog's SIGQUIT, rank 0 lost)
    text = "%s\n%s" % (lines[failure_at], error or "")
    before = lines[:failure_at]
    ranks, dummy = phases_by_rank(before)
    key = rank_key(lines[failure_at])
    for pattern, phase in ERROR_PHASES:
        if pattern.search(text):
            if phase == "cuda_graph_capture":
                mine = ranks.get(key) if key else None
                return mine if mine in CAPTURE_PHASES else "decode_graph_capture"
            return phase
    if traceback and any(TOKENIZER_FRAME_RE.search(line) for line in traceback.splitlines()):
        return "tokenizer_load"
    if key and key in ranks and current_phase(before) in ("http_server", "warmup"):
        # a rank failed after the port opened and before ready: in the forward of the warmup request, the only
        # request there is (0.5.23: every rank raises, SIGQUITs the parent; the warmup never gets an answer)
        return "warmup"
    if died is not None and ranks and current_phase(before) not in PARENT_PHASES:
        by_tp = dict((_tp_of(k), p) for k, p in ranks.items())
        phase = by_tp.get(died["rank"], "starting")
    elif key and key in ranks:  # the rank that failed
        phase = ranks[key]
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
        ... crashed`` after ready), ``sigquit`` (bool), ``bind_failed`` (dict address, port, error: uvicorn could
        not bind the port, a failure although the process lives on | None), ``crash_phase`` (phase at the first
        failure, see ``crash_phase``; None without failure), ``ranks`` (dict rank key such as ``"TP3"`` ->
        that rank's furthest phase), ``follower_serving`` (bool: a node of rank >= 1 whose ranks are all ready serves
        the dummy health app), ``watchdog_timeout`` (the scheduler watchdog's line: a forward that never
        finished; the parent is SIGQUIT 5 s later | None), ``batches`` (int, ``Prefill batch`` / ``Decode batch``
        lines: they move while the server works) and ``last_batch`` (the last one | None), ``last_line`` (the last
        line that is not a /health probe's echo, without its prefix: where a hung server stopped), ``size`` (int,
        characters -- grows while the log advances), ``echo_size`` (int, characters of the lines /health probes
        themselves cause: their access lines and ``Health check failed``).
    """
    lines = split_lines(text)
    tb = first_traceback(lines)
    f = _failure_lines(lines)
    died, bind, watchdog, fatal = f["died"], f["bind"], f["watchdog"], f["fatal"]
    batches, last_batch, last_line, echo_size = _activity_lines(lines)
    error = exception_line(tb) or (died and died["line"]) or (bind and bind["error"]) or watchdog or fatal
    ranks, dummy = phases_by_rank(lines)
    return {
        "phase": current_phase(lines),
        "ranks": ranks,
        "progress": last_progress(lines),
        "ready": any(READY_LINE in line for line in lines),
        "follower_serving": any(FOLLOWER_SERVING_RE.search(line) for line in lines),
        "traceback": tb,
        "error": error,
        "scheduler_died": died,
        "sigquit": f["sigquit"],
        "bind_failed": bind,
        "crash_phase": crash_phase(lines, f["failure_at"], error, died, tb),
        "watchdog_timeout": watchdog,
        "batches": batches,
        "last_batch": last_batch,
        "last_line": last_line,
        "size": len(text or ""),
        "echo_size": echo_size,
    }


def _failure_lines(lines):
    """The first line of each failure kind in ``lines`` (a scheduler's death or a subprocess crash, SIGQUIT, a fatal
    line, the watchdog's hard timeout, uvicorn's bind error) and ``failure_at``, the index of the first line of any
    of them or of a traceback: dict ``died``, ``sigquit``, ``fatal``, ``watchdog``, ``bind``, ``failure_at``."""
    out = {"died": None, "sigquit": False, "fatal": None, "watchdog": None, "bind": None, "failure_at": None}
    for pos, line in enumerate(lines):
        hit = False
        if out["died"] is None:
            match = DIED_RE.search(line) or SUBPROCESS_CRASH_RE.search(line)
            if match:
                out["died"] = {"rank": int(match.group("rank") or 0), "exit_code": int(match.group("code")),
                               "line": strip_prefix(line).strip()}
                hit = True
        if SIGQUIT_RE.search(line):
            out["sigquit"] = hit = True
        if out["fatal"] is None and FATAL_RE.search(line):
            out["fatal"] = strip_prefix(line).strip()
            hit = True
        if TRACEBACK_START in line:
            hit = True
        if out["watchdog"] is None:
            match = WATCHDOG_RE.search(line)
            if match and match.group("soft") == "False":
                out["watchdog"] = strip_prefix(line).strip()
                hit = True
        if out["bind"] is None:
            match = BIND_RE.search(line)
            if match:
                out["bind"] = {"address": match.group("address").strip("'\""), "port": int(match.group("port")),
                               "error": match.group("error").strip()}
                hit = True
        if hit and out["failure_at"] is None:
            out["failure_at"] = pos
    return out


def _activity_lines(lines):
    """(``Prefill batch`` / ``Decode batch`` lines, the last of them, the last line that is not a /health probe's
    echo, the characters of those echoes) of ``lines``."""
    batches = echo_size = 0
    last_batch = last_line = None
    for line in lines:
        if PROBE_ECHO_RE.search(line):
            echo_size += len(line) + 1
        elif line.strip():
            last_line = strip_prefix(line).strip()
        if BATCH_RE.search(line):
            batches += 1
            last_batch = strip_prefix(line).strip()
    return batches, last_batch, last_line, echo_size
