"""The release kernel probe (roles/sglang_runtime/files/release_probe.py) against the stand-in torch.

The probe runs as the release venv would run it: a subprocess whose sys.path holds the stand-in torch
(tests/sandbox/fake_torch.py), a stub flashinfer reporting its compiled archs and a stub sglang; the GPUs
come from the nvidia-smi stand-in reading a gpus.json in the temp dir.
"""

import concurrent.futures
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROBE = ROOT / "roles" / "sglang_runtime" / "files" / "release_probe.py"
SANDBOX = ROOT / "tests" / "sandbox"
sys.path.insert(0, str(SANDBOX))
import fake_torch  # noqa: E402

_spec = importlib.util.spec_from_file_location("release_probe", PROBE)
release_probe = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(release_probe)


@pytest.fixture
def site(tmp_path):
    """A fake site-packages + GPU state; returns run(flashinfer_archs=..., torch_archs=..., gpus=..., args=...)."""
    lib = tmp_path / "site-packages"
    fake_torch.write_package(lib)
    (lib / "sglang").mkdir()
    (lib / "sglang" / "__init__.py").write_text('__version__ = "0.5.23"\n')
    (lib / "flashinfer").mkdir()

    def run(flashinfer_archs=("sm_120f",), torch_archs=None, gpus=None, args=("--capability", "12.0"),
            with_sglang=True, dists=None, probe=PROBE):
        # The run-time toolchain (ninja, nvcc, Triton's launcher) has tests of its own below.
        args = tuple(args) + ("--no-toolchain",)
        (lib / "flashinfer" / "__init__.py").write_text(
            '__version__ = "0.7.2"\n\ndef get_cuda_arch_list():\n    return %r\n' % list(flashinfer_archs))
        for info in lib.glob("*.dist-info"):
            shutil.rmtree(info)
        for dist, files in (dists or {}).items():  # {distribution: {path in site-packages: built object}}
            info = lib / ("%s-1.0.dist-info" % dist.replace("-", "_"))
            info.mkdir()
            (info / "METADATA").write_text("Metadata-Version: 2.1\nName: %s\nVersion: 1.0\n" % dist)
            for rel, built in files.items():
                (lib / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(built, lib / rel)
            (info / "RECORD").write_text("".join("%s,,\n" % rel for rel in files) + info.name + "/RECORD,,\n")
        if not with_sglang:
            (lib / "sglang" / "__init__.py").write_text('raise ImportError("libsgl_kernel.so: cannot open")\n')
        (tmp_path / "gpus.json").write_text(json.dumps(gpus if gpus is not None else {}))
        (tmp_path / "torch.json").write_text(json.dumps({} if torch_archs is None else {"arch_list": torch_archs}))
        env = dict(os.environ, PYTHONPATH=str(lib), FAKE_TORCH_NVIDIA_SMI=str(SANDBOX / "fake_nvidia_smi.py"),
                   FAKE_NVIDIA_SMI_CONFIG=str(tmp_path / "gpus.json"), FAKE_TORCH_CONFIG=str(tmp_path / "torch.json"))
        env.pop("FAKE_TORCH_ARCH_LIST", None)
        proc = subprocess.run([sys.executable, str(probe), *args], env=env, capture_output=True, text=True,
                              timeout=60)
        return proc.returncode, json.loads(proc.stdout), proc.stderr

    return run


def test_sm120_release_passes_with_versions_and_kernel_op(site):
    rc, out, err = site(args=("--capability", "12.0", "--cuda", "13.0"))
    assert rc == 0, err
    assert out["ok"] and out["problems"] == []
    assert (out["torch"], out["torch_cuda"], out["flashinfer"], out["sglang"]) == ("2.14.1+cu130", "13.0",
                                                                                    "0.7.2", "0.5.23")
    assert out["device_capability"] == "12.0" and "sm_120" in out["torch_arch_list"]
    assert out["kernel_op"].endswith("= 4.0")
    assert out["flashinfer_archs"] == ["sm_120f"]


def test_torch_without_sm120_fails_with_the_kernel_image_error(site):
    rc, out, err = site(torch_archs=["sm_80", "sm_90", "sm_100"])
    assert rc == 1 and not out["ok"]
    assert err.startswith("installed kernels lack sm_120: ")
    assert "get_arch_list() is ['sm_80', 'sm_90', 'sm_100'], without sm_120" in err
    assert "no kernel image is available for execution on the device" in err
    assert out["kernel_op"] == "failed"


def test_flashinfer_built_for_another_arch_fails(site):
    rc, out, err = site(flashinfer_archs=["sm_90a"])
    assert rc == 1
    assert err.startswith("installed kernels lack sm_120: FlashInfer is compiled for ['sm_90a'], which does not "
                          "cover 12.0")


def test_a_prepare_on_serving_gpus_defers_the_kernel_op_and_the_switch_runs_only_it(site):
    """The rolling redeploy prepares a release while the GPUs serve: every check but the kernel op (its CUDA context
    would take memory from the server); the switch runs only the kernel op once the server has stopped."""
    rc, out, err = site(args=("--capability", "12.0", "--no-kernel-op"))
    assert rc == 0, err
    assert out["kernel_op"].startswith("deferred") and "sm_120" in out["torch_arch_list"]
    rc, out, err = site(torch_archs=["sm_90"], args=("--capability", "12.0", "--no-kernel-op"))
    assert rc == 1 and "without sm_120" in err  # what can be checked without a kernel still refuses
    rc, out, err = site(args=("--kernel-op-only",))
    assert rc == 0 and out == {"ok": True, "problems": [], "kernel_op": "torch.ones(4, device='cuda').sum() = 4.0"}
    rc, out, err = site(torch_archs=["sm_90"], args=("--kernel-op-only",))
    assert rc == 1 and "no kernel image is available" in err


def test_no_gpu_is_a_failure_not_a_cpu_fallback(site):
    rc, out, err = site(gpus={"failure": "no_devices"})
    assert rc == 1 and out["cuda_available"] is False
    assert "torch.cuda.is_available() is False" in err


def test_import_failure_and_cuda_mismatch_are_reported(site):
    rc, out, err = site(with_sglang=False, args=("--capability", "12.0", "--cuda", "12.8"))
    assert rc == 1
    assert "cannot import sglang: ImportError: libsgl_kernel.so: cannot open" in err
    assert "torch is built for CUDA 13.0, the release is for CUDA 12.8" in err


@pytest.mark.parametrize(
    "entry, cap, covers",
    [("sm_120f", "12.0", True), ("sm_120f", "12.1", True), ("12.0f", "12.0", True), ("sm_120a", "12.0", True),
     ("sm_120a", "12.1", False), ("sm_120", "12.0", True), ("sm_100f", "12.0", False), ("sm_90a", "12.0", False),
     ((12, "0f"), "12.0", True), ("garbage", "12.0", False)],
)
def test_flashinfer_arch_coverage(entry, cap, covers):
    assert release_probe.arch_covers(entry, cap) is covers


def test_torch_arch_names():
    assert release_probe.torch_has_arch(["sm_90", "sm_120"], "12.0")
    assert not release_probe.torch_has_arch(["sm_90", "sm_100"], "12.0")
    assert not release_probe.torch_has_arch(["sm_12"], "12.0")


def test_fake_torch_wheel_installs_from_its_simple_index(tmp_path):
    house = tmp_path / "wheelhouse"
    name, changed = fake_torch.build_torch_wheel(house)
    assert name == "torch-2.14.1+cu130-py3-none-any.whl" and changed
    assert fake_torch.build_torch_wheel(house) == (name, False)  # deterministic, no rewrite
    with zipfile.ZipFile(house / name) as zf:
        names = zf.namelist()
        assert "torch-2.14.1+cu130.dist-info/RECORD" in names and "torch/cuda/__init__.py" in names
        assert "Version: 2.14.1+cu130" in zf.read("torch-2.14.1+cu130.dist-info/METADATA").decode()
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    pip = subprocess.run([str(env_dir / "bin/pip"), "install", "--quiet", "--no-cache-dir", "--isolated",
                          "--index-url", (house / "simple").as_uri(), "torch==2.14.1"],
                         capture_output=True, text=True, timeout=300)
    assert pip.returncode == 0, pip.stderr
    env = dict(os.environ, FAKE_TORCH_NVIDIA_SMI=str(SANDBOX / "fake_nvidia_smi.py"),
               FAKE_NVIDIA_SMI_CONFIG=str(tmp_path / "none.json"), FAKE_TORCH_ARCH_LIST="sm_90;sm_100")
    (tmp_path / "none.json").write_text("{}")
    code = ("import torch\nprint(torch.__version__, torch.version.cuda, torch.cuda.get_device_capability())\n"
            "torch.ones(4, device='cuda').sum()\n")
    run = subprocess.run([str(env_dir / "bin/python"), "-c", code], env=env, capture_output=True, text=True)
    assert run.stdout.strip() == "2.14.1+cu130 13.0 (12, 0)"
    assert run.returncode == 1
    assert "RuntimeError: CUDA error: no kernel image is available for execution on the device" in run.stderr


# ---------------------------------------------------------------------------------- SASS read with cuobjdump
needs_gxx = pytest.mark.skipif(not shutil.which("g++"), reason="g++ is needed (nvcc's host compiler)")
KERNEL = SANDBOX / "kernels" / "rmsnorm.cu"


@pytest.fixture(scope="module")
def objects(tmp_path_factory):
    """Shared libraries compiled by the real nvcc 13.0 (tests/sandbox/cuda_wheels.py) for several targets."""
    if not shutil.which("g++"):
        pytest.skip("g++ is needed (nvcc's host compiler)")
    import cuda_wheels
    import standin_cuda
    home = cuda_wheels.toolkit()["home"]
    d = tmp_path_factory.mktemp("objects")
    targets = {
        "sm120f": ["-gencode=arch=compute_120f,code=sm_120f"],
        "sm90": ["-gencode=arch=compute_90,code=sm_90"],
        "sm90a": ["-gencode=arch=compute_90a,code=sm_90a"],
        "ptx120": ["-gencode=arch=compute_120,code=compute_120"],
        "sm120a_ptx90": ["-gencode=arch=compute_120a,code=sm_120a", "-gencode=arch=compute_90,code=compute_90"],
    }

    def compile_one(name):
        with open(os.devnull, "w") as quiet:
            standin_cuda.compile_shared(str(home / "bin/nvcc"), [str(KERNEL)], str(d / (name + ".so")), targets[name],
                                        1, str(d / ("obj-" + name)), log=quiet)
        return name, d / (name + ".so")

    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        built = dict(pool.map(compile_one, targets))
    (d / "plain.so").write_bytes(Path("/bin/true").read_bytes())  # an ELF file without device code
    built["plain"] = d / "plain.so"
    built["cuobjdump"] = home / "bin/cuobjdump"
    return built


def _cuobjdump_args(objects, *caps):
    args = ["--cuobjdump", str(objects["cuobjdump"])]
    for cap in caps or ("12.0",):
        args += ["--capability", cap]
    return tuple(args)


@needs_gxx
def test_release_whose_objects_hold_sm120_sass_passes(site, objects):
    rc, out, err = site(args=_cuobjdump_args(objects), dists={
        "flashinfer-python": {"flashinfer/_kernels.so": objects["sm120f"]},
        "sglang": {"sglang/_kernels.so": objects["sm120f"], "sglang/_plain.so": objects["plain"]}})
    assert rc == 0, err
    flashinfer = out["kernel_objects"]["flashinfer-python"]
    assert [(Path(k).parts[-2:], v) for k, v in flashinfer.items()] == [
        (("flashinfer", "_kernels.so"), {"sass": ["sm_120"], "ptx": []})]  # cuobjdump lists 12.0f cubins as sm_120
    sglang = out["kernel_objects"]["sglang"]
    assert [v for k, v in sglang.items() if k.endswith("sglang/_kernels.so")] == [{"sass": ["sm_120"], "ptx": []}]
    assert not any(k.endswith("_plain.so") for k in sglang)  # no device code: not a kernel object
    assert out["required_capabilities"] == ["12.0"]


@needs_gxx
def test_build_for_another_arch_is_refused_naming_what_was_found(site, objects):
    """The acceptance case: a build override without 12.0 (here 9.0) builds, but the GPUs are 12.0."""
    rc, out, err = site(args=_cuobjdump_args(objects, "9.0"), flashinfer_archs=["sm_90a"], dists={
        "flashinfer-python": {"flashinfer/_kernels.so": objects["sm90a"]},
        "sglang": {"sglang/_kernels.so": objects["sm90"]}})
    assert rc == 1
    assert out["required_capabilities"] == ["9.0", "12.0"]  # the GPUs' capability joins the requested one
    assert err.startswith("installed kernels lack sm_120: ")  # sm_90, which the build was told to target, is there
    assert "flashinfer-python: no sm_120 code: found sm_90a (_kernels.so)" in err
    assert "sglang: no sm_120 code: found sm_90 (_kernels.so)" in err


@needs_gxx
def test_ptx_only_for_sm120_is_refused(site, objects):
    rc, out, err = site(args=_cuobjdump_args(objects), dists={
        "sglang": {"sglang/_kernels.so": objects["ptx120"]}})
    assert rc == 1
    assert out["kernel_objects"]["sglang"].popitem()[1] == {"sass": [], "ptx": ["compute_120"]}
    assert "sglang: no sm_120 code: found no SASS; PTX compute_120 is refused (the driver would JIT-compile it" in err


@needs_gxx
def test_sass_with_extra_ptx_passes_and_arch_specific_sass_counts(site, objects):
    rc, out, err = site(args=_cuobjdump_args(objects), dists={
        "sglang-kernel": {"sgl_kernel/sm90/common_ops.so": objects["sm90"],  # the Hopper build: not loaded on 12.x
                          "sgl_kernel/sm100/common_ops.so": objects["sm120a_ptx90"]}})
    assert rc == 0, err
    assert sorted(v["sass"][0] for v in out["kernel_objects"]["sglang-kernel"].values()) == ["sm_120a", "sm_90"]
    report = out["kernel_report"]["sglang-kernel"]
    assert report["with_sm_120"] == ["sgl_kernel/sm100/common_ops"]
    assert report["unloaded_sm_120"]["sgl_kernel/sm90/common_ops"].startswith("the Hopper build of common_ops")


@needs_gxx
def test_an_object_without_sm120_is_refused_even_beside_one_with_it(site, objects):
    """Each object on its own: a distribution's other objects holding sm_120 do not cover one that lacks it, unless
    nothing loads it on the GPU (release_probe.UNLOADED_OBJECTS)."""
    rc, out, err = site(args=_cuobjdump_args(objects), dists={
        "sglang-kernel": {"sgl_kernel/sm100/common_ops.so": objects["sm120f"],
                          "sgl_kernel/moe_ops.so": objects["sm90"],
                          "sgl_kernel/flash_ops.so": objects["sm90a"]}})  # FA3: nothing loads it on 12.x
    assert rc == 1
    assert "sglang-kernel: no sm_120 code: found sm_90 (moe_ops.so)" in err
    assert "flash_ops" not in err
    assert sorted(out["kernel_report"]["sglang-kernel"]["unloaded_sm_120"]) == ["sgl_kernel/flash_ops"]


@needs_gxx
def test_no_device_code_anywhere_or_no_cuobjdump_is_refused(site, objects, tmp_path):
    rc, _, err = site(args=_cuobjdump_args(objects), dists={"sglang": {"sglang/_plain.so": objects["plain"]}})
    assert rc == 1 and "no sm_120 code: none of sglang ships CUDA objects" in err
    rc, _, err = site(args=("--capability", "12.0", "--cuobjdump", str(tmp_path / "missing/cuobjdump")),
                      dists={"sglang": {"sglang/_kernels.so": objects["sm120f"]}})
    assert rc == 1 and "cannot read the kernels' SASS: no cuobjdump at %s" % (tmp_path / "missing/cuobjdump") in err


@needs_gxx
def test_cuobjdump_archs_reads_sass_and_ptx(objects):
    read = release_probe.cuobjdump_archs
    dump = str(objects["cuobjdump"])
    assert read(dump, objects["sm120a_ptx90"]) == {"sass": ["sm_120a"], "ptx": ["compute_90"]}
    assert read(dump, objects["sm120f"]) == {"sass": ["sm_120"], "ptx": []}
    assert read(dump, objects["plain"]) is None


def test_sass_rules_for_a_12_1_gpu():
    code = {"a": {"objects": {"/x/a.so": {"sass": ["sm_120a"], "ptx": []}}, "unreadable": {}},
            "f": {"objects": {"/x/f.so": {"sass": ["sm_120f"], "ptx": []}}, "unreadable": {}},
            "absent": {"objects": {}, "unreadable": {}}}
    problems = release_probe.sass_problems(code, ["12.1"])
    assert problems == ["a: no sm_121 code: found sm_120a (a.so)"]  # sm_120a is 12.0 only; the 12.0f family runs
    assert release_probe.sass_problems(code, ["12.0"]) == []


# ------------------------------------------------------------------------------------ the run-time toolchain
@pytest.fixture
def unit_env(tmp_path):
    """The unit's environment over a stand-in release: <release>/venv/bin/ninja and <cuda>/bin/nvcc answering like
    the real ones (ninja 1.13, nvcc "release 13.0"); returns (env, release, cuda_home)."""
    release, cuda = tmp_path / "release", tmp_path / "cuda-13.0"
    for path, text in ((release / "venv" / "bin" / "ninja", "echo 1.13.0.git.kitware.jobserver-pipe-1"),
                       (cuda / "bin" / "nvcc", "echo 'Cuda compilation tools, release 13.0, V13.0.88'")):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("#!/bin/sh\n%s\n" % text)
        path.chmod(0o755)
    env = {"PATH": "%s/venv/bin:%s/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" % (release, cuda),
           "CUDA_HOME": str(cuda), "HOME": str(tmp_path)}
    return env, release, cuda


def test_toolchain_of_a_complete_unit_environment_passes(unit_env):
    env, release, cuda = unit_env
    facts, problems = release_probe.toolchain("13.0", env)
    assert problems == []
    assert facts["ninja"]["path"] == str(release / "venv" / "bin" / "ninja")
    assert facts["nvcc"] == {"path": str(cuda / "bin" / "nvcc"), "release": "13.0"}
    assert facts["launcher"]["compiled"] is True


def test_path_without_the_venv_bin_finds_no_ninja(unit_env):
    env, _, cuda = unit_env
    env["PATH"] = "%s/bin:/usr/sbin:/sbin" % cuda  # no venv, and no /usr/bin (whose ninja is the host's)
    _, problems = release_probe.toolchain("13.0", env)
    assert any(p.startswith("ninja not found on the unit's PATH (%s/bin:/usr/sbin:/sbin)" % cuda)
               and "run_ninja" in p for p in problems), problems


def test_cuda_home_without_a_toolkit_or_of_another_release_is_refused(unit_env, tmp_path):
    env, _, _ = unit_env
    env["CUDA_HOME"] = str(tmp_path / "cuda-12.8")
    _, problems = release_probe.toolchain("13.0", env)
    assert any("no nvcc at %s/cuda-12.8/bin/nvcc (CUDA_HOME=%s/cuda-12.8" % (tmp_path, tmp_path) in p
               for p in problems), problems
    old = tmp_path / "cuda-12.9" / "bin" / "nvcc"
    old.parent.mkdir(parents=True)
    old.write_text("#!/bin/sh\necho 'Cuda compilation tools, release 12.9, V12.9.86'\n")
    old.chmod(0o755)
    env["CUDA_HOME"] = str(tmp_path / "cuda-12.9")
    _, problems = release_probe.toolchain("13.0", env)
    assert any("is CUDA 12.9, the release is for CUDA 13.0" in p for p in problems), problems


def test_without_cuda_home_flashinfer_looks_for_nvcc_on_path(unit_env):
    env, _, cuda = unit_env
    del env["CUDA_HOME"]
    assert release_probe.flashinfer_cuda_home(env) == (str(cuda), "which nvcc")
    assert release_probe.flashinfer_cuda_home({"PATH": "/nonexistent"})[0] == "/usr/local/cuda"


def test_launcher_without_python_headers_names_python_h(unit_env, tmp_path, monkeypatch):
    env, _, _ = unit_env
    # The interpreter's include directory as a host without python3-dev has it: there, but without Python.h.
    empty = tmp_path / "include" / "python3.11"
    empty.mkdir(parents=True)
    real = release_probe.sysconfig.get_paths
    monkeypatch.setattr(release_probe.sysconfig, "get_paths",
                        lambda *a, **k: dict(real(*a, **k), include=str(empty)))
    _, problems = release_probe.toolchain("13.0", env)
    assert any(p.startswith("Triton cannot build its launcher") and "Python.h: No such file or directory" in p
               and "python3-dev" in p for p in problems), problems


def test_no_c_compiler_is_refused(unit_env):
    env, release, cuda = unit_env
    env["PATH"] = "%s/venv/bin:%s/bin" % (release, cuda)
    _, problems = release_probe.toolchain("13.0", env)
    assert any(p.startswith("no C compiler on the unit's PATH") for p in problems), problems


def test_toolchain_only_mode_prints_the_facts_and_fails_on_a_problem(unit_env):
    env, release, cuda = unit_env
    proc = subprocess.run([sys.executable, str(PROBE), "--toolchain-only", "--cuda", "13.0"], env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["toolchain"]["nvcc"]["release"] == "13.0"
    env["PATH"] = "%s/bin:/usr/sbin" % cuda
    proc = subprocess.run([sys.executable, str(PROBE), "--toolchain-only", "--cuda", "13.0"], env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and proc.stderr.startswith("ninja not found on the unit's PATH")


# ----------------------------------------------------------------------------- FlashInfer's JIT modules
FAKE_JIT = '''\
"""A JIT module as FlashInfer 0.7.2's JitSpec answers for it (the sandbox stand-in's behaviour is tested with the real
nvcc in tests/standins): its library under $FLASHINFER_WORKSPACE_BASE, compiled by build()."""
import os
from pathlib import Path


class Spec:
    name = "sampling"

    @property
    def jit_library_path(self):
        return Path(os.environ["FLASHINFER_WORKSPACE_BASE"]) / "cached_ops" / "sampling" / "sampling.so"

    is_aot = False

    def get_library_path(self):
        return self.jit_library_path

    @property
    def is_compiled(self):
        return self.jit_library_path.exists()

    def build(self):
        if os.environ.get("FAKE_NVCC_FAILS"):
            raise RuntimeError("ninja: build stopped\\nnvcc fatal   : Unsupported gpu architecture 'compute_120x'")
        self.jit_library_path.parent.mkdir(parents=True, exist_ok=True)
        self.jit_library_path.write_bytes(b"\\x7fELF")


def gen_sampling_module():
    return Spec()
'''
SAMPLING = "flashinfer.jit.sampling:gen_sampling_module"


@pytest.fixture
def jit(site, tmp_path, monkeypatch):
    """The site with flashinfer.jit.sampling, and the workspace its cache lies in."""
    lib = tmp_path / "site-packages"
    (lib / "flashinfer" / "jit").mkdir(parents=True, exist_ok=True)
    (lib / "flashinfer" / "jit" / "__init__.py").write_text("")
    (lib / "flashinfer" / "jit" / "sampling.py").write_text(FAKE_JIT)
    monkeypatch.setenv("FLASHINFER_WORKSPACE_BASE", str(tmp_path / "workspace"))
    return tmp_path / "workspace" / "cached_ops" / "sampling" / "sampling.so"


def test_a_release_without_its_flashinfer_module_compiled_is_refused_naming_it(site, jit):
    rc, out, err = site(args=("--capability", "12.0", "--flashinfer-module", SAMPLING))
    assert rc == 1 and not out["ok"]
    assert err.startswith("installed kernels lack sm_120: ")
    assert "FlashInfer module 'sampling' is not compiled: no AOT library and nothing at %s" % jit in err
    assert out["flashinfer_modules"] == [{"module": "sampling", "generator": SAMPLING, "compiled": False,
                                          "aot": False, "path": str(jit)}]


def test_the_warm_compiles_the_module_and_the_probe_then_passes(site, jit):
    rc, out, err = site(args=("--warm-flashinfer", "--flashinfer-module", SAMPLING))
    assert rc == 0, err
    assert [(m["module"], m["result"]) for m in out["modules"]] == [("sampling", "compiled")]
    rc, out, _err = site(args=("--warm-flashinfer", "--flashinfer-module", SAMPLING))
    assert [m["result"] for m in out["modules"]] == ["up to date"]
    rc, out, err = site(args=("--capability", "12.0", "--flashinfer-module", SAMPLING))
    assert rc == 0, err
    assert out["flashinfer_modules"][0]["compiled"] is True


def test_a_failed_warm_names_the_module_and_the_compilers_words(site, jit, monkeypatch):
    monkeypatch.setenv("FAKE_NVCC_FAILS", "1")
    rc, out, err = site(args=("--warm-flashinfer", "--flashinfer-module", SAMPLING))
    assert rc == 1 and out["modules"] == []
    assert err.startswith("FlashInfer module %s did not compile: RuntimeError: ninja: build stopped | nvcc fatal" % SAMPLING)


def test_an_unknown_generator_is_named(site, jit):
    rc, _out, err = site(args=("--flashinfer-only", "--flashinfer-module", "flashinfer.jit.sampling:gen_nothing"))
    assert rc == 1 and "FlashInfer module flashinfer.jit.sampling:gen_nothing cannot be looked up: AttributeError" in err


def test_the_switch_and_a_reactivation_check_the_modules_the_release_recorded(site, jit, tmp_path):
    """release.json beside the probe names what the build compiled; emptying the cache after it is refused."""
    release = tmp_path / "release"
    release.mkdir()
    shutil.copy2(PROBE, release / "release_probe.py")
    (release / "release.json").write_text(json.dumps({"flashinfer_warm": {"modules": [
        {"module": "sampling", "generator": SAMPLING, "result": "compiled"}]}}))
    assert release_probe.recorded_flashinfer_modules(str(release / "release.json")) == [SAMPLING]
    assert release_probe.recorded_flashinfer_modules(str(tmp_path / "missing.json")) == []
    site(args=("--warm-flashinfer", "--flashinfer-module", SAMPLING))
    copy = release / "release_probe.py"
    rc, out, err = site(args=("--flashinfer-only", "--recorded-flashinfer-modules"), probe=copy)
    assert rc == 0, err
    assert out["flashinfer_modules"][0]["module"] == "sampling"
    jit.unlink()  # the cache emptied after the build
    rc, out, err = site(args=("--flashinfer-only", "--recorded-flashinfer-modules"), probe=copy)
    assert rc == 1 and "FlashInfer module 'sampling' is not compiled" in err
    rc, out, err = site(args=("--kernel-op-only", "--recorded-flashinfer-modules"), probe=copy)
    assert rc == 1 and "FlashInfer module 'sampling' is not compiled" in err
    assert out["kernel_op"].endswith("= 4.0")  # the GPU kernel ran; the modules are what is missing
