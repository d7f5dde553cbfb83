"""Build filters: FlashInfer arch list by CUDA version, job counts from memory, release fingerprints."""

import importlib.util
import pathlib

import pytest
from ansible.errors import AnsibleFilterError

_PATH = pathlib.Path(__file__).resolve().parents[2] / "plugins" / "filter" / "build.py"
_spec = importlib.util.spec_from_file_location("build_filters", _PATH)
build = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(build)


@pytest.mark.parametrize(
    "cuda, expected",
    [("12.8", "12.0a"), ("12.9", "12.0f"), ("13.0", "12.0f"), ("13.1", "12.0f")],
)
def test_sm120_arch_list_follows_cuda_version(cuda, expected):
    assert build.flashinfer_arch_list(["12.0"], cuda) == expected


def test_sm120_with_cuda_12_6_is_refused_with_both_versions():
    with pytest.raises(AnsibleFilterError, match=r"12\.0.*CUDA >= 12\.8.*found CUDA 12\.6"):
        build.flashinfer_arch_list(["12.0"], "12.6")


def test_arch_list_deduplicates_and_keeps_other_capabilities():
    assert build.flashinfer_arch_list(["12.0", "12.0", "9.0"], "13.0") == "12.0f 9.0"
    assert build.torch_arch_list(["12.0", "12.0"]) == "12.0"


@pytest.mark.parametrize(
    "mem_gib, cores, expected",
    [
        (64, 32, 6),     # the example: memory, not cores, decides
        (512, 32, 32),   # plenty of memory: capped by cores
        (4, 16, 1),      # tiny host: never zero
        (1024, 128, 96),
    ],
)
def test_job_count_comes_from_memory(mem_gib, cores, expected):
    assert build.build_jobs(mem_gib * 1024, cores) == expected


def test_job_count_respects_max_jobs_and_rejects_nonsense():
    assert build.build_jobs(512 * 1024, 64, max_jobs=4) == 4
    with pytest.raises(AnsibleFilterError):
        build.build_jobs("lots", 8)
    with pytest.raises(AnsibleFilterError):
        build.build_jobs(1024, 8, gb_per_job=0)


def test_fingerprint_ignores_key_order_and_sees_every_value():
    a = {"sglang_ref": "v0.5.23", "cuda": "13.0", "patches": ["ab12"]}
    b = {"patches": ["ab12"], "cuda": "13.0", "sglang_ref": "v0.5.23"}
    assert build.release_fingerprint(a) == build.release_fingerprint(b)
    assert len(build.release_fingerprint(a)) == 16
    for key, value in [("cuda", "12.9"), ("patches", ["ab13"]), ("sglang_ref", "v0.5.22")]:
        assert build.release_fingerprint({**a, key: value}) != build.release_fingerprint(a)


def test_task_outcome_tells_passed_failed_skipped_and_not_run():
    path = pathlib.Path(__file__).resolve().parents[2] / "plugins" / "filter" / "smoke.py"
    spec = importlib.util.spec_from_file_location("smoke_filters", path)
    smoke = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(smoke)
    assert smoke.task_outcome({"changed": False, "status": 200}) == "passed"
    assert smoke.task_outcome({"failed": True}) == "failed"
    assert smoke.task_outcome({"skipped": True}) == "skipped"
    assert smoke.task_outcome({}) == "not run"
