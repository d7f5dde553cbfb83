# -*- coding: utf-8 -*-
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Decide where an SGLang server is from observations of its systemd unit (stdlib only).

``classify`` reads a history of observations (systemd's view of the unit, the scheduler processes under MainPID,
the tree's I/O, the GPU memory of its processes, ``/health``'s answer, each with the ``sglang_log.parse_log``
summary of the journal) and gives a verdict; ``crash_advice`` says what to do about a crash. Where the facts come
from: ``ExecMainCode``/``ExecMainStatus`` are the ``si_code``/``si_status`` of the main process's ``SIGCHLD``
(``CLD_EXITED`` 1, ``CLD_KILLED`` 2, ``CLD_DUMPED`` 3, as systemd records them); ``NRestarts`` counts only the
restarts ``Restart=`` made (systemd >= 235); the signal numbers are Linux's; SGLang 0.5.23 logs every phase line
at INFO and failures at ERROR, so ``--log-level warning`` and above hide the phases; its HiCache sizing keeps
10 GiB of host memory free (``mem_cache/hicache_auto_size.py auto_size_hicache`` in the wheel).
"""

from __future__ import absolute_import, division, print_function

from ansible_collections.blackwell.sglang.plugins.module_utils.health.sglang_log_text import any_text_re, text_re

__metaclass__ = type

TERMINAL_VERDICTS = ("ready", "busy", "crashed", "restart_loop", "stalled", "timeout")
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
    (text_re("shards_missing"), "the model's index names shard files that are not on disk (SGLang checks them all before "
     "reading any): the staged revision is incomplete; re-run model_stage, which verifies every shard"),
    (text_re("hicache_cannot_size"), "SGLang could not read the memory cgroup it runs in to size the HiCache host pool "
     "(auto-sizing needs its headroom; a container without its cgroup filesystem mounted cannot give it): set "
     "--hicache-size explicitly (GB per rank, within the memory limit) or mount the cgroup filesystem"),
    (text_re("memory_unbalanced"), "another process holds memory on one of this unit's GPUs (SGLang 0.5.23 refuses "
     "to start when a GPU has under 90 % of the free memory of the others, before any weight is read): stop it; "
     "preflight refuses a GPU another process holds before it deploys"),
    (text_re("watchdog_timeout"), "a forward batch did not finish within --watchdog-timeout and the scheduler's "
     "watchdog killed the server: a rank hung in a kernel or a collective (on PCIe hosts without NVLink an NCCL "
     "all-reduce that never completes: ACS redirect or IOMMU translation, check `lspci -vvv` ACSCtl and boot with "
     "iommu=pt); read the py-spy dump logged above it and the kernel log for Xid"),
    (any_text_re("bind_failed", "address_in_use"), "the port is taken by another process (an old server, another "
     "service): stop it or move --port; preflight refuses a port that is taken before it deploys"),
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
    out = {"verdict": verdict, "terminal": verdict in TERMINAL_VERDICTS, "phase": log.get("phase"), "bind_failed": None,
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
        if (log.get("traceback") or log.get("scheduler_died") or log.get("sigquit") or log.get("bind_failed")
                or log.get("watchdog_timeout")):
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


def _log_growth(obs):
    """The journal's size less what the watcher's own /health probes made the server log (uvicorn's access line of
    each probe, ``Health check failed``): a server that logs only those is not moving."""
    log = obs.get("log") or {}
    return log.get("size", 0) - log.get("echo_size", 0)


def _batch_lines(obs):
    """The stats-logging rank's ``Prefill batch`` / ``Decode batch`` lines so far: they move while the server works."""
    return (obs.get("log") or {}).get("batches", 0)


def _served_unanswered(history, log, now, elapsed, stall_timeout, timeout, health_check_timeout):
    """A server past its ready line whose /health did not answer 200: busy while its batch lines move, stalled once
    nothing but the probes' own echoes was logged for ``stall_timeout`` (the tree's I/O and the GPU are no evidence
    here: the probes themselves make the server work, and a hung collective keeps the GPUs at 100 %)."""
    last = history[-1]
    code = last.get("http_code")
    answer = ("answered %d" % code) if code else "did not answer"
    batches = [_batch_lines(o) for o in history]
    batch_quiet = now - _last_advance(history, _batch_lines)
    if len(set(batches)) > 1 and batch_quiet <= float(health_check_timeout) + 5.0:
        return _verdict("busy", last, log, reason="/health %s after the ready line, but the server works: %d batch "
                        "line(s) while watched, the last %.0f s ago (%s); SGLang answers 503 when no token came back "
                        "for %.0f s (a long prefill holds every request's tokens): busy, not hung"
                        % (answer, batches[-1] - batches[0], batch_quiet, log.get("last_batch"),
                           float(health_check_timeout)))
    quiet = now - _last_advance(history, _log_growth)
    if quiet >= stall_timeout:
        busy = (last.get("gpu") or {}).get("busy_pct") or 0
        reason = ("/health %s after the ready line and the server logged nothing but the probes' echoes for %.0f s "
                  "(stall_timeout %.0f s): hung while serving; it stopped after: %s" % (
                      answer, quiet, stall_timeout, log.get("last_line")))
        if busy >= 90:
            reason += "; the GPUs are busy (%d %%) while nothing moves: a forward or collective that never completes" \
                % busy
        return _verdict("stalled", last, log, reason=reason, stopped_at=log.get("last_line"))
    if elapsed >= timeout:
        return _verdict("timeout", last, log, reason="/health %s after the ready line for %.0f s (timeout %.0f s)"
                        % (answer, elapsed, timeout))
    return _verdict("unhealthy", last, log, reason="/health %s after the ready line and no batch line moved for %.0f s: "
                    "busy or hung, watching (stalled after %.0f s with nothing logged)"
                    % (answer, batch_quiet, stall_timeout))


def classify(history, tp_size, stall_timeout=300.0, timeout=1800.0, log_level="info", health_check_timeout=20.0):
    """Decide the server's state from observations, oldest first.

    Each observation is a dict: ``t`` (float s since the wait began), ``active_state``,
    ``sub_state``, ``result`` (systemd Result), ``main_pid`` (int), ``n_restarts`` (int),
    ``exec_main_status``, ``exec_main_code``, ``invocation_id``, ``schedulers`` (int scheduler
    processes under MainPID), ``activity`` (int|None, ``sglang_observe.tree_activity``), ``gpu`` (dict
    ``memory_mib``, ``busy_pct`` of the unit's processes, ``sglang_observe.gpu_observation``; None unknown), ``log``
    (``parse_log`` dict of the current invocation's journal), optionally ``previous_log`` (the
    ended invocation's journal), ``http_code`` (int|None; None = no answer). ``log_level`` is the
    server's ``--log-level``: at warning and above no phase line is ever logged, so the verdict rests on
    the process tree and HTTP alone (and says so). ``health_check_timeout`` is the server's own bound on ``/health``
    (SGLANG_HEALTH_CHECK_TIMEOUT): it answers 503 when its scheduler sent nothing for that long.

    Returns dict ``verdict`` (starting | loading | capturing | allocating | warming | ready | busy | unhealthy |
    crashed | restart_loop | stalled | timeout), ``terminal`` (bool), ``phase`` (for a crash: the phase it
    crashed in), ``progress``, ``exit_status``, ``traceback`` (the first one seen), ``error``,
    ``reason`` (str), ``http_code``, ``schedulers``.

    Rules, first match wins:

    1. two or more restarts while watching (NRestarts growth) -> restart_loop;
    2. one restart -> crashed, with the phase, exit and traceback of the run that ended;
    3. main process gone (``main_process_gone``: Result != success, or MainPID 0 with ExecMainCode
       set, or failed/inactive) -> crashed, whatever ActiveState says (deactivating, auto-restart);
    4. a traceback, dead-rank, SIGQUIT or fatal line in the log -> crashed (the parent may still run);
    5. fewer schedulers than tp_size once all were seen or had been ready (the ready line, or a node of rank >= 1's
       ``Dummy health check server started``) -> crashed naming the ranks gone (``scheduler_ranks`` against the
       log's rank prefixes): a rank died, e.g. an NCCL abort, while the parent keeps answering; on a node of rank
       >= 1 nothing ever ends that parent;
    6. ``/health`` 200 with tp_size schedulers -> ready;
    6b. after the ready line, ``/health`` not 200 while the stats-logging rank's ``Prefill batch`` / ``Decode batch``
       lines moved within ``health_check_timeout`` + 5 s (a long prefill holds /health's one-token generation:
       sgl-project/sglang#22511) -> busy; not moving yet -> unhealthy (until ``stall_timeout`` makes it stalled);
    7. neither the log, nor the tree's I/O and page faults, nor the GPU memory of the unit's processes changed for
       ``stall_timeout`` s -> stalled (with a hint at ACS/IOMMU when the GPUs are busy all the same);
    8. ``timeout`` s elapsed -> timeout;
    9. otherwise the phase decides: starting, loading (only with all tp_size schedulers alive),
       capturing (KV pool, CUDA graphs), allocating (HiCache host pool), warming (the port answers, or the
       parent logged HTTP server / warmup lines; 503 until warmup ends).
    """
    if not history:
        return _verdict("starting", {}, {}, reason="no observation yet")
    c = _context(history, tp_size)
    return (_failure_verdict(c) or _ready_verdict(c)
            or _waiting_verdict(c, history, stall_timeout, timeout, log_level, health_check_timeout))


def _context(history, tp_size):
    """What every rule of classify reads, worked out once from the observations: the last one, its log (with the
    failure of the run that ended, where one did), restarts, schedulers against tp_size, the exit, the time waited."""
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
    return {"first": first, "last": last, "log": log, "restarts": restarts, "fail_log": fail_log, "tb": tb,
            "error": error, "phase": phase, "restarts_first": restarts_first, "restarts_last": restarts_last,
            "tp_size": tp_size, "schedulers": schedulers, "full": full, "seen_full": seen_full,
            "exit_status": exit_status, "elapsed": elapsed, "died": died, "where": where, "cause": cause}


def _failure_verdict(c):
    """Rules 1-5 of classify: restart_loop, or crashed (a restart, the main process gone, a bind failure, a failure in
    the log, ranks gone); None when none holds."""
    last, log, restarts, fail_log, tb, error = c["last"], c["log"], c["restarts"], c["fail_log"], c["tb"], c["error"]
    restarts_first, restarts_last, tp_size = c["restarts_first"], c["restarts_last"], c["tp_size"]
    schedulers, full, seen_full, exit_status = c["schedulers"], c["full"], c["seen_full"], c["exit_status"]
    died, where, cause = c["died"], c["where"], c["cause"]
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

    bind = (fail_log or {}).get("bind_failed")
    if bind and not tb:
        # uvicorn logs it and the process lives on (the warmup's 120 polls, 2 minutes): judged from the line
        return _verdict("crashed", last, log, traceback=tb, exit_status=exit_status, bind_failed=bind,
                        reason="the HTTP server could not bind %s:%d while the unit is still %s/%s: %s" % (
                            bind["address"], bind["port"], state, sub, error))
    if tb or died or (fail_log or {}).get("sigquit"):
        return _verdict("crashed", last, log, traceback=tb, exit_status=exit_status,
                        reason="the log shows a failure%s while the unit is still %s/%s: %s" % (
                            where, state, sub, error or "SIGQUIT from a child process"))
    follower = bool(log.get("follower_serving"))
    if (seen_full or log.get("ready") or follower) and not full and tp_size > 0:
        alive = set(last.get("scheduler_ranks") or [])
        gone = sorted((k for k in (log.get("ranks") or {}) if k not in alive), key=lambda k: (len(k), k))
        if follower:
            why = ("a rank of this node of rank >= 1 died: its parent, and the dummy /health that answers 200, keep "
                   "running (SGLang 0.5.23 joins its schedulers one by one), and rank 0's next forward waits for the "
                   "lost rank; restart the group from rank 0")
        else:
            why = "a rank died while the parent keeps running (an NCCL abort kills schedulers, not the parent)"
        return _verdict("crashed", last, log, traceback=tb, exit_status=exit_status,
                        reason="only %d of %d scheduler processes are alive (%s)%s; %s"
                               % (schedulers, tp_size, "all %d were ready" % tp_size,
                                  (", gone: " + ", ".join(gone)) if gone else "", why))
    return None


def _ready_verdict(c):
    """Rule 6 of classify: /health 200 with every scheduler alive; None otherwise."""
    last, log, tp_size, schedulers, full = c["last"], c["log"], c["tp_size"], c["schedulers"], c["full"]
    follower = bool(log.get("follower_serving"))
    if last.get("http_code") == 200 and full:
        dummy_app = (" (a node of rank >= 1: its ranks are ready and it serves SGLang's dummy health app; the API is "
                     "rank 0's)") if follower else ""
        return _verdict("ready", last, log, reason="/health answered 200 with %d/%d schedulers alive%s"
                        % (schedulers, tp_size, dummy_app))
    return None


def _waiting_verdict(c, history, stall_timeout, timeout, log_level, health_check_timeout):
    """Rules 6b-9 of classify: served but unanswered (busy or unhealthy), stalled, timeout, else the phase."""
    last, log, phase, tp_size, schedulers = c["last"], c["log"], c["phase"], c["tp_size"], c["schedulers"]
    full, elapsed = c["full"], c["elapsed"]
    quiet_level = str(log_level or "info").lower() in QUIET_LOG_LEVELS
    now = float(last.get("t", 0.0))
    served = bool(log.get("ready")) and full
    if served and last.get("http_code") != 200:
        return _served_unanswered(history, log, now, elapsed, stall_timeout, timeout, health_check_timeout)
    log_quiet = now - _last_advance(history, _log_growth)
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
                  "phase %s while the unit is alive with %d/%d schedulers; it stopped after: %s"
                  % (log_quiet, activity_quiet, gpu_text, stall_timeout, phase, schedulers, tp_size,
                     log.get("last_line")))
        if busy >= 90:
            reason += ("; the GPUs are busy (%d %%) while nothing moves: an NCCL collective that never completes. On "
                       "PCIe hosts without NVLink, ACS redirect on the GPUs' upstream bridges or IOMMU translation "
                       "causes it: check `lspci -vvv` (ACSCtl: SrcValid- ReqRedir- CmpltRedir-) and boot with "
                       "iommu=pt (or amd_iommu=off / intel_iommu=off)" % busy)
        return _verdict("stalled", last, log, reason=reason, stopped_at=log.get("last_line"))
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
