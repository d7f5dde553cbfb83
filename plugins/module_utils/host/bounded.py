# -*- coding: utf-8 -*-
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Calls on a host that cannot hang the caller: a command with a timeout (``run_bounded``) and any function run on a
daemon thread with one (``bounded``: a read of ``/proc/<pid>`` of a process in uninterruptible sleep never returns).
Stdlib only."""

from __future__ import absolute_import, division, print_function

import os
import subprocess
import threading


__metaclass__ = type


def run_bounded(argv, timeout, env=None):
    """Run ``argv``; returns ``(rc, stdout, stderr)``, or ``(None, partial stdout, "timed out after N s")`` when it
    did not finish within ``timeout`` seconds (the process is killed)."""
    try:  # its own process group, so a timeout kills whatever it started too (they would hold the pipe open)
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, preexec_fn=os.setsid)
    except OSError as exc:
        return 127, "", str(exc)
    try:
        out, err = proc.communicate(timeout=timeout)
        return proc.returncode, out.decode("utf-8", "replace"), err.decode("utf-8", "replace")
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, 9)
        except OSError:
            proc.kill()
        out, dummy = proc.communicate()
        return None, out.decode("utf-8", "replace"), "timed out after %g s" % timeout


def bounded(fn, timeout, default=None):
    """``fn()`` in a daemon thread; ``default`` when it does not return within ``timeout`` seconds (the thread is
    abandoned: a /proc read blocked on a process in D state cannot be interrupted)."""
    box = {}

    def target():
        try:
            box["value"] = fn()
        except Exception as exc:  # noqa: BLE001 - reported as the default
            box["error"] = exc

    worker = threading.Thread(target=target)
    worker.daemon = True
    worker.start()
    worker.join(timeout)
    if worker.is_alive() or "value" not in box:
        return default
    return box["value"]
