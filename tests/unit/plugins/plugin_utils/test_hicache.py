"""HiCache host-memory budget and /dev/shm floor (plugins/plugin_utils/_hicache.py, plugins/filter/preflight_budget.py).

Figures are printed (pytest -s) so a reader can check the arithmetic by hand."""

import pytest

from ansible_collections.blackwell.sglang.plugins.plugin_utils._hicache import GB, GIB, device_kv_bytes_per_rank, hicache_budget, ranks_on_host, shm_errors
from ansible_collections.blackwell.sglang.plugins.filter import preflight_budget as hicache_filter

KIMI = {"tp-size": 8, "enable-hierarchical-cache": True}
RTX_PRO_6000 = 97887 * 1024 * 1024  # MiB from nvidia-smi -> 102.6 GB


def test_size_is_per_rank_and_multiplied_by_ranks_on_the_host():
    r = hicache_budget({**KIMI, "hicache-size": 60}, mem_available_bytes=200 * GB)
    print(r["summary"])
    assert r["mode"] == "size" and r["ranks"] == 8
    assert r["needed_bytes"] == 480 * GB
    assert r["available_bytes"] == 200 * GB - 10 * GIB  # 189.3 GB
    assert len(r["errors"]) == 1
    assert r["errors"][0].startswith(
        "HiCache needs 480.0 GB host RAM (8 ranks x 60.0 GB from --hicache-size 60 GB per rank), "
        "189.3 GB available (MemAvailable 200.0 GB - 10 GiB reserve)")
    assert "at most 23.7 GB per rank" in r["errors"][0]


def test_size_that_fits_passes_with_figures():
    r = hicache_budget({**KIMI, "hicache-size": 60}, mem_available_bytes=1000 * GB)
    print(r["summary"])
    assert r["errors"] == []
    assert r["summary"] == ("HiCache needs 480.0 GB host RAM (8 ranks x 60.0 GB), 989.3 GB available "
                            "(MemAvailable 1000.0 GB - 10 GiB reserve)")


def test_cgroup_limit_below_memavailable_bounds_the_budget():
    r = hicache_budget({**KIMI, "hicache-size": 60}, mem_available_bytes=1000 * GB,
                       cgroup_limit_bytes=400 * GB, cgroup_usage_bytes=20 * GB)
    print(r["errors"])
    assert r["available_bytes"] == 380 * GB - 10 * GIB
    assert "cgroup memory limit 400.0 GB - usage 20.0 GB = 380.0 GB, below MemAvailable 1000.0 GB" in r["errors"][0]


def test_ratio_uses_the_estimated_device_pool():
    # Kimi-K2.5: 547 GB weights / 8 ranks = 68.375 GB; 102.64 GB x 0.85 = 87.25 GB -> ~18.9 GB KV per rank.
    kv = device_kv_bytes_per_rank(RTX_PRO_6000, 0.85, 547 * GB, 8)
    print("device KV per rank %.2f GB" % (kv / GB))
    assert 18.8 * GB < kv < 19.0 * GB
    r = hicache_budget({**KIMI, "hicache-ratio": 3}, mem_available_bytes=300 * GB, gpu_memory_bytes=RTX_PRO_6000,
                       weights_bytes=547 * GB)
    print(r["errors"])
    assert r["per_rank_bytes"] == pytest.approx(3 * kv)
    assert r["errors"] and r["errors"][0].startswith("HiCache needs 452.9 GB host RAM (8 ranks x 56.6 GB")
    assert "mem-fraction-static 0.85 - weights 547.0 GB / 8 ranks" in r["errors"][0]


def test_option_mem_fraction_wins_over_the_estimate_variable():
    r = hicache_budget({**KIMI, "hicache-ratio": 2, "mem-fraction-static": 0.9}, mem_available_bytes=2000 * GB,
                       gpu_memory_bytes=100 * GB, weights_bytes=400 * GB, mem_fraction_static=0.5)
    assert r["device_kv_bytes_per_rank"] == pytest.approx(40 * GB)  # 100 x 0.9 - 400 / 8


@pytest.mark.parametrize("ratio", [1, 0.5])
def test_ratio_not_above_one_is_refused_unless_allowed(ratio):
    opts = {**KIMI, "hicache-ratio": ratio}
    r = hicache_budget(opts, mem_available_bytes=2000 * GB, gpu_memory_bytes=RTX_PRO_6000, weights_bytes=547 * GB)
    assert any(e.startswith("--hicache-ratio %g makes the host pool no larger" % ratio) for e in r["errors"])
    allowed = hicache_budget(opts, mem_available_bytes=2000 * GB, gpu_memory_bytes=RTX_PRO_6000,
                             weights_bytes=547 * GB, allow_low_ratio=True)
    assert allowed["errors"] == []


def test_auto_sizing_that_would_shrink_below_one_is_refused():
    # Budget per rank: 0.8 x (100 GB - 10 GiB) / 8 = 8.93 GB; x 0.95 / 18.9 GB KV -> ratio ~0.45.
    r = hicache_budget(KIMI, mem_available_bytes=100 * GB, gpu_memory_bytes=RTX_PRO_6000, weights_bytes=547 * GB)
    print(r["errors"])
    assert r["mode"] == "auto" and 0.44 < r["ratio"] < 0.46
    assert r["errors"][0].startswith("HiCache auto-sizing would cut the ratio from 2 to 0.45")
    ok = hicache_budget(KIMI, mem_available_bytes=1000 * GB, gpu_memory_bytes=RTX_PRO_6000, weights_bytes=547 * GB)
    print(ok["summary"])
    assert ok["errors"] == [] and ok["ratio"] == 2.0


def test_auto_sizing_with_nothing_left_after_the_reserve():
    r = hicache_budget(KIMI, mem_available_bytes=8 * GIB)
    assert r["errors"] and "no host memory left after the 10 GiB reserve" in r["errors"][0]


def test_hicache_off_or_with_disable_radix_cache():
    assert hicache_budget({"tp-size": 8}, mem_available_bytes=1)["errors"] == []
    r = hicache_budget({**KIMI, "hicache-size": 1, "disable-radix-cache": True}, mem_available_bytes=1000 * GB)
    assert r["errors"] == ["--enable-hierarchical-cache cannot be combined with --disable-radix-cache "
                           "(HiCache extends the radix cache); drop one of them"]


def test_ranks_on_host_split_across_nodes():
    assert ranks_on_host({"tp-size": 16, "nnodes": 2}) == 8
    assert ranks_on_host({"tp_size": 4, "pp_size": 2}) == 8
    assert ranks_on_host({}) == 1


def test_shm_floor_only_with_several_ranks():
    assert shm_errors(2 * GIB, 8, 8 * GIB)[0].startswith("/dev/shm is 2.0 GiB, below the 8.0 GiB floor for 8 ranks")
    assert shm_errors(2 * GIB, 1, 8 * GIB) == []
    assert shm_errors(64 * GIB, 8, 8 * GIB) == []
    assert "is not mounted" in shm_errors(None, 8, 8 * GIB)[0]


CAPACITY = {"memory": {"available_bytes": 200 * GB, "total_bytes": 256 * GB},
            "cgroup": {"version": 2, "limit_bytes": None, "usage_bytes": None},
            "shm": {"path": "/dev/shm", "size_bytes": 2 * GIB},
            "model": {"index": "/srv/models/K/current/model.safetensors.index.json", "total_size_bytes": 547 * GB}}
GPU_FACTS = {"gpus": [{"index": i, "memory_total_mib": 97887} for i in range(8)]}


def test_filter_lists_hicache_and_shm_problems_together():
    errors = hicache_filter.preflight_host_errors(CAPACITY, {**KIMI, "hicache-size": 60}, gpu_facts=GPU_FACTS)
    print("\n".join(errors))
    assert len(errors) == 2
    assert errors[0].startswith("HiCache needs 480.0 GB host RAM (8 ranks x 60.0 GB")
    assert errors[1].startswith("/dev/shm is 2.0 GiB, below the 8.0 GiB floor")


def test_filter_takes_weights_from_the_index_else_the_fallback():
    with_index = hicache_filter.hicache_budget(CAPACITY, {**KIMI, "hicache-ratio": 2}, gpu_facts=GPU_FACTS,
                                               fallback_weights_gb=1)
    assert with_index["weights_source"] == ("547.00 GB, metadata.total_size of "
                                            "/srv/models/K/current/model.safetensors.index.json")
    no_index = dict(CAPACITY, model={"index": None, "total_size_bytes": None,
                                     "unreadable": ["/srv/models/K/current/model.safetensors.index.json: No such file "
                                                    "or directory"]})
    fallback = hicache_filter.hicache_budget(no_index, {**KIMI, "hicache-ratio": 2}, gpu_facts=GPU_FACTS,
                                             fallback_weights_gb=547)
    assert fallback["weights_source"] == ("no index readable (/srv/models/K/current/model.safetensors.index.json: No "
                                          "such file or directory); using preflight_hicache_fallback_weights_gb=547")
    assert fallback["device_kv_bytes_per_rank"] == pytest.approx(with_index["device_kv_bytes_per_rank"])


def test_filter_reports_a_failed_host_capacity():
    assert hicache_filter.preflight_host_errors({"failed": True, "msg": "boom"}, KIMI) == [
        "could not read host capacity: boom"]


def test_the_running_units_pool_is_available_to_its_replacement():
    """A re-run on a serving 768 GB host: the running unit's 8 x 60 GB pool is gone from MemAvailable (~270 GB left).
    The same --hicache-size fits once that pool is freed by the restart (``after``), not beside a second one
    (``before``: what preflight computed before it counted the unit's own memory)."""
    pool = 480 * GB
    before = hicache_budget({**KIMI, "hicache-size": 60}, mem_available_bytes=270 * GB)
    assert before["errors"] and before["errors"][0].startswith("HiCache needs 480.0 GB host RAM")
    after = hicache_budget({**KIMI, "hicache-size": 60}, mem_available_bytes=270 * GB, reclaimable_bytes=pool + GB,
                           reclaimable_text="sglang-kimi.service")
    print(after["summary"])
    assert after["errors"] == []
    assert after["available_bytes"] == 751 * GB - 10 * GIB
    assert "+ 481.0 GB held by sglang-kimi.service (freed when it restarts)" in after["summary"]


def test_the_running_units_pool_counts_inside_its_cgroup_limit_too():
    """A container node (limit 768 GB, usage 500 GB of which the unit holds 481 GB): room = 268 + 481 GB."""
    r = hicache_budget({**KIMI, "hicache-size": 60}, mem_available_bytes=1000 * GB, cgroup_limit_bytes=768 * GB,
                       cgroup_usage_bytes=500 * GB, reclaimable_bytes=481 * GB)
    assert r["errors"] == [] and r["available_bytes"] == 749 * GB - 10 * GIB
    without = hicache_budget({**KIMI, "hicache-size": 60}, mem_available_bytes=1000 * GB, cgroup_limit_bytes=768 * GB,
                             cgroup_usage_bytes=500 * GB)
    assert without["errors"]


def test_filter_counts_the_own_units_memory_from_host_capacity():
    capacity = {"memory": {"available_bytes": 270 * GB}, "cgroup": {}, "model": {},
                "own_unit": {"name": "sglang-kimi.service", "pids": [1, 2], "memory_bytes": 481 * GB}}
    r = hicache_filter.hicache_budget(capacity, {**KIMI, "hicache-size": 60})
    assert r["errors"] == [] and "held by sglang-kimi.service" in r["summary"]
    r = hicache_filter.hicache_budget(dict(capacity, own_unit={}), {**KIMI, "hicache-size": 60})
    assert r["errors"]


def test_the_weights_with_an_eagle3_draft_must_leave_room_for_a_kv_pool():
    """Kimi-K2.5 INT4 (547 GB) on 8 RTX PRO 6000 leaves ~19 GB of KV per GPU at 0.85; an EAGLE3 draft loads before the
    KV pool is sized (srt/managers/scheduler.py init_model_worker), so its weights come out of the same fraction."""
    capacity = {"memory": {"available_bytes": 1000 * GB}, "shm": {"size_bytes": 64 * GIB},
                "model": {"index": "/m/model.safetensors.index.json", "total_size_bytes": 547 * GB, "shards": 64}}
    gpus = {"gpus": [{"memory_total_mib": 97887}] * 8}
    opts = {"tp-size": 8}
    sized = hicache_filter.preflight_model_size(capacity, None, fallback_gb=547,
                                                draft_index={"index": "http://m/d/model.safetensors",
                                                             "total_size_bytes": 6 * GB})
    print(sized["model"]["source"])
    assert sized["model"]["total_size_bytes"] == 553 * GB and sized["model"]["draft_bytes"] == 6 * GB
    assert sized["model"]["source"].endswith(", + the EAGLE3 draft's 6.0 GB (http://m/d/model.safetensors)")
    assert hicache_filter.preflight_host_errors(sized, opts, gpu_facts=gpus, shm_min_gib=1) == []
    # a draft too large for what the model leaves: refused with every figure
    big = hicache_filter.preflight_model_size(capacity, None, fallback_gb=547,
                                              draft_index={"index": "/d", "total_size_bytes": 160 * GB})
    errors = hicache_filter.preflight_host_errors(big, opts, gpu_facts=gpus, shm_min_gib=1)
    print(errors)
    assert len(errors) == 1
    assert errors[0].startswith("the weights do not fit the GPUs: 707.0 GB (")
    assert "+ the EAGLE3 draft's 160.0 GB (/d)) / 8 ranks = 88.4 GB per GPU, but mem-fraction-static 0.85 of a " \
        "102.6 GB GPU is 87.2 GB" in errors[0]
    # HiCache's ratio mode says it in its own words, once
    ratio = dict(opts, **{"enable-hierarchical-cache": True, "hicache-ratio": 2})
    errors = hicache_filter.preflight_host_errors(big, ratio, gpu_facts=gpus, shm_min_gib=1)
    assert len(errors) == 1 and errors[0].startswith("no room for a device KV pool")
