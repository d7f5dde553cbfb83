# -*- coding: utf-8 -*-
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters for the environment the SGLang unit runs with (and the release probe runs with, as the unit would).

``sglang_unit_environment``
    the service's runtime facts + a release directory -> the unit's environment (dict, in file order).
``sglang_environment_file``
    an environment dict -> the text of a systemd ``EnvironmentFile=`` (``KEY=value`` lines), refused when a value
    cannot be written there.

What the unit's processes need from it, read in the pinned wheels:

* FlashInfer 0.7.2 JIT-compiles a kernel at its first use by running a bare ``ninja`` (``flashinfer/jit/cpp_ext.py``,
  ``run_ninja``); the ``ninja`` wheel (a requirement of flashinfer-python) puts it in the release venv's ``bin/``.
  systemd's default ``PATH`` for a service has no venv: ``PATH`` starts with ``<release>/venv/bin``.
* FlashInfer finds nvcc through ``CUDA_HOME`` (or ``CUDA_PATH``), else ``which nvcc``, else ``/usr/local/cuda``
  (``get_cuda_path``): ``CUDA_HOME`` is the toolkit the release was built for, and its ``bin`` is on ``PATH`` too.
* Triton 3.8.0 compiles its launcher with ``CC`` or the ``gcc`` on ``PATH`` (``triton/runtime/build.py``).
* FlashInfer's JIT cache is ``$FLASHINFER_WORKSPACE_BASE/.cache/flashinfer/<version>/<archs>/cached_ops``
  (``flashinfer/jit/env.py``): ``<release>/flashinfer``, the release's own, which its build warms before the release
  goes live (a rollback finds the kernels of the release it returns to). ``<archs>`` comes from
  ``FLASHINFER_CUDA_ARCH_LIST`` when set, else from the GPUs torch sees (``flashinfer/compilation_context.py``): it is
  set, to what the release was warmed for, so the server looks where the warm compiled without asking the GPUs, and
  the warm (on a node whose GPUs serve) never touches them. FlashInfer resolves its output paths
  (``cpp_ext.generate_ninja_build_for_op``), so the cache reached through the ``current`` link is the same cache.
"""

from __future__ import annotations

import re

from ansible.errors import AnsibleFilterError

# systemd's default PATH for system services (systemd.exec(5), "Environment variables in spawned processes").
SYSTEMD_DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def sglang_unit_environment(runtime, release):
    """The unit's environment for ``release`` (see the module docstring)."""
    if not isinstance(runtime, dict):
        raise AnsibleFilterError("sglang_unit_environment: the runtime facts must be a mapping, got %r" % (runtime,))
    missing = [k for k in ("home", "cuda_home") if not str(runtime.get(k) or "").strip()]
    if missing or not str(release or "").strip():
        raise AnsibleFilterError("sglang_unit_environment: needs %s"
                                 % ", ".join(missing + ([] if str(release or "").strip() else ["release"])))
    home = str(runtime["home"]).rstrip("/")
    cuda_home = str(runtime["cuda_home"]).rstrip("/")
    env = {
        "HOME": home,
        "HF_HOME": home + "/cache/huggingface",
        "XDG_CACHE_HOME": home + "/cache",
        "TRITON_CACHE_DIR": home + "/cache/triton",
        "FLASHINFER_WORKSPACE_BASE": str(release).rstrip("/") + "/flashinfer",
        "CUDA_HOME": cuda_home,
        "PATH": "%s/venv/bin:%s/bin:%s" % (str(release).rstrip("/"), cuda_home, SYSTEMD_DEFAULT_PATH),
    }
    arch_list = str(runtime.get("flashinfer_arch_list") or "").strip()
    if arch_list:
        env["FLASHINFER_CUDA_ARCH_LIST"] = arch_list
    ifname = str(runtime.get("socket_ifname") or "").strip()
    if ifname:
        env["NCCL_SOCKET_IFNAME"] = ifname
        env["GLOO_SOCKET_IFNAME"] = ifname
    health_timeout = str(runtime.get("health_check_timeout_s") or "").strip()
    if health_timeout:
        env["SGLANG_HEALTH_CHECK_TIMEOUT"] = health_timeout
    extra = runtime.get("environment") or {}
    if not isinstance(extra, dict):
        raise AnsibleFilterError("sglang_service_environment must be a mapping of variable names to values, got %r"
                                 % (extra,))
    if health_timeout and "SGLANG_HEALTH_CHECK_TIMEOUT" in extra:
        raise AnsibleFilterError("sglang_service_environment sets SGLANG_HEALTH_CHECK_TIMEOUT; set "
                                 "deployment_health_check_timeout_s instead (every /health probe derives its timeout "
                                 "from it)")
    for key in sorted(extra):
        env[str(key)] = "" if extra[key] is None else str(extra[key])
    return env


def sglang_environment_file(environment):
    """``KEY=value`` lines for systemd's ``EnvironmentFile=``; a name systemd would not take, or a value with a line
    break (which would start a new assignment), is refused naming the variable."""
    if not isinstance(environment, dict):
        raise AnsibleFilterError("sglang_environment_file: expected a mapping, got %r" % (environment,))
    problems, lines = [], []
    for key, value in environment.items():
        text = "" if value is None else str(value)
        if not _NAME.match(str(key)):
            problems.append("%r is not a variable name systemd accepts" % (key,))
        elif "\n" in text or "\r" in text:
            problems.append("%s has a line break in its value" % key)
        else:
            lines.append("%s=%s" % (key, text))
    if problems:
        raise AnsibleFilterError("the unit's environment cannot be written: " + "; ".join(problems))
    return "".join(line + "\n" for line in lines)


class FilterModule:
    def filters(self):
        return {
            "sglang_unit_environment": sglang_unit_environment,
            "sglang_environment_file": sglang_environment_file,
        }
