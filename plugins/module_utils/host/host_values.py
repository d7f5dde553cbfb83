# -*- coding: utf-8 -*-
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Values the host-fact checks share (stdlib only): the kernel's cpulist format (``0-3,8``: sysfs ``cpulist``,
``Cpus_allowed_list`` in ``/proc/<pid>/status``, systemd ``CPUAffinity=``), byte sizes for messages (1024-based,
systemd's ``infinity``) and GPU index lists in messages.
"""

from __future__ import absolute_import, division, print_function

import re

__metaclass__ = type

MIB = 1024 ** 2
GIB = 1024 ** 3
GB = 1000 ** 3
INFINITY = "infinity"


def parse_cpulist(text):
    """``"0-3,8,10-11"`` (sysfs / systemd list; commas or whitespace) -> set of ints; ``""`` -> empty set."""
    out = set()
    for part in re.split(r"[\s,]+", (text or "").strip()):
        if not part:
            continue
        if "-" in part:
            lo, hi = part.split("-", 1)
            out.update(range(int(lo), int(hi) + 1))
        else:
            out.add(int(part))
    return out


def format_cpulist(values):
    """set of ints -> ``"0-3,8"`` (``"none"`` when empty)."""
    values = sorted(set(values))
    if not values:
        return "none"
    parts, start, prev = [], values[0], values[0]
    for v in values[1:] + [None]:
        if v is not None and v == prev + 1:
            prev = v
            continue
        parts.append("%d-%d" % (start, prev) if prev != start else "%d" % start)
        if v is not None:
            start = prev = v
    return ",".join(parts)


def human_bytes(value):
    """Bytes -> ``"8 MiB"`` / ``"3.8 GiB"`` for messages (``"infinity"`` stays)."""
    if value == INFINITY or value is None:
        return "infinity" if value == INFINITY else "unknown"
    value = int(value)
    for unit, size in (("TiB", 1024 ** 4), ("GiB", GIB), ("MiB", MIB), ("KiB", 1024)):
        if value >= size:
            q = float(value) / size
            return ("%d %s" % (q, unit)) if q == int(q) else ("%.1f %s" % (q, unit))
    return "%d B" % value


def gpus_text(indices, verb=None):
    """``GPU 3`` / ``GPUs 0-3``; with ``verb`` (plural form) also ``GPU 3 sits`` / ``GPUs 0-3 sit``."""
    indices = sorted(set(indices))
    one = len(indices) == 1
    text = ("GPU %d" % indices[0]) if one else ("GPUs %s" % format_cpulist(indices))
    if verb:
        text += " " + ({"are": "is", "have": "has"}.get(verb, verb + "s") if one else verb)
    return text
