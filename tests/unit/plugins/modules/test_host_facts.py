"""host_facts: what it reads from sysfs-shaped trees, the drop-in directories it looks in, and a real run here."""

import os

from ansible_collections.blackwell.sglang.plugins.modules import host_facts
from ansible.module_utils import basic


def test_dropin_dirs_are_the_units_own_its_dash_prefixes_and_its_type():
    assert host_facts.unit_dropin_dirs("sglang-kimi.service") == ["sglang-kimi.service.d", "sglang-.service.d",
                                                                  "service.d"]
    assert host_facts.unit_dropin_dirs("a-b-c.service") == ["a-b-c.service.d", "a-b-.service.d", "a-.service.d",
                                                            "service.d"]


def test_conf_files_priority_order_and_one_real_directory_once(tmp_path):
    etc, usr = tmp_path / "etc", tmp_path / "usr"
    for base, name, text in ((etc, "10-a.conf", "etc a"), (usr, "10-a.conf", "usr a"), (usr, "20-b.conf", "usr b")):
        (base / "u.service.d").mkdir(parents=True, exist_ok=True)
        (base / "u.service.d" / name).write_text(text)
    os.symlink(str(usr), str(tmp_path / "lib"))      # /lib -> /usr/lib on merged-/usr systems
    files = host_facts.conf_files([str(etc), str(usr), str(tmp_path / "lib")], ["u.service.d"])
    assert [f["text"] for f in files] == ["etc a", "usr a", "usr b"]


def test_pci_facts_from_a_sysfs_tree(tmp_path):
    dev = tmp_path / "0000:9a:00.0"
    dev.mkdir()
    (dev / "numa_node").write_text("1\n")
    group = tmp_path / "groups" / "44"
    group.mkdir(parents=True)
    (group / "type").write_text("DMA-FQ\n")
    os.symlink(str(group), str(dev / "iommu_group"))
    got = host_facts.pci_facts(["00000000:9A:00.0", "00000000:1B:00.0", "[N/A]"], sysfs=str(tmp_path))
    assert got[0] == {"bus_id": "00000000:9A:00.0", "bdf": "0000:9a:00.0", "present": True, "numa_node": 1,
                      "iommu_group": "44", "iommu_type": "DMA-FQ"}
    assert got[1]["present"] is False and got[1]["numa_node"] is None
    assert got[2]["bdf"] is None and got[2]["present"] is False


def test_numa_nodes_and_cpusets(tmp_path):
    for node, cpus in (("0", "0-31,64-95"), ("1", "32-63,96-127")):
        (tmp_path / "node" / ("node" + node)).mkdir(parents=True)
        (tmp_path / "node" / ("node" + node) / "cpulist").write_text(cpus + "\n")
    assert host_facts.numa_nodes(str(tmp_path / "node")) == {"0": "0-31,64-95", "1": "32-63,96-127"}
    v2 = tmp_path / "v2"
    (v2 / "system.slice").mkdir(parents=True)
    (v2 / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    (v2 / "system.slice" / "cpuset.cpus.effective").write_text("0-15\n")
    (v2 / "system.slice" / "cpuset.mems.effective").write_text("0\n")
    assert host_facts.cpuset(str(v2)) == {"cpus": "0-15", "mems": "0", "source": str(v2 / "system.slice")}
    v1 = tmp_path / "v1"
    (v1 / "cpuset").mkdir(parents=True)
    (v1 / "cpuset" / "cpuset.effective_cpus").write_text("0-1\n")
    (v1 / "cpuset" / "cpuset.effective_mems").write_text("0\n")
    assert host_facts.cpuset(str(v1)) == {"cpus": "0-1", "mems": "0", "source": str(v1 / "cpuset")}


def test_journal_fs_counts_only_journal_files(tmp_path):
    machine = tmp_path / "journal" / "5e0a"
    machine.mkdir(parents=True)
    (machine / "system.journal").write_bytes(b"x" * 8192)
    (machine / "user-1000.journal~").write_bytes(b"x" * 4096)
    (machine / "notes.txt").write_bytes(b"x" * 65536)
    got = host_facts.journal_fs(str(tmp_path / "journal"))
    assert got["checked_path"] == str(tmp_path / "journal") and 12288 <= got["used_bytes"] < 65536
    missing = host_facts.journal_fs(str(tmp_path / "nope" / "journal"))
    assert missing["checked_path"] == str(tmp_path) and missing["used_bytes"] == 0


def test_runs_here_read_only(module_runner, monkeypatch):
    """A real run on this machine (check mode): every fact is there and nothing is reported as changed."""
    monkeypatch.setattr(basic.AnsibleModule, "run_command", lambda self, argv, **kw: (1, "", "not run in tests"))
    kind, result = module_runner(host_facts, {"unit": "sglang-kimi.service", "gpu_bus_ids": ["00000000:18:00.0"],
                                              "store": "/srv/models"}, check_mode=True)
    assert kind == "exit", result
    assert result["changed"] is False
    assert set(result) >= {"cmdline", "lspci", "pci", "iommu_units", "numa", "pid1", "cpuset", "unit", "journald",
                           "journal_fs", "store_fs"}
    assert "Max locked memory" in result["pid1"]["limits"] and "CapEff" in result["pid1"]["status"]
    assert result["numa"]["nodes"].get("0")
