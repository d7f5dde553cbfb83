"""Host memory a HiCache pool may take, as SGLang 0.5.23 ``mem_cache/host_memory.py`` reckons it.

``available_host_memory_bytes``: MemAvailable (what psutil reports), bounded by the headroom of every memory cgroup
the process sits in (v2 ``memory.max``/``memory.high`` - (``memory.current`` - file pages); v1
``memory.limit_in_bytes`` - (``memory.usage_in_bytes`` - total_*_file)), walking up to the mount root; logs
``HiCache memory headroom: host X GiB, cgroup Y GiB`` when a limit was found. So a container's limit is its budget.

The fault ``SGLANG_SIM_FAULT=hicache_alloc_failure[:GB]`` makes MemAvailable read GB (default 1): what a host
whose memory something else holds looks like.

A memory cgroup the process sits in but cannot find mounted (a container without its cgroup filesystem) raises
``Cannot locate the process memory cgroup in mounted cgroup filesystems``; ``available_host_memory_bytes`` then
raises ``Cannot automatically size HiCache host memory; set --hicache-size explicitly ...`` for auto-sizing, and
for an explicit size logs ``Cannot determine cgroup memory headroom: ...`` and checks against MemAvailable
(``allow_cgroup_fallback``, ``pool_host/base.py host_memory_budget_bytes``). The fault
``SGLANG_SIM_FAULT=hicache_cgroup_unmounted`` makes every mount of the process's cgroups unfindable.
"""
import logging
import os

from sglang.srt import sim_config

logger = logging.getLogger(__name__)


def _meminfo_available():
    kind, arg, _ = sim_config.fault()
    if kind == "hicache_alloc_failure":
        return int(float(arg or 1) * 1e9)
    with open("/proc/meminfo") as fh:
        for line in fh:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return 0


def _memory_stat(directory):
    out = {}
    try:
        with open(os.path.join(directory, "memory.stat")) as fh:
            for line in fh:
                key, _, value = line.partition(" ")
                out[key] = int(value or 0)
    except OSError:
        pass
    return out


def _cgroup_memory_headroom():
    memberships = {}
    with open("/proc/self/cgroup") as fh:
        for line in fh:
            hid, controllers, path = line.rstrip("\n").split(":", 2)
            if hid == "0" and controllers == "":
                memberships["cgroup2"] = path
            elif "memory" in controllers.split(","):
                memberships["cgroup"] = path
    headroom = None
    resolved = False
    with open("/proc/self/mountinfo") as fh:
        mounts = fh.read().splitlines()
    if sim_config.fault()[0] == "hicache_cgroup_unmounted":
        mounts = [line for line in mounts if " - cgroup" not in line]
    for line in mounts:
        before, _, after = line.partition(" - ")
        fstype, _, options = (after.split() + ["", "", ""])[:3]
        if fstype not in memberships or (fstype == "cgroup" and "memory" not in options.split(",")):
            continue
        fields = before.split()
        root, mount = fields[3], fields[4]
        member = memberships[fstype]
        rel = os.path.relpath(member, root) if member.startswith(root) else member.lstrip("/")
        directory = os.path.normpath(os.path.join(mount, "" if rel == "." else rel))
        if not os.path.isdir(directory):
            continue
        resolved = True
        limits = ("memory.max", "memory.high") if fstype == "cgroup2" else ("memory.limit_in_bytes",)
        usage_name = "memory.current" if fstype == "cgroup2" else "memory.usage_in_bytes"
        cache_keys = ("active_file", "inactive_file") if fstype == "cgroup2" else (
            "total_active_file", "total_inactive_file")
        while True:
            for name in limits:
                try:
                    with open(os.path.join(directory, name)) as f:
                        value = f.read().strip()
                    if value == "max" or int(value) >= 1 << 62:
                        continue
                    with open(os.path.join(directory, usage_name)) as f:
                        usage = int(f.read())
                except (OSError, ValueError):
                    continue
                stat = _memory_stat(directory)
                usage = max(0, usage - sum(stat.get(k, 0) for k in cache_keys))
                remaining = max(0, int(value) - usage)
                headroom = remaining if headroom is None else min(headroom, remaining)
            if os.path.normpath(directory) == os.path.normpath(mount):
                break
            directory = os.path.dirname(directory)
    if memberships and not resolved:
        raise RuntimeError("Cannot locate the process memory cgroup in mounted cgroup filesystems")
    return headroom


def available_host_memory_bytes(*, allow_cgroup_fallback=False):
    available = _meminfo_available()
    try:
        headroom = _cgroup_memory_headroom()
    except (OSError, RuntimeError) as exc:
        if not allow_cgroup_fallback:
            raise RuntimeError(
                "Cannot automatically size HiCache host memory; "
                "set --hicache-size explicitly (GB per rank), leaving room "
                "for other memory use within the container limit."
            ) from exc
        logger.warning(
            "Cannot determine cgroup memory headroom: %s. Checking explicitly "
            "sized HiCache pools against host available memory; ensure all "
            "local ranks' pools fit within the container memory limit.",
            exc,
        )
        return available
    if headroom is not None:
        logger.info("HiCache memory headroom: host %.1f GiB, cgroup %.1f GiB", available / 1024**3, headroom / 1024**3)
        available = min(available, headroom)
    return available
