# -*- coding: utf-8 -*-
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters for build releases: what identifies one, the pins it is built with, how it is installed.

``release_fingerprint``
    a dict of everything that makes a release different (refs, patch sha256s, CUDA version, arch list, Python,
    constraints) -> the first characters of its sha256: the release directory's name.
``build_constraints``
    the inventory's pins + the pins the role needs -> ``constraints.txt`` for ``pip -c`` (a name pinned twice
    differently is refused).
``installed_stack``
    ``pip freeze`` of a release + its constraints.txt -> {distribution: installed version} for every pinned one and
    sglang (what release.json records; null for one that is not installed).
``release_install_command``
    the release, its installer (uv or pip), index arguments and requirements -> the one shell command that installs
    torch (from its own index when one is set), then FlashInfer and SGLang, then FlashInfer's AOT kernels
    (flashinfer-jit-cache, from their own index, when asked for) into the release venv, held to constraints.txt,
    logging to build.log (every word quoted here, not in a template).
``wheelhouse_download_commands``
    what a release installs (``sglang_build_pins``) -> the ``pip download`` runs that fill a fleet's wheelhouse with it
    (torch from its own index when set, the closure held to constraints.txt with the installer, FlashInfer's AOT
    package from its index), each an argv list.
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex

from ansible.errors import AnsibleFilterError
from ansible_collections.blackwell.sglang.plugins.filter.build_host import priority_prefix

INSTALLERS = ("uv", "pip")


def release_fingerprint(inputs: dict, length: int = 16) -> str:
    """Return the hex sha256 (first ``length`` chars) of ``inputs`` as canonical JSON.

    ``inputs`` holds everything that makes a release different: refs, patch sha256s, CUDA version,
    arch list, Python version, constraints. Key order does not matter; any value change does.
    """
    if not isinstance(inputs, dict):
        raise AnsibleFilterError("release_fingerprint expects a dict of inputs")
    blob = json.dumps(inputs, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[: int(length)]


_PIN = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?\s*(==|===|<=|>=|~=|!=|<|>)\s*\S+")


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def build_constraints(pins, required=None) -> str:
    """Return constraints.txt (one pin a line, for ``pip -c``) from ``pins`` plus ``required`` pins.

    ``pins`` is the inventory's list (``sglang_build_constraints``: "sglang-kernel==0.4.10", ...);
    ``required`` are pins the role itself needs (torch==<sglang_build_torch_version>) so SGLang's own
    dependencies cannot swap torch. A name pinned twice differently is an error naming both pins; a line
    that is not "name<op>version" is an error. Output order: required first, then pins, duplicates dropped.
    """
    lines: list[str] = []
    seen: dict[str, str] = {}
    for pin in list(required or []) + list(pins or []):
        pin = str(pin).strip()
        match = _PIN.match(pin)
        if not match:
            raise AnsibleFilterError(f"constraint {pin!r} is not a pin such as 'torch==2.14.1'")
        name = _canonical(match.group(1))
        if name in seen:
            if seen[name] != pin:
                raise AnsibleFilterError(f"{match.group(1)} is pinned twice: {seen[name]!r} and {pin!r}")
            continue
        seen[name] = pin
        lines.append(pin)
    return "".join(line + "\n" for line in lines)


def installed_stack(freeze: str, constraints: str, also=("sglang",)) -> dict:
    """Return {name: version} from ``pip freeze`` output for the distributions pinned in ``constraints`` (the text of
    constraints.txt) and those in ``also``, named as pinned; a direct-reference line ("name @ file:///...") gives its
    reference, a distribution not installed gives None."""
    installed = {}
    for line in str(freeze or "").splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if " @ " in line:
            name, _sep, ref = line.partition(" @ ")
            installed[_canonical(name.strip())] = ref.strip()
        elif "==" in line:
            name, _sep, version = line.partition("==")
            installed[_canonical(name.strip())] = version.strip()
    names = []
    for pin in str(constraints or "").splitlines():
        match = _PIN.match(pin)
        if match:
            names.append(match.group(1))
    names += [name for name in also or () if _canonical(name) not in {_canonical(n) for n in names}]
    return {name: installed.get(_canonical(name)) for name in names}


def _install_argv(spec: dict, index_args, requirements) -> list:
    """One installer run into the release venv, held to its constraints.txt."""
    release = spec["release"]
    python = "%s/venv/bin/python" % release
    constraints = ["-c", "%s/constraints.txt" % release]
    if spec["installer"] == "pip":
        return [python, "-m", "pip", "install", "--disable-pip-version-check", *index_args, *constraints, *requirements]
    # uv: no user or project uv.toml changes what a release holds (--no-config); its cache lies on the releases'
    # filesystem so every file a release shares with another is a hardlink into it, not a copy.
    argv = [spec["uv"], "pip", "install", "--no-config", "--python", python, "--cache-dir", spec["cache_dir"],
            "--link-mode", "hardlink"]
    if spec.get("compile_bytecode", True):
        argv.append("--compile-bytecode")
    return argv + [*index_args, *constraints, *requirements]


def release_install_command(spec: dict) -> str:
    """The shell command that installs a release's packages and logs to ``<release>/build.log``.

    ``spec``: ``release`` (its directory, holding venv/ and constraints.txt), ``installer`` (``uv`` or ``pip``),
    ``uv`` (uv's path) and ``cache_dir`` (uv's cache, on the releases' filesystem) and ``compile_bytecode`` for uv,
    ``pip_args`` (index or wheelhouse arguments, e.g. ``[--no-index, --find-links, DIR]``), ``requirements`` (FlashInfer's
    then SGLang's), ``torch`` (``version``, ``index_url``: when set torch is installed first from that index alone, with
    ``pip_args`` of its own), ``jit_cache`` (``requirement``, ``pip_args``: when a requirement is set it is installed
    last, without dependencies, from those index arguments, else the release's) and ``nice`` (0-19). Both installers
    take the same index arguments."""
    installer = spec.get("installer")
    if installer not in INSTALLERS:
        raise AnsibleFilterError("release_install_command: installer must be one of %s, got %r"
                                 % (", ".join(INSTALLERS), installer))
    missing = [key for key in ("release", "requirements") + (("uv", "cache_dir") if installer == "uv" else ())
               if not spec.get(key)]
    if missing:
        raise AnsibleFilterError("release_install_command: %s missing for the %s installer" % (", ".join(missing), installer))
    prefix = priority_prefix(spec.get("nice", 0))
    torch = spec.get("torch") or {}
    runs = []
    if torch.get("index_url"):
        runs.append(_install_argv(spec, ["--index-url", torch["index_url"], *(torch.get("pip_args") or [])],
                                  ["torch==%s" % torch["version"]]))
    runs.append(_install_argv(spec, list(spec.get("pip_args") or []), [r for r in spec["requirements"] if r]))
    jit_cache = spec.get("jit_cache") or {}
    if jit_cache.get("requirement"):
        # flashinfer-jit-cache declares no dependencies; --no-deps keeps its index from answering for anything else.
        runs.append(_install_argv(spec, ["--no-deps", *(jit_cache.get("pip_args") or spec.get("pip_args") or [])],
                                  [jit_cache["requirement"]]))
    body = " && ".join(prefix + shlex.join(str(word) for word in argv) for argv in runs)
    return "{ set -o pipefail; %s; } > %s 2>&1" % (body, shlex.quote("%s/build.log" % spec["release"]))


def wheelhouse_download_commands(pins: dict, dest: str, pip: str, constraints: str, index_args=None,
                                 jit_cache_args=None) -> list:
    """The ``pip download`` runs (argv lists) that put into ``dest`` every wheel a release installs.

    ``pins``: ``sglang_build_pins`` (``requirements``, ``torch`` {version, index_url, pip_args}, ``jit_cache``
    {requirement}, ``installer``); ``pip``: the pip to run (``<venv>/bin/pip``); ``constraints``: the path of the
    release's constraints.txt on that host; ``index_args``: where the wheelhouse downloads from (``[]``: the index pip
    is configured with; the nodes' own ``pip_args`` point at the wheelhouse, so they are not used); ``jit_cache_args``:
    the index of FlashInfer's AOT package (FlashInfer's own). Binary wheels only, as the nodes install them. Torch comes
    first from its own index when one is set; FlashInfer's AOT package last, without dependencies."""
    missing = [key for key in ("requirements",) if not (pins or {}).get(key)]
    if missing or not dest or not pip or not constraints:
        raise AnsibleFilterError("wheelhouse_download_commands needs pins with requirements, a destination, a pip and "
                                 "a constraints file")
    if (pins or {}).get("method", "wheel") != "wheel":
        raise AnsibleFilterError("a wheelhouse holds the wheel method's packages; sglang_build_method is %r"
                                 % pins.get("method"))
    base = [pip, "download", "--disable-pip-version-check", "--only-binary=:all:", "--dest", dest]
    index = [str(arg) for arg in (index_args or [])]
    runs = []
    torch = pins.get("torch") or {}
    if torch.get("index_url"):
        runs.append(base + ["--index-url", torch["index_url"], *(torch.get("pip_args") or []), "-c", constraints,
                            "torch==%s" % torch["version"]])
    requirements = [str(r) for r in pins["requirements"] if r] + ([pins["installer"]] if pins.get("installer") else [])
    runs.append(base + index + ["-c", constraints] + requirements)
    jit_cache = (pins.get("jit_cache") or {}).get("requirement")
    if jit_cache:
        runs.append(base + ["--no-deps", *[str(arg) for arg in (jit_cache_args or index)], jit_cache])
    return runs


class FilterModule:
    def filters(self):
        return {
            "release_fingerprint": release_fingerprint,
            "build_constraints": build_constraints,
            "installed_stack": installed_stack,
            "release_install_command": release_install_command,
            "wheelhouse_download_commands": wheelhouse_download_commands,
        }
