"""One scheduler process per TP rank (simulated).

Started by the parent with argv[0] set to the process title, so /proc/PID/cmdline reads
``sglang::scheduler_TP<n>`` (what setproctitle produces upstream); /proc/PID/comm is set with
prctl(PR_SET_NAME). Settings arrive in the SGLANG_SIM_CHILD environment variable (JSON).
"""
import json
import os
import resource
import signal
import sys
import threading
import time

from sglang.srt import sim_config
from sglang.srt.model_loader import weight_utils
from sglang.srt.utils import configure_logger, get_exception_traceback, gib, kill_itself_when_parent_died, set_comm

import logging

logger = logging.getLogger(__name__)

CUDA_GRAPH_CAPTURE_FAILED_MSG = (
    "Possible solutions:\n"
    "1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)\n"
    "2. set --cuda-graph-max-bs-decode to a smaller value (e.g., 16)\n"
    "3. disable decode CUDA graph by --cuda-graph-backend-decode=disabled. "
    "(Not recommended. Huge performance loss)\n"
    "Open an issue on GitHub https://github.com/sgl-project/sglang/issues/new/choose \n"
)


class OutOfMemoryError(RuntimeError):
    """Stands in for torch.OutOfMemoryError (a RuntimeError subclass)."""


OutOfMemoryError.__module__ = "torch"


class Scheduler:
    def __init__(self, cfg):
        self.cfg = cfg
        self.tp_rank = cfg["tp_rank"]
        self.tp_size = cfg["tp_size"]
        self.gpu_total = sim_config.get_float("SGLANG_SIM_GPU_MEM_GB")
        self.avail = self.gpu_total - 0.74
        self.fault = sim_config.fault()
        self.init_torch_distributed()
        self.load_model()
        self.init_memory_pool()
        self.init_cuda_graphs()
        if self.tp_rank == 0:
            logger.info(
                f"max_total_num_tokens={self.max_total_num_tokens}, chunked_prefill_size={cfg['chunked_prefill_size']}, "
                f"max_prefill_tokens={cfg['max_prefill_tokens']}, max_running_requests={self.max_running_requests}, "
                f"context_len={cfg['context_len']}, available_gpu_mem={self.avail:.2f} GB")

    def init_torch_distributed(self):
        kind, arg, rest = self.fault
        if kind == "rank_dies_at_init" and int(arg or 0) == self.tp_rank:
            time.sleep(0.2)
            code = int(rest) if rest else -9
            sys.stderr.flush()
            if code < 0:
                os.kill(os.getpid(), -code)
                time.sleep(5)
            os._exit(code)
        logger.info("Init torch distributed begin.")
        time.sleep(0.05)
        logger.info(f"Init torch distributed ends. elapsed=0.05 s, mem usage=0.{self.tp_size - 1:02d} GB")

    def load_model(self):
        cfg = self.cfg
        logger.info(f"Load weight begin. avail mem={self.avail:.2f} GB")
        tic = time.perf_counter()
        files = weight_utils.shard_files(cfg["model_path"])
        kind, arg, _ = self.fault

        def on_shard(i):
            if self.tp_rank != 0:
                return
            if kind == "crash_at_shard" and i == int(arg):
                # A read error on the checkpoint store (EIO), as a flaky network mount gives.
                raise OSError(5, "Input/output error", files[i - 1])
            if kind == "hang_at_shard" and i == int(arg):
                threading.Event().wait()

        if self.tp_rank == 0:
            logger.info("Using model weights format ['*.safetensors']")
            weight_utils.iterate_shards(files, multithread=cfg["multithread_load"], on_shard=on_shard)
        else:
            time.sleep(len(files) * sim_config.get_float("SGLANG_SIM_SHARD_DELAY_S"))
        total = weight_utils.read_index(cfg["model_path"]).get("metadata", {}).get("total_size", 0)
        usage = gib(total) / self.tp_size
        self.avail -= usage
        logger.info(f"Load weight end. elapsed={time.perf_counter() - tic:.2f} s, type={cfg['arch']}, "
                    f"dtype=torch.bfloat16, avail mem={self.avail:.2f} GB, mem usage={usage:.2f} GB.")

    def init_memory_pool(self):
        frac = self.cfg["mem_fraction_static"] or 0.85
        kv_gb = max(self.avail - self.gpu_total * (1 - frac), 0.5)
        self.max_total_num_tokens = int(kv_gb * (1 << 30) / (61 * 576 * 2))
        self.max_running_requests = self.cfg["max_running_requests"] or 2048
        logger.info(f"KV Cache is allocated. dtype: torch.bfloat16, #tokens: {self.max_total_num_tokens}, "
                    f"KV size: {kv_gb:.2f} GB")
        self.avail -= kv_gb
        logger.info(f"Memory pool end. avail mem={self.avail:.2f} GB")

    def init_cuda_graphs(self):
        if self.cfg["disable_cuda_graph"]:
            return
        capture_bs = [1, 2, 4, 8, 12, 16, 24, 32, 40, 48, 56, 64, 72, 80, 88, 96, 104, 112, 120, 128,
                      136, 144, 152, 160, 168, 176, 184, 192, 200, 208, 216, 224, 232, 240, 248, 256]
        mb = self.cfg["cuda_graph_max_bs_decode"]
        if mb:
            capture_bs = [b for b in capture_bs if b <= mb] or [mb]
        before = self.avail
        logger.info(f"Capture target decode CUDA graph begin. backend=full, num_tokens_per_req=1, "
                    f"avail mem={before:.2f} GB")
        tic = time.perf_counter()
        try:
            self.capture(capture_bs)
        except RuntimeError as e:
            raise Exception(f"Capture cuda graph failed: {e}\n{CUDA_GRAPH_CAPTURE_FAILED_MSG}")
        usage = 0.35 + 0.01 * len(capture_bs)
        self.avail -= usage
        logger.info(f"Capture target decode CUDA graph end. bs={capture_bs}, elapsed={time.perf_counter() - tic:.2f} s, "
                    f"mem usage={usage:.2f} GB, avail mem={self.avail:.2f} GB.")

    def capture(self, capture_bs):
        step = sim_config.get_float("SGLANG_SIM_CAPTURE_S") / max(len(capture_bs), 1)
        oom = self.fault[0] == "oom_at_cuda_graph" and self.tp_rank == 0
        bar = None
        if self.tp_rank == 0:
            bar = weight_utils.Progress(
                len(capture_bs), "Capturing batches",
                bar_format="{desc}: {percentage:3.0f}%| {n_fmt}/{total_fmt} [{elapsed}<{remaining}, {rate_fmt}]")
        for i, bs in enumerate(reversed(capture_bs)):
            if bar is not None:
                bar.desc = f"Capturing batches (bs={bs} avail_mem={self.avail - 0.01 * i:.2f} GB)"
            if oom and i == 2:
                raise OutOfMemoryError(
                    f"CUDA out of memory. Tried to allocate 2.00 GiB. GPU {self.tp_rank} has a total capacity of "
                    f"{self.gpu_total:.2f} GiB of which {self.avail - 0.02 * i:.2f} GiB is free. Including non-PyTorch "
                    f"memory, this process has {self.gpu_total - self.avail:.2f} GiB memory in use. Of the allocated "
                    f"memory {self.gpu_total - self.avail - 1.2:.2f} GiB is allocated by PyTorch, and 1.02 GiB is "
                    "reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting "
                    "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for "
                    "Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)")
            time.sleep(step)
            if bar is not None:
                bar.update(1)
        if bar is not None:
            bar.close()

    def run_event_loop(self, ctl_fd):
        """Block until the parent asks us to shut down (or goes away)."""
        kind, _, _ = self.fault
        if kind == "nccl_abort_after_ready":
            threading.Thread(target=self._nccl_abort, daemon=True).start()
        with os.fdopen(ctl_fd, "r") as ctl:
            for line in ctl:
                if line.strip() == "shutdown":
                    return

    def _nccl_abort(self):
        time.sleep(sim_config.get_float("SGLANG_SIM_FAULT_DELAY_S"))
        ts = time.strftime("%m%d %H:%M:%S")
        r = self.tp_rank
        sys.stderr.write(
            f"[rank{r}]:[E{ts}.000000000 ProcessGroupNCCL.cpp:2057] [PG ID 2 PG GUID 3 Rank {r}] Process group "
            f"watchdog thread terminated with exception: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO "
            f"for details), NCCL version 2.27.7\n"
            "ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error.\n"
            "terminate called after throwing an instance of 'c10::DistBackendError'\n")
        sys.stderr.flush()
        os.abort()  # std::terminate -> SIGABRT; RLIMIT_CORE is 0 so no core file


def run_scheduler_process(cfg, ready_fd, ctl_fd):
    parent = os.getppid()
    scheduler = None
    try:
        scheduler = Scheduler(cfg)
        os.write(ready_fd, (json.dumps({"status": "ready", "max_total_num_tokens": scheduler.max_total_num_tokens})
                            + "\n").encode())
        scheduler.run_event_loop(ctl_fd)
    except Exception:
        traceback = get_exception_traceback()
        logger.error(f"Scheduler hit an exception: {traceback}")
        os.kill(parent, signal.SIGQUIT)


def main():
    cfg = json.loads(os.environ["SGLANG_SIM_CHILD"])
    kill_itself_when_parent_died()
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    set_comm(cfg["title"])
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    configure_logger(cfg["log_prefix"])
    if cfg["role"] == "scheduler":
        run_scheduler_process(cfg, cfg["ready_fd"], cfg["ctl_fd"])
    else:  # detokenizer
        os.write(cfg["ready_fd"], b'{"status": "ready"}\n')
        with os.fdopen(cfg["ctl_fd"], "r") as ctl:
            for line in ctl:
                if line.strip() == "shutdown":
                    break
