"""Host hygiene (issue 59): the files that keep the host's own package tools from changing a node under a live server,
per distribution, and apt's answer that decides a refresh (plugins/filter/host_prerequisites_hygiene.py).

unattended-upgrades 2.9.1 (Debian 12's 2.9.1+nmu3, Ubuntu 24.04's 2.9.1ubuntu4) matches each Package-Blacklist entry
with ``re.match(entry, name)`` (unattended-upgrade, ``is_pkgname_in_blacklist``): _held below is that test. needrestart
3.6 evaluates every /etc/needrestart/conf.d/*.conf as Perl and skips a service whose name matches an override_rc key
set to 0; the test evaluates the file with perl the same way where perl is installed.
"""

import fnmatch
import pathlib
import re
import shutil
import subprocess

import pytest
import yaml
from ansible.errors import AnsibleFilterError

from ansible_collections.blackwell.sglang.plugins.filter import host_prerequisites_hygiene as hy

ROOT = pathlib.Path(__file__).resolve().parents[4]
CUDA = yaml.safe_load((ROOT / "roles" / "cuda_toolkit" / "defaults" / "main.yml").read_text())
DEPLOYMENT = ROOT / "roles" / "deployment"
RELEASE = yaml.safe_load((DEPLOYMENT / "defaults" / "main" / "main.yml").read_text())["deployment_cuda_release"]
DASH = RELEASE.replace(".", "-")
FIXTURES = ROOT / "tests" / "unit" / "fixtures" / "host_prerequisites"

# What the cuda_toolkit task holds: the driver pin's patterns, the release's toolkit packages (roles/cuda_toolkit).
HOLD = CUDA["cuda_toolkit_driver_pin_packages"] + ["*-" + DASH, "cuda-toolkit-%s-*" % DASH]

# The driver as each distribution's own archive names it (the pin on NVIDIA's repository does not cover these), and as
# NVIDIA's repository for it does.
DRIVER = {
    "Debian-12": ["nvidia-driver", "nvidia-kernel-dkms", "nvidia-open-kernel-dkms", "nvidia-smi", "libcuda1",
                  "libnvidia-ml1", "libnvidia-ptxjitcompiler1", "firmware-nvidia-gsp", "nvidia-persistenced",
                  "libnvcuvid1", "nvidia-open", "nvidia-driver-cuda", "cuda-drivers-580"],
    "Ubuntu-24": ["nvidia-driver-580-open", "nvidia-dkms-580-open", "nvidia-utils-580", "nvidia-kernel-common-580",
                  "libnvidia-compute-580", "libnvidia-cfg1-580", "nvidia-compute-utils-580", "nvidia-firmware-580",
                  "linux-modules-nvidia-580-open-generic", "linux-modules-nvidia-580-open-6.8.0-60-generic",
                  "linux-objects-nvidia-580-open-6.8.0-60-generic", "nvidia-headless-no-dkms-580-open",
                  "libnvidia-compute", "cuda-drivers"],
}
# The product's CUDA release, from NVIDIA's repository (both distributions name it alike).
TOOLKIT = ["cuda-toolkit-%s" % DASH, "cuda-nvcc-%s" % DASH, "cuda-cudart-%s" % DASH, "libcublas-%s" % DASH,
           "cuda-driver-dev-%s" % DASH, "libnvjitlink-%s" % DASH, "cuda-toolkit-%s-config-common" % DASH]
# What unattended-upgrades must keep upgrading: security fixes of everything else.
FREE = ["libc6", "openssl", "libssl3", "linux-image-generic", "linux-image-6.8.0-60-generic", "nginx", "python3",
        "python3.12", "gcc-12", "g++", "libnccl2", "cuda-keyring", "cuda-toolkit-config-common", "systemd",
        "libcudnn9-cuda-13", "pciutils", "numactl", "libnuma1"]


def _blacklist(text):
    return re.findall(r'^\s+"([^"]+)";$', text, re.M)


def _held(name, entries):
    return any(re.match(entry, name) for entry in entries)


@pytest.mark.parametrize("distribution", sorted(DRIVER))
def test_the_driver_and_the_toolkit_are_held_in_every_archive_and_nothing_else(distribution):
    entries = _blacklist(hy.unattended_upgrades_hold(HOLD, "blackwell.sglang.cuda_toolkit"))
    assert [n for n in DRIVER[distribution] + TOOLKIT if not _held(n, entries)] == []
    assert [n for n in FREE if _held(n, entries)] == []


def test_each_entry_matches_what_its_glob_matches():
    """The translation keeps apt's glob meaning under re.match: same names held as fnmatch would pin."""
    names = [n for names in DRIVER.values() for n in names] + TOOLKIT + FREE + ["nvidia", "libcuda10", "xlibcuda1"]
    for pattern in HOLD + ["lib[ab]c?.so+1"]:
        (entry,) = _blacklist(hy.unattended_upgrades_hold([pattern]))
        for name in names + ["libac1.so+1", "libbcx.so+1", "libcc1.so+1"]:
            assert bool(re.match(entry, name)) == fnmatch.fnmatchcase(name, pattern), (pattern, entry, name)


@pytest.mark.skipif(not shutil.which("apt-config"), reason="needs apt (Debian 12 here, as on the nodes)")
def test_apt_parses_the_file_as_the_list_unattended_upgrades_reads(tmp_path):
    text = hy.unattended_upgrades_hold(HOLD, "blackwell.sglang.cuda_toolkit", "From the cuda_toolkit role.")
    path = tmp_path / "52blackwell-sglang-hold"
    path.write_text(text)
    out = subprocess.run(["apt-config", "-c", str(path), "dump"], capture_output=True, text=True, check=True).stdout
    listed = re.findall(r'^Unattended-Upgrade::Package-Blacklist:: "(.*)";$', out, re.M)
    assert listed == _blacklist(text) and len(listed) == len(HOLD)
    assert "// From the cuda_toolkit role." in text


def test_bad_patterns_are_refused_and_an_empty_list_holds_nothing():
    with pytest.raises(AnsibleFilterError, match="matches every package"):
        hy.unattended_upgrades_hold(["*"])
    with pytest.raises(AnsibleFilterError, match="not an apt package name"):
        hy.unattended_upgrades_hold(["nvidia driver"])
    with pytest.raises(AnsibleFilterError, match="without its"):
        hy.unattended_upgrades_hold(["lib[ab"])
    assert "Package-Blacklist" not in hy.unattended_upgrades_hold([])


UNITS = ["sglang-kimi.service", "sglang-router.service", "nginx.service"]


def test_needrestart_keys_match_the_units_and_only_them():
    text = hy.needrestart_overrides(UNITS + ["", "nginx.service"], "blackwell.sglang.host_prerequisites")
    keys = re.findall(r"^\$nrconf\{override_rc\}\{qr\((.*)\)\} = 0;$", text, re.M)
    assert len(keys) == 3
    # Perl's and Python's regexes agree on these (escaped non-word characters, a group, anchors)
    for name in ["sglang-kimi.service", "sglang-kimi", "sglang-router.service", "nginx.service", "nginx"]:
        assert any(re.match(k, name) for k in keys), name
    for name in ["sglang-kimi2.service", "xnginx.service", "nginx-debug.service", "sglang-kimiXservice",
                 "sglang-router-2.service"]:
        assert not any(re.match(k, name) for k in keys), name


@pytest.mark.skipif(not shutil.which("perl"), reason="needs perl (needrestart's language)")
def test_needrestart_reads_the_file_and_skips_exactly_those_units(tmp_path):
    path = tmp_path / "blackwell-sglang.conf"
    path.write_text(hy.needrestart_overrides(UNITS + ["sglang-a@1.service"]))
    # needrestart 3.6: eval do { local(@ARGV, $/) = $fn; <>}; then, per service, the first override_rc key matching
    script = r'''
        my %nrconf = (override_rc => {qr(^dbus) => 0});
        eval do { local(@ARGV, $/) = $ARGV[0]; <> }; die "Error parsing: $@" if $@;
        for my $rc (@ARGV[1..$#ARGV]) {
            my $restart = 1;
            foreach my $re (sort keys %{$nrconf{override_rc}}) {
                next unless ($rc =~ /$re/); $restart = $nrconf{override_rc}->{$re}; last;
            }
            print "$rc $restart\n";
        }'''
    names = ["sglang-kimi.service", "sglang-router.service", "nginx.service", "nginx", "sglang-a@1.service",
             "ssh.service", "sglang-kimi2.service", "prometheus.service"]
    out = subprocess.run(["perl", "-e", script, str(path)] + names, capture_output=True, text=True, check=True).stdout
    assert dict(line.split() for line in out.splitlines()) == {
        "sglang-kimi.service": "0", "sglang-router.service": "0", "nginx.service": "0", "nginx": "0",
        "sglang-a@1.service": "0", "ssh.service": "1", "sglang-kimi2.service": "1", "prometheus.service": "1"}


def test_a_name_no_unit_has_is_refused():
    with pytest.raises(AnsibleFilterError, match="not a systemd unit name"):
        hy.needrestart_overrides(["sglang kimi.service"])
    with pytest.raises(AnsibleFilterError, match="expects a list"):
        hy.needrestart_overrides("nginx.service")


def test_the_needrestart_units_are_the_deployments_own():
    """One fact, one place: the role lists the units by the variables roles/deployment sets, not by name."""
    defaults = yaml.safe_load((ROOT / "roles" / "host_prerequisites" / "defaults" / "main.yml").read_text())
    assert defaults["host_prerequisites_needrestart_units"] == [
        "{{ sglang_service_unit }}", "{{ sglang_router_unit }}", "{{ sglang_gateway_unit }}"]
    base = (DEPLOYMENT / "vars" / "main.yml").read_text() + (DEPLOYMENT / "defaults" / "main" / "sglang_gateway.yml").read_text()
    for name in ("sglang_service_unit:", "sglang_router_unit:", "sglang_gateway_unit:"):
        assert name in base, name


POLICY = (FIXTURES / "apt-cache-policy-cuda.txt").read_text()
CUDA_URL = "https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/"


def test_apt_lists_missing_reads_apt_cache_policy():
    # a package listed from its repository is there; one only in dpkg's status (installed, its lists gone) or unknown
    # to apt (nothing printed) is missing: a refresh is due
    assert hy.apt_lists_missing(POLICY, ["pciutils", "git", "numactl"]) == ["git", "numactl"]
    assert hy.apt_lists_missing(POLICY, ["cuda-toolkit-%s" % DASH], source=CUDA_URL) == []
    assert hy.apt_lists_missing(POLICY, ["cuda-toolkit-%s" % DASH], source=CUDA_URL, version="13.0.1-1") == []
    assert hy.apt_lists_missing(POLICY, ["cuda-toolkit-%s" % DASH], source=CUDA_URL, version="13.0.3-1") == \
        ["cuda-toolkit-%s" % DASH]
    # the toolkit from another repository (a mirror the lists were never fetched for) is not this repository's
    assert hy.apt_lists_missing(POLICY, ["cuda-toolkit-%s" % DASH], source="http://mirror/cuda/debian12/x86_64/") == \
        ["cuda-toolkit-%s" % DASH]
    assert hy.apt_lists_missing("", ["pciutils"]) == ["pciutils"]


@pytest.mark.skipif(not shutil.which("apt-cache"), reason="needs apt")
def test_apt_lists_missing_reads_this_machines_apt(tmp_path):
    """A flat repository (NVIDIA's layout: `deb URL /`) in lists of its own, read back through the real apt-cache."""
    repo, state = tmp_path / "repo", tmp_path / "state"
    repo.mkdir()
    (state / "lists" / "partial").mkdir(parents=True)
    (state / "cache" / "archives" / "partial").mkdir(parents=True)
    (repo / "Packages").write_text("Package: cuda-toolkit-%s\nVersion: 13.0.2-1\nArchitecture: all\n"
                                   "Maintainer: x <x@example.org>\nFilename: ./t.deb\nSize: 1\nDescription: t\n\n" % DASH)
    (state / "sources.list").write_text("deb [trusted=yes] file:%s/ /\n" % repo)
    opts = ["-o", "Dir::Etc::SourceList=%s" % (state / "sources.list"), "-o", "Dir::Etc::SourceParts=/nonexistent",
            "-o", "Dir::State::Lists=%s" % (state / "lists"), "-o", "Dir::Cache=%s" % (state / "cache")]
    policy = ["apt-cache"] + opts + ["policy", "--", "cuda-toolkit-%s" % DASH]
    before = subprocess.run(policy, capture_output=True, text=True).stdout
    assert hy.apt_lists_missing(before, ["cuda-toolkit-%s" % DASH], source="file:%s/" % repo) == \
        ["cuda-toolkit-%s" % DASH]
    subprocess.run(["apt-get"] + opts + ["update"], capture_output=True, text=True)
    after = subprocess.run(policy, capture_output=True, text=True).stdout
    assert hy.apt_lists_missing(after, ["cuda-toolkit-%s" % DASH], source="file:%s/" % repo) == [], after
