# -*- coding: utf-8 -*-
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters over ``host_capacity`` results: the HiCache host-memory budget and the /dev/shm floor.

``capacity | preflight_host_errors(options, gpu_facts=..., ...)`` -> list of messages (empty = fits).
``capacity | hicache_budget(options, gpu_facts=..., ...)`` -> the figures (module_utils/hicache.py).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible.errors import AnsibleFilterError

try:
    from ansible.module_utils.hicache import GIB, hicache_budget as _budget, ranks_on_host, shm_errors
except ImportError:
    # A filter runs on the controller, where module_utils is only served to modules: load the file beside us.
    import importlib.util

    _path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "module_utils", "hicache.py")
    _spec = importlib.util.spec_from_file_location("_sglang_hicache", _path)
    _mod = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(_mod)
    GIB, _budget, ranks_on_host, shm_errors = _mod.GIB, _mod.hicache_budget, _mod.ranks_on_host, _mod.shm_errors


def _gpu_memory_bytes(gpu_facts):
    """Smallest GPU's memory in bytes from a gpu_facts result (or its gpus list); None when unknown."""
    gpus = gpu_facts.get("gpus") if isinstance(gpu_facts, dict) else gpu_facts
    sizes = [g.get("memory_total_mib") for g in (gpus or []) if isinstance(g, dict) and g.get("memory_total_mib")]
    return min(sizes) * 1024 * 1024 if sizes else None


def hicache_budget(capacity, options, gpu_facts=None, fallback_weights_gb=0, mem_fraction_static=0.85,
                   allow_low_ratio=False):
    """Figures and errors of the HiCache budget; weights from the model index when host_capacity found one."""
    if not isinstance(capacity, dict) or "memory" not in capacity:
        raise AnsibleFilterError("hicache_budget expects a host_capacity result, got %s" % type(capacity).__name__)
    if not isinstance(options, dict):
        raise AnsibleFilterError("hicache_budget expects the SGLang options as a dict, got %s" % type(options).__name__)
    model = capacity.get("model") or {}
    weights = model.get("total_size_bytes")
    weights_source = "index %s" % model.get("index") if weights else "fallback %s GB" % fallback_weights_gb
    if not weights:
        weights = float(fallback_weights_gb or 0) * 1000 ** 3
    cgroup = capacity.get("cgroup") or {}
    own = capacity.get("own_unit") or {}
    result = _budget(options, capacity["memory"]["available_bytes"], gpu_memory_bytes=_gpu_memory_bytes(gpu_facts),
                     weights_bytes=weights, mem_fraction_static=mem_fraction_static,
                     cgroup_limit_bytes=cgroup.get("limit_bytes"), cgroup_usage_bytes=cgroup.get("usage_bytes"),
                     allow_low_ratio=bool(allow_low_ratio), reclaimable_bytes=own.get("memory_bytes") or 0,
                     reclaimable_text=own.get("name") or "the unit being replaced")
    result["weights_source"] = weights_source
    return result


def preflight_host_errors(capacity, options, gpu_facts=None, fallback_weights_gb=0, mem_fraction_static=0.85,
                          allow_low_ratio=False, shm_min_gib=8):
    """Every host-side problem for these SGLang options: HiCache budget and /dev/shm floor."""
    if isinstance(capacity, dict) and capacity.get("failed"):
        return ["could not read host capacity: %s" % capacity.get("msg", "host_capacity failed")]
    errors = list(hicache_budget(capacity, options, gpu_facts, fallback_weights_gb, mem_fraction_static,
                                 allow_low_ratio)["errors"])
    shm = capacity.get("shm") or {}
    errors.extend(shm_errors(shm.get("size_bytes"), ranks_on_host(options), float(shm_min_gib or 0) * GIB,
                             shm.get("path", "/dev/shm")))
    return errors


class FilterModule(object):
    def filters(self):
        return {"hicache_budget": hicache_budget, "preflight_host_errors": preflight_host_errors}
