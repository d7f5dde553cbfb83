#!/usr/bin/python3
"""A foreign process that holds a sandbox GPU (stdlib only): what an operator's forgotten notebook or another
team's job is to a real GPU.

    gpu-hog --gpu 3 --mib 20480 [--busy] [--state-dir /tmp/sglang-sim]

It publishes itself in the process state directory the GPU stand-in reads (the format of the SGLang simulator's
``sim_state.py``) and sleeps until SIGTERM/SIGINT, then removes its file. While it lives, ``nvidia-smi
--query-compute-apps`` lists its PID on that GPU; when it is killed (SIGKILL) its file stays but the stand-in
skips it, as a dead process leaves nothing on a real GPU.
"""
import argparse
import json
import os
import signal
import sys
import time


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpu", type=int, required=True, help="index among CUDA_VISIBLE_DEVICES (or the physical index)")
    ap.add_argument("--mib", type=int, default=20480, help="GPU memory it holds")
    ap.add_argument("--busy", action="store_true", help="its GPU reads 100 %% utilization")
    ap.add_argument("--state-dir", default=os.environ.get("SGLANG_SIM_STATE_DIR", "/tmp/sglang-sim"))
    args = ap.parse_args(argv)
    os.makedirs(args.state_dir, exist_ok=True)
    path = os.path.join(args.state_dir, "%d.json" % os.getpid())
    with open(path + ".tmp", "w", encoding="utf-8") as fh:
        json.dump({"pid": os.getpid(), "title": "python3", "gpu_id": args.gpu, "phase": "foreign",
                   "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"), "gpu_memory_used_mib": args.mib,
                   "gpu_busy": args.busy, "updated": time.time()}, fh)
    os.replace(path + ".tmp", path)

    def leave(signum, frame):
        try:
            os.unlink(path)
        except OSError:
            pass
        sys.exit(0)

    signal.signal(signal.SIGTERM, leave)
    signal.signal(signal.SIGINT, leave)
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    main()
