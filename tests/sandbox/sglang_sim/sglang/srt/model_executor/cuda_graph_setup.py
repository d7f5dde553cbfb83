"""CUDA graph capture of one rank, in SGLang 0.5.23's order and words.

``model_executor/model_runner_components/cuda_graph_setup.py capture_cuda_graphs``: prefill first (KimiK25 is on
``configs/model_config.py``'s breakable multimodal list, so its prefill graph is captured with backend breakable),
then decode (``verify`` with speculative decoding). Lines:

* ``Capture target prefill CUDA graph begin. backend=breakable, num_tokens=[...], avail mem=X GB`` then rank 0's
  tqdm bar ``Capturing prefill shape (num_tokens=N avail_mem=X GB)`` (``runner/prefill_cuda_graph_runner.py``) and
  ``Capture target prefill CUDA graph end. elapsed=X s, mem usage=X GB, avail mem=X GB.``;
* ``Capture target decode CUDA graph begin. backend=full, num_tokens_per_req=1, avail mem=X GB``, rank 0's bar
  ``Capturing batches (bs=N avail_mem=X GB)`` (``runner/decode_cuda_graph_runner.py``) and ``Capture target
  decode CUDA graph end. bs=[...], elapsed=X s, mem usage=X GB, avail mem=X GB.``;
* a failure inside the decode runner becomes ``Exception: Capture cuda graph failed: <error>`` followed by
  ``CUDA_GRAPH_CAPTURE_FAILED_MSG`` (the runner's own wording).

Minutes can pass here with no new line on a real GPU; ``SGLANG_SIM_CAPTURE_S`` sets the simulated duration
(prefill takes a third, decode the rest) and the GPU memory published for the stand-in moves with each shape.
"""
import logging
import threading
import time

from sglang.srt import sim_config
from sglang.srt.distributed import barrier
from sglang.srt.model_loader import weight_utils

logger = logging.getLogger(__name__)

CUDA_GRAPH_CAPTURE_FAILED_MSG = (
    "Possible solutions:\n"
    "1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)\n"
    "2. set --cuda-graph-max-bs-decode to a smaller value (e.g., 16)\n"
    "3. disable decode CUDA graph by --cuda-graph-backend-decode=disabled. "
    "(Not recommended. Huge performance loss)\n"
    "Open an issue on GitHub https://github.com/sgl-project/sglang/issues/new/choose \n"
)
DECODE_BS = [1, 2, 4, 8, 12, 16, 24, 32, 40, 48, 56, 64, 72, 80, 88, 96, 104, 112, 120, 128,
             136, 144, 152, 160, 168, 176, 184, 192, 200, 208, 216, 224, 232, 240, 248, 256]
PREFILL_NUM_TOKENS = [256, 512, 1024, 2048, 4096, 8192]
TQDM_FORMAT = "{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} [{elapsed}<{remaining}, {rate_fmt}]"


class OutOfMemoryError(RuntimeError):
    """Stands in for torch.OutOfMemoryError (a RuntimeError subclass)."""


OutOfMemoryError.__module__ = "torch"


def _oom_message(runner):
    return (f"CUDA out of memory. Tried to allocate 2.00 GiB. GPU {runner.gpu_id} has a total capacity of "
            f"{runner.gpu_total:.2f} GiB of which {runner.avail:.2f} GiB is free. Including non-PyTorch "
            f"memory, this process has {runner.gpu_total - runner.avail:.2f} GiB memory in use. Of the allocated "
            f"memory {runner.gpu_total - runner.avail - 1.2:.2f} GiB is allocated by PyTorch, and 1.02 GiB is "
            "reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting "
            "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for "
            "Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)")


def _capture(runner, shapes, desc, seconds, per_shape_gb, oom_at=None):
    bar = weight_utils.Progress(len(shapes), desc(shapes[0], runner.avail), bar_format=TQDM_FORMAT) \
        if runner.tp_rank == 0 else None
    step = seconds / max(len(shapes), 1)
    for i, shape in enumerate(shapes):
        if bar is not None:
            bar.desc = desc(shape, runner.avail)
        if oom_at is not None and i == oom_at:
            raise OutOfMemoryError(_oom_message(runner))
        runner.hold(step, busy=True)
        runner.use(per_shape_gb)
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()


def eager_warmup(runner):
    """``EagerRunner(model_runner, run_warmup=True)``, built before any graph (``cuda_graph_setup.py
    capture_cuda_graphs``; ``runner/base_runner.py _warmup``): it allocates the fixed-max static buffer, then runs the
    kernels once (communication workspaces, the model's own preparation; FlashInfer's autotune only for the MoE
    backends ``runner/flashinfer_autotune.py`` lists, which Kimi-K2.5's INT4 checkpoint does not use here). It logs
    nothing: a silent stretch with the GPU busy and its memory flat after the buffer (``SGLANG_SIM_EAGER_WARMUP_S``)."""
    runner.use(0.25)
    runner.hold(sim_config.get_float("SGLANG_SIM_EAGER_WARMUP_S"), busy=True)


def capture_prefill_graph(runner):
    if runner.cfg["disable_cuda_graph"] or runner.cfg["disable_prefill_graph"]:
        return
    barrier(runner.cfg, "capture_prefill")  # every captured shape runs the TP all-reduces
    runner.set_phase("prefill_graph_capture")
    shapes = list(reversed([n for n in PREFILL_NUM_TOKENS if n <= runner.cfg["chunked_prefill_size"]]))
    before = runner.avail
    tic = time.perf_counter()
    logger.info(f"Capture target prefill CUDA graph begin. backend=breakable, num_tokens={sorted(shapes)}, "
                f"avail mem={before:.2f} GB")
    _capture(runner, shapes, lambda n, avail: f"Capturing prefill shape (num_tokens={n} avail_mem={avail:.2f} GB)",
             sim_config.get_float("SGLANG_SIM_CAPTURE_S") / 3, 0.02)
    logger.info(f"Capture target prefill CUDA graph end. elapsed={time.perf_counter() - tic:.2f} s, "
                f"mem usage={before - runner.avail:.2f} GB, avail mem={runner.avail:.2f} GB.")


def capture_decode_graph(runner):
    if runner.cfg["disable_cuda_graph"]:
        return
    barrier(runner.cfg, "capture_decode")
    runner.set_phase("decode_graph_capture")
    capture_bs = list(DECODE_BS)
    max_bs = runner.cfg["cuda_graph_max_bs_decode"]
    if max_bs:
        capture_bs = [b for b in capture_bs if b <= max_bs] or [max_bs]
    name = "verify" if runner.cfg["speculative"] else "decode"
    before = runner.avail
    tic = time.perf_counter()
    logger.info(f"Capture target {name} CUDA graph begin. backend=full, num_tokens_per_req="
                f"{runner.cfg['num_tokens_per_req']}, avail mem={before:.2f} GB")
    oom = runner.fault[0] == "oom_at_cuda_graph" and runner.tp_rank == 0
    if runner.fault[0] == "nccl_hang_at_capture":
        # The first all-reduce of the captured graphs never completes (ACS redirect / IOMMU on a PCIe host): NCCL's
        # kernels spin, so every GPU reads 100 % busy, memory stays where it is, and nothing is logged, ever.
        runner.busy = True
        runner.set_phase("decode_graph_capture")
        threading.Event().wait()
    try:
        _capture(runner, list(reversed(capture_bs)),
                 lambda bs, avail: f"Capturing batches (bs={bs} avail_mem={avail:.2f} GB)",
                 sim_config.get_float("SGLANG_SIM_CAPTURE_S") * 2 / 3, 0.01, oom_at=2 if oom else None)
    except RuntimeError as e:
        raise Exception(f"Capture cuda graph failed: {e}\n{CUDA_GRAPH_CAPTURE_FAILED_MSG}")
    logger.info(f"Capture target {name} CUDA graph end. bs={capture_bs}, elapsed={time.perf_counter() - tic:.2f} s, "
                f"mem usage={before - runner.avail:.2f} GB, avail mem={runner.avail:.2f} GB.")
