# -*- coding: utf-8 -*-
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The model store's layout on disk, as model_stage writes it: ``<store>/<name>/<revision>`` (verified, with
``.manifest.json``), ``<revision>.partial`` (being staged, with the journal ``.staging.json``) and ``current``, a
relative symlink to the active revision that SGLang's ``--model-path`` names.

Holds the error that stops a staging (``StageError``), the journal, the stat-only comparison with a manifest, the
atomic flip of ``current``, the free-space check, and the modes that let the service user read what was staged.
"""

from __future__ import absolute_import, division, print_function

import os
import shutil
import stat
import threading
import time

from ansible_collections.blackwell.sglang.plugins.module_utils.staging.durable_files import (
    STAT_KEYS, fsync_dir, stat_record, sync_files, write_json_atomic,
)

__metaclass__ = type

MANIFEST = ".manifest.json"
JOURNAL = ".staging.json"
PARTIAL_SUFFIX = ".partial"
# Free space asked for beyond the bytes still to fetch.
SPACE_MARGIN = 1.05
GB = 1000.0 ** 3
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


# The staged tree is written by root and read by the service user (sglang_service_user, not in root's group), so every
# file needs the "other" read bit and every directory read and search. Files and directories are created with the
# process umask: a hardened one (027, 077: CIS benchmarks, some cloud images' root) drops those bits, and the unit
# then fails to open its weights after a full stage. Only these bits are added, never a write bit; a hardlinked file
# is the source's own inode, whose mode gains them too.
FILE_READ_BITS = stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH  # 0o444
DIR_READ_BITS = FILE_READ_BITS | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH  # 0o555


def unreadable(paths=(), tree=None):
    """(path, mode now, mode with the read bits) of ``paths`` and of every file and directory under ``tree`` (the
    tree's root included) that lacks FILE_READ_BITS (a directory: DIR_READ_BITS). Symlinks are neither followed nor
    listed (their own mode means nothing)."""
    found, seen = [], set()

    def look(path):
        if path in seen:
            return
        seen.add(path)
        try:
            st = os.lstat(path)
        except OSError:
            return
        if stat.S_ISLNK(st.st_mode):
            return
        bits = DIR_READ_BITS if stat.S_ISDIR(st.st_mode) else FILE_READ_BITS
        mode = stat.S_IMODE(st.st_mode)
        if mode & bits != bits:
            found.append((path, mode, mode | bits))

    for path in paths:
        look(path)
    if tree is not None:
        look(tree)
        for dirpath, dirnames, filenames in os.walk(tree):
            for name in dirnames + filenames:
                look(os.path.join(dirpath, name))
    return found


def make_readable(paths=(), tree=None, check_only=False):
    """Give what ``unreadable`` finds the read bits (chmod; size, mtime and inode stay, so a manifest still matches).
    Returns the paths it changed (or, with ``check_only``, would change)."""
    found = unreadable(paths, tree)
    if not check_only:
        for path, _old, new in found:
            os.chmod(path, new)
    return [path for path, _old, _new in found]


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


def space_check(store, model_dir, remaining):
    needed = remaining * SPACE_MARGIN
    free = shutil.disk_usage(existing_ancestor(model_dir)).free
    if needed > free:
        raise StageError("not enough free space in %s: need %.1f GB (%.1f GB still to copy + 5%%), %.1f GB free; "
                         "free space or point store at a larger filesystem"
                         % (store, needed / GB, remaining / GB, free / GB))


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
