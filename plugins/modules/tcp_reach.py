#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: tcp_reach
short_description: Whether this host reaches a TCP port of another host, even one nothing listens on yet
extends_documentation_fragment:
  - blackwell.sglang.common
description:
  - Opens one TCP connection to O(host) and O(port) and closes it at once. An answer of either kind means the
    packets get there and back - C(open) (something listens, e.g. rank 0 of a running SGLang group) or C(refused)
    (the host answered with a reset, so nothing listens yet, but no firewall drops the port). No answer within
    O(timeout) is C(unanswered) (a firewall that drops, a wrong route), an address that does not resolve
    C(unresolved).
  - A multi-node SGLang group's nodes of rank >= 1 must reach rank 0's C(--dist-init-addr) before it starts; this
    says so while nothing listens there.
  - Never changes anything; runs the same in check mode.
options:
  host:
    description: The name or address to connect to.
    type: str
    required: true
  port:
    description: The TCP port.
    type: int
    required: true
  timeout:
    description: Seconds to wait for an answer.
    type: float
    default: 3
attributes:
  check_mode:
    support: full
    description: Read-only (one connection, closed at once); runs the same in check mode.
"""

EXAMPLES = r"""
- name: Check that this node reaches rank 0's rendezvous port
  blackwell.sglang.tcp_reach:
    host: gpu-1
    port: 50000
  register: reach
"""

RETURN = r"""
state:
  description: C(open), C(refused), C(unanswered) or C(unresolved).
  returned: always
  type: str
  sample: refused
reached:
  description: True for C(open) and C(refused) (the host answered).
  returned: always
  type: bool
address:
  description: The address connected to (null when the name did not resolve).
  returned: always
  type: str
error:
  description: The error text of a connection that did not open (null when it opened).
  returned: always
  type: str
"""

import errno
import socket

from ansible.module_utils.basic import AnsibleModule


def reach(host, port, timeout):
    """``state``, ``reached``, ``address``, ``error`` of one connection attempt (see RETURN)."""
    try:
        infos = socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM)
    except socket.gaierror as exc:
        return {"state": "unresolved", "reached": False, "address": None, "error": str(exc)}
    family, socktype, proto, dummy, address = infos[0]
    sock = socket.socket(family, socktype, proto)
    sock.settimeout(timeout)
    try:
        sock.connect(address)
        state, error = "open", None
    except socket.timeout:
        state, error = "unanswered", "no answer within %g s" % timeout
    except (OSError, IOError) as exc:
        state = "refused" if exc.errno == errno.ECONNREFUSED else "unanswered"
        error = str(exc)
    finally:
        sock.close()
    return {"state": state, "reached": state in ("open", "refused"), "address": address[0], "error": error}


def main():
    module = AnsibleModule(
        argument_spec=dict(host=dict(type="str", required=True), port=dict(type="int", required=True),
                           timeout=dict(type="float", default=3.0)),
        supports_check_mode=True,
    )
    p = module.params
    module.exit_json(changed=False, **reach(p["host"], p["port"], p["timeout"]))


if __name__ == "__main__":
    main()
