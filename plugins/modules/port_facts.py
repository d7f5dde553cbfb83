#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: port_facts
short_description: Which processes listen on the TCP ports a deploy needs, and whether they are the deployed units
extends_documentation_fragment:
  - blackwell.sglang.common
description:
  - Reads C(/proc/net/tcp) and C(/proc/net/tcp6) (listening sockets) and C(/proc/<pid>/fd) (which process holds each),
    as C(ss -ltnp) does, for the ports in O(ports) only.
  - A listener whose process is a member of one of O(own_units)' cgroups (the SGLang unit or the router being
    replaced) is marked with that unit; any other listener keeps the new server from binding its port.
  - Never changes anything on the host. Naming another user's process needs root with CAP_SYS_PTRACE (without it the
    PID is null; the socket's C(uid) and C(user) are always returned).
options:
  ports:
    description: TCP ports to look at.
    type: list
    elements: int
    required: true
  own_units:
    description: systemd units whose processes may hold these ports because this deploy replaces them.
    type: list
    elements: str
    default: []
attributes:
  check_mode:
    support: full
    description: Read-only (/proc/net and /proc/<pid>/fd); runs the same in check mode.
notes:
  - Runs on the target under its system Python, standard library only; parsing in C(module_utils/listeners.py).
"""

EXAMPLES = r"""
- name: Look at the ports SGLang will bind
  port_facts:
    ports: [30000]
    own_units: [sglang-kimi.service]
  register: preflight_ports
"""

RETURN = r"""
listeners:
  description: Listening sockets on O(ports), sorted by port then address.
  returned: always
  type: list
  elements: dict
  sample: [{"address": "127.0.0.1", "port": 30000, "pid": 4242, "process": "python3 -m http.server 30000",
            "uid": 0, "user": "root", "unit": null}]
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.blackwell.sglang.plugins.module_utils.host.listeners import listeners
from ansible_collections.blackwell.sglang.plugins.module_utils.host.unit_cgroup import cgroup_pids, parse_show


def unit_members(module, units, cgroup_root="/sys/fs/cgroup"):
    """``{pid: unit}`` for the processes in each unit's cgroup (units systemd does not know have none)."""
    members = {}
    systemctl = module.get_bin_path("systemctl")
    if not systemctl:
        return members
    for unit in units or []:
        rc, text, _err = module.run_command([systemctl, "show", unit, "-p", "ControlGroup,MainPID"])
        if rc != 0:
            continue
        for pid in cgroup_pids(parse_show(text)["control_group"], cgroup_root):
            members.setdefault(pid, unit)
    return members


def main():
    module = AnsibleModule(
        argument_spec=dict(
            ports=dict(type="list", elements="int", required=True),
            own_units=dict(type="list", elements="str", default=[]),
        ),
        supports_check_mode=True,
    )
    found = listeners(module.params["ports"])
    members = unit_members(module, module.params["own_units"]) if found else {}
    for sock in found:
        sock["unit"] = members.get(sock["pid"]) if sock["pid"] else None
    module.exit_json(changed=False, listeners=found)


if __name__ == "__main__":
    main()
