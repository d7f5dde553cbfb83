#!/usr/bin/python3
"""Summarise fake_hub.py's --log (one JSON line per request) after the first --skip lines, as JSON:
requests, body bytes sent, GET requests answered 206 (a Range resume), and the paths that were."""
import argparse
import json


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--log", required=True)
    ap.add_argument("--skip", type=int, default=0)
    args = ap.parse_args()
    with open(args.log) as handle:
        entries = [json.loads(line) for line in handle if line.strip()]
    tail = entries[args.skip:]
    ranged = [e["path"] for e in tail if e["method"] == "GET" and e["status"] == 206]
    print(json.dumps({"lines": len(entries), "requests": len(tail), "bytes": sum(e["bytes"] for e in tail),
                      "ranged": len(ranged), "ranged_paths": ranged}))


if __name__ == "__main__":
    main()
