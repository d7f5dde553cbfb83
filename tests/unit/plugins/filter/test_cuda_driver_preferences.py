"""The cuda_driver_preferences filter: the apt preferences that keep NVIDIA's CUDA repository away from the host's
driver (roles/cuda_toolkit). apt's own reading of its output is tested against the sandbox's stand-in repository in
tests/standins/test_cuda_driver_pin.py."""

import fnmatch
from pathlib import Path

import pytest
import yaml
from ansible.errors import AnsibleFilterError

from ansible_collections.blackwell.sglang.plugins.filter.cuda_driver_preferences import (
    BRANCH_PRIORITY,
    FilterModule,
    cuda_driver_preferences as prefs,
)

ROOT = Path(__file__).resolve().parents[4]
DEFAULTS = yaml.safe_load((ROOT / "roles" / "cuda_toolkit" / "defaults" / "main.yml").read_text())
PATTERNS = DEFAULTS["cuda_toolkit_driver_pin_packages"]

# Driver packages of NVIDIA's CUDA repositories: debian12 (Debian's names), ubuntu2404 (Ubuntu's, with the branch in
# the name up to 580 and without from 590 on: NVIDIA driver installation guide, "Recent updates").
DRIVER_NAMES = (
    "nvidia-open", "nvidia-open-580", "nvidia-driver", "nvidia-driver-cuda", "nvidia-driver-libs",
    "nvidia-kernel-open-dkms", "nvidia-kernel-dkms", "nvidia-kernel-support", "nvidia-smi", "nvidia-persistenced",
    "nvidia-settings", "nvidia-modprobe", "nvidia-fabricmanager", "nvidia-fabricmanager-580", "nvidia-imex",
    "nvidia-driver-580-open", "nvidia-dkms-580-open", "nvidia-dkms-open", "nvidia-utils-580",
    "nvidia-kernel-common-580", "nvidia-compute-utils-580", "nvidia-firmware-580", "nvidia-headless-580-open",
    "libnvidia-compute-580", "libnvidia-compute", "libnvidia-gl-580", "libnvidia-cfg1-580", "libnvidia-decode-580",
    "libnvidia-encode-580", "libnvidia-extra-580", "libnvidia-fbc1-580", "libnvidia-gpucomp-580", "libnvidia-common",
    "libnvidia-ml1", "libnvidia-ptxjitcompiler1", "libnvidia-cfg1", "libnvidia-nscq", "libnvsdm",
    "libcuda1", "libcudadebugger1", "libnvcuvid1", "libnvoptix1", "libxnvctrl0",
    "cuda-drivers", "cuda-drivers-580", "cuda-drivers-fabricmanager-580",
    "firmware-nvidia-gsp", "xserver-xorg-video-nvidia", "xserver-xorg-video-nvidia-580", "libglx-nvidia0",
    "libegl-nvidia0", "libgles-nvidia2", "libgl1-nvidia-glvnd-glx",
)
# What the role installs from the same repository, and its neighbours a careless pattern would catch.
TOOLKIT_NAMES = (
    "cuda-toolkit-13-0", "cuda-driver-dev-13-0", "cuda-keyring", "cuda-nvcc-13-0", "cuda-cudart-13-0",
    "cuda-cudart-dev-13-0", "cuda-crt-13-0", "cuda-nvvm-13-0", "cuda-cccl-13-0", "cuda-cuobjdump-13-0",
    "cuda-toolkit-13-0-config-common", "cuda-toolkit-config-common", "cuda-compat-13-0", "cuda-13-0",
    "libnvjitlink-13-0", "libnvjpeg-13-0", "libnpp-13-0", "libcublas-13-0", "libcudnn9-cuda-13", "libnccl2",
    "nsight-systems-2025.3.2", "nsight-compute-2025.3.1", "g++",
)
KEEP = ["cuda-toolkit-13-0", "cuda-driver-dev-13-0", "cuda-keyring"]


def _stanzas(text):
    body = "\n".join(line for line in text.splitlines() if not line.startswith("#"))
    return [dict(line.split(": ", 1) for line in block.strip().splitlines()) for block in body.split("\n\n")
            if block.strip()]


def _matches(name):
    return any(fnmatch.fnmatchcase(name, p) for p in PATTERNS)


def test_registered_under_its_name():
    assert FilterModule().filters() == {"cuda_driver_preferences": prefs}


def test_default_patterns_cover_the_driver_and_spare_the_toolkit():
    assert [n for n in DRIVER_NAMES if not _matches(n)] == []
    assert [n for n in TOOLKIT_NAMES if _matches(n)] == []


def test_without_a_driver_install_every_version_from_nvidias_repository_is_pinned_away():
    text = prefs(PATTERNS, keep=KEEP)
    assert text.endswith("\n") and text.startswith("# Managed by Ansible (blackwell.sglang.cuda_toolkit).")
    assert _stanzas(text) == [{"Package": " ".join(PATTERNS), "Pin": "release o=NVIDIA,l=NVIDIA CUDA",
                               "Pin-Priority": "-1"}]
    # the branch is not read without a driver install, even an unusable one
    assert prefs(PATTERNS, install_driver=False, branch="") == text
    assert prefs(PATTERNS, install_driver=False, branch="58x") == text


def test_a_driver_install_allows_its_branch_first_and_pins_the_rest_away():
    text = prefs(["nvidia-*", "cuda-drivers*"], install_driver=True, branch="580")
    assert _stanzas(text) == [
        {"Package": "nvidia-* cuda-drivers*", "Pin": "version 580.*", "Pin-Priority": str(BRANCH_PRIORITY)},
        {"Package": "nvidia-* cuda-drivers*", "Pin": "release o=NVIDIA,l=NVIDIA CUDA", "Pin-Priority": "-1"},
    ]
    assert 500 < BRANCH_PRIORITY < 1000  # over the default, never a downgrade
    assert "held to branch 580" in text
    # YAML may hand the branch over as a number; surrounding blanks are dropped
    assert prefs(["nvidia-*", "cuda-drivers*"], install_driver=True, branch=580) == text
    assert prefs(["nvidia-*", "cuda-drivers*"], install_driver=True, branch=" 580 ") == text
    assert "Pin: version 1000.*" in prefs(["nvidia-*"], install_driver=True, branch="1000")


@pytest.mark.parametrize("branch", ["", None, "  ", "580.95", "580.95.05", "r580", "58", "0580", "580*", "latest",
                                    "580\nPin-Priority: 1001"])
def test_a_driver_install_refuses_an_empty_or_malformed_branch(branch):
    with pytest.raises(AnsibleFilterError, match=r"cuda_toolkit_driver_branch must name the driver branch .* such "
                                                 r"as 580"):
        prefs(PATTERNS, install_driver=True, branch=branch)


def test_the_repository_is_named_by_its_release_fields():
    text = prefs(["nvidia-*"], origin="Example Mirror", label="CUDA mirror")
    assert _stanzas(text)[0]["Pin"] == "release o=Example Mirror,l=CUDA mirror"
    for origin, label in (("NVIDIA,a=stable", "NVIDIA CUDA"), ("NVIDIA", ""), ("NVIDIA", "l=x"),
                          ("NVIDIA\nPackage: *", "NVIDIA CUDA")):
        with pytest.raises(AnsibleFilterError, match="Release file's"):
            prefs(["nvidia-*"], origin=origin, label=label)


def test_patterns_are_checked_deduplicated_and_kept_in_order():
    assert _stanzas(prefs(["nvidia-*", "libcuda1", "nvidia-*", "libnvidia-*:amd64"]))[0]["Package"] == (
        "nvidia-* libcuda1 libnvidia-*:amd64")
    with pytest.raises(AnsibleFilterError) as err:
        prefs(["nvidia-*", "NVIDIA-open", "nvidia open", "/nvidia/", "", "*", "*?"])
    message = str(err.value)
    assert message.startswith("cuda_toolkit_driver_pin_packages: ")
    for bad in ("'NVIDIA-open'", "'nvidia open'", "'/nvidia/'", "''"):
        assert "%s is not an apt package name or glob pattern" % bad in message
    assert "'*' matches every package, the toolkit's too" in message and "'*?' matches every package" in message
    for not_a_list in ("nvidia-*", None, {"nvidia-*": 1}):
        with pytest.raises(AnsibleFilterError, match="expects a list"):
            prefs(not_a_list)


def test_a_pattern_that_would_pin_the_toolkit_away_is_refused():
    with pytest.raises(AnsibleFilterError, match=r"'cuda-driver\*' matches cuda-driver-dev-13-0, which the role "
                                                 r"installs"):
        prefs(["nvidia-*", "cuda-driver*"], keep=KEEP)
    with pytest.raises(AnsibleFilterError, match=r"'cuda-\*' matches cuda-toolkit-13-0, cuda-driver-dev-13-0, "
                                                 r"cuda-keyring"):
        prefs(["cuda-*"], keep=KEEP)
    assert "cuda-drivers*" in prefs(["cuda-drivers*"], keep=KEEP)


def test_an_empty_list_pins_nothing():
    text = prefs([], install_driver=True, branch="580")
    assert _stanzas(text) == [] and "cuda_toolkit_driver_pin_packages is empty: no pin." in text
    assert all(line.startswith("#") for line in text.splitlines())
