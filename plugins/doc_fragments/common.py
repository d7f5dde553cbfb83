# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the collection's modules document alike, written once (extends_documentation_fragment)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    # Every module of the collection (blackwell.sglang.common): its authors.
    DOCUMENTATION = r"""
options: {}
author:
  - sglang-ansible contributors (!UNKNOWN)
"""

    # The modules that talk HTTP to the router, Alertmanager or a node (blackwell.sglang.common.request_timeout).
    REQUEST_TIMEOUT = r"""
options:
  request_timeout:
    description: Seconds per HTTP request.
    type: int
    default: 10
"""

    # The modules that write nothing a diff could show (blackwell.sglang.common.no_diff).
    NO_DIFF = r"""
attributes:
  diff_mode:
    support: none
    description: Nothing to show as a diff.
"""

    # The modules that only read (blackwell.sglang.common.read_only).
    READ_ONLY = r"""
attributes:
  check_mode:
    support: full
    description: Read-only; runs the same in check mode.
notes:
  - Runs on the target under its system Python, standard library only.
"""

    # The modules that poll the router's worker list (blackwell.sglang.common.router_poll).
    ROUTER_POLL = r"""
options:
  poll_interval:
    description: Seconds between C(GET /workers) polls.
    type: float
    default: 0.5
"""
