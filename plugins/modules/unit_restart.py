#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Ansible module: restart a systemd unit, and say within a bound why a stop cannot finish."""

DOCUMENTATION = r"""
module: unit_restart
short_description: Restart a systemd unit; a stop that cannot finish is reported within a bound, with its PIDs
extends_documentation_fragment:
  - blackwell.sglang.common
description:
  - Queues C(systemctl restart --no-block) (after C(systemctl daemon-reload) when asked) and watches C(systemctl
    show) until the unit runs again under a new C(InvocationID). C(systemctl restart) itself, and
    M(ansible.builtin.systemd_service), wait for the job without a word, as long as the stop takes.
  - A stop that drains (C(deactivating/stop-sigterm)) may take the unit's C(TimeoutStopSec); that is waited for. Once
    systemd has sent SIGKILL (C(stop-sigkill), C(final-sigkill)) nothing is left to wait for but the processes to
    die; if the unit sits there longer than I(stuck_after) seconds, or the whole stop lasts longer than
    C(TimeoutStopSec) + I(stuck_after), the module fails and names what is left in the unit's cgroup - each PID, its
    command, its state (C(D) is uninterruptible sleep in the kernel; a process stuck in the GPU driver ignores
    SIGKILL until the kernel call returns) and its kernel wait channel - or says that the cgroup is empty and systemd
    did not notice (no empty-cgroup notification on cgroup v1 inside a container, so systemd waits out C(TimeoutStopSec)).
  - A unit that fails to start again is reported with its state and result.
  - Check mode reports the restart it would make and does nothing.
options:
  name:
    description: The unit, e.g. C(sglang-kimi.service).
    type: str
    required: true
  daemon_reload:
    description: Run C(systemctl daemon-reload) first (the unit file changed).
    type: bool
    default: false
  stuck_after:
    description: Seconds a stop may sit after SIGKILL (and past C(TimeoutStopSec)) before it is reported.
    type: float
    default: 30
  poll_interval:
    description: Seconds between two looks at the unit.
    type: float
    default: 0.5
"""

EXAMPLES = r"""
- name: Restart SGLang, reporting within 30 s of SIGKILL why it cannot stop
  blackwell.sglang.unit_restart:
    name: sglang-kimi.service
    daemon_reload: true
"""

RETURN = r"""
elapsed_s:
  description: Seconds from the restart request to the unit running again (or to the failure).
  returned: always
  type: float
states:
  description: Each state the unit passed through (C(ActiveState/SubState)), with the seconds at which it was first seen.
  returned: always
  type: list
  elements: dict
  sample: [{state: deactivating/stop-sigterm, at_s: 0.0}, {state: active/running, at_s: 6.5}]
left:
  description:
    - When the stop could not finish, the processes left in the unit's cgroup (C(pid), C(command), C(state),
      C(wchan)); empty when the cgroup is empty.
  returned: always
  type: list
  elements: dict
invocation_id:
  description: The unit's new C(InvocationID).
  returned: success
  type: str
"""

import os
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.blackwell.sglang.plugins.module_utils.host.unit_cgroup import cgroup_pids, show_fields

PROPERTIES = ("ActiveState", "SubState", "Result", "InvocationID", "ControlGroup", "TimeoutStopUSec", "MainPID")
KILLED = ("stop-sigkill", "final-sigkill")
STATE_NAMES = {"D": "uninterruptible sleep in the kernel", "Z": "exited, not yet reaped", "R": "running",
               "S": "sleeping", "T": "stopped", "t": "traced"}


def seconds(value):
    """systemd's time span (C(TimeoutStopUSec=16min), C(1min 30s), C(500ms), C(infinity)) in seconds, None for
    infinity or nothing."""
    value = (value or "").strip()
    if not value or value == "infinity":
        return None
    units = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "min": 60.0, "h": 3600.0, "d": 86400.0}
    total = 0.0
    for part in value.split():
        number = part.rstrip("abcdefghijklmnopqrstuvwxyz")
        unit = part[len(number):] or "s"
        try:
            total += float(number) * units[unit]
        except (KeyError, ValueError):
            return None
    return total


def describe_process(pid, proc="/proc"):
    """PID, command, state and wait channel of one process, from /proc."""
    base = os.path.join(proc, str(pid))

    def read(name):
        try:
            with open(os.path.join(base, name), "rb") as fh:
                return fh.read().decode("utf-8", "replace")
        except (IOError, OSError):
            return ""
    stat = read("stat")
    state = stat.rsplit(")", 1)[1].split()[0] if ")" in stat else "?"
    command = " ".join(part for part in read("cmdline").split("\0") if part)[:200] or read("comm").strip()
    wchan = read("wchan").strip()
    return {"pid": pid, "command": command, "state": state, "wchan": wchan if wchan not in ("", "0") else None}


def stuck_message(unit, show, elapsed, since_kill, left, timeout_stop):
    state = "%s/%s" % (show.get("ActiveState"), show.get("SubState"))
    msg = "%s: the restart cannot finish: the stop has run %.0f s and sits in %s" % (unit, elapsed, state)
    if since_kill is not None:
        msg += " %.0f s after systemd's SIGKILL" % since_kill
    if left:
        msg += "; left in its cgroup: " + ", ".join(
            "PID %d (%s) state %s (%s)%s" % (
                p["pid"], p["command"], p["state"], STATE_NAMES.get(p["state"], "?"),
                (", in the kernel at %s" % p["wchan"]) if p["wchan"] else "")
            for p in left)
        if any(p["state"] == "D" for p in left):
            msg += ("; a process in uninterruptible sleep ignores SIGKILL until its kernel call returns: a process "
                    "stuck in the GPU driver (look for NVRM Xid lines in the kernel log) is freed only by the driver or "
                    "a reboot")
    else:
        msg += ("; its cgroup holds no process, yet systemd has not noticed (it gets no empty-cgroup notification on "
                "cgroup v1 inside a container) and waits out TimeoutStopSec (%s)"
                % (("%.0f s" % timeout_stop) if timeout_stop is not None else "infinity"))
    return msg


def main():
    module = AnsibleModule(
        argument_spec=dict(
            name=dict(type="str", required=True),
            daemon_reload=dict(type="bool", default=False),
            stuck_after=dict(type="float", default=30.0),
            poll_interval=dict(type="float", default=0.5),
        ),
        supports_check_mode=True,
    )
    p = module.params
    unit = p["name"]
    if module.check_mode:
        module.exit_json(changed=True, elapsed_s=0.0, states=[], left=[])
    systemctl = module.get_bin_path("systemctl", required=True)

    def run(argv):
        rc, out, err = module.run_command([systemctl] + argv)
        if rc != 0:
            module.fail_json(msg="systemctl %s failed (exit %d): %s" % (" ".join(argv), rc, (err or out).strip()))
        return out

    def show():
        return show_fields(run(["show", unit, "-p", ",".join(PROPERTIES)]))

    if p["daemon_reload"]:
        run(["daemon-reload"])
    before = show()
    started = time.monotonic()
    run(["restart", "--no-block", unit])
    states, killed_at = [], None
    timeout_stop = seconds(before.get("TimeoutStopUSec"))
    while True:
        now = show()
        elapsed = time.monotonic() - started
        state = "%s/%s" % (now.get("ActiveState"), now.get("SubState"))
        if not states or states[-1]["state"] != state:
            states.append({"state": state, "at_s": round(elapsed, 1)})
        new_run = now.get("InvocationID") and now.get("InvocationID") != before.get("InvocationID")
        if new_run and now.get("ActiveState") in ("active", "activating", "reloading"):
            module.exit_json(changed=True, elapsed_s=round(elapsed, 1), states=states, left=[],
                             invocation_id=now.get("InvocationID"))
        if now.get("ActiveState") == "failed" and (new_run or killed_at is not None or len(states) > 1):
            module.fail_json(msg="%s: failed to start again (%s, Result=%s)" % (unit, state, now.get("Result")),
                             elapsed_s=round(elapsed, 1), states=states, left=[])
        if now.get("SubState") in KILLED:
            killed_at = killed_at if killed_at is not None else elapsed
        since_kill = (elapsed - killed_at) if killed_at is not None else None
        over_stop = timeout_stop is not None and elapsed > timeout_stop + p["stuck_after"]
        if (since_kill is not None and since_kill > p["stuck_after"]) or over_stop:
            left = [describe_process(pid) for pid in cgroup_pids(now.get("ControlGroup"))]
            module.fail_json(msg=stuck_message(unit, now, elapsed, since_kill, left, timeout_stop),
                             elapsed_s=round(elapsed, 1), states=states, left=left)
        time.sleep(p["poll_interval"])


if __name__ == "__main__":
    main()
