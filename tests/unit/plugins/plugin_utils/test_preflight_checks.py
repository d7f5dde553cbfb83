"""preflight_checks.check_gpus and the preflight_gpu_errors filter: one test per message."""

import pytest

from ansible.errors import AnsibleFilterError
from ansible_collections.blackwell.sglang.plugins.plugin_utils._preflight_checks import (
    DEFAULT_DRIVER_FLOORS, check_driver, check_gpus, compare_versions, index_ranges,
)
from conftest import load_yaml
from ansible_collections.blackwell.sglang.plugins.filter import preflight_gpus as preflight


def inventory(name):
    case = load_yaml("nvidia_smi", name + ".yml")
    return case["expected"]["gpus"], case["expected"]["compute_apps"]


def run(name, **kw):
    gpus, apps = inventory(name)
    args = dict(expected_count=8, expected_compute_capability="12.0", cuda_version="13.0")
    args.update(kw)
    return check_gpus(gpus, apps, **args)


def test_floors_are_nvidias_table():
    assert DEFAULT_DRIVER_FLOORS == {"13.0": "580.65.06", "12.9": "575.51.03", "12.8": "570.124.06"}


@pytest.mark.parametrize("a, b, want", [
    ("580.65.06", "580.65.06", 0), ("580.65.6", "580.65.06", 0), ("580.9.0", "580.65.06", -1),
    ("580.100", "580.65.06", 1), ("1000.1", "580.65.06", 1), ("580.65", "580.65.0", 0), ("570.195.03", "580.65.06", -1),
])
def test_numeric_per_component(a, b, want):
    assert compare_versions(a, b) == want


def test_ok_inventory_has_no_errors():
    assert run("rtx_pro_6000_x8_idle") == []


def test_count_and_driver_floor():
    errors = run("seven_gpus_driver_570")
    assert len(errors) == 2
    assert errors[0].startswith("expected 8 GPUs, found 7")
    assert errors[1].startswith("CUDA 13.0 needs driver >= 580.65.06, found 570.195.03")
    assert "install driver 580.65.06 or newer" in errors[1]


def test_driver_570_is_fine_for_cuda_12_8():
    assert run("seven_gpus_driver_570", expected_count=7, cuda_version="12.8") == []


def test_cuda_patch_version_matches_major_minor():
    assert check_driver("575.51.03", "12.9.1") == []
    assert check_driver("575.51.02", "12.9")[0].startswith("CUDA 12.9 needs driver >= 575.51.03, found 575.51.02")


def test_unknown_cuda_version_says_what_is_known():
    msg = check_driver("580.65.06", "14.0")[0]
    assert "no driver floor known for CUDA 14.0 (known: 12.8, 12.9, 13.0)" in msg


def test_custom_floors():
    assert check_driver("580.65.06", "13.1", {"13.1": "590.44.01"})[0].startswith(
        "CUDA 13.1 needs driver >= 590.44.01, found 580.65.06")


def test_wrong_compute_capability_grouped_with_model_name():
    errors = run("h100_x8")
    assert errors == [e for e in errors]
    assert len(errors) == 1
    assert errors[0].startswith("GPUs 0-7 have compute capability 9.0, expected 12.0 (NVIDIA H100 80GB HBM3)")


def test_single_gpu_wrong_and_na_capability():
    gpus, _ = inventory("rtx_pro_6000_x8_idle")
    gpus[2]["compute_capability"] = "8.9"
    gpus[2]["name"] = "NVIDIA L40S"
    gpus[6]["compute_capability"] = None
    errors = check_gpus(gpus, [], 8, "12.0", "13.0")
    assert errors[0].startswith("GPU 2 has compute capability 8.9, expected 12.0 (NVIDIA L40S)")
    assert errors[1].startswith("GPU 6 has no compute capability ([N/A]), expected 12.0")


def test_busy_gpus_named_with_pid_process_and_memory():
    errors = run("rtx_pro_6000_x8_busy")
    case = load_yaml("nvidia_smi", "rtx_pro_6000_x8_busy.yml")
    assert len(errors) == 2
    for got, want in zip(errors, case["preflight_errors"]):
        assert got.startswith(want)


def test_own_pids_are_allowed():
    errors = run("rtx_pro_6000_x8_busy", own_pids=[48211])
    assert len(errors) == 1 and "PID 1234 (python3, 20480 MiB)" in errors[0]


def test_all_problems_at_once():
    gpus, apps = inventory("rtx_pro_6000_x8_busy")
    errors = check_gpus(gpus[:7], apps, 8, "12.0", "13.0")
    assert [e.split(" ")[0] for e in errors] == ["expected", "GPU", "GPU"]


def test_index_ranges():
    assert index_ranges([0, 1, 2, 3, 5, 7, 8]) == "0-3,5,7-8"
    assert index_ranges([4]) == "4"


@pytest.mark.parametrize("name", ["rtx_pro_6000_x8_idle", "rtx_pro_6000_x8_busy", "h100_x8", "seven_gpus_driver_570"])
def test_filter_with_list_input_as_the_role_calls_it(name):
    case = load_yaml("nvidia_smi", name + ".yml")
    errors = preflight.preflight_gpu_errors(case["expected"]["gpus"], case["expected"]["compute_apps"], expected_count=8,
                                            expected_compute_capability="12.0", cuda_version="13.0")
    assert len(errors) == len(case["preflight_errors"])
    for got, want in zip(errors, case["preflight_errors"]):
        assert got.startswith(want)


def test_filter_with_whole_result_and_error():
    assert preflight.preflight_gpu_errors({"error": "nvidia-smi not found; searched /usr/bin"}) == [
        "nvidia-smi not found; searched /usr/bin"]
    case = load_yaml("nvidia_smi", "h100_x8.yml")
    assert len(preflight.preflight_gpu_errors(case["expected"])) == 1


def test_filter_rejects_other_input():
    with pytest.raises(AnsibleFilterError, match="expects the gpu_facts result"):
        preflight.preflight_gpu_errors("gpus")
    assert "preflight_gpu_errors" in preflight.FilterModule().filters()


def serving_node(hog_gpu=3):
    """gpu_facts of a node that serves: 8 schedulers (one per GPU, as the GPU stand-in lists them from their state
    files) in the deployed unit's cgroup, and a foreign process on GPU ``hog_gpu``."""
    gpus, _ = inventory("rtx_pro_6000_x8_idle")
    apps = [{"pid": 5001 + i, "gpu_uuid": g["uuid"], "process_name": "sglang::scheduler_TP%d" % i,
             "used_memory_mib": 88000} for i, g in enumerate(gpus)]
    apps.append({"pid": 7777, "gpu_uuid": gpus[hog_gpu]["uuid"], "process_name": "python3", "used_memory_mib": 20480})
    own = {"name": "sglang-kimi.service", "control_group": "/system.slice/sglang-kimi.service",
           "pids": [5000] + [5001 + i for i in range(8)] + [5020, 5021], "gpu_pids": [5001 + i for i in range(8)]}
    return {"gpus": gpus, "compute_apps": apps, "own_unit": own}


def test_the_deployed_units_schedulers_are_its_replacements_and_a_foreign_process_is_named():
    """Re-run of deploy.yml / rolling redeploy: the unit's own GPU processes (its cgroup's members) pass; the foreign
    PID on GPU 3 is the only problem, named with its GPU."""
    facts = serving_node()
    errors = preflight.preflight_gpu_errors(facts, expected_count=8, expected_compute_capability="12.0",
                                            cuda_version="13.0")
    assert len(errors) == 1, errors
    assert errors[0].startswith("GPU 3 (%s) is in use by PID 7777 (python3, 20480 MiB)" % facts["gpus"][3]["uuid"])


def test_without_the_units_cgroup_every_scheduler_reads_as_foreign():
    """What preflight did before it knew the unit's processes: 8 refusals of its own schedulers (+ the hog)."""
    facts = serving_node()
    facts["own_unit"] = {"name": "sglang-kimi.service", "pids": [], "gpu_pids": []}
    errors = preflight.preflight_gpu_errors(facts, expected_count=8, expected_compute_capability="12.0",
                                            cuda_version="13.0")
    assert len(errors) == 9
    assert sum("sglang::scheduler_TP" in e for e in errors) == 8
