"""Compile a build stand-in's CUDA kernels with the real nvcc (copied into each stand-in repository as
``sandbox_cuda.py``; stdlib only, it runs inside pip's build environment on the node; ``torch_extension``
imports that environment's torch).

The stand-ins decide the flags with the real projects' own code (FlashInfer's ``CompilationContext``,
torch's ``_get_cuda_arch_flags``; see real_sources.py) and hand them here. Here each ``.cu`` is compiled to an
object (``nvcc -c -Xcompiler -fPIC``), at most ``jobs`` at once as ninja would run them, and the objects are
linked into one shared library by the host compiler against the toolkit's libcudart, as torch's and
FlashInfer's ninja link rules do (``$CXX -shared ... -L<cuda>/lib64 -lcudart``; CXX defaults to ``c++``). Linking
with ``nvcc -shared`` instead would add a device-link cubin for nvcc's default arch (sm_75) to every library. Whatever the compiler says is passed on:
a failed compile raises ``CompileError`` whose text is the command and nvcc's own output (e.g.
``nvcc fatal   : Unsupported gpu architecture 'compute_120f'`` from a CUDA 12.8 nvcc).
"""

import concurrent.futures
import os
import shlex
import subprocess
import sys
import time


class CompileError(RuntimeError):
    """A compiler or linker command failed; str() is the command line and the tool's output."""


def _run(cmd, log):
    log.write("+ %s\n" % " ".join(shlex.quote(c) for c in cmd))
    log.flush()
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    out = proc.stdout.decode(errors="replace")
    if out:
        log.write(out if out.endswith("\n") else out + "\n")
    if proc.returncode != 0:
        raise CompileError("%s\nexited %d:\n%s" % (" ".join(shlex.quote(c) for c in cmd), proc.returncode,
                                                 out.strip() or "(no output)"))
    return out


def nvcc_version(nvcc):
    """The last line of ``nvcc --version`` that names the release (e.g. "Cuda compilation tools, release 13.0,
    V13.0.88")."""
    out = subprocess.run([nvcc, "--version"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT).stdout.decode()
    lines = [line for line in out.splitlines() if "release" in line]
    return lines[-1].strip() if lines else out.strip()


def compile_shared(nvcc, sources, output, flags, jobs, workdir, log=None):
    """Compile ``sources`` with ``flags`` (``jobs`` at a time), link them into ``output``; return the record."""
    log = log or sys.stderr
    jobs = max(1, int(jobs))
    os.makedirs(workdir, exist_ok=True)
    os.makedirs(os.path.dirname(os.path.abspath(output)), exist_ok=True)
    started = time.monotonic()
    objects = [os.path.join(workdir, os.path.splitext(os.path.basename(s))[0] + ".o") for s in sources]
    commands = [[nvcc, "-c", "-Xcompiler", "-fPIC", *flags, "-o", obj, src] for src, obj in zip(sources, objects)]
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        for future in [pool.submit(_run, cmd, log) for cmd in commands]:
            future.result()
    cuda_home = os.path.dirname(os.path.dirname(os.path.abspath(nvcc)))
    link = [os.environ.get("CXX", "c++"), "-shared", "-o", output, *objects, "-L" + os.path.join(cuda_home, "lib64"),
            "-lcudart"]
    _run(link, log)
    return {"nvcc": nvcc, "nvcc_version": nvcc_version(nvcc), "flags": list(flags), "jobs": jobs,
            "sources": [os.path.basename(s) for s in sources], "output": os.path.basename(output),
            "commands": [" ".join(shlex.quote(c) for c in cmd) for cmd in commands + [link]],
            "seconds": round(time.monotonic() - started, 2)}


def torch_extension(src_dir, output_rel, log=None):
    """Build ``<src_dir>/csrc/*.cu`` as a torch CUDA extension would be built against the release's torch:
    ``torch.utils.cpp_extension._find_cuda_home()`` for nvcc, ``_get_cuda_arch_flags()`` for the -gencode flags
    (from TORCH_CUDA_ARCH_LIST; torch raises "Unknown CUDA arch (...)" itself), ``_get_num_workers()`` for the
    parallel compiles (MAX_JOBS, else ninja's default of cores + 2). Return [(wheel path, bytes)]: the library
    at ``output_rel`` and its build record beside it (``<name>.build.json``)."""
    import json
    import shutil
    import tempfile

    from torch.utils import cpp_extension  # the build environment's torch (the sandbox's: its real functions)

    cuda_home = cpp_extension._find_cuda_home()
    nvcc = os.path.join(cuda_home or "/usr/local/cuda", "bin", "nvcc")
    if not (os.path.isfile(nvcc) and os.access(nvcc, os.X_OK)):
        raise CompileError("nvcc not found at %s (torch's CUDA_HOME is %s): install the CUDA toolkit and set "
                           "CUDA_HOME" % (nvcc, cuda_home))
    flags = cpp_extension._get_cuda_arch_flags() + ["-O3", "-std=c++17"]
    jobs = cpp_extension._get_num_workers(False) or (os.cpu_count() or 1) + 2
    sources = sorted(os.path.join(src_dir, "csrc", f) for f in os.listdir(os.path.join(src_dir, "csrc"))
                     if f.endswith(".cu"))
    work = tempfile.mkdtemp(prefix="sandbox-cuda-")
    try:
        record = compile_shared(nvcc, sources, os.path.join(work, "out.so"), flags, jobs, os.path.join(work, "obj"),
                                log)
        with open(os.path.join(work, "out.so"), "rb") as fh:
            library = fh.read()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    record.update(output=output_rel, env={k: os.environ.get(k) for k in
                                          ("TORCH_CUDA_ARCH_LIST", "MAX_JOBS", "CUDA_HOME", "SGL_KERNEL_COMPILE_THREADS")})
    record_rel = os.path.splitext(output_rel)[0] + ".build.json"
    return [(output_rel, library), (record_rel, (json.dumps(record, indent=2, sort_keys=True) + "\n").encode())]
