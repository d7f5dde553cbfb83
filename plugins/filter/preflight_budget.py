# -*- coding: utf-8 -*-
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters over ``host_capacity`` results: the HiCache host-memory budget, the /dev/shm floor and free disk.

``capacity | preflight_model_size(source_index, preferred=..., fallback_gb=...)`` -> the capacity whose ``model`` is
the weights' size preflight budgets with (module_utils/model_index.py ``model_weights``): an index of ``preferred``,
the source's (model_stage's plan read it on the node), the served model's, else the fallback figure, saying which.
``capacity | preflight_host_errors(options, gpu_facts=..., ...)`` -> list of messages (empty = fits): the weights
(with an EAGLE3 draft's) in the GPUs' mem-fraction-static, HiCache's host memory, /dev/shm.
``capacity | hicache_budget(options, gpu_facts=..., ...)`` -> the figures (module_utils/hicache.py).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


from ansible.errors import AnsibleFilterError

from ansible_collections.blackwell.sglang.plugins.plugin_utils._hicache import (
    GIB, device_weights_errors, hicache_budget as _budget, ranks_on_host, shm_errors)
from ansible_collections.blackwell.sglang.plugins.module_utils.staging.model_index import model_weights


def _weights(capacity, fallback_gb):
    """``capacity.model`` as preflight_model_size left it, else worked out from host_capacity's own reading."""
    model = capacity.get("model") or {}
    return model if "source" in model else model_weights(model, fallback_gb=fallback_gb)


def preflight_model_size(capacity, source_index=None, preferred=(), fallback_gb=0, draft_index=None):
    """The host_capacity result with ``model`` replaced by the figure preflight budgets disk and GPU memory with.

    ``draft_index``: model_source_index's answer for the EAGLE3 draft (model_stage's plan), whose weights load beside
    the model's: its size is added (``draft_bytes``) and named in ``source``; unreadable, it adds nothing (the draft
    check refuses a draft whose config.json cannot be read)."""
    if not isinstance(capacity, dict) or capacity.get("failed"):
        return capacity
    for name, value in (("source_index", source_index), ("draft_index", draft_index)):
        if value is not None and not isinstance(value, dict):
            raise AnsibleFilterError("preflight_model_size expects model_source_index's answer as a dict for %s, got %s"
                                     % (name, type(value).__name__))
    model = model_weights(capacity.get("model"), source_index, preferred or (), fallback_gb)
    draft_bytes = (draft_index or {}).get("total_size_bytes")
    if draft_bytes:
        model = dict(model, total_size_bytes=int(model["total_size_bytes"]) + int(draft_bytes),
                     draft_bytes=int(draft_bytes),
                     source="%s, + the EAGLE3 draft's %s (%s)" % (
                         model["source"], _gb(draft_bytes), draft_index.get("index") or "its index"))
    return dict(capacity, model=model)


def _gpu_memory_bytes(gpu_facts):
    """Smallest GPU's memory in bytes from a gpu_facts result (or its gpus list); None when unknown."""
    gpus = gpu_facts.get("gpus") if isinstance(gpu_facts, dict) else gpu_facts
    sizes = [g.get("memory_total_mib") for g in (gpus or []) if isinstance(g, dict) and g.get("memory_total_mib")]
    return min(sizes) * 1024 * 1024 if sizes else None


def hicache_budget(capacity, options, gpu_facts=None, fallback_weights_gb=0, mem_fraction_static=0.85,
                   allow_low_ratio=False):
    """Figures and errors of the HiCache budget; weights from ``capacity.model`` (preflight_model_size's figure, or
    host_capacity's index, else ``fallback_weights_gb``); ``weights_source`` says which."""
    if not isinstance(capacity, dict) or "memory" not in capacity:
        raise AnsibleFilterError("hicache_budget expects a host_capacity result, got %s" % type(capacity).__name__)
    if not isinstance(options, dict):
        raise AnsibleFilterError("hicache_budget expects the SGLang options as a dict, got %s" % type(options).__name__)
    model = _weights(capacity, fallback_weights_gb)
    weights, weights_source = model["total_size_bytes"], model["source"]
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
    model = _weights(capacity, fallback_weights_gb)
    errors.extend(device_weights_errors(options, _gpu_memory_bytes(gpu_facts), model["total_size_bytes"],
                                        mem_fraction_static, model["source"]))
    shm = capacity.get("shm") or {}
    errors.extend(shm_errors(shm.get("size_bytes"), ranks_on_host(options), float(shm_min_gib or 0) * GIB,
                             shm.get("path", "/dev/shm")))
    return errors


def _gb(value):
    return "%.1f GB" % (float(value) / 1e9)


def preflight_disk_problems(capacity, model_store, releases_dir, fallback_model_gb=0, release_gb=0,
                            release_exists=True):
    """Free disk for what this run will write: ``{"errors": [...], "warnings": [...]}``.

    * The model revision being staged (``capacity.staging``, from ``host_capacity``'s ``staged_revision``) needs its
      full size beside the current one (``capacity.model``: preflight_model_size's figure, else host_capacity's
      index, else ``fallback_model_gb``; a warning says when it is the fallback, and why), less what an interrupted
      run left in its ``.partial`` directory; nothing once it is complete.
    * A release: a first one (``release_exists`` false) certainly writes ``release_gb`` (torch, FlashInfer, SGLang
      in a venv); a rebuild only when the build inputs changed, which preflight cannot tell, so then it only warns.

    Needs on one filesystem (the disks' ``device``) add up. ``capacity.disks`` must hold both paths."""
    if not isinstance(capacity, dict) or "disks" not in capacity:
        raise AnsibleFilterError("preflight_disk_problems expects a host_capacity result")
    disks = {d["path"]: d for d in capacity.get("disks") or []}
    for path in (model_store, releases_dir):
        if path not in disks:
            raise AnsibleFilterError("preflight_disk_problems: host_capacity did not measure %s (pass it in paths)"
                                     % path)
    certain, maybe = {}, {}
    errors, warnings = [], []
    staging = capacity.get("staging") or {}
    model = _weights(capacity, fallback_model_gb)
    if staging and not staging.get("complete"):
        total = model["total_size_bytes"]
        need = max(int(total) - int(staging.get("partial_bytes") or 0), 0)
        revision = staging["path"].rstrip("/").rsplit("/", 1)[-1]
        certain.setdefault(disks[model_store]["device"], []).append(
            (need, "model revision %s (%s, %s still to stage)" % (revision, _gb(total), _gb(need))))
        if model.get("fallback"):
            warnings.append("the free disk for model revision %s is budgeted without its size: %s"
                            % (revision, model["source"]))
    release = float(release_gb or 0) * 1e9
    if release:
        bucket = maybe if release_exists else certain
        bucket.setdefault(disks[releases_dir]["device"], []).append(
            (release, "%s release in %s (~%s, preflight_release_size_gb)" % (
                "a rebuilt" if release_exists else "the first", releases_dir, _gb(release))))
    for device in sorted(set(certain) | set(maybe)):
        on = [disks[p] for p in (model_store, releases_dir) if disks[p]["device"] == device]
        disk = on[0]
        # Both paths on one filesystem: name both, so the user sees why the needs add up.
        where = "%s has" % disk["path"] if len(on) == 1 else "%s and %s (one filesystem) have" % (
            on[0]["path"], on[1]["path"])
        sure = sum(n for n, dummy in certain.get(device, []))
        what = [w for dummy, w in certain.get(device, [])]
        if sure > disk["free_bytes"]:
            errors.append("%s %s free (filesystem of %s); this run writes %s there: %s. Free space (old "
                          "revisions under the store, old releases) or grow the filesystem%s" % (
                              where, _gb(disk["free_bytes"]), disk["checked_path"], _gb(sure),
                              " + ".join(what), " (the revision's size: %s)" % model["source"]
                              if staging and not staging.get("complete") and device == disks[model_store]["device"]
                              else ""))
        elif sure + sum(n for n, dummy in maybe.get(device, [])) > disk["free_bytes"]:
            warnings.append("%s %s free (filesystem of %s): enough for %s, not also for %s if the build "
                            "inputs changed" % (where, _gb(disk["free_bytes"]), disk["checked_path"],
                                                " + ".join(what) or "this run's certain writes",
                                                " + ".join(w for dummy, w in maybe.get(device, []))))
    return {"errors": errors, "warnings": warnings}


class FilterModule(object):
    def filters(self):
        return {"hicache_budget": hicache_budget, "preflight_host_errors": preflight_host_errors,
                "preflight_disk_problems": preflight_disk_problems, "preflight_model_size": preflight_model_size}
