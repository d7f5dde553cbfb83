"""Download one pinned Hub revision into a directory; run by the model_stage module with the staging venv's python.

``hf_snapshot.py --repo-id R --revision REV --local-dir DIR [--allow-pattern P ...] [--max-workers N] --report F``
``hf_snapshot.py --repo-id R --revision REV --plan-dir DIR [--skip-suffix S ...] [--allow-pattern P ...] --report F``

* with ``--local-dir`` it downloads the revision's files that match the patterns into DIR; with ``--plan-dir`` it
  writes the same report (the listing) and downloads only the top-level files whose names do not end with a
  ``--skip-suffix`` (model_stage passes its weight suffixes): the index, configs, tokenizer and code files, which
  model_stage reads to plan and check the staging before a shard moves;
* the token comes only from the environment (``HF_TOKEN``), never from argv; ``HF_ENDPOINT`` selects a mirror;
* ``snapshot_download(..., local_dir=DIR)`` resumes what an earlier run left in ``DIR/.cache/huggingface``;
* the report (JSON) names the resolved commit and, per file, its size and the Hub's LFS sha256 (when the file
  is stored with LFS), which model_stage checks after hashing the files itself.
"""

import argparse
import fnmatch
import glob
import json
import os
import sys


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--repo-id", required=True)
    ap.add_argument("--revision", required=True)
    where = ap.add_mutually_exclusive_group(required=True)
    where.add_argument("--local-dir")
    where.add_argument("--plan-dir")
    ap.add_argument("--skip-suffix", action="append", default=[])
    ap.add_argument("--allow-pattern", action="append", default=[])
    ap.add_argument("--max-workers", type=int, default=4)
    ap.add_argument("--report", required=True)
    args = ap.parse_args(argv)
    if "--token" in " ".join(sys.argv):
        raise SystemExit("pass the token in HF_TOKEN, not on the command line")
    from huggingface_hub import HfApi, snapshot_download

    api = HfApi()
    info = api.model_info(args.repo_id, revision=args.revision, files_metadata=True)
    patterns = args.allow_pattern or None
    files = {}
    for sibling in info.siblings or []:
        name = sibling.rfilename
        if patterns and not any(fnmatch.fnmatch(name, p) for p in patterns):
            continue
        lfs = getattr(sibling, "lfs", None)
        files[name] = {"size": sibling.size, "sha256": lfs.sha256 if lfs is not None else None}
    if args.plan_dir:
        small = [glob.escape(name) for name in sorted(files)
                 if "/" not in name and not name.endswith(tuple(args.skip_suffix))]
        if small:
            snapshot_download(args.repo_id, revision=info.sha, local_dir=args.plan_dir, allow_patterns=small,
                              max_workers=args.max_workers)
    else:
        snapshot_download(args.repo_id, revision=info.sha, local_dir=args.local_dir, allow_patterns=patterns,
                          max_workers=args.max_workers)
    tmp = args.report + ".tmp"
    with open(tmp, "w") as handle:
        json.dump({"repo_id": args.repo_id, "commit": info.sha, "files": files}, handle)
    os.replace(tmp, args.report)
    print("%s %d file(s) of %s at %s" % ("listed" if args.plan_dir else "downloaded", len(files), args.repo_id, info.sha))


if __name__ == "__main__":
    main()
