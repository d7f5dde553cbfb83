"""Counts what a playbook run asks of each host (benchmarks/deploy_cost.py; on-demand, never in CI).

``round_trips``: per host, the task results (a loop's items one by one) that ran a module on the host - one command
over the connection each with pipelining (ansible.cfg), whether it changed anything or not. Results of controller-side actions (set_fact,
debug, assert, fail, include_*, meta, ...), of tasks delegated to the controller, and of skipped tasks are not
counted. ``gatherings``: per host, the fact gatherings (gather_facts / setup) among them.

Written as JSON to ``$ROUND_TRIPS_FILE`` when the run ends.
"""

from __future__ import annotations

import json
import os

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = r"""
name: round_trips
type: aggregate
short_description: Count module round trips and fact gatherings per host
description:
  - Writes {host - {round_trips, gatherings}} as JSON to the file named by ROUND_TRIPS_FILE when the run ends.
requirements:
  - enabled in the run (ANSIBLE_CALLBACKS_ENABLED=round_trips)
"""

CONTROLLER = {"set_fact", "debug", "assert", "fail", "include_tasks", "include_role", "import_tasks", "import_role",
              "include_vars", "meta", "add_host", "group_by", "set_stats", "pause", "validate_argument_spec"}
GATHER = {"gather_facts", "setup"}


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "round_trips"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self):
        super().__init__()
        self.counts = {}

    def _count(self, result):
        action = result._task.action.rsplit(".", 1)[-1]
        if action in CONTROLLER:
            return
        delegated = (result._result.get("_ansible_delegated_vars") or {}).get("ansible_host")
        if delegated in ("localhost", "127.0.0.1"):
            return
        host = result._host.get_name()
        entry = self.counts.setdefault(host, {"round_trips": 0, "gatherings": 0})
        entry["round_trips"] += 1
        if action in GATHER:
            entry["gatherings"] += 1

    def v2_runner_on_ok(self, result):
        if "results" not in result._result:  # a loop's summary: its items were counted one by one
            self._count(result)

    def v2_runner_on_failed(self, result, ignore_errors=False):
        if "results" not in result._result:
            self._count(result)

    def v2_runner_item_on_ok(self, result):
        self._count(result)

    def v2_runner_item_on_failed(self, result):
        self._count(result)

    def v2_playbook_on_stats(self, stats):
        path = os.environ.get("ROUND_TRIPS_FILE")
        if path:
            with open(path, "w") as fh:
                json.dump(self.counts, fh, indent=1, sort_keys=True)
