# -*- coding: utf-8 -*-
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Lower the calling process's CPU and I/O priority (stdlib only), as ``nice -n N ionice -c 3`` would.

A rolling redeploy prepares a node (builds, staging, verification) while it serves: that work must yield to the
server. ``os.nice`` raises the niceness; the I/O class "idle" (``ioprio_set(IOPRIO_WHO_PROCESS, 0,
IOPRIO_CLASS_IDLE << 13)``, Linux Documentation/block/ioprio.rst) lets it use the disk only when nothing else does.
Both are per thread on Linux and inherited by threads and processes started afterwards, so call this first.
"""

from __future__ import absolute_import, division, print_function

import ctypes
import os
import platform

__metaclass__ = type

# ioprio_set's syscall number per architecture (asm/unistd.h); absent -> the I/O class is left as it is.
IOPRIO_SET = {"x86_64": 251, "aarch64": 30, "ppc64le": 273, "s390x": 282}
IOPRIO_WHO_PROCESS = 1
IOPRIO_CLASS_IDLE = 3
IOPRIO_CLASS_SHIFT = 13


def lower_priority(nice):
    """Raise niceness by ``nice`` (0: no change) and, when above 0, set the idle I/O class.

    Returns a dict ``nice`` (the niceness now) and ``io_class`` ("idle", or None when unchanged / not settable)."""
    nice = int(nice or 0)
    out = {"nice": os.nice(0), "io_class": None}
    if nice <= 0:
        return out
    out["nice"] = os.nice(nice)
    number = IOPRIO_SET.get(platform.machine())
    if number is not None:
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            if libc.syscall(number, IOPRIO_WHO_PROCESS, 0, IOPRIO_CLASS_IDLE << IOPRIO_CLASS_SHIFT) == 0:
                out["io_class"] = "idle"
        except (OSError, AttributeError):
            pass
    return out
