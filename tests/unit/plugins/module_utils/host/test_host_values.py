"""host_values: the kernel's cpulist format."""

from ansible_collections.blackwell.sglang.plugins.module_utils.host import host_values as hv


def test_cpulists():
    assert hv.parse_cpulist("0-3,8 10-11") == {0, 1, 2, 3, 8, 10, 11}
    assert hv.format_cpulist({0, 1, 2, 3, 8, 10, 11}) == "0-3,8,10-11"
    assert hv.format_cpulist(set()) == "none"
