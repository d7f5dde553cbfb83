"""Filters for building FlashInfer and SGLang for SM120: arch lists, job counts, release fingerprints.

Facts come from ../shared/FIELD_NOTES.md "SM120 builds": FlashInfer's ``FLASHINFER_CUDA_ARCH_LIST`` is
space-separated and SM120 is ``12.0f`` with CUDA >= 12.9 and ``12.0a`` with 12.8; nvcc peaks at 3-8 GB
of RAM per job on CUTLASS units, so job counts come from available memory, not from cores.
"""

from __future__ import annotations

import hashlib
import json

from ansible.errors import AnsibleFilterError


def _version_tuple(version) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in str(version).split("."))
    except ValueError as exc:
        raise AnsibleFilterError(f"not a dotted version number: {version!r}") from exc


def flashinfer_arch_list(compute_capabilities, cuda_version) -> str:
    """Return FlashInfer's ``FLASHINFER_CUDA_ARCH_LIST`` for ``compute_capabilities`` (list of "12.0"...).

    Blackwell consumer/workstation parts (major 12) need the family suffix ``f`` (CUDA >= 12.9) or the
    arch-specific ``a`` (CUDA 12.8); CUDA older than 12.8 cannot build SM12x at all (FIELD_NOTES R13).
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
    nvcc job in GiB (3-8 GB on CUTLASS units, FIELD_NOTES R12), ``headroom`` the fraction kept for the
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


class FilterModule:
    def filters(self):
        return {
            "flashinfer_arch_list": flashinfer_arch_list,
            "torch_arch_list": torch_arch_list,
            "build_jobs": build_jobs,
            "release_fingerprint": release_fingerprint,
        }
