# -*- coding: utf-8 -*-
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What model_stage's sources share (model_sources.py holds the protocol and the path and http sources,
model_source_hub.py the Hub's): the thread pool a transfer runs on, reading an index or a single file's header from a
mirror, the checkpoint's files out of a listing, the FileSource base class and a file's hashed record."""

from __future__ import absolute_import, division, print_function

import errno
import json
import os
import threading
from concurrent.futures import ThreadPoolExecutor, as_completed

from ansible_collections.blackwell.sglang.plugins.module_utils.staging.durable_files import hash_file, stat_record
from ansible_collections.blackwell.sglang.plugins.module_utils.staging.model_files import select_files
from ansible_collections.blackwell.sglang.plugins.module_utils.staging.model_index import (
    INDEX_NAME, SINGLE_FILE, ModelIndexError, index_from_header, parse_index, single_file_name,
)
from ansible_collections.blackwell.sglang.plugins.module_utils.staging.model_mirror import FetchError, redact_url
from ansible_collections.blackwell.sglang.plugins.module_utils.staging.model_store import StageError, space_check
from ansible_collections.blackwell.sglang.plugins.module_utils.staging.safetensors_header import ShardError, header_from_reader

__metaclass__ = type


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


def hashed(path):
    """stat_record of ``path`` with its ``sha256``."""
    rec = stat_record(path)
    rec["sha256"] = hash_file(path)
    return rec
