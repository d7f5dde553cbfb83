"""apt reads the cuda_toolkit role's driver pin (the cuda_driver_preferences filter) as meant, against a repository
with the sandbox stand-in's driver packages and NVIDIA's Release fields (tests/sandbox/cuda_repo.py): no driver
package has a candidate, a host's older driver is not upgraded, the toolkit still is a candidate, and a driver install
held to a branch gets that branch only. Small and fast: a few empty debs, no toolkit."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SANDBOX = Path(__file__).resolve().parents[1] / "sandbox"
sys.path.insert(0, str(SANDBOX))

import cuda_repo  # noqa: E402
import yaml  # noqa: E402

from ansible_collections.blackwell.sglang.plugins.filter.cuda_driver_preferences import (  # noqa: E402
    cuda_driver_preferences,
)

ROOT = Path(__file__).resolve().parents[2]
DEFAULTS = yaml.safe_load((ROOT / "roles" / "cuda_toolkit" / "defaults" / "main.yml").read_text())
PATTERNS = DEFAULTS["cuda_toolkit_driver_pin_packages"]
KEEP = ["cuda-toolkit-13-0", "cuda-driver-dev-13-0", "cuda-keyring"]
DRIVER = [name for name, *_ in cuda_repo.DRIVER_PACKAGES] + ["cuda-drivers"]
OLD, NEW, NEXT = "580.65.06-1", "580.95.05-1", "590.44.01-1"

pytestmark = pytest.mark.skipif(
    not all(shutil.which(t) for t in ("dpkg-deb", "apt-ftparchive", "gpg", "apt-get", "apt-cache")),
    reason="dpkg-deb, apt-ftparchive, gpg and apt are needed")


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    """A signed flat repository like the stand-in's: Release with cuda_repo.write_index's fields (NVIDIA's), the
    stand-in's driver packages at 580.95.05-1 (the stand-in's version) and 590.44.01-1 (a newer branch), and a
    toolkit metapackage."""
    out = tmp_path_factory.mktemp("pin-repo")
    repo, work = out / "repo", out / "work"
    repo.mkdir()
    work.mkdir()
    home, fpr = cuda_repo.ensure_key(out / ".keys")
    try:
        for version in (NEW, NEXT):
            for name, depends, section, description in cuda_repo.DRIVER_PACKAGES:
                cuda_repo.build_deb(work, repo, name, version, cuda_repo.DEB_ARCH, section=section,
                                    depends=["%s (= %s)" % (dep, version) for dep in depends],
                                    scripts={"preinst": cuda_repo._driver_trap(name)}, description=description)
            cuda_repo.build_deb(work, repo, "cuda-drivers", version, cuda_repo.DEB_ARCH,
                                depends=["nvidia-open (= %s)" % version], description="CUDA Driver meta-package")
        cuda_repo.build_deb(work, repo, "cuda-toolkit-13-0", "13.0.2-1", cuda_repo.DEB_ARCH,
                            description="CUDA Toolkit 13.0 meta-package")
        cuda_repo.write_index(repo, home, fpr)
        keyring = out / "keyring.gpg"
        keyring.write_bytes(cuda_repo._gpg(home, "--export", fpr).stdout)
    finally:
        shutil.rmtree(home, ignore_errors=True)
    return repo, keyring


def _status(installed):
    return "".join(
        "Package: %s\nStatus: install ok installed\nPriority: optional\nSection: non-free/libs\nInstalled-Size: 1\n"
        "Maintainer: %s\nArchitecture: amd64\nVersion: %s\nDescription: %s\n\n"
        % (name, cuda_repo.MAINTAINER, version, name) for name, version in installed)


def _apt(tmp_path, repo, preferences, installed=()):
    """apt-get/apt-cache options for a private apt state on ``repo`` with ``preferences`` in preferences.d."""
    r, keyring = repo
    d = tmp_path / "apt"
    for sub in ("etc/sources.list.d", "etc/preferences.d", "state/lists/partial", "cache/archives/partial"):
        (d / sub).mkdir(parents=True)
    (d / "state/status").write_text(_status(installed))
    (d / "etc/sources.list").write_text("deb [signed-by=%s] file://%s/ /\n" % (keyring, r))
    (d / "etc/preferences.d/cuda-driver-pin.pref").write_text(preferences)
    opts = []
    for key, value in (("Dir::Etc::sourcelist", d / "etc/sources.list"),
                       ("Dir::Etc::sourceparts", d / "etc/sources.list.d"),
                       ("Dir::Etc::preferences", d / "etc/preferences"),
                       ("Dir::Etc::preferencesparts", d / "etc/preferences.d"), ("Dir::State", d / "state"),
                       ("Dir::State::status", d / "state/status"), ("Dir::Cache", d / "cache"),
                       ("Debug::NoLocking", "1"), ("APT::Architecture", "amd64")):
        opts += ["-o", "%s=%s" % (key, value)]
    upd = _run("apt-get", *opts, "update")
    assert upd.returncode == 0, upd.stderr
    return opts


def _run(*args):
    return subprocess.run(list(args), capture_output=True, text=True, env={"LC_ALL": "C", "PATH": "/usr/bin:/bin"})


def _policy(opts, package):
    out = _run("apt-cache", *opts, "policy", package)
    assert out.returncode == 0, out.stderr
    candidate = re.search(r"^  Candidate: (.*)$", out.stdout, re.M).group(1)
    table = dict(re.findall(r"^ (?:\*\*\*| {3}) (\S+) (-?\d+)$", out.stdout, re.M))
    return candidate, table


def test_the_release_names_the_repository_as_nvidias_does(repo):
    release = (repo[0] / "Release").read_text()
    fields = dict(line.split(": ", 1) for line in release.splitlines() if ": " in line and not line.startswith(" "))
    assert (fields["Origin"], fields["Label"], fields["Architecture"]) == ("NVIDIA", "NVIDIA CUDA", "x86_64")
    assert not {"Suite", "Codename", "Version", "Components"} & set(fields)


def test_without_a_driver_install_no_driver_package_has_a_candidate(repo, tmp_path):
    opts = _apt(tmp_path, repo, cuda_driver_preferences(PATTERNS, keep=KEEP))
    for package in DRIVER:
        candidate, table = _policy(opts, package)
        assert candidate == "(none)" and table == {NEW: "-1", NEXT: "-1"}, (package, candidate, table)
    assert _policy(opts, "cuda-toolkit-13-0") == ("13.0.2-1", {"13.0.2-1": "500"})
    sim = _run("apt-get", *opts, "--simulate", "install", "nvidia-open")
    assert sim.returncode != 0 and "Package 'nvidia-open' has no installation candidate" in sim.stderr, sim.stderr
    sim = _run("apt-get", *opts, "--simulate", "install", "cuda-toolkit-13-0")
    assert sim.returncode == 0 and "Inst cuda-toolkit-13-0 (13.0.2-1 NVIDIA CUDA" in sim.stdout, sim.stdout


def test_an_older_driver_on_the_host_is_not_upgraded_from_the_repository(repo, tmp_path):
    installed = [(name, OLD) for name in DRIVER]
    opts = _apt(tmp_path, repo, cuda_driver_preferences(PATTERNS, keep=KEEP), installed)
    sim = _run("apt-get", *opts, "--simulate", "dist-upgrade")
    assert sim.returncode == 0, sim.stderr
    assert not re.search(r"^Inst ", sim.stdout, re.M), sim.stdout
    # the same host without the pin: every driver package would move past the loaded module
    unpinned = _apt(tmp_path / "unpinned", repo, "", installed)
    sim = _run("apt-get", *unpinned, "--simulate", "dist-upgrade")
    assert sim.returncode == 0 and "Inst libnvidia-ml1 [%s] (%s NVIDIA CUDA" % (OLD, NEXT) in sim.stdout, sim.stdout


def test_a_driver_install_held_to_a_branch_gets_that_branch_only(repo, tmp_path):
    opts = _apt(tmp_path, repo, cuda_driver_preferences(PATTERNS, install_driver=True, branch="580", keep=KEEP))
    for package in DRIVER:
        candidate, table = _policy(opts, package)
        assert candidate == NEW and table == {NEW: "600", NEXT: "-1"}, (package, candidate, table)
    sim = _run("apt-get", *opts, "--simulate", "install", "nvidia-open")
    assert sim.returncode == 0, sim.stderr
    assert "Inst nvidia-open (%s NVIDIA CUDA" % NEW in sim.stdout and "Inst libcuda1 (%s NVIDIA CUDA" % NEW in sim.stdout
    assert NEXT not in sim.stdout
    # an installed 580 driver upgrades within its branch, never to 590
    opts = _apt(tmp_path / "installed", repo, cuda_driver_preferences(PATTERNS, install_driver=True, branch="580"),
                [(name, OLD) for name in DRIVER])
    sim = _run("apt-get", *opts, "--simulate", "dist-upgrade")
    assert sim.returncode == 0 and "Inst nvidia-open [%s] (%s NVIDIA CUDA" % (OLD, NEW) in sim.stdout, sim.stdout
    assert NEXT not in sim.stdout
