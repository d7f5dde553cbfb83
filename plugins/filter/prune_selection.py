# -*- coding: utf-8 -*-
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""``prune_selection``: ``ansible.builtin.find`` results -> the names of the old releases, wheel directories or model
revisions to delete: the newest complete ones, the protected ones and a failed build newer than every complete one are
kept (sglang_build and flashinfer_build after a build, generation after a switch)."""

from __future__ import annotations

import os
import re

from ansible.errors import AnsibleFilterError


def prune_selection(entries, keep=3, protect=None, pattern=None, markers=None) -> list[str]:
    """Pick which build outputs to delete: the names of ``entries`` beyond the newest ``keep`` complete ones.

    ``entries``: [{"name" (or "path"), "mtime", "complete"}] -- ``ansible.builtin.find`` results work as
    they are. Completeness: with ``markers`` (paths of completion markers such as ``<dir>/release.json``,
    from another find) an entry is complete when a marker sits directly in it; without, the entry's
    ``complete`` key, else "name does not end with .partial" (wheel dirs are published by rename).
    ``protect``: names or paths never deleted (current, previous, the one just built).
    ``pattern``: a regex the name must fully match to be considered at all (other files are left alone).
    Rules: protected entries are kept and count towards ``keep``; the newest complete ones are kept up to
    ``keep``; older complete ones go; an incomplete entry goes only when a newer complete one exists (a
    failed build is kept for its log until something newer succeeds). Oldest first in the result.
    """
    try:
        keep = int(keep)
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError(f"keep must be a number, got {keep!r}") from exc
    if keep < 1:
        raise AnsibleFilterError(f"keep must be at least 1 (the current release), got {keep}")
    protect = {os.path.basename(str(p).rstrip("/")) for p in (protect or []) if p}
    rx = re.compile(pattern) if pattern else None
    marked = None
    if markers is not None:
        marked = {os.path.basename(os.path.dirname(str(m.get("path", "") if isinstance(m, dict) else m)))
                  for m in markers}
    items = []
    for entry in entries or []:
        name = os.path.basename(str(entry.get("name") or entry.get("path") or "").rstrip("/"))
        if not name or (rx and not rx.fullmatch(name)):
            continue
        if marked is not None:
            complete = name in marked
        elif "complete" in entry:
            complete = bool(entry["complete"])
        else:
            complete = not name.endswith(".partial")
        items.append((float(entry.get("mtime", 0)), name, complete))
    items.sort(key=lambda t: (t[0], t[1]), reverse=True)  # newest first
    kept = sum(1 for _m, name, _c in items if name in protect)
    newest_complete = max((m for m, _n, c in items if c), default=None)
    doomed = []
    for mtime, name, complete in items:
        if name in protect:
            continue
        if complete:
            if kept < keep:
                kept += 1
                continue
            doomed.append((mtime, name))
        elif newest_complete is not None and mtime < newest_complete:
            doomed.append((mtime, name))
    return [name for _m, name in sorted(doomed)]


class FilterModule:
    def filters(self):
        return {"prune_selection": prune_selection}
