"""Simulator knobs: environment variables, or a JSON file (env wins).

The JSON file is ``$SGLANG_SIM_CONFIG`` or, when that is unset, ``/etc/sglang-sim/config.json`` if
it exists; ``SGLANG_SIM_CONFIG=""`` means no file. Its keys are the variable names, e.g. ``{"SGLANG_SIM_FAULT": "crash_at_shard:3"}``.
"""
import json
import os

DEFAULT_CONFIG_PATH = "/etc/sglang-sim/config.json"

DEFAULTS = {
    "SGLANG_SIM_FAULT": "",
    "SGLANG_SIM_SHARD_DELAY_S": "0.01",
    "SGLANG_SIM_INIT_S": "0.05",
    # The EagerRunner's kernel warmup before any graph: silent, the GPU busy and its memory flat.
    "SGLANG_SIM_EAGER_WARMUP_S": "0.2",
    # CUDA graph capture (prefill a third, decode the rest); minutes on real hardware.
    "SGLANG_SIM_CAPTURE_S": "0.5",
    # cudaHostRegister of the HiCache host pool, and whether the pool is really allocated and touched (it is, as on a
    # real host: the memory the options ask for is gone from the host until the server exits).
    "SGLANG_SIM_HICACHE_PIN_GBPS": "2",
    "SGLANG_SIM_HICACHE_TOUCH": "1",
    "SGLANG_SIM_WARMUP_S": "0.5",
    # Real /health does a 1-token generation and polls for it after asyncio.sleep(1): >= 1 s.
    "SGLANG_SIM_HEALTH_LATENCY_S": "1.0",
    # One request: tokenising, the scheduler's share (this long at least, plus SGLANG_SIM_TOKEN_S per output
    # token), handing the result back.
    "SGLANG_SIM_TOKENIZE_S": "0.002",
    "SGLANG_SIM_REQUEST_S": "0.05",
    "SGLANG_SIM_TOKEN_S": "0.0",
    # The performance model (srt/sim_perf.py, each figure's source there): a decode step of the running batch,
    # EAGLE-3's draft steps and acceptance, and what speculation keeps of the prefix cache. A step takes at least
    # SGLANG_SIM_TOKEN_S.
    "SGLANG_SIM_STEP_BASE_MS": "16.0",
    "SGLANG_SIM_STEP_PER_TOKEN_MS": "0.3",
    "SGLANG_SIM_DRAFT_STEP_MS": "2.0",
    "SGLANG_SIM_DRAFT_PER_TOKEN_MS": "0.05",
    "SGLANG_SIM_SPEC_ACCEPTANCE": "0.62",
    "SGLANG_SIM_SPEC_CACHE_HIT_FRACTION": "0.0",
    # Model time to wall time: 1 runs as fast as the model says (benchmarks); the smoke and load tests run faster.
    "SGLANG_SIM_TIME_SCALE": "0.05",
    "SGLANG_SIM_DETOKENIZE_S": "0.002",
    # Prefill throughput (prompt tokens per second, the prompt counted as 4 characters a token): a prefill holds the
    # scheduler, so a long prompt stops every other request's tokens and /health's; 0 = instant. A sandbox figure
    # (Kimi-K2.5 on 8 PCIe GPUs prefills thousands of tokens a second), not the wheel's.
    "SGLANG_SIM_PREFILL_TOKENS_PER_S": "8000",
    # Reasoning tokens the fake model produces before its answer (kimi_k2 thinks by default).
    "SGLANG_SIM_THINK_TOKENS": "600",
    # The scheduler logs decode stats (and so updates /metrics) every decode_log_interval (40) steps.
    "SGLANG_SIM_DECODE_LOG_S": "1.0",
    # Where each scheduler publishes its phase and GPU memory for the GPU stand-in (sim_state.py).
    "SGLANG_SIM_STATE_DIR": "/tmp/sglang-sim",
    # 0.5.23's parent polls each scheduler pipe with poll(timeout=5.0) before checking liveness.
    "SGLANG_SIM_READY_POLL_S": "5.0",
    # 0.5.23's sigterm_watchdog checks every 5 s.
    "SGLANG_SIM_DRAIN_POLL_S": "5.0",
    "SGLANG_SIM_FAULT_DELAY_S": "1.0",
    # Every decode step and prefill of this release takes this many times as long (a slower release, for the
    # benchmark gate: tests/sandbox/patches/0004-slower-release.patch).
    "SGLANG_SIM_RELEASE_SLOWDOWN": "1.0",
    # Where a simulated kernel's lines go (host_oom_at_shard): "logger" (the node's journal, SYSLOG_IDENTIFIER=kernel)
    # or "" (nowhere: a controller's test must not write kernel lines into its own journal).
    "SGLANG_SIM_KERNEL_LOG": "",
    "SGLANG_SIM_PROGRESS_FORMAT": "",  # "" (0.5.23) or "legacy" (0.5.8/0.5.9 one line per shard)
    "SGLANG_SIM_SAFETENSORS_STYLE": "",  # "" (safetensors >= 0.6 messages) or "legacy"
    "SGLANG_SIM_GPU_MEM_GB": "94.97",  # RTX PRO 6000 Blackwell as torch reports it
    # The cross-node rendezvous's waits (srt/distributed.py), as a fraction of the real timeout (--dist-timeout,
    # else torch's 600 s); the messages still give the real seconds.
    "SGLANG_SIM_DIST_TIMEOUT_SCALE": "1.0",
    # This fraction of the chat requests that arrive after the ready line fail in the handler (a release that loads,
    # passes /health and the smoke, then fails under real traffic: the rolling redeploy's canary soak,
    # tests/sandbox/patches/0005-errors-after-ready.patch). Every round(1/fraction)-th request after ready, counted
    # per server, so a short smoke does not meet one; 0 = none.
    "SGLANG_SIM_ERROR_FRACTION": "0",
    "SGLANG_HEALTH_CHECK_TIMEOUT": "20",
    "SGLANG_LOG_MS": "",
}

_cache = None


def _file_values():
    path = os.environ.get("SGLANG_SIM_CONFIG")
    if path is None and os.path.exists(DEFAULT_CONFIG_PATH):
        path = DEFAULT_CONFIG_PATH
    if not path:
        return {}
    with open(path, encoding="utf-8") as fh:
        data = json.load(fh)
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a JSON object, got {type(data).__name__}")
    return {str(k): str(v) for k, v in data.items()}


def get(name):
    global _cache
    if name in os.environ:
        return os.environ[name]
    if _cache is None:
        _cache = _file_values()
    if name in _cache:
        return _cache[name]
    return DEFAULTS.get(name, "")


def get_float(name):
    return float(get(name))


def fault():
    """Return (kind, arg, rest) of SGLANG_SIM_FAULT, e.g. ("crash_at_shard", "3", "")."""
    raw = get("SGLANG_SIM_FAULT").strip()
    if not raw:
        return ("", "", "")
    parts = raw.split(":")
    kind = parts[0]
    arg = parts[1] if len(parts) > 1 else ""
    rest = ":".join(parts[2:])
    return (kind, arg, rest)


def export_env():
    """Environment for children: file values made explicit so every process agrees."""
    env = dict(os.environ)
    for key in set(DEFAULTS) | set(_cache or {}):
        env.setdefault(key, get(key))
    return env
