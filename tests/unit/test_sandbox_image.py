"""The sandbox node image is as bare as a stock Debian 12 cloud image: nothing the product must install is in it.

A node image that carried python3-venv, python3-dev, python3-debian, python3-apt, git, a compiler or ninja would let
a deploy pass that stops at its first build step on a fresh host (issue 35). roles/host_prerequisites installs them;
the sandbox's Debian mirror (tests/sandbox/distro_repo.py) must serve every one of them.
"""

import pathlib
import sys

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
IMAGE = ROOT / "tests" / "sandbox" / "image" / "packages.txt"
FORBIDDEN = {"python3-venv", "python3-dev", "python3-debian", "python3-apt", "git", "build-essential", "gcc", "g++",
             "ninja-build", "make", "libpython3-dev", "python3.11-venv", "python3.11-dev", "python3-pip",
             "python3-packaging", "python3-setuptools"}


def image_packages():
    return {line.split("#")[0].strip() for line in IMAGE.read_text().splitlines() if line.split("#")[0].strip()}


def test_the_image_lacks_what_the_product_installs():
    assert image_packages() & FORBIDDEN == set()
    prerequisites = yaml.safe_load((ROOT / "roles" / "host_prerequisites" / "defaults" / "main.yml").read_text())
    for entry in prerequisites["host_prerequisites_distributions"].values():
        for group in entry["packages"].values():
            assert image_packages().isdisjoint(group)


def test_the_image_has_what_a_cloud_image_ships_for_ansible_and_systemd():
    assert {"systemd", "systemd-sysv", "python3", "sudo", "ca-certificates"} <= image_packages()


def test_the_sandbox_mirror_serves_every_debian_prerequisite():
    sys.path.insert(0, str(ROOT / "tests" / "sandbox"))
    import distro_repo

    prerequisites = yaml.safe_load((ROOT / "roles" / "host_prerequisites" / "defaults" / "main.yml").read_text())
    debian = prerequisites["host_prerequisites_distributions"]["Debian-12"]["packages"]
    assert {p for group in debian.values() for p in group} <= set(distro_repo.ROOTS)
