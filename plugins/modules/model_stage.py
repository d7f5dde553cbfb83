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
  - Copies (or hardlinks) a model directory into C(<store>/<name>/<revision>.partial/), hashing every file with sha256
    while copying, verifies every shard named in C(model.safetensors.index.json) (header, byte coverage, tensors listed
    in the index), C(config.json) and C(tokenizer*.json), writes C(<revision>/.manifest.json), renames the directory to
    C(<store>/<name>/<revision>/) and flips the C(<store>/<name>/current) symlink with an atomic rename.
  - C(current) never points at a partial or unverified directory.
  - A re-run whose C(<revision>/.manifest.json) matches every file by size, mtime and inode (stat only, no hashing) and
    whose C(current) already points at the revision changes nothing.
  - An interrupted copy resumes; files already copied and recorded in the staging journal are not copied again.
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
    description: Where the files come from. Only C(path) (a local or mounted directory) for now.
    type: str
    choices: [path]
    default: path
  source_path:
    description: Directory holding C(model.safetensors.index.json), the shards, C(config.json) and tokenizer files.
    type: path
  store:
    description: Root of the model store.
    type: path
    default: /srv/models
  link_mode:
    description:
      - C(copy) copies every file. C(hardlink) links them (source and store must be on one filesystem; the store
        then shares the source's data, so never edit the source in place).
    type: str
    choices: [copy, hardlink]
    default: copy
attributes:
  check_mode:
    support: full
notes:
  - Top-level regular files of O(source_path) are staged, except hidden files and weight files
    (C(.safetensors), C(.bin), C(.pt), C(.pth), C(.gguf), C(.h5), C(.msgpack), C(.ckpt)) not named in the index;
    subdirectories are not staged and are listed in RV(skipped).
  - Free space needed is the bytes still to copy x 1.05.
author:
  - SGLang deployment project
"""

EXAMPLES = r"""
- name: Stage Kimi-K2.5 from the NFS mirror and make it current
  model_stage:
    name: Kimi-K2.5
    revision: "{{ model_stage_revision }}"
    source: path
    source_path: /mnt/mirror/moonshotai/Kimi-K2.5
    store: /srv/models
  register: model_stage_result
"""

RETURN = r"""
path:
  description: The staged revision directory.
  returned: always
  type: str
  sample: /srv/models/Kimi-K2.5/4f2a9c1/
current:
  description: The C(current) symlink.
  returned: always
  type: str
  sample: /srv/models/Kimi-K2.5/current
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
  description: Bytes copied in this run (0 on a no-op or with hardlinks; in check mode, bytes that would be copied).
  returned: always
  type: int
verified:
  description: True when every file of the revision passed verification (this run or the run that wrote the manifest).
  returned: always
  type: bool
resumed_files:
  description: Files of an interrupted earlier run that were kept instead of copied again.
  returned: when staged
  type: int
skipped:
  description: Entries of the source that were not staged (subdirectories, weight files not in the index).
  returned: when staged
  type: list
  elements: str
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
import time

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.model_index import INDEX_NAME, ModelIndexError, load_index
from ansible.module_utils.safetensors_header import ShardError, verify_shard

BUFFER_BYTES = 8 * 1024 * 1024
SPACE_MARGIN = 1.05
MANIFEST = ".manifest.json"
JOURNAL = ".staging.json"
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf", ".h5", ".msgpack", ".ckpt")
GB = 1000.0 ** 3


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
    tmp = "%s.tmp-%d" % (path, os.getpid())
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


def copy_and_hash(src, dst, buffer_bytes=BUFFER_BYTES):
    """Copy ``src`` to ``dst`` in one pass, hashing as it goes; fsync ``dst``.
    Returns (bytes copied, sha256 hex)."""
    digest = hashlib.sha256()
    buf = bytearray(buffer_bytes)
    view = memoryview(buf)
    copied = 0
    with open(src, "rb", buffering=0) as fin, open(dst, "wb", buffering=0) as fout:
        while True:
            n = fin.readinto(buf)
            if not n:
                break
            chunk = view[:n]
            digest.update(chunk)
            written = 0
            while written < n:
                written += fout.write(chunk[written:])
            copied += n
        os.fsync(fout.fileno())
    return copied, digest.hexdigest()


def hash_file(path, buffer_bytes=BUFFER_BYTES):
    digest = hashlib.sha256()
    buf = bytearray(buffer_bytes)
    view = memoryview(buf)
    with open(path, "rb", buffering=0) as handle:
        while True:
            n = handle.readinto(buf)
            if not n:
                break
            digest.update(view[:n])
    return digest.hexdigest()


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


# ---------------------------------------------------------------- plan

def plan_source(source_path):
    """Files to stage from ``source_path``.

    Returns dict: ``index`` (load_index result), ``files`` (sorted relative names: index,
    small files, shards), ``sizes`` (name -> bytes), ``skipped`` (list of str).
    Raises StageError listing every missing/unreadable piece.
    """
    problems = []
    if not os.path.isdir(source_path):
        raise StageError("source_path %s is not a directory; expected the model directory holding %s"
                         % (source_path, INDEX_NAME))
    try:
        index = load_index(os.path.join(source_path, INDEX_NAME))
    except ModelIndexError as exc:
        raise StageError(str(exc))
    shards = set(index["shards"])
    files, skipped = set(shards), []
    files.add(INDEX_NAME)
    for entry in sorted(os.listdir(source_path)):
        full = os.path.join(source_path, entry)
        if entry.startswith("."):
            continue
        if os.path.isdir(full):
            skipped.append(entry + "/")
        elif entry in shards or entry == INDEX_NAME:
            continue
        elif entry.lower().endswith(WEIGHT_SUFFIXES):
            skipped.append(entry)
        elif os.path.isfile(full):
            files.add(entry)
    sizes = {}
    missing = []
    for rel in sorted(files):
        try:
            st = os.stat(os.path.join(source_path, rel))
        except OSError:
            missing.append(rel)
            continue
        sizes[rel] = st.st_size
    if missing:
        listed = [m for m in missing if m in shards]
        if listed:
            problems.append("%d shard(s) named in %s are missing from %s: %s" % (
                len(listed), INDEX_NAME, source_path, ", ".join(listed)))
        other = [m for m in missing if m not in shards]
        if other:
            problems.append("missing in %s: %s" % (source_path, ", ".join(other)))
    if "config.json" not in files:
        problems.append("config.json is missing from %s; SGLang cannot load the model without it" % source_path)
    if problems:
        raise StageError(problems)
    return {"index": index, "files": sorted(files), "sizes": sizes, "skipped": skipped}


def manifest_matches(final_dir, manifest):
    """List of files whose size/mtime_ns/inode differ from ``manifest`` (stat only)."""
    changed = []
    for rel, rec in sorted((manifest.get("files") or {}).items()):
        try:
            now = stat_record(os.path.join(final_dir, rel))
        except OSError:
            changed.append("%s (missing)" % rel)
            continue
        diffs = [k for k in ("size", "mtime_ns", "inode") if now[k] != rec.get(k)]
        if diffs:
            changed.append("%s (%s changed)" % (rel, ", ".join(diffs)))
    return changed


def current_points_to(current, revision):
    return os.path.islink(current) and os.readlink(current).rstrip("/") in (revision, os.path.join(
        os.path.dirname(current), revision))


def flip_current(current, revision):
    """Point ``current`` at ``revision`` (relative target) atomically: symlink to a temp name, then os.replace."""
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

def verify_tree(root, index, files):
    """Verify a staged tree; return list of problems, each naming the file."""
    problems = []
    for shard in index["shards"]:
        path = os.path.join(root, shard)
        if not os.path.isfile(path):
            problems.append("%s: shard named in %s is missing" % (path, INDEX_NAME))
            continue
        try:
            info = verify_shard(path)
        except ShardError as exc:
            problems.append(str(exc))
            continue
        except (IOError, OSError) as exc:
            problems.append("%s: cannot read (%s)" % (path, exc))
            continue
        wanted = index["tensors_by_shard"].get(shard, [])
        absent = [t for t in wanted if t not in info["tensors"]]
        if absent:
            problems.append("%s: %d tensor(s) that %s assigns to this shard are not in its header, e.g. %s"
                            % (path, len(absent), INDEX_NAME, ", ".join(absent[:5])))
    json_files = ["config.json"] + [f for f in files if os.path.basename(f).startswith("tokenizer")
                                    and f.endswith(".json")]
    for rel in json_files:
        path = os.path.join(root, rel)
        try:
            with open(path, "rb") as handle:
                raw = handle.read()
        except (IOError, OSError) as exc:
            problems.append("%s: cannot read (%s)" % (path, exc.strerror or exc))
            continue
        if not raw.strip():
            problems.append("%s: file is empty, expected JSON (an empty config.json makes every scheduler crash, "
                            "field case R3); fetch it again" % path)
            continue
        try:
            json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            problems.append("%s: not valid JSON (%s); fetch it again" % (path, exc))
    return problems


# ---------------------------------------------------------------- main flow

def stage(module):
    p = module.params
    name, revision, store = p["name"], p["revision"], p["store"]
    problems = check_label("name", name) + check_label("revision", revision)
    if p["source"] == "path" and not p["source_path"]:
        problems.append("source=path needs source_path (the model directory)")
    if problems:
        raise StageError(problems)
    model_dir = os.path.join(store, name)
    final = os.path.join(model_dir, revision)
    partial = final + ".partial"
    current = os.path.join(model_dir, "current")
    result = dict(changed=False, path=final, current=current, shards=0, total_bytes=0, copied_bytes=0,
                  verified=False, actions=[])

    # 1. Already staged: stat-only comparison with the manifest.
    if os.path.isdir(final):
        manifest = read_json(os.path.join(final, MANIFEST))
        if not isinstance(manifest, dict) or not manifest.get("files"):
            raise StageError("%s exists but has no readable %s; it was not written by this module or was damaged. "
                             "Move it aside and re-run to stage it again" % (final, MANIFEST))
        changed = manifest_matches(final, manifest)
        if changed:
            raise StageError("%s differs from its %s: %s. Someone changed the staged files; move %s aside and re-run "
                             "to stage again" % (final, MANIFEST, ", ".join(changed), final))
        result.update(shards=manifest.get("shards", 0), total_bytes=manifest.get("total_bytes", 0),
                      verified=bool(manifest.get("verified")))
        if not current_points_to(current, revision):
            result["actions"].append("point %s at %s" % (current, revision))
            result["changed"] = True
            if not module.check_mode:
                flip_current(current, revision)
        return result

    # 2. Plan from the source.
    plan = plan_source(p["source_path"])
    src = p["source_path"]
    index, files, sizes = plan["index"], plan["files"], plan["sizes"]
    result.update(shards=len(index["shards"]), total_bytes=sum(sizes.values()), skipped=plan["skipped"])

    journal = read_json(os.path.join(partial, JOURNAL)) if os.path.isdir(partial) else None
    done = {}
    if isinstance(journal, dict):
        for rel, rec in (journal.get("files") or {}).items():
            if rel not in sizes:
                continue
            try:
                now = stat_record(os.path.join(partial, rel))
                src_now = stat_record(os.path.join(src, rel))
            except OSError:
                continue
            if all(now[k] == rec.get(k) for k in ("size", "mtime_ns", "inode")) and \
                    src_now["size"] == rec.get("source_size") and src_now["mtime_ns"] == rec.get("source_mtime_ns"):
                done[rel] = rec
    todo = [f for f in files if f not in done]
    remaining = sum(sizes[f] for f in todo)
    hardlink = p["link_mode"] == "hardlink"

    if hardlink:
        src_dev = os.stat(src).st_dev
        store_dev = os.stat(existing_ancestor(model_dir)).st_dev
        if src_dev != store_dev:
            raise StageError("link_mode=hardlink needs %s and %s on one filesystem (device %d vs %d); use "
                             "link_mode=copy or a store on the source's filesystem" % (src, store, src_dev, store_dev))
    else:
        needed = remaining * SPACE_MARGIN
        free = shutil.disk_usage(existing_ancestor(model_dir)).free
        if needed > free:
            raise StageError("not enough free space in %s: need %.1f GB (%.1f GB still to copy + 5%%), %.1f GB free; "
                             "free space or point store at a larger filesystem"
                             % (store, needed / GB, remaining / GB, free / GB))

    verb = "link" if hardlink else "copy"
    result["actions"].append("%s %d file(s), %d bytes, from %s into %s%s" % (
        verb, len(todo), remaining, src, partial, (" (keeping %d from an interrupted run)" % len(done)) if done else ""))
    result["actions"].append("verify %d shard(s), config.json and tokenizer files" % len(index["shards"]))
    result["actions"].append("rename %s to %s and point %s at %s" % (partial, final, current, revision))
    result["changed"] = True
    result["resumed_files"] = len(done)
    if module.check_mode:
        result["copied_bytes"] = 0 if hardlink else remaining
        return result

    # 3. Stage.
    os.makedirs(partial, exist_ok=True)
    journal = {"name": name, "revision": revision, "source": src, "files": dict(done)}
    copied = 0
    for rel in todo:
        s_path, d_path = os.path.join(src, rel), os.path.join(partial, rel)
        d_parent = os.path.dirname(d_path)
        if not os.path.isdir(d_parent):
            os.makedirs(d_parent)
        if os.path.lexists(d_path):
            os.unlink(d_path)
        src_before = stat_record(s_path)
        if hardlink:
            os.link(s_path, d_path)
            digest = hash_file(d_path)
        else:
            n, digest = copy_and_hash(s_path, d_path)
            copied += n
            if n != src_before["size"] or stat_record(s_path)["mtime_ns"] != src_before["mtime_ns"]:
                raise StageError("%s changed while it was being copied (size %d, copied %d); wait for whatever writes "
                                 "the source to finish and re-run" % (s_path, src_before["size"], n))
        rec = stat_record(d_path)
        rec.update(sha256=digest, source_size=src_before["size"], source_mtime_ns=src_before["mtime_ns"])
        journal["files"][rel] = rec
        write_json_atomic(os.path.join(partial, JOURNAL), journal)
    result["copied_bytes"] = copied

    # 4. Verify; a failed file leaves the journal so the next run fetches it again.
    problems = verify_tree(partial, index, files)
    if problems:
        bad = set()
        for rel in files:
            if any(msg.startswith(os.path.join(partial, rel) + ":") for msg in problems):
                bad.add(rel)
        for rel in bad:
            journal["files"].pop(rel, None)
        write_json_atomic(os.path.join(partial, JOURNAL), journal)
        raise StageError(["verification of %s failed (current still points at the previous revision)" % partial]
                         + problems)
    if index["total_size"] is not None:
        tensor_bytes = 0
        for shard in index["shards"]:
            tensor_bytes += verify_shard(os.path.join(partial, shard))["data_len"]
        if tensor_bytes != index["total_size"]:
            module.warn("%s metadata.total_size is %d but the shards hold %d tensor bytes; the index may be stale"
                        % (INDEX_NAME, index["total_size"], tensor_bytes))

    # 5. Manifest, rename, flip.
    manifest = {
        "name": name, "revision": revision, "source": src, "link_mode": p["link_mode"],
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "shards": len(index["shards"]), "total_bytes": result["total_bytes"], "verified": True,
        "files": {},
    }
    for rel in files:
        rec = journal["files"][rel]
        manifest["files"][rel] = {"size": rec["size"], "mtime_ns": rec["mtime_ns"], "inode": rec["inode"],
                                  "sha256": rec["sha256"]}
    write_json_atomic(os.path.join(partial, MANIFEST), manifest)
    os.unlink(os.path.join(partial, JOURNAL))
    fsync_dir(partial)
    os.rename(partial, final)
    fsync_dir(model_dir)
    flip_current(current, revision)
    result["verified"] = True
    return result


def main():
    module = AnsibleModule(
        argument_spec=dict(
            name=dict(type="str", required=True),
            revision=dict(type="str", required=True),
            source=dict(type="str", default="path", choices=["path"]),
            source_path=dict(type="path"),
            store=dict(type="path", default="/srv/models"),
            link_mode=dict(type="str", default="copy", choices=["copy", "hardlink"]),
        ),
        required_if=[("source", "path", ("source_path",))],
        supports_check_mode=True,
    )
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
