"""The sandbox's flashinfer-jit-cache (tests/sandbox/flashinfer_aot.py): FlashInfer's AOT kernels as the README's main job
installs them into every release, made from one real compile per machine.

What the product installs and what the real FlashInfer 0.7.2 asks of the package are read from their one place each: the
roles' defaults and filters for the version, the CUDA release, the arch list and the modules; the real flashinfer-python
0.7.2 wheel's ``flashinfer/jit/env.py`` for the interface (``__version__``, ``get_jit_cache_providers()`` and the
provider's fields) and the version rule. The wheel on this machine (built by scripts/test.sh's artifacts step) must hold
each module's library with sm_120 SASS, read with the sandbox toolkit's real cuobjdump.
"""

import ast
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "sandbox"))

import cuda_wheels  # noqa: E402
from role_defaults import role_default  # noqa: E402
import flashinfer_aot  # noqa: E402
import real_sources  # noqa: E402

from ansible_collections.blackwell.sglang.plugins.filter import build_arch  # noqa: E402


_default = role_default  # a role's default from its one place (tests/sandbox/role_defaults.py)


def test_the_package_is_the_one_the_product_asks_for():
    spec = flashinfer_aot.recipe()
    assert spec["flashinfer"] == _default("flashinfer_build", "flashinfer_build_version")
    assert spec["modules"] == _default("flashinfer_build", "flashinfer_build_jit_modules")
    cuda = _default("deployment", "deployment_cuda_release")
    assert spec["arch_list"] == build_arch.flashinfer_arch_list([_default("deployment", "deployment_compute_capability")],
                                                                cuda) == "12.0f"
    assert "flashinfer-jit-cache==" + spec["package_version"] == build_arch.flashinfer_jit_cache_requirement(
        spec["flashinfer"], cuda) == "flashinfer-jit-cache==0.7.2+cu130"
    assert flashinfer_aot.wheel_name(spec["package_version"]) == \
        "flashinfer_jit_cache-0.7.2+cu130-cp39-abi3-manylinux_2_28_x86_64.whl"


def test_another_flashinfer_nvcc_or_arch_is_another_cache_entry():
    spec = flashinfer_aot.recipe()
    keys = {flashinfer_aot.recipe_key(dict(spec, **change))
            for change in ({}, {"flashinfer": "0.7.3"}, {"nvcc": "13.0.99"}, {"arch_list": "12.0a"})}
    assert len(keys) == 4


def _unpacked(tmp_path, libraries):
    spec = dict(flashinfer_aot.recipe())
    wheel = tmp_path / flashinfer_aot.wheel_name(spec["package_version"])
    flashinfer_aot.write_wheel(wheel, flashinfer_aot.wheel_entries(spec, libraries))
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(site)
        names = zf.namelist()
    return spec, site, names


def _providers(site):
    """What the package answers, imported in a fresh interpreter as FlashInfer imports it."""
    code = ("import json, flashinfer_jit_cache as p; print(json.dumps({'version': p.__version__, 'providers': ["
            "{k: sorted(v) if isinstance(v, frozenset) else str(v) for k, v in vars(x).items()}"
            " for x in p.get_jit_cache_providers()]}))")
    out = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, PYTHONPATH=str(site)), text=True,
                         capture_output=True, check=True).stdout
    return json.loads(out)


def test_the_wheel_is_a_complete_jit_cache_package_whose_provider_points_at_its_libraries(tmp_path):
    spec, site, names = _unpacked(tmp_path, {"sampling": b"\x7fELF sampling", "norm": b"\x7fELF norm"})
    distinfo = "flashinfer_jit_cache-0.7.2+cu130.dist-info/"
    assert {distinfo + "METADATA", distinfo + "WHEEL", distinfo + "RECORD"} <= set(names)
    wheel = (site / (distinfo + "WHEEL")).read_text()
    assert "Root-Is-Purelib: false" in wheel and "Tag: cp39-abi3-manylinux_2_28_x86_64" in wheel
    record = (site / (distinfo + "RECORD")).read_text().splitlines()
    assert sorted(line.split(",")[0] for line in record) == sorted(names)
    answer = _providers(site)
    assert answer["version"] == "0.7.2+cu130"
    (provider,) = answer["providers"]
    assert provider["modules"] == ["norm", "sampling"] and provider["cuda_architectures"] == ["sm120f"]
    assert provider["version"] == "0.7.2+cu130" and provider["distribution"] == "flashinfer-jit-cache"
    for name in ("sampling", "norm"):
        assert (Path(provider["jit_cache_dir"]) / name / (name + ".so")).read_bytes() == b"\x7fELF " + name.encode()


@pytest.fixture(scope="module")
def real_env_py():
    try:
        path = cuda_wheels.fetch([real_sources.FLASHINFER])[real_sources.FLASHINFER.project]
    except Exception as exc:  # noqa: BLE001 - pip's failure to download, whatever its type
        pytest.skip("cannot download %s: %s" % (real_sources.FLASHINFER.pin, exc))
    with zipfile.ZipFile(path) as zf:
        return zf.read("flashinfer/jit/env.py").decode()


def _function(source, name):
    return next(n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.FunctionDef) and n.name == name)


def test_the_package_answers_everything_the_real_flashinfer_asks_of_it(tmp_path, real_env_py):
    """flashinfer 0.7.2's _get_aot_providers reads flashinfer_jit_cache.<attr> and provider.<attr>: each exists."""
    discover = _function(real_env_py, "_get_aot_providers")
    asked = {(n.value.id, n.attr) for n in ast.walk(discover)
             if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)}
    of_package = {attr for owner, attr in asked if owner == "flashinfer_jit_cache"}
    of_provider = {attr for owner, attr in asked if owner == "provider"}
    assert of_package == {"__version__", "get_jit_cache_providers"}
    assert of_provider == {"provider_id", "distribution", "version", "jit_cache_dir", "cuda_architectures", "modules"}
    _spec, site, _names = _unpacked(tmp_path, {"sampling": b"\x7fELF"})
    (provider,) = _providers(site)["providers"]
    assert of_provider <= set(provider)
    # get_aot_artifacts loads <jit_cache_dir>/<module>/<module>.so
    assert 'provider.jit_cache_dir / module_name / f"{module_name}.so"' in real_env_py


def test_its_version_is_one_the_real_flashinfer_accepts(real_env_py):
    """_check_jit_cache_version of the real wheel, run on the package's version: the same release, or it plus '+...'."""
    check = _function(real_env_py, "_check_jit_cache_version")
    scope = {"os": os, "flashinfer_version": flashinfer_aot.recipe()["flashinfer"], "_VERSION_MISMATCH_HINT": ""}
    exec(compile(ast.Module(body=[check], type_ignores=[]), "env.py", "exec"), scope)  # noqa: S102 - the wheel's own code
    scope["_check_jit_cache_version"]("flashinfer-jit-cache", flashinfer_aot.recipe()["package_version"])
    with pytest.raises(RuntimeError, match="does not match"):
        scope["_check_jit_cache_version"]("flashinfer-jit-cache", "0.7.1+cu130")


# The artifacts (tests/sandbox/build_artifacts.py, run by scripts/test.sh before the tests) hold the machine's wheel.
ARTIFACT = ROOT / ".sandbox" / "artifacts" / flashinfer_aot.NODE_DIR


@pytest.mark.skipif(not any(ARTIFACT.glob("*.whl")), reason="no artifacts: run tests/sandbox/build_artifacts.py first")
def test_the_machines_wheel_holds_each_module_with_sm_120_sass(tmp_path):
    spec = flashinfer_aot.recipe()
    (wheel,) = ARTIFACT.glob("*.whl")
    assert wheel.name == flashinfer_aot.wheel_name(spec["package_version"])
    modules = [ref for ref in spec["modules"]]
    with zipfile.ZipFile(wheel) as zf:
        libraries = [n for n in zf.namelist() if n.endswith(".so")]
        zf.extractall(tmp_path)
    assert len(libraries) == len(modules)
    cuobjdump = cuda_wheels.toolkit()["home"] / "bin" / "cuobjdump"
    for library in libraries:
        listing = subprocess.run([str(cuobjdump), "--list-elf", str(tmp_path / library)], text=True,
                                 capture_output=True, check=True).stdout
        assert "sm_120" in listing, (library, listing)
