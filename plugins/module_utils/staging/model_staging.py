# -*- coding: utf-8 -*-
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The staging flow of model_stage, the same for every source (model_sources: the protocol it calls).

1. Already staged (``<store>/<name>/<revision>`` with its manifest): a stat-only comparison with the manifest;
   changed or missing files are fetched again and replaced atomically once they verify (``repair``).
2. Plan from the source; keep what a journal in ``<revision>.partial`` recorded as done and still valid.
3. Transfer the rest in parallel; finished files go into the journal in durable batches (model_store.Journal).
4. Verify (model_verify); a failed file is removed so the next run fetches it again.
5. Write the manifest, rename ``.partial`` to the revision, point ``current`` at it.

``current`` never points at a ``.partial`` directory, and a failed stage leaves it where it was.
"""

from __future__ import absolute_import, division, print_function

import os
import shutil
import time

from ansible_collections.blackwell.sglang.plugins.module_utils.staging.durable_files import (
    STAT_KEYS, fsync_dir, read_json, stat_record, sync_files, write_json_atomic,
)
from ansible_collections.blackwell.sglang.plugins.module_utils.staging.model_files import dir_reader, missing_files, symlinks
from ansible_collections.blackwell.sglang.plugins.module_utils.staging.model_index import (
    INDEX_NAME, SINGLE_FILE, ModelIndexError, load_model_index,
)
from ansible_collections.blackwell.sglang.plugins.module_utils.staging.model_sources import make_source
from ansible_collections.blackwell.sglang.plugins.module_utils.staging.model_store import (
    JOURNAL, MANIFEST, PARTIAL_SUFFIX, Journal, StageError, check_label, current_points_to, flip_current,
    make_readable, manifest_matches,
)
from ansible_collections.blackwell.sglang.plugins.module_utils.staging._model_verify import (
    bad_files, check_sums, verify_file, verify_tree,
)
from ansible_collections.blackwell.sglang.plugins.module_utils.staging.safetensors_header import verify_shard
from ansible_collections.blackwell.sglang.plugins.module_utils.staging.stage_progress import Progress

__metaclass__ = type


def validate(p):
    """Refuse options the argument spec cannot express (labels that would break the store layout, ranges)."""
    problems = check_label("name", p["name"]) + check_label("revision", p["revision"])
    if p["source"] != "path" and p["link_mode"] == "hardlink":
        problems.append("link_mode=hardlink works only with source=path")
    if p["parallel"] < 1 or p["retries"] < 0 or p["timeout"] < 1:
        problems.append("parallel and timeout must be >= 1 and retries >= 0")
    if problems:
        raise StageError(problems)


def stage(module, source=None):
    """Stage ``module.params`` (the model_stage options); returns the module's result dict. Raises StageError."""
    p = module.params
    validate(p)
    name, revision, store = p["name"], p["revision"], p["store"]
    model_dir = os.path.join(store, name)
    final = os.path.join(model_dir, revision)
    partial = final + PARTIAL_SUFFIX
    current = os.path.join(model_dir, "current")
    progress_file = p.get("progress_file") or os.path.join(model_dir, ".%s.progress" % revision)
    result = dict(changed=False, path=final, current=current, activated=False, shards=0, total_bytes=0,
                  copied_bytes=0, verified=False, actions=[], progress=[], progress_file=progress_file)
    if source is None:
        source = make_source(p)

    # 1. Already staged: stat-only comparison with the manifest; repair what changed.
    if os.path.isdir(final):
        return staged(module, source, final, model_dir, current, result, progress_file)

    # 2. Plan from the source (check mode on a host the role has not prepared yet says what it cannot know).
    missing = source.missing_tools()
    if missing and module.check_mode:
        result["changed"] = True
        result["actions"].append("%s %s into %s, verify, and point %s at %s (sizes unknown until %s)" % (
            source.verb, source.description, partial, current, revision, "; ".join(missing)))
        return result
    plan = source.plan()
    index, files, sizes, sums = plan["index"], plan["files"], plan["sizes"], plan["sha256"]
    result.update(shards=len(index["shards"]), total_bytes=sum(v or 0 for v in sizes.values()),
                  skipped=plan["skipped"])
    done = journal_done(partial, sizes, source)
    todo = [f for f in files if f not in done]
    present = dict((f, min(source.partial_bytes(partial, f), sizes[f] or 0)) for f in todo)
    remaining = sum((sizes[f] or 0) - present[f] for f in todo)
    to_write = source.check_room(store, model_dir, remaining)
    notes = []
    if done:
        notes.append("keeping %d file(s) from an interrupted run" % len(done))
    if sum(present.values()):
        notes.append("resuming %d partly downloaded byte(s)" % sum(present.values()))
    result["actions"].append("%s %d file(s), %d bytes, from %s into %s%s" % (
        source.verb, len(todo), remaining, source.description, partial, (" (%s)" % "; ".join(notes)) if notes else ""))
    result["actions"].append("verify %d shard(s), sha256, config.json and tokenizer files" % len(index["shards"]))
    result["actions"].append("rename %s to %s and point %s at %s" % (partial, final, current, revision))
    result["changed"] = True
    result["resumed_files"] = len(done)
    result["resumed_bytes"] = sum(present.values())
    if module.check_mode:
        result["copied_bytes"] = to_write
        return result

    # 3. Transfer in parallel; finished files go into the journal in durable batches (Journal).
    journal = transfer(p, source, partial, index, todo, sums, sizes, done, present, result, progress_file)

    # 4. Verify; 5. manifest, rename, flip.
    finish(module, partial, final, current, index, files, journal.data, sums, result, source.description)
    return result


def transfer(p, source, partial, index, todo, sums, sizes, done, present, result, progress_file):
    """Step 3: fetch ``todo`` into ``partial`` on the source's threads, each finished file into the journal (durable
    batches) and the progress file; the Journal. Raises StageError naming what failed (what finished is kept for the
    re-run)."""
    os.makedirs(partial, exist_ok=True)
    journal = Journal(os.path.join(partial, JOURNAL),
                      {"name": p["name"], "revision": p["revision"], "source": source.description, "files": dict(done)})
    with open(progress_file, "w"):
        pass
    done_bytes = sum(sizes[f] or 0 for f in done) + sum(present.values())
    progress = Progress(index["shards"], result["total_bytes"], present_bytes=done_bytes,
                        done_shards=len([f for f in done if f in index["tensors_by_shard"]]), path=progress_file,
                        interval=p["progress_interval"])
    progress.maybe_emit(force=True)

    def on_done(rel, rec):
        rec.update(stat_record(os.path.join(partial, rel)))
        journal.add(rel, rec)
        progress.file_done(rel)

    records, problems = source.transfer(partial, todo, sums, sizes, progress, on_done)
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
    return journal


def journal_done(partial, sizes, source):
    """Files the journal in ``partial`` recorded as done that are still there unchanged and still match the source."""
    journal = read_json(os.path.join(partial, JOURNAL)) if os.path.isdir(partial) else None
    done = {}
    if not isinstance(journal, dict):
        return done
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
    return done


def staged(module, source, final, model_dir, current, result, progress_file):
    """Step 1: the revision is staged; repair what changed since and point ``current`` at it."""
    revision = os.path.basename(final)
    manifest = read_json(os.path.join(final, MANIFEST))
    if not isinstance(manifest, dict) or not manifest.get("files"):
        raise StageError("%s exists but has no readable %s; it was not written by this module or was damaged. "
                         "Move it aside and re-run to stage it again" % (final, MANIFEST))
    result.update(shards=manifest.get("shards", 0), total_bytes=manifest.get("total_bytes", 0),
                  verified=bool(manifest.get("verified")))
    changed = manifest_matches(final, manifest)
    if changed:
        repair(module, source, final, model_dir, manifest, changed, result, progress_file)
    # a revision staged under a hardened umask (or by a release before this check): readable by the service user
    closed = make_readable([model_dir], final, check_only=module.check_mode)
    if closed:
        result["actions"].append("give %d path(s) of %s read permission for the service user (%s)"
                                 % (len(closed), final, ", ".join(os.path.relpath(c, model_dir) for c in closed[:5])
                                    + (", ..." if len(closed) > 5 else "")))
        result["changed"] = True
    if not current_points_to(current, revision) and module.params.get("activate", True):
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


def finish(module, partial, final, current, index, files, journal, sums, result, description):
    """Verify ``partial``, write its manifest, rename it to ``final`` and (``activate``) point ``current`` at it."""
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
    model_dir = os.path.dirname(final)
    manifest = {
        "name": os.path.basename(model_dir), "revision": os.path.basename(final), "source": description,
        "link_mode": module.params["link_mode"], "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
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
    # every file and directory the sources created, whatever the umask: the service user reads them (model_store)
    make_readable([model_dir], partial)
    fsync_dir(partial)
    os.rename(partial, final)
    fsync_dir(model_dir)
    if module.params.get("activate", True):
        flip_current(current, os.path.basename(final))
    result["activated"] = current_points_to(current, os.path.basename(final))
    result["verified"] = True


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
    sizes = dict((n, recorded[n].get("size")) for n in names)
    source.check_room(module.params["store"], model_dir, sum(s or 0 for s in sizes.values()))
    work_dir = os.path.join(model_dir, ".%s.repair" % os.path.basename(final))
    shutil.rmtree(work_dir, ignore_errors=True)
    os.makedirs(work_dir)
    try:
        progress = Progress([n for n in names if n.endswith(".safetensors")], sum(s or 0 for s in sizes.values()),
                            path=progress_file, interval=module.params["progress_interval"])
        expected = dict((n, recorded[n].get("sha256")) for n in names)
        records, problems = source.transfer(work_dir, names, expected, sizes, progress, lambda rel, rec: None)
        result["copied_bytes"] = sum(r.get("transferred", 0) for r in records.values())
        if not problems:
            # the revision's index, or a single-file revision's model.safetensors header: the copy fetched again
            # when it is one of the changed files, else the staged one
            staged_files = set(recorded)
            key = INDEX_NAME if INDEX_NAME in staged_files else SINGLE_FILE
            try:
                index = load_model_index(work_dir if key in names else final, staged_files)[0]
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
        make_readable(tree=final)  # the fetched files and the rewritten manifest, whatever the umask
        result["progress"] = progress.lines
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)


def store_state(p, planned=None):
    """Two lines for diff mode: the revision directory and what ``current`` points at, as they are now, or (with
    ``planned``, a check-mode result) as the planned run would leave them."""
    model_dir = os.path.join(p["store"], p["name"])
    final, current = os.path.join(model_dir, p["revision"]), os.path.join(model_dir, "current")
    manifest = read_json(os.path.join(final, MANIFEST)) if os.path.isdir(final) else None
    if planned is not None:
        manifest = {"shards": planned["shards"], "total_bytes": planned["total_bytes"], "verified": True}
    if isinstance(manifest, dict):
        revision = "%s: %s shard(s), %s bytes, %s\n" % (final, manifest.get("shards"), manifest.get("total_bytes"),
                                                        "verified" if manifest.get("verified") else "not verified")
    else:
        revision = "%s: absent\n" % final
    if planned is not None and p.get("activate", True):
        target = p["revision"]
    else:
        target = os.readlink(current) if os.path.islink(current) else None
    return revision + ("%s -> %s\n" % (current, target) if target else "%s: absent\n" % current)
