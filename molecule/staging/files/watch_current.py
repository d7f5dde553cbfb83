#!/usr/bin/python3
"""Sample where a `current` symlink points every 20 ms; append each new target to --out (one line each).

Runs until --stop-file exists or --seconds pass (bounded), so a verify play can run it as a transient unit.
"""
import argparse
import os
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--link", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--stop-file", required=True)
    ap.add_argument("--seconds", type=float, default=300.0)
    args = ap.parse_args()
    last = None
    deadline = time.monotonic() + args.seconds
    with open(args.out, "a") as out:
        while time.monotonic() < deadline and not os.path.exists(args.stop_file):
            try:
                target = os.readlink(args.link)
            except OSError as exc:
                target = "(unreadable: %s)" % exc.strerror
            if target != last:
                out.write(target + "\n")
                out.flush()
                last = target
            time.sleep(0.02)
        out.write("(stopped)\n")


if __name__ == "__main__":
    main()
