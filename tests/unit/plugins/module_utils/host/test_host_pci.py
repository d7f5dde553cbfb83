"""host_pci on recorded inputs (tests/unit/fixtures/host_facts): lspci -vvv bridges and ACS, bus ids, the IOMMU
mode from /proc/cmdline and sysfs."""

import pytest

from ansible_collections.blackwell.sglang.plugins.module_utils.host import host_pci as pci
from conftest import load_lspci


def test_lspci_parser_reads_bus_ranges_acs_and_numa():
    devices = pci.parse_lspci(load_lspci("lspci_8gpu_pex890xx_acs_on.txt"))
    down = devices["0000:17:00.0"]
    assert down["bridge"] == (0x17, 0x18, 0x29)
    assert down["acs_ctl"] == {"SrcValid": True, "TransBlk": False, "ReqRedir": True, "CmpltRedir": True,
                               "UpstreamFwd": True, "EgressCtrl": False, "DirectTrans": False}
    assert down["acs_cap"]["EgressCtrl"] is True and down["driver"] == "pcieport"
    assert devices["0000:98:00.0"]["acs_ctl"] == {}          # switch upstream port: no ACS capability
    gpu = devices["0000:9a:00.0"]
    assert gpu["numa_node"] == 1 and gpu["driver"] == "nvidia" and gpu["bridge"] is None
    chain = [d["bdf"] for d in pci.upstream_bridges(devices, "0000:9a:00.0")]
    assert chain == ["0000:99:00.0", "0000:98:00.0", "0000:97:01.0"]
    assert pci.upstream_bridges(devices, "0000:2a:00.0")[0]["bdf"] == "0000:17:01.0"


def test_lspci_without_domain_numbers_is_domain_0000():
    out = "00:01.0 PCI bridge: X (prog-if 00 [Normal decode])\n\tBus: primary=00, secondary=01, subordinate=01, " \
          "sec-latency=0\n\t\tACSCtl:\tSrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- " \
          "DirectTrans-\n"
    devices = pci.parse_lspci(out)
    assert list(devices) == ["0000:00:01.0"] and devices["0000:00:01.0"]["acs_ctl"]["ReqRedir"] is True


@pytest.mark.parametrize("bus_id,bdf", [("00000000:1B:00.0", "0000:1b:00.0"), ("0000:9a:00.0", "0000:9a:00.0"),
                                        ("1b:00.0", "0000:1b:00.0"), ("00000001:03:00.1", "0001:03:00.1"),
                                        ("[N/A]", None), (None, None)])
def test_normalize_bdf(bus_id, bdf):
    assert pci.normalize_bdf(bus_id) == bdf


@pytest.mark.parametrize("cmdline,mode", [
    ("ro quiet iommu=pt intel_iommu=on", "passthrough"),
    ("ro intel_iommu=on", "translated"),
    ("ro amd_iommu=on iommu.passthrough=1", "passthrough"),
    ("ro iommu.passthrough=0", "translated"),
    ("ro intel_iommu=off", "off"),
    ("ro quiet", "off"),
    ("ro quiet -- intel_iommu=on", "off"),                       # after -- the arguments belong to init
])
def test_iommu_mode_from_the_command_line(cmdline, mode):
    assert pci.iommu_mode(cmdline)[0] == mode


def test_sysfs_group_type_beats_the_command_line():
    assert pci.iommu_mode("ro iommu=pt", {0: "DMA", 1: "identity"})[0] == "translated"
    assert pci.iommu_mode("ro intel_iommu=on", {0: "identity", 1: "identity"})[0] == "passthrough"
    assert pci.iommu_mode("ro quiet", {}, ["dmar0"])[0] == "unknown"
