"""What a stock host lacks and the product installs (roles/host_prerequisites), and what preflight refuses first.

The distribution map (the role's defaults) against recorded facts of each supported distribution: Debian 12's package
names against this machine's own apt lists (a Debian 12 machine, the node image's release), Ubuntu 24.04's against a
recorded list of noble's archive; Ubuntu 22.04 (Python 3.10) is refused. Then dpkg's answers, the Python floor and the
GPU device files' permissions.
"""

import json
import pathlib
import shutil
import subprocess

import pytest
import yaml

from ansible_collections.blackwell.sglang.plugins.filter import host_prerequisites as hp

ROOT = pathlib.Path(__file__).resolve().parents[4]
FIXTURES = ROOT / "tests" / "unit" / "fixtures" / "host_prerequisites"

DEFAULTS = yaml.safe_load((ROOT / "roles" / "host_prerequisites" / "defaults" / "main.yml").read_text())
MAP = DEFAULTS["host_prerequisites_distributions"]
FLOOR = yaml.safe_load((ROOT / "roles" / "deployment" / "defaults" / "main" / "main.yml").read_text())["deployment_python_floor"]
# What the issue found missing on stock images, each a step of the deploy that fails without it.
NEEDED = {"python3-venv", "python3-dev", "python3-debian", "python3-apt", "git", "gcc", "python3-packaging",
          # issue 59: preflight's ACS check reads lspci, SGLang's NUMA binding runs numactl; a stock image has neither
          "pciutils", "numactl"}


def facts(name):
    return json.loads((FIXTURES / name).read_text())


def plan(fact, gpu_node=True):
    return hp.host_prerequisites_plan(MAP, fact["ansible_distribution"], fact["ansible_distribution_major_version"],
                                      gpu_node=gpu_node)


@pytest.mark.parametrize("fixture", ["debian-12.json", "ubuntu-24.04.json"])
def test_each_supported_distribution_gets_every_prerequisite(fixture):
    fact = facts(fixture)
    result = plan(fact)
    assert result["problems"] == []
    assert set(result["packages"]) == NEEDED
    # A router or monitoring host gets what every host needs (apt's library, venv, the pip module's packaging), not
    # the GPU node's build tools.
    assert set(plan(fact, gpu_node=False)["packages"]) == {"python3-apt", "python3-venv", "python3-packaging"}
    # The map's python is the distribution's, and it reaches the floor the pinned SGLang needs.
    version = fact["ansible_python"]["version"]
    assert result["python"] == "%d.%d" % (version["major"], version["minor"])
    assert hp.python_floor_problems(result["python"], FLOOR, "/usr/bin/python3") == []


def test_ubuntu_22_04_is_refused_naming_the_supported_ones():
    result = plan(facts("ubuntu-22.04.json"))
    assert result["packages"] == []
    assert result["problems"] == [result["problems"][0]]
    assert result["problems"][0].startswith("Ubuntu 22 is not a supported distribution (supported: Debian-12, Ubuntu-24")
    # And its python3 would be refused by the floor on its own.
    assert hp.python_floor_problems("3.10", FLOOR, "/usr/bin/python3")


@pytest.mark.skipif(not shutil.which("apt-cache"), reason="needs a Debian machine's apt (CI and the sandbox are one)")
def test_debian_12_names_are_real_packages_of_this_machines_debian_12():
    assert pathlib.Path("/etc/debian_version").read_text().startswith("12."), "the controller is Debian 12"
    names = sorted({p for group in MAP["Debian-12"]["packages"].values() for p in group})
    out = subprocess.run(["apt-cache", "show", "--no-all-versions", *names], capture_output=True, text=True)
    if "No packages found" in out.stderr and not out.stdout:
        pytest.skip("apt lists are empty here (apt-get update has not run)")
    shown = {line.split(":", 1)[1].strip() for line in out.stdout.splitlines() if line.startswith("Package:")}
    assert shown == set(names), out.stderr


def test_ubuntu_24_04_names_are_in_the_recorded_archive():
    recorded = {line.split()[0] for line in (FIXTURES / "ubuntu-24.04-packages.txt").read_text().splitlines()
                if line.strip() and not line.startswith("#")}
    names = {p for group in MAP["Ubuntu-24"]["packages"].values() for p in group}
    assert names <= recorded, names - recorded


def test_dpkg_missing_reads_dpkg_query():
    wanted = ["python3-apt", "python3-venv", "python3-packaging", "python3-debian", "python3-dev", "gcc", "git"]
    stdout = (FIXTURES / "dpkg-query-bare.txt").read_text()
    # git unknown to dpkg (only on stderr), gcc removed with its configuration left: both missing.
    assert hp.dpkg_missing(stdout, wanted) == wanted
    done = "".join("%s\tinstalled\n" % p for p in wanted)
    assert hp.dpkg_missing(done, wanted) == []
    assert hp.dpkg_missing("python3-dev:amd64\tinstalled\n", ["python3-dev"]) == []


def test_python_floor_names_the_interpreter_its_version_and_the_way_out():
    problem, = hp.python_floor_problems("3.10", "3.11", "/usr/bin/python3.10", reason="SGLang needs Python >= 3.11")
    assert problem.startswith("/usr/bin/python3.10 is Python 3.10, older than 3.11 (SGLang needs Python >= 3.11)")
    assert "set sglang_build_python to a Python >= 3.11" in problem
    assert hp.python_floor_problems("3.12", "3.11", "/usr/bin/python3") == []
    assert "did not say its version" in hp.python_floor_problems("", "3.11", "/opt/nothing")[0]


def _dev(name, mode="0666", owner="root", group="root"):
    return {"path": "/dev/" + name, "mode": mode, "pw_name": owner, "gr_name": group}


def test_world_accessible_device_files_pass():
    files = [_dev("nvidiactl"), _dev("nvidia-uvm"), _dev("nvidia0"), _dev("nvidia1"), _dev("nvidia-caps", "0755")]
    assert hp.device_access_problems(files, "sglang", ["sglang"]) == {"errors": [], "warnings": []}


def test_group_only_device_files_need_the_group():
    files = [_dev("nvidiactl", "0660", group="video"), _dev("nvidia-uvm", "0660", group="video"),
             _dev("nvidia0", "0660", group="video")]
    result = hp.device_access_problems(files, "sglang", ["sglang"], user_exists=False)
    assert len(result["errors"]) == 3
    assert result["errors"][0] == (
        "sglang (the unit's user, not created yet; groups sglang) cannot open /dev/nvidiactl (rw-rw---- root:video): "
        "add video to sglang_service_supplementary_groups, or have the driver create its device files for everyone "
        "(NVreg_DeviceFileMode=0666, its default)")
    assert hp.device_access_problems(files, "sglang", ["sglang", "video"])["errors"] == []


def test_missing_device_files_only_warn():
    assert hp.device_access_problems([], "sglang", ["sglang"])["warnings"][0].startswith("no /dev/nvidia* device files")
    result = hp.device_access_problems([_dev("nvidiactl"), _dev("nvidia0")], "sglang", ["sglang"])
    assert result["errors"] == [] and result["warnings"][0].startswith("no /dev/nvidia-uvm yet")


def _ran(stdout, rc=0):
    return {"rc": rc, "stdout": stdout}


def test_a_source_build_without_a_new_enough_rust_is_refused_naming_what_was_found():
    """Debian 12's own rustc is 1.63 (rustc-web 1.85+ comes from bookworm-security); SGLang 0.5.23's rust/ workspace is
    edition 2024, which needs 1.85."""
    problem, = hp.rust_toolchain_problems(_ran("rustc 1.63.0"), _ran("cargo 0.66.0"), "1.85",
                                          reason="SGLang 0.5.23's setup.py builds its Rust extensions")
    assert problem.startswith("sglang_build_method is source (SGLang 0.5.23's setup.py builds its Rust extensions): "
                              "it needs rustc >= 1.85 with cargo on PATH, and found rustc 1.63.0; cargo 0.66.0.")
    assert "rustc-web cargo-web" in problem and "sglang_build_method: wheel" in problem
    problem, = hp.rust_toolchain_problems(_ran("", rc=2), _ran("", rc=2), "1.85")
    assert "found no rustc on PATH; no cargo on PATH" in problem
    problem, = hp.rust_toolchain_problems(_ran("rustc 1.96.0 (17067e9ac 2026-05-01)"), _ran("", rc=2), "1.85")
    assert "no cargo on PATH" in problem  # a rustc alone does not build: setuptools-rust runs cargo


def test_a_new_enough_rust_or_a_source_without_rust_passes():
    assert hp.rust_toolchain_problems(_ran("rustc 1.96.0 (17067e9ac 2026-05-01)"), _ran("cargo 1.96.0"), "1.85") == []
    assert hp.rust_toolchain_problems(_ran("rustc 1.85.0-nightly"), _ran("cargo 1.85.0"), "1.85") == []
    assert hp.rust_toolchain_problems(_ran("", rc=2), _ran("", rc=2), "") == []  # the source needs no Rust

