"""The HiCache host pool of one rank, as SGLang 0.5.23 ``mem_cache/pool_host/base.py`` and
``mem_cache/hicache_auto_size.py`` size and allocate it (MLA layout, Kimi-K2.5).

* ``--hicache-size G`` (GB, 10**9 bytes, per rank) -> G*1e9 // size_per_token tokens; else ``--hicache-ratio``
  x the device KV pool; with neither, the ratio defaults to 2.0 (1.2 in buffer_only mode) and auto-sizing lowers
  it until every rank's pool fits ``--hicache-host-memory-fraction`` (0.8) of the budget, less 5 % slack, logging
  ``HiCache auto-sizing: ratio ...``; nothing left after the reserve -> ``No host memory is left for HiCache ...``.
* The budget per rank is (``host_memory.available_host_memory_bytes`` - 10 GiB reserve) // ranks on the host.
* A pool no larger than the device pool logs the warning ``HiCache kv host pool (...) is smaller than the device
  pool ...`` (the real message's missing spaces included).
* A pool larger than the budget raises ``ValueError: Not enough host memory available. Requesting X GB but only
  have Y GB free. Please reduce the size of the hierarchical cache.``; else ``Allocating MLA hierarchical KV host
  pool: N tokens, X GB host memory.`` and the buffer is pinned (``SGLANG_SIM_HICACHE_PIN_GBPS``; with
  ``SGLANG_SIM_HICACHE_TOUCH=1`` the simulator really allocates and touches that much memory).
"""
import logging
import mmap
import time

from sglang.srt import sim_config
from sglang.srt.mem_cache.host_memory import available_host_memory_bytes

logger = logging.getLogger(__name__)

HICACHE_HOST_MEMORY_RESERVE_BYTES = 10 * (1024 ** 3)
_ALLOCATION_SLACK_FRACTION = 0.05
PAGE = 4096


def host_memory_budget_bytes(ranks_per_host, auto_size=False):
    """Auto-sizing needs the cgroup's headroom; an explicit size may fall back to MemAvailable."""
    return (available_host_memory_bytes(allow_cgroup_fallback=not auto_size) - HICACHE_HOST_MEMORY_RESERVE_BYTES) \
        // max(ranks_per_host, 1)


class MLATokenToKVPoolHost:
    def __init__(self, cfg, device_capacity_tokens, size_per_token, on_progress=None):
        self.size_per_token = size_per_token
        self.device_capacity_tokens = device_capacity_tokens
        ranks = cfg["ranks_per_host"]
        size_gb = int(cfg.get("hicache_size") or 0)
        ratio = cfg.get("hicache_ratio")
        budget = None
        if size_gb > 0:
            self.size = int(size_gb * 1e9 // size_per_token)
        else:
            requested = ratio if ratio is not None else (
                1.2 if cfg.get("hicache_host_memory_mode") == "buffer_only" else 2.0)
            fraction = cfg.get("hicache_host_memory_fraction")
            if ratio is None and fraction is not None:  # auto-sizing (hicache_auto_size.py auto_size_hicache)
                device_bytes = device_capacity_tokens * size_per_token
                budget = int(host_memory_budget_bytes(ranks, auto_size=True) * fraction)
                new_ratio = min(requested, budget * (1 - _ALLOCATION_SLACK_FRACTION) / device_bytes)
                if new_ratio <= 0:
                    raise ValueError("No host memory is left for HiCache after the 10 GiB reserve; "
                                     "set --hicache-ratio or --hicache-size explicitly.")
                logger.info("HiCache auto-sizing: ratio %.3f -> %.3f; %.1f GiB host memory per rank "
                            "(fraction %.2f, %d ranks on this host), host pools %.1f GiB.",
                            requested, new_ratio, budget / 1024**3, fraction, ranks,
                            device_bytes * new_ratio / 1024**3)
                requested = new_ratio
            self.size = int(device_capacity_tokens * requested)
        self.size += 1  # the padding page (page_size 1): size = (size // page_size + 1) * page_size
        self.on_progress = on_progress
        self.buffer = None
        self._allocate_host_buffer(ranks, budget)

    def _allocate_host_buffer(self, ranks, budget):
        if self.size <= self.device_capacity_tokens:
            logger.warning("HiCache %s host pool (%d tokens) is smaller than the device pool (%d tokens);"
                           "L2 cache effectiveness is reduced."
                           "Consider increasing --hicache-ratio (or --hicache-size) for higher L2 cache hit rate.",
                           "kv", self.size, self.device_capacity_tokens)
        requested_bytes = self.size * self.size_per_token
        available_bytes = budget if budget is not None else host_memory_budget_bytes(ranks)
        if requested_bytes > available_bytes:
            raise ValueError(f"Not enough host memory available. Requesting "
                             f"{requested_bytes / 1e9:.2f} GB but only have "
                             f"{available_bytes / 1e9:.2f} GB free. Please reduce the "
                             f"size of the hierarchical cache.")
        logger.info("Allocating %s hierarchical KV host pool: %d tokens, %.2f GB host memory.",
                    "MLA", self.size, requested_bytes / 1e9)
        self.requested_bytes = requested_bytes
        self._pin(requested_bytes)

    def release(self):
        """cudaHostUnregister on the way out (0.5.23 run_scheduler_process's finally, after ShutdownReq): unpinning a
        large buffer takes time too, as long as pinning it did."""
        nbytes = getattr(self, "requested_bytes", 0) or 0
        rate = sim_config.get_float("SGLANG_SIM_HICACHE_PIN_GBPS") * 1e9
        if nbytes and rate > 0:
            time.sleep(nbytes / rate)
        self.buffer = None

    def _pin(self, nbytes):
        """cudaHostRegister of the whole buffer: time proportional to its size, memory really taken when
        SGLANG_SIM_HICACHE_TOUCH is set."""
        rate = sim_config.get_float("SGLANG_SIM_HICACHE_PIN_GBPS") * 1e9
        seconds = nbytes / rate if rate > 0 else 0.0
        touch = sim_config.get("SGLANG_SIM_HICACHE_TOUCH") not in ("", "0", "false")
        if touch and nbytes > 0:
            self.buffer = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        steps = max(1, int(seconds / 0.1))
        chunk = -(-nbytes // steps) if nbytes else 0
        done = 0
        tic = time.time()
        for i in range(steps):
            if self.buffer is not None:
                for offset in range(done, min(done + chunk, nbytes), PAGE):
                    self.buffer[offset] = 1
            done = min(done + chunk, nbytes)
            if self.on_progress:
                self.on_progress(done)
            wait = tic + seconds * (i + 1) / steps - time.time()
            if wait > 0:
                time.sleep(wait)
