"""One scheduler process per rank (simulated), in SGLang 0.5.23's order.

``managers/scheduler.py``: ``run_scheduler_process`` -> ``configure_scheduler_process`` (log prefix
``{ DP d}{ PP p}{ TP t}{ EP e}``, process title ``sglang::scheduler{prefix with _}``) -> ``Scheduler.__init__``:

1. ``bootstrap.init_parallel_runtime`` (``distributed/bootstrap.py``): ``Init parallel begin.`` / ``Init parallel
   ends. elapsed=X s``;
2. ``init_tokenizer``: the processor is loaded on every rank (``utils/hf_transformers/processor.py``) before any
   weight, so a broken tokenizer fails here;
3. ``init_model_worker`` -> ModelRunner: ``Memory baseline taken. mem usage=X GB``
   (``bootstrap.measure_pre_model_load_memory``), ``Load weight begin. avail mem=X GB``, rank 0's tqdm bar
   (``model_loader/weight_utils.py``; its ``Using model weights format ['*.safetensors']`` only for a hub id it
   downloads), ``Load weight end. elapsed=X s, type=<arch>, avail mem=X GB, mem usage=X GB.``
   (``model_executor/model_runner.py``); ``KV Cache is allocated. dtype: torch.bfloat16, #tokens: N, KV size: X
   GB`` (``mem_cache/memory_pool.py``), ``Memory pool end. avail mem=X GB``
   (``mem_cache/kv_cache_configurator.py``); CUDA graphs (``model_executor/cuda_graph_setup``);
4. rank 0: ``max_total_num_tokens=..., available_gpu_mem=X GB``;
5. ``kv_cache_builder.build_kv_cache``: with ``--enable-hierarchical-cache`` the host pool
   (``mem_cache/pool_host/base.py``);
6. the init info goes to the parent through the pipe; then the event loop.

On an exception: ``Scheduler hit an exception: <traceback>`` and SIGQUIT to the parent. Settings arrive in the
SGLANG_SIM_CHILD environment variable (JSON); argv[0] is the process title (what setproctitle shows in
/proc/PID/cmdline), /proc/PID/comm is set with prctl(PR_SET_NAME). Each scheduler publishes its phase and GPU
memory (``sim_state.py``) for the GPU stand-in.
"""
import json
import logging
import os
import resource
import signal
import subprocess
import sys
import threading
import time
import uuid

from sglang.srt import sim_config, sim_state
from sglang.srt import distributed
from sglang.srt.distributed import barrier
from sglang.srt.managers import detokenizer_manager
from sglang.srt.mem_cache.pool_host.base import MLATokenToKVPoolHost
from sglang.srt.model_executor import cuda_graph_setup
from sglang.srt.model_loader import weight_utils
from sglang.srt.utils import configure_logger, get_exception_traceback, gib, kill_itself_when_parent_died, set_comm
from sglang.srt.utils.hf_transformers.processor import get_processor
from sglang.srt.utils.watchdog import WatchdogRaw

logger = logging.getLogger(__name__)

# MLA KV bytes per token for Kimi-K2.5 (61 layers x (kv_lora_rank 512 + qk_rope_head_dim 64) x bf16)
KV_BYTES_PER_TOKEN = 61 * 576 * 2


class Scheduler:
    def __init__(self, cfg):
        self.cfg = cfg
        self.tp_rank = cfg["tp_rank"]
        self.tp_size = cfg["tp_size"]
        self.gpu_id = cfg["gpu_id"]
        self.gpu_total = sim_config.get_float("SGLANG_SIM_GPU_MEM_GB")
        self.avail = self.gpu_total - 0.74  # CUDA context
        self.busy = False
        self.fault = sim_config.fault()
        self.set_phase("starting")
        self.init_parallel()
        self.init_tokenizer()
        self.init_model_worker()
        if self.tp_rank == 0:
            logger.info(
                f"max_total_num_tokens={self.max_total_num_tokens}, chunked_prefill_size={cfg['chunked_prefill_size']}, "
                f"max_prefill_tokens={cfg['max_prefill_tokens']}, max_running_requests={self.max_running_requests}, "
                f"context_len={cfg['context_len']}, available_gpu_mem={self.avail:.2f} GB")
        self.build_kv_cache()
        self.set_phase("serving")

    # -- what the GPU stand-in sees -----------------------------------------------------------
    def set_phase(self, phase):
        self.phase = phase
        self._publish()

    def use(self, gb):
        self.avail -= gb
        self._publish()

    def hold(self, seconds, busy):
        self.busy = busy
        self._publish()
        time.sleep(seconds)
        self.busy = False

    def _publish(self, **extra):
        sim_state.publish(title=self.cfg["title"], rank=self.cfg["rank_key"], gpu_id=self.gpu_id, phase=self.phase,
                          gpu_memory_used_mib=int((self.gpu_total - self.avail) * 1024), gpu_busy=self.busy, **extra)

    # -- start-up ------------------------------------------------------------------------------
    def init_parallel(self):
        kind, arg, rest = self.fault
        tic = time.perf_counter()
        logger.info("Init parallel begin.")
        if kind == "rank_dies_at_init" and int(arg or 0) == self.tp_rank:
            time.sleep(0.2)
            code = int(rest) if rest else -9
            sys.stderr.flush()
            if code < 0:
                os.kill(os.getpid(), -code)
                time.sleep(5)
            os._exit(code)
        self.hold(sim_config.get_float("SGLANG_SIM_INIT_S"), busy=False)
        # process groups: every rank of every node must join
        distributed.init_process_group(self.cfg, self.group_shutdown if self.cfg.get("node_rank") else None)
        self.use(0.06)  # NCCL buffers
        logger.info(f"Init parallel ends. elapsed={time.perf_counter() - tic:.2f} s")

    def init_tokenizer(self):
        self.processor = get_processor(self.cfg["tokenizer_path"], trust_remote_code=self.cfg["trust_remote_code"])

    def foreign_gb(self):
        """GPU memory other live processes hold on this rank's GPU (what the GPU stand-in lists for it), in GB."""
        total = 0.0
        for entry in sim_state.others():
            if entry.get("gpu_id") == self.gpu_id:
                total += entry.get("gpu_memory_used_mib", 0) / 1024.0
        return total

    def init_model_worker(self):
        before = self.avail
        self.use(0.5)
        # distributed/bootstrap.py measure_pre_model_load_memory: free memory (what other processes hold is not free),
        # the MIN over every rank (get_available_gpu_memory(distributed=True)), then _check_tp_memory_balance
        local = self.avail - self.foreign_gb()
        pre_model_load_memory = min(barrier(self.cfg, "memory_baseline", value=local))
        if self.tp_size > 1:
            check_tp_memory_balance(pre_model_load_memory=pre_model_load_memory, local_gpu_memory=local)
        logger.info(f"Memory baseline taken. mem usage={before - self.avail:.2f} GB")
        self.load_model()
        self.init_memory_pool()
        cuda_graph_setup.eager_warmup(self)
        cuda_graph_setup.capture_prefill_graph(self)
        cuda_graph_setup.capture_decode_graph(self)

    def load_model(self):
        cfg = self.cfg
        self.set_phase("loading_weights")
        logger.info(f"Load weight begin. avail mem={self.avail:.2f} GB")
        tic = time.perf_counter()
        files = weight_utils.shard_files(cfg["model_path"])
        total = weight_utils.read_index(cfg["model_path"]).get("metadata", {}).get("total_size", 0)
        kind, arg, _ = self.fault
        before = self.avail

        def on_shard(i):
            if kind == "host_oom_at_shard" and i == int(arg):
                host_oom_kill(self.cfg["title"])  # every rank's load buffers: each rank is killed in turn
            if self.tp_rank != 0:
                return
            if kind == "crash_at_shard" and i == int(arg):
                # A read error on the checkpoint store (EIO), as a flaky network mount gives.
                raise OSError(5, "Input/output error", files[i - 1])
            if kind == "hang_at_shard" and i == int(arg):
                threading.Event().wait()

        # model_loader/weight_utils.py download_weights_from_hf returns a local directory before it logs this line:
        # only a hub id being downloaded prints it (the product always serves a staged local path)
        if self.tp_rank == 0 and not os.path.isdir(cfg["model_path"]):
            logger.info("Using model weights format ['*.safetensors']")
        self.read_weights(files, total, cfg["arch"], tic, before, quant_str=cfg.get("quant_str"), on_shard=on_shard)
        self.set_phase("weights_loaded")
        if cfg.get("draft_model_path"):
            self.load_draft_model()

    def load_draft_model(self):
        """``maybe_init_draft_worker`` (managers/scheduler.py, after the target's weights and before the KV pools): the
        EAGLE3 draft worker builds its own ModelRunner (``is_draft_worker``), which reads the draft's config.json and
        logs its own ``Load weight begin``/``Load weight end`` (type = the draft's architecture); its weights come out
        of the memory the KV pool is then sized from. Every rank reads the draft's files; rank 0 draws the bar."""
        from sglang.srt.entrypoints.engine import get_config

        path = self.cfg["draft_model_path"]
        draft = get_config(path)
        logger.info(f"Load weight begin. avail mem={self.avail:.2f} GB")
        tic = time.perf_counter()
        before = self.avail
        files = weight_utils.shard_files(path)
        self.read_weights(files, sum(os.path.getsize(f) for f in files),
                          (draft.get("architectures") or ["LlamaForCausalLMEagle3"])[0], tic, before)

    def read_weights(self, files, total, arch, tic, before, quant_str=None, on_shard=None):
        """What every ModelRunner's load does after ``Load weight begin`` (model_executor/model_runner.py): every rank
        reads every shard (its own slice of each tensor; ``total`` bytes over the ranks), rank 0 draws the bar, then
        ``Load weight end`` with the architecture (and the quantization the config names)."""
        share = gib(total) / self.tp_size / max(len(files), 1)
        weight_utils.iterate_shards(files, multithread=self.cfg["multithread_load"], on_shard=on_shard,
                                    after_shard=lambda i: self.use(share), show=self.tp_rank == 0)
        logger.info(f"Load weight end. elapsed={time.perf_counter() - tic:.2f} s, type={arch}, "
                    f"{quant_str + ', ' if quant_str else ''}"
                    f"avail mem={self.avail:.2f} GB, mem usage={before - self.avail:.2f} GB.")

    def init_memory_pool(self):
        barrier(self.cfg, "kv_pool")  # the KV pool is sized by a MIN all-reduce over the ranks
        self.set_phase("kv_cache")
        frac = self.cfg["mem_fraction_static"] or 0.85
        kv_gb = max(self.avail - self.gpu_total * (1 - frac), 0.5)
        self.max_total_num_tokens = int(kv_gb * (1 << 30) / KV_BYTES_PER_TOKEN)
        self.max_running_requests = self.cfg["max_running_requests"] or 2048
        logger.info(f"KV Cache is allocated. dtype: torch.bfloat16, #tokens: {self.max_total_num_tokens}, "
                    f"KV size: {kv_gb:.2f} GB")
        self.use(kv_gb)
        logger.info(f"Memory pool end. avail mem={self.avail:.2f} GB")

    def build_kv_cache(self):
        if not self.cfg["enable_hierarchical_cache"]:
            return
        barrier(self.cfg, "hicache")  # auto-sizing's MIN all-reduce
        self.set_phase("hicache_alloc")
        self.host_pool = MLATokenToKVPoolHost(
            self.cfg, self.max_total_num_tokens, KV_BYTES_PER_TOKEN,
            on_progress=lambda done: self._publish(host_pinned_bytes=done))

    def group_shutdown(self, error=None):
        """A follower node's rank: rank 0's ShutdownReq ends the event loop (the host pool released on the way out,
        as ``run_scheduler_process``'s finally does); a lost connection to rank 0 is the gloo error a collective
        raises, which ends the scheduler as any exception does."""
        if error is None:
            if getattr(self, "host_pool", None) is not None:
                self.host_pool.release()
            sys.stderr.flush()
            os._exit(0)
        try:
            raise error
        except RuntimeError:
            logger.error(f"Scheduler hit an exception: {get_exception_traceback()}")
        sys.stderr.flush()
        os.kill(os.getppid(), signal.SIGQUIT)
        os._exit(1)

    # -- serving -------------------------------------------------------------------------------
    def run_event_loop(self, ctl_fd):
        """Block until the parent asks us to shut down (or goes away). The parent says ``ready`` once the server
        is fired up (the simulator's own signal, so a fault can start from there), ``busy``/``idle`` as batches
        run, and ``hang`` when a forward never finishes (``hang_in_warmup``, ``hang_after_ready``: a collective one
        rank never joins): the GPU stays busy, the forward counter stops, and the scheduler's watchdog (started at
        the end of ``Scheduler.__init__``, ``init_watch_dog_memory_saver_input_blocker``) fires."""
        kind, _, _ = self.fault
        self.hung_at = None
        WatchdogRaw("Scheduler", get_counter=self.forward_ct, is_active=lambda: self.busy,
                    watchdog_timeout=self.cfg["watchdog_timeout"], dump_info=self.dump_info)
        with os.fdopen(ctl_fd, "r") as ctl:
            for line in ctl:
                word = line.strip()
                if word == "shutdown":
                    distributed.shutdown_group()  # the ShutdownReq reaches every rank of the group
                    return
                if word == "ready" and kind == "nccl_abort_after_ready":
                    threading.Thread(target=self._nccl_abort, daemon=True).start()
                if word.startswith("log "):  # the stats-logging rank's batch lines (metrics_reporter.py)
                    logger.info(word[4:])
                    continue
                if word == "hang":  # the batch now running never ends
                    self.hung_at = time.monotonic()
                    self.busy = True
                    self._publish()
                if word in ("busy", "idle") and self.hung_at is None:  # a batch runs on this rank's GPU, or none
                    self.busy = word == "busy"
                    self._publish()
                    if self.busy:
                        self.run_batch()

    def forward_ct(self):
        """``Scheduler.forward_ct``: one more per forward while batches run (the sim counts 10 ms steps), frozen
        from the moment a forward hangs."""
        return int((self.hung_at or time.monotonic()) * 100)

    def dump_info(self):
        """create_scheduler_watchdog's dump_info once initialised: the running batch (the pools' invariant
        messages are left out: the sim has no KV pool to check)."""
        return ("scheduler.cur_batch_for_debug.batch_size()=1\n"
                f"scheduler.cur_batch_for_debug.reqs=[Req(rid={uuid.uuid4().hex}, input_ids=[0], output_ids=[], "
                "self.grammar=None, self.sampling_params=<SamplingParams>)]")

    def run_batch(self):
        """One forward pass on this rank. ``warmup_failure``: a build without kernels for this GPU fails its first
        kernel launch, in the warmup request's forward, on every rank (torch raises the CUDA runtime's error from
        ``c10_cuda_check_implementation``, c10/cuda/CUDAException.cpp; the advice lines are the text of torch 2.14.1's
        ``libc10_cuda.so``: the error's help and ``get_cuda_async_error_suffix``)."""
        if self.fault[0] == "warmup_failure":
            self.forward_batch_generation()

    def forward_batch_generation(self):
        raise AcceleratorError(
            "CUDA error: no kernel image is available for execution on the device\n"
            "Search for `cudaErrorNoKernelImageForDevice' in "
            "https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html for more information.\n"
            "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below "
            "might be incorrect.\n"
            "For debugging consider passing CUDA_LAUNCH_BLOCKING=1\n")

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


def _memcg():
    """This process's memory cgroup (cgroup v2's unified line, else v1's memory controller), as the kernel names it."""
    found = "/"
    try:
        with open("/proc/self/cgroup") as fh:
            for line in fh:
                dummy, controllers, path = line.rstrip("\n").split(":", 2)
                if controllers == "" or "memory" in controllers.split(","):
                    found = path
    except OSError:
        pass
    return found


def _status_kib(field):
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def host_oom_kill(title):
    """``host_oom_at_shard:N``: host memory runs out while the ranks load (sgl-project/sglang#38567): the kernel's OOM
    killer SIGKILLs this rank. Its three kernel-log lines (mm/oom_kill.c dump_header, dump_oom_summary,
    __oom_kill_process; ``comm`` is the 15-character task name) go where ``SGLANG_SIM_KERNEL_LOG`` says: ``logger``
    (the sandbox node's journal, as ``SYSLOG_IDENTIFIER=kernel``, how the sandbox feeds kernel lines), ``file:PATH``,
    or nowhere."""
    comm, pid, uid, cg = title[:15], os.getpid(), os.getuid(), _memcg()
    lines = [
        f"{comm} invoked oom-killer: gfp_mask=0x140cca(GFP_HIGHUSER_MOVABLE|__GFP_COMP), order=0, oom_score_adj=0",
        f"oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0,oom_memcg={cg},"
        f"task_memcg={cg},task={comm},pid={pid},uid={uid}",
        f"Memory cgroup out of memory: Killed process {pid} ({comm}) total-vm:{_status_kib('VmSize')}kB, "
        f"anon-rss:{_status_kib('RssAnon')}kB, file-rss:{_status_kib('RssFile')}kB, "
        f"shmem-rss:{_status_kib('RssShmem')}kB, UID:{uid} pgtables:{_status_kib('VmPTE')}kB oom_score_adj:0",
    ]
    target = sim_config.get("SGLANG_SIM_KERNEL_LOG")
    if target == "logger":
        for line in lines:
            subprocess.run(["logger", "-t", "kernel", "-p", "kern.err", line], check=False, timeout=10)
    elif target.startswith("file:"):
        with open(target[len("file:"):], "a", encoding="utf-8") as fh:
            fh.write("".join(line + "\n" for line in lines))
    sys.stderr.flush()
    os.kill(pid, signal.SIGKILL)


def check_tp_memory_balance(*, pre_model_load_memory, local_gpu_memory):
    """distributed/bootstrap.py _check_tp_memory_balance, SGLANG_ENABLE_TP_MEMORY_INBALANCE_CHECK on (its default):
    every rank whose GPU has over 1/0.9 of the least free memory raises (the rank of the occupied GPU does not)."""
    if pre_model_load_memory < local_gpu_memory * 0.9:
        msg = "The memory capacity is unbalanced. Some GPUs may be occupied by other processes. "
        msg += (
            f"{pre_model_load_memory=}, {local_gpu_memory=}, {local_gpu_memory * 0.9=}"
        )
        raise RuntimeError(msg)


class AcceleratorError(RuntimeError):
    """Stands in for torch 2.14's ``torch.AcceleratorError`` (module set below to match tracebacks)."""


AcceleratorError.__module__ = "torch"


def run_scheduler_process(cfg, ready_fd, ctl_fd):
    parent = os.getppid()
    scheduler = None
    try:
        scheduler = Scheduler(cfg)
        os.write(ready_fd, (json.dumps({"status": "ready", "max_total_num_tokens": scheduler.max_total_num_tokens})
                            + "\n").encode())
        scheduler.run_event_loop(ctl_fd)
        # ShutdownReq breaks the event loop; "the finally in run_scheduler_process releases resources" (0.5.23)
        if getattr(scheduler, "host_pool", None) is not None:
            scheduler.host_pool.release()
    except Exception:
        traceback = get_exception_traceback()
        logger.error(f"Scheduler hit an exception: {traceback}")
        os.kill(parent, signal.SIGQUIT)


def configure_scheduler_process(cfg):
    kill_itself_when_parent_died()
    set_comm(cfg["title"])
    configure_logger(cfg["log_level"], prefix=cfg["log_prefix"])


def main():
    cfg = json.loads(os.environ["SGLANG_SIM_CHILD"])
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if cfg["role"] == "scheduler":
        configure_scheduler_process(cfg)
        run_scheduler_process(cfg, cfg["ready_fd"], cfg["ctl_fd"])
    else:
        kill_itself_when_parent_died()
        set_comm(cfg["title"])
        configure_logger(cfg["log_level"])
        detokenizer_manager.run_detokenizer_process(cfg, cfg["ready_fd"], cfg["ctl_fd"])
