#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: rollout_lock
short_description: One rollout at a time on a fleet - a lock file on the router host, with its owner and age
extends_documentation_fragment:
  - blackwell.sglang.common
description:
  - C(state=present) takes the lock by creating O(path) exclusively (C(O_CREAT|O_EXCL)), holding O(owner) and the
    time. When another owner holds it, the task fails naming that owner and how long ago it took the lock, unless the
    lock is older than O(ttl) (a run that died without releasing it) or O(break_lock) is set.
  - C(state=absent) releases it, only when O(owner) holds it (or with O(break_lock)).
  - Taking a lock this owner already holds, or releasing one nobody holds, changes nothing.
options:
  path:
    description: The lock file.
    type: path
    required: true
  owner:
    description: Who takes or releases the lock (e.g. C(user@controller rolling_redeploy pid 4242)).
    type: str
    required: true
  state:
    description: C(present) takes the lock, C(absent) releases it.
    type: str
    choices: [present, absent]
    default: present
  ttl:
    description: Seconds after which another owner's lock counts as abandoned and is taken over.
    type: int
    default: 21600
  break_lock:
    description: Take or release the lock whoever holds it (after checking no other rollout runs).
    type: bool
    default: false
attributes:
  check_mode:
    support: full
    description: Reports whether the lock would be taken or released; writes nothing.
  diff_mode:
    support: full
    description: The lock file's content before and after (empty when there is none); in check mode the content it
      would hold.
"""

EXAMPLES = r"""
- name: Refuse to start while another rollout runs on this fleet
  rollout_lock:
    path: /var/lib/sglang-rollout/lock
    owner: "ops@bastion rolling_redeploy pid 4242"
  delegate_to: "{{ groups['sglang_routers'][0] }}"
"""

RETURN = r"""
holder:
  description: The lock's content after the call (null when free) - owner, taken (epoch seconds), taken_utc.
  returned: always
  type: dict
  sample: {"owner": "ops@bastion rolling_redeploy pid 4242", "taken": 1796124209.5, "taken_utc": "2026-12-01T12:03:29Z"}
"""

import json
import os
import time

from ansible.module_utils.basic import AnsibleModule


def read_text(path):
    """The lock file's text, None when there is none or it cannot be read."""
    try:
        with open(path) as fh:
            return fh.read()
    except (IOError, OSError, ValueError):
        return None


def parse(text):
    try:
        return json.loads(text) if text is not None else None
    except ValueError:
        return None


def read(path):
    return parse(read_text(path))


def new_holder(owner):
    return {"owner": owner, "taken": time.time(), "taken_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def content(holder):
    """The lock file's text for ``holder``, as take writes it."""
    return json.dumps(holder)


def take(path, holder):
    os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    with os.fdopen(fd, "w") as fh:
        fh.write(content(holder))
    return holder


def changed(module, holder, before, after):
    """The result of a call that took or released the lock (or would, in check mode), with its diff."""
    result = {"changed": True, "holder": holder}
    if module._diff:
        path = module.params["path"]
        result["diff"] = {"before_header": path, "after_header": path, "before": before or "", "after": after}
    return result


def run(module):
    p = module.params
    before = read_text(p["path"]) if os.path.exists(p["path"]) else None
    holder = parse(before)
    if p["state"] == "absent":
        if holder is None:
            return {"changed": False, "holder": None}
        if holder.get("owner") != p["owner"] and not p["break_lock"]:
            module.fail_json(msg="the rollout lock %s is held by %s, not %s; not released" % (
                p["path"], holder.get("owner"), p["owner"]), holder=holder)
        if not module.check_mode:
            os.unlink(p["path"])
        return changed(module, None, before, "")
    if holder is not None and holder.get("owner") == p["owner"]:
        return {"changed": False, "holder": holder}
    if holder is not None:
        age = time.time() - float(holder.get("taken") or 0)
        if age < p["ttl"] and not p["break_lock"]:
            module.fail_json(msg="another rollout holds the lock %s: %s took it %.0f s ago (at %s); nothing was touched. "
                                 "Wait for it, or set break_lock once you are sure it is gone (it is taken over "
                                 "after %d s)" % (p["path"], holder.get("owner"), age, holder.get("taken_utc"),
                                                  p["ttl"]), holder=holder)
        if not module.check_mode:
            os.unlink(p["path"])
    if module.check_mode:
        return changed(module, {"owner": p["owner"]}, before, content(new_holder(p["owner"])))
    try:
        holder = take(p["path"], new_holder(p["owner"]))
        return changed(module, holder, before, content(holder))
    except OSError as exc:  # another run created it between our read and our create
        module.fail_json(msg="another rollout took the lock %s at the same moment (%s): %s" % (
            p["path"], exc, read(p["path"])), holder=read(p["path"]))


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", required=True),
            owner=dict(type="str", required=True),
            state=dict(type="str", choices=["present", "absent"], default="present"),
            ttl=dict(type="int", default=21600),
            break_lock=dict(type="bool", default=False),
        ),
        supports_check_mode=True,
    )
    module.exit_json(**run(module))


if __name__ == "__main__":
    main()
