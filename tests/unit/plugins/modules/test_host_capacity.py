"""host_capacity: /proc/meminfo, cgroup v1/v2 limits, free space, model index size; changes nothing."""

import json
import os

from ansible_collections.blackwell.sglang.plugins.modules import host_capacity


def test_parse_meminfo_in_bytes():
    mem = host_capacity.parse_meminfo("MemTotal:       24684100 kB\nMemAvailable:   24077848 kB\nHugePages_Total: 0\n")
    assert mem["MemTotal"] == 24684100 * 1024
    assert mem["MemAvailable"] == 24077848 * 1024
    assert mem["HugePages_Total"] == 0


def test_parse_proc_cgroup_versions():
    assert host_capacity.parse_proc_cgroup("0::/system.slice/ssh.service\n") == (2, "/system.slice/ssh.service")
    assert host_capacity.parse_proc_cgroup("12:cpu,cpuacct:/x\n4:memory:/docker/abc\n") == (1, "/docker/abc")
    assert host_capacity.parse_proc_cgroup("") == (None, None)


def test_hybrid_hosts_keep_the_memory_limit_in_v1():
    """/proc/self/cgroup in a podman container on a hybrid (v1 controllers + systemd's unified tree) host, as
    recorded on a sandbox node with --memory=13824m: the 0:: line has no controllers, the limit is v1's."""
    text = ("9:name=systemd:/libpod_parent/libpod-3bb6\n8:pids:/libpod_parent/libpod-3bb6\n"
            "4:memory:/libpod_parent/libpod-3bb6\n1:cpu:/libpod_parent/libpod-3bb6\n0::/libpod_parent/libpod-3bb6\n")
    assert host_capacity.parse_proc_cgroup(text) == (1, "/libpod_parent/libpod-3bb6")


def _write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as fh:
        fh.write(text)


def test_cgroup_v2_takes_the_smallest_limit_up_the_tree(tmp_path):
    root = tmp_path / "cg"
    _write(str(root / "memory.max"), "max\n")
    _write(str(root / "machine.slice" / "memory.max"), "400000000000\n")
    _write(str(root / "machine.slice" / "ctr" / "memory.max"), "max\n")
    _write(str(root / "machine.slice" / "ctr" / "memory.high"), "max\n")
    _write(str(root / "machine.slice" / "ctr" / "memory.current"), "2000000000\n")
    proc = tmp_path / "cgroup"
    proc.write_text("0::/machine.slice/ctr\n")
    info = host_capacity.cgroup_memory(str(root), str(proc))
    assert info == {"version": 2, "path": "/machine.slice/ctr", "limit_bytes": 400000000000, "usage_bytes": 2000000000,
                    "file_bytes": 0}


def test_cgroup_usage_leaves_out_page_cache_as_sglang_does(tmp_path):
    """Staging fills a container's page cache; SGLang (mem_cache/host_memory.py) counts usage without file pages."""
    root = tmp_path / "cg"
    _write(str(root / "memory" / "memory.limit_in_bytes"), "68719476736\n")
    _write(str(root / "memory" / "memory.usage_in_bytes"), "60000000000\n")
    _write(str(root / "memory" / "memory.stat"), "cache 55000000000\ntotal_active_file 30000000000\n"
                                                 "total_inactive_file 25000000000\ntotal_rss 5000000000\n")
    proc = tmp_path / "cgroup"
    proc.write_text("5:memory:/\n")
    info = host_capacity.cgroup_memory(str(root), str(proc))
    assert (info["usage_bytes"], info["file_bytes"]) == (5000000000, 55000000000)


def test_own_unit_memory_is_what_its_cgroup_members_hold(tmp_path):
    from ansible_collections.blackwell.sglang.plugins.module_utils.host.unit_cgroup import anon_memory_bytes, cgroup_pids

    cg = tmp_path / "cg"
    _write(str(cg / "unified" / "system.slice" / "sglang-kimi.service" / "cgroup.procs"), "100\n")
    _write(str(cg / "unified" / "system.slice" / "sglang-kimi.service" / "sub" / "cgroup.procs"), "101\n102\n")
    _write(str(cg / "systemd" / "system.slice" / "sglang-kimi.service" / "cgroup.procs"), "100\n101\n102\n")
    assert cgroup_pids("/system.slice/sglang-kimi.service", str(cg)) == [100, 101, 102]
    proc = tmp_path / "proc"
    _write(str(proc / "101" / "status"), "Name:\tx\nRssAnon:\t  1048576 kB\nRssFile:\t 9999 kB\nRssShmem:\t 1024 kB\n")
    _write(str(proc / "102" / "status"), "RssAnon:\t 2048 kB\n")
    assert anon_memory_bytes([100, 101, 102], str(proc)) == (1048576 + 1024 + 2048) * 1024


def test_cgroup_v2_namespace_root_and_unlimited(tmp_path):
    root = tmp_path / "cg"
    _write(str(root / "memory.max"), "max\n")
    proc = tmp_path / "cgroup"
    proc.write_text("0::/\n")
    assert host_capacity.cgroup_memory(str(root), str(proc))["limit_bytes"] is None


def test_cgroup_v1_limit_and_unlimited(tmp_path):
    root = tmp_path / "cg"
    _write(str(root / "memory" / "memory.limit_in_bytes"), "68719476736\n")
    _write(str(root / "memory" / "memory.usage_in_bytes"), "1073741824\n")
    proc = tmp_path / "cgroup"
    proc.write_text("5:memory:/docker/abc\n")  # path absent under root: the namespace root is ours
    info = host_capacity.cgroup_memory(str(root), str(proc))
    assert (info["version"], info["limit_bytes"], info["usage_bytes"]) == (1, 68719476736, 1073741824)
    _write(str(root / "memory" / "memory.limit_in_bytes"), "9223372036854771712\n")
    assert host_capacity.cgroup_memory(str(root), str(proc))["limit_bytes"] is None


def test_free_space_of_a_path_not_created_yet(tmp_path):
    checked, total, free = host_capacity.fs_space(str(tmp_path / "not" / "yet"))
    assert checked == str(tmp_path) and total > 0 and 0 <= free <= total


def test_model_size_from_the_first_readable_index(tmp_path):
    good = tmp_path / "model.safetensors.index.json"
    good.write_text(json.dumps({"metadata": {"total_size": 547000000000}, "weight_map": {"a": "s1"}}))
    broken = tmp_path / "broken.json"
    broken.write_text("")
    no_total = tmp_path / "no_total.json"
    no_total.write_text(json.dumps({"weight_map": {"a": "s1"}}))
    assert host_capacity.model_size([str(tmp_path / "missing.json"), str(broken), str(no_total), str(good)]) == {
        "index": str(good), "total_size_bytes": 547000000000,
        "unreadable": ["%s: No such file or directory" % (tmp_path / "missing.json"),
                       "%s: not JSON (Expecting value: line 1 column 1 (char 0))" % broken,
                       "%s: no metadata.total_size" % no_total]}
    assert host_capacity.model_size([str(broken)]) == {
        "index": None, "total_size_bytes": None,
        "unreadable": ["%s: not JSON (Expecting value: line 1 column 1 (char 0))" % broken]}


def test_module_reads_and_changes_nothing_in_check_mode(module_runner, tmp_path):
    kind, result = module_runner(host_capacity, {"paths": [str(tmp_path)]}, check_mode=True)
    assert kind == "exit", result
    assert result["changed"] is False
    assert result["memory"]["available_bytes"] > 0
    assert result["disks"][0]["checked_path"] == str(tmp_path)
    assert result["cpus"]["usable"] >= 1
    assert result["model"] == {"index": None, "total_size_bytes": None, "unreadable": []}
