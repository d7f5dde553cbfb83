#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: sglang_health
short_description: Wait for an SGLang systemd service to become ready, or say exactly why it did not
extends_documentation_fragment:
  - blackwell.sglang.common
description:
  - Every O(interval) seconds reads C(systemctl show) (ActiveState, SubState, Result, MainPID, NRestarts,
    ExecMainStatus, ExecMainCode, InvocationID, ControlGroup), counts scheduler processes under MainPID in C(/proc)
    (C(sglang::scheduler_TP<n>); plain C(sglang::scheduler) at tp 1), sums the tree's I/O and page faults, reads the
    GPU memory and utilization of the unit's cgroup members (C(nvidia-smi), when present), reads the journal of the
    current invocation incrementally (by cursor; after the ready line only new entries) and probes C(GET /health).
    Each call is time-boxed by O(call_timeout).
  - Reports one verdict - starting, loading (i/N, %), capturing (KV pool, CUDA graphs; prefill first, then decode),
    allocating (the HiCache host pool), warming, ready, crashed (phase, exit status, first traceback), restart_loop,
    stalled, timeout - and the history of verdict changes.
  - C(crashed) as soon as the main process is gone with a non-success result (Result other than success, or MainPID 0
    with ExecMainCode set), whatever ActiveState says (C(deactivating) while systemd kills the cgroup,
    C(activating/auto-restart) before Restart=on-failure starts it again); one restart while waiting is C(crashed) with
    the phase of the run that ended, two or more are C(restart_loop). Never C(loading) without every scheduler alive.
  - C(loading) needs all O(tp_size) schedulers alive. Evidence of life is change within O(stall_timeout) - new log
    output, I/O and page faults of the process tree, or GPU memory of its processes moving (journald shows tqdm's
    carriage-return progress only when the bar ends; CUDA graph capture logs nothing for minutes). GPUs busy with
    nothing moving is C(stalled), with a hint at ACS/IOMMU (an NCCL all-reduce that never completes).
  - After the ready line, C(/health) other than 200 is C(busy) while the stats-logging rank's C(Prefill batch) /
    C(Decode batch) lines move (a long prefill holds every token, and C(/health)'s one-token generation with them, as in
    sgl-project/sglang#22511), C(unhealthy) while they do not, and C(stalled) once nothing but the probes' own echoes
    (their access lines, C(Health check failed)) was logged for O(stall_timeout); a hang SGLang's scheduler watchdog
    ends (C(Scheduler watchdog timeout), then SIGQUIT) is C(crashed) with that line as the error.
  - Succeeds on C(ready) and on C(busy) (serving, with a warning saying so); every other terminal verdict fails the
    task with the reason.
  - Never changes anything.
options:
  unit:
    description: systemd unit name, for example C(sglang@kimi.service).
    type: str
    required: true
  url:
    description: Base URL of the server on this node.
    type: str
    default: http://127.0.0.1:30000
  tp_size:
    description: Scheduler processes expected on this node (tensor-parallel ranks hosted here).
    type: int
    required: true
  timeout:
    description: Seconds to wait for C(ready) before the verdict C(timeout).
    type: float
    default: 1800
  interval:
    description: Seconds from the start of one observation to the start of the next (an observation that took longer is followed at once).
    type: float
    default: 1.0
  stall_timeout:
    description: Seconds without new log output, while the unit is alive, before the verdict C(stalled).
    type: float
    default: 300
  health_check_timeout:
    description:
      - The server's own bound on C(/health) (C(SGLANG_HEALTH_CHECK_TIMEOUT), 20 s in SGLang 0.5.23); C(/health) is a
        one-token generation that answers 503 when the scheduler sent nothing back for this long (a long prefill, a
        hang), never later.
    type: float
    default: 20
  probe_timeout:
    description:
      - Seconds for one C(/health) request; default O(health_check_timeout) + 5. It must exceed O(health_check_timeout);
        a probe that gives up earlier fails on its own timeout while the server still works on it, and the next probe
        piles onto the scheduler (sgl-project/sglang#35884). Probes never overlap; one at a time, each awaited.
    type: float
  call_timeout:
    description: Seconds any one observation call (systemctl, journalctl, nvidia-smi, a C(/proc) read) may take before
      it is abandoned for this poll.
    type: float
    default: 10
  kernel_log_match:
    description:
      - journalctl matches that select the kernel log, read after a crash for the OOM killer's kills of the unit's
        processes. C(_TRANSPORT=kernel) is what C(journalctl -k) reads; the sandbox feeds kernel lines with
        C(logger -t kernel), so it uses C(SYSLOG_IDENTIFIER=kernel).
    type: list
    elements: str
    default: [_TRANSPORT=kernel]
  group:
    description:
      - On rank 0 of a multi-node group, the other nodes of the group (C(name), C(node_rank), C(address) their ranks
        connect from). When the verdict is C(stalled) or C(timeout) in phase C(init_parallel), rank 0 waits for ranks
        that never joined the rendezvous; the verdict then names each node with no connection to O(dist_init_port)
        (RV(rendezvous)).
    type: list
    elements: dict
    default: []
  dist_init_port:
    description: The C(--dist-init-addr) port (torch's TCPStore on rank 0, which every rank of the group connects to).
    type: int
  log_level:
    description: The server's C(--log-level). At C(warning) and above SGLang logs no phase line (they are INFO); the
      verdict then rests on the process tree and HTTP and its reason says so.
    type: str
    default: info
attributes:
  check_mode:
    support: full
    description: Read-only (journal, systemd and HTTP); runs the same in check mode.
"""

EXAMPLES = r"""
- name: Wait until the Kimi-K2.5 server answers /health with every scheduler alive
  sglang_health:
    unit: sglang@kimi.service
    tp_size: 8
    timeout: 1800
  register: smoke_health_verdict
"""

RETURN = r"""
verdict:
  description: Final verdict (ready, busy, crashed, restart_loop, stalled, timeout).
  returned: always
  type: str
  sample: ready
stopped_at:
  description: For C(stalled), the last line the server logged (the probes' echoes left out) - where it stopped.
  returned: when stalled
  type: str
phase:
  description: Startup phase of the least advanced rank (starting, init_parallel, loading_weights, weights_loaded,
    kv_cache, prefill_graph_capture, decode_graph_capture, hicache_alloc, http_server, warmup, ready); for C(crashed)
    the phase it crashed in (also C(config) for a bad config.json, C(tokenizer_load) when the tokenizer or processor
    failed to load, C(serving) for a failure after ready).
  returned: always
  type: str
progress:
  description: Last weight-loading progress (i, n, pct, format multithread|legacy, line).
  returned: always
  type: dict
  sample: {i: 37, n: 64, pct: 58, format: multithread}
exit_status:
  description: How the process ended (code, signal, text), when known.
  returned: always
  type: dict
  sample: {code: 1, signal: null, text: exit code 1}
traceback:
  description: The first Python traceback of the run (later echoes dropped).
  returned: always
  type: str
elapsed_s:
  description: Seconds spent waiting.
  returned: always
  type: float
history:
  description:
    - Verdict changes, oldest first (verdict, at ISO-8601 UTC, at_unix seconds since the epoch, elapsed_s, phase,
      progress C(i/n)); while C(loading), each change of the progress is an entry too.
  returned: always
  type: list
  elements: dict
http_code:
  description: Last C(/health) status code; null when nothing answered.
  returned: always
  type: int
reason:
  description: Why the verdict was given.
  returned: always
  type: str
schedulers:
  description: Scheduler processes alive at the last observation.
  returned: always
  type: int
error:
  description: The first error line (the first traceback's last line, a dead-rank line or another fatal line).
  returned: always
  type: str
bind_failed:
  description:
    - The HTTP server could not bind its port (uvicorn's C(ERROR) line; the process lives on for the warmup's two
      minutes, the verdict does not wait for it). Keys C(address), C(port), C(error); null otherwise.
  returned: always
  type: dict
  sample: {address: 127.0.0.1, port: 30000, error: "[Errno 98] error while attempting to bind on address ..."}
port_holders:
  description:
    - With RV(bind_failed), who listens on that port now (C(address), C(port), C(pid), C(process), C(uid), C(user));
      C(pid) is null when this user cannot see the holder's sockets.
  returned: always
  type: list
  elements: dict
oom_kills:
  description:
    - For a crash, the kernel OOM killer's kills of the unit's processes since it started, from the kernel log (the
      journal entries I(kernel_log_match) selects). Keys C(pid), C(task), C(constraint) (C(CONSTRAINT_MEMCG) a memory
      cgroup's limit, C(CONSTRAINT_NONE) the whole host), C(memcg), C(anon_rss_kib), C(file_rss_kib), C(shmem_rss_kib).
  returned: always
  type: list
  elements: dict
gpu_holders:
  description:
    - When SGLang refused to start because a GPU's free memory was unbalanced (C(The memory capacity is
      unbalanced)), the compute processes on the GPUs that are not the unit's (C(gpu) index, C(pid), C(process_name),
      C(used_memory_mib)), from nvidia-smi.
  returned: always
  type: list
  elements: dict
rendezvous:
  description:
    - With O(group), for a verdict in phase C(init_parallel) on rank 0, the rendezvous as this node sees it -
      C(port), C(connections) (established connections to it, per remote address) and C(missing) (each node of
      O(group) with none, each with C(name), C(node_rank), C(address) and the C(addresses) it resolves to); null
      otherwise.
  returned: always
  type: dict
  sample: {port: 50000, connections: {10.0.0.1: 8}, missing: [{name: gpu-1, node_rank: 1, address: gpu-1,
           addresses: [10.0.0.2]}]}
journal:
  description:
    - Whether the journal of the watched runs is complete. C(complete) is false when journald wrote its own
      C(Suppressed N messages from <unit>) notice for one of them, null when it may be incomplete (a run's lines
      reached the unit's LogRateLimitBurst within one interval, and journald reports drops only when the unit logs
      again) or cannot be told. Also C(suppressed) (lines dropped), C(notices), C(reason) and C(warning) (the
      reason when the log is or may be incomplete, added to the failure message; null otherwise).
  returned: always
  type: dict
  sample: {complete: false, suppressed: 955, notices: [{dropped: 955, invocation_id: 62fc..., at: "2026-12-01T10:02:52Z"}],
           reason: "journal incomplete: journald suppressed 955 line(s) ..."}
"""

import socket
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.blackwell.sglang.plugins.module_utils.health._journal_notices import journal_completeness
from ansible_collections.blackwell.sglang.plugins.module_utils.host.listeners import established_peers, listeners
from ansible_collections.blackwell.sglang.plugins.module_utils.health.sglang_log import parse_log
from ansible_collections.blackwell.sglang.plugins.module_utils.health.sglang_log_text import text_re
from ansible_collections.blackwell.sglang.plugins.module_utils.health.sglang_journal import oom_kills
from ansible_collections.blackwell.sglang.plugins.module_utils.health.sglang_observe import UnitObserver, foreign_gpu_processes
from ansible_collections.blackwell.sglang.plugins.module_utils.host.bounded import bounded, run_bounded
from ansible_collections.blackwell.sglang.plugins.module_utils.health.sglang_verdict import classify, crash_advice

MEMORY_UNBALANCED_RE = text_re("memory_unbalanced")
HOST_OOM_ADVICE = ("lower what the server pins in host memory (--hicache-size / --hicache-ratio: the HiCache pool), "
                   "raise the unit's memory limit (MemoryMax, or the node's) or free the host's RAM; the same flags "
                   "on the same host run out again")

ADVICE = {
    "restart_loop": "systemd keeps restarting the unit: check TimeoutStartSec (a 10-minute load needs more than the "
                    "90 s default) and the first traceback",
    "stalled": "inspect the schedulers with `py-spy dump --pid <pid>` (NCCL init hangs, storage stalls)",
    "timeout": "raise timeout if the model only loads slowly, otherwise look at the phase it stopped in",
}


# How long a crash without a cause waits for the journal once (journald stores a stream's lines asynchronously).
SETTLE_S = 1.0


def probe_timeout(module):
    """The /health probe's timeout: O(probe_timeout), default the server's bound + 5; refused at or below the bound."""
    p = module.params
    bound = float(p["health_check_timeout"])
    if p["probe_timeout"] is None:
        return bound + 5.0
    if float(p["probe_timeout"]) <= bound:
        module.fail_json(msg="probe_timeout %g s does not exceed the server's own /health bound (health_check_timeout, "
                         "SGLANG_HEALTH_CHECK_TIMEOUT) of %g s: a busy server's answer would come after the probe gave "
                         "up; use %g or more" % (float(p["probe_timeout"]), bound, bound + 5.0))
    return float(p["probe_timeout"])


def make_observer(module):
    p = module.params
    return UnitObserver(p["unit"], p["url"], probe_timeout(module),
                        systemctl=module.get_bin_path("systemctl", required=True),
                        journalctl=module.get_bin_path("journalctl", required=True),
                        nvidia_smi=module.get_bin_path("nvidia-smi"), call_timeout=p["call_timeout"])


def observe(module, observer, previous=None):
    """One observation; a unit systemd does not know fails the task with systemctl's words."""
    try:
        return observer.observe(previous, parse=parse_log)
    except RuntimeError as exc:
        module.fail_json(msg="%s; expected the unit to be installed" % exc)


def wait(module, clock=None, sleep=None, wallclock=None):
    """Observe every interval until classify() gives a terminal verdict; return it with history."""
    clock, sleep, wallclock = clock or time.monotonic, sleep or time.sleep, wallclock or time.time
    p = module.params
    observer = make_observer(module)
    started = clock()
    history, transitions, verdict = [], [], None
    settled = False
    while True:
        round_started = clock()
        obs = observe(module, observer, history[-1] if history else None)
        obs["t"] = clock() - started
        history.append(obs)
        verdict = classify(history, p["tp_size"], stall_timeout=p["stall_timeout"], timeout=p["timeout"],
                           log_level=p["log_level"], health_check_timeout=p["health_check_timeout"])
        if verdict["verdict"] == "crashed" and not verdict["error"] and not settled:
            # systemd saw the process end before journald stored its last words (the failing rank's traceback is
            # written an instant before the tree is killed): read once more, SETTLE_S later, before judging the cause
            settled = True
            sleep(SETTLE_S)
            continue
        progress = verdict.get("progress")
        progress = ("%d/%d" % (progress["i"], progress["n"])) if progress else None
        # a new verdict, or a load that moved on: each redraw of the bar the journal shows is one entry
        if not transitions or transitions[-1]["verdict"] != verdict["verdict"] or (
                verdict["verdict"] == "loading" and transitions[-1]["progress"] != progress):
            now = wallclock()
            transitions.append({
                "verdict": verdict["verdict"], "elapsed_s": round(obs["t"], 1), "phase": verdict.get("phase"),
                "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now)), "at_unix": round(now, 2),
                "progress": progress,
            })
        if verdict["terminal"]:
            break
        # Every interval, counted from the start of the round: the observation itself takes time (SGLang 0.5.23's
        # /health alone polls for its one-token answer once a second), so a full interval after it would see the
        # server's ready line one observation later.
        sleep(max(0.0, p["interval"] - (clock() - round_started)))
    verdict["seen_pids"] = sorted(set(pid for o in history for pid in (o.get("pids") or [])))
    verdict["started_at"] = next((o.get("start_timestamp") for o in history if o.get("start_timestamp")), None)
    verdict["elapsed_s"] = round(history[-1]["t"], 1)
    verdict["history"] = transitions
    verdict["invocation_ids"] = [o["invocation_id"] for o in history if o.get("invocation_id")]
    return verdict


def failure_message(unit, v, journal_warning=None):
    """One line for a verdict other than ready: unit, verdict, time, the reason, then the phase, the exit and the first
    error only where the reason does not already say them (each once), the journal's warning, and one hint chosen by
    the error and the phase (a port already in use gets the port's hint, never the capture's)."""
    msg = "%s: %s after %.0f s: %s" % (unit, v["verdict"], v["elapsed_s"], v["reason"])
    if v["phase"] and ("phase %s" % v["phase"]) not in msg:
        msg += "; phase %s" % v["phase"]
    if v["exit_status"] and v["exit_status"]["text"] not in msg:
        msg += "; %s" % v["exit_status"]["text"]
    if v["error"] and v["error"] not in msg:
        msg += "; first error: %s" % v["error"]
    for holder in v.get("gpu_holders") or []:
        msg += "; GPU %s holds %s MiB of PID %d (%s), not this unit's" % (
            holder["gpu"], holder["used_memory_mib"], holder["pid"], holder["process_name"] or "?")
    for holder in v.get("port_holders") or []:
        msg += "; port %d is held by %s (user %s)" % (
            holder["port"], ("pid %d, %s" % (holder["pid"], holder["process"])) if holder["pid"] else
            "a process this user cannot see", holder["user"] or holder["uid"])
    kills = v.get("oom_kills") or []
    if kills:
        msg += "; the kernel's OOM killer killed %s in %s (%s): host memory ran out, not GPU memory" % (
            ", ".join("PID %d (%s%s)" % (k["pid"], k["task"], (", anon-rss %.1f GiB" % (k["anon_rss_kib"] / 1048576.0))
                                         if k["anon_rss_kib"] is not None else "") for k in kills),
            kills[0]["memcg"], kills[0]["constraint"])
    if journal_warning:
        msg += "; " + journal_warning
    if kills:
        msg += "; " + HOST_OOM_ADVICE
    elif v["verdict"] == "crashed":
        msg += "; " + crash_advice(v["phase"], v["error"])
    elif ADVICE.get(v["verdict"]):
        msg += "; " + ADVICE[v["verdict"]]
    return msg


def resolve(address, timeout):
    """The IP addresses ``address`` resolves to (sorted; empty when it does not resolve within ``timeout``)."""
    def lookup():
        return sorted(set(info[4][0] for info in socket.getaddrinfo(address, None, 0, socket.SOCK_STREAM)))
    return bounded(lookup, timeout, []) or []


def rendezvous(group, port, timeout, proc="/proc"):
    """Which nodes of ``group`` hold no connection to rank 0's ``--dist-init-addr`` port (see RETURN)."""
    peers = established_peers(port, proc)
    connections = {}
    for peer in peers:
        connections[peer] = connections.get(peer, 0) + 1
    missing = []
    for node in group:
        addresses = resolve(str(node.get("address") or node.get("name")), timeout)
        if not any(a in connections for a in addresses):
            missing.append({"name": node.get("name"), "node_rank": node.get("node_rank"),
                            "address": node.get("address"), "addresses": addresses})
    return {"port": port, "connections": connections, "missing": missing}


def rendezvous_message(r):
    """What rank 0 waits for, in words (empty when every node joined)."""
    if not r or not r["missing"]:
        return ""
    nodes = ", ".join("%s (node rank %s, %s)" % (
        m["name"], m["node_rank"], ", ".join(m["addresses"]) or "%s does not resolve" % m["address"])
        for m in r["missing"])
    return ("rank 0 waits in init_parallel for ranks that never joined the rendezvous on port %d (%d connection(s), "
            "none from %s): start SGLang there within rank 0's --dist-timeout (torch's 600 s by default), and check "
            "that it reaches this node's --dist-init-addr (address, firewall, NCCL/GLOO_SOCKET_IFNAME)"
            % (r["port"], sum(r["connections"].values()), nodes))


def main():
    module = AnsibleModule(
        argument_spec=dict(
            unit=dict(type="str", required=True),
            url=dict(type="str", default="http://127.0.0.1:30000"),
            tp_size=dict(type="int", required=True),
            timeout=dict(type="float", default=1800.0),
            interval=dict(type="float", default=1.0),
            stall_timeout=dict(type="float", default=300.0),
            health_check_timeout=dict(type="float", default=20.0),
            probe_timeout=dict(type="float"),
            log_level=dict(type="str", default="info"),
            call_timeout=dict(type="float", default=10.0),
            kernel_log_match=dict(type="list", elements="str", default=["_TRANSPORT=kernel"]),
            group=dict(type="list", elements="dict", default=[]),
            dist_init_port=dict(type="int"),
        ),
        supports_check_mode=True,
    )
    probe_timeout(module)  # refuses a timeout within the server's own bound before anything is watched
    v = wait(module)
    if v["verdict"] in ("crashed", "restart_loop"):  # killed for host memory? (the kernel log says whom and where)
        v["oom_kills"] = oom_kills(module.get_bin_path("journalctl"), module.params["kernel_log_match"],
                                   v.get("started_at"), module.params["unit"], module.params["call_timeout"],
                                   v.get("seen_pids"))
    if v.get("bind_failed"):  # who holds the port now (an old server, another service)
        v["port_holders"] = listeners([v["bind_failed"]["port"]])
    v["rendezvous"] = None
    p = module.params
    if p["group"] and p["dist_init_port"] and v["verdict"] in ("stalled", "timeout") and v["phase"] == "init_parallel":
        v["rendezvous"] = rendezvous(p["group"], p["dist_init_port"], p["call_timeout"])
        waits = rendezvous_message(v["rendezvous"])
        if waits:
            v["reason"] = "%s; %s" % (waits, v["reason"])
    if v["verdict"] == "crashed" and v["error"] and MEMORY_UNBALANCED_RE.search(v["error"]):
        # which GPU another process holds, and whose process it is (not one the watch saw in the unit's cgroup)
        v["gpu_holders"] = foreign_gpu_processes(module.get_bin_path("nvidia-smi"), v["seen_pids"],
                                                 module.params["call_timeout"])
    result = dict(changed=False, verdict=v["verdict"], phase=v["phase"], progress=v["progress"],
                  exit_status=v["exit_status"], traceback=v["traceback"], error=v["error"],
                  elapsed_s=v["elapsed_s"], history=v["history"], http_code=v["http_code"], reason=v["reason"],
                  schedulers=v["schedulers"], bind_failed=v.get("bind_failed"),
                  port_holders=v.get("port_holders") or [], gpu_holders=v.get("gpu_holders") or [],
                  oom_kills=v.get("oom_kills") or [], rendezvous=v["rendezvous"])
    if v.get("stopped_at"):
        result["stopped_at"] = v["stopped_at"]
    result["journal"] = journal_completeness(lambda argv: run_bounded(argv, module.params["call_timeout"]),
                                             module.get_bin_path("journalctl"),
                                             module.get_bin_path("systemctl"), module.params["unit"],
                                             v["invocation_ids"])
    if v["verdict"] not in ("ready", "busy"):
        module.fail_json(msg=failure_message(module.params["unit"], v, result["journal"]["warning"]), **result)
    if v["verdict"] == "busy":
        module.warn("%s is serving but busy: %s" % (module.params["unit"], v["reason"]))
    if result["journal"]["warning"]:
        module.warn(result["journal"]["warning"])
    module.exit_json(**result)


if __name__ == "__main__":
    main()
