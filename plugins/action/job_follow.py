# -*- coding: utf-8 -*-
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin ``job_follow``: follow a background (async, poll 0) job to its end, printing its progress.

Replaces a task file that includes itself once per round: ansible-core keeps every nested include on the Python
stack, so such a file dies with ``RecursionError: maximum recursion depth exceeded`` after ~300 rounds (fewer
inside include_role/block) while the job runs on - about 50 minutes of a 10 s progress interval, less than a
547 GB staging at 180 MB/s. Here the rounds are a loop on the controller: any number of them, each one small
shell command on the node (it waits there up to ``interval`` seconds for the job to end, then prints the job's
results file and the last progress line), each new progress line printed at default verbosity (a plain ``until``
prints only ``FAILED - RETRYING``).

The job's results file is Ansible's async wrapper's: a ``"started"`` marker until the job ends, then the job's own
result (JSON). Returns that result (``changed``/``failed``/``msg`` and everything the job returned), plus
``rounds`` and ``progress_shown``; fails with the last progress line when ``timeout`` passes.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import time

from ansible.errors import AnsibleActionFail
from ansible.module_utils.six.moves import shlex_quote
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

display = Display()
RESULT = "@@job_follow:result@@"
PROGRESS = "@@job_follow:progress@@"


def round_command(results_file, progress_file, wait):
    """POSIX sh: wait up to ``wait`` s (0.1 s steps) while the results file still says "started", then print it and
    the progress file's last non-empty line, each after its marker."""
    steps = max(int(round(float(wait) / 0.1)), 0)
    f, p = shlex_quote(results_file), shlex_quote(progress_file or "/dev/null")
    return ("i=0; while [ $i -lt %d ] && { [ ! -s %s ] || grep -q '\"started\"' %s; }; do sleep 0.1; i=$((i+1)); "
            "done; echo %s; cat %s 2>/dev/null; echo; echo %s; grep -v '^[[:space:]]*$' %s 2>/dev/null | tail -n 1"
            % (steps, f, f, RESULT, f, PROGRESS, p))


def parse_round(stdout):
    """(job result dict or None while it runs, last progress line) from ``round_command``'s output."""
    text = stdout or ""
    if RESULT not in text or PROGRESS not in text:
        raise ValueError("unexpected answer: %r" % text[-300:])
    body, dummy, line = text.split(RESULT, 1)[1].partition(PROGRESS)
    job = None
    try:
        data = json.loads(body.strip())
        if isinstance(data, dict) and "started" not in data:
            job = data
    except ValueError:
        pass  # empty or being rewritten: still running
    return job, line.strip()


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
        started, rounds, shown, line = time.time(), 0, [], ""
        while True:
            rounds += 1
            wait = max(min(interval, timeout - (time.time() - started)), 0.0)
            answer = self._low_level_execute_command(round_command(args["results_file"], args.get("progress_file"),
                                                                   wait))
            if answer.get("rc") != 0:
                raise AnsibleActionFail("cannot read the %s job's state on %s: %s" % (
                    label, host, (answer.get("stderr") or answer.get("stdout") or "")[-300:]))
            try:
                job, line = parse_round(answer.get("stdout"))
            except ValueError as exc:
                raise AnsibleActionFail("cannot read the %s job's state on %s: %s" % (label, host, exc))
            if line and (not shown or shown[-1] != line):
                shown.append(line)
                display.display("%s %s: %s" % (host, label, line))
            if job is not None:
                job.pop("invocation", None)
                result.update(job)
                result.update(rounds=rounds, progress_shown=shown, changed=bool(job.get("changed")))
                return result
            if time.time() - started >= timeout:
                result.update(failed=True, rounds=rounds, progress_shown=shown,
                              msg="the %s job did not end within %.0f s (last progress: %s); it may still run on the "
                                  "node" % (label, timeout, line or "none"))
                return result
