# -*- coding: utf-8 -*-
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: cuda_driver_preferences
short_description: The apt preferences that keep NVIDIA's CUDA repository from installing or upgrading the driver
description:
  - Takes a list of apt package names or glob patterns (the driver's packages) and returns the text of an
    apt_preferences(5) file for C(/etc/apt/preferences.d/).
  - Without a driver install (O(install_driver) false) one stanza pins every version of those packages that NVIDIA's
    CUDA repository carries to C(Pin-Priority -1), so no C(apt upgrade) or dependency can install or upgrade the
    host's driver from there (its userspace libraries ahead of the loaded kernel module end in "Failed to initialize
    NVML - Driver/library version mismatch" until a reboot).
  - With a driver install, the packages' versions of the branch O(branch) (C(Pin version <branch>.*)) get
    C(Pin-Priority 600) first, and the repository's other versions of them keep C(-1). apt gives a version the first
    specific pin that matches it, so only that branch can come from the repository. 600 is above the default 500, so
    the branch also wins over a newer branch of the same package name from another source (Ubuntu drops the branch
    from its driver package names from 590 on). It stays below 1000, so apt never downgrades an installed driver.
  - The repository is named by the O(origin) and O(label) of its Release file (C(Pin release o=NVIDIA,l=NVIDIA CUDA)),
    not by its URL's host. A mirror set through C(cuda_toolkit_repo_base_url) must serve NVIDIA's signed index as it
    is, because the source is Signed-By NVIDIA's key, so it keeps those fields. An C(origin) pin
    (C(developer.download.nvidia.com)) would miss every mirror and every C(file:) source.
  - An empty list gives a file with its header comment only, so no pin at all.
positional: install_driver, branch
options:
  _input:
    description:
      - apt package names or glob patterns (C(nvidia-*)); each one a word of lower-case letters, digits, C(+), C(-),
        C(.), C(:) and the glob characters C(*), C(?), C([), C(]).
      - A pattern made of glob characters only (C(*)) is refused, because it would pin the toolkit away too (and apt
        treats C(Package *) as a general pin that cannot take a version).
    type: list
    elements: str
    required: true
  install_driver:
    description: Whether the role installs the driver (C(cuda_toolkit_install_driver)); then O(branch) is required.
    type: bool
    default: false
  branch:
    description:
      - The driver branch a driver install is held to, its major version (C(580)). Only read when O(install_driver) is
        true; an empty or malformed branch is then refused.
    type: str
    default: ""
  origin:
    description: The C(Origin) field of the repository's Release file. NVIDIA's CUDA repositories say C(NVIDIA).
    type: str
    default: NVIDIA
  label:
    description: The C(Label) field of the repository's Release file. NVIDIA's CUDA repositories say C(NVIDIA CUDA).
    type: str
    default: NVIDIA CUDA
  keep:
    description:
      - Package names no pattern may match, such as the toolkit package the role installs. A pattern that matches one
        of them is refused (with apt's glob rules, C(fnmatch)).
    type: list
    elements: str
    default: []
"""

EXAMPLES = r"""
- name: Pin NVIDIA's repository's driver packages away (or to one branch)
  blackwell.sglang.rendered_file:
    dest: /etc/apt/preferences.d/cuda-driver-pin.pref
    content: >-
      {{ ['nvidia-*', 'libnvidia-*', 'cuda-drivers*'] | blackwell.sglang.cuda_driver_preferences(
         install_driver=false, branch='580', keep=['cuda-toolkit-13-0']) }}
    mode: "0644"
"""

RETURN = r"""
_value:
  description: The apt preferences file's text (ends with a newline).
  type: str
  sample: |
    # Managed by Ansible (blackwell.sglang.cuda_toolkit). The host's NVIDIA driver stays the operator's: ...

    Package: nvidia-* libnvidia-* cuda-drivers*
    Pin: release o=NVIDIA,l=NVIDIA CUDA
    Pin-Priority: -1
"""

import fnmatch
import re

from ansible.errors import AnsibleFilterError

# apt package names (Debian policy 5.6.1: lower-case letters, digits, + - .), an optional :arch, and apt's glob
# characters; no regular-expression pins (/.../) and no whitespace, which would split the Package: field.
_PATTERN = re.compile(r"^[a-z0-9+.:*?\[\]-]+$")
# A driver branch is the driver's major version: 570, 575, 580, 590 ...
_BRANCH = re.compile(r"^[1-9][0-9]{2,3}$")
# A Release field value as a pin names it: apt splits "release" pins on commas and the record on newlines.
_FIELD = re.compile(r"^[^,\n=]+$")

BRANCH_PRIORITY = 600


def _patterns(packages, keep):
    if isinstance(packages, str) or not isinstance(packages, (list, tuple)):
        raise AnsibleFilterError("cuda_driver_preferences expects a list of package names or patterns, got %r"
                                 % (packages,))
    out, problems = [], []
    for item in packages:
        pattern = str(item).strip() if item is not None else ""
        if not _PATTERN.fullmatch(pattern):
            problems.append("%r is not an apt package name or glob pattern (lower-case letters, digits, + - . : and "
                            "* ? [ ])" % (item,))
        elif not pattern.strip("*?[]"):
            problems.append("%r matches every package, the toolkit's too; list the driver's packages" % (item,))
        else:
            hits = [name for name in keep or [] if fnmatch.fnmatchcase(str(name), pattern)]
            if hits:
                problems.append("%r matches %s, which the role installs from the same repository"
                                % (pattern, ", ".join(hits)))
            elif pattern not in out:
                out.append(pattern)
    if problems:
        raise AnsibleFilterError("cuda_toolkit_driver_pin_packages: " + "; ".join(problems))
    return out


def _field(value, name):
    text = str(value if value is not None else "").strip()
    if not _FIELD.fullmatch(text):
        raise AnsibleFilterError("the CUDA repository's %s (%r) must be its Release file's %s field, one line with "
                                 "no comma or '='" % (name.lower(), value, name))
    return text


def cuda_driver_preferences(packages, install_driver=False, branch="", origin="NVIDIA", label="NVIDIA CUDA",
                            keep=()):
    """``patterns | cuda_driver_preferences(install_driver, branch, origin, label, keep)`` -> the apt preferences
    text (see DOCUMENTATION).

    :raises AnsibleFilterError: a malformed or all-matching pattern, a pattern matching a name in ``keep``, an empty
        or malformed ``branch`` while ``install_driver`` is true, or an origin/label a pin cannot name.
    """
    patterns = _patterns(packages, keep)
    release = "o=%s,l=%s" % (_field(origin, "Origin"), _field(label, "Label"))
    wanted = None
    if install_driver:
        wanted = str(branch if branch is not None else "").strip()
        if not _BRANCH.fullmatch(wanted):
            raise AnsibleFilterError(
                "cuda_toolkit_install_driver is true, so cuda_toolkit_driver_branch must name the driver branch the "
                "install is held to: its major version such as 580 (CUDA 13.0 needs 580 or newer), got %r" % (branch,))
    lines = [
        "# Managed by Ansible (blackwell.sglang.cuda_toolkit). The host's NVIDIA driver stays the operator's: NVIDIA's",
        "# CUDA repository (Release file: Origin %s, Label %s; at NVIDIA or a mirror) also carries the driver, and"
        % (origin, label),
        "# an apt upgrade that took its libraries ahead of the loaded kernel module would break NVML until a reboot.",
    ]
    if not patterns:
        lines.append("# cuda_toolkit_driver_pin_packages is empty: no pin.")
        return "\n".join(lines) + "\n"
    field = " ".join(patterns)
    if wanted:
        lines += [
            "# cuda_toolkit_install_driver: the driver is installed, held to branch %s (first matching pin wins)."
            % wanted,
            "",
            "Package: %s" % field,
            "Pin: version %s.*" % wanted,
            "Pin-Priority: %d" % BRANCH_PRIORITY,
        ]
    lines += [
        "",
        "Package: %s" % field,
        "Pin: release %s" % release,
        "Pin-Priority: -1",
    ]
    return "\n".join(lines) + "\n"


class FilterModule(object):
    def filters(self):
        return {"cuda_driver_preferences": cuda_driver_preferences}
