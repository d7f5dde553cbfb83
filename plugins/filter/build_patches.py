# -*- coding: utf-8 -*-
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters for the patch series a FlashInfer or SGLang build applies to its checkout.

``patch_series``
    the inventory's ordered list of patch files (read on the controller) -> entries with name, path, sha256 and the
    numbered file name on the node.
``patch_fingerprint``
    a series -> the ordered [name, sha256] pairs that go into the release fingerprint (``release_fingerprint``,
    plugins/filter/build_release.py), so editing a patch means a new release.
``patch_failure``
    the results of the looped ``git apply`` -> a message naming the first patch that did not apply.
"""

from __future__ import annotations

import hashlib
import os

from ansible.errors import AnsibleFilterError


def patch_series(paths, base_dir=None) -> list[dict]:
    """Read an ordered list of patch files on the controller; return [{index, name, path, sha256, dest}].

    ``paths`` come from the inventory (``sglang_build_patches``); relative ones are taken from ``base_dir``
    (the inventory directory). ``dest`` is the file name on the node, numbered so the order survives
    (``0001-fix.patch``). The sha256 of each file's bytes goes into the release fingerprint, so editing a
    patch means a new release. Raises AnsibleFilterError naming a missing or unreadable patch.
    """
    if paths is None:
        return []
    if isinstance(paths, str) or not isinstance(paths, (list, tuple)):
        raise AnsibleFilterError(f"patches must be a list of file paths, got {paths!r}")
    out = []
    for index, raw in enumerate(paths, start=1):
        path = os.path.expanduser(str(raw))
        if base_dir and not os.path.isabs(path):
            path = os.path.join(str(base_dir), path)
        try:
            with open(path, "rb") as handle:
                data = handle.read()
        except OSError as exc:
            raise AnsibleFilterError(
                f"patch {index} of {len(paths)} ({raw}) cannot be read on the controller: {exc.strerror}; "
                f"paths are relative to {base_dir or 'the current directory'}"
            ) from exc
        name = os.path.basename(path)
        out.append({"index": index, "name": name, "path": path,
                    "sha256": hashlib.sha256(data).hexdigest(), "dest": f"{index:04d}-{name}"})
    return out


def patch_fingerprint(series) -> list[list[str]]:
    """The part of ``patch_series`` that identifies a build: ordered [name, sha256] pairs."""
    return [[item["name"], item["sha256"]] for item in series or []]


def patch_failure(results, what="the checkout") -> str:
    """Message for the first patch of a looped ``git apply`` that failed ('' when all applied).

    ``results`` is the registered loop's ``results`` list; each result holds its ``patch_series`` entry under the
    loop's variable (``ansible_loop_var``; ``item`` by default).
    """
    results = list(results or [])
    for res in results:
        if res.get("failed") or res.get("rc", 0) != 0:
            item = res.get(res.get("ansible_loop_var") or "item") or {}  # the loop's loop_var names the key
            detail = (res.get("stderr") or res.get("msg") or "").strip()
            return (f"patch {item.get('name', '?')} ({item.get('index', '?')} of {len(results)}, "
                    f"{item.get('path', '?')}) does not apply to {what}: {detail or 'no output'}. "
                    "Rebase the patch onto this ref or drop it from the series; nothing was activated.")
    return ""


class FilterModule:
    def filters(self):
        return {
            "patch_series": patch_series,
            "patch_fingerprint": patch_fingerprint,
            "patch_failure": patch_failure,
        }
