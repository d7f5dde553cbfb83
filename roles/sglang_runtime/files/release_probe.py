"""Kernel probe for a release venv: run with the release's own python before the release is activated.

    <release>/venv/bin/python release_probe.py --capability 12.0 [--capability ...] [--cuda 13.0]
        [--cuobjdump /usr/local/cuda-13.0/bin/cuobjdump] [--kernel-distribution sglang-kernel ...]

Checks (a build without sm_120 kernels imports fine and fails at the first kernel with "no kernel image is
available"): sglang, flashinfer and torch import; versions; CUDA is
available; ``torch.cuda.get_arch_list()`` holds ``sm_<XY>`` for every expected capability; one small kernel
op (``torch.ones(4, device="cuda").sum()``) runs on GPU 0; FlashInfer's compiled archs, where the package says them
(an AOT build of an older FlashInfer), cover every capability (``12.0f`` covers 12.0 and 12.1, ``12.0a``/``12.0`` only
12.0); torch's CUDA matches ``--cuda``.

FlashInfer 0.7.2 is a JIT package: its kernels are the libraries of its JIT modules. Each ``--flashinfer-module``
(``flashinfer.jit.sampling:gen_sampling_module``: the generator of the module) must be compiled, as FlashInfer's own
``JitSpec.is_compiled`` says (the AOT library of flashinfer-jit-cache, else the JIT cache under
``$FLASHINFER_WORKSPACE_BASE``); otherwise "FlashInfer module 'sampling' is not compiled" refuses the release. With
``--cuobjdump`` their libraries' SASS is judged like the distributions' objects (group "flashinfer JIT cache").
``--warm-flashinfer`` compiles them (``JitSpec.build``: nvcc, a no-op when up to date) and nothing else.
The expected capabilities are the ``--capability`` values plus those of the GPUs torch sees: kernels built
for another GPU are refused even when the build was told to target it.

The SASS itself (with ``--cuobjdump``): every file of the kernel distributions (``--kernel-distribution``;
default flashinfer-python, flashinfer-cubin, flashinfer-jit-cache, sglang, sglang-kernel, those installed)
that can hold device code (``*.so``, ``*.cubin``, ``*.fatbin``, from the distribution's RECORD, so the source
and the wheel method are read alike) is listed with ``cuobjdump --list-elf --list-ptx``. What counts:

* a cubin for ``sm_120``, ``sm_120a`` or ``sm_120f`` counts for compute capability 12.0 (cuobjdump names a
  ``12.0f`` family cubin ``sm_120``); ``sm_120f`` also for 12.1, as the family rule says;
* PTX does not count. A distribution whose only code for 12.0 is PTX (``compute_120``, or PTX of an older
  arch) is refused: the driver would JIT-compile it at every cold start (minutes for kernel libraries, and
  again whenever the JIT cache is keyed anew), and PTX without the ``a``/``f`` suffix lacks the arch-specific
  instructions the SM120 kernels are built for. SASS plus PTX is fine.

A distribution that ships device code but no SASS for a wanted capability makes the probe fail with
"<dist>: no sm_120 code: found sm_90 (<files>)"; no device code in any of them fails too (a release must prove
its kernels). Each object is judged on its own, except those nothing loads on the GPU (``UNLOADED_OBJECTS``:
sglang-kernel's FA3 ``flash_ops`` and ``flashmla_ops``, and its Hopper ``sm90/common_ops`` on 12.x): ``kernel_report``
names, per distribution, the objects with SASS for each capability and those left out, with why.

The toolchain the unit's processes compile with at run time (``--toolchain-only`` checks just this; the service runs
it before it writes a changed unit). The probe runs as the unit would (its user, its environment file: see
roles/sglang_runtime/tasks/probe.yml), so what it finds is what the server will find:

* ``ninja`` on ``PATH``: FlashInfer 0.7.2 JIT-compiles a kernel at its first use by running a bare ``ninja``
  (``flashinfer/jit/cpp_ext.py``, ``run_ninja``); the ``ninja`` wheel puts it in the release venv's ``bin/``;
* nvcc where FlashInfer looks (``get_cuda_path`` in the same file: ``CUDA_HOME``, else ``CUDA_PATH``, else the
  directory above ``which nvcc``, else ``/usr/local/cuda``), answering ``nvcc --version`` with the release's CUDA;
* Triton 3.8.0's launcher build (``triton/runtime/build.py``, ``_build``): ``CC``, else ``gcc``, else ``clang`` on
  ``PATH``, compiling with ``-I`` the interpreter's include directory; a tiny ``#include <Python.h>`` object is
  compiled the same way (no ``python3-dev``: "Python.h: No such file or directory").

Prints one JSON object on stdout: the facts found plus ``ok`` and ``problems``. Exit 0 when ok, 1 when
a check failed; the first line of stderr then says why, starting with "installed kernels lack sm_120"
when a kernel check failed ("no kernel image is available" is the symptom at serving time).
Stdlib only, Python >= 3.9.
"""

import argparse
import importlib
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile

KERNEL_DISTRIBUTIONS = ("flashinfer-python", "flashinfer-cubin", "flashinfer-jit-cache", "sglang", "sglang-kernel")

# Objects a release may ship without SASS for a compute capability, because nothing loads them there: (distribution,
# object path under site-packages without its extension suffix, capability major) -> why. Read from sglang-kernel
# 0.4.10 (tests/contract/test_real_kernels.py checks each against the wheel: the SASS it holds and the lines quoted).
UNLOADED_OBJECTS = {
    ("sglang-kernel", "sgl_kernel/flash_ops", 12):
        "FA3, loaded only by sgl_kernel.flash_attn ('from sgl_kernel import flash_ops') for --attention-backend fa3, "
        "which the inventory check refuses for compute capability 12.x",
    ("sglang-kernel", "sgl_kernel/flashmla_ops", 12):
        "FlashMLA, loaded only by sgl_kernel.flash_mla ('from sgl_kernel import flashmla_ops') for --attention-backend "
        "flashmla, which the inventory check refuses for compute capability 12.x",
    ("sglang-kernel", "sgl_kernel/sm90/common_ops", 12):
        "the Hopper build of common_ops: sgl_kernel/load_utils.py loads sm90/ only for compute capability 9.0 and "
        "sm100/ for every other",
}


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
    # FlashInfer >= 0.4 (0.7.2 among them) is a JIT package and says no such thing: its CompilationContext names what a
    # JIT compile would target, not what is compiled. What is compiled is each module's library (flashinfer_modules).
    return None, "not said by the package (a JIT package: see flashinfer_modules)"


FLASHINFER_MODULES_GROUP = "flashinfer JIT cache"


def flashinfer_spec(ref):
    """The JitSpec of ``ref`` ("flashinfer.jit.sampling:gen_sampling_module": its generator)."""
    module, colon, function = str(ref).partition(":")
    if not (module and colon and function):
        raise ValueError("a FlashInfer module is named module:generator, got %r" % (ref,))
    return getattr(importlib.import_module(module), function)()


def flashinfer_modules(refs):
    """(report, problems): for each FlashInfer JIT module the server needs, whether its library is there (FlashInfer's
    own JitSpec says: ``is_compiled``, the AOT artifact of flashinfer-jit-cache first, else the JIT cache under
    $FLASHINFER_WORKSPACE_BASE) and where."""
    report, problems = [], []
    for ref in refs:
        try:
            spec = flashinfer_spec(ref)
            entry = {"module": spec.name, "generator": ref, "compiled": bool(spec.is_compiled),
                     "aot": bool(spec.is_aot), "path": str(spec.get_library_path())}
        except Exception as exc:  # noqa: BLE001 - any failure is reported with the module's name
            problems.append("FlashInfer module %s cannot be looked up: %s: %s" % (ref, type(exc).__name__, exc))
            continue
        report.append(entry)
        if not entry["compiled"]:
            problems.append("FlashInfer module '%s' is not compiled: no AOT library and nothing at %s (the release's "
                            "JIT cache, warmed by its build; without it the server compiles it with nvcc at its first "
                            "use)" % (entry["module"], entry["path"]))
    return report, problems


def warm_flashinfer(refs):
    """Compile each FlashInfer JIT module into the JIT cache unless an AOT library has it (FlashInfer's own
    ``JitSpec.build``: nvcc through ninja, a no-op when up to date). One JSON-ready dict: ok, problems, modules."""
    import time

    result = {"ok": False, "problems": [], "modules": []}
    for ref in refs:
        started = time.monotonic()
        try:
            spec = flashinfer_spec(ref)
            before, aot = bool(spec.is_compiled), bool(spec.is_aot)
            if not aot:
                spec.build()
            entry = {"module": spec.name, "generator": ref, "aot": aot,
                     "result": "aot" if aot else ("up to date" if before else "compiled"),
                     "seconds": round(time.monotonic() - started, 1), "path": str(spec.get_library_path())}
            if not spec.is_compiled:
                result["problems"].append("FlashInfer module '%s': its build left nothing at %s"
                                          % (spec.name, entry["path"]))
        except Exception as exc:  # noqa: BLE001 - nvcc's or ninja's failure, reported with the module's name
            lines = [line for line in str(getattr(exc, "output", None) or exc).strip().splitlines() if line.strip()]
            result["problems"].append("FlashInfer module %s did not compile: %s: %s"
                                      % (ref, type(exc).__name__, " | ".join(lines[-5:])))
            continue
        result["modules"].append(entry)
    result["ok"] = not result["problems"]
    return result


def _device_code_candidate(path):
    name = os.path.basename(str(path))
    return name.endswith((".so", ".cubin", ".fatbin")) or ".so." in name


def cuobjdump_archs(cuobjdump, path):
    """{"sass": [...], "ptx": [...]} of one file (sorted, e.g. sass ["sm_120a"], ptx ["compute_120"]); None when
    it holds no device code. Raises RuntimeError with cuobjdump's message when it cannot read the file."""
    proc = subprocess.run([cuobjdump, "--list-elf", "--list-ptx", str(path)], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, check=False)  # its exit status is read below
    out = proc.stdout.decode(errors="replace")
    err = proc.stderr.decode(errors="replace")
    sass, ptx = set(), set()
    for line in out.splitlines():
        m = re.match(r"\s*ELF file\s+\d+:\s+\S*\.(sm_\d+[af]?)\.cubin\s*$", line)
        if m:
            sass.add(m.group(1))
        m = re.match(r"\s*PTX file\s+\d+:\s+\S*\.sm_(\d+[af]?)\.ptx\s*$", line)
        if m:
            ptx.add("compute_" + m.group(1))
    if sass or ptx:
        return {"sass": sorted(sass, key=_arch_sort), "ptx": sorted(ptx, key=_arch_sort)}
    if "does not contain device code" in err or "No ELF file found" in err:
        return None
    raise RuntimeError((err or out).strip().splitlines()[-1] if (err or out).strip() else "exit %d" % proc.returncode)


def _arch_sort(arch):
    m = re.search(r"(\d+)([af]?)$", arch)
    return (int(m.group(1)), m.group(2)) if m else (0, arch)


def _distribution_files(name):
    """Absolute paths of an installed distribution's files (its RECORD); None when it is not installed."""
    from importlib import metadata
    try:
        dist = metadata.distribution(name)
    except metadata.PackageNotFoundError:
        return None
    return [os.path.realpath(str(dist.locate_file(f))) for f in (dist.files or [])]


def kernel_code(cuobjdump, distributions=KERNEL_DISTRIBUTIONS, files_of=_distribution_files):
    """{distribution: {"objects": {file: {"sass", "ptx"}}, "unreadable": {file: message}}} for the installed ones."""
    found = {}
    for name in distributions:
        files = files_of(name)
        if files is None:
            continue
        entry = {"objects": {}, "unreadable": {}}
        for path in sorted(p for p in files if _device_code_candidate(p) and os.path.isfile(p)):
            try:
                archs = cuobjdump_archs(cuobjdump, path)
            except (OSError, RuntimeError) as exc:
                entry["unreadable"][path] = str(exc)
                continue
            if archs is not None:
                entry["objects"][path] = archs
        found[name] = entry
    return found


def _object_key(path):
    """An object's path under site-packages without its extension suffix: ".../site-packages/sgl_kernel/sm90/
    common_ops.abi3.so" -> "sgl_kernel/sm90/common_ops" (outside a site-packages: its last two directories)."""
    parts = [p for p in str(path).replace(os.sep, "/").split("/") if p]
    roots = [i for i, p in enumerate(parts) if p in ("site-packages", "dist-packages")]
    parts = parts[roots[-1] + 1:] if roots else parts[-3:]
    return "/".join(parts[:-1] + [parts[-1].split(".")[0]])


def unloaded_reason(distribution, path, cap):
    """Why ``path`` of ``distribution`` may lack SASS for ``cap`` (nothing loads it there), or None."""
    key = _object_key(path)
    major = _cap_tuple(cap)[0]
    for (dist, obj, cap_major), why in UNLOADED_OBJECTS.items():
        if dist == distribution and cap_major == major and (key == obj or key.endswith("/" + obj)):
            return why
    return None


def _judge(name, objects, cap):
    """Split one distribution's ``objects`` for ``cap``: (paths with SASS for it, {path: why} of those without it that
    nothing loads there, {path: archs} of those without it that count)."""
    covered, unloaded, lacking = [], {}, {}
    for path, archs in objects.items():
        if any(arch_covers(a, cap) for a in archs["sass"]):
            covered.append(path)
            continue
        why = unloaded_reason(name, path, cap)
        if why:
            unloaded[path] = why
        else:
            lacking[path] = archs
    return covered, unloaded, lacking


def object_report(code, capabilities):
    """{distribution: {"with_<sm>": [object keys with SASS for it], "unloaded_<sm>": {object key: why}}} per wanted
    capability: which real objects carry the GPUs' code, and which lack it because nothing loads them there."""
    report = {}
    for name, entry in code.items():
        if not entry["objects"]:
            continue
        item = report.setdefault(name, {})
        for cap in capabilities:
            want = sm_name(cap)
            covered, unloaded, _lacking = _judge(name, entry["objects"], cap)
            item["with_" + want] = sorted(_object_key(p) for p in covered)
            if unloaded:
                item["unloaded_" + want] = {_object_key(p): why for p, why in unloaded.items()}
    return report


def sass_problems(code, capabilities):
    """Problems for ``kernel_code()``'s result: an object lacking SASS for a capability (PTX does not count) unless
    nothing loads it there (UNLOADED_OBJECTS), or no device code in any distribution at all."""
    problems = []
    for name, entry in code.items():
        objects = entry["objects"]
        if not objects:
            continue
        for cap in capabilities:
            _covered, _unloaded, lacking = _judge(name, objects, cap)
            if not lacking:
                continue
            sass = sorted({a for o in lacking.values() for a in o["sass"]}, key=_arch_sort)
            ptx = sorted({a for o in lacking.values() for a in o["ptx"]}, key=_arch_sort)
            files = ", ".join(sorted(os.path.basename(p) for p in lacking))
            want = sm_name(cap)
            if ptx:
                problems.append("%s: no %s code: found %s; PTX %s is refused (the driver would JIT-compile it at "
                                "every cold start; build SASS for %s) (%s)"
                                % (name, want, ", ".join(sass) or "no SASS", ", ".join(ptx), cap, files))
            else:
                problems.append("%s: no %s code: found %s (%s)" % (name, want, ", ".join(sass) or "no SASS", files))
    if not any(entry["objects"] for entry in code.values()):
        problems.append("no %s code: none of %s ships CUDA objects (.so/.cubin with device code)"
                        % (", ".join(sm_name(c) for c in capabilities), ", ".join(sorted(code)) or "the kernel packages"))
    return problems


def flashinfer_cuda_home(env):
    """Where FlashInfer 0.7.2 looks for nvcc (``flashinfer/jit/cpp_ext.py``, ``get_cuda_path``): (home, how found)."""
    for name in ("CUDA_HOME", "CUDA_PATH"):
        if env.get(name):
            return env[name], name
    nvcc = shutil.which("nvcc", path=env.get("PATH", ""))
    if nvcc:
        return os.path.dirname(os.path.dirname(nvcc)), "which nvcc"
    return "/usr/local/cuda", "FlashInfer's default (no CUDA_HOME, no nvcc on PATH)"


def _first_error(text):
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    for line in lines:
        if "error" in line.lower():
            return line
    return lines[-1] if lines else ""


def _user_name():
    import pwd
    try:
        return pwd.getpwuid(os.getuid()).pw_name
    except KeyError:
        return str(os.getuid())


def toolchain(cuda=None, env=None):
    """(facts, problems) of what the unit's processes compile with at run time (see the module docstring)."""
    env = dict(os.environ if env is None else env)
    path = env.get("PATH", "")
    facts, problems = {"path": path, "user": _user_name()}, []
    ninja = shutil.which("ninja", path=path)
    if not ninja:
        problems.append("ninja not found on the unit's PATH (%s): FlashInfer JIT-compiles its kernels with a bare "
                        "'ninja' (flashinfer/jit/cpp_ext.py run_ninja), which the ninja wheel puts in the release "
                        "venv's bin/; PATH must start with <release>/venv/bin (sglang_service_environment must not "
                        "replace it)" % (path or "unset"))
    else:
        try:
            proc = subprocess.run([ninja, "--version"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  env=env, check=False, timeout=60)
            facts["ninja"] = {"path": ninja, "version": proc.stdout.decode(errors="replace").strip()}
            if proc.returncode != 0:
                problems.append("%s --version failed: %s" % (ninja, facts["ninja"]["version"]))
        except (OSError, subprocess.TimeoutExpired) as exc:
            problems.append("%s does not run: %s" % (ninja, exc))
    cuda_home, how = flashinfer_cuda_home(env)
    nvcc = os.path.join(cuda_home, "bin", "nvcc")
    facts["cuda_home"] = {"path": cuda_home, "from": how}
    if not (os.path.isfile(nvcc) and os.access(nvcc, os.X_OK)):
        problems.append("no nvcc at %s (%s=%s, where FlashInfer's get_cuda_path looks): FlashInfer cannot "
                        "JIT-compile a kernel; point CUDA_HOME at the CUDA %s toolkit (deployment_cuda_home, "
                        "sglang_service_cuda_home)" % (nvcc, "CUDA_HOME" if how == "CUDA_HOME" else how, cuda_home,
                                                       cuda or ""))
    else:
        try:
            proc = subprocess.run([nvcc, "--version"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                                  check=False, timeout=120)
            out = proc.stdout.decode(errors="replace")
            found = re.findall(r"release (\d+\.\d+),", out)
            facts["nvcc"] = {"path": nvcc, "release": found[0] if found else None}
            if proc.returncode != 0 or not found:
                problems.append("%s --version failed: %s" % (nvcc, _first_error(out) or "exit %d" % proc.returncode))
            elif cuda and _cap_tuple(found[0]) != _cap_tuple(cuda):
                problems.append("%s is CUDA %s, the release is for CUDA %s: point CUDA_HOME at the CUDA %s toolkit"
                                % (nvcc, found[0], cuda, cuda))
        except (OSError, subprocess.TimeoutExpired) as exc:
            problems.append("%s does not run: %s" % (nvcc, exc))
    # Triton's _build (triton/runtime/build.py): CC, else gcc, else clang; -I the interpreter's include directory.
    cc = env.get("CC") or shutil.which("gcc", path=path) or shutil.which("clang", path=path)
    scheme = sysconfig.get_default_scheme()
    if scheme == "posix_local":
        scheme = "posix_prefix"
    include = sysconfig.get_paths(scheme=scheme)["include"]
    facts["launcher"] = {"cc": cc, "python_include": include}
    if not cc:
        problems.append("no C compiler on the unit's PATH (%s): Triton builds its launcher with CC, gcc or clang "
                        "(triton/runtime/build.py); install gcc (roles/host_prerequisites)" % (path or "unset"))
    else:
        workdir = tempfile.mkdtemp(prefix="sglang-probe-")
        try:
            src = os.path.join(workdir, "probe_launcher.c")
            with open(src, "w") as f:
                f.write("#include <Python.h>\nint probe_launcher(void) { return Py_IsInitialized(); }\n")
            cmd = [cc, src, "-O3", "-shared", "-fPIC", "-Wno-psabi", "-o", os.path.join(workdir, "probe_launcher.so"),
                   "-I" + include]
            proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, check=False,
                                  timeout=120)
            if proc.returncode != 0:
                problems.append("Triton cannot build its launcher (triton/runtime/build.py): %s (%s); install "
                                "python3-dev (roles/host_prerequisites)"
                                % (_first_error(proc.stdout.decode(errors="replace")) or "exit %d" % proc.returncode,
                                   " ".join(cmd[:1] + ["...", "-I" + include])))
            else:
                facts["launcher"]["compiled"] = True
        except (OSError, subprocess.TimeoutExpired) as exc:
            problems.append("%s does not run: %s" % (cc, exc))
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
    return facts, problems


def toolchain_only(cuda=None):
    """The service's check before it writes a changed unit: the run-time toolchain alone, no imports, no GPU."""
    facts, problems = toolchain(cuda)
    return {"ok": not problems, "problems": problems, "toolchain": facts}


def kernel_op(torch):
    """One small kernel on the first GPU: (description, problem or None)."""
    try:
        value = torch.ones(4, device="cuda").sum().item()
    except Exception as exc:  # noqa: BLE001 - the RuntimeError "no kernel image is available"
        return "failed", "torch.ones(4, device='cuda').sum() failed: %s" % str(exc).splitlines()[0]
    if value != 4:
        return "torch.ones(4, device='cuda').sum() = %s" % value, "torch.ones(4).sum() on cuda gave %r, expected 4" % value
    return "torch.ones(4, device='cuda').sum() = %s" % value, None


def recorded_flashinfer_modules(release_json=None):
    """The FlashInfer modules this release's build compiled (release.json beside this file: flashinfer_warm)."""
    path = release_json or os.path.join(os.path.dirname(os.path.abspath(__file__)), "release.json")
    try:
        with open(path) as handle:
            record = json.load(handle)
    except (OSError, ValueError):
        return []
    return [m["generator"] for m in (record.get("flashinfer_warm") or {}).get("modules", []) if m.get("generator")]


def _check_modules(result, refs):
    """Add flashinfer_modules and, when one is missing, the problem to ``result``; return it."""
    result["flashinfer_modules"], found = flashinfer_modules(refs)
    if found:
        result["problems"].append("installed kernels lack the FlashInfer modules the server needs: " + "; ".join(found))
    return result


def flashinfer_only(refs):
    """A release about to go live again (current flips to a release built before): its FlashInfer modules are there."""
    result = _check_modules({"ok": False, "problems": []}, refs)
    result["ok"] = not result["problems"]
    return result


def kernel_op_only(flashinfer_refs=()):
    """The switch's check, once the serving process has stopped: torch imports, sees a GPU and runs one kernel; the
    FlashInfer modules the release was warmed with are still compiled."""
    result = {"ok": False, "problems": []}
    if flashinfer_refs:
        _check_modules(result, flashinfer_refs)
    try:
        torch = importlib.import_module("torch")
    except Exception as exc:  # noqa: BLE001
        result["problems"].append("cannot import torch: %s: %s" % (type(exc).__name__, exc))
        return result
    if not torch.cuda.is_available():
        result["problems"].append("torch.cuda.is_available() is False: no usable GPU or driver")
        return result
    result["kernel_op"], problem = kernel_op(torch)
    if problem:
        result["problems"].append("installed kernels do not run here: " + problem)
    result["ok"] = not result["problems"]
    return result


def probe(capabilities, cuda=None, require_flashinfer_archs=False, cuobjdump=None,
          kernel_distributions=KERNEL_DISTRIBUTIONS, run_kernel_op=True, check_toolchain=True, flashinfer_refs=()):
    result = {"ok": False, "problems": [], "capabilities": list(capabilities)}
    problems = result["problems"]
    if check_toolchain:
        result["toolchain"], found = toolchain(cuda)
        problems.extend(found)
    wanted = list(capabilities)
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
    lacking = []  # capabilities a check found no kernels for (the message's "lack sm_XY"); all when unknown
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
            for index in range(torch.cuda.device_count()):
                cap = "%d.%d" % tuple(torch.cuda.get_device_capability(index))
                if all(_cap_tuple(cap) != _cap_tuple(c) for c in wanted):
                    wanted.append(cap)
            arch_list = list(torch.cuda.get_arch_list())
            result["torch_arch_list"] = arch_list
            missing = [sm_name(c) for c in wanted if not torch_has_arch(arch_list, c)]
            lacking += [c for c in wanted if not torch_has_arch(arch_list, c)]
            if missing:
                kernel_problem.append("torch.cuda.get_arch_list() is %s, without %s"
                                      % (arch_list, ", ".join(missing)))
            if run_kernel_op:
                result["kernel_op"], problem = kernel_op(torch)
                if problem:
                    kernel_problem.append(problem)
            else:
                result["kernel_op"] = "deferred (the GPUs serve; the switch runs it with --kernel-op-only)"
    flashinfer = mods.get("flashinfer")
    if flashinfer is not None:
        archs, source = flashinfer_archs(flashinfer)
        result["flashinfer_archs"] = archs
        result["flashinfer_archs_source"] = source
        if archs is None:
            if require_flashinfer_archs:
                kernel_problem.append("FlashInfer's compiled archs are %s" % source)
        else:
            uncovered = [c for c in wanted if not any(arch_covers(a, c) for a in archs)]
            lacking += uncovered
            if uncovered:
                kernel_problem.append("FlashInfer is compiled for %s, which does not cover %s"
                                      % (archs or "nothing", ", ".join(uncovered)))
        if flashinfer_refs:
            result["flashinfer_modules"], found = flashinfer_modules(flashinfer_refs)
            kernel_problem.extend(found)
            lacking += wanted if found else []
    result["required_capabilities"] = wanted
    if cuobjdump:
        if not (os.path.isfile(cuobjdump) and os.access(cuobjdump, os.X_OK)):
            kernel_problem.append("cannot read the kernels' SASS: no cuobjdump at %s (the CUDA toolkit's "
                                  "cuda-cuobjdump package)" % cuobjdump)
        else:
            code = kernel_code(cuobjdump, kernel_distributions)
            libraries = [m["path"] for m in result.get("flashinfer_modules", []) if m["compiled"]]
            if libraries:  # the FlashInfer modules' libraries are judged like the distributions' objects
                code.update(kernel_code(cuobjdump, [FLASHINFER_MODULES_GROUP], lambda _name: libraries))
            result["kernel_objects"] = {name: entry["objects"] for name, entry in code.items()}
            result["kernel_report"] = object_report(code, wanted)
            unreadable = {path: msg for entry in code.values() for path, msg in entry["unreadable"].items()}
            if unreadable:
                result["kernel_objects_unreadable"] = unreadable
            found = sass_problems(code, wanted)
            kernel_problem.extend(found)
            lacking += [c for c in wanted if any("no %s code" % sm_name(c) in p for p in found)]
    if kernel_problem:
        named = [c for c in wanted if any(_cap_tuple(c) == _cap_tuple(x) for x in lacking)] or wanted
        problems.insert(0, "installed kernels lack %s: %s"
                        % (", ".join(sm_name(c) for c in named), "; ".join(kernel_problem)))
    result["ok"] = not problems
    return result


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--capability", action="append", default=[], help="compute capability, e.g. 12.0 (required "
                    "unless --kernel-op-only)")
    ap.add_argument("--cuda", default=None, help="CUDA version torch must be built for, e.g. 13.0")
    ap.add_argument("--require-flashinfer-archs", action="store_true",
                    help="fail when FlashInfer cannot say which archs it was compiled for")
    ap.add_argument("--cuobjdump", default=None,
                    help="cuobjdump to read the SASS of the kernel distributions' objects with (skipped when unset)")
    ap.add_argument("--kernel-distribution", action="append", default=None,
                    help="distribution whose CUDA objects must hold SASS for every capability (repeatable; "
                         "default: %s)" % ", ".join(KERNEL_DISTRIBUTIONS))
    ap.add_argument("--flashinfer-module", action="append", default=[], metavar="MODULE:GENERATOR",
                    help="a FlashInfer JIT module the server needs, by its generator (e.g. "
                         "flashinfer.jit.sampling:gen_sampling_module): its library must be compiled (repeatable)")
    switches = (
        ("--no-kernel-op", "skip the GPU kernel (a release prepared while the GPUs serve; the switch runs it)"),
        ("--kernel-op-only", "only import torch and run one kernel on a GPU (the switch, after the server stopped)"),
        ("--toolchain-only", "only check the run-time toolchain: ninja, nvcc under CUDA_HOME, Triton's launcher build"),
        ("--no-toolchain", "skip the run-time toolchain checks"),
        ("--recorded-flashinfer-modules",
         "also the FlashInfer modules the release's build compiled (release.json beside this file)"),
        ("--warm-flashinfer", "only compile the --flashinfer-module modules into the JIT cache (the release's build)"),
        ("--flashinfer-only",
         "only check that the FlashInfer modules are compiled (a release built before goes live again)"),
    )
    for flag, text in switches:
        ap.add_argument(flag, action="store_true", help=text)
    args = ap.parse_args(argv)
    if not (args.kernel_op_only or args.toolchain_only or args.warm_flashinfer or args.flashinfer_only) \
            and not args.capability:
        ap.error("--capability is required")
    refs = list(args.flashinfer_module)
    if args.recorded_flashinfer_modules:
        refs += [ref for ref in recorded_flashinfer_modules() if ref not in refs]
    if args.warm_flashinfer:
        result = warm_flashinfer(refs)
    elif args.flashinfer_only:
        result = flashinfer_only(refs)
    elif args.kernel_op_only:
        result = kernel_op_only(refs)
    elif args.toolchain_only:
        result = toolchain_only(cuda=args.cuda)
    else:
        result = probe(args.capability, cuda=args.cuda, require_flashinfer_archs=args.require_flashinfer_archs,
                       cuobjdump=args.cuobjdump, kernel_distributions=args.kernel_distribution or KERNEL_DISTRIBUTIONS,
                       run_kernel_op=not args.no_kernel_op, check_toolchain=not args.no_toolchain,
                       flashinfer_refs=refs)
    print(json.dumps(result, sort_keys=True))
    if not result["ok"]:
        sys.stderr.write("; ".join(result["problems"]) + "\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
