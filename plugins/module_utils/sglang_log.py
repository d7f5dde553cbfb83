# -*- coding: utf-8 -*-
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Read SGLang's startup log and decide where the server is (stdlib only).

Every piece of text this module looks for is named once in ``sglang_log_text`` (``WHEEL_TEXT``: printed by
SGLang 0.5.23 itself, with the wheel file that prints it; ``FOREIGN_TEXT``: printed by another program), and every
regex below is built from those entries, except the log prefix's, whose source is named where it is built.

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

from ansible_collections.blackwell.sglang.plugins.module_utils.sglang_log_text import (
    WHEEL_FUNCTIONS, WHEEL_TEXT, any_text_re, text_re,
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
    ("ready", ("ready",)),
)
PHASE_ORDER = [name for name, dummy in PHASES]
_PHASE_RES = [(name, any_text_re(*names)) for name, names in PHASES]
# phases the parent (HTTP server) reaches only after every scheduler is ready
PARENT_PHASES = ("http_server", "warmup", "ready")
CAPTURE_PHASES = ("prefill_graph_capture", "decode_graph_capture")

READY_LINE = "The server is fired up and ready to roll!"
SIGQUIT_RE = any_text_re("sigquit_launch", "sigquit_running")
DIED_RE = text_re("scheduler_died")
SUBPROCESS_CRASH_RE = text_re("subprocess_crashed")
CONFIG_ERROR_RE = text_re("config_invalid")
# Fatal lines that come without a Python traceback (signals, OOM killer, C++ aborts).
FATAL_RE = any_text_re("faulthandler", "segfault", "cuda_oom", "torch_oom", "oom_killer", "nccl_error", "cpp_terminate")
TOKENIZER_FRAME_RE = re.compile(r", in (?:%s)$" % "|".join(WHEEL_FUNCTIONS))
# What the first error says about where it happened, checked in this order (error text or failure line).
ERROR_PHASES = (
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

    What the failure says wins: a warmup error -> ``warmup``; no host memory for HiCache -> ``hicache_alloc``;
    a failed CUDA graph capture -> the capture phase of that rank (``decode_graph_capture`` when unknown); a
    traceback through the tokenizer/processor loaders -> ``tokenizer_load``. Otherwise the phase the failing
    rank had reached before line ``failure_at`` (a rank that never logged died as it started); ``config`` when
    the parent failed on config.json before any scheduler phase (a staging error: an empty config.json);
    ``serving`` for a failure after the ready line."""
    if failure_at is None:
        return None
    if any(READY_LINE in line for line in lines[:failure_at]):
        return "serving"  # it was ready: a failure while serving (a dead rank, the watchdog's SIGQUIT)
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
        ... crashed`` after ready), ``sigquit`` (bool), ``crash_phase`` (phase at the first
        failure, see ``crash_phase``; None without failure), ``ranks`` (dict rank key such as ``"TP3"`` ->
        that rank's furthest phase), ``size`` (int, characters -- grows while the log advances).
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
    ranks, dummy = phases_by_rank(lines)
    return {
        "phase": current_phase(lines),
        "ranks": ranks,
        "progress": last_progress(lines),
        "ready": any(READY_LINE in line for line in lines),
        "traceback": tb,
        "error": error,
        "scheduler_died": died,
        "sigquit": sigquit,
        "crash_phase": crash_phase(lines, failure_at, error, died, tb),
        "size": len(text or ""),
    }


# ---------------------------------------------------------------- verdicts

TERMINAL_VERDICTS = ("ready", "crashed", "restart_loop", "stalled", "timeout")
PHASE_VERDICT = {
    None: "starting", "starting": "starting", "init_parallel": "starting", "tokenizer_load": "starting",
    "config": "starting",
    "loading_weights": "loading",
    "weights_loaded": "capturing", "kv_cache": "capturing", "prefill_graph_capture": "capturing",
    "decode_graph_capture": "capturing", "cuda_graph_capture": "capturing",
    "hicache_alloc": "allocating",
    "http_server": "warming", "warmup": "warming", "ready": "warming", "serving": "warming",
}
# What to do about a crash, by the phase it happened in (``crash_phase``); checked in order, the first match of the
# error wins over the phase (``crash_advice``).
ADVICE_BY_ERROR = (
    (text_re("no_kernel_image"), "the build has no kernels for this GPU's compute capability: "
     "rebuild FlashInfer and SGLang for 12.0 (sm_120) and check the release probe"),
    (any_text_re("bind_failed", "address_in_use"), "the port is taken by another process: stop it or move --port "
     "(preflight names the process that holds it)"),
)
ADVICE_BY_PHASE = {
    "config": "config.json is unreadable: re-stage the model (model_stage)",
    "tokenizer_load": "the tokenizer / processor could not load: the checkpoint lacks a file its configs name "
                      "(tiktoken.model, remote-code .py files) or --trust-remote-code is missing; re-stage the model",
    "init_parallel": "the ranks could not form their process groups: check NCCL/GLOO_SOCKET_IFNAME, --dist-init-addr "
                     "and the ports between the nodes",
    "loading_weights": "reading the weights failed: re-verify the staged model (model_stage) and the storage it is on",
    "weights_loaded": "GPU memory after the weights: lower --mem-fraction-static",
    "kv_cache": "GPU memory for the KV pool: lower --mem-fraction-static or --max-running-requests",
    "prefill_graph_capture": "CUDA graph capture ran out of memory or failed: lower --mem-fraction-static or the "
                             "prefill capture sizes (restarting with the same flags fails again)",
    "decode_graph_capture": "CUDA graph capture ran out of memory or failed: lower --mem-fraction-static or "
                            "--cuda-graph-max-bs-decode (restarting with the same flags fails again)",
    "hicache_alloc": "the HiCache host pool does not fit in host memory (SGLang keeps 10 GiB free): lower "
                     "--hicache-size / --hicache-ratio or free host memory",
    "warmup": "the first request after start-up failed: read the traceback",
    "serving": "a process died while serving: read the first error (NCCL, a dead rank) and the kernel log for Xid",
}


def crash_advice(phase, error):
    """One hint for a crash in ``phase`` with first error ``error`` (str); the error's own advice first."""
    for pattern, advice in ADVICE_BY_ERROR:
        if error and pattern.search(error):
            return advice
    return ADVICE_BY_PHASE.get(phase, "read the first traceback")


# --log-level values that hide every phase line (they are INFO); failures are ERROR and stay.
QUIET_LOG_LEVELS = ("warning", "error", "critical")
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


def classify(history, tp_size, stall_timeout=300.0, timeout=1800.0, log_level="info"):
    """Decide the server's state from observations, oldest first.

    Each observation is a dict: ``t`` (float s since the wait began), ``active_state``,
    ``sub_state``, ``result`` (systemd Result), ``main_pid`` (int), ``n_restarts`` (int),
    ``exec_main_status``, ``exec_main_code``, ``invocation_id``, ``schedulers`` (int scheduler
    processes under MainPID), ``activity`` (int|None, ``sglang_observe.tree_activity``), ``gpu`` (dict
    ``memory_mib``, ``busy_pct`` of the unit's processes, ``sglang_observe.gpu_observation``; None unknown), ``log``
    (``parse_log`` dict of the current invocation's journal), optionally ``previous_log`` (the
    ended invocation's journal), ``http_code`` (int|None; None = no answer). ``log_level`` is the
    server's ``--log-level``: at warning and above no phase line is ever logged, so the verdict rests on
    the process tree and HTTP alone (and says so).

    Returns dict ``verdict`` (starting | loading | capturing | allocating | warming | ready | crashed |
    restart_loop | stalled | timeout), ``terminal`` (bool), ``phase`` (for a crash: the phase it
    crashed in), ``progress``, ``exit_status``, ``traceback`` (the first one seen), ``error``,
    ``reason`` (str), ``http_code``, ``schedulers``.

    Rules, first match wins:

    1. two or more restarts while watching (NRestarts growth) -> restart_loop;
    2. one restart -> crashed, with the phase, exit and traceback of the run that ended;
    3. main process gone (``main_process_gone``: Result != success, or MainPID 0 with ExecMainCode
       set, or failed/inactive) -> crashed, whatever ActiveState says (deactivating, auto-restart);
    4. a traceback, dead-rank, SIGQUIT or fatal line in the log -> crashed (the parent may still run);
    5. fewer schedulers than tp_size after all were seen -> crashed (a rank died, e.g. an NCCL abort, while the
       parent keeps answering);
    6. ``/health`` 200 with tp_size schedulers -> ready;
    7. neither the log, nor the tree's I/O and page faults, nor the GPU memory of the unit's processes changed for
       ``stall_timeout`` s -> stalled (with a hint at ACS/IOMMU when the GPUs are busy all the same);
    8. ``timeout`` s elapsed -> timeout;
    9. otherwise the phase decides: starting, loading (only with all tp_size schedulers alive),
       capturing (KV pool, CUDA graphs), allocating (HiCache host pool), warming (the port answers, or the
       parent logged HTTP server / warmup lines; 503 until warmup ends).
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
    quiet_level = str(log_level or "info").lower() in QUIET_LOG_LEVELS

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
                               "while the parent keeps running (an NCCL abort kills schedulers, not the parent)"
                               % (schedulers, tp_size, tp_size))

    if last.get("http_code") == 200 and full:
        return _verdict("ready", last, log, reason="/health answered 200 with %d/%d schedulers alive"
                        % (schedulers, tp_size))

    now = float(last.get("t", 0.0))
    log_quiet = now - _last_advance(history, lambda o: (o.get("log") or {}).get("size", 0))
    activity_quiet = now - _last_advance(history, lambda o: o.get("activity"))
    gpu_quiet = now - _last_advance(history, lambda o: (o.get("gpu") or {}).get("memory_mib"))
    # evidence of life is change: log output, the tree's I/O and page faults, the GPU memory its processes hold
    # (GPU utilization is not: a hung NCCL collective keeps the GPUs at 100 %)
    quiet = min([log_quiet] + ([activity_quiet] if last.get("activity") is not None else [])
                + ([gpu_quiet] if last.get("gpu") is not None else []))
    if quiet >= stall_timeout:
        busy = (last.get("gpu") or {}).get("busy_pct") or 0
        gpu_text = (", GPU memory flat for %.0f s" % gpu_quiet) if last.get("gpu") is not None else ""
        reason = ("no new log output for %.0f s, no I/O by the process tree for %.0f s%s (stall_timeout %.0f s) in "
                  "phase %s while the unit is alive with %d/%d schedulers"
                  % (log_quiet, activity_quiet, gpu_text, stall_timeout, phase, schedulers, tp_size))
        if busy >= 90:
            reason += ("; the GPUs are busy (%d %%) while nothing moves: an NCCL collective that never completes. On "
                       "PCIe hosts without NVLink, ACS redirect on the GPUs' upstream bridges or IOMMU translation "
                       "causes it: check `lspci -vvv` (ACSCtl: SrcValid- ReqRedir- CmpltRedir-) and boot with "
                       "iommu=pt (or amd_iommu=off / intel_iommu=off)" % busy)
        return _verdict("stalled", last, log, reason=reason)
    if elapsed >= timeout:
        return _verdict("timeout", last, log, reason="not ready after %.0f s (timeout %.0f s); last phase %s"
                        % (elapsed, timeout, phase))

    verdict = PHASE_VERDICT.get(phase, "starting")
    if last.get("http_code") is not None and verdict in ("starting", "loading", "capturing", "allocating"):
        verdict = "warming"  # the port answers (503 until warmup is done)
    if verdict == "loading" and not full:
        return _verdict("starting", last, log, reason="%d of %d scheduler processes up; loading counts only with "
                        "every rank alive" % (schedulers, tp_size))
    hidden = "; --log-level %s hides the phase lines, so only the process tree and HTTP tell" % log_level \
        if quiet_level else ""
    reasons = {
        "starting": "%d of %d scheduler processes up, phase %s%s" % (schedulers, tp_size, phase, hidden),
        "loading": "loading weights with %d/%d schedulers alive; log advanced %.0f s ago, tree I/O %.0f s ago"
                   % (schedulers, tp_size, log_quiet, activity_quiet),
        "capturing": "weights loaded; KV cache / CUDA graph capture (phase %s), port still closed" % phase,
        "allocating": "allocating the HiCache host pool (pinned host memory; can take minutes), port still closed",
        "warming": "HTTP up (answer %s), waiting for warmup" % last.get("http_code"),
    }
    return _verdict(verdict, last, log, reason=reasons[verdict])
