# -*- coding: utf-8 -*-
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The sources model_stage stages from, behind one protocol, so the staging flow never asks which kind it has.

A source has ``description`` (where the bytes come from, without credentials: action lines, journal, manifest),
``verb`` (``copy``, ``link`` or ``download``) and ``stop`` (a threading.Event; set, it cancels transfers in flight),
and these methods:

* ``missing_tools()`` -> list of problems that keep it from planning on this host now (the hf source before the role
  made its staging venv); check mode reports them, a real run fails with them;
* ``index_location()`` -> the path or URL (no credentials) of the checkpoint's ``model.safetensors.index.json``
  (the path source: its ``model.safetensors`` when that is there and the index is not);
* ``read_index()`` -> ``{"index": the path or URL read, "total_size_bytes", "shards"}``: that index alone, before
  anything is planned or staged (what preflight sizes the weights by; the hf source reads it over HTTP, so it needs
  no staging venv). A single-file checkpoint (no index, one ``model.safetensors``) is sized by that file's
  safetensors header instead (over HTTP: two ranged GETs, never the tensor data), ``index`` naming the file. Raises
  StageError naming the path or URL and why it could not be read;
* ``plan()`` -> ``{"index": parsed index, "files": [names to stage], "sizes": {name: bytes or None},
  "sha256": {name: hex} (what the source vouches for), "skipped": [names left out]}``; raises StageError listing
  every problem (missing shards, config.json, required tokenizer/code files) before a byte of a shard moves. A
  single-file checkpoint's parsed index is derived from its ``model.safetensors`` header (model_index
  ``index_from_header``) and no index file is staged; several safetensors files and no index are refused;
* ``still_valid(rel, rec)`` -> whether a file a journal recorded as done still matches the source;
* ``partial_bytes(dest_dir, rel)`` -> bytes of ``rel`` already in ``dest_dir`` that a transfer resumes from;
* ``check_room(store, model_dir, remaining)`` -> bytes the transfer will write; raises StageError when the store
  cannot take them (free space, or one filesystem for hardlinks);
* ``transfer(dest_dir, names, expected, sizes, progress, on_done)`` -> ``(records, problems)``: fetches ``names``
  into ``dest_dir`` (``expected``: sha256 by name, ``sizes``: bytes by name, either may lack a name), calling
  ``on_done(name, record)`` once per finished file; a record has ``sha256``, ``transferred`` (bytes moved now)
  and ``resumed_from``. Problems name their file; finished files stay for a re-run.

``make_source(params)`` picks the class for the module's ``source`` option: path (a local or mounted directory),
http (a static mirror with a sha256 manifest) or hf (the Hugging Face Hub through huggingface_hub, run by the
staging venv's python).
"""

from __future__ import absolute_import, division, print_function

import errno
import glob
import json
import os
import shutil
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor, as_completed
from urllib.parse import quote

from ansible_collections.blackwell.sglang.plugins.module_utils.staging.durable_files import (
    copy_and_hash, hash_file, read_json, stat_record, tree_bytes,
)
from ansible_collections.blackwell.sglang.plugins.module_utils.staging.model_files import (
    WEIGHT_SUFFIXES, dir_reader, missing_files, select_files,
)
from ansible_collections.blackwell.sglang.plugins.module_utils.staging.model_index import (
    INDEX_NAME, SINGLE_FILE, ModelIndexError, index_from_header, load_index, load_model_index, parse_index,
    single_file_name,
)
from ansible_collections.blackwell.sglang.plugins.module_utils.staging.model_mirror import (
    DOWNLOAD_SUFFIX, METADATA_LIMIT, FetchError, Mirror, redact_url,
)
from ansible_collections.blackwell.sglang.plugins.module_utils.staging.model_store import (
    StageError, existing_ancestor, space_check,
)
from ansible_collections.blackwell.sglang.plugins.module_utils.staging.safetensors_header import ShardError, header_from_reader
from ansible_collections.blackwell.sglang.plugins.module_utils.staging.sha256_manifest import parse_manifest
from ansible_collections.blackwell.sglang.plugins.module_utils.staging.stage_progress import follow_process

__metaclass__ = type

# huggingface_hub's default endpoint (constants.ENDPOINT) when neither hf_endpoint nor HF_ENDPOINT names another.
HUB_ENDPOINT = "https://huggingface.co"


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


def request_headers(params):
    """The mirror's request headers: ``headers`` plus ``Authorization: Bearer <token>`` when a token is set."""
    headers = dict(params.get("headers") or {})
    if params.get("token"):
        headers["Authorization"] = "Bearer %s" % params["token"]
    return headers


def index_figures(index, where):
    """``read_index``'s answer for a parsed index; StageError when it has no ``metadata.total_size``."""
    if index["total_size"] is None:
        raise StageError("%s has no metadata.total_size, so it does not say the weights' size" % where)
    return {"index": where, "total_size_bytes": index["total_size"], "shards": len(index["shards"])}


def fetch_index(mirror, where):
    """GET ``model.safetensors.index.json`` from ``mirror`` and parse it; StageError naming ``where`` (a URL)."""
    raw = mirror_file(mirror, INDEX_NAME)[1]
    try:
        return parse_index(json.loads(raw.decode("utf-8")), where)
    except ModelIndexError as exc:
        raise StageError(str(exc))
    except (UnicodeDecodeError, ValueError) as exc:
        raise StageError("%s: %s" % (where, exc))


def fetch_header_index(mirror, name, where, file_size=None):
    """``index_from_header`` of the single-file checkpoint's ``name`` on ``mirror``, its header read with two ranged
    GETs (the 8-byte length, then the header; never the tensor data); StageError naming ``where`` (a URL).
    ``file_size`` (None when not known yet) checks the header length against the end of the file."""
    try:
        info = header_from_reader(where, lambda start, length: mirror.get_range(name, start, length), file_size)
    except FetchError as exc:
        raise StageError(str(exc)) from exc
    except ShardError as exc:
        raise StageError(str(exc))
    try:
        return index_from_header(info, name, where)
    except ModelIndexError as exc:
        raise StageError(str(exc))


def not_on_mirror(exc):
    """Whether the StageError ``exc`` of ``fetch_index`` or ``fetch_header_index`` is an HTTP 404."""
    return isinstance(exc.__cause__, FetchError) and exc.__cause__.status == 404


def read_mirror_index(mirror):
    """``read_index`` of a mirror (http, hf): its index; where it has none (HTTP 404), a single-file checkpoint's
    ``model.safetensors`` header; where that is not there either, the index's error."""
    where = redact_url(mirror.url(INDEX_NAME))
    try:
        return index_figures(fetch_index(mirror, where), where)
    except StageError as exc:
        if not not_on_mirror(exc):
            raise
        missing = exc
    single = redact_url(mirror.url(SINGLE_FILE))
    try:
        return index_figures(fetch_header_index(mirror, SINGLE_FILE, single), single)
    except StageError as exc:
        if not_on_mirror(exc):
            raise missing
        raise


def single_file(names, where):
    """``single_file_name`` of a source's listing ``names``; StageError for a listing without the index and with
    several safetensors files (ambiguous)."""
    try:
        return single_file_name(names, where)
    except ModelIndexError as exc:
        raise StageError(str(exc))


def checkpoint_files(names, index, single, is_dir=None):
    """``select_files`` of a source's listing for its (parsed or derived) index: a single-file checkpoint has no
    index file to stage."""
    files, skipped = select_files(names, set(index["shards"]), is_dir)
    if single:
        files.discard(INDEX_NAME)
    return files, skipped


def mirror_file(mirror, name):
    """(URL without credentials, bytes) of a small file on ``mirror``; StageError naming the URL and why."""
    where = redact_url(mirror.url(name))
    try:
        return where, mirror.get_bytes(name)
    except FetchError as exc:
        raise StageError(str(exc)) from exc  # not_on_mirror reads the cause


class FileSource(object):
    """What every source shares: no tools to install, the free-space check, a stop event, nothing to resume; and
    for the path and http sources a transfer of one ``fetch`` per file on ``parallel`` threads (hf runs its helper)."""

    verb = "download"

    def __init__(self, params):
        self.parallel = params["parallel"]
        self.manifest_name = params["manifest"]
        self.stop = threading.Event()

    def missing_tools(self):
        return []

    def read_config(self):
        """The source's config.json, parsed, and where it was read (a path, or a URL without credentials): preflight
        judges an EAGLE3 draft against its model by both. StageError naming the place and why."""
        where, raw = self.config_bytes()
        try:
            config = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            raise StageError("%s is not JSON: %s" % (where, exc))
        if not isinstance(config, dict):
            raise StageError("%s is a JSON %s, expected an object" % (where, type(config).__name__))
        return config, where

    def config_bytes(self):
        """(where, raw bytes) of the source's config.json."""
        raise NotImplementedError

    def partial_bytes(self, dest_dir, rel):
        return 0

    def check_room(self, store, model_dir, remaining):
        space_check(store, model_dir, remaining)
        return remaining

    def fetch(self, rel, dest, expected_sha256, expected_size, progress):
        """Fetch one file to ``dest``; returns its record (see the module docstring)."""
        raise NotImplementedError

    def transfer(self, dest_dir, names, expected, sizes, progress, on_done):
        def work(rel):
            dest = os.path.join(dest_dir, rel)
            if not os.path.isdir(os.path.dirname(dest)):
                os.makedirs(os.path.dirname(dest), exist_ok=True)
            rec = self.fetch(rel, dest, expected.get(rel), sizes.get(rel), progress)
            on_done(rel, rec)
            return rec
        return run_pool(names, work, self.parallel, self.stop)


class PathSource(FileSource):
    """A local or mounted model directory; ``link_mode: hardlink`` links the files instead of copying them."""

    def __init__(self, params):
        super(PathSource, self).__init__(params)
        self.root = params["source_path"]
        self.hardlink = params["link_mode"] == "hardlink"
        self.verb = "link" if self.hardlink else "copy"
        self.sums = {}
        self.description = self.root

    def index_location(self):
        if not self.root:
            return None
        index, single = os.path.join(self.root, INDEX_NAME), os.path.join(self.root, SINGLE_FILE)
        return single if not os.path.lexists(index) and os.path.isfile(single) else index

    def config_bytes(self):
        where = os.path.join(self.root or "", "config.json")
        try:
            with open(where, "rb") as handle:
                return where, handle.read(METADATA_LIMIT)
        except (OSError, IOError) as exc:
            raise StageError("%s: %s" % (where, exc.strerror or exc))

    def read_index(self):
        if not self.root:
            raise StageError("no source_path is set, so there is no %s to read" % INDEX_NAME)
        try:
            index, where = load_model_index(self.root)
        except ModelIndexError as exc:
            raise StageError(str(exc))
        return index_figures(index, where)

    def plan(self):
        src = self.root
        if not os.path.isdir(src):
            raise StageError("source_path %s is not a directory; expected the model directory holding %s (or a "
                             "single %s)" % (src, INDEX_NAME, SINGLE_FILE))
        names = os.listdir(src)
        try:
            index, _where = load_model_index(src, names)
        except ModelIndexError as exc:
            raise StageError(str(exc))
        single = INDEX_NAME not in names  # load_model_index derived the index from model.safetensors
        files, skipped = checkpoint_files(names, index, single, lambda e: os.path.isdir(os.path.join(src, e)))
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

    def check_room(self, store, model_dir, remaining):
        if not self.hardlink:
            return super(PathSource, self).check_room(store, model_dir, remaining)
        src_dev = os.stat(self.root).st_dev
        store_dev = os.stat(existing_ancestor(model_dir)).st_dev
        if src_dev != store_dev:
            raise StageError("link_mode=hardlink needs %s and %s on one filesystem (device %d vs %d); use "
                             "link_mode=copy or a store on the source's filesystem"
                             % (self.root, store, src_dev, store_dev))
        return 0

    def fetch(self, rel, dest, expected_sha256, expected_size, progress):
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


class HttpSource(FileSource):
    """A static HTTP(S) mirror of the model directory with a sha256 manifest."""

    def __init__(self, params, mirror=None):
        super(HttpSource, self).__init__(params)
        self.mirror = mirror or Mirror(params["url"], headers=request_headers(params), timeout=params["timeout"],
                                       retries=params["retries"], retry_delay=params["retry_delay"], stop=self.stop)
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

    def index_location(self):
        return redact_url(self.mirror.url(INDEX_NAME))

    def read_index(self):
        return read_mirror_index(self.mirror)

    def config_bytes(self):
        return mirror_file(self.mirror, "config.json")

    def plan(self):
        self.load_sums()
        single = single_file(self.sums, "%s (%s)" % (self.description, self.manifest_name))
        if single:
            index = fetch_header_index(self.mirror, single, single, self.sizes.get(single))
        else:
            index = fetch_index(self.mirror, INDEX_NAME)
        shards = set(index["shards"])
        files, skipped = checkpoint_files(self.sums, index, single)
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

    def fetch(self, rel, dest, expected_sha256, expected_size, progress):
        got = self.mirror.download(rel, dest, expected_size=expected_size, expected_sha256=expected_sha256,
                                   on_bytes=progress.add)
        return {"sha256": got["sha256"], "transferred": got["transferred"], "resumed_from": got["resumed_from"]}


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


def hashed(path):
    """stat_record of ``path`` with its ``sha256``."""
    rec = stat_record(path)
    rec["sha256"] = hash_file(path)
    return rec


SOURCES = {"path": PathSource, "http": HttpSource, "hf": HfSource}


def make_source(params):
    """The source object for the module's ``source`` option (see the module docstring for the protocol)."""
    return SOURCES[params["source"]](params)
