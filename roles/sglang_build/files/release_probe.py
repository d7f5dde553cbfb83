#!/usr/bin/env python3
"""Kernel probe for a release venv: run with the release's own python before the release is activated.

    <release>/venv/bin/python release_probe.py --capability 12.0 [--capability ...] [--cuda 13.0]

Checks (FIELD_NOTES "SM120 builds", R11): sglang, flashinfer and torch import; versions; CUDA is
available; ``torch.cuda.get_arch_list()`` holds ``sm_<XY>`` for every expected capability; one small kernel
op (``torch.ones(4, device="cuda").sum()``) runs on GPU 0; FlashInfer's compiled archs cover every
capability (``12.0f`` covers 12.0 and 12.1, ``12.0a``/``12.0`` only 12.0); torch's CUDA matches ``--cuda``.

Prints one JSON object on stdout: the facts found plus ``ok`` and ``problems``. Exit 0 when ok, 1 when
a check failed; the first line of stderr then says why, starting with "installed kernels lack sm_120"
when a kernel check failed ("no kernel image is available" is the symptom at serving time).
Stdlib only, Python >= 3.9.
"""

import argparse
import importlib
import json
import re
import sys


def _cap_tuple(cap):
    m = re.fullmatch(r"\s*(\d+)\.(\d+)\s*", str(cap))
    if not m:
        raise ValueError("not a compute capability: %r" % (cap,))
    return int(m.group(1)), int(m.group(2))


def sm_name(cap):
    major, minor = _cap_tuple(cap)
    return "sm_%d%d" % (major, minor)


def _arch_entry(entry):
    """"sm_120f" / "12.0f" / (12, "0f") -> (12, 0, "f"); None when unreadable."""
    if isinstance(entry, (tuple, list)) and len(entry) == 2:
        entry = "%s.%s" % (entry[0], entry[1])
    text = str(entry).strip().lower()
    m = re.fullmatch(r"(?:sm_|compute_)?(\d+)\.?(\d)([af]?)", text) or re.fullmatch(r"(\d+)\.(\d+)([af]?)", text)
    if not m:
        return None
    return int(m.group(1)), int(m.group(2)), m.group(3)


def arch_covers(entry, cap):
    """Does a compiled arch entry run on compute capability ``cap``? Family ("f") covers later minors."""
    parsed = _arch_entry(entry)
    if parsed is None:
        return False
    major, minor, suffix = parsed
    want = _cap_tuple(cap)
    if suffix == "f":
        return want[0] == major and want[1] >= minor
    return want == (major, minor)


def torch_has_arch(arch_list, cap):
    """torch lists sm_120 (or sm_120a / sm_120f) for a capability it ships kernels for."""
    want = sm_name(cap)
    return any(str(a) in (want, want + "a", want + "f") for a in arch_list or [])


def flashinfer_archs(flashinfer):
    """(archs, source): what FlashInfer was compiled for; (None, why) when it cannot tell."""
    getter = getattr(flashinfer, "get_cuda_arch_list", None)
    if callable(getter):
        return list(getter()), "flashinfer.get_cuda_arch_list()"
    info = getattr(flashinfer, "build_info", None)
    if callable(info):
        return list(info().get("compiled_archs", [])), "flashinfer.build_info()"
    try:  # FlashInfer >= 0.4: the compilation context of AOT/JIT builds
        ctx = importlib.import_module("flashinfer.compilation_context").CompilationContext()
        return sorted("%s.%s" % tuple(a) for a in ctx.TARGET_CUDA_ARCHS), "flashinfer.compilation_context"
    except Exception as exc:  # noqa: BLE001 - any failure means "unknown", reported as such
        return None, "unknown (%s: %s)" % (type(exc).__name__, exc)


def probe(capabilities, cuda=None, require_flashinfer_archs=False):
    result = {"ok": False, "problems": [], "capabilities": list(capabilities)}
    problems = result["problems"]
    mods = {}
    for name in ("torch", "flashinfer", "sglang"):
        try:
            mods[name] = importlib.import_module(name)
        except Exception as exc:  # noqa: BLE001 - report any import failure, e.g. a missing .so
            problems.append("cannot import %s: %s: %s" % (name, type(exc).__name__, exc))
    for name, mod in mods.items():
        result[name] = getattr(mod, "__version__", None)
    torch = mods.get("torch")
    kernel_problem = []
    if torch is not None:
        result["torch_cuda"] = getattr(getattr(torch, "version", None), "cuda", None)
        if cuda and result["torch_cuda"] and _cap_tuple(result["torch_cuda"]) != _cap_tuple(cuda):
            problems.append("torch is built for CUDA %s, the release is for CUDA %s" % (result["torch_cuda"], cuda))
        available = bool(torch.cuda.is_available())
        result["cuda_available"] = available
        if not available:
            problems.append("torch.cuda.is_available() is False: no usable GPU or driver (never fall back to CPU)")
        else:
            result["device_name"] = torch.cuda.get_device_name(0)
            result["device_capability"] = "%d.%d" % tuple(torch.cuda.get_device_capability(0))
            arch_list = list(torch.cuda.get_arch_list())
            result["torch_arch_list"] = arch_list
            missing = [sm_name(c) for c in capabilities if not torch_has_arch(arch_list, c)]
            if missing:
                kernel_problem.append("torch.cuda.get_arch_list() is %s, without %s"
                                      % (arch_list, ", ".join(missing)))
            try:
                value = torch.ones(4, device="cuda").sum().item()
                result["kernel_op"] = "torch.ones(4, device='cuda').sum() = %s" % value
                if value != 4:
                    kernel_problem.append("torch.ones(4).sum() on cuda gave %r, expected 4" % value)
            except Exception as exc:  # noqa: BLE001 - the RuntimeError "no kernel image is available"
                result["kernel_op"] = "failed"
                kernel_problem.append("torch.ones(4, device='cuda').sum() failed: %s"
                                      % str(exc).splitlines()[0])
    flashinfer = mods.get("flashinfer")
    if flashinfer is not None:
        archs, source = flashinfer_archs(flashinfer)
        result["flashinfer_archs"] = archs
        result["flashinfer_archs_source"] = source
        if archs is None:
            if require_flashinfer_archs:
                kernel_problem.append("FlashInfer's compiled archs are %s" % source)
        else:
            uncovered = [c for c in capabilities if not any(arch_covers(a, c) for a in archs)]
            if uncovered:
                kernel_problem.append("FlashInfer is compiled for %s, which does not cover %s"
                                      % (archs or "nothing", ", ".join(uncovered)))
    if kernel_problem:
        wanted = ", ".join(sm_name(c) for c in capabilities)
        problems.insert(0, "installed kernels lack %s: %s" % (wanted, "; ".join(kernel_problem)))
    result["ok"] = not problems
    return result


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--capability", action="append", required=True, help="compute capability, e.g. 12.0")
    ap.add_argument("--cuda", default=None, help="CUDA version torch must be built for, e.g. 13.0")
    ap.add_argument("--require-flashinfer-archs", action="store_true",
                    help="fail when FlashInfer cannot say which archs it was compiled for")
    args = ap.parse_args(argv)
    result = probe(args.capability, cuda=args.cuda, require_flashinfer_archs=args.require_flashinfer_archs)
    print(json.dumps(result, sort_keys=True))
    if not result["ok"]:
        sys.stderr.write("; ".join(result["problems"]) + "\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
