# -*- coding: utf-8 -*-
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters for the CUDA architectures a FlashInfer or SGLang build compiles for.

``flashinfer_arch_list``
    compute capabilities + CUDA version -> FlashInfer's ``FLASHINFER_CUDA_ARCH_LIST``.
``torch_arch_list``
    compute capabilities -> torch's ``TORCH_CUDA_ARCH_LIST``.
``sm_arch``
    one compute capability -> torch's arch name (``12.0`` -> ``sm_120``, as ``torch.cuda.get_arch_list()`` lists).
``flashinfer_jit_cache_requirement``
    FlashInfer's version + the CUDA release -> the requirement of its AOT kernels, ``flashinfer-jit-cache==0.7.2+cu130``.

The facts: FlashInfer's ``FLASHINFER_CUDA_ARCH_LIST`` is space-separated and torch's ``TORCH_CUDA_ARCH_LIST``
semicolon-separated; SM120 (compute capability 12.0, RTX PRO 6000 Blackwell) is ``12.0f`` (the family build) with
CUDA >= 12.9 and ``12.0a`` with CUDA 12.8, which refuses ``12.0f``; older CUDA cannot build SM12x at all.
tests/contract/test_cuda_compiler.py checks these strings against FlashInfer 0.7.2's
``flashinfer/compilation_context.py``, torch's ``cpp_extension._get_cuda_arch_flags``, nvcc 13.0 and NVRTC 12.8.
"""

from __future__ import annotations

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


def sm_arch(compute_capability) -> str:
    """Return torch's arch name for a compute capability: "12.0" -> "sm_120" (what get_arch_list() lists)."""
    major, minor = (_version_tuple(compute_capability) + (0,))[:2]
    return f"sm_{major}{minor}"


def flashinfer_jit_cache_requirement(flashinfer_version, cuda_version) -> str:
    """Return the pip requirement of FlashInfer's AOT kernels for ``flashinfer_version`` built with CUDA ``cuda_version``.

    FlashInfer publishes ``flashinfer-jit-cache`` per CUDA release on its own index, versioned as its own release with
    the CUDA release as the local version (``0.7.2+cu130``). FlashInfer 0.7.2 (``flashinfer/jit/env.py``,
    ``_check_jit_cache_version``) ignores, with only a logged warning, a jit-cache whose version is neither its own nor
    its own followed by ``+``: every module would then be compiled with nvcc at first use.
    """
    version = str(flashinfer_version).strip()
    if not version or "+" in version:
        raise AnsibleFilterError(f"flashinfer_jit_cache_requirement needs FlashInfer's release version (such as 0.7.2), "
                                 f"got {flashinfer_version!r}")
    cuda = _version_tuple(cuda_version)
    if len(cuda) < 2:
        raise AnsibleFilterError(f"flashinfer_jit_cache_requirement needs a CUDA release such as 13.0, got {cuda_version!r}")
    return "flashinfer-jit-cache==%s+cu%d%d" % (version, cuda[0], cuda[1])


class FilterModule:
    def filters(self):
        return {
            "flashinfer_arch_list": flashinfer_arch_list,
            "torch_arch_list": torch_arch_list,
            "sm_arch": sm_arch,
            "flashinfer_jit_cache_requirement": flashinfer_jit_cache_requirement,
        }
