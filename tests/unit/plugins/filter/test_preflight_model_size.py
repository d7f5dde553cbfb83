"""preflight_model_size: preflight budgets free disk and HiCache by the source's own index, not by the fallback figure.

The source's index is read by the model_source_index module against a real loopback server (tests/sandbox/fake_hub.py
on 127.0.0.1) as a mirror and as a Hub; the host_capacity result is a fresh host's (nothing staged, no served model).
A 595 GB checkpoint (third-party figures for Kimi-K2.5) on a store with 560 GB free: the 547 GB fallback would pass
it, the index's figure refuses it.
"""

import json
import os
import sys

import pytest

from ansible_collections.blackwell.sglang.plugins.filter import preflight_budget as hicache
from ansible_collections.blackwell.sglang.plugins.module_utils.staging.model_index import model_weights
from ansible_collections.blackwell.sglang.plugins.modules import host_capacity, model_source_index

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
sys.path.insert(0, os.path.join(ROOT, "tests", "sandbox"))
from fake_hub import FakeHub  # noqa: E402

GB = 1000 ** 3
INDEX = "model.safetensors.index.json"
TOTAL = 595218731008
SERVED = "/srv/models/Kimi-K2.5/current/" + INDEX
KIMI = {"tp-size": 8, "enable-hierarchical-cache": True, "hicache-ratio": 2}
GPU_FACTS = {"gpus": [{"index": i, "memory_total_mib": 97887} for i in range(8)]}


@pytest.fixture
def checkpoint(tmp_path):
    root = tmp_path / "Kimi-K2.5"
    root.mkdir()
    weight_map = dict(("layers.%d.w" % i, "model-%05d-of-000064.safetensors" % (i + 1)) for i in range(64))
    (root / INDEX).write_text(json.dumps({"metadata": {"total_size": TOTAL}, "weight_map": weight_map}))
    return root


def fresh_host(tmp_path):
    """host_capacity's figures on a host where nothing is staged yet: 560 GB free on one filesystem."""
    return {"memory": {"available_bytes": 1000 * GB, "total_bytes": 1100 * GB},
            "cgroup": {"version": 2, "limit_bytes": None, "usage_bytes": None},
            "shm": {"path": "/dev/shm", "size_bytes": 64 * GB},
            "disks": [{"path": "/srv/models", "checked_path": "/srv", "free_bytes": 560 * GB, "device": 1},
                      {"path": "/opt/sglang/releases", "checked_path": "/opt", "free_bytes": 560 * GB, "device": 2}],
            "model": host_capacity.model_size([str(tmp_path / "served" / INDEX)]),
            "staging": {"path": "/srv/models/Kimi-K2.5/r1", "complete": False, "partial_bytes": 0}}


def read_source(module_runner, **params):
    kind, result = module_runner(model_source_index, dict(dict(retries=0, timeout=5), **params))
    assert kind == "exit", result
    return dict((k, result[k]) for k in ("index", "total_size_bytes", "shards", "error"))


def budget(capacity):
    """What preflight's tasks compute from the capacity (roles/preflight/tasks/main.yml)."""
    return (hicache.hicache_budget(capacity, KIMI, gpu_facts=GPU_FACTS, fallback_weights_gb=547),
            hicache.preflight_disk_problems(capacity, "/srv/models", "/opt/sglang/releases", fallback_model_gb=547,
                                            release_gb=0))


def kv_per_rank(weights):
    return 97887 * 1024 * 1024 * 0.85 - weights / 8.0


def test_the_mirrors_index_sizes_disk_and_hicache(checkpoint, tmp_path, module_runner):
    with FakeHub(str(checkpoint)) as mirror:
        source = read_source(module_runner, source="http", url=mirror.url + "/")
    capacity = hicache.preflight_model_size(fresh_host(tmp_path), source, preferred=[], fallback_gb=547)
    url = mirror.url + "/" + INDEX
    assert capacity["model"]["total_size_bytes"] == TOTAL and capacity["model"]["index"] == url
    assert capacity["model"]["fallback"] is False
    memory, disk = budget(capacity)
    assert memory["weights_source"] == "595.22 GB in 64 shards, metadata.total_size of %s" % url
    assert memory["device_kv_bytes_per_rank"] == pytest.approx(kv_per_rank(TOTAL))
    assert memory["per_rank_bytes"] == pytest.approx(2 * kv_per_rank(TOTAL))
    assert len(disk["errors"]) == 1 and disk["warnings"] == []
    assert disk["errors"][0].startswith("/srv/models has 560.0 GB free (filesystem of /srv); this run writes 595.2 GB "
                                        "there: model revision r1 (595.2 GB, 595.2 GB still to stage)")
    assert disk["errors"][0].endswith("(the revision's size: 595.22 GB in 64 shards, metadata.total_size of %s)" % url)

    # The figure it replaces: the same host, sized by the fallback, passes a store too small for the checkpoint.
    memory, disk = budget(hicache.preflight_model_size(fresh_host(tmp_path), None, fallback_gb=547))
    assert disk["errors"] == []
    assert memory["device_kv_bytes_per_rank"] == pytest.approx(kv_per_rank(547 * GB))


def test_a_404_mirror_falls_back_and_says_why(checkpoint, tmp_path, module_runner):
    with FakeHub(str(checkpoint)) as mirror:
        mirror.missing.add(INDEX)
        source = read_source(module_runner, source="http", url=mirror.url)
    capacity = hicache.preflight_model_size(fresh_host(tmp_path), source, preferred=[], fallback_gb=547)
    assert capacity["model"]["fallback"] is True and capacity["model"]["total_size_bytes"] == 547 * GB
    why = ("no index readable (%s: HTTP 404 Not Found (not on the mirror) from %s/%s; %s: No such file or directory); "
           "using preflight_hicache_fallback_weights_gb=547" % (INDEX, mirror.url, INDEX, tmp_path / "served" / INDEX))
    memory, disk = budget(capacity)
    assert memory["weights_source"] == why
    assert memory["device_kv_bytes_per_rank"] == pytest.approx(kv_per_rank(547 * GB))
    assert disk["errors"] == []
    assert disk["warnings"] == ["the free disk for model revision r1 is budgeted without its size: " + why]


def test_an_unreachable_mirror_falls_back_and_says_why(tmp_path, module_runner):
    import socket
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    source = read_source(module_runner, source="http", url="http://127.0.0.1:%d/Kimi-K2.5" % port)
    model = hicache.preflight_model_size(fresh_host(tmp_path), source, fallback_gb=547)["model"]
    assert model["fallback"] is True
    assert model["source"].startswith("no index readable (%s: cannot connect (" % INDEX)
    assert "127.0.0.1:%d/Kimi-K2.5/%s" % (port, INDEX) in model["source"]
    assert model["source"].endswith("using preflight_hicache_fallback_weights_gb=547")


def test_the_hubs_index_of_the_pinned_revision_sizes_them(checkpoint, tmp_path, module_runner):
    with FakeHub(str(checkpoint), repo="moonshotai/Kimi-K2.5", require_token="hf_s3cr3t") as hub:
        source = read_source(module_runner, source="hf", hf_repo_id="moonshotai/Kimi-K2.5", revision="abc123",
                             hf_endpoint=hub.url, token="hf_s3cr3t")
    memory, disk = budget(hicache.preflight_model_size(fresh_host(tmp_path), source, fallback_gb=547))
    url = "%s/moonshotai/Kimi-K2.5/resolve/abc123/%s" % (hub.url, INDEX)
    assert memory["weights_source"] == "595.22 GB in 64 shards, metadata.total_size of %s" % url
    assert "595.2 GB still to stage" in disk["errors"][0]


def test_the_order_operators_index_source_served_model_fallback():
    source = {"index": "http://m/" + INDEX, "total_size_bytes": 600 * GB, "shards": 64, "error": None}
    served = {"index": SERVED, "total_size_bytes": 500 * GB, "unreadable": []}
    operator = {"index": "/etc/k/" + INDEX, "total_size_bytes": 610 * GB, "unreadable": []}
    assert model_weights(operator, source, preferred=["/etc/k/" + INDEX])["total_size_bytes"] == 610 * GB
    # the source's index is what this run stages: it comes before the served (older) revision's
    assert model_weights(served, source, preferred=["/etc/k/" + INDEX])["total_size_bytes"] == 600 * GB
    failed = {"index": "http://m/" + INDEX, "total_size_bytes": None, "shards": None, "error": "boom"}
    chosen = model_weights(served, failed, fallback_gb=547)
    assert chosen["total_size_bytes"] == 500 * GB and chosen["fallback"] is False
    assert chosen["source"] == ("500.00 GB, metadata.total_size of %s (the source's index was not readable: boom)"
                                % SERVED)
    none = model_weights({"index": None, "total_size_bytes": None, "unreadable": []}, None, fallback_gb=547)
    assert none["source"] == "no index readable (none was named); using preflight_hicache_fallback_weights_gb=547"


def test_a_failed_host_capacity_passes_through_and_a_bad_source_is_refused():
    assert hicache.preflight_model_size({"failed": True, "msg": "boom"}, None) == {"failed": True, "msg": "boom"}
    with pytest.raises(Exception, match="expects model_source_index's answer as a dict"):
        hicache.preflight_model_size({"memory": {}}, "http://m/" + INDEX)
