"""A bare node provisioned for real (issue 35): the node image lacked every prerequisite, the deploy installed each one,
and the unit's environment holds what its processes compile with (PATH with the release venv's bin and CUDA's,
CUDA_HOME), as the release probe found it running as the service user."""

import json
import os
import pathlib
import subprocess

import testinfra.utils.ansible_runner
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[3]
testinfra_hosts = [
    f"podman://{name}"
    for name in testinfra.utils.ansible_runner.AnsibleRunner(os.environ["MOLECULE_INVENTORY_FILE"]).get_hosts(
        "gpu_nodes"
    )
]
MAP = yaml.safe_load((ROOT / "roles" / "host_prerequisites" / "defaults" / "main.yml").read_text())
PREREQUISITES = sorted({p for group in MAP["host_prerequisites_distributions"]["Debian-12"]["packages"].values()
                        for p in group})
IMAGE = "localhost/sglang-sandbox-node:current"


def _dpkg_status(argv_prefix):
    out = subprocess.run(argv_prefix + ["dpkg-query", "-W", "-f=${Package}\t${db:Status-Status}\n", "--",
                                        *PREREQUISITES], capture_output=True, text=True, check=False)
    return {line.split("\t")[0]: line.split("\t")[1] for line in out.stdout.splitlines() if "\t" in line}


def test_the_image_lacked_every_prerequisite_and_the_node_has_each():
    # The node's own image, started bare: what the node was before the deploy touched it.
    before = _dpkg_status(["podman", "run", "--rm", "--entrypoint", "", IMAGE])
    assert all(before.get(p) != "installed" for p in PREREQUISITES), before
    for name in testinfra_hosts:
        after = _dpkg_status(["podman", "exec", name.split("://", 1)[1]])
        assert {p: after.get(p) for p in PREREQUISITES} == {p: "installed" for p in PREREQUISITES}


def test_the_units_environment_finds_its_tools(host):
    env = dict(line.split("=", 1) for line in host.file("/etc/sglang/kimi.env").content_string.splitlines()
               if "=" in line and not line.startswith("#"))
    # the release itself, not the current link (issue 59: a server started from the link takes its lazy imports from
    # whatever release the link names later)
    release = host.file("/opt/sglang/current").linked_to
    assert "/releases/" in release
    assert env["PATH"].startswith(f"{release}/venv/bin:/usr/local/cuda-13.0/bin:")
    argv = json.loads(host.file("/etc/sglang/kimi.argv.json").content_string)
    assert argv[0] == f"{release}/venv/bin/python"
    assert env["CUDA_HOME"] == "/usr/local/cuda-13.0"
    assert host.file("/opt/sglang/current/venv/bin/ninja").is_file
    assert host.file("/usr/local/cuda-13.0/bin/nvcc").is_file


def test_the_release_probe_ran_as_the_unit_would_and_found_the_toolchain(host):
    release = json.loads(host.file("/opt/sglang/current/release.json").content_string)
    toolchain = release["probe"]["toolchain"]
    assert toolchain["ninja"]["path"].endswith("/venv/bin/ninja")
    assert toolchain["nvcc"]["release"] == "13.0"
    assert toolchain["launcher"]["compiled"] is True
    assert toolchain["launcher"]["python_include"] == "/usr/include/python3.11"
    # It ran as the service user, with the environment for its own release (not yet current then).
    assert toolchain["user"] == "sglang"
    assert toolchain["path"].startswith("/opt/sglang/releases/%s/venv/bin:" % release["fingerprint"])
