"""The host's driver stays the operator's (issue 35): on the deployed node NVIDIA's CUDA repository (the sandbox's
stand-in, tests/sandbox/cuda_repo.py, with NVIDIA's Release fields) cannot install or upgrade a driver package,
while the toolkit from the same repository is installed."""

import os
import re

import testinfra.utils.ansible_runner

# podman:// runs each check with `podman exec` (testinfra has no backend for Ansible's podman connection).
testinfra_hosts = [
    f"podman://{name}"
    for name in testinfra.utils.ansible_runner.AnsibleRunner(os.environ["MOLECULE_INVENTORY_FILE"]).get_hosts(
        "gpu_nodes"
    )
]

PIN_FILE = "/etc/apt/preferences.d/cuda-driver-pin.pref"
# The stand-in repository's driver packages (cuda_repo.DRIVER_PACKAGES and cuda-drivers), all 580.95.05-1 and none
# installed on the node: without the pin each would be a candidate.
DRIVER_PACKAGES = ("nvidia-open", "nvidia-driver-cuda", "nvidia-kernel-open-dkms", "libcuda1", "libnvidia-ml1",
                   "nvidia-smi", "cuda-drivers")


def _policy(host, package):
    out = host.run(f"LC_ALL=C apt-cache policy {package}")
    assert out.rc == 0, out.stderr
    return out.stdout


def test_the_pin_file_names_nvidias_repository_by_its_release_fields(host):
    pin = host.file(PIN_FILE)
    assert pin.is_file and pin.user == "root" and pin.mode == 0o644
    text = pin.content_string
    assert "Pin: release o=NVIDIA,l=NVIDIA CUDA\nPin-Priority: -1\n" in text
    assert re.search(r"^Package: nvidia-\* libnvidia-\* cuda-drivers\* .*$", text, re.M)
    assert "Pin: version" not in text  # no driver install in the sandbox: no branch is allowed


def test_driver_packages_have_no_candidate_and_priority_minus_1(host):
    for package in DRIVER_PACKAGES:
        policy = _policy(host, package)
        assert "Installed: (none)" in policy, policy
        assert "Candidate: (none)" in policy, policy
        # the version line of the table: "     580.95.05-1 -1", then the source it comes from at its own 500
        assert re.search(r"^ +580\.95\.05-1 -1$", policy, re.M), policy
        assert "file:/srv/sandbox/cuda-repo/debian12/x86_64" in policy, policy


def test_apt_refuses_the_driver_and_an_upgrade_takes_none_of_it(host):
    sim = host.run("LC_ALL=C apt-get --simulate install nvidia-open")
    assert sim.rc != 0 and "Inst nvidia-open" not in sim.stdout, sim.stdout + sim.stderr
    assert "has no installation candidate" in sim.stderr, sim.stderr
    upgrade = host.run("LC_ALL=C apt-get --simulate dist-upgrade")
    assert upgrade.rc == 0, upgrade.stderr
    taken = [line for line in upgrade.stdout.splitlines()
             if line.startswith("Inst ") and line.split()[1] in DRIVER_PACKAGES]
    assert not taken, upgrade.stdout


def test_the_toolkit_from_the_same_repository_is_still_installed(host):
    policy = _policy(host, "cuda-toolkit-13-0")
    assert "Installed: 13.0.2-1" in policy and "Candidate: 13.0.2-1" in policy, policy
    assert re.search(r"^ \*\*\* 13\.0\.2-1 500$", policy, re.M), policy
    assert host.package("cuda-toolkit-13-0").is_installed
    assert "release 13.0," in host.run("/usr/local/cuda-13.0/bin/nvcc --version").stdout
