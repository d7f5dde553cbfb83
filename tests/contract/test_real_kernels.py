"""Contract: the release probe's SASS check meets the real sglang-kernel 0.4.10 wheel and NVIDIA's real cuobjdump.

The wheel (373 MB, sha256 pinned, downloaded once into .sandbox/cache like the CUDA wheels, never committed) is
unpacked as it lies in a release's site-packages. The probe's own functions (roles/sglang_runtime/files/release_probe.py)
read its objects with cuobjdump 13.2.51 of the stand-in toolkit (tests/sandbox/cuda_wheels.py):

* the report names the objects holding sm_120 code (both common_ops builds, spatial_ops, infllm_ops: sm_120a cubins),
  and the two without it that nothing loads on 12.x (flash_ops, FA3; flashmla_ops, FlashMLA), each with its reason;
* without that table the same objects are refused, naming what they hold instead (the check can fail);
* each reason is the wheel's own code: the imports that load flash_ops and flashmla_ops, and the loader's choice of
  sm90/ for compute capability 9.0 only; the attention backends they serve are refused for 12.x by the inventory
  check (plugins/plugin_utils/sglang_rules.py).

Skipped, with the reason, when the wheel cannot be downloaded (no index reachable).
"""

import json
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "sandbox"))
sys.path.insert(0, str(ROOT / "roles" / "sglang_runtime" / "files"))
import cuda_wheels  # noqa: E402
import release_probe  # noqa: E402

from ansible_collections.blackwell.sglang.plugins.plugin_utils import sglang_rules  # noqa: E402

SGLANG_KERNEL = cuda_wheels.Wheel("sglang-kernel", "0.4.10",
                                  "043cbe4a10e7887ea1b25599b729ff1ce115a0d5217b2c177aff9f9ae5327724")
# The Python files whose lines the probe's reasons quote.
SOURCES = ("sgl_kernel/flash_attn.py", "sgl_kernel/flash_mla.py", "sgl_kernel/load_utils.py")


class _NoDownload(Exception):
    """pip could not download the wheel (no index reachable)."""


def _unpack(out, work, log):
    """The wheel's CUDA objects and SOURCES into ``out``/site-packages, with build.json naming them."""
    try:
        path = cuda_wheels.fetch([SGLANG_KERNEL])[SGLANG_KERNEL.project]
    except Exception as exc:  # noqa: BLE001 - pip's failure to download, whatever its type
        raise _NoDownload("cannot download %s: %s" % (SGLANG_KERNEL.pin, exc)) from exc
    with zipfile.ZipFile(path) as zf:
        record = [n for n in zf.namelist() if n.endswith(".dist-info/RECORD")][0]
        names = [line.split(",")[0] for line in zf.read(record).decode().splitlines() if line]
        members = [n for n in names if release_probe._device_code_candidate(n) or n in SOURCES]
        for name in members:
            zf.extract(name, out / "site-packages")
    info = {"record": names, "members": members}
    (out / "build.json").write_text(json.dumps(info))
    return info


@pytest.fixture(scope="module")
def wheel():
    """The wheel's CUDA objects and SOURCES under <cache>/real-kernels/.../site-packages; {"files", "site", "record"}.
    Unpacked once per machine (cuda_wheels.build_once: locked, renamed into place only when whole): each pytest-xdist
    worker that runs a test of this module asks for it, and a second unpack into the same tree while the first one's
    objects were read made cuobjdump find no code in a half-written flash_ops (issue 58's red clean clone)."""
    try:
        final, info, _ = cuda_wheels.build_once(cuda_wheels.cache_dir() / "real-kernels",
                                                "sglang-kernel-%s-objects" % SGLANG_KERNEL.version, _unpack,
                                                "unpacking %s" % SGLANG_KERNEL.pin)
    except _NoDownload as exc:
        pytest.skip(str(exc))
    site = final / "site-packages"
    return {"site": site, "record": info["record"],
            "files": [str(site / n) for n in info["members"] if release_probe._device_code_candidate(n)]}


@pytest.fixture(scope="module")
def cuobjdump():
    return str(Path(cuda_wheels.toolkit()["home"]) / "bin" / "cuobjdump")


@pytest.fixture(scope="module")
def code(wheel, cuobjdump):
    return release_probe.kernel_code(cuobjdump, ["sglang-kernel"], files_of=lambda name: wheel["files"])


def test_the_real_objects_are_the_ones_the_probe_knows(wheel):
    objects = sorted(release_probe._object_key(p) for p in wheel["files"])
    assert objects == ["sgl_kernel/flash_ops", "sgl_kernel/flashmla_ops", "sgl_kernel/infllm_ops",
                       "sgl_kernel/sm100/common_ops", "sgl_kernel/sm90/common_ops", "sgl_kernel/spatial_ops"]


def test_the_probe_names_the_objects_with_sm120_sass_and_those_nothing_loads_on_12x(code):
    assert release_probe.sass_problems(code, ["12.0"]) == []
    report = release_probe.object_report(code, ["12.0"])["sglang-kernel"]
    assert report["with_sm_120"] == ["sgl_kernel/infllm_ops", "sgl_kernel/sm100/common_ops",
                                     "sgl_kernel/sm90/common_ops", "sgl_kernel/spatial_ops"]
    assert sorted(report["unloaded_sm_120"]) == ["sgl_kernel/flash_ops", "sgl_kernel/flashmla_ops"]
    assert report["unloaded_sm_120"]["sgl_kernel/flash_ops"].startswith("FA3, loaded only by sgl_kernel.flash_attn")
    sass = {release_probe._object_key(p): o["sass"] for p, o in code["sglang-kernel"]["objects"].items()}
    assert sass["sgl_kernel/sm100/common_ops"][-1] == "sm_120a"  # an arch-specific cubin, no PTX in the wheel
    assert sass["sgl_kernel/flash_ops"] == ["sm_80", "sm_86", "sm_90a"]


def test_without_the_table_fa3_and_flashmla_are_refused_naming_what_they_hold(code, monkeypatch):
    monkeypatch.setattr(release_probe, "UNLOADED_OBJECTS", {})
    problem, = release_probe.sass_problems(code, ["12.0"])
    assert problem == ("sglang-kernel: no sm_120 code: found sm_80, sm_86, sm_90a, sm_100, sm_103a "
                       "(flash_ops.abi3.so, flashmla_ops.abi3.so)")


def test_for_a_hopper_gpu_every_object_counts(code):
    assert release_probe.sass_problems(code, ["9.0"]) == []
    assert "unloaded_sm_90" not in release_probe.object_report(code, ["9.0"])["sglang-kernel"]


def test_each_reason_is_the_wheels_own_code(wheel):
    text = {name: (wheel["site"] / name).read_text() for name in SOURCES}
    assert "from sgl_kernel import flash_ops" in text["sgl_kernel/flash_attn.py"]
    assert "from sgl_kernel import flashmla_ops" in text["sgl_kernel/flash_mla.py"]
    loader = text["sgl_kernel/load_utils.py"]
    assert 'if compute_capability == 90:\n        ops_subdir = "sm90"' in loader
    assert 'elif compute_capability is not None:\n        ops_subdir = "sm100"' in loader
    refused = {backend for _options, backend, *_rest in sglang_rules.SM12X_ATTENTION_BACKENDS}
    for (_dist, obj, major), why in release_probe.UNLOADED_OBJECTS.items():
        assert major == 12
        for backend in ("fa3", "flashmla"):
            if "--attention-backend %s," % backend in why:
                assert backend in refused, "%s: the inventory check must refuse %s for 12.x" % (obj, backend)
