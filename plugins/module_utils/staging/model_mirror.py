# -*- coding: utf-8 -*-
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A static HTTP(S) mirror of a model directory (stdlib only): resumable, verified downloads.

``Mirror`` talks to any static file server that honours ``Range``: small metadata GETs, ranged GETs of a few bytes
of a large file (``get_range``: a safetensors header), ``HEAD`` for sizes, and
``download`` which writes ``<dest>.download`` while hashing (one pass), resumes a partial file with
``Range: bytes=N-`` only when the server answers ``206`` with a ``Content-Range`` starting at N (anything else
restarts the file from byte 0), retries transient failures with exponential backoff, and renames to ``<dest>`` once
size and sha256 match. Headers (tokens) are never put into messages; URLs in messages have any user:password removed.
"""

from __future__ import absolute_import, division, print_function

import hashlib
import os
import re
import socket
import threading
import time
from http.client import HTTPException
from urllib.error import HTTPError, URLError
from urllib.parse import quote, urlsplit, urlunsplit

from ansible_collections.blackwell.sglang.plugins.module_utils.staging.durable_files import CHUNK_BYTES, hash_prefix, pump
# The collection's one HTTP client: urllib's opener, not ansible.module_utils.urls.open_url, which builds an SSL context
# and a handler chain for every request and doubled a staging's time and CPU (benchmarks/stage_bench.py, 1 GB in 16
# shards: 1.07 s and 1.5 CPU s with urlopen, 2.0 s and 3.1 CPU s with open_url).
from ansible_collections.blackwell.sglang.plugins.module_utils.http.http_client import open_request

__metaclass__ = type

# Network reads: a slow link's bytes reach the disk (and the progress line) every MiB.
READ_BYTES = 1024 * 1024
METADATA_LIMIT = 256 * 1024 * 1024
DOWNLOAD_SUFFIX = ".download"
# HTTP statuses worth retrying; every other 4xx is final (404: not on the mirror, 401/403: token).
RETRY_STATUSES = (408, 425, 429, 500, 502, 503, 504)


class FetchError(Exception):
    """A file could not be fetched; ``name`` is the file (relative name), ``reason`` says why, ``status`` is the
    HTTP status that refused it (None when it was not an HTTP answer)."""

    def __init__(self, name, reason, status=None):
        super(FetchError, self).__init__("%s: %s" % (name, reason))
        self.name = name
        self.reason = reason
        self.status = status


class TransientError(Exception):
    """A failure that a retry may cure (connection reset, timeout, short body, 5xx)."""


class ChecksumError(TransientError):
    """The bytes received do not hash to the manifest's sha256 (retried once from byte 0)."""


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
                 sleep=time.sleep, stop=None, host_bound_headers=None):
        self.base_url = base_url
        self.headers = dict(headers or {})
        # credentials for the base URL's host alone, not for a host it redirects to (the Hub's CDN)
        self.host_bound_headers = dict(host_bound_headers or {})
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
        return open_request(url, headers=headers, method=method, timeout=self.timeout,
                            host_bound_headers=self.host_bound_headers)

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
                    raise FetchError(name, "%s from %s%s" % (_describe(exc), redact_url(self.url(name)), tail),
                                     status=exc.code if isinstance(exc, HTTPError) else None)
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

    def get_range(self, name, start, length):
        """GET bytes ``start`` to ``start + length - 1`` of ``name`` (fewer at the end of the file; b"" past it) with
        ``Range: bytes=<start>-<end>``: a safetensors header without the multi-GB file behind it. A server that
        ignores Range (answers 200 with the whole file) is read only as far as those bytes, then the connection is
        closed. Retries and headers as ``get_bytes``."""
        def once():
            try:
                resp = self._open(self.url(name), extra={"Range": "bytes=%d-%d" % (start, start + length - 1)})
            except HTTPError as exc:
                if exc.code == 416:  # nothing at start: the file is shorter
                    exc.close()
                    return b""
                raise
            with resp:
                skip = start
                if resp.status == 206:
                    first = re.match(r"^bytes (\d+)-", (resp.headers.get("Content-Range") or "").strip())
                    if not first or int(first.group(1)) != start:
                        raise FetchError(name, "asked for bytes %d-%d, the server answered Content-Range %r"
                                         % (start, start + length - 1, resp.headers.get("Content-Range")))
                    skip = 0
                while skip:  # 200: the file from byte 0, read only as far as needed
                    block = resp.read(min(skip, READ_BYTES))
                    if not block:
                        return b""
                    skip -= len(block)
                chunks, left = [], length
                while left:
                    block = resp.read(min(left, READ_BYTES))
                    if not block:
                        break
                    chunks.append(block)
                    left -= len(block)
            return b"".join(chunks)
        if length <= 0:
            return b""
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
