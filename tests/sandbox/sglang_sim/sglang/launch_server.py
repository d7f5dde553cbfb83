"""Launch the (simulated) inference server: ``python -m sglang.launch_server ARGS``."""
import logging
import os
import sys
import warnings

logger = logging.getLogger("sglang.srt.entrypoints.http_server")


def run_server(args):
    from sglang.srt.entrypoints import engine, http_server
    from sglang.srt.utils import configure_logger

    configure_logger()
    logger.info(f"server_args=ServerArgs({', '.join(f'{k}={v!r}' for k, v in sorted(vars(args).items()))})")
    hf_config = engine.get_config(args.model_path)
    schedulers, detok, cfg = engine.launch_subprocesses(args, hf_config)
    cfg["model_type"] = hf_config.get("model_type")
    infos = engine.wait_for_scheduler_ready(schedulers)
    cfg["max_total_num_tokens"] = infos[0].get("max_total_num_tokens")
    engine.wait_for_scheduler_ready([detok])
    http_server.serve(args, schedulers, detok, cfg)


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
