# -*- coding: utf-8 -*-
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The text SGLang's startup log holds, named once each, and the regexes built from it (stdlib only).

``WHEEL_TEXT`` holds what SGLang 0.5.23 prints itself, each with the file of the pinned wheel (under
``sglang/srt/``) and the function that prints it; ``WHEEL_FUNCTIONS`` the wheel's functions whose names in a
traceback's frames say the tokenizer / processor was loading; ``FOREIGN_TEXT`` what another program prints
(CPython, uvicorn, transformers, torch, NCCL, libstdc++, the kernel), each with that program. Every regex that
``sglang_log`` (parsing) and ``sglang_verdict`` (crash advice) use is built from these entries with ``text_re``
and ``any_text_re``. ``tests/contract/test_log_knowledge.py`` parses the pinned wheel with ``ast``, folds its
f-strings, ``%`` formats and concatenations into templates and requires every ``WHEEL_TEXT`` pattern to fit one
(and a changed word to fit none); ``WHEEL_FUNCTIONS`` must be functions the wheel defines.
"""

from __future__ import absolute_import, division, print_function

import re

__metaclass__ = type

# name -> (regex, the 0.5.23 wheel file (under sglang/srt/) and function that print it)
WHEEL_TEXT = {
    "server_args": (r"server_args=", "entrypoints/engine.py Engine._launch_subprocesses"),
    "init_parallel_begin": (r"Init parallel begin\.", "distributed/bootstrap.py init_parallel_runtime"),
    "init_parallel_end": (r"Init parallel ends\. elapsed=", "distributed/bootstrap.py init_parallel_runtime"),
    "memory_baseline": (r"Memory baseline taken\. mem usage=",
                        "distributed/bootstrap.py measure_pre_model_load_memory"),
    "memory_unbalanced": (r"The memory capacity is unbalanced\. Some GPUs may be occupied by other processes\.",
                          "distributed/bootstrap.py _check_tp_memory_balance"),
    "shards_missing": (r"references \d+ shard file\(s\) missing from ",
                       "model_loader/weight_utils.py filter_duplicate_safetensors_files"),
    "load_weight_begin": (r"Load weight begin\. avail mem=", "model_executor/model_runner.py ModelRunner.load_model"),
    "weights_format": (r"Using model weights format ", "model_loader/weight_utils.py"),
    "bar_multithread": (r"Multi-thread loading shards",
                        "model_loader/weight_utils.py multi_thread_safetensors_weights_iterator (tqdm desc)"),
    "bar_prefetch": (r"Loading safetensors checkpoint shards",
                     "model_loader/weight_utils.py safetensors_weights_iterator (tqdm desc)"),
    "bar_format": (r":\s*(?P<pct>\d+)% Completed \| (?P<i>\d+)/(?P<n>\d+) \[", "utils/common.py BAR_FORMAT"),
    "load_weight_end": (r"Load weight end\. elapsed=", "model_executor/model_runner.py ModelRunner.load_model"),
    "kv_cache_allocated": (r"KV Cache is allocated\. dtype: ",
                           "mem_cache/memory_pool.py KVCache._finalize_allocation_log"),
    "memory_pool_end": (r"Memory pool end\. avail mem=", "mem_cache/kv_cache_configurator.py"),
    "capture_prefill_begin": (r"Capture \w+ prefill CUDA graph begin\.",
                              "model_executor/model_runner_components/cuda_graph_setup.py capture_prefill_graph"),
    "capture_prefill_end": (r"Capture \w+ prefill CUDA graph end\.",
                            "model_executor/model_runner_components/cuda_graph_setup.py capture_prefill_graph"),
    "capture_prefill_bar": (r"Capturing prefill shape \(num_tokens=",
                            "model_executor/runner/prefill_cuda_graph_runner.py (tqdm desc)"),
    "capture_decode_begin": (r"Capture \w+ decode CUDA graph begin\.",
                             "model_executor/model_runner_components/cuda_graph_setup.py capture_decode_graph"),
    "capture_decode_end": (r"Capture \w+ decode CUDA graph end\.",
                           "model_executor/model_runner_components/cuda_graph_setup.py capture_decode_graph"),
    "capture_verify_begin": (r"Capture \w+ verify CUDA graph begin\.",
                             "model_executor/model_runner_components/cuda_graph_setup.py capture_decode_graph"),
    "capture_verify_end": (r"Capture \w+ verify CUDA graph end\.",
                           "model_executor/model_runner_components/cuda_graph_setup.py capture_decode_graph"),
    "capture_draft_extend_begin": (r"Capture draft extend CUDA graph begin\.", "speculative/eagle_worker_v2.py"),
    "capture_draft_extend_end": (r"Capture draft extend CUDA graph end\.", "speculative/eagle_worker_v2.py"),
    "capture_decode_bar": (r"Capturing batches \(bs=",
                           "model_executor/runner/decode_cuda_graph_runner.py (tqdm desc)"),
    "capture_failed": (r"Capture cuda graph failed: ",
                       "model_executor/runner/decode_cuda_graph_runner.py, speculative/eagle_*_cuda_graph_runner.py"),
    "hicache_pool": (r"Allocating \w+ hierarchical KV host pool: \d+ tokens, ",
                     "mem_cache/pool_host/base.py HostKVCache._allocate_host_buffer"),
    "hicache_no_memory": (r"Not enough host memory available\. Requesting ",
                          "mem_cache/pool_host/base.py HostKVCache._allocate_host_buffer"),
    "hicache_nothing_left": (r"No host memory is left for HiCache after the 10 GiB reserve",
                             "mem_cache/hicache_auto_size.py auto_size_hicache"),
    "hicache_cannot_size": (r"Cannot automatically size HiCache host memory",
                            "mem_cache/host_memory.py available_host_memory_bytes"),
    "warmup_image": (r"image for Kimi VLM startup warmup",
                     "entrypoints/http_server.py _get_vlm_warmup_image_base64"),
    "warmup_failed": (r"Initialization failed\. warmup error: ", "entrypoints/http_server.py _execute_server_warmup"),
    "ready": (r"The server is fired up and ready to roll!", "entrypoints/http_server.py _wait_and_warmup"),
    "scheduler_exception": (r"Scheduler hit an exception: ", "managers/scheduler.py run_scheduler_process"),
    "detokenizer_exception": (r"DetokenizerManager hit an exception: ",
                              "managers/detokenizer_manager.py run_detokenizer_process"),
    "sigquit_launch": (r"Received sigquit from a child process\. It usually means the child failed\.",
                       "entrypoints/engine.py launch_phase_sigquit_handler"),
    "sigquit_running": (r"SIGQUIT received\. signum=.*?, frame=.*?\. It usually means one child failed\.",
                        "managers/tokenizer_manager.py SignalHandler.running_phase_sigquit_handler"),
    "scheduler_died": (r"Rank (?P<rank>\d+) scheduler died during initialization \(exit code: (?P<code>-?\d+)\)",
                       "entrypoints/engine.py _scheduler_died_error"),
    "subprocess_crashed": (r"Subprocess (?P<name>\w+?)(?:_(?P<rank>\d+))? \(pid=\d+\) crashed with exit code "
                           r"(?P<code>-?\d+)\.", "utils/watchdog.py SubprocessWatchdog._check_processes"),
    "watchdog_timeout": (r"(?P<who>\w+) watchdog timeout \(self\.watchdog_timeout=(?P<timeout>[\d.]+), "
                         r"self\.soft=(?P<soft>\w+)\)",
                         "utils/watchdog.py WatchdogRaw._watchdog_once (the scheduler's, invariant_checker.py "
                         "create_scheduler_watchdog)"),
    "health_check_failed": (r"Health check failed\. Server couldn't get a response from detokenizer for last "
                            r"(?P<timeout>\d+) seconds\.", "entrypoints/http_server.py health_generate"),
    "prefill_batch": (r"Prefill batch(?: \[\d+\])?, #new-seq: ",
                      "managers/scheduler_components/metrics_reporter.py report_prefill_stats"),
    "decode_batch": (r"Decode batch(?: \[\d+\])?, #running-req: ",
                     "managers/scheduler_components/metrics_reporter.py report_decode_stats"),
    "init_failed": (r"Initialization failed\. Please see the error messages above\.",
                    "entrypoints/engine.py _wait_for_scheduler_ready"),
    # a node of rank >= 1: its ranks are all ready and it serves the dummy health app (no ready line ever)
    "follower_serving": (r"Dummy health check server started in background thread at ",
                         "utils/common.py launch_dummy_health_check_server"),
    "follower_sigterm": (r"SIGTERM received on node_rank (?P<rank>\d+); waiting for the rank-0 ShutdownReq",
                         "entrypoints/engine.py Engine._launch_subprocesses (sigterm_handler)"),
}

# Functions of the wheel whose names in a traceback's frames say the tokenizer / processor was loading.
WHEEL_FUNCTIONS = {
    "get_tokenizer": "utils/hf_transformers/tokenizer.py",
    "get_processor": "utils/hf_transformers/processor.py",
    "init_tokenizer_and_processor": "managers/tokenizer_manager.py TokenizerManager",
    "init_tokenizer": "managers/scheduler.py Scheduler",
}

# name -> (regex, the program that prints it): not SGLang's text, so not checked against the wheel.
FOREIGN_TEXT = {
    "uvicorn_running": (r"Uvicorn running on ", "uvicorn 0.55 uvicorn/config.py Config.bind_socket"),
    "uvicorn_startup": (r"Application startup complete\.", "uvicorn 0.55 uvicorn/lifespan/on.py"),
    "uvicorn_warmup_request": (r'"GET /model_info HTTP/1\.1" 200',
                               "uvicorn 0.55 uvicorn/protocols/http access log of the warmup's first request"),
    "uvicorn_health_request": (r'"GET /health(?:_generate)? HTTP/1\.1" \d+',
                               "uvicorn 0.55 uvicorn/protocols/http access log of a /health probe"),
    "traceback": (r"Traceback \(most recent call last\):", "CPython Lib/traceback.py"),
    "faulthandler": (r"Fatal Python error", "CPython faulthandler (scheduler processes enable it)"),
    "segfault": (r"Segmentation fault", "CPython faulthandler / the kernel"),
    "cuda_oom": (r"CUDA error: out of memory", "torch c10/cuda CUDAException"),
    "torch_oom": (r"OutOfMemoryError", "torch torch.OutOfMemoryError"),
    "oom_killer": (r"Killed process", "the kernel OOM killer (only in the journal when kernel messages are read)"),
    "oom_kill_summary": (r"oom-kill:constraint=", "Linux mm/oom_kill.c dump_oom_summary (the kernel log)"),
    "nccl_error": (r"NCCL error", "torch ProcessGroupNCCL watchdog"),
    "cpp_terminate": (r"terminate called after", "libstdc++ std::terminate"),
    "config_invalid": (r"config file at .* is not a valid JSON file|does not appear to have a file named config",
                       "transformers 5.19.0 configuration_utils.py PretrainedConfig._dict_from_json_file"),
    "no_kernel_image": (r"no kernel image is available for execution",
                        "the CUDA runtime's cudaErrorNoKernelImageForDevice text, raised by torch (CUDA error: ...)"),
    "bind_failed": (r"error while attempting to bind on address",
                    "CPython 3.11 Lib/asyncio/base_events.py create_server, logged by uvicorn 0.55 server.py "
                    "Server.startup (SGLang 0.5.23 http_server.py runs uvicorn.Server)"),
    "dist_store_timeout": (r"Timed out after \d+ seconds waiting for clients\. \d+/\d+ clients joined\.",
                           "torch 2.14.1 libtorch_cpu.so, TCPStore's server (global rank 0) at init_process_group"),
    "dist_connect_timeout": (r"The client socket has timed out after \d+ms while trying to connect to",
                             "torch 2.14.1 libtorch_cpu.so, a TCPStore client (a rank of another node)"),
    "gloo_closed": (r"Connection closed by peer", "torch 2.14.1 libtorch_cpu.so, gloo transport/tcp/pair.cc"),
    "address_in_use": (r"\[Errno 98\] Address already in use",
                       "the OSError of EADDRINUSE (strerror), e.g. a socket SGLang binds itself"),
}


def text_re(name):
    """The compiled regex of one ``WHEEL_TEXT`` or ``FOREIGN_TEXT`` entry."""
    entry = WHEEL_TEXT.get(name) or FOREIGN_TEXT[name]
    return re.compile(entry[0])


def any_text_re(*names):
    """One compiled regex that matches any of the named ``WHEEL_TEXT`` / ``FOREIGN_TEXT`` entries."""
    return re.compile("|".join("(?:%s)" % (WHEEL_TEXT.get(n) or FOREIGN_TEXT[n])[0] for n in names))
