"""Launch the (simulated) inference server: ``python -m sglang.launch_server ARGS``.

As SGLang 0.5.23 ``launch_server.py``: parse, then ``run_server`` inside ``try/finally: kill_process_tree(own pid,
include_parent=False)``. ``run_server`` resolves the arguments first (the model config is read there, before any log
line), then ``entrypoints/http_server.py launch_server`` -> ``Engine._launch_subprocesses`` (``entrypoints/engine.py``).
An exception in the parent is uncaught: Python prints its traceback and the process exits 1.
"""
import os
import sys
import warnings


def run_server(args):
    from sglang.srt.entrypoints import engine, http_server

    hf_config = engine.get_config(args.model_path)
    schedulers, detok, cfg, _tokenizer_manager = engine.launch_subprocesses(args, hf_config)
    cfg["model_type"] = hf_config.get("model_type")
    cfg["has_vision"] = "vision_config" in hf_config
    infos = engine.wait_for_scheduler_ready(schedulers)
    if detok is None:  # a node of rank >= 1
        engine.run_follower(args, schedulers)
        return
    cfg["max_total_num_tokens"] = infos[0].get("max_total_num_tokens")
    engine.wait_for_scheduler_ready([detok])
    watchdog = engine.start_watchdog(schedulers, detok)
    http_server.launch_server(args, schedulers, detok, cfg, watchdog)


def main(argv=None):
    from sglang.srt.server_args import prepare_server_args
    from sglang.srt.utils import kill_process_tree

    args = prepare_server_args(sys.argv[1:] if argv is None else argv)
    try:
        run_server(args)
    finally:
        kill_process_tree(os.getpid(), include_parent=False)


if __name__ == "__main__":
    warnings.warn(
        "'python -m sglang.launch_server' is still supported, but "
        "'sglang serve' is the recommended entrypoint.\n"
        "  Example: sglang serve --model-path <model> [options]",
        UserWarning,
        stacklevel=1,
    )
    main()
