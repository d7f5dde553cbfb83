"""preflight_wanted_ports / preflight_port_problems (busy ports named with their process) and preflight_disk_problems
(free disk for the revision being staged and a first release)."""

import pytest

from ansible_collections.blackwell.sglang.plugins.filter import preflight_budget as hicache
from ansible_collections.blackwell.sglang.plugins.filter import preflight_ports

EP = {"unit": "sglang-kimi.service", "host": "0.0.0.0", "port": 30000}


def test_wanted_ports_are_the_http_nccl_rendezvous_and_router_ports():
    wanted = preflight_ports.preflight_wanted_ports(
        EP, {"nccl-port": 40000, "dist-init-addr": "gpu-0:50000", "node-rank": 0},
        router={"port": 8080, "host": "0.0.0.0", "unit": "sglang-router.service"})
    assert [(w["port"], w["unit"]) for w in wanted] == [(30000, "sglang-kimi.service"), (40000, "sglang-kimi.service"),
                                                        (50000, "sglang-kimi.service"), (8080, "sglang-router.service")]
    rank1 = preflight_ports.preflight_wanted_ports(EP, {"dist-init-addr": "gpu-0:50000", "node-rank": 1})
    assert [w["port"] for w in rank1] == [30000]


def test_a_foreign_listener_is_named_and_the_deployed_unit_is_not():
    """Issue 14: another process on 127.0.0.1:30000 before the deploy. Before, preflight passed and SGLang died with
    Errno 98 after loading every shard."""
    wanted = preflight_ports.preflight_wanted_ports(EP, {})
    facts = {"listeners": [{"address": "127.0.0.1", "port": 30000, "pid": 777, "process": "python3 -m http.server",
                            "unit": None}]}
    errors = preflight_ports.preflight_port_problems(facts, wanted)
    assert len(errors) == 1
    assert errors[0].startswith("port 30000, which SGLang's HTTP server (--port) will bind on 0.0.0.0, is taken: PID "
                                "777 (python3 -m http.server) listens on 127.0.0.1:30000")
    assert "Address already in use" in errors[0]
    own = {"listeners": [{"address": "0.0.0.0", "port": 30000, "pid": 5000, "process": "python3 -m sglang.launch_server",
                          "unit": "sglang-kimi.service"}]}
    assert preflight_ports.preflight_port_problems(own, wanted) == []
    other_address = {"listeners": [{"address": "10.0.0.9", "port": 30000, "pid": 1, "process": "x", "unit": None}]}
    assert preflight_ports.preflight_port_problems(other_address, preflight_ports.preflight_wanted_ports(
        dict(EP, host="127.0.0.1"), {})) == []


def test_a_holder_preflight_cannot_read_is_named_by_its_user():
    """CI stop 23: the deployed unit's socket in a container without CAP_SYS_PTRACE has no PID, so it cannot be told
    from a stranger; the error names the socket's user and the missing capability, not a vague "run as root"."""
    facts = {"listeners": [{"address": "127.0.0.1", "port": 30000, "pid": None, "process": None, "uid": 998,
                            "user": "sglang", "unit": None}]}
    errors = preflight_ports.preflight_port_problems(facts, preflight_ports.preflight_wanted_ports(EP, {}))
    assert len(errors) == 1
    assert "is taken: a process of user sglang (uid 998) whose PID preflight cannot read" in errors[0]
    assert "CAP_SYS_PTRACE" in errors[0]


GB = 10 ** 9


def capacity(free_store, free_rel, same_fs=True, complete=False, partial=0, total=547 * GB):
    return {"disks": [{"path": "/srv/models", "checked_path": "/srv", "free_bytes": free_store, "device": 1},
                      {"path": "/opt/sglang/releases", "checked_path": "/opt", "free_bytes": free_rel,
                       "device": 1 if same_fs else 2}],
            "model": {"total_size_bytes": total},
            "staging": {"path": "/srv/models/Kimi-K2.5/r2", "complete": complete, "partial_bytes": partial}}


def check(cap, **kw):
    args = dict(fallback_model_gb=547, release_gb=20, release_exists=True)
    args.update(kw)
    return hicache.preflight_disk_problems(cap, "/srv/models", "/opt/sglang/releases", **args)


def test_a_new_revision_needs_its_full_size_beside_the_current_one():
    out = check(capacity(400 * GB, 400 * GB, same_fs=False))
    assert len(out["errors"]) == 1
    assert out["errors"][0].startswith("/srv/models has 400.0 GB free (filesystem of /srv); this run writes 547.0 GB "
                                       "there: model revision r2 (547.0 GB, 547.0 GB still to stage)")
    assert check(capacity(400 * GB, 400 * GB, partial=200 * GB, same_fs=False))["errors"] == []
    assert check(capacity(1 * GB, 400 * GB, complete=True, same_fs=False)) == {"errors": [], "warnings": []}


def test_needs_on_one_filesystem_add_up_and_a_rebuild_only_warns():
    first = check(capacity(560 * GB, 560 * GB), release_exists=False)
    assert len(first["errors"]) == 1 and "the first release" in first["errors"][0]
    assert first["errors"][0].startswith("/srv/models and /opt/sglang/releases (one filesystem) have 560.0 GB free "
                                         "(filesystem of /srv); this run writes 567.0 GB there: model revision r2")
    rebuild = check(capacity(560 * GB, 560 * GB), release_exists=True)
    assert rebuild["errors"] == [] and "not also for a rebuilt release" in rebuild["warnings"][0]


def test_unmeasured_paths_are_a_clear_error():
    with pytest.raises(Exception, match="did not measure /srv/models"):
        hicache.preflight_disk_problems({"disks": []}, "/srv/models", "/opt/sglang/releases")
