# -*- coding: utf-8 -*-
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin ``job_follow``: follow a background (async, poll 0) job to its end, printing its progress.

Replaces a task file that includes itself once per round: ansible-core keeps every nested include on the Python
stack, so such a file dies with ``RecursionError: maximum recursion depth exceeded`` after ~300 rounds (fewer
inside include_role/block) while the job runs on - about 50 minutes of a 10 s progress interval, less than a
547 GB staging at 180 MB/s. Here the rounds are a loop on the controller: any number of them, each one remote call
(``job_progress``, which waits on the node up to ``interval`` seconds), each new progress line printed at default
verbosity (a plain ``until`` prints only ``FAILED - RETRYING``).

Returns the job's own result (``changed``/``failed``/``msg`` and everything the job returned), plus ``rounds`` and
``progress`` (every distinct line shown); fails with the last progress line when ``timeout`` passes.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import time

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

display = Display()


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("results_file", "progress_file", "interval", "timeout", "label"))

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        args = self._task.args
        interval = max(float(args.get("interval", 10)), 0.0)
        timeout = float(args.get("timeout", 86400))
        label = args.get("label") or "job"
        host = task_vars.get("inventory_hostname", "") if task_vars else ""
        if not args.get("results_file"):  # the task that would start the job was skipped (check mode, a condition)
            result.update(changed=False, skipped=True, msg="no %s job was started: nothing to follow" % label)
            return result
        started, rounds, shown = time.time(), 0, []
        while True:
            rounds += 1
            wait = max(min(interval, timeout - (time.time() - started)), 0.0)
            look = self._execute_module(module_name="job_progress", task_vars=task_vars, module_args={
                "results_file": args["results_file"], "progress_file": args.get("progress_file"), "wait": wait})
            if look.get("failed"):
                raise AnsibleActionFail("cannot read the %s job's state: %s" % (label, look.get("msg")))
            line = look.get("progress") or ""
            if line and (not shown or shown[-1] != line):
                shown.append(line)
                display.display("%s %s: %s" % (host, label, line))
            if look.get("finished"):
                job = dict(look.get("job") or {})
                job.pop("invocation", None)
                result.update(job)
                result.update(rounds=rounds, progress_shown=shown, changed=bool(job.get("changed")))
                return result
            if time.time() - started >= timeout:
                result.update(failed=True, rounds=rounds, progress_shown=shown,
                              msg="the %s job did not end within %.0f s (last progress: %s); it may still run on the "
                                  "node" % (label, timeout, line or "none"))
                return result
