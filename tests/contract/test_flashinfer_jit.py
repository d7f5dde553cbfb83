"""The FlashInfer JIT modules the product compiles per release, and how it finds them, against the real wheels.

flashinfer-python 0.7.2 and sglang 0.5.23 (the pinned wheels, downloaded once into .sandbox/cache) are read here.
FlashInfer is a JIT package. The release probe and the warm call ``<module>:<generator>()`` for each of flashinfer_build_jit_modules and
use the JitSpec it returns (``name``, ``is_compiled``, ``is_aot``, ``get_library_path``, ``build``); the unit's
environment points FLASHINFER_WORKSPACE_BASE at ``<current>/flashinfer`` while the warm used the release's own path,
which holds only because FlashInfer resolves the paths it writes into its ninja file. The module list itself comes
from sglang 0.5.23: it samples with FlashInfer by default on CUDA.
"""

import ast
import sys
import zipfile
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "sandbox"))

import cuda_wheels  # noqa: E402
import real_sources  # noqa: E402

SGLANG = cuda_wheels.Wheel("sglang", "0.5.23", "00b3cd5b265ac76c64185fbb6b95424f324ddd9f428d0306b77bc9db9d859937")
MODULES = yaml.safe_load((ROOT / "roles" / "flashinfer_build" / "defaults" / "main.yml").read_text())[
    "flashinfer_build_jit_modules"]


def _read(wheel_of, names):
    try:
        path = cuda_wheels.fetch([wheel_of])[wheel_of.project]
    except Exception as exc:  # noqa: BLE001 - pip's failure to download, whatever its type
        pytest.skip("cannot download %s: %s" % (wheel_of.pin, exc))
    with zipfile.ZipFile(path) as zf:
        return {name: zf.read(name).decode() for name in names}


@pytest.fixture(scope="module")
def flashinfer():
    names = ["flashinfer/jit/core.py", "flashinfer/jit/cpp_ext.py", "flashinfer/sampling.py"]
    names += sorted({"%s.py" % ref.split(":")[0].replace(".", "/") for ref in MODULES})
    return _read(real_sources.FLASHINFER, names)


@pytest.fixture(scope="module")
def sglang():
    return _read(SGLANG, ["sglang/srt/layers/sampler.py", "sglang/srt/arg_groups/overrides.py"])


def _function(source, name):
    return next(n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef) and n.name == name)


def _class(source, name):
    return next(n for n in ast.parse(source).body if isinstance(n, ast.ClassDef) and n.name == name)


@pytest.mark.parametrize("ref", MODULES)
def test_each_module_is_a_generator_of_the_wheel_returning_a_named_jit_spec(flashinfer, ref):
    module, function = ref.split(":")
    fn = _function(flashinfer["%s.py" % module.replace(".", "/")], function)
    (ret,) = [n for n in ast.walk(fn) if isinstance(n, ast.Return)]
    assert isinstance(ret.value, ast.Call) and ret.value.func.id == "gen_jit_spec"
    assert isinstance(ret.value.args[0], ast.Constant)  # the module's name: its directory in the JIT cache


def test_sampling_is_what_sglang_samples_with_by_default(flashinfer, sglang):
    assert "flashinfer.jit.sampling:gen_sampling_module" in MODULES
    default = ast.unparse(_function(sglang["sglang/srt/arg_groups/overrides.py"], "_sampling_backend_default"))
    assert "{'sampling_backend': 'flashinfer' if get_platform().has_flashinfer else 'pytorch'}" in default
    sampler = sglang["sglang/srt/layers/sampler.py"]
    assert '"flashinfer.sampling", "top_k_top_p_sampling_from_probs"' in sampler
    assert "module = gen_sampling_module().build_and_load()" in flashinfer["flashinfer/sampling.py"]


def test_the_jit_spec_has_what_the_probe_and_the_warm_call(flashinfer):
    """gen_jit_spec makes a JitSpecNvcc (core.py), a JitSpec: what the probe and the warm call is in one or the other."""
    core = flashinfer["flashinfer/jit/core.py"]
    assert "JitSpecNvcc(" in ast.unparse(_function(core, "gen_jit_spec"))
    nvcc = _class(core, "JitSpecNvcc")
    methods = {n.name: n for cls in (_class(core, "JitSpec"), nvcc) for n in cls.body if isinstance(n, ast.FunctionDef)}
    assert {"is_compiled", "is_aot", "get_library_path", "build", "jit_library_path", "build_and_load"} <= set(methods)
    build = ast.unparse(next(n for n in nvcc.body if isinstance(n, ast.FunctionDef) and n.name == "build"))
    # the stand-in (tests/sandbox/fake_sources.py FLASHINFER_JIT_CORE) logs and refuses with these words
    assert "Building JIT module %s; this can take several minutes on first use." in build
    assert "JIT compilation is disabled via FLASHINFER_DISABLE_JIT environment variable, " in build


def test_flashinfer_resolves_the_paths_of_its_ninja_file(flashinfer):
    """The warm writes build.ninja under <release>/flashinfer, the server finds it under <current>/flashinfer: ninja
    sees one build only because both resolve to the same paths (otherwise the server recompiles at its first use)."""
    ninja = ast.unparse(_function(flashinfer["flashinfer/jit/cpp_ext.py"], "generate_ninja_build_for_op"))
    assert "obj = str((output_dir / obj_name).resolve())" in ninja
    assert "lines.append(f'build {obj}: {cmd} {source.resolve()}')" in ninja
    run = ast.unparse(_function(flashinfer["flashinfer/jit/cpp_ext.py"], "run_ninja"))
    assert "str(workdir.resolve())" in run and "str(ninja_file.resolve())" in run
