"""Parent side of startup: resolve the model config, spawn schedulers + detokenizer, wait for them."""
import json
import logging
import os
import select
import signal
import subprocess
import sys

from sglang.srt import sim_config
from sglang.srt.utils import kill_process_tree

logger = logging.getLogger(__name__)

_PKG_PARENT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
_BOOTSTRAP = b"from sglang.srt.managers.scheduler import main\nmain()\n"


def get_config(model_path):
    """What transformers' AutoConfig does with config.json (the parent reads it while resolving args)."""
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
        self.pid = self.proc.pid

    def exitcode(self):
        return self.proc.poll()

    def is_alive(self):
        return self.proc.poll() is None

    def shutdown(self):
        try:
            self.ctl.write("shutdown\n")
            self.ctl.flush()
        except (BrokenPipeError, ValueError):
            pass


def scheduler_died_error(rank, child):
    try:
        child.proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass
    return RuntimeError(
        f"Rank {rank} scheduler died during initialization (exit code: {child.exitcode()}). "
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
                        raise scheduler_died_error(i, child)
                    data += chunk
                info = json.loads(data)
                if info["status"] != "ready":
                    raise RuntimeError("Initialization failed. Please see the error messages above.")
                infos.append(info)
                break
            for j, other in enumerate(children):
                if not other.is_alive():
                    raise scheduler_died_error(j, other)
    return infos


def launch_phase_sigquit_handler(signum, frame):
    logger.error("Received sigquit from a child process. It usually means the child failed.")
    kill_process_tree(os.getpid())


def launch_subprocesses(args, hf_config):
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
        "model_path": args.model_path, "tp_size": args.tp_size,
        "arch": (hf_config.get("architectures") or ["DeepseekV3ForCausalLM"])[0],
        "context_len": args.context_length or hf_config.get("max_position_embeddings")
        or (hf_config.get("text_config") or {}).get("max_position_embeddings") or 262144,
        "chunked_prefill_size": args.chunked_prefill_size or 8192,
        "max_prefill_tokens": args.max_prefill_tokens, "max_running_requests": args.max_running_requests,
        "mem_fraction_static": args.mem_fraction_static, "multithread_load": multithread,
        "disable_cuda_graph": bool(args.disable_cuda_graph) or args.cuda_graph_backend_decode == "disabled",
        "cuda_graph_max_bs_decode": args.cuda_graph_max_bs_decode,
    }
    schedulers = []
    for rank in range(first, first + tp_per_node):
        prefix = f" TP{rank}" if args.tp_size > 1 else ""
        schedulers.append(Child("scheduler", "sglang::scheduler" + prefix.replace(" ", "_"), prefix,
                                dict(cfg, tp_rank=rank)))
    detok = Child("detokenizer", "sglang::detokenizer", "", cfg)
    return schedulers, detok, cfg
