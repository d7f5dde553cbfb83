#!/usr/bin/python3
"""Wait until a staging run has written --min-bytes into --partial, then SIGKILL the model_stage module process.

Prints JSON: the killed PIDs (found by their command line, this process excluded) and the bytes on disk at the kill.
Bounded: gives up after --timeout seconds (exit 1).
"""
import argparse
import json
import os
import signal
import sys
import time


def tree_bytes(root):
    """Bytes of the files directly in ``root`` (the .partial directory is flat); 0 before it exists."""
    try:
        return sum(entry.stat(follow_symlinks=False).st_size for entry in os.scandir(root) if entry.is_file())
    except OSError:
        return 0


def module_pids(marker):
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open("/proc/%s/cmdline" % entry, "rb") as handle:
                cmdline = handle.read().decode("utf-8", "replace")
        except OSError:
            continue
        if marker in cmdline:
            pids.append(int(entry))
    return pids


def alive(pid):
    """True while ``pid`` exists and is not a zombie (it may vanish between any two reads)."""
    try:
        with open("/proc/%d/stat" % pid) as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--partial", required=True)
    ap.add_argument("--min-bytes", type=int, required=True)
    ap.add_argument("--marker", default="AnsiballZ_model_stage")
    ap.add_argument("--timeout", type=float, default=60.0)
    args = ap.parse_args()
    deadline = time.monotonic() + args.timeout
    while tree_bytes(args.partial) < args.min_bytes:
        if time.monotonic() > deadline:
            print(json.dumps({"error": "%s held %d bytes after %ss" % (args.partial, tree_bytes(args.partial),
                                                                         args.timeout)}))
            return 1
        time.sleep(0.05)
    pids = module_pids(args.marker)
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    at_kill = tree_bytes(args.partial)
    while any(alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    print(json.dumps({"killed": pids, "partial_bytes": at_kill}))
    return 0 if pids else 1


if __name__ == "__main__":
    sys.exit(main())
