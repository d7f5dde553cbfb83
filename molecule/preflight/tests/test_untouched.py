"""After every refused preflight case, the node carries no trace of the deploy."""

import os

import testinfra.utils.ansible_runner

testinfra_hosts = [
    f"podman://{name}"
    for name in testinfra.utils.ansible_runner.AnsibleRunner(os.environ["MOLECULE_INVENTORY_FILE"]).get_hosts(
        "gpu_nodes"
    )
]


def test_no_cuda_apt_source_or_keyring(host):
    sources = host.run("ls /etc/apt/sources.list.d").stdout.split()
    assert not [s for s in sources if "cuda" in s], sources
    assert not host.file("/usr/share/keyrings/cuda-archive-keyring.gpg").exists
    assert host.run("dpkg-query -W cuda-keyring").rc != 0


def test_nothing_under_usr_local_cuda_or_opt_sglang(host):
    assert host.run("ls -d /usr/local/cuda*").rc != 0
    assert not host.file("/opt/sglang").exists
    assert not host.file("/srv/models").exists
    assert not host.file("/etc/systemd/system/sglang-kimi.service").exists
