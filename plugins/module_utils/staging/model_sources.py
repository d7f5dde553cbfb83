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

import os
import threading

from ansible_collections.blackwell.sglang.plugins.module_utils.staging.durable_files import (
    copy_and_hash, hash_file, stat_record,
)
from ansible_collections.blackwell.sglang.plugins.module_utils.staging.model_files import dir_reader, missing_files
from ansible_collections.blackwell.sglang.plugins.module_utils.staging.model_index import (
    INDEX_NAME, SINGLE_FILE, ModelIndexError, load_model_index,
)
from ansible_collections.blackwell.sglang.plugins.module_utils.staging.model_mirror import (
    DOWNLOAD_SUFFIX, METADATA_LIMIT, FetchError, Mirror, redact_url,
)
from ansible_collections.blackwell.sglang.plugins.module_utils.staging.model_store import StageError, existing_ancestor
from ansible_collections.blackwell.sglang.plugins.module_utils.staging._sha256_manifest import parse_manifest

from ansible_collections.blackwell.sglang.plugins.module_utils.staging.model_source_base import (
    FileSource, checkpoint_files, fetch_header_index, fetch_index, index_figures, mirror_file, read_mirror_index,
    request_headers, run_pool, single_file,
)
from ansible_collections.blackwell.sglang.plugins.module_utils.staging._model_source_hub import HfSource

__metaclass__ = type


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


SOURCES = {"path": PathSource, "http": HttpSource, "hf": HfSource}


def make_source(params):
    """The source object for the module's ``source`` option (see the module docstring for the protocol)."""
    return SOURCES[params["source"]](params)
