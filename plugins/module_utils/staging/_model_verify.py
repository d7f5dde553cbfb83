# -*- coding: utf-8 -*-
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Verification of a staged model tree: each shard's safetensors header against the weight map of
``model.safetensors.index.json`` (a single-file checkpoint's: the one derived from its ``model.safetensors`` header,
model_index ``index_from_header``), config and tokenizer JSON by content, sha256 records against the manifest.

Every problem is a message that starts with the file's path and a colon (``bad_files`` finds the files to fetch
again by that prefix).
"""

from __future__ import absolute_import, division, print_function

import json
import os

from ansible_collections.blackwell.sglang.plugins.module_utils.staging.model_files import CONFIG_FILES
from ansible_collections.blackwell.sglang.plugins.module_utils.staging.model_index import INDEX_NAME
from ansible_collections.blackwell.sglang.plugins.module_utils.staging.safetensors_header import ShardError, verify_shard

__metaclass__ = type


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
