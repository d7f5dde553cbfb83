# -*- coding: utf-8 -*-
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""model_stage's Hugging Face Hub source (HfSource): the protocol is model_sources.py's, the shared parts
model_source_base.py's."""

from __future__ import absolute_import, division, print_function

import glob
import os
import shutil
import tempfile
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import quote

from ansible_collections.blackwell.sglang.plugins.module_utils.staging.durable_files import (
    read_json, stat_record, tree_bytes,
)
from ansible_collections.blackwell.sglang.plugins.module_utils.staging.model_files import (
    WEIGHT_SUFFIXES, dir_reader, missing_files,
)
from ansible_collections.blackwell.sglang.plugins.module_utils.staging.model_index import (
    INDEX_NAME, SINGLE_FILE, ModelIndexError, load_index,
)
from ansible_collections.blackwell.sglang.plugins.module_utils.staging.model_mirror import Mirror, redact_url
from ansible_collections.blackwell.sglang.plugins.module_utils.staging.model_store import StageError
from ansible_collections.blackwell.sglang.plugins.module_utils.staging.stage_progress import follow_process

from ansible_collections.blackwell.sglang.plugins.module_utils.staging.model_source_base import (
    FileSource, checkpoint_files, fetch_header_index, hashed, mirror_file, read_mirror_index, run_pool, single_file,
)

__metaclass__ = type

# huggingface_hub's default endpoint (constants.ENDPOINT) when neither hf_endpoint nor HF_ENDPOINT names another.
HUB_ENDPOINT = "https://huggingface.co"


class HfSource(FileSource):
    """The Hugging Face Hub, through ``<hf_python> <hf_helper>`` (huggingface_hub lives in a staging venv).

    ``plan`` runs the helper with ``--plan-dir``: it lists the revision (``HfApi.model_info(files_metadata=True)``:
    the commit, each file's size and, for LFS files, its sha256) and downloads the files that are not weights into a
    scratch directory, where the index and the configs are read. ``transfer`` runs it again for the files to stage,
    pinned to that commit, and hashes each file as soon as huggingface_hub has renamed it into place while the rest
    download: the file is still in the page cache, and the hashing overlaps the transfer instead of following it.
    """

    def __init__(self, params):
        super(HfSource, self).__init__(params)
        self.params = params
        self.repo = params["hf_repo_id"]
        self.rev = params["hf_revision"] or params["revision"]
        self.description = "hf://%s@%s" % (self.repo, self.rev)
        self.sums = {}

    def missing_tools(self):
        p = self.params
        return ["%s %s does not exist; the model_stage role creates the staging venv and ships the helper "
                "(model_stage_hf_venv)" % (what, p[what]) for what in ("hf_python", "hf_helper")
                if not p[what] or not os.path.exists(p[what])]

    def hub_files(self):
        """The pinned revision's files as the Hub serves them, without huggingface_hub: a Mirror over its resolve URL
        (what ``hf_hub_url`` builds, ``<endpoint>/<repo>/resolve/<revision>/<file>``) that sends the token as
        huggingface_hub does (``token``, else ``HF_TOKEN``; to the endpoint's host only, not to the CDN a large file
        redirects to; endpoint ``hf_endpoint``, else ``HF_ENDPOINT``)."""
        p = self.params
        endpoint = p.get("hf_endpoint") or os.environ.get("HF_ENDPOINT") or HUB_ENDPOINT
        token = p.get("token") or os.environ.get("HF_TOKEN")
        base = "%s/%s/resolve/%s" % (endpoint.rstrip("/"), quote(self.repo), quote(self.rev, safe=""))
        return Mirror(base, host_bound_headers={"Authorization": "Bearer %s" % token} if token else {},
                      timeout=p["timeout"], retries=p["retries"], retry_delay=p["retry_delay"], stop=self.stop)

    def index_location(self):
        return redact_url(self.hub_files().url(INDEX_NAME))

    def read_index(self):
        """The pinned revision's index (or single-file header) over HTTP: needs no staging venv, so preflight reads it
        on a fresh host."""
        return read_mirror_index(self.hub_files())

    def config_bytes(self):
        return mirror_file(self.hub_files(), "config.json")

    def run_helper(self, args, report_path, tick):
        """Run the helper with ``args``; returns its JSON report ``{"commit", "files": {name: {size, sha256}}}``."""
        problems = self.missing_tools()
        if problems:
            raise StageError(problems)
        p = self.params
        argv = [p["hf_python"], p["hf_helper"], "--repo-id", self.repo, "--max-workers", str(self.parallel),
                "--report", report_path] + args
        env = dict(os.environ)
        env.pop("HF_TOKEN", None)
        env.update(HF_HUB_DISABLE_TELEMETRY="1", HF_HUB_DISABLE_PROGRESS_BARS="1")
        if p["token"]:
            env["HF_TOKEN"] = p["token"]  # environment only: argv is visible in ps
        if p["hf_endpoint"]:
            env["HF_ENDPOINT"] = p["hf_endpoint"]
        returncode, tail = follow_process(argv, env, tick, min(p["progress_interval"], 0.5))
        if returncode != 0:
            raise StageError("the hf helper failed (exit %d) downloading %s: %s; re-run resumes what was downloaded"
                             % (returncode, self.description, " | ".join(tail) or "no output"))
        report = read_json(report_path)
        if not isinstance(report, dict) or not isinstance(report.get("files"), dict):
            raise StageError("the hf helper wrote no readable report at %s" % report_path)
        os.unlink(report_path)
        return report

    def plan(self):
        scratch = tempfile.mkdtemp(prefix="model_stage-hf-plan-")
        try:
            args = ["--revision", self.rev, "--plan-dir", scratch]
            for pattern in self.params["allow_patterns"]:
                args += ["--allow-pattern", pattern]
            for suffix in WEIGHT_SUFFIXES:
                args += ["--skip-suffix", suffix]
            report = self.run_helper(args, os.path.join(scratch, ".hf-report.json"), lambda: None)
            listed = dict((k, v) for k, v in report["files"].items() if isinstance(v, dict))
            self.rev = report.get("commit") or self.rev
            pinned = self.params["hf_revision"] or self.params["revision"]
            self.description = "hf://%s@%s (commit %s)" % (self.repo, pinned, self.rev)
            self.sums = dict((k, v["sha256"]) for k, v in listed.items() if v.get("sha256"))
            single = single_file(listed, self.description)
            if single:  # the header alone, with ranged GETs of the pinned commit's file
                hub = self.hub_files()
                index = fetch_header_index(hub, single, redact_url(hub.url(single)), listed[single].get("size"))
            elif INDEX_NAME not in listed:
                raise StageError("%s has no %s and no %s; stage a safetensors checkpoint (sharded with its index, "
                                 "or a single %s)" % (self.description, INDEX_NAME, SINGLE_FILE, SINGLE_FILE))
            else:
                try:
                    index = load_index(os.path.join(scratch, INDEX_NAME))
                except ModelIndexError as exc:
                    raise StageError(str(exc))
            files, skipped = checkpoint_files(listed, index, single)
            problems = []
            absent = sorted(f for f in files if f not in listed)
            if absent:
                problems.append("%d file(s) named in %s are not in %s: %s"
                                % (len(absent), INDEX_NAME, self.description, ", ".join(absent)))
            if "config.json" not in files:
                problems.append("config.json is not in %s; SGLang cannot load the model without it"
                                % self.description)
            read, _exists = dir_reader(scratch, set(files))
            problems.extend(missing_files(read, lambda n: n in files and n in listed, where=self.description))
            if problems:
                raise StageError(problems)
            return {"index": index, "files": sorted(files), "skipped": skipped, "sha256": self.sums,
                    "sizes": dict((f, listed[f].get("size")) for f in files)}
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

    def still_valid(self, rel, rec):
        return self.sums.get(rel) in (None, rec.get("sha256"))

    # partial_bytes: 0 (FileSource's); huggingface_hub resumes its own .incomplete files under dest_dir/.cache

    def transfer(self, dest_dir, names, expected, sizes, progress, on_done):
        if not names:  # the helper without --allow-pattern would fetch the whole revision
            return {}, []
        os.makedirs(dest_dir, exist_ok=True)
        args = ["--revision", self.rev, "--local-dir", dest_dir]
        for name in names:
            args += ["--allow-pattern", glob.escape(name)]  # the name itself: huggingface_hub matches with fnmatch
        wanted, early, landed, seen = set(names), {}, set(), [tree_bytes(dest_dir)]
        hasher = ThreadPoolExecutor(max_workers=max(1, self.parallel))

        def tick():  # the bytes the helper has written so far become progress; one walk of dest_dir per tick
            top = []
            now = tree_bytes(dest_dir, top)
            progress.add(max(0, now - seen[0]))
            seen[0] = max(seen[0], now)
            for entry in sorted(set(top) & (wanted - landed)):
                landed.add(entry)
                early[entry] = hasher.submit(hashed, os.path.join(dest_dir, entry))

        try:
            self.run_helper(args, os.path.join(dest_dir, ".hf-report.json"), tick)
        finally:
            hasher.shutdown(wait=True)
        # A file that vanished or failed to read while downloading is simply hashed again below.
        early = dict((rel, f.result()) for rel, f in early.items() if f.exception() is None)
        shutil.rmtree(os.path.join(dest_dir, ".cache"), ignore_errors=True)

        def work(rel):
            path = os.path.join(dest_dir, rel)
            if not os.path.isfile(path):
                raise StageError("%s: not downloaded from %s (the helper finished without it)"
                                 % (path, self.description))
            now, rec = stat_record(path), early.get(rel)
            # A hash taken while downloading counts only for the very file that is there now.
            if not rec or any(rec.get(k) != now[k] for k in now):
                rec = hashed(path)
            rec = {"sha256": rec["sha256"], "transferred": now["size"], "resumed_from": 0}
            on_done(rel, rec)
            return rec
        return run_pool(sorted(names), work, self.parallel, self.stop)
