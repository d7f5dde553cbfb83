#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: job_progress
short_description: One look at a background (async) job - has it ended, and what did it print last
description:
  - Waits up to O(wait) seconds for the async job's results file to hold the module's result (Ansible's async
    wrapper keeps a C(started) marker there until the job ends, then writes the job's own result), and returns the
    last non-empty line of O(progress_file).
  - One round trip per round of M(job_follow), which calls it; usable on its own too.
  - Never changes anything.
options:
  results_file:
    description: The C(results_file) an async task registered.
    type: path
    required: true
  progress_file:
    description: A file the job appends progress lines to; its last non-empty line is returned.
    type: path
  wait:
    description: Seconds to wait for the job to end before answering that it has not.
    type: float
    default: 0
attributes:
  check_mode:
    support: full
author:
  - SGLang deployment project
"""

EXAMPLES = r"""
- name: Look at the staging job once
  job_progress:
    results_file: "{{ model_stage_job.results_file }}"
    progress_file: /var/lib/sglang/stage/Kimi-K2.5.progress
    wait: 10
"""

RETURN = r"""
finished:
  description: Whether the job has ended.
  returned: always
  type: bool
job:
  description: The job's own result once it has ended (what the module returned), else null.
  returned: always
  type: dict
progress:
  description: The last non-empty line of O(progress_file) (empty when there is none yet).
  returned: always
  type: str
"""

import json
import os
import time

from ansible.module_utils.basic import AnsibleModule


def read_job(path):
    """The job's result dict once it ended, else None (still running, or the file is being rewritten)."""
    try:
        with open(path) as handle:
            data = json.loads(handle.read())
    except (IOError, OSError, ValueError):
        return None
    if not isinstance(data, dict) or "started" in data:
        return None
    return data


def last_line(path, chunk=8192):
    """Last non-empty line of ``path`` ('' when missing), reading only its end."""
    if not path or not os.path.isfile(path):
        return ""
    with open(path, "rb") as handle:
        handle.seek(0, os.SEEK_END)
        size = handle.tell()
        handle.seek(max(size - chunk, 0))
        lines = [line for line in handle.read().decode("utf-8", "replace").splitlines() if line.strip()]
    return lines[-1] if lines else ""


def main():
    module = AnsibleModule(
        argument_spec=dict(
            results_file=dict(type="path", required=True),
            progress_file=dict(type="path"),
            wait=dict(type="float", default=0.0),
        ),
        supports_check_mode=True,
    )
    p = module.params
    deadline = time.time() + max(float(p["wait"]), 0.0)
    job = read_job(p["results_file"])
    while job is None and time.time() < deadline:
        time.sleep(min(0.2, max(deadline - time.time(), 0.01)))
        job = read_job(p["results_file"])
    module.exit_json(changed=False, finished=job is not None, job=job, progress=last_line(p["progress_file"]))


if __name__ == "__main__":
    main()
