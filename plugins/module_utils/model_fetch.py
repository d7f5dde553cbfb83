# -*- coding: utf-8 -*-
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Transfers for model_stage: sha256 manifests, resumable HTTP downloads, progress (stdlib only).

* ``parse_manifest`` reads ``SHA256SUMS`` (``sha256sum`` output: ``<64 hex><space><space or *><name>``)
  or a JSON manifest ``{"files": {"<name>": {"sha256": "<hex>", "size": <bytes>}}}``.
* ``Mirror`` talks to a plain HTTP(S) mirror (any static file server that honours ``Range``): small
  metadata GETs, ``HEAD`` for sizes, and ``download`` which writes ``<dest>.download`` while hashing
  (one pass), resumes a partial file with ``Range: bytes=N-`` only when the server answers ``206`` with a
  ``Content-Range`` starting at N (anything else restarts the file from byte 0), retries transient
  failures with exponential backoff, and renames to ``<dest>`` once size and sha256 match.
* ``start_writeback`` / ``sync_files``: durability in batches instead of an fsync as each file ends. ``pump``
  asks the kernel to start writing back every ``WRITEBACK_BYTES`` it wrote (``sync_file_range``, no
  waiting), so the disk works while the transfer goes on; the caller makes a batch of finished files
  durable at once (``fdatasync`` issued together, so the filesystem journal commits them in one go) before
  it records them as done or renames anything.
* ``Progress`` renders ``staged 12/64 shards, 143.2/547.0 GB, 1.9 GB/s, ETA 3m`` lines, at most one per
  interval, into a list and (appended) into a progress file that an operator or the role can tail.

Headers (tokens) are never put into messages; URLs in messages have any user:password removed.
"""

from __future__ import absolute_import, division, print_function

import ctypes
import ctypes.util
import hashlib
import json
import os
import re
import socket
import stat
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from http.client import HTTPException
from urllib.error import HTTPError, URLError
from urllib.parse import quote, urlsplit, urlunsplit
# The standard library's opener, not ansible.module_utils.urls.open_url: open_url builds an SSL context and a handler
# chain for every request and doubled a staging's time and CPU (benchmarks/stage_bench.py, 1 GB in 16 shards:
# 1.07 s and 1.5 CPU s with urlopen, 2.0 s and 3.1 CPU s with open_url); tests/sanity/ignore-2.19.txt says so.
from urllib.request import Request, urlopen

__metaclass__ = type

# 8 MiB: hashlib releases the GIL for the whole update, and sha256 runs ~25 % faster than with 1 MiB pieces.
CHUNK_BYTES = 8 * 1024 * 1024
WRITEBACK_BYTES = 64 * 1024 * 1024
# Network reads: a slow link's bytes reach the disk (and the progress line) every MiB.
READ_BYTES = 1024 * 1024
SYNC_FILE_RANGE_WRITE = 2
METADATA_LIMIT = 256 * 1024 * 1024
DOWNLOAD_SUFFIX = ".download"
GB = 1000.0 ** 3
_SUM_LINE = re.compile(r"^([0-9a-fA-F]{64}) [ *](.+)$")
# HTTP statuses worth retrying; every other 4xx is final (404: not on the mirror, 401/403: token).
RETRY_STATUSES = (408, 425, 429, 500, 502, 503, 504)


class FetchError(Exception):
    """A file could not be fetched; ``name`` is the file (relative name), ``reason`` says why."""

    def __init__(self, name, reason):
        super(FetchError, self).__init__("%s: %s" % (name, reason))
        self.name = name
        self.reason = reason


class TransientError(Exception):
    """A failure that a retry may cure (connection reset, timeout, short body, 5xx)."""


class ChecksumError(TransientError):
    """The bytes received do not hash to the manifest's sha256 (retried once from byte 0)."""


# ---------------------------------------------------------------- manifests

def parse_sha256sums(text, source="SHA256SUMS"):
    """``{relative name: sha256 hex}`` from ``sha256sum`` output. Raises ValueError naming bad lines."""
    sums, bad = {}, []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.rstrip("\r")
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        match = _SUM_LINE.match(line)
        if not match:
            bad.append(number)
            continue
        name = match.group(2)
        if name.startswith("./"):
            name = name[2:]
        sums[name] = match.group(1).lower()
    if bad:
        raise ValueError("%s: line(s) %s are not '<sha256>  <file>' (sha256sum format)"
                         % (source, ", ".join(str(n) for n in bad[:10])))
    if not sums:
        raise ValueError("%s: no checksums in it; expected sha256sum output, one line per file" % source)
    return sums


def parse_manifest(raw, source="SHA256SUMS"):
    """Parse a manifest (bytes). Returns ``(sha256 by name, size by name)``; sizes only from JSON."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError("%s: not UTF-8 text" % source)
    if text.lstrip().startswith("{"):
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise ValueError("%s: not valid JSON (%s)" % (source, exc))
        files = data.get("files") if isinstance(data, dict) else None
        if not isinstance(files, dict) or not files:
            raise ValueError('%s: expected {"files": {"<name>": {"sha256": "<hex>", "size": <bytes>}}}' % source)
        sums, sizes, bad = {}, {}, []
        for name, rec in sorted(files.items()):
            sha = rec.get("sha256") if isinstance(rec, dict) else rec
            if not isinstance(sha, str) or not re.match(r"^[0-9a-fA-F]{64}$", sha):
                bad.append(name)
                continue
            sums[name] = sha.lower()
            size = rec.get("size") if isinstance(rec, dict) else None
            if isinstance(size, int) and not isinstance(size, bool) and size >= 0:
                sizes[name] = size
        if bad:
            raise ValueError("%s: no valid sha256 for %s" % (source, ", ".join(bad[:10])))
        return sums, sizes
    return parse_sha256sums(text, source), {}


# ---------------------------------------------------------------- durability

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


# ---------------------------------------------------------------- hashing

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


# ---------------------------------------------------------------- http

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


def redact_url(url):
    """``url`` without user:password."""
    parts = urlsplit(url)
    if "@" in parts.netloc:
        parts = parts._replace(netloc=parts.netloc.rsplit("@", 1)[1])
    return urlunsplit(parts)


def join_url(base, name):
    return base.rstrip("/") + "/" + quote(name)


def _is_transient(exc):
    if isinstance(exc, HTTPError):
        return exc.code in RETRY_STATUSES
    return isinstance(exc, (URLError, HTTPException, socket.timeout, ConnectionError, TransientError, OSError))


def _describe(exc):
    if isinstance(exc, HTTPError):
        hint = ""
        if exc.code in (401, 403):
            hint = " (the mirror wants credentials: set the token or headers option)"
        elif exc.code == 404:
            hint = " (not on the mirror)"
        return "HTTP %d %s%s" % (exc.code, exc.reason, hint)
    if isinstance(exc, URLError):
        return "cannot connect (%s)" % (exc.reason,)
    return "%s: %s" % (type(exc).__name__, exc) if str(exc) else type(exc).__name__


class Mirror(object):
    """A mirror base URL plus request headers (credentials stay in ``headers``, never in messages)."""

    def __init__(self, base_url, headers=None, timeout=60, retries=5, retry_delay=2.0, chunk=CHUNK_BYTES,
                 sleep=time.sleep, stop=None):
        self.base_url = base_url
        self.headers = dict(headers or {})
        self.timeout = timeout
        self.retries = retries
        self.retry_delay = retry_delay
        self.chunk = chunk
        self.sleep = sleep
        self.stop = stop or threading.Event()

    def url(self, name):
        if re.match(r"^[a-z][a-z0-9+.-]*://", name):
            return name
        return join_url(self.base_url, name)

    def _open(self, url, method="GET", extra=None):
        headers = dict(self.headers)
        headers.update(extra or {})
        headers.setdefault("Accept-Encoding", "identity")
        return urlopen(Request(url, headers=headers, method=method), timeout=self.timeout)

    def _with_retries(self, name, func):
        attempt = 0
        while True:
            if self.stop.is_set():
                raise FetchError(name, "cancelled after another file failed")
            try:
                return func()
            except FetchError:
                raise
            except Exception as exc:  # classified below; anything unexpected is final
                if not _is_transient(exc) or attempt >= self.retries:
                    tail = " after %d attempts" % (attempt + 1) if attempt else ""
                    raise FetchError(name, "%s from %s%s" % (_describe(exc), redact_url(self.url(name)), tail))
                self.sleep(min(self.retry_delay * (2 ** attempt), 60.0))
                attempt += 1

    def get_bytes(self, name, limit=METADATA_LIMIT):
        """GET a small file (index, manifest) into memory."""
        def once():
            with self._open(self.url(name)) as resp:
                data = resp.read(limit + 1)
            if len(data) > limit:
                raise FetchError(name, "larger than %d bytes; not a metadata file" % limit)
            return data
        return self._with_retries(name, once)

    def head_size(self, name):
        """Content-Length from a HEAD (None when the server does not say)."""
        def once():
            with self._open(self.url(name), method="HEAD") as resp:
                length = resp.headers.get("Content-Length")
            return int(length) if length is not None and length.isdigit() else None
        return self._with_retries(name, once)

    def download(self, name, dest, expected_size=None, expected_sha256=None, on_bytes=None):
        """Fetch ``name`` into ``dest`` via ``dest + '.download'``, resuming that file when present (or
        ``dest`` itself, left complete by a run that stopped before recording it). Not fsynced: the caller
        syncs before it records the file as done.

        Returns dict ``size``, ``sha256``, ``transferred`` (bytes over the wire this call),
        ``resumed_from`` (bytes kept from an earlier attempt), ``restarts`` (times the file began again
        at byte 0 because the server ignored Range or the checksum failed).
        Raises FetchError naming the file.
        """
        tmp = dest + DOWNLOAD_SUFFIX
        state = {"transferred": 0, "resumed_from": None, "restarts": 0, "checksum_failures": 0}

        def cancelled():
            if self.stop.is_set():
                raise FetchError(name, "cancelled after another file failed")

        def count(n):
            state["transferred"] += n
            if on_bytes is not None:
                on_bytes(n)

        def once():
            if not os.path.exists(tmp):
                if os.path.isfile(dest):
                    # finished by an earlier run that stopped before recording it: check it like a partial
                    # file (hashed, not fetched again when whole; sha256 decides)
                    os.replace(dest, tmp)
                else:
                    open(tmp, "wb").close()
            have = os.path.getsize(tmp)
            if expected_size is not None and have > expected_size:
                os.unlink(tmp)
                have = 0
            digest, have = hash_prefix(tmp, have) if have else (hashlib.sha256(), 0)
            if state["resumed_from"] is None:
                state["resumed_from"] = have
            if expected_size is None or have < expected_size:
                extra = {"Range": "bytes=%d-" % have} if have else {}
                try:
                    resp = self._open(self.url(name), extra=extra)
                except HTTPError as exc:
                    if exc.code == 416 and have:  # our partial file is not a prefix the server knows
                        os.unlink(tmp)
                        state["restarts"] += 1
                        state["resumed_from"] = 0  # nothing was kept
                        raise TransientError("server refused the range from byte %d; starting over" % have)
                    raise
                with resp:
                    mode = "ab"
                    if have:
                        content_range = resp.headers.get("Content-Range") or ""
                        start = re.match(r"^bytes (\d+)-", content_range.strip())
                        if resp.status != 206 or not start or int(start.group(1)) != have:
                            # server ignored Range (200) or answered another range: start over
                            mode, have, digest = "wb", 0, hashlib.sha256()
                            state["restarts"] += 1
                            state["resumed_from"] = 0  # nothing was kept
                    with open(tmp, mode, buffering=0) as out:
                        have += pump(resp, out, digest, self.chunk, on_bytes=count, should_stop=cancelled,
                                     read_bytes=READ_BYTES)
            if expected_size is not None and have != expected_size:
                raise TransientError("got %d of %d bytes (connection ended early)" % (have, expected_size))
            sha = digest.hexdigest()
            if expected_sha256 and sha != expected_sha256:
                os.unlink(tmp)
                state["checksum_failures"] += 1
                if state["checksum_failures"] > 1 or self.retries == 0:
                    raise FetchError(name, "sha256 mismatch: manifest says %s, received bytes hash to %s; the "
                                           "mirror serves a corrupt or different file" % (expected_sha256, sha))
                state["restarts"] += 1
                state["resumed_from"] = 0  # nothing was kept
                raise ChecksumError("sha256 mismatch, fetching again from byte 0")
            os.replace(tmp, dest)
            return sha, have

        sha, size = self._with_retries(name, once)
        return {"size": size, "sha256": sha, "transferred": state["transferred"],
                "resumed_from": state["resumed_from"] or 0, "restarts": state["restarts"]}


# ---------------------------------------------------------------- progress

def format_duration(seconds):
    if seconds is None:
        return "?"
    seconds = int(round(seconds))
    if seconds < 60:
        return "%ds" % seconds
    if seconds < 3600:
        return "%dm" % ((seconds + 59) // 60)
    return "%dh%02dm" % (seconds // 3600, (seconds % 3600) // 60)


class Progress(object):
    """Thread-safe progress over a set of files; ``lines`` collects what was emitted."""

    def __init__(self, shard_names, total_bytes, present_bytes=0, done_shards=0, path=None, interval=10.0,
                 clock=time.monotonic, max_lines=200):
        self.shards = set(shard_names)
        self.total_bytes = total_bytes
        self.present = present_bytes
        self.transferred = 0
        self.done_shards = done_shards
        self.path = path
        self.interval = interval
        self.clock = clock
        self.start = clock()
        self.last = None
        self.lines = []
        self.max_lines = max_lines
        self.lock = threading.Lock()

    def add(self, n):
        with self.lock:
            self.transferred += n
        self.maybe_emit()

    def file_done(self, name):
        with self.lock:
            if name in self.shards:
                self.done_shards += 1
        self.maybe_emit()

    def line(self):
        with self.lock:
            done = min(self.present + self.transferred, self.total_bytes)
            elapsed = max(self.clock() - self.start, 1e-6)
            rate = self.transferred / elapsed
            remaining = self.total_bytes - done
            eta = 0 if remaining <= 0 else (remaining / rate if rate > 0 else None)
            return "staged %d/%d shards, %.1f/%.1f GB, %.1f GB/s, ETA %s" % (
                self.done_shards, len(self.shards), done / GB, self.total_bytes / GB, rate / GB, format_duration(eta))

    def maybe_emit(self, force=False):
        now = self.clock()
        with self.lock:
            if not force and self.last is not None and now - self.last < self.interval:
                return
            self.last = now
        self.emit(self.line())

    def emit(self, text):
        with self.lock:
            self.lines.append(text)
            if len(self.lines) > self.max_lines:
                del self.lines[1:len(self.lines) - self.max_lines + 1]
            if self.path:
                try:
                    with open(self.path, "a") as handle:
                        handle.write("%s %s\n" % (time.strftime("%Y-%m-%dT%H:%M:%S"), text))
                except (IOError, OSError):
                    self.path = None  # progress is best effort; staging goes on


def follow_process(argv, env, tick, interval, keep_lines=8):
    """Run ``argv`` (a list; never a shell) with ``env``, calling ``tick()`` every ``interval`` seconds until it exits.

    For a child whose progress is read from outside it (model_stage's hf helper: the bytes it has written), while
    a module's run_command would block without a word until the end. stdout and stderr are read together and
    continuously (a full pipe would stall the child). Returns ``(returncode int, last keep_lines lines of output)``.
    """
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    output = []

    def drain():
        for line in iter(proc.stdout.readline, b""):
            output.append(line.decode("utf-8", "replace"))
            del output[:-40]

    reader = threading.Thread(target=drain)
    reader.daemon = True
    reader.start()
    while proc.poll() is None:
        time.sleep(interval)
        tick()
    reader.join(5)
    proc.stdout.close()
    return proc.returncode, "".join(output).strip().splitlines()[-keep_lines:]
