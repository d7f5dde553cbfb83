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
description:
  - Every O(interval) seconds reads C(systemctl show) (ActiveState, SubState, MainPID, NRestarts, ExecMainStatus,
    ExecMainCode, InvocationID), counts C(sglang::scheduler_TP*) processes under MainPID in C(/proc), reads the journal
    of the current invocation and probes C(GET /health).
  - Reports one verdict - starting, loading (i/N, %), capturing, warming, ready, crashed (phase, exit status, first
    traceback), restart_loop, stalled, timeout - and the history of verdict changes.
  - Succeeds only on C(ready); every other terminal verdict fails the task with the reason.
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
    description: Seconds between observations.
    type: float
    default: 1.0
  stall_timeout:
    description: Seconds without new log output, while the unit is alive, before the verdict C(stalled).
    type: float
    default: 300
  probe_timeout:
    description: Seconds for one C(/health) request. C(/health) runs a one-token generation (~1 s), so values below 5
      are raised to 5.
    type: float
    default: 5
attributes:
  check_mode:
    support: full
author:
  - SGLang deployment project
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
  description: Final verdict.
  returned: always
  type: str
  sample: ready
phase:
  description: Last startup phase named in the log (launching, init_distributed, loading_weights, weights_loaded,
    kv_cache, capturing_cuda_graph, cuda_graph_captured, http_server, ready).
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
  description: Verdict changes, oldest first (verdict, at ISO-8601 UTC, elapsed_s, phase, progress).
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
"""

import os
import time
from urllib.error import HTTPError, URLError
from urllib.request import urlopen

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.sglang_log import classify, parse_log

SHOW_PROPERTIES = ("ActiveState", "SubState", "MainPID", "NRestarts", "ExecMainStatus", "ExecMainCode",
                   "InvocationID", "ExecMainStartTimestamp")
SCHEDULER_TITLE = "sglang::scheduler_TP"
ADVICE = {
    "crashed": "read the traceback; a crash at capturing_cuda_graph usually needs a lower --mem-fraction-static or "
               "--cuda-graph-max-bs-decode (restarting with the same flags fails again), one at loading_weights a "
               "model_stage re-verify",
    "restart_loop": "systemd keeps restarting the unit: check TimeoutStartSec (a 10-minute load needs more than the "
                    "90 s default) and the first traceback",
    "stalled": "inspect the schedulers with `py-spy dump --pid <pid>` (NCCL init hangs, storage stalls)",
    "timeout": "raise timeout if the model only loads slowly, otherwise look at the phase it stopped in",
}


def parse_show(text):
    """``systemctl show -p ...`` output (KEY=VALUE lines) -> observation fields."""
    raw = {}
    for line in (text or "").splitlines():
        if "=" in line:
            key, value = line.split("=", 1)
            raw[key.strip()] = value.strip()

    def num(key):
        try:
            return int(raw.get(key, ""))
        except ValueError:
            return None

    return {
        "active_state": raw.get("ActiveState"), "sub_state": raw.get("SubState"),
        "main_pid": num("MainPID") or 0, "n_restarts": num("NRestarts") or 0,
        "exec_main_status": num("ExecMainStatus"), "exec_main_code": num("ExecMainCode"),
        "invocation_id": raw.get("InvocationID") or None, "start_timestamp": raw.get("ExecMainStartTimestamp") or None,
    }


def count_schedulers(main_pid, proc_root="/proc"):
    """Count processes under ``main_pid`` whose cmdline starts with ``sglang::scheduler_TP``
    (setproctitle titles, 0.5.x). Reads ``<proc_root>/*/stat`` for parent links. Returns int."""
    if not main_pid:
        return 0
    children = {}
    try:
        entries = os.listdir(proc_root)
    except OSError:
        return 0
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(os.path.join(proc_root, entry, "stat")) as handle:
                stat = handle.read()
        except (IOError, OSError):
            continue
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses
        try:
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
        except (IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    count, stack, seen = 0, list(children.get(main_pid, [])), set()
    while stack:
        pid = stack.pop()
        if pid in seen:
            continue
        seen.add(pid)
        stack.extend(children.get(pid, []))
        try:
            with open(os.path.join(proc_root, str(pid), "cmdline"), "rb") as handle:
                cmdline = handle.read().decode("utf-8", "replace")
        except (IOError, OSError):
            continue
        if cmdline.lstrip().startswith(SCHEDULER_TITLE):
            count += 1
    return count


def probe_health(url, timeout):
    """GET ``url``/health. Returns (code int|None, latency_s float, error str|None)."""
    started = time.time()
    try:
        response = urlopen(url.rstrip("/") + "/health", timeout=timeout)
        code = response.getcode()
        response.read()
        return code, time.time() - started, None
    except HTTPError as exc:
        return exc.code, time.time() - started, None
    except (URLError, OSError, ValueError) as exc:
        return None, time.time() - started, str(getattr(exc, "reason", exc))


def read_journal(module, unit, invocation_id, start_timestamp):
    cmd = [module.get_bin_path("journalctl", required=True), "-u", unit, "-o", "cat", "--no-pager"]
    if invocation_id:
        cmd.append("_SYSTEMD_INVOCATION_ID=%s" % invocation_id)
    elif start_timestamp:
        parts = start_timestamp.split()
        # "Mon 2026-05-18 10:00:00 UTC" -> "2026-05-18 10:00:00"
        cmd += ["--since", " ".join(p for p in parts if p[:1].isdigit())]
    rc, out, err = module.run_command(cmd)
    return out if rc == 0 else ""


def observe(module, unit, url, probe_timeout):
    systemctl = module.get_bin_path("systemctl", required=True)
    rc, out, err = module.run_command([systemctl, "show", unit, "-p", ",".join(SHOW_PROPERTIES)])
    if rc != 0:
        module.fail_json(msg="systemctl show %s failed (exit %d): %s; expected the unit to be installed" %
                         (unit, rc, (err or out).strip()))
    obs = parse_show(out)
    obs["schedulers"] = count_schedulers(obs["main_pid"])
    obs["log"] = parse_log(read_journal(module, unit, obs["invocation_id"], obs["start_timestamp"]))
    obs["http_code"], obs["http_latency_s"], obs["http_error"] = probe_health(url, probe_timeout)
    return obs


def wait(module, clock=None, sleep=None, wallclock=None):
    """Observe every interval until classify() gives a terminal verdict; return it with history."""
    clock, sleep, wallclock = clock or time.monotonic, sleep or time.sleep, wallclock or time.time
    p = module.params
    probe_timeout = max(5.0, float(p["probe_timeout"]))
    started = clock()
    history, transitions, verdict = [], [], None
    while True:
        obs = observe(module, p["unit"], p["url"], probe_timeout)
        obs["t"] = clock() - started
        history.append(obs)
        verdict = classify(history, p["tp_size"], stall_timeout=p["stall_timeout"], timeout=p["timeout"])
        progress = verdict.get("progress")
        if not transitions or transitions[-1]["verdict"] != verdict["verdict"]:
            transitions.append({
                "verdict": verdict["verdict"], "elapsed_s": round(obs["t"], 1), "phase": verdict.get("phase"),
                "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(wallclock())),
                "progress": ("%d/%d" % (progress["i"], progress["n"])) if progress else None,
            })
        if verdict["terminal"]:
            break
        sleep(p["interval"])
    verdict["elapsed_s"] = round(history[-1]["t"], 1)
    verdict["history"] = transitions
    return verdict


def main():
    module = AnsibleModule(
        argument_spec=dict(
            unit=dict(type="str", required=True),
            url=dict(type="str", default="http://127.0.0.1:30000"),
            tp_size=dict(type="int", required=True),
            timeout=dict(type="float", default=1800.0),
            interval=dict(type="float", default=1.0),
            stall_timeout=dict(type="float", default=300.0),
            probe_timeout=dict(type="float", default=5.0),
        ),
        supports_check_mode=True,
    )
    v = wait(module)
    result = dict(changed=False, verdict=v["verdict"], phase=v["phase"], progress=v["progress"],
                  exit_status=v["exit_status"], traceback=v["traceback"], error=v["error"],
                  elapsed_s=v["elapsed_s"], history=v["history"], http_code=v["http_code"], reason=v["reason"],
                  schedulers=v["schedulers"])
    if v["verdict"] != "ready":
        msg = "%s: %s after %.0f s: %s" % (module.params["unit"], v["verdict"], v["elapsed_s"], v["reason"])
        if v["phase"]:
            msg += "; phase %s" % v["phase"]
        if v["exit_status"]:
            msg += "; %s" % v["exit_status"]["text"]
        if v["error"]:
            msg += "; first error: %s" % v["error"]
        msg += "; " + ADVICE.get(v["verdict"], "")
        module.fail_json(msg=msg, **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
