#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Documentation only: job_follow runs on the controller (plugins/action/job_follow.py).

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: job_follow
short_description: Follow a background (async, poll 0) job to its end, printing each new progress line
extends_documentation_fragment:
  - blackwell.sglang.common
description:
  - An action plugin. Each round runs one small shell command on the node, which waits there up to O(interval)
    seconds for the job to end, then prints the job's results file and the last line of O(progress_file); a new line
    is printed at default verbosity.
  - The rounds are a loop on the controller, so their number has no limit (a task file that includes itself once
    per round dies of RecursionError after about 300 rounds on ansible-core 2.19).
  - Returns the job's own result, plus RV(rounds) and RV(progress_shown); fails after O(timeout) seconds.
  - An empty O(results_file) (the task that would start the job was skipped, e.g. a shell task in check mode) is
    reported as skipped.
options:
  results_file:
    description: The C(results_file) the async task registered; empty when it did not run.
    type: path
  progress_file:
    description: File the job appends progress lines to.
    type: path
  interval:
    description: Seconds between progress lines (the longest a round waits for the job to end).
    type: float
    default: 10
  timeout:
    description: Seconds to follow the job before failing (match the task's C(async)).
    type: float
    default: 86400
  label:
    description: Word for the job in printed lines and messages.
    type: str
    default: job
attributes:
  check_mode:
    support: full
    description: Follows a job that is already running; starts nothing.
"""

EXAMPLES = r"""
- name: Follow the staging job, printing its progress lines, until it ends
  job_follow:
    results_file: "{{ model_stage_job.results_file }}"
    progress_file: /var/lib/sglang/stage/Kimi-K2.5.progress
    interval: 10
    timeout: 86400
    label: staging
  register: model_stage_result
"""

RETURN = r"""
rounds:
  description: Rounds it took (one shell command on the node each).
  returned: always
  type: int
progress_shown:
  description: Every distinct progress line printed, in order.
  returned: always
  type: list
  elements: str
"""
