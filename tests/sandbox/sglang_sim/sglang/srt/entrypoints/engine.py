"""Parent side of start-up, as SGLang 0.5.23 ``entrypoints/engine.py`` Engine._launch_subprocesses does it.

Order: ``configure_logger`` (``--log-level``), ``server_args={...}`` (a dict: ``_server_args_for_logging`` ->
``redact_watermark_secrets(server_args.resolved_dict())``), the launch-phase SIGQUIT handler (``Received sigquit
from a child process. It usually means the child failed.`` then ``kill_process_tree`` of itself), the scheduler
processes (spawned: until a child has imported sglang its cmdline is the interpreter's), the detokenizer, the
TokenizerManager (loads the processor, see ``managers/tokenizer_manager.py``), then ``_wait_for_scheduler_ready``
(each pipe polled for 5 s, every child checked for early death: ``Rank N scheduler died during initialization (exit
code: C). ...``), then the SubprocessWatchdog (``utils/watchdog.py``). The config is read before any of this
(``launch_server.run_server`` -> ``server_args.resolve_once``), so a broken config.json fails with no log line
before the traceback.
"""
import json
import logging
import os
import select
import signal
import subprocess
import sys
import threading
import uuid

from sglang.srt import sim_config
from sglang.srt.managers.tokenizer_manager import TokenizerManager
from sglang.srt.utils import configure_logger, kill_process_tree
from sglang.srt.utils.common import launch_dummy_health_check_server
from sglang.srt.utils.watchdog import SubprocessWatchdog

logger = logging.getLogger(__name__)

_PKG_PARENT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
_BOOTSTRAP = b"from sglang.srt.managers.scheduler import main\nmain()\n"
# Fields _server_args_for_logging redacts (server_args.py redact_watermark_secrets)
_REDACTED = ("watermark_key", "watermark_key_b")


def get_config(model_path):
    """What transformers' AutoConfig does with config.json (resolution reads it before anything is logged)."""
    path = os.path.join(model_path, "config.json")
    if not os.path.isfile(path):
        raise OSError(f"{model_path} does not appear to have a file named config.json. Checkout "
                      f"'https://huggingface.co/{model_path}/tree/None' for available files.")
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise OSError(f"It looks like the config file at '{path}' is not a valid JSON file.")


class Child:
    def __init__(self, role, title, log_prefix, cfg):
        ready_r, ready_w = os.pipe()
        ctl_r, ctl_w = os.pipe()
        env = sim_config.export_env()
        # argv[0] is the process title; the interpreter then needs its home and our package path.
        env["PYTHONHOME"] = sys.base_prefix if sys.base_prefix == sys.base_exec_prefix else \
            f"{sys.base_prefix}:{sys.base_exec_prefix}"
        env["PYTHONPATH"] = _PKG_PARENT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        env["SGLANG_SIM_CHILD"] = json.dumps(dict(cfg, role=role, title=title, log_prefix=log_prefix,
                                                  ready_fd=ready_w, ctl_fd=ctl_r))
        self.proc = subprocess.Popen([title], executable=sys.executable, stdin=subprocess.PIPE, env=env,
                                     pass_fds=(ready_w, ctl_r))
        self.proc.stdin.write(_BOOTSTRAP)
        self.proc.stdin.close()
        os.close(ready_w)
        os.close(ctl_r)
        self.ready_fd = ready_r
        self.ctl = os.fdopen(ctl_w, "w")
        self._ctl_lock = threading.Lock()
        self.pid = self.proc.pid
        self.rank = cfg.get("tp_rank", 0)

    def exitcode(self):
        return self.proc.poll()

    def is_alive(self):
        return self.proc.poll() is None

    def tell(self, word):
        with self._ctl_lock:  # request threads tell concurrently
            try:
                self.ctl.write(word + "\n")
                self.ctl.flush()
            except (BrokenPipeError, ValueError):
                pass

    def shutdown(self):
        self.tell("shutdown")


def _scheduler_died_error(rank, child):
    try:
        child.proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass
    return RuntimeError(
        f"Rank {rank} scheduler died during initialization "
        f"(exit code: {child.exitcode()}). "
        f"If exit code is -9 (SIGKILL), a common cause is the OS OOM killer. "
        f"Run `dmesg -T | grep -i oom` to check.")


def wait_for_scheduler_ready(children):
    poll_s = sim_config.get_float("SGLANG_SIM_READY_POLL_S")
    infos = []
    for i, child in enumerate(children):
        while True:
            r, _, _ = select.select([child.ready_fd], [], [], poll_s)
            if r:
                data = b""
                while not data.endswith(b"\n"):
                    chunk = os.read(child.ready_fd, 4096)
                    if not chunk:
                        raise _scheduler_died_error(i, child)
                    data += chunk
                info = json.loads(data)
                if info["status"] != "ready":
                    raise RuntimeError("Initialization failed. Please see the error messages above.")
                infos.append(info)
                break
            for j, other in enumerate(children):
                if not other.is_alive():
                    raise _scheduler_died_error(j, other)
    return infos


def launch_phase_sigquit_handler(signum, frame):
    logger.error("Received sigquit from a child process. It usually means the child failed.")
    kill_process_tree(os.getpid())


def server_args_for_logging(args):
    """``server_args.resolved_dict()`` with the watermark secrets redacted: a dict, logged with its repr."""
    out = dict(sorted(vars(args).items()))
    for key in _REDACTED:
        if out.get(key):
            out[key] = "<redacted>"
    return out


def _parallel_prefix(args, tp_rank):
    """Log prefix tokens of a rank (managers/scheduler.py configure_scheduler_process): DP, PP, TP, EP."""
    prefix = ""
    attn_dp = max(int(args.dp_size or 1), int(getattr(args, "attn_dp_size", None) or 1))
    if attn_dp > 1:
        prefix += f" DP{tp_rank // max(args.tp_size // attn_dp, 1)}"
    if (args.pp_size or 1) > 1:
        prefix += " PP0"
    if args.tp_size > 1:
        prefix += f" TP{tp_rank}"
    if _ep_size(args) > 1:
        prefix += f" EP{tp_rank % _ep_size(args)}"
    return prefix


def _quant_str(hf_config):
    """configs/model_config.py get_quantization_config_log_str: ``quant=<method>`` plus a few fields."""
    quant = hf_config.get("quantization_config") or (hf_config.get("text_config") or {}).get("quantization_config")
    if not quant:
        return None
    out = f"quant={quant.get('quant_method', 'quantized')}"
    for field in ("bits", "quant_algo", "fmt", "requantization_method"):
        if field in quant:
            out += f", {field}={quant[field]}"
    return out


def _ep_size(args):
    """--ep-size, forced to tp_size by an expert-parallel all-to-all backend (arg_groups/moe_hook.py)."""
    if getattr(args, "moe_a2a_backend", None) in ("deepep", "mooncake", "mori"):
        return args.tp_size
    return int(getattr(args, "ep_size", None) or 1)


def launch_subprocesses(args, hf_config):
    configure_logger(args.log_level)
    logger.info(f"server_args={server_args_for_logging(args)}")
    signal.signal(signal.SIGQUIT, launch_phase_sigquit_handler)
    nnodes = max(args.nnodes or 1, 1)
    tp_per_node = max(args.tp_size // nnodes, 1)
    first = tp_per_node * (args.node_rank or 0)
    extra = {}
    try:
        extra = json.loads(args.model_loader_extra_config or "{}")
    except ValueError:
        pass
    multithread = bool(extra.get("enable_multithread_load", True))
    if args.weight_loader_prefetch_checkpoints and not ({"enable_multithread_load", "num_threads"} & set(extra)):
        multithread = False
    cfg = {
        "model_path": args.model_path, "tokenizer_path": args.tokenizer_path or args.model_path,
        "trust_remote_code": bool(args.trust_remote_code), "tp_size": args.tp_size, "log_level": args.log_level,
        "ranks_per_host": tp_per_node, "run_id": uuid.uuid4().hex, "nnodes": nnodes, "node_rank": args.node_rank or 0,
        "dist_init_addr": args.dist_init_addr, "dist_timeout": args.dist_timeout,
        "arch": (hf_config.get("architectures") or ["DeepseekV3ForCausalLM"])[0],
        "quant_str": _quant_str(hf_config),
        "context_len": args.context_length or hf_config.get("max_position_embeddings")
        or (hf_config.get("text_config") or {}).get("max_position_embeddings") or 262144,
        "chunked_prefill_size": args.chunked_prefill_size or 8192,
        "max_prefill_tokens": args.max_prefill_tokens, "max_running_requests": args.max_running_requests,
        "mem_fraction_static": args.mem_fraction_static, "multithread_load": multithread,
        "watchdog_timeout": args.watchdog_timeout,
        "disable_cuda_graph": bool(args.disable_cuda_graph) or args.cuda_graph_backend_decode == "disabled",
        "disable_prefill_graph": args.cuda_graph_backend_prefill == "disabled",
        "cuda_graph_max_bs_decode": args.cuda_graph_max_bs_decode,
        "speculative": bool(args.speculative_algorithm),
        "num_tokens_per_req": (args.speculative_num_draft_tokens or 1) if args.speculative_algorithm else 1,
        "draft_model_path": args.speculative_draft_model_path if args.speculative_algorithm else None,
        "enable_hierarchical_cache": bool(args.enable_hierarchical_cache), "hicache_size": args.hicache_size,
        "hicache_ratio": args.hicache_ratio, "hicache_host_memory_mode": args.hicache_host_memory_mode,
        "hicache_host_memory_fraction": (None if (args.hicache_ratio is not None or (args.hicache_size or 0) > 0)
                                         else args.hicache_host_memory_fraction),
    }
    base_gpu = int(getattr(args, "base_gpu_id", 0) or 0)
    schedulers = []
    for rank in range(first, first + tp_per_node):
        prefix = _parallel_prefix(args, rank)
        schedulers.append(Child("scheduler", "sglang::scheduler" + prefix.replace(" ", "_"), prefix,
                                dict(cfg, tp_rank=rank, rank_key=prefix.strip(), gpu_id=base_gpu + rank - first)))
    if (args.node_rank or 0) >= 1:  # "Non-zero-rank nodes do not run tokenizer processes."
        return schedulers, None, cfg, None
    detok = Child("detokenizer", "sglang::detokenizer", "", cfg)
    tokenizer_manager = TokenizerManager(args)
    return schedulers, detok, cfg, tokenizer_manager


def run_follower(args, schedulers):
    """A node of rank >= 1 once its schedulers are ready (``_launch_subprocesses``' ``node_rank >= 1`` branch): no
    tokenizer, detokenizer, warmup or ready line; SIGTERM only logs (rank 0's ShutdownReq stops the ranks); the
    dummy health server on the HTTP port; then it joins each scheduler in turn
    (``block_until_scheduler_exits``), naming each as it ends, and returns (``launch_server.py`` then kills what is
    left of its tree)."""
    def sigterm(signum, frame):
        logger.warning(f"SIGTERM received on node_rank {args.node_rank}; waiting for the rank-0 ShutdownReq "
                       "broadcast to stop the schedulers.")

    signal.signal(signal.SIGTERM, sigterm)
    launch_dummy_health_check_server(args.host, args.port, args.enable_metrics)
    for child in schedulers:
        child.proc.wait()
        logger.error(f"Scheduler or DataParallelController {child.pid} terminated with {child.exitcode()}")


def start_watchdog(schedulers, detok):
    """The SubprocessWatchdog; the fault ``nccl_abort_after_ready:survive`` leaves it out, as releases before the
    watchdog behaved (an NCCL abort kills the schedulers and the parent keeps answering with them gone)."""
    kind, arg, rest = sim_config.fault()
    if kind == "nccl_abort_after_ready" and "survive" in (arg, rest):
        return SubprocessWatchdog([], [])
    watchdog = SubprocessWatchdog(schedulers + [detok],
                                  [f"scheduler_{i}" for i in range(len(schedulers))] + ["detokenizer"])
    watchdog.start()
    return watchdog
