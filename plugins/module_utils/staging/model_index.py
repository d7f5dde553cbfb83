# -*- coding: utf-8 -*-
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Load a Hugging Face sharded-checkpoint index (``model.safetensors.index.json``).

Shape (written by ``transformers``' ``save_pretrained`` / ``huggingface_hub``):
``{"metadata": {"total_size": <int bytes of tensor data>}, "weight_map": {tensor: shard_file}}``.
The index is the truth about which shards exist: shard names are per model
(``model-00001-of-000064.safetensors`` for Kimi-K2.5, ``model-1-of-61.safetensors`` for
Kimi-K2-Instruct), so no naming pattern is assumed.

A single-file checkpoint (an EAGLE-3 draft model: ``config.json`` and one ``model.safetensors``, no index) has the
same summary, derived from that file's safetensors header (``index_from_header``): SGLang loads such a directory by
globbing ``*.safetensors``. More than one safetensors file and no index is ambiguous and refused
(``single_file_name``).
"""

from __future__ import absolute_import, division, print_function

import json
import os
import posixpath

from ansible_collections.blackwell.sglang.plugins.module_utils.staging.safetensors_header import (
    ShardError, read_header, tensor_nbytes,
)

__metaclass__ = type

INDEX_NAME = "model.safetensors.index.json"
# The one weight file of a checkpoint without an index (transformers' SAFE_WEIGHTS_NAME).
SINGLE_FILE = "model.safetensors"


class ModelIndexError(Exception):
    """The index at ``path`` is unusable; ``reason`` says why."""

    def __init__(self, path, reason):
        super(ModelIndexError, self).__init__("%s: %s" % (path, reason))
        self.path = path
        self.reason = reason


def parse_index(data, path=INDEX_NAME):
    """Check a decoded index (dict) and summarise it.

    :returns: dict ``shards`` (sorted list of relative file names), ``total_size``
        (int or None when the index has no ``metadata.total_size``), ``weight_map``
        (dict tensor -> shard), ``tensors_by_shard`` (dict shard -> list of tensor names).
    :raises ModelIndexError: listing every problem (missing/empty weight_map, shard names
        that are absolute or climb out of the model directory, bad total_size).
    """
    problems = []
    if not isinstance(data, dict):
        raise ModelIndexError(path, "index is a JSON %s, expected an object with weight_map" % type(data).__name__)
    weight_map = data.get("weight_map")
    if not isinstance(weight_map, dict) or not weight_map:
        problems.append("weight_map is missing or empty; expected {tensor name: shard file}")
        weight_map = {}
    by_shard = {}
    for tensor, shard in weight_map.items():
        if not isinstance(shard, str) or not shard:
            problems.append("tensor %s maps to %r, expected a file name" % (tensor, shard))
            continue
        norm = posixpath.normpath(shard)
        if shard.startswith("/") or norm.startswith("../") or norm == ".." or "\\" in shard:
            problems.append("tensor %s maps to %r, which is outside the model directory" % (tensor, shard))
            continue
        by_shard.setdefault(norm, []).append(tensor)
    metadata = data.get("metadata") or {}
    total_size = metadata.get("total_size") if isinstance(metadata, dict) else None
    if total_size is not None:
        try:
            total_size = int(total_size)
        except (TypeError, ValueError):
            problems.append("metadata.total_size %r is not an integer" % (total_size,))
            total_size = None
    if problems:
        raise ModelIndexError(path, "; ".join(problems))
    return {
        "shards": sorted(by_shard),
        "total_size": total_size,
        "weight_map": weight_map,
        "tensors_by_shard": dict((k, sorted(v)) for k, v in by_shard.items()),
    }


def load_index(path):
    """Read ``path`` (a ``model.safetensors.index.json``) and ``parse_index`` it.

    :raises ModelIndexError: missing file, empty file, invalid JSON, or ``parse_index`` problems.
    """
    try:
        with open(path, "rb") as handle:
            raw = handle.read()
    except (IOError, OSError) as exc:
        raise ModelIndexError(path, "cannot read the index (%s); expected %s in the model directory" % (
            exc.strerror or exc, os.path.basename(path)))
    if not raw.strip():
        raise ModelIndexError(path, "index is empty; the download was interrupted, fetch it again")
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ModelIndexError(path, "index is not valid JSON (%s); fetch it again" % exc)
    return parse_index(data, path)


def index_from_header(info, shard_name=SINGLE_FILE, where=None):
    """The ``parse_index`` summary of a single-file checkpoint, from its safetensors header.

    :param info: ``safetensors_header.read_header`` (or ``header_from_reader``) of the file.
    :param shard_name: the file's name in the model directory.
    :param where: the path or URL the header was read from (messages); ``shard_name`` when None.
    :returns: ``parse_index``'s dict: ``shards`` [shard_name], ``total_size`` (the tensors' data bytes, dtype x shape),
        ``weight_map`` (every tensor -> shard_name), ``tensors_by_shard``.
    :raises ModelIndexError: a header without tensors, or a tensor whose dtype or shape gives no size.
    """
    where = where or shard_name
    tensors = info.get("tensors") or {}
    if not tensors:
        raise ModelIndexError(where, "the safetensors header lists no tensors, so there are no weights to stage")
    total, problems = 0, []
    for name, entry in sorted(tensors.items()):
        try:
            if not isinstance(entry, dict):
                raise ValueError("entry is not an object")
            total += tensor_nbytes(entry.get("dtype"), entry.get("shape"))
        except ValueError as exc:
            problems.append("tensor %s: %s" % (name, exc))
    if problems:
        raise ModelIndexError(where, "; ".join(problems))
    return parse_index({"metadata": {"total_size": total}, "weight_map": dict((t, shard_name) for t in tensors)},
                       where)


def load_header_index(path):
    """``index_from_header`` of the local file ``path`` (its header alone is read); ModelIndexError naming it."""
    try:
        info = read_header(path)
    except ShardError as exc:
        raise ModelIndexError(path, exc.reason)
    except (IOError, OSError) as exc:
        raise ModelIndexError(path, "cannot read the safetensors header (%s)" % (exc.strerror or exc))
    return index_from_header(info, os.path.basename(path), path)


def single_file_name(names, where):
    """Whether a checkpoint whose top-level files are ``names`` is a single-file one.

    :returns: ``SINGLE_FILE`` when ``names`` has no ``INDEX_NAME`` and ``model.safetensors`` is its one safetensors
        file; None when it has the index, or no safetensors file at all (reading the index then says what is missing).
    :raises ModelIndexError: (naming ``where``) no index and other safetensors files: which file holds which tensor
        is not known without the index.
    """
    names = set(names)
    if INDEX_NAME in names:
        return None
    weights = sorted(n for n in names if "/" not in n and not n.startswith(".")
                     and n.lower().endswith(".safetensors"))
    if not weights:
        return None
    if weights == [SINGLE_FILE]:
        return SINGLE_FILE
    if len(weights) == 1:
        raise ModelIndexError(where, "has no %s and its one safetensors file is %s, not %s; stage a checkpoint with "
                                     "its index, or a single %s" % (INDEX_NAME, weights[0], SINGLE_FILE, SINGLE_FILE))
    raise ModelIndexError(where, "has no %s but %d safetensors files (%s): without the index which file holds which "
                                 "tensor is ambiguous; stage a sharded checkpoint with its %s, or a single %s"
                          % (INDEX_NAME, len(weights), ", ".join(weights), INDEX_NAME, SINGLE_FILE))


def load_model_index(root, names=None):
    """(parsed index, the path it was read from) of the model directory ``root``: its ``INDEX_NAME``, or for a
    single-file checkpoint (``single_file_name`` of ``names``, the directory's listing when None) one derived from
    ``model.safetensors``' header. Raises ModelIndexError."""
    if names is None:
        try:
            names = os.listdir(root)
        except OSError:
            names = ()  # load_index says what is missing
    single = single_file_name(names, root)
    if single:
        path = os.path.join(root, single)
        return load_header_index(path), path
    path = os.path.join(root, INDEX_NAME)
    return load_index(path), path


def _gb(size):
    return "%.2f GB" % (float(size) / 1e9)


def model_weights(local=None, source=None, preferred=(), fallback_gb=0,
                  fallback_name="preflight_hicache_fallback_weights_gb"):
    """The weights' size preflight budgets disk and HiCache with, and where it comes from.

    :param local: host_capacity's ``model``: the first readable of the operator's indexes (``preferred``) and the
        served model's, with ``unreadable`` (``<path>: <why>`` of each tried before it).
    :param source: model_source_index's answer for the source this run stages from (``index``, ``total_size_bytes``,
        ``shards``, ``error``).
    :param preferred: the operator's index paths (preflight_model_indexes): one of them read wins.
    :returns: dict ``index`` (the path or URL read; None for the fallback), ``total_size_bytes`` (the index's
        ``metadata.total_size``, else ``fallback_gb`` x 10**9), ``fallback`` (bool), ``unreadable`` (why each index
        tried could not be read) and ``source``: one line naming the figure and where it came from, e.g.
        ``0.13 GB in 4 shards, metadata.total_size of http://127.0.0.1:8081/K/model.safetensors.index.json`` or
        ``no index readable (<url>: HTTP 404 ...); using preflight_hicache_fallback_weights_gb=547``; a single-file
        checkpoint's figure is its header's tensor bytes (``... in 1 shard, the tensors in the safetensors header of
        <url>/model.safetensors``).

    Order: an index of ``preferred``, then the source's (what this run stages), then the served model's, then the
    fallback figure.
    """
    local, source = dict(local or {}), dict(source or {})
    unreadable = ([source["error"]] if source.get("error") else []) + list(local.get("unreadable") or [])
    local_read = local.get("total_size_bytes") is not None
    if local_read and local.get("index") in list(preferred or []):
        chosen = local
    elif source.get("total_size_bytes") is not None:
        chosen = source
    elif local_read:
        chosen = local
    else:
        why = "; ".join(unreadable) or "none was named"
        return {"index": None, "total_size_bytes": int(float(fallback_gb or 0) * 1e9), "fallback": True,
                "unreadable": unreadable,
                "source": "no index readable (%s); using %s=%s" % (why, fallback_name, fallback_gb)}
    size = int(chosen["total_size_bytes"])
    shards = " in %d shard%s" % (chosen["shards"], "s" if chosen["shards"] != 1 else "") if chosen.get("shards") else ""
    where = chosen.get("index") or "the model's index"
    if where.endswith(".safetensors"):  # a single-file checkpoint, sized by its header (model_sources.read_index)
        text = "%s%s, the tensors in the safetensors header of %s" % (_gb(size), shards, where)
    else:
        text = "%s%s, metadata.total_size of %s" % (_gb(size), shards, where)
    if chosen is local and source.get("error"):
        text += " (the source's index was not readable: %s)" % source["error"]
    return {"index": chosen.get("index"), "total_size_bytes": size, "fallback": False, "unreadable": unreadable,
            "source": text}
