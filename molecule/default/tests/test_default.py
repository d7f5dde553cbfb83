"""Checks on the sandbox GPU node after converge (testinfra, run by `molecule verify`)."""

import json
import os

import testinfra.utils.ansible_runner

# The nodes come from molecule's inventory; testinfra reaches them with `podman exec` directly
# (its ansible backend does not know the podman connection and would run one ad-hoc ansible per command).
testinfra_hosts = [
    f"podman://{name}"
    for name in testinfra.utils.ansible_runner.AnsibleRunner(os.environ["MOLECULE_INVENTORY_FILE"]).get_hosts(
        "gpu_nodes"
    )
]


def test_systemd_is_running(host):
    state = host.run("systemctl is-system-running")
    failed = host.run("systemctl --failed --no-legend --plain").stdout.strip()
    assert state.stdout.strip() == "running", f"systemd is {state.stdout.strip()!r}; failed units: {failed or 'none'}"


def test_nvidia_smi_stand_in_is_installed(host):
    link = host.file("/usr/bin/nvidia-smi")
    assert link.is_symlink, "/usr/bin/nvidia-smi is not a symlink to the stand-in"
    assert link.linked_to == "/srv/sandbox/bin/nvidia-smi"
    target = host.file("/srv/sandbox/bin/nvidia-smi")
    assert (
        target.exists and target.mode & 0o111
    ), "the stand-in /srv/sandbox/bin/nvidia-smi is missing or not executable"
    assert host.run("command -v nvidia-smi").stdout.strip() == "/usr/bin/nvidia-smi"


def test_fake_gpu_list_is_writable_copy(host):
    gpus = host.file("/etc/sandbox/gpus.json")
    assert gpus.is_file and not gpus.is_symlink
    assert gpus.user == "root" and gpus.mode == 0o644
    json.loads(gpus.content_string)  # valid JSON
