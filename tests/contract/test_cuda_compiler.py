"""Contract: the arch strings the product computes meet NVIDIA's real compilers.

The product turns compute capabilities into ``FLASHINFER_CUDA_ARCH_LIST`` and ``TORCH_CUDA_ARCH_LIST``
(plugins/filter/build_arch.py); the real builds turn those into nvcc flags with their own code. Here that chain runs
for real:

* the product's strings -> FlashInfer 0.7.2's ``CompilationContext().get_nvcc_flags_list()``
  (flashinfer/compilation_context.py, verbatim from the pinned wheel, tests/sandbox/real_sources.py) and the real
  torch's ``torch.utils.cpp_extension._get_cuda_arch_flags()`` (torch 2.13.0 of .venv-sglang; its function
  differs from the pinned 2.14.1's only by the Rubin 10.7 entries) -> flags;
* CUDA 13.0: those flags -> the real nvcc 13.0.88 (tests/sandbox/cuda_wheels.py) compiles a kernel, and
  cuobjdump shows sm_120 SASS;
* CUDA 12.8: the product picks ``12.0a`` (never ``12.0f``, which needs 12.9); NVIDIA's 12.8 compiler accepts
  ``sm_120a`` and refuses ``12.0f``'s ``sm_120f``. PyPI has no nvcc for 12.8 (the cu12 nvcc wheels hold only
  ptxas), so the 12.8 compiler is NVRTC 12.8 (nvidia-cuda-nvrtc-cu12==12.8.93, the same front and back end as
  nvcc, compiling in-process; ~90 MB, downloaded once into .sandbox/cache).

Skipped, with the reason, when .venv-sglang (the real torch) or g++ (nvcc's host compiler) is absent.
"""

import ctypes
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PYTHON = ROOT / ".venv-sglang" / "bin" / "python"
SANDBOX = ROOT / "tests" / "sandbox"
KERNEL = SANDBOX / "kernels" / "rmsnorm.cu"
sys.path.insert(0, str(SANDBOX))
import cuda_wheels  # noqa: E402
import real_sources  # noqa: E402

pytestmark = [
    pytest.mark.skipif(not PYTHON.exists(), reason=".venv-sglang/bin/python is absent: run "
                       "tests/contract/install_real_sglang.sh (the real torch)"),
    pytest.mark.skipif(not shutil.which("g++"), reason="g++ is needed (nvcc's host compiler)"),
]

from ansible_collections.blackwell.sglang.plugins.filter import build_arch  # noqa: E402

FLAGS_SCRIPT = r"""
import json, os, sys
sys.path.insert(0, sys.argv[1])
from flashinfer.compilation_context import CompilationContext  # FlashInfer 0.7.2's own file
from torch.utils.cpp_extension import _get_cuda_arch_flags      # the real torch
import torch
out = {"torch_version": torch.__version__}
for case in json.loads(sys.argv[2]):
    os.environ["FLASHINFER_CUDA_ARCH_LIST"] = case["flashinfer"]
    os.environ["TORCH_CUDA_ARCH_LIST"] = case["torch"]
    gencode = lambda flags: [f for f in flags if f.startswith("-gencode")]
    out[case["name"]] = {"flashinfer": gencode(CompilationContext().get_nvcc_flags_list()),
                         "torch": gencode(_get_cuda_arch_flags())}
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def cuda13():
    return cuda_wheels.toolkit()["home"]


@pytest.fixture(scope="module")
def real_flags(tmp_path_factory, cuda13):
    """{case: {"flashinfer": [-gencode...], "torch": [-gencode...]}} from the real projects' code."""
    pkg = tmp_path_factory.mktemp("flashinfer-real")
    for rel, text in real_sources.flashinfer_files().items():
        (pkg / rel).parent.mkdir(parents=True, exist_ok=True)
        (pkg / rel).write_text(text)
    (pkg / "flashinfer" / "__init__.py").write_text("")  # not the real one: it imports every kernel module
    cases = [
        {"name": "cuda13", "flashinfer": build_arch.flashinfer_arch_list(["12.0"], "13.0"),
         "torch": build_arch.torch_arch_list(["12.0"])},
        {"name": "cuda12.8", "flashinfer": build_arch.flashinfer_arch_list(["12.0"], "12.8"),
         "torch": build_arch.torch_arch_list(["12.0"])},
        {"name": "family_on_12.8", "flashinfer": "12.0f", "torch": "12.0a"},
    ]
    env = dict(os.environ, CUDA_HOME=str(cuda13), PATH="/usr/bin:/bin")
    proc = subprocess.run([str(PYTHON), "-c", FLAGS_SCRIPT, str(pkg), json.dumps(cases)], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _nvcc(home, flags, out, tmp_path):
    return subprocess.run([str(home / "bin/nvcc"), "-c", *flags, "-o", str(out), str(KERNEL)], capture_output=True,
                          text=True, cwd=tmp_path)


def _sass(home, path):
    out = subprocess.run([str(home / "bin/cuobjdump"), "--list-elf", str(path)], capture_output=True, text=True)
    return re.findall(r"ELF file +\d+: \S+\.(sm_\d+[af]?)\.cubin", out.stdout)


def _gencode_target(flag):
    """-gencode=arch=compute_120a,code=sm_120a -> sm_120a (what NVRTC's --gpu-architecture takes for a cubin)."""
    m = re.fullmatch(r"-gencode=arch=compute_(\w+),code=sm_(\w+)", flag)
    assert m, flag
    return "sm_" + m.group(2)


def _nvrtc(lib_dir, source, arch):
    """Compile ``source`` with NVRTC for ``arch``; return (ok, log, cubin bytes)."""
    lib = ctypes.CDLL(str(lib_dir / "libnvrtc.so.12"))
    prog = ctypes.c_void_p()
    assert lib.nvrtcCreateProgram(ctypes.byref(prog), source, b"rmsnorm.cu", 0, None, None) == 0
    opts = (ctypes.c_char_p * 1)(("--gpu-architecture=" + arch).encode())
    rc = lib.nvrtcCompileProgram(prog, 1, opts)
    size = ctypes.c_size_t()
    lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
    log = ctypes.create_string_buffer(size.value)
    lib.nvrtcGetProgramLog(prog, log)
    cubin = b""
    if rc == 0:
        lib.nvrtcGetCUBINSize(prog, ctypes.byref(size))
        buf = ctypes.create_string_buffer(size.value)
        assert lib.nvrtcGetCUBIN(prog, buf) == 0
        cubin = buf.raw
    lib.nvrtcDestroyProgram(ctypes.byref(prog))
    return rc == 0, log.value.decode(), cubin


def test_product_strings_for_cuda_13_compile_to_sm120_with_the_real_nvcc(real_flags, cuda13, tmp_path):
    assert build_arch.flashinfer_arch_list(["12.0"], "13.0") == "12.0f"
    assert build_arch.torch_arch_list(["12.0"]) == "12.0"
    flags = real_flags["cuda13"]
    assert flags["flashinfer"] == ["-gencode=arch=compute_120f,code=sm_120f"]
    assert flags["torch"] == ["-gencode=arch=compute_120,code=sm_120"]
    version = subprocess.run([str(cuda13 / "bin/nvcc"), "--version"], capture_output=True, text=True).stdout
    assert "release 13.0, V13.0.88" in version
    for name in ("flashinfer", "torch"):
        out = tmp_path / (name + ".o")
        r = _nvcc(cuda13, flags[name], out, tmp_path)
        assert r.returncode == 0, r.stderr
        assert _sass(cuda13, out) == ["sm_120"]  # cuobjdump lists a 12.0f family cubin as sm_120 too


def test_cuda_12_8_takes_the_products_12_0a_and_refuses_12_0f(real_flags, cuda13, tmp_path):
    lib = cuda_wheels.nvrtc_12_8()
    major, minor = ctypes.c_int(), ctypes.c_int()
    ctypes.CDLL(str(lib / "libnvrtc.so.12")).nvrtcVersion(ctypes.byref(major), ctypes.byref(minor))
    assert (major.value, minor.value) == (12, 8)
    source = KERNEL.read_bytes()
    # the product: 12.0a on 12.8 (12.0f needs 12.9), which FlashInfer turns into compute_120a/sm_120a
    assert build_arch.flashinfer_arch_list(["12.0"], "12.8") == "12.0a"
    flags = real_flags["cuda12.8"]["flashinfer"]
    assert flags == ["-gencode=arch=compute_120a,code=sm_120a"]
    ok, log, cubin = _nvrtc(lib, source, _gencode_target(flags[0]))
    assert ok, log
    (tmp_path / "k.cubin").write_bytes(cubin)
    assert _sass(cuda13, tmp_path / "k.cubin") == ["sm_120a"]
    ok, log, _ = _nvrtc(lib, source, _gencode_target(real_flags["cuda12.8"]["torch"][0]))  # torch's sm_120
    assert ok, log
    # 12.0f, which the product never picks for 12.8: FlashInfer passes it through, the 12.8 compiler refuses it
    family = real_flags["family_on_12.8"]["flashinfer"]
    assert family == ["-gencode=arch=compute_120f,code=sm_120f"]
    ok, log, _ = _nvrtc(lib, source, _gencode_target(family[0]))
    assert not ok and "invalid value for --gpu-architecture" in log
    # ... which the 13.0 nvcc accepts: the refusal is 12.8's, not the flag's
    assert _nvcc(cuda13, family, tmp_path / "f.o", tmp_path).returncode == 0
    assert real_flags["family_on_12.8"]["torch"] == ["-gencode=arch=compute_120a,code=sm_120a"]


def test_the_real_compiler_refuses_an_arch_it_does_not_know(cuda13, tmp_path):
    r = _nvcc(cuda13, ["-gencode=arch=compute_135a,code=sm_135a"], tmp_path / "x.o", tmp_path)
    assert r.returncode != 0 and "nvcc fatal   : Unsupported gpu architecture 'compute_135a'" in r.stderr
    codes = subprocess.run([str(cuda13 / "bin/nvcc"), "--list-gpu-code"], capture_output=True, text=True).stdout
    assert {"sm_120", "sm_121"} <= set(codes.split()) and "sm_135" not in codes
