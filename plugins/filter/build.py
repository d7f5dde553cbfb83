"""Filters for building FlashInfer and SGLang for SM120: arch lists, job counts, release fingerprints,
patch series, pip constraints and which old releases to prune.

The facts: FlashInfer's ``FLASHINFER_CUDA_ARCH_LIST`` is
space-separated and SM120 is ``12.0f`` with CUDA >= 12.9 and ``12.0a`` with 12.8; nvcc peaks at 3-8 GB
of RAM per job on CUTLASS units, so job counts come from available memory, not from cores.
"""

from __future__ import annotations

import hashlib
import json
import os
import re

from ansible.errors import AnsibleFilterError


def _version_tuple(version) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in str(version).split("."))
    except ValueError as exc:
        raise AnsibleFilterError(f"not a dotted version number: {version!r}") from exc


def flashinfer_arch_list(compute_capabilities, cuda_version) -> str:
    """Return FlashInfer's ``FLASHINFER_CUDA_ARCH_LIST`` for ``compute_capabilities`` (list of "12.0"...).

    Blackwell consumer/workstation parts (major 12) need the family suffix ``f`` (CUDA >= 12.9) or the
    arch-specific ``a`` (CUDA 12.8); CUDA older than 12.8 cannot build SM12x at all.
    Other capabilities pass through unchanged (e.g. "9.0" -> "9.0a" is not chosen for you).
    Raises AnsibleFilterError naming the CUDA version when SM12x cannot be built.
    """
    if isinstance(compute_capabilities, str):
        compute_capabilities = [compute_capabilities]
    cuda = _version_tuple(cuda_version)
    out: list[str] = []
    for cap in compute_capabilities:
        cap = str(cap)
        major = _version_tuple(cap)[0]
        if major == 12:
            if cuda >= (12, 9):
                item = cap + "f"
            elif cuda >= (12, 8):
                item = cap + "a"
            else:
                raise AnsibleFilterError(
                    f"compute capability {cap} (SM{cap.replace('.', '')}) needs CUDA >= 12.8 "
                    f"(12.9+ for the '12.0f' family build), found CUDA {cuda_version}"
                )
        else:
            item = cap
        if item not in out:
            out.append(item)
    return " ".join(out)


def torch_arch_list(compute_capabilities) -> str:
    """Return ``TORCH_CUDA_ARCH_LIST`` (semicolon-separated, e.g. "12.0") for the capabilities."""
    if isinstance(compute_capabilities, str):
        compute_capabilities = [compute_capabilities]
    return ";".join(dict.fromkeys(str(c) for c in compute_capabilities))


def build_jobs(mem_available_mb, cores, gb_per_job=8, headroom=0.25, max_jobs=None) -> int:
    """Return how many parallel compile jobs fit: floor(MemAvailable x (1 - headroom) / gb_per_job).

    ``mem_available_mb`` is MemAvailable in MiB (/proc/meminfo, or Ansible's
    ``ansible_memory_mb.nocache.free``), ``cores`` the CPU count, ``gb_per_job`` the peak RAM of one
    nvcc job in GiB (3-8 GB on CUTLASS units; job counts from cores alone OOM-kill the build), ``headroom`` the fraction kept for the
    linker, pip and the rest of the host. Result is at least 1 and at most ``cores`` (and ``max_jobs``).
    Example: 32 cores, 64 GiB available -> floor(64 x 0.75 / 8) = 6 jobs, not 32.
    Raises AnsibleFilterError on non-numbers or a non-positive ``gb_per_job``.
    """
    try:
        mem_gb = float(mem_available_mb) / 1024.0
        cores = int(cores)
        gb_per_job = float(gb_per_job)
        headroom = float(headroom)
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError(f"build_jobs needs numbers: {exc}") from exc
    if gb_per_job <= 0 or not 0 <= headroom < 1:
        raise AnsibleFilterError("build_jobs needs gb_per_job > 0 and 0 <= headroom < 1")
    jobs = int(mem_gb * (1.0 - headroom) // gb_per_job)
    jobs = max(1, min(jobs, cores))
    if max_jobs:
        jobs = max(1, min(jobs, int(max_jobs)))
    return jobs


def release_fingerprint(inputs: dict, length: int = 16) -> str:
    """Return the hex sha256 (first ``length`` chars) of ``inputs`` as canonical JSON.

    ``inputs`` holds everything that makes a release different: refs, patch sha256s, CUDA version,
    arch list, Python version, constraints. Key order does not matter; any value change does.
    """
    if not isinstance(inputs, dict):
        raise AnsibleFilterError("release_fingerprint expects a dict of inputs")
    blob = json.dumps(inputs, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[: int(length)]


def sm_arch(compute_capability) -> str:
    """Return torch's arch name for a compute capability: "12.0" -> "sm_120" (what get_arch_list() lists)."""
    major, minor = (_version_tuple(compute_capability) + (0,))[:2]
    return f"sm_{major}{minor}"


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


_PIN = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?\s*(==|===|<=|>=|~=|!=|<|>)\s*\S+")


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def build_constraints(pins, required=None) -> str:
    """Return constraints.txt (one pin a line, for ``pip -c``) from ``pins`` plus ``required`` pins.

    ``pins`` is the inventory's list (``sglang_build_constraints``: "sglang-kernel==0.4.10", ...);
    ``required`` are pins the role itself needs (torch==<sglang_build_torch_version>) so SGLang's own
    dependencies cannot swap torch. A name pinned twice differently is an error naming both pins; a line
    that is not "name<op>version" is an error. Output order: required first, then pins, duplicates dropped.
    """
    lines: list[str] = []
    seen: dict[str, str] = {}
    for pin in list(required or []) + list(pins or []):
        pin = str(pin).strip()
        match = _PIN.match(pin)
        if not match:
            raise AnsibleFilterError(f"constraint {pin!r} is not a pin such as 'torch==2.14.1'")
        name = _canonical(match.group(1))
        if name in seen:
            if seen[name] != pin:
                raise AnsibleFilterError(f"{match.group(1)} is pinned twice: {seen[name]!r} and {pin!r}")
            continue
        seen[name] = pin
        lines.append(pin)
    return "".join(line + "\n" for line in lines)


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


def priority_prefix(nice) -> str:
    """Shell prefix that runs a command at lower CPU and I/O priority: ``"nice -n N ionice -c 3 "`` for ``nice`` 1-19
    (util-linux's ionice, idle class: the disk only when nothing else uses it), ``""`` for 0. A rolling redeploy builds
    on a node that serves: the build yields to the server."""
    try:
        value = int(nice or 0)
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError(f"nice must be a number 0-19, got {nice!r}") from exc
    if not 0 <= value <= 19:
        raise AnsibleFilterError(f"nice must be 0-19, got {value}")
    return f"nice -n {value} ionice -c 3 " if value else ""


class FilterModule:
    def filters(self):
        return {
            "flashinfer_arch_list": flashinfer_arch_list,
            "torch_arch_list": torch_arch_list,
            "build_jobs": build_jobs,
            "release_fingerprint": release_fingerprint,
            "sm_arch": sm_arch,
            "patch_series": patch_series,
            "patch_fingerprint": patch_fingerprint,
            "patch_failure": patch_failure,
            "build_constraints": build_constraints,
            "prune_selection": prune_selection,
            "priority_prefix": priority_prefix,
        }
