# -*- coding: utf-8 -*-
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Host hygiene (issue 59): what the host's own package tools may do to a node that serves, as files they read.

``unattended_upgrades_hold``
    apt glob patterns (the driver's packages, the CUDA toolkit's) -> an apt.conf file whose
    ``Unattended-Upgrade::Package-Blacklist`` entries hold them in every archive (the distribution's and NVIDIA's).
``needrestart_overrides``
    systemd unit names -> a needrestart conf.d file that never restarts them (``$nrconf{override_rc}`` 0).
``apt_lists_missing``
    ``apt-cache policy`` output + packages -> those apt's lists hold no installable version of (from a given source):
    a refresh that failed, or one a cache age check skipped, leaves them so.

Each sidecar (plugins/filter/<name>.yml) documents its filter.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible.errors import AnsibleFilterError

# apt package names (Debian policy 5.6.1: lower-case letters, digits, + - .), an optional :arch, and apt's glob
# characters (the same words cuda_driver_preferences accepts for the driver pin).
_GLOB = re.compile(r"^[a-z0-9+.:*?\[\]-]+$")
# A systemd unit name (systemd.unit(5): ASCII letters, digits, ":", "-", "_", ".", "\" and "@" for templates).
_UNIT = re.compile(r"^[A-Za-z0-9:_.\\@-]+$")


def _glob_regex(pattern):
    """apt glob -> the Python regular expression unattended-upgrades matches the same names with.

    unattended-upgrades 2.9 (Debian 12 and Ubuntu 24.04) tests each entry with ``re.match(entry, name)``
    (``is_pkgname_in_blacklist``): anchored at the start only, so a pattern that ends in ``*`` is the prefix before
    it, and any other gets ``$``. ``.`` and ``+`` are literal in a package name, so they are escaped."""
    out, i = [], 0
    while i < len(pattern):
        char = pattern[i]
        if char == "*":
            out.append(".*")
        elif char == "?":
            out.append(".")
        elif char == "[":
            end = pattern.find("]", i + 1)
            if end < 0:
                raise AnsibleFilterError("unattended_upgrades_hold: %r has a [ without its ]" % pattern)
            out.append(pattern[i:end + 1])
            i = end
        elif char in ".+":
            out.append("\\" + char)
        else:
            out.append(char)
        i += 1
    regex = "".join(out)
    return regex[:-2] if regex.endswith(".*") else regex + "$"


def unattended_upgrades_hold(packages, owner="blackwell.sglang", why=""):
    """``patterns | unattended_upgrades_hold(owner, why)`` -> the apt.conf text (see the sidecar)."""
    if isinstance(packages, str) or not isinstance(packages, (list, tuple)):
        raise AnsibleFilterError("unattended_upgrades_hold expects a list of package names or apt globs, got %r"
                                 % (packages,))
    regexes, problems = [], []
    for item in packages:
        pattern = str(item if item is not None else "").strip()
        if not _GLOB.fullmatch(pattern):
            problems.append("%r is not an apt package name or glob (lower-case letters, digits, + - . : and * ? [ ])"
                            % (item,))
        elif not pattern.strip("*?[]"):
            problems.append("%r matches every package: unattended-upgrades would upgrade nothing" % (item,))
        else:
            regex = _glob_regex(pattern)
            if regex not in regexes:
                regexes.append(regex)
    if problems:
        raise AnsibleFilterError("unattended_upgrades_hold: " + "; ".join(problems))
    lines = ["// Managed by Ansible (%s). unattended-upgrades never upgrades these packages, from any archive (the"
             % owner,
             "// distribution's and NVIDIA's CUDA repository): entries are Python regular expressions, matched at the",
             "// start of the package name (re.match). Upgrade them in a maintenance window: drain the node first."]
    if why:
        lines += ["// " + line for line in str(why).strip().splitlines()]
    if not regexes:
        return "\n".join(lines + ["// Nothing to hold."]) + "\n"
    lines.append("Unattended-Upgrade::Package-Blacklist {")
    lines += ['    "%s";' % regex for regex in regexes]
    lines.append("};")
    return "\n".join(lines) + "\n"


def _perl_quotemeta(text):
    """Perl's quotemeta: every character but [A-Za-z0-9_] backslashed (no interpolation, no metacharacter left)."""
    return "".join(c if (c.isascii() and (c.isalnum() or c == "_")) else "\\" + c for c in text)


def needrestart_overrides(units, owner="blackwell.sglang"):
    """``units | needrestart_overrides(owner)`` -> the needrestart conf.d text (see the sidecar)."""
    if isinstance(units, str) or not isinstance(units, (list, tuple)):
        raise AnsibleFilterError("needrestart_overrides expects a list of systemd unit names, got %r" % (units,))
    names, problems = [], []
    for item in units:
        unit = str(item if item is not None else "").strip()
        if not unit:
            continue
        if not _UNIT.fullmatch(unit):
            problems.append("%r is not a systemd unit name" % (item,))
        elif unit not in names:
            names.append(unit)
    if problems:
        raise AnsibleFilterError("needrestart_overrides: " + "; ".join(problems))
    lines = [
        "# Managed by Ansible (%s). needrestart (installed by default on Ubuntu 24.04, run by apt after every" % owner,
        "# upgrade, unattended-upgrades' included) restarts the services whose libraries changed. These units leave",
        "# the router and drain first (the deploy's stop); an unannounced restart would cut their requests. 0 = never",
        "# restart them, only list them (needrestart's override_rc: the first matching regex, in lexical order).",
    ]
    for unit in names:
        base = unit[:-len(".service")] if unit.endswith(".service") else unit
        # needrestart names a service "<name>.service", or "<name>" for an init script (nginx has one on Debian).
        lines.append("$nrconf{override_rc}{qr(^%s(\\.service)?$)} = 0;" % _perl_quotemeta(base))
    return "\n".join(lines) + "\n"


_PACKAGE_LINE = re.compile(r"^(\S+):$")
_VERSION_LINE = re.compile(r"^ {5}(?:\*\*\* )?(\S+) (-?\d+)$")
_SOURCE_LINE = re.compile(r"^ {8}(-?\d+) (\S+)(.*)$")


def _policy(stdout):
    """``apt-cache policy`` output -> {package: [(version, [source URL or path, ...]), ...]}."""
    out, package, version = {}, None, None
    for line in str(stdout or "").splitlines():
        match = _PACKAGE_LINE.match(line)
        if match:
            package, version = match.group(1).split(":", 1)[0], None
            out[package] = []
            continue
        if package is None:
            continue
        match = _VERSION_LINE.match(line)
        if match:
            version = (match.group(1), [])
            out[package].append(version)
            continue
        match = _SOURCE_LINE.match(line)
        if match and version is not None:
            version[1].append(match.group(2))
    return out


def apt_lists_missing(stdout, packages, source="", version=""):
    """The ``packages`` apt's lists hold no version of (see the sidecar), in the given order."""
    if isinstance(packages, str) or not isinstance(packages, (list, tuple)):
        raise AnsibleFilterError("apt_lists_missing expects a list of package names, got %r" % (packages,))
    known = _policy(stdout)
    want_source = str(source or "").rstrip("/")
    missing = []
    for name in packages:
        versions = known.get(str(name).split("=", 1)[0].split(":", 1)[0], [])
        ok = False
        for ver, sources in versions:
            if version and ver != str(version):
                continue
            # /var/lib/dpkg/status is what is installed, not a list apt fetched
            fetched = [s for s in sources if s != "/var/lib/dpkg/status"]
            if any(s.rstrip("/") == want_source for s in fetched) if want_source else fetched:
                ok = True
                break
        if not ok:
            missing.append(str(name))
    return missing


class FilterModule(object):
    def filters(self):
        return {
            "unattended_upgrades_hold": unattended_upgrades_hold,
            "needrestart_overrides": needrestart_overrides,
            "apt_lists_missing": apt_lists_missing,
        }
