# -*- coding: utf-8 -*-
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""HiCache host-memory budget and /dev/shm floor: pure arithmetic (stdlib only).

What SGLang 0.5.23 does (read in the real package, sglang/srt/mem_cache/pool_host/base.py and
hicache_auto_size.py, arg_groups/hicache_hook.py):

* ``--hicache-size`` is GB (10**9 bytes) **per rank**; it overrides ``--hicache-ratio``.
* ``--hicache-ratio`` is host pool / device KV pool, per rank. When neither is given, the ratio
  defaults to 2.0 (1.2 in ``buffer_only`` mode) and **auto-sizing** shrinks it until all ranks' pools
  fit in ``--hicache-host-memory-fraction`` (0.8) x the budget, less 5 % slack.
* Each rank's budget is ``(MemAvailable bounded by the cgroup limit - 10 GiB) / ranks on the host``;
  a pool larger than that fails at allocation with "Not enough host memory available" after the weights
  have loaded, and every rank allocates its own pool: so the whole host needs ranks x per-rank pool.
* A host pool not larger than the device pool only warns ("L2 cache effectiveness is reduced"); we
  refuse it unless the operator says it is intended.

The device KV pool per rank is not known before SGLang has loaded the weights; it is **estimated** as
``GPU memory x mem-fraction-static - weights / (tp x pp)``: SGLang reserves mem-fraction-static of
the GPU for weights plus KV pool, and each rank holds its share of the weights (Kimi-K2.5 INT4 ~547 GB
over 8 ranks ~68 GB of a 102.6 GB RTX PRO 6000 at 0.85 -> ~19 GB of KV per rank). Activations and CUDA
graphs live outside the static fraction, so the estimate is an upper bound when the fraction is right.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

GB = 1000 ** 3
GIB = 1024 ** 3
# SGLang's HICACHE_HOST_MEMORY_RESERVE_BYTES: kept free for everything else on the host.
RESERVE_BYTES = 10 * GIB
DEFAULT_RATIO = 2.0
BUFFER_ONLY_RATIO = 1.2
DEFAULT_HOST_MEMORY_FRACTION = 0.8
AUTO_SIZE_SLACK = 0.05


def gb(value_bytes):
    """Bytes -> GB (10**9) rounded to 0.1, for messages."""
    return round(float(value_bytes) / GB, 1)


def _opt(options, name, default=None):
    """Option ``name`` from a dict keyed by dashed or underscored names."""
    for key in (name, name.replace("-", "_"), "--" + name):
        if key in options and options[key] is not None:
            return options[key]
    return default


def ranks_on_host(options):
    """Scheduler ranks on one host: tp x pp / nnodes (each rank holds one HiCache host pool)."""
    tp = int(_opt(options, "tp-size", 1))
    pp = int(_opt(options, "pp-size", 1))
    nnodes = max(int(_opt(options, "nnodes", 1)), 1)
    return max((tp * pp) // nnodes, 1)


def device_kv_bytes_per_rank(gpu_memory_bytes, mem_fraction_static, weights_bytes, ranks_total):
    """Estimated device KV pool per rank: GPU x fraction - weights / ranks (never below 0)."""
    share = float(weights_bytes) / max(int(ranks_total), 1)
    return max(float(gpu_memory_bytes) * float(mem_fraction_static) - share, 0.0)


def device_weights_errors(options, gpu_memory_bytes, weights_bytes, mem_fraction_static=0.85, weights_text=""):
    """The weights (with an EAGLE3 draft's: it loads before the KV pool is sized, srt/managers/scheduler.py
    init_model_worker) must leave room for a device KV pool in mem-fraction-static of each GPU; every rank holds
    its share. HiCache's ratio mode says the same in its own terms (``hicache_budget``), so it is left to it there."""
    if not gpu_memory_bytes or not weights_bytes:
        return []
    if _opt(options, "enable-hierarchical-cache", False) and _opt(options, "hicache-ratio") is not None \
            and float(_opt(options, "hicache-size", 0) or 0) <= 0:
        return []
    ranks = int(_opt(options, "tp-size", 1)) * int(_opt(options, "pp-size", 1))
    fraction = float(_opt(options, "mem-fraction-static", mem_fraction_static))
    if device_kv_bytes_per_rank(gpu_memory_bytes, fraction, weights_bytes, ranks) > 0:
        return []
    return ["the weights do not fit the GPUs: %.1f GB%s / %d ranks = %.1f GB per GPU, but mem-fraction-static %.2f of "
            "a %.1f GB GPU is %.1f GB and must hold the KV pool too; SGLang would fail after loading them. Use more "
            "ranks, a higher --mem-fraction-static or a smaller draft"
            % (gb(weights_bytes), " (%s)" % weights_text if weights_text else "", ranks, gb(weights_bytes / ranks),
               fraction, gb(gpu_memory_bytes), gb(gpu_memory_bytes * fraction))]


def available_bytes(mem_available_bytes, cgroup_limit_bytes=None, cgroup_usage_bytes=None, reclaimable_bytes=0,
                    reclaimable_text="the unit being replaced"):
    """(bytes SGLang may plan with before the reserve, text saying where the figure comes from).

    ``reclaimable_bytes`` is memory held by the service this deploy replaces (its HiCache pool): it is in use now
    and free when that unit restarts, so it counts as available for its replacement."""
    own = int(reclaimable_bytes or 0)
    avail = int(mem_available_bytes) + own
    source = "MemAvailable %.1f GB" % gb(mem_available_bytes)
    if cgroup_limit_bytes:
        room = int(cgroup_limit_bytes) - int(cgroup_usage_bytes or 0) + own
        if room < avail:
            avail = max(room, 0)
            source = "cgroup memory limit %.1f GB - usage %.1f GB = %.1f GB, below MemAvailable %.1f GB" % (
                gb(cgroup_limit_bytes), gb(cgroup_usage_bytes or 0), gb(avail - own), gb(mem_available_bytes))
    if own:
        source += " + %.1f GB held by %s (freed when it restarts)" % (gb(own), reclaimable_text)
    return avail, source


def hicache_budget(options, mem_available_bytes, gpu_memory_bytes=None, weights_bytes=None,
                   mem_fraction_static=0.85, cgroup_limit_bytes=None, cgroup_usage_bytes=None,
                   allow_low_ratio=False, reserve_bytes=RESERVE_BYTES, reclaimable_bytes=0,
                   reclaimable_text="the unit being replaced"):
    """Check SGLang options against the host's memory; every problem at once.

    :param options: SGLang options (dashed or underscored names): enable-hierarchical-cache, hicache-size,
        hicache-ratio, hicache-host-memory-mode, hicache-host-memory-fraction, tp-size, pp-size, nnodes,
        mem-fraction-static (wins over ``mem_fraction_static``), disable-radix-cache.
    :param mem_available_bytes: MemAvailable of the host.
    :param gpu_memory_bytes: memory of one GPU (smallest); None when unknown (no ratio estimate then).
    :param weights_bytes: model weights (index ``metadata.total_size``); None counts as 0.
    :param reclaimable_bytes: memory the replaced unit holds and frees on restart (``available_bytes``).
    :returns: dict ``errors`` (list of str), ``enabled``, ``mode`` (size/ratio/auto), ``ranks``,
        ``per_rank_bytes`` (planned host pool per rank, None when unknown), ``needed_bytes``,
        ``available_bytes`` (after the reserve), ``device_kv_bytes_per_rank`` (estimate or None),
        ``ratio`` (effective, when known), ``summary`` (one line with the figures).
    """
    errors = []
    result = {"errors": errors, "enabled": bool(_opt(options, "enable-hierarchical-cache", False)),
              "mode": None, "ranks": ranks_on_host(options), "per_rank_bytes": None, "needed_bytes": None,
              "available_bytes": None, "device_kv_bytes_per_rank": None, "ratio": None, "summary": "HiCache off"}
    if not result["enabled"]:
        return result
    if _opt(options, "disable-radix-cache", False):
        errors.append("--enable-hierarchical-cache cannot be combined with --disable-radix-cache "
                      "(HiCache extends the radix cache); drop one of them")

    ranks = result["ranks"]
    tp = int(_opt(options, "tp-size", 1))
    pp = int(_opt(options, "pp-size", 1))
    fraction_static = float(_opt(options, "mem-fraction-static", mem_fraction_static))
    size_gb = float(_opt(options, "hicache-size", 0) or 0)
    ratio_opt = _opt(options, "hicache-ratio")
    mode_mem = _opt(options, "hicache-host-memory-mode", "cache")
    host_fraction = float(_opt(options, "hicache-host-memory-fraction", DEFAULT_HOST_MEMORY_FRACTION))

    raw_avail, source = available_bytes(mem_available_bytes, cgroup_limit_bytes, cgroup_usage_bytes,
                                        reclaimable_bytes, reclaimable_text)
    avail = raw_avail - int(reserve_bytes)
    result["available_bytes"] = avail
    avail_text = "%.1f GB available (%s - %d GiB reserve)" % (gb(avail), source, int(reserve_bytes) // GIB)

    kv = None
    kv_text = ""
    if gpu_memory_bytes:
        kv = device_kv_bytes_per_rank(gpu_memory_bytes, fraction_static, weights_bytes or 0, tp * pp)
        result["device_kv_bytes_per_rank"] = kv
        kv_text = ("device KV pool ~%.1f GB per rank = GPU %.1f GB x mem-fraction-static %.2f - weights %.1f GB / "
                   "%d ranks" % (gb(kv), gb(gpu_memory_bytes), fraction_static, gb(weights_bytes or 0), tp * pp))

    if size_gb > 0:
        result["mode"] = "size"
        per_rank = size_gb * GB
        how = "--hicache-size %g GB per rank" % size_gb
    elif ratio_opt is not None:
        pool = _ratio_pool(result, errors, float(ratio_opt), kv, kv_text, allow_low_ratio)
        if pool is None:
            return result
        per_rank, how = pool
    else:
        return _auto_sized(result, errors, mode_mem, host_fraction, avail, avail_text, kv, kv_text, allow_low_ratio)

    needed = per_rank * ranks
    result.update(per_rank_bytes=per_rank, needed_bytes=needed)
    result["summary"] = "HiCache needs %.1f GB host RAM (%d ranks x %.1f GB), %s" % (
        gb(needed), ranks, gb(per_rank), avail_text)
    if needed > avail:
        errors.append("HiCache needs %.1f GB host RAM (%d ranks x %.1f GB from %s), %s; SGLang would fail with "
                      "'Not enough host memory available' after loading the weights. Lower --hicache-size/"
                      "--hicache-ratio to at most %.1f GB per rank or add host RAM"
                      % (gb(needed), ranks, gb(per_rank), how, avail_text, max(gb(avail / ranks), 0.0)))
    return result


def _ratio_pool(result, errors, ratio, kv, kv_text, allow_low_ratio):
    """--hicache-ratio: (per-rank bytes, how they were sized), or None when the device KV pool is unknown (the
    result's summary then says the budget was not checked)."""
    result["mode"] = "ratio"
    result["ratio"] = ratio
    if ratio <= 1 and not allow_low_ratio:
        errors.append("--hicache-ratio %g makes the host pool no larger than the device pool, so HiCache adds "
                      "no capacity (SGLang only warns); use a ratio > 1 (default 2.0) or --hicache-size, or set "
                      "preflight_hicache_allow_low_ratio if this is intended" % ratio)
    if kv is None:
        result["summary"] = "HiCache ratio %g; device KV pool unknown (no GPU memory), budget not checked" % ratio
        return None
    if kv <= 0:
        errors.append("no room for a device KV pool: %s; the weights do not fit at this mem-fraction-static, "
                      "use more ranks or a higher --mem-fraction-static" % kv_text)
    return ratio * kv, "--hicache-ratio %g x %s" % (ratio, kv_text)


def _auto_sized(result, errors, mode_mem, host_fraction, avail, avail_text, kv, kv_text, allow_low_ratio):
    """Neither --hicache-size nor --hicache-ratio: SGLang sizes the pool within its host-memory budget; the result."""
    ranks = result["ranks"]
    result["mode"] = "auto"
    requested = BUFFER_ONLY_RATIO if mode_mem == "buffer_only" else DEFAULT_RATIO
    budget_per_rank = host_fraction * avail / ranks
    if avail <= 0:
        errors.append("HiCache auto-sizing has no host memory left after the 10 GiB reserve: %s; SGLang will "
                      "refuse to start. Add host RAM, lower other usage, or disable HiCache" % avail_text)
        result["summary"] = "HiCache auto: no budget"
        return result
    if kv is None:
        result["summary"] = ("HiCache auto-sized by SGLang within %.1f GB per rank; device KV pool unknown"
                             % gb(budget_per_rank))
        return result
    ratio = requested if kv <= 0 else min(requested, budget_per_rank * (1 - AUTO_SIZE_SLACK) / kv)
    result["ratio"] = ratio
    per_rank = ratio * kv
    if ratio <= 1 and not allow_low_ratio:
        errors.append(
            "HiCache auto-sizing would cut the ratio from %g to %.2f (host pool no larger than the device pool): "
            "budget %.2f x %s / %d ranks = %.1f GB per rank, %s; add host RAM, set --hicache-size explicitly, "
            "or set preflight_hicache_allow_low_ratio if this is intended"
            % (requested, ratio, host_fraction, avail_text, ranks, gb(budget_per_rank), kv_text))
    result.update(per_rank_bytes=per_rank, needed_bytes=per_rank * ranks)
    result["summary"] = ("HiCache auto: ratio %.2f, %.1f GB host RAM (%d ranks x %.1f GB), %s"
                         % (ratio, gb(per_rank * ranks), ranks, gb(per_rank), avail_text))
    return result


def shm_errors(shm_size_bytes, ranks, floor_bytes, shm_path="/dev/shm"):
    """/dev/shm must hold NCCL's shared-memory transport and torch IPC when more than one rank runs here."""
    if int(ranks) <= 1 or not floor_bytes:
        return []
    if shm_size_bytes is None:
        return ["%s is not mounted (no tmpfs); %d ranks need it for NCCL and torch IPC: mount a tmpfs of at least "
                "%.1f GiB" % (shm_path, int(ranks), float(floor_bytes) / GIB)]
    if int(shm_size_bytes) < int(floor_bytes):
        return ["%s is %.1f GiB, below the %.1f GiB floor for %d ranks (NCCL shared-memory transport and torch IPC; "
                "a small /dev/shm fails mid-run with 'failed to extend /dev/shm'); enlarge it (containers: "
                "--shm-size or --ipc=host; hosts: the tmpfs size= option) or lower preflight_shm_min_gib"
                % (shm_path, float(shm_size_bytes) / GIB, float(floor_bytes) / GIB, int(ranks))]
    return []
