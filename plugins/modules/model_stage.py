#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: model_stage
short_description: Stage a sharded safetensors checkpoint into the model store, verify it, activate it atomically
description:
  - Brings a model directory into C(<store>/<name>/<revision>.partial/) from a local or mounted directory
    (O(source=path)), a plain HTTP(S) mirror with a sha256 manifest (O(source=http)) or the Hugging Face Hub through a
    helper run by a staging virtualenv (O(source=hf)); hashes every file with sha256 while it is written (one pass for
    C(path) and C(http)), verifies every shard named in C(model.safetensors.index.json) (present, header parses, tensors
    cover the data bytes exactly, tensors listed in the index), the sha256 manifest, C(config.json) and
    C(tokenizer*.json) (non-empty valid JSON), writes C(<revision>/.manifest.json), renames the directory to
    C(<store>/<name>/<revision>/) and flips the C(<store>/<name>/current) symlink with an atomic rename.
  - Refuses a checkpoint that lacks a non-weight file its own configs require, naming it and why. The set is the
    C(auto_map) modules of config.json, tokenizer_config.json and the processor configs, every module they import
    relatively (Kimi's C(tokenization_kimi.py) imports C(tool_declaration_ts.py)), the tokenizer class's
    C(vocab_files_names) (C(tiktoken.model)) and the chat template. For C(path) and C(http) sources this happens
    before any shard moves, and for every source again on the staged tree before the rename. Staged files must be
    real files, not symlinks.
  - C(current) never points at a partial or unverified directory.
  - Transfers run in parallel (O(parallel) threads). An interrupted run resumes; finished files recorded in the staging
    journal are kept, and an HTTP file cut off mid-way continues with a C(Range) request (when the server answers
    C(206); otherwise that file starts again).
  - A re-run whose C(<revision>/.manifest.json) matches every file by size, mtime and inode (stat only, no hashing, no
    network) and whose C(current) already points at the revision changes nothing. A staged file that changed or
    disappeared is fetched again (checked against the sha256 recorded in the manifest) and replaced atomically; the
    other files are kept.
  - Before any byte moves the module checks that the store has free space for the bytes still to transfer x 1.05.
  - Durability is batched; there is no fsync as each file ends. Writeback starts while a file is written. The finished
    files are made durable in batches, at most 30 s apart and always before verification. Each batch issues its
    C(fdatasync) calls together, so the filesystem commits them at once. Only then does the staging journal record
    them. Nothing is recorded, renamed or pointed at before it is durable. A file that an
    interrupted run finished but had not recorded yet is hashed again, not fetched again.
options:
  name:
    description: Model name; the directory under O(store) (for example C(Kimi-K2.5)).
    type: str
    required: true
  revision:
    description: Revision label (a commit hash or a tag); the directory under C(<store>/<name>).
    type: str
    required: true
  source:
    description:
      - C(path) copies from O(source_path); C(http) downloads from O(url); C(hf) runs O(hf_helper) with O(hf_python).
    type: str
    choices: [path, http, hf]
    default: path
  source_path:
    description: Directory holding C(model.safetensors.index.json), the shards, C(config.json) and tokenizer files.
    type: path
  url:
    description:
      - Base URL of an HTTP(S) mirror of the model directory (O(source=http)); C(<url>/<file>) must serve each file and
        should honour C(Range).
    type: str
  manifest:
    description:
      - 'Name (relative to O(url) or O(source_path)) or absolute URL of the sha256 manifest, in C(sha256sum) format or
        JSON C({"files": {"<name>": {"sha256": "<hex>", "size": <bytes>}}}); a staged revision directory served over
        HTTP offers C(.manifest.json).'
      - Required to exist for O(source=http) (it lists the files to fetch); used when present for O(source=path).
    type: str
    default: SHA256SUMS
  token:
    description: Bearer token for an authenticated mirror (O(source=http)) or the Hub (O(source=hf), passed as C(HF_TOKEN)).
    type: str
  headers:
    description: Extra HTTP request headers for the mirror (for example an API key header).
    type: dict
    default: {}
  parallel:
    description: Files transferred at once.
    type: int
    default: 4
  retries:
    description: Retries per file after a transient failure (connection lost, timeout, HTTP 5xx/429).
    type: int
    default: 5
  retry_delay:
    description: Seconds before the first retry; doubled for each further retry (at most 60).
    type: float
    default: 2.0
  timeout:
    description: Socket timeout in seconds for one HTTP read.
    type: int
    default: 60
  progress_file:
    description:
      - File the progress lines are appended to while staging (C(tail -f) it). Default C(<store>/<name>/.<revision>.progress).
    type: path
  progress_interval:
    description: Seconds between two progress lines.
    type: float
    default: 10.0
  hf_repo_id:
    description: Hub repository (O(source=hf)), for example C(moonshotai/Kimi-K2.5).
    type: str
  hf_revision:
    description: Hub revision to download (pin a commit hash); defaults to O(revision).
    type: str
  hf_endpoint:
    description: Hub endpoint (C(HF_ENDPOINT)); empty uses the library's default.
    type: str
    default: ""
  hf_python:
    description: Python of the staging virtualenv that has C(huggingface_hub) installed.
    type: path
    default: /opt/sglang/stage-venv/bin/python
  hf_helper:
    description: The helper script shipped by the model_stage role (C(hf_snapshot.py)).
    type: path
  allow_patterns:
    description: Glob patterns of files to download from the Hub (O(source=hf)); empty downloads the whole revision.
    type: list
    elements: str
    default: []
  store:
    description: Root of the model store.
    type: path
    default: /srv/models
  activate:
    description:
      - C(true) points C(current) at the revision once it is staged and verified.
      - C(false) stages and verifies it and leaves C(current) where it is, so a server that restarts on its own keeps
        loading what it served; the rolling redeploy flips C(current) when it switches the node (RV(activated)).
    type: bool
    default: true
  nice:
    description:
      - Niceness added to the staging process (0-19); above 0 it also gets the idle I/O class, so staging on a
        serving node yields the CPU and the disk to the server (the rolling redeploy's prepare step sets it).
    type: int
    default: 0
  link_mode:
    description:
      - C(copy) copies every file. C(hardlink) links them (O(source=path) only; source and store must be on one
        filesystem; the store then shares the source's data, so never edit the source in place).
    type: str
    choices: [copy, hardlink]
    default: copy
attributes:
  check_mode:
    support: full
    description: Plans the staging (what is present, what would be fetched) and fetches and writes nothing.
notes:
  - Top-level regular files of O(source_path) (or files listed in the manifest for O(source=http)) are staged, except
    hidden files and weight files (C(.safetensors), C(.bin), C(.pt), C(.pth), C(.gguf), C(.h5), C(.msgpack), C(.ckpt))
    not named in the index; they are listed in RV(skipped).
  - O(token) and O(headers) are never logged or put into messages.
author:
  - sglang-ansible contributors (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Stage Kimi-K2.5 from the NFS mirror and make it current
  model_stage:
    name: Kimi-K2.5
    revision: "{{ model_stage_revision }}"
    source: path
    source_path: /mnt/mirror/moonshotai/Kimi-K2.5
    store: /srv/models

- name: Stage Kimi-K2.5 from the site's HTTP mirror (SHA256SUMS beside the shards)
  model_stage:
    name: Kimi-K2.5
    revision: 4f2a9c1
    source: http
    url: http://mirror.internal/models/Kimi-K2.5/4f2a9c1
    token: "{{ vault_mirror_token }}"
    parallel: 4
  register: model_stage_result

- name: Stage from the Hub through the staging virtualenv
  model_stage:
    name: Kimi-K2.5
    revision: 4f2a9c1
    source: hf
    hf_repo_id: moonshotai/Kimi-K2.5
    hf_helper: /opt/sglang/stage-venv/hf_snapshot.py
    token: "{{ vault_hf_token }}"
"""

RETURN = r"""
path:
  description: The staged revision directory.
  returned: always
  type: str
  sample: /srv/models/Kimi-K2.5/4f2a9c1
current:
  description: The C(current) symlink.
  returned: always
  type: str
  sample: /srv/models/Kimi-K2.5/current
activated:
  description: Whether C(current) points at the revision now (false with O(activate=false) until the switch).
  returned: always
  type: bool
  sample: true
shards:
  description: Number of shards named in the index.
  returned: always
  type: int
  sample: 64
total_bytes:
  description: Bytes of all staged files.
  returned: always
  type: int
  sample: 547000000000
copied_bytes:
  description:
    - Bytes copied or downloaded in this run (0 on a no-op or with hardlinks; in check mode, bytes that would move).
  returned: always
  type: int
verified:
  description: True when every file of the revision passed verification (this run or the run that wrote the manifest).
  returned: always
  type: bool
resumed_files:
  description: Files of an interrupted earlier run that were kept instead of transferred again.
  returned: when staged
  type: int
resumed_bytes:
  description: Bytes of partly downloaded files that an HTTP C(Range) request continued instead of fetching again.
  returned: when staged
  type: int
repaired:
  description: Files of an already staged revision that had changed or vanished and were fetched again.
  returned: when a staged revision was repaired
  type: list
  elements: str
skipped:
  description: Entries of the source that were not staged (subdirectories, weight files not in the index).
  returned: when staged
  type: list
  elements: str
progress:
  description: Progress lines written while staging (also appended to O(progress_file)).
  returned: always
  type: list
  elements: str
  sample: ["staged 12/64 shards, 143.2/547.0 GB, 1.9 GB/s, ETA 3m"]
progress_file:
  description: File the progress lines were appended to.
  returned: always
  type: str
actions:
  description: What was done (or, in check mode, what would be done).
  returned: always
  type: list
  elements: str
"""

import errno
import hashlib
import json
import os
import shutil
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.blackwell.sglang.plugins.module_utils.model_fetch import (
    DOWNLOAD_SUFFIX, FetchError, Mirror, Progress, follow_process, hash_prefix, pump, parse_manifest, redact_url,
    sync_files, tree_bytes,
)
from ansible_collections.blackwell.sglang.plugins.module_utils.model_files import CONFIG_FILES, dir_reader, missing_files, symlinks
from ansible_collections.blackwell.sglang.plugins.module_utils.model_index import INDEX_NAME, ModelIndexError, load_index, parse_index
from ansible_collections.blackwell.sglang.plugins.module_utils.priority import lower_priority
from ansible_collections.blackwell.sglang.plugins.module_utils.safetensors_header import ShardError, verify_shard

BUFFER_BYTES = 8 * 1024 * 1024
SPACE_MARGIN = 1.05
MANIFEST = ".manifest.json"
JOURNAL = ".staging.json"
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf", ".h5", ".msgpack", ".ckpt")
GB = 1000.0 ** 3
STAT_KEYS = ("size", "mtime_ns", "inode")
# Finished files are made durable (sync_files) and recorded in the journal in batches, at most this many
# seconds apart, and always before verification and the rename.
DURABLE_INTERVAL = 30.0


class StageError(Exception):
    """A problem that stops staging; ``problems`` is the list of messages."""

    def __init__(self, problems):
        if isinstance(problems, str):
            problems = [problems]
        super(StageError, self).__init__("; ".join(problems))
        self.problems = list(problems)


# ---------------------------------------------------------------- helpers

def stat_record(path):
    st = os.stat(path)
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "inode": st.st_ino}


def write_json_atomic(path, data):
    tmp = "%s.tmp-%d-%d" % (path, os.getpid(), threading.get_ident())
    with open(tmp, "w") as handle:
        json.dump(data, handle, indent=1, sort_keys=True)
        handle.write("\n")
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def fsync_dir(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read_json(path):
    try:
        with open(path) as handle:
            return json.load(handle)
    except (IOError, OSError, ValueError):
        return None


def copy_and_hash(src, dst, buffer_bytes=BUFFER_BYTES, on_bytes=None):
    """Copy ``src`` to ``dst`` in one pass, hashing as it goes (not fsynced: see Journal).
    Returns (bytes copied, sha256 hex)."""
    digest = hashlib.sha256()
    with open(src, "rb", buffering=0) as fin, open(dst, "wb", buffering=0) as fout:
        copied = pump(fin, fout, digest, buffer_bytes, on_bytes=on_bytes)
    return copied, digest.hexdigest()


class Journal(object):
    """The staging journal ``<partial>/.staging.json``: files recorded there are done and are kept by a re-run.

    A file is recorded only after it is durable. Instead of an fsync per file (a journal commit each, and the
    writer waits for the disk), finished files wait in ``pending``; ``commit`` makes them all durable at once
    (``sync_files``) and then writes the journal. ``add`` commits when the last commit is ``interval`` seconds old, so
    a crash loses at most that much recording (those files are then hashed again, not fetched again).
    """

    def __init__(self, path, data, interval=DURABLE_INTERVAL, clock=time.monotonic, sync=sync_files):
        self.path = path
        self.data = data
        self.interval = interval
        self.clock = clock
        self.sync = sync
        self.pending = {}
        self.last = clock()
        self.lock = threading.Lock()
        self.commit_lock = threading.Lock()

    def add(self, rel, rec):
        with self.lock:
            self.pending[rel] = rec
            due = self.clock() - self.last >= self.interval
        if due:
            self.commit()

    def commit(self):
        """Make every pending file durable, then record them. Returns how many were recorded."""
        with self.commit_lock:
            with self.lock:
                batch, self.pending = self.pending, {}
                self.last = self.clock()
            if not batch:
                return 0
            self.sync([os.path.join(os.path.dirname(self.path), rel) for rel in sorted(batch)])
            with self.lock:
                self.data["files"].update(batch)
                write_json_atomic(self.path, self.data)
            return len(batch)


def hash_file(path, buffer_bytes=BUFFER_BYTES):
    return hash_prefix(path, None, buffer_bytes)[0].hexdigest()


def existing_ancestor(path):
    path = os.path.abspath(path)
    while not os.path.exists(path):
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    return path


def check_label(kind, value):
    if not value or value in (".", "..") or "/" in value or value.startswith(".") or "\x00" in value:
        return ["%s %r must be a single directory name (no '/', not starting with '.')" % (kind, value)]
    if value.endswith(".partial") or value == "current":
        return ["%s %r is reserved by the store layout; choose another" % (kind, value)]
    return []


def select_files(names, shards, is_dir=None):
    """Split candidate top-level ``names`` into (files to stage, skipped)."""
    files, skipped = set(shards), []
    files.add(INDEX_NAME)
    for entry in sorted(names):
        if entry.startswith(".") or "/." in entry:
            continue
        if entry in shards or entry == INDEX_NAME:
            continue
        if is_dir is not None and is_dir(entry):
            skipped.append(entry + "/")
        elif "/" in entry:
            skipped.append(entry)
        elif entry.lower().endswith(WEIGHT_SUFFIXES):
            skipped.append(entry)
        else:
            files.add(entry)
    return files, skipped


def space_check(store, model_dir, remaining):
    needed = remaining * SPACE_MARGIN
    free = shutil.disk_usage(existing_ancestor(model_dir)).free
    if needed > free:
        raise StageError("not enough free space in %s: need %.1f GB (%.1f GB still to copy + 5%%), %.1f GB free; "
                         "free space or point store at a larger filesystem"
                         % (store, needed / GB, remaining / GB, free / GB))


def run_pool(names, work, parallel, stop):
    """Run ``work(name)`` for every name on ``parallel`` threads; return (results by name, problems).
    The first failure sets ``stop`` so the others end early; every failure is reported, naming its file."""
    results, problems = {}, []
    if not names:
        return results, problems
    with ThreadPoolExecutor(max_workers=max(1, min(parallel, len(names)))) as pool:
        def guarded(name):
            # Stop the pool from the failing worker itself: a single worker would otherwise take the
            # next file before the main thread sees this failure.
            try:
                return work(name)
            except Exception:
                stop.set()
                raise

        futures = dict((pool.submit(guarded, name), name) for name in names)
        # as_completed: a failure stops the others at once (their .download files stay for resume),
        # not when the loop happens to reach it in submission order.
        for future in as_completed(futures):
            name = futures[future]
            try:
                results[name] = future.result()
            except FetchError as exc:
                if not exc.reason.startswith("cancelled"):
                    problems.append(str(exc))
                stop.set()
            except StageError as exc:
                problems.extend(exc.problems)
                stop.set()
            except (IOError, OSError) as exc:
                stop.set()
                if exc.errno == errno.ENOSPC:
                    problems.append("%s: disk full while writing it (%s); free space and re-run, finished files are "
                                    "kept" % (name, exc))
                else:
                    problems.append("%s: %s" % (name, exc))
    return results, problems


# ---------------------------------------------------------------- sources

class PathSource(object):
    """A local or mounted model directory."""

    kind = "path"

    def __init__(self, params):
        self.root = params["source_path"]
        self.hardlink = params["link_mode"] == "hardlink"
        self.manifest_name = params["manifest"]
        self.sums = {}
        self.description = self.root

    def plan(self):
        src = self.root
        if not os.path.isdir(src):
            raise StageError("source_path %s is not a directory; expected the model directory holding %s"
                             % (src, INDEX_NAME))
        try:
            index = load_index(os.path.join(src, INDEX_NAME))
        except ModelIndexError as exc:
            raise StageError(str(exc))
        files, skipped = select_files(os.listdir(src), set(index["shards"]),
                                      lambda e: os.path.isdir(os.path.join(src, e)))
        sizes, missing = {}, []
        for rel in sorted(files):
            try:
                sizes[rel] = os.stat(os.path.join(src, rel)).st_size
            except OSError:
                missing.append(rel)
        problems = []
        listed = [m for m in missing if m in index["shards"]]
        if listed:
            problems.append("%d shard(s) named in %s are missing from %s: %s" % (
                len(listed), INDEX_NAME, src, ", ".join(listed)))
        other = [m for m in missing if m not in index["shards"]]
        if other:
            problems.append("missing in %s: %s" % (src, ", ".join(other)))
        if "config.json" not in files:
            problems.append("config.json is missing from %s; SGLang cannot load the model without it" % src)
        problems.extend(missing_files(*dir_reader(src, set(files) - set(missing)), where=src))
        manifest_path = os.path.join(src, self.manifest_name)
        if os.path.isfile(manifest_path):
            try:
                with open(manifest_path, "rb") as handle:
                    self.sums = parse_manifest(handle.read(), manifest_path)[0]
            except ValueError as exc:
                problems.append(str(exc))
        if problems:
            raise StageError(problems)
        return {"index": index, "files": sorted(files), "sizes": sizes, "skipped": skipped, "sha256": self.sums}

    def still_valid(self, rel, rec):
        try:
            now = stat_record(os.path.join(self.root, rel))
        except OSError:
            return False
        return now["size"] == rec.get("source_size") and now["mtime_ns"] == rec.get("source_mtime_ns")

    def partial_bytes(self, dest_dir, rel):
        return 0

    def fetch(self, rel, dest, expected_sha256, progress):
        s_path = os.path.join(self.root, rel)
        if os.path.lexists(dest):
            os.unlink(dest)
        before = stat_record(s_path)
        if self.hardlink:
            os.link(s_path, dest)
            n, digest = 0, hash_file(dest)
            progress.add(before["size"])
        else:
            n, digest = copy_and_hash(s_path, dest, on_bytes=progress.add)
            if n != before["size"] or stat_record(s_path)["mtime_ns"] != before["mtime_ns"]:
                raise StageError("%s changed while it was being copied (size %d, copied %d); wait for whatever "
                                 "writes the source to finish and re-run" % (s_path, before["size"], n))
        rec = {"sha256": digest, "transferred": n, "source_size": before["size"],
               "source_mtime_ns": before["mtime_ns"], "resumed_from": 0}
        return rec


class HttpSource(object):
    """A static HTTP(S) mirror of the model directory with a sha256 manifest."""

    kind = "http"

    def __init__(self, params, mirror=None):
        headers = dict(params.get("headers") or {})
        if params.get("token"):
            headers["Authorization"] = "Bearer %s" % params["token"]
        self.stop = threading.Event()
        self.mirror = mirror or Mirror(params["url"], headers=headers, timeout=params["timeout"],
                                       retries=params["retries"], retry_delay=params["retry_delay"], stop=self.stop)
        self.manifest_name = params["manifest"]
        self.parallel = params["parallel"]
        self.description = redact_url(params["url"])
        self.sums, self.sizes = {}, {}

    def load_sums(self):
        try:
            raw = self.mirror.get_bytes(self.manifest_name)
        except FetchError as exc:
            raise StageError("cannot read the sha256 manifest: %s; source=http needs %s beside the files (set manifest "
                             "to its name or URL)" % (exc, self.manifest_name))
        try:
            self.sums, self.sizes = parse_manifest(raw, self.mirror.url(self.manifest_name))
        except ValueError as exc:
            raise StageError(redact_url(str(exc)))
        return self.sums

    def plan(self):
        self.load_sums()
        try:
            index = parse_index(json.loads(self.mirror.get_bytes(INDEX_NAME).decode("utf-8")), INDEX_NAME)
        except FetchError as exc:
            raise StageError(str(exc))
        except (UnicodeDecodeError, ValueError) as exc:
            raise StageError("%s: %s" % (INDEX_NAME, exc))
        shards = set(index["shards"])
        files, skipped = select_files(self.sums, shards)
        problems = []
        unlisted = sorted(f for f in files if f not in self.sums)
        shard_gaps = [f for f in unlisted if f in shards]
        if shard_gaps:
            problems.append("%d shard(s) named in %s are not in %s, so they cannot be verified: %s"
                            % (len(shard_gaps), INDEX_NAME, self.manifest_name, ", ".join(shard_gaps)))
        if INDEX_NAME in unlisted:
            problems.append("%s is not listed in %s" % (INDEX_NAME, self.manifest_name))
        if "config.json" not in files:
            problems.append("config.json is not listed in %s; SGLang cannot load the model without it"
                            % self.manifest_name)
        if problems:
            raise StageError(problems)
        problems = missing_files(self.small_file_reader(files), lambda n: n in files,
                                 where="%s (%s)" % (self.description, self.manifest_name))
        if problems:
            raise StageError(problems)
        unknown = sorted(f for f in files if f not in self.sizes)
        stop = threading.Event()
        sizes, problems = run_pool(unknown, self.mirror.head_size, self.parallel * 2, stop)
        if problems:
            raise StageError(["the mirror %s does not serve every file the manifest lists" % self.description]
                             + problems)
        self.sizes.update(dict((k, v) for k, v in sizes.items() if v is not None))
        return {"index": index, "files": sorted(files), "sizes": dict((f, self.sizes.get(f)) for f in files),
                "skipped": skipped, "sha256": self.sums}

    def small_file_reader(self, files):
        """``read`` for model_files: the text of a listed config or module file, fetched once (None if unlisted)."""
        cache = {}

        def read(name):
            if name not in files:
                return None
            if name not in cache:
                try:
                    cache[name] = self.mirror.get_bytes(name).decode("utf-8", "replace")
                except FetchError as exc:
                    raise StageError("%s is listed in %s but cannot be read: %s" % (name, self.manifest_name, exc))
            return cache[name]
        return read

    def still_valid(self, rel, rec):
        return self.sums.get(rel) == rec.get("sha256")

    def partial_bytes(self, dest_dir, rel):
        """Bytes already here: a ``.download`` file, or the whole file left by a run that stopped before
        recording it (Mirror.download checks either against the manifest's sha256)."""
        path = os.path.join(dest_dir, rel)
        for candidate in (path + DOWNLOAD_SUFFIX, path):
            try:
                return os.path.getsize(candidate)
            except OSError:
                continue
        return 0

    def fetch(self, rel, dest, expected_sha256, progress):
        got = self.mirror.download(rel, dest, expected_size=self.sizes.get(rel), expected_sha256=expected_sha256,
                                   on_bytes=progress.add)
        return {"sha256": got["sha256"], "transferred": got["transferred"], "resumed_from": got["resumed_from"]}


class HfSource(object):
    """The Hugging Face Hub, through ``<hf_python> <hf_helper>`` (huggingface_hub lives in a staging venv)."""

    kind = "hf"

    def __init__(self, params):
        self.params = params
        self.repo = params["hf_repo_id"]
        self.rev = params["hf_revision"] or params["revision"]
        self.description = "hf://%s@%s" % (self.repo, self.rev)
        self.sums = {}

    def download(self, dest_dir, patterns, progress, on_file=None):
        """Run the helper into ``dest_dir``; returns its JSON report ``{"commit", "files": {name: {size, sha256}}}``.

        ``on_file(name)`` is called once for every file that has appeared at its final name in ``dest_dir`` (checked
        each tick): huggingface_hub writes into ``.cache/huggingface/download/*.incomplete`` and renames a file into
        place only once it is complete (huggingface_hub file_download.py ``_chmod_and_move``), so the caller can
        hash it while the others are still downloading."""
        p = self.params
        for what in ("hf_python", "hf_helper"):
            if not p[what] or not os.path.exists(p[what]):
                raise StageError("%s %s does not exist; the model_stage role creates the staging venv and ships the "
                                 "helper (model_stage_hf_venv)" % (what, p[what]))
        argv = [p["hf_python"], p["hf_helper"], "--repo-id", self.repo, "--revision", self.rev,
                "--local-dir", dest_dir, "--max-workers", str(p["parallel"])]
        for pattern in patterns:
            argv += ["--allow-pattern", pattern]
        env = dict(os.environ)
        env.pop("HF_TOKEN", None)
        env.update(HF_HUB_DISABLE_TELEMETRY="1", HF_HUB_DISABLE_PROGRESS_BARS="1")
        if p["token"]:
            env["HF_TOKEN"] = p["token"]  # environment only: argv is visible in ps
        if p["hf_endpoint"]:
            env["HF_ENDPOINT"] = p["hf_endpoint"]
        report_path = os.path.join(dest_dir, ".hf-report.json")
        argv += ["--report", report_path]
        seen = [0]
        landed = set()

        def tick():  # the bytes the helper has written so far become progress; one walk of dest_dir per tick
            top = []
            now = tree_bytes(dest_dir, top)
            progress.add(max(0, now - seen[0]))
            seen[0] = max(seen[0], now)
            if on_file is None:
                return
            for entry in sorted(top):
                if entry not in landed and not entry.startswith("."):
                    landed.add(entry)
                    on_file(entry)

        returncode, tail = follow_process(argv, env, tick, min(progress.interval, 0.5))
        if returncode != 0:
            raise StageError("the hf helper failed (exit %d) downloading %s: %s; re-run resumes what was downloaded"
                             % (returncode, self.description, " | ".join(tail) or "no output"))
        report = read_json(report_path)
        if not isinstance(report, dict) or not isinstance(report.get("files"), dict):
            raise StageError("the hf helper wrote no readable report at %s" % report_path)
        os.unlink(report_path)
        self.sums = dict((k, v["sha256"]) for k, v in report["files"].items()
                         if isinstance(v, dict) and v.get("sha256"))
        return report


# ---------------------------------------------------------------- store

def manifest_matches(final_dir, manifest):
    """Names of files whose size/mtime_ns/inode differ from ``manifest`` (stat only), with the reason."""
    changed = {}
    for rel, rec in sorted((manifest.get("files") or {}).items()):
        try:
            now = stat_record(os.path.join(final_dir, rel))
        except OSError:
            changed[rel] = "missing"
            continue
        diffs = [k for k in STAT_KEYS if now[k] != rec.get(k)]
        if diffs:
            changed[rel] = "%s changed" % ", ".join(diffs)
    return changed


def current_points_to(current, revision):
    return os.path.islink(current) and os.readlink(current).rstrip("/") in (revision, os.path.join(
        os.path.dirname(current), revision))


def flip_current(current, revision):
    """Point ``current`` at ``revision`` (relative target) atomically: symlink to a temp name, then os.replace."""
    if revision.endswith(".partial"):
        raise StageError("refusing to point %s at a partial directory %s" % (current, revision))
    if os.path.lexists(current) and not os.path.islink(current):
        raise StageError("%s exists and is not a symlink; expected the store to own it. Move it aside, then re-run"
                         % current)
    tmp = "%s.tmp-%d" % (current, os.getpid())
    if os.path.lexists(tmp):
        os.unlink(tmp)
    os.symlink(revision, tmp)
    os.replace(tmp, current)
    fsync_dir(os.path.dirname(current))


# ---------------------------------------------------------------- verify

def check_json_file(path):
    try:
        with open(path, "rb") as handle:
            raw = handle.read()
    except (IOError, OSError) as exc:
        return "%s: cannot read (%s)" % (path, exc.strerror or exc)
    if not raw.strip():
        return ("%s: file is empty, expected JSON (an empty config.json makes every scheduler crash, "
                "and the server logs only 'Received sigquit'); fetch it again" % path)
    try:
        json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        return "%s: not valid JSON (%s); fetch it again" % (path, exc)
    return None


def is_checked_json(rel):
    base = os.path.basename(rel)
    return rel in CONFIG_FILES or (base.startswith("tokenizer") and base.endswith(".json"))


def verify_file(root, rel, index):
    """Problems (list) with one staged file: shards by header and index, config/tokenizer JSON by content."""
    path = os.path.join(root, rel)
    if rel in index["tensors_by_shard"]:
        if not os.path.isfile(path):
            return ["%s: shard named in %s is missing" % (path, INDEX_NAME)]
        try:
            info = verify_shard(path)
        except ShardError as exc:
            return [str(exc)]
        except (IOError, OSError) as exc:
            return ["%s: cannot read (%s)" % (path, exc)]
        wanted = index["tensors_by_shard"].get(rel, [])
        absent = [t for t in wanted if t not in info["tensors"]]
        if absent:
            return ["%s: %d tensor(s) that %s assigns to this shard are not in its header, e.g. %s"
                    % (path, len(absent), INDEX_NAME, ", ".join(absent[:5]))]
        return []
    if is_checked_json(rel):
        problem = check_json_file(path)
        return [problem] if problem else []
    return []


def verify_tree(root, index, files):
    """Verify a staged tree; return list of problems, each naming the file."""
    problems = []
    for rel in sorted(set(index["shards"]) | set(f for f in files if is_checked_json(f)) | {"config.json"}):
        problems.extend(verify_file(root, rel, index))
    return problems


def check_sums(root, records, expected):
    problems = []
    for rel, want in sorted(expected.items()):
        rec = records.get(rel)
        if rec is not None and rec.get("sha256") != want:
            problems.append("%s: sha256 mismatch: manifest says %s, staged file hashes to %s; fetch it again"
                            % (os.path.join(root, rel), want, rec.get("sha256")))
    return problems


def bad_files(root, files, problems):
    bad = set()
    for rel in files:
        prefix = os.path.join(root, rel) + ":"
        if any(msg.startswith(prefix) or msg.startswith(rel + ":") for msg in problems):
            bad.add(rel)
    return bad


# ---------------------------------------------------------------- main flow

def make_source(params):
    if params["source"] == "http":
        return HttpSource(params)
    if params["source"] == "hf":
        return HfSource(params)
    return PathSource(params)


def validate(p):
    problems = check_label("name", p["name"]) + check_label("revision", p["revision"])
    if p["source"] == "path" and not p["source_path"]:
        problems.append("source=path needs source_path (the model directory)")
    if p["source"] == "http" and not p["url"]:
        problems.append("source=http needs url (the mirror's base URL)")
    if p["source"] == "hf" and not p["hf_repo_id"]:
        problems.append("source=hf needs hf_repo_id (for example moonshotai/Kimi-K2.5)")
    if p["source"] != "path" and p["link_mode"] == "hardlink":
        problems.append("link_mode=hardlink works only with source=path")
    if p["parallel"] < 1 or p["retries"] < 0 or p["timeout"] < 1:
        problems.append("parallel and timeout must be >= 1 and retries >= 0")
    if problems:
        raise StageError(problems)


def stage(module, source=None):
    p = module.params
    validate(p)
    name, revision, store = p["name"], p["revision"], p["store"]
    model_dir = os.path.join(store, name)
    final = os.path.join(model_dir, revision)
    partial = final + ".partial"
    current = os.path.join(model_dir, "current")
    progress_file = p.get("progress_file") or os.path.join(model_dir, ".%s.progress" % revision)
    result = dict(changed=False, path=final, current=current, activated=False, shards=0, total_bytes=0,
                  copied_bytes=0, verified=False, actions=[], progress=[], progress_file=progress_file)
    if source is None:
        source = make_source(p)

    # 1. Already staged: stat-only comparison with the manifest; repair what changed.
    if os.path.isdir(final):
        manifest = read_json(os.path.join(final, MANIFEST))
        if not isinstance(manifest, dict) or not manifest.get("files"):
            raise StageError("%s exists but has no readable %s; it was not written by this module or was damaged. "
                             "Move it aside and re-run to stage it again" % (final, MANIFEST))
        result.update(shards=manifest.get("shards", 0), total_bytes=manifest.get("total_bytes", 0),
                      verified=bool(manifest.get("verified")))
        changed = manifest_matches(final, manifest)
        if changed:
            repair(module, source, final, model_dir, manifest, changed, result, progress_file)
        if not current_points_to(current, revision) and p.get("activate", True):
            problems = missing_files(*dir_reader(final, set(manifest["files"])), where=final)
            if problems:
                raise StageError(["%s is staged but incomplete, so current still points at the previous revision"
                                  % final] + problems)
            result["actions"].append("point %s at %s" % (current, revision))
            result["changed"] = True
            if not module.check_mode:
                flip_current(current, revision)
        result["activated"] = current_points_to(current, revision)
        return result

    if source.kind == "hf":
        return stage_hf(module, source, final, partial, current, model_dir, result, progress_file)

    # 2. Plan from the source.
    plan = source.plan()
    index, files, sizes, sums = plan["index"], plan["files"], plan["sizes"], plan["sha256"]
    result.update(shards=len(index["shards"]), total_bytes=sum(v or 0 for v in sizes.values()),
                  skipped=plan["skipped"])

    journal = read_json(os.path.join(partial, JOURNAL)) if os.path.isdir(partial) else None
    done = {}
    if isinstance(journal, dict):
        for rel, rec in (journal.get("files") or {}).items():
            if rel not in sizes:
                continue
            try:
                now = stat_record(os.path.join(partial, rel))
            except OSError:
                continue
            if all(now[k] == rec.get(k) for k in STAT_KEYS) and source.still_valid(rel, rec) and \
                    (sizes[rel] is None or sizes[rel] == now["size"]):
                done[rel] = rec
    todo = [f for f in files if f not in done]
    present = dict((f, min(source.partial_bytes(partial, f), sizes[f] or 0)) for f in todo)
    remaining = sum((sizes[f] or 0) - present[f] for f in todo)
    hardlink = p["link_mode"] == "hardlink"

    if hardlink:
        src_dev = os.stat(source.root).st_dev
        store_dev = os.stat(existing_ancestor(model_dir)).st_dev
        if src_dev != store_dev:
            raise StageError("link_mode=hardlink needs %s and %s on one filesystem (device %d vs %d); use "
                             "link_mode=copy or a store on the source's filesystem"
                             % (source.root, store, src_dev, store_dev))
    else:
        space_check(store, model_dir, remaining)

    verb = "link" if hardlink else ("copy" if source.kind == "path" else "download")
    notes = []
    if done:
        notes.append("keeping %d file(s) from an interrupted run" % len(done))
    if sum(present.values()):
        notes.append("resuming %d partly downloaded byte(s)" % sum(present.values()))
    result["actions"].append("%s %d file(s), %d bytes, from %s into %s%s" % (
        verb, len(todo), remaining, source.description, partial, (" (%s)" % "; ".join(notes)) if notes else ""))
    result["actions"].append("verify %d shard(s), sha256, config.json and tokenizer files" % len(index["shards"]))
    result["actions"].append("rename %s to %s and point %s at %s" % (partial, final, current, revision))
    result["changed"] = True
    result["resumed_files"] = len(done)
    result["resumed_bytes"] = sum(present.values())
    if module.check_mode:
        result["copied_bytes"] = 0 if hardlink else remaining
        return result

    # 3. Transfer in parallel; finished files go into the journal in durable batches (Journal).
    os.makedirs(partial, exist_ok=True)
    journal = Journal(os.path.join(partial, JOURNAL),
                      {"name": name, "revision": revision, "source": source.description, "files": dict(done)})
    with open(progress_file, "w"):
        pass
    done_bytes = sum(sizes[f] or 0 for f in done) + sum(present.values())
    progress = Progress(index["shards"], result["total_bytes"], present_bytes=done_bytes,
                        done_shards=len([f for f in done if f in index["tensors_by_shard"]]), path=progress_file,
                        interval=p["progress_interval"])
    progress.maybe_emit(force=True)

    def work(rel):
        dest = os.path.join(partial, rel)
        if not os.path.isdir(os.path.dirname(dest)):
            os.makedirs(os.path.dirname(dest), exist_ok=True)
        rec = source.fetch(rel, dest, sums.get(rel), progress)
        rec.update(stat_record(dest))
        journal.add(rel, rec)
        progress.file_done(rel)
        return rec

    stop = getattr(source, "stop", threading.Event())
    records, problems = run_pool(todo, work, p["parallel"], stop)
    journal.commit()  # also after a failure: what finished is kept for the re-run
    result["copied_bytes"] = sum(r.get("transferred", 0) for r in records.values())
    # files an interrupted run finished but had not recorded yet: hashed again, not transferred again
    result["resumed_files"] += len([r for r in records.values()
                                    if r.get("resumed_from") and r.get("resumed_from") == r.get("size")])
    progress.maybe_emit(force=True)
    result["progress"] = progress.lines
    if problems:
        raise StageError(["staging %s into %s failed (current still points at the previous revision; re-run "
                          "resumes)" % (source.description, partial)] + problems)

    # 4. Verify; a failed file is removed so the next run fetches it again.
    finish(module, partial, final, current, model_dir, index, files, journal.data, sums, result, source.description,
           p["link_mode"])
    return result


def finish(module, partial, final, current, model_dir, index, files, journal, sums, result, description, link_mode):
    # nothing is verified, recorded or renamed before it is durable (quick for files a journal commit synced)
    sync_files(os.path.join(partial, rel) for rel in files)
    problems = (verify_tree(partial, index, files) + check_sums(partial, journal["files"], sums)
                + symlinks(partial, files) + missing_files(*dir_reader(partial, set(files)), where=partial))
    if problems:
        for rel in bad_files(partial, files, problems):
            journal["files"].pop(rel, None)
            try:
                os.unlink(os.path.join(partial, rel))
            except OSError:
                pass
        write_json_atomic(os.path.join(partial, JOURNAL), journal)
        raise StageError(["verification of %s failed (current still points at the previous revision; the files "
                          "named below were removed and a re-run fetches them again)" % partial] + problems)
    if index["total_size"] is not None:
        tensor_bytes = 0
        for shard in index["shards"]:
            tensor_bytes += verify_shard(os.path.join(partial, shard))["data_len"]
        if tensor_bytes != index["total_size"]:
            module.warn("%s metadata.total_size is %d but the shards hold %d tensor bytes; the index may be stale"
                        % (INDEX_NAME, index["total_size"], tensor_bytes))

    # 5. Manifest, rename, flip.
    manifest = {
        "name": os.path.basename(model_dir), "revision": os.path.basename(final), "source": description,
        "link_mode": link_mode, "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "shards": len(index["shards"]), "total_bytes": 0, "verified": True, "files": {},
    }
    for rel in files:
        rec = stat_record(os.path.join(partial, rel))
        rec["sha256"] = journal["files"][rel]["sha256"]
        manifest["files"][rel] = rec
        manifest["total_bytes"] += rec["size"]
    result["total_bytes"] = manifest["total_bytes"]
    write_json_atomic(os.path.join(partial, MANIFEST), manifest)
    os.unlink(os.path.join(partial, JOURNAL))
    fsync_dir(partial)
    os.rename(partial, final)
    fsync_dir(model_dir)
    if module.params.get("activate", True):
        flip_current(current, os.path.basename(final))
    result["activated"] = current_points_to(current, os.path.basename(final))
    result["verified"] = True


def stage_hf(module, source, final, partial, current, model_dir, result, progress_file):
    p = module.params
    result["changed"] = True
    result["actions"].append("download %s into %s with %s" % (source.description, partial, p["hf_python"]))
    result["actions"].append("verify shards, sha256 (LFS), config.json and tokenizer files; rename and point %s at %s"
                             % (current, p["revision"]))
    if module.check_mode:
        return result
    os.makedirs(partial, exist_ok=True)
    with open(progress_file, "w"):
        pass
    progress = Progress([], 0, path=progress_file, interval=p["progress_interval"])
    progress.emit("downloading %s" % source.description)
    before = tree_bytes(partial)
    # Hash each file as soon as huggingface_hub has renamed it into place, while the rest download: the file is
    # still in the page cache, and the hashing overlaps the transfer instead of following it.
    early = {}
    hasher = ThreadPoolExecutor(max_workers=max(1, p["parallel"]))

    def hashed(rel):
        path = os.path.join(partial, rel)
        rec = stat_record(path)
        rec["sha256"] = hash_file(path)
        return rec

    try:
        report = source.download(partial, p["allow_patterns"], progress,
                                 on_file=lambda rel: early.__setitem__(rel, hasher.submit(hashed, rel)))
    finally:
        hasher.shutdown(wait=True)
    # A file that vanished or failed to read while downloading is simply hashed again below.
    early = dict((rel, f.result()) for rel, f in early.items() if f.exception() is None)
    result["copied_bytes"] = max(0, tree_bytes(partial) - before)
    try:
        index = load_index(os.path.join(partial, INDEX_NAME))
    except ModelIndexError as exc:
        raise StageError(str(exc))
    entries = [e for e in sorted(os.listdir(partial)) if not e.startswith(".")]
    files, skipped = select_files(entries, set(index["shards"]), lambda e: os.path.isdir(os.path.join(partial, e)))
    missing = [f for f in sorted(files) if not os.path.isfile(os.path.join(partial, f))]
    if missing:
        raise StageError(["%s: named in %s but not downloaded from %s" % (os.path.join(partial, f), INDEX_NAME,
                                                                          source.description) for f in missing])
    # huggingface_hub writes the files; each is hashed once, above as it landed or here (sha256 against the Hub's LFS
    # sha256 where it has one).
    journal = read_json(os.path.join(partial, JOURNAL)) or {"files": {}}
    stop = threading.Event()

    def work(rel):
        now = stat_record(os.path.join(partial, rel))
        # A hash taken while downloading, or by an earlier run, counts only for the very file that is there now.
        for rec in (early.get(rel), journal["files"].get(rel)):
            if rec and all(rec.get(k) == now[k] for k in STAT_KEYS):
                return rec
        return hashed(rel)

    records, problems = run_pool(sorted(files), work, p["parallel"], stop)
    if problems:
        raise StageError(problems)
    journal["files"] = records
    write_json_atomic(os.path.join(partial, JOURNAL), journal)
    shutil.rmtree(os.path.join(partial, ".cache"), ignore_errors=True)
    result.update(shards=len(index["shards"]), skipped=skipped, resumed_files=0, resumed_bytes=0)
    # The helper learns the file list itself; the closing line gets the shard count and bytes from the index.
    progress.shards = set(index["shards"])
    progress.done_shards = len(progress.shards)
    progress.total_bytes = progress.present = sum(r["size"] for r in records.values())
    progress.transferred = min(progress.transferred, progress.total_bytes)
    progress.maybe_emit(force=True)
    result["progress"] = progress.lines
    finish(module, partial, final, current, model_dir, index, sorted(files), journal, source.sums, result,
           "%s (commit %s)" % (source.description, report.get("commit")), "copy")
    return result


def repair(module, source, final, model_dir, manifest, changed, result, progress_file):
    """Fetch again the staged files that changed or vanished; replace each atomically once it verifies."""
    names = sorted(changed)
    listed = ", ".join("%s (%s)" % (n, changed[n]) for n in names)
    result["changed"] = True
    result["repaired"] = names
    result["actions"].append("fetch again %d changed file(s) of %s from %s: %s"
                             % (len(names), final, source.description, listed))
    if module.check_mode:
        return
    recorded = manifest["files"]
    space_check(module.params["store"], model_dir, sum(recorded[n].get("size", 0) for n in names))
    work_dir = os.path.join(model_dir, ".%s.repair" % os.path.basename(final))
    shutil.rmtree(work_dir, ignore_errors=True)
    os.makedirs(work_dir)
    try:
        index_path = os.path.join(final, INDEX_NAME)
        if INDEX_NAME in names:
            index_path = None
        progress = Progress([n for n in names if n.endswith(".safetensors")],
                            sum(recorded[n].get("size", 0) for n in names), path=progress_file,
                            interval=module.params["progress_interval"])
        expected = dict((n, recorded[n].get("sha256")) for n in names)
        if source.kind == "hf":
            source.download(work_dir, names, progress)
            records = dict((n, {"sha256": hash_file(os.path.join(work_dir, n)), "transferred": 0}) for n in names
                           if os.path.isfile(os.path.join(work_dir, n)))
            problems = ["%s: not downloaded again from %s" % (n, source.description) for n in names if n not in records]
        else:
            if source.kind == "http":
                source.load_sums()
                source.sizes.update(dict((n, recorded[n].get("size")) for n in names))

            def work(rel):
                dest = os.path.join(work_dir, rel)
                if not os.path.isdir(os.path.dirname(dest)):
                    os.makedirs(os.path.dirname(dest), exist_ok=True)
                return source.fetch(rel, dest, expected[rel], progress)

            records, problems = run_pool(names, work, module.params["parallel"], getattr(source, "stop", threading.Event()))
        result["copied_bytes"] = sum(r.get("transferred", 0) for r in records.values())
        if not problems:
            if index_path is None:
                index_path = os.path.join(work_dir, INDEX_NAME)
            try:
                index = load_index(index_path)
            except ModelIndexError as exc:
                raise StageError(str(exc))
            for rel in names:
                problems.extend(verify_file(work_dir, rel, index))
                if records[rel]["sha256"] != expected[rel]:
                    problems.append("%s: the source now has different bytes (sha256 %s) than revision %s was staged "
                                    "with (%s); stage the new content under a new revision label"
                                    % (rel, records[rel]["sha256"], os.path.basename(final), expected[rel]))
        if problems:
            raise StageError(["repairing %s failed; the changed files are still in place" % final] + problems)
        sync_files(os.path.join(work_dir, rel) for rel in names)
        for rel in names:
            os.replace(os.path.join(work_dir, rel), os.path.join(final, rel))
            rec = stat_record(os.path.join(final, rel))
            rec["sha256"] = expected[rel]
            recorded[rel] = rec
        fsync_dir(final)
        write_json_atomic(os.path.join(final, MANIFEST), manifest)
        result["progress"] = progress.lines
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            name=dict(type="str", required=True),
            revision=dict(type="str", required=True),
            source=dict(type="str", default="path", choices=["path", "http", "hf"]),
            source_path=dict(type="path"),
            url=dict(type="str"),
            manifest=dict(type="str", default="SHA256SUMS"),
            token=dict(type="str", no_log=True),
            headers=dict(type="dict", default={}, no_log=True),
            parallel=dict(type="int", default=4),
            retries=dict(type="int", default=5),
            retry_delay=dict(type="float", default=2.0),
            timeout=dict(type="int", default=60),
            progress_file=dict(type="path"),
            progress_interval=dict(type="float", default=10.0),
            hf_repo_id=dict(type="str"),
            hf_revision=dict(type="str"),
            hf_endpoint=dict(type="str", default=""),
            hf_python=dict(type="path", default="/opt/sglang/stage-venv/bin/python"),
            hf_helper=dict(type="path"),
            allow_patterns=dict(type="list", elements="str", default=[]),
            store=dict(type="path", default="/srv/models"),
            link_mode=dict(type="str", default="copy", choices=["copy", "hardlink"]),
            activate=dict(type="bool", default=True),
            nice=dict(type="int", default=0),
        ),
        required_if=[("source", "path", ("source_path",)), ("source", "http", ("url",)),
                     ("source", "hf", ("hf_repo_id", "hf_helper"))],
        supports_check_mode=True,
    )
    if not module.check_mode:
        lower_priority(module.params["nice"])
    try:
        result = stage(module)
    except StageError as exc:
        module.fail_json(msg="; ".join(exc.problems), problems=exc.problems)
    except (IOError, OSError) as exc:
        if exc.errno == errno.ENOSPC:
            module.fail_json(msg="disk full while staging into %s (%s); free space and re-run, copied files are kept"
                                 % (module.params["store"], exc))
        module.fail_json(msg="staging failed: %s; fix the cause and re-run (copied files are kept)" % exc)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
