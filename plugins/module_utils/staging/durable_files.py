# -*- coding: utf-8 -*-
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""File primitives of staging (stdlib only): one-pass copy and hash, durability in batches, atomic JSON.

* ``pump`` copies a stream to a file while hashing it (one pass over the bytes) and asks the kernel to start
  writing back every ``WRITEBACK_BYTES`` it wrote (``sync_file_range``, no waiting), so the disk works while the
  transfer goes on;
* ``start_writeback`` / ``sync_files``: durability in batches instead of an fsync as each file ends: the caller makes
  a batch of finished files durable at once (``fdatasync`` issued together, so the filesystem journal commits them
  in one go) before it records them as done or renames anything;
* ``write_json_atomic``, ``fsync_dir``, ``read_json``, ``stat_record``: what a staging journal and a manifest are
  written and compared with;
* ``tree_bytes``: what a staging directory holds so far (model_stage's progress and host_capacity's disk check).
"""

from __future__ import absolute_import, division, print_function

import ctypes
import ctypes.util
import hashlib
import json
import os
import stat
import threading
from concurrent.futures import ThreadPoolExecutor

__metaclass__ = type

# 8 MiB: hashlib releases the GIL for the whole update, and sha256 runs ~25 % faster than with 1 MiB pieces.
CHUNK_BYTES = 8 * 1024 * 1024
WRITEBACK_BYTES = 64 * 1024 * 1024
SYNC_FILE_RANGE_WRITE = 2
STAT_KEYS = ("size", "mtime_ns", "inode")


_LIBC = []


def _libc():
    """The C library through ctypes, or None (then the fallbacks below are used)."""
    if not _LIBC:
        try:
            _LIBC.append(ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True))
        except (OSError, TypeError):
            _LIBC.append(None)
    return _LIBC[0]


def start_writeback(fd):
    """Ask the kernel to start writing ``fd``'s dirty pages to disk without waiting (Linux
    ``sync_file_range(SYNC_FILE_RANGE_WRITE)``). Only a hint: durability comes from ``sync_files``.
    Returns False where the call is not available."""
    libc = _libc()
    func = getattr(libc, "sync_file_range", None)
    if func is None:
        return False
    func.argtypes = [ctypes.c_int, ctypes.c_longlong, ctypes.c_longlong, ctypes.c_uint]
    return func(fd, 0, 0, SYNC_FILE_RANGE_WRITE) == 0


def _sync_one(path, data_only=True):
    fd = os.open(path, os.O_RDONLY)
    try:
        (os.fdatasync if data_only else os.fsync)(fd)
    except OSError as exc:
        raise OSError(exc.errno, "cannot make %s durable: %s" % (path, exc.strerror), path)
    finally:
        os.close(fd)


def sync_files(paths, parallel=8):
    """Make ``paths`` durable: ``fdatasync`` each, from ``parallel`` threads at once so the filesystem's journal
    commits them together, then fsync each parent directory (their names). Only these files are waited for
    (``syncfs`` would also wait for every other writer on a shared filesystem). Raises OSError naming the file."""
    paths = list(paths)
    if not paths:
        return
    with ThreadPoolExecutor(max_workers=max(1, min(parallel, len(paths)))) as pool:
        list(pool.map(_sync_one, paths))
    for directory in sorted(set(os.path.dirname(os.path.abspath(p)) for p in paths)):
        _sync_one(directory, data_only=False)


def pump(source, out, digest, chunk=CHUNK_BYTES, on_bytes=None, should_stop=None, read_bytes=None):
    """Copy ``source`` (anything with ``readinto``: a file, an HTTP response) to the file ``out`` while
    updating ``digest``: one pass over the bytes. Reads take ``read_bytes`` (default ``chunk``) and are written
    at once; the digest is fed ``chunk`` bytes at a time (a smaller read keeps a slow link's bytes flowing to
    disk and to ``on_bytes``, a big hash update is faster). ``on_bytes(n)`` after each read; ``should_stop()``
    before each read may raise to abandon the copy (what was written stays). Every ``WRITEBACK_BYTES``, and at
    the end, the kernel is asked to start writing ``out`` back (no fsync here: the caller syncs in one batch).
    Returns bytes copied."""
    buf = bytearray(chunk)
    view = memoryview(buf)
    step = min(read_bytes or chunk, chunk)
    copied = unflushed = filled = 0
    while True:
        if should_stop is not None:
            should_stop()
        n = source.readinto(view[filled:filled + step])
        if n:
            piece = view[filled:filled + n]
            written = 0
            while written < n:
                written += out.write(piece[written:])
            filled += n
            copied += n
            unflushed += n
        if filled and (not n or filled + step > chunk):
            digest.update(view[:filled])
            filled = 0
        if unflushed >= WRITEBACK_BYTES or (unflushed and not n):  # and the tail once the source is done
            start_writeback(out.fileno())
            unflushed = 0
        if not n:
            return copied
        if on_bytes is not None:
            on_bytes(n)


def hash_prefix(path, length=None, chunk=CHUNK_BYTES):
    """sha256 object over the first ``length`` bytes (all when None) of ``path``; returns (hash, bytes read)."""
    digest = hashlib.sha256()
    buf = bytearray(chunk)
    view = memoryview(buf)
    done = 0
    with open(path, "rb", buffering=0) as handle:
        while length is None or done < length:
            want = chunk if length is None else min(chunk, length - done)
            n = handle.readinto(view[:want])
            if not n:
                break
            digest.update(view[:n])
            done += n
    return digest, done


def tree_bytes(path, top_files=None):
    """Bytes of the regular files under ``path`` (0 when it does not exist); symlinks are neither followed nor
    counted. What a staging directory holds so far: model_stage's progress and copy figures and host_capacity's
    ``partial_bytes`` (preflight's disk check) are the same count. With a list ``top_files``, the names of the
    regular files directly under ``path`` are appended to it in the same walk (model_stage's hf source finds the
    files huggingface_hub has renamed into place on each progress tick)."""
    total = 0
    for dirpath, _dirnames, filenames in os.walk(path):
        for name in filenames:
            try:
                st = os.lstat(os.path.join(dirpath, name))
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode):
                total += st.st_size
                if top_files is not None and dirpath == path:
                    top_files.append(name)
    return total


def hash_file(path, chunk=CHUNK_BYTES):
    """sha256 hex of the whole file ``path``."""
    return hash_prefix(path, None, chunk)[0].hexdigest()


def copy_and_hash(src, dst, chunk=CHUNK_BYTES, on_bytes=None):
    """Copy ``src`` to ``dst`` in one pass, hashing as it goes (not fsynced: the caller syncs in batches).
    Returns (bytes copied, sha256 hex)."""
    digest = hashlib.sha256()
    with open(src, "rb", buffering=0) as fin, open(dst, "wb", buffering=0) as fout:
        copied = pump(fin, fout, digest, chunk, on_bytes=on_bytes)
    return copied, digest.hexdigest()


def stat_record(path):
    """``{"size", "mtime_ns", "inode"}`` of ``path`` (STAT_KEYS): what a journal or manifest compares with."""
    st = os.stat(path)
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "inode": st.st_ino}


def write_json_atomic(path, data):
    """Write ``data`` as JSON to ``path`` through a temporary file, fsynced, then renamed over ``path``."""
    tmp = "%s.tmp-%d-%d" % (path, os.getpid(), threading.get_ident())
    with open(tmp, "w") as handle:
        json.dump(data, handle, indent=1, sort_keys=True)
        handle.write("\n")
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def fsync_dir(path):
    """fsync the directory ``path`` (its entries: a rename into it is durable after this)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read_json(path):
    """The JSON in ``path``, or None when it is missing or unreadable."""
    try:
        with open(path) as handle:
            return json.load(handle)
    except (IOError, OSError, ValueError):
        return None
