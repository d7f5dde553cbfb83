#!/usr/bin/env python3
"""Loopback HTTP stand-ins for model sources (stdlib only, runs on the sandbox node's python3).

Two faces on one server, both serving the files of one model directory:

* a static **mirror**: ``GET``/``HEAD /<file>`` with ``Range: bytes=N-`` answered ``206`` and a
  ``Content-Range`` (what nginx or ``python -m http.server`` behind a CDN does), ``Content-Length``;
  files are sent with ``socket.sendfile`` so the server is not the bottleneck of a benchmark;
* a **fake Hugging Face Hub** with only the endpoints ``huggingface_hub`` 2.x uses in
  ``snapshot_download(repo_id, revision=..., local_dir=...)``:
  ``GET /api/models/<repo>/revision/<rev>`` (``sha``, ``siblings``), ``GET /api/models/<repo>/tree/<rev>``
  (one page: ``type``, ``path``, ``size``, ``oid``, ``lfs {oid, size, pointerSize}`` for ``*.safetensors``), and
  ``HEAD``/``GET /<repo>/resolve/<rev>/<file>`` with ``X-Repo-Commit``, ``ETag`` (the LFS sha256 for
  safetensors, the git blob id otherwise), ``Content-Length`` and ``Range``. Point ``HF_ENDPOINT`` at it.
  No ``X-Xet-Hash`` header is sent, so the client takes its plain HTTP path.

Faults for tests (attributes of the server, also CLI flags): ``cut_after`` {file: bytes} closes the
connection after that many body bytes (``cut_times`` {file: n} limits how often), ``ignore_range`` (set of
files answered 200 whatever the Range), ``corrupt`` (set of files whose first body byte is flipped),
``missing`` (set of files answered 404), ``delay`` seconds per 1 MiB sent (a slow link), ``require_token``
(401 without ``Authorization: Bearer <token>``). ``requests`` records (method, path, range, status, bytes);
``log_path`` (``--log FILE``) also appends each as a JSON line, so a test outside the process can count the bytes.

CLI: ``python3 fake_hub.py DIR [--port 8081] [--bind 127.0.0.1] [--repo moonshotai/Kimi-K2.5 --commit SHA]
[--delay S] [--log FILE]``
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit

DEFAULT_COMMIT = "0123456789abcdef0123456789abcdef01234567"


def git_blob_id(path):
    h = hashlib.sha1()
    h.update(b"blob %d\0" % os.path.getsize(path))
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fake-hub/1"

    def log_message(self, fmt, *args):  # quiet; see server.requests
        pass

    # ------------------------------------------------------------ routing
    def do_HEAD(self):
        self._route(head=True)

    def do_GET(self):
        self._route(head=False)

    def _route(self, head):
        srv = self.server
        path = unquote(urlsplit(self.path).path)
        if srv.require_token and self.headers.get("Authorization") != "Bearer %s" % srv.require_token:
            return self._plain(401, "unauthorized\n", head)
        if srv.repo:
            api = "/api/models/%s/" % srv.repo
            if path.startswith(api + "revision/"):
                return self._json(self._repo_info(), head)
            if path.startswith(api + "tree/"):
                return self._json(self._tree(), head)
            m = re.match(r"^/%s/resolve/([^/]+)/(.+)$" % re.escape(srv.repo), path)
            if m:
                return self._file(m.group(2), head, hub=True)
            return self._plain(404, "not found\n", head)
        return self._file(path.lstrip("/"), head, hub=False)

    # ------------------------------------------------------------ hub answers
    def _listing(self):
        root = self.server.root
        names = []
        for dirpath, dirs, files in os.walk(root):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            for f in sorted(files):
                if not f.startswith("."):
                    names.append(os.path.relpath(os.path.join(dirpath, f), root))
        return names

    def _meta(self, name):
        cache = self.server.meta_cache
        with self.server.lock:
            if name not in cache:
                full = os.path.join(self.server.root, name)
                cache[name] = {"size": os.path.getsize(full), "oid": git_blob_id(full),
                               "sha256": sha256_file(full) if name.endswith(".safetensors") else None}
            return cache[name]

    def _repo_info(self):
        siblings = []
        for name in self._listing():
            meta = self._meta(name)
            entry = {"rfilename": name, "size": meta["size"], "blobId": meta["oid"]}
            if meta["sha256"]:
                entry["lfs"] = {"size": meta["size"], "sha256": meta["sha256"], "pointerSize": 134}
            siblings.append(entry)
        return {"id": self.server.repo, "modelId": self.server.repo, "sha": self.server.commit, "private": False,
                "siblings": siblings}

    def _tree(self):
        out = []
        for name in self._listing():
            meta = self._meta(name)
            entry = {"type": "file", "path": name, "size": meta["size"], "oid": meta["oid"]}
            if meta["sha256"]:
                entry["lfs"] = {"oid": meta["sha256"], "size": meta["size"], "pointerSize": 134}
            out.append(entry)
        return out

    # ------------------------------------------------------------ responses
    def _plain(self, status, text, head):
        body = text.encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if not head:
            self.wfile.write(body)
        self._record(status, 0 if head else len(body))

    def _json(self, data, head):
        body = json.dumps(data).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if not head:
            self.wfile.write(body)
        self._record(200, 0 if head else len(body))

    def _record(self, status, sent):
        entry = (self.command, unquote(urlsplit(self.path).path), self.headers.get("Range"), status, sent)
        with self.server.lock:
            self.server.requests.append(entry)
            if self.server.log_path:
                with open(self.server.log_path, "a") as log:
                    log.write(json.dumps(dict(zip(("method", "path", "range", "status", "bytes"), entry))) + "\n")

    def _file(self, name, head, hub):
        srv = self.server
        full = os.path.realpath(os.path.join(srv.root, name))
        if not full.startswith(os.path.realpath(srv.root) + os.sep) or not os.path.isfile(full) or name in srv.missing:
            return self._plain(404, "not found: %s\n" % name, head)
        size = os.path.getsize(full)
        start, status = 0, 200
        rng = self.headers.get("Range")
        if rng and name not in srv.ignore_range:
            m = re.match(r"^bytes=(\d+)-$", rng.strip())
            if m:
                start = int(m.group(1))
                if start >= size:
                    self.send_response(416)
                    self.send_header("Content-Range", "bytes */%d" % size)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return self._record(416, 0)
                status = 206
        length = size - start
        self.send_response(status)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(length))
        self.send_header("Accept-Ranges", "bytes")
        if status == 206:
            self.send_header("Content-Range", "bytes %d-%d/%d" % (start, size - 1, size))
        if hub:
            meta = self._meta(name)
            self.send_header("X-Repo-Commit", srv.commit)
            self.send_header("ETag", '"%s"' % (meta["sha256"] or meta["oid"]))
        self.end_headers()
        if head:
            return self._record(status, 0)
        sent = 0
        cut = None
        with srv.lock:
            if name in srv.cut_after and srv.cut_times.get(name, 1) > 0:
                cut = srv.cut_after[name]
                srv.cut_times[name] = srv.cut_times.get(name, 1) - 1
        with open(full, "rb") as fh:
            if name in srv.corrupt and start == 0:
                first = fh.read(1)
                self.wfile.write(bytes([first[0] ^ 0xFF]))
                sent, start, length = 1, 1, length - 1
            try:
                if cut is None and not srv.delay:
                    sent += self.connection.sendfile(fh, offset=start, count=length)
                else:
                    fh.seek(start)
                    budget = length if cut is None else max(0, min(length, cut - sent))
                    while budget > 0:
                        block = fh.read(min(1 << 16 if srv.delay else 1 << 20, budget))
                        if not block:
                            break
                        self.wfile.write(block)
                        sent += len(block)
                        budget -= len(block)
                        if srv.delay:
                            time.sleep(srv.delay * len(block) / float(1 << 20))
                    if cut is not None:
                        self.close_connection = True
                        self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True
        self._record(status, sent)


class FakeHub(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, root, bind="127.0.0.1", port=0, repo=None, commit=DEFAULT_COMMIT, require_token=None):
        super().__init__((bind, port), Handler)
        self.root = os.path.abspath(root)
        self.repo = repo
        self.commit = commit
        self.require_token = require_token
        self.lock = threading.Lock()
        self.meta_cache = {}
        self.requests = []
        self.cut_after, self.cut_times = {}, {}
        self.ignore_range, self.corrupt, self.missing = set(), set(), set()
        self.delay = 0.0
        self.log_path = None
        self.thread = None

    @property
    def url(self):
        return "http://%s:%d" % self.server_address[:2]

    def start(self):
        self.thread = threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.05})
        self.thread.daemon = True
        self.thread.start()
        return self

    def stop(self):
        self.shutdown()
        self.server_close()
        if self.thread is not None:
            self.thread.join(5)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def body_bytes(self, name=None):
        """Body bytes sent for ``name`` (all files when None)."""
        with self.lock:
            return sum(r[4] for r in self.requests if r[0] == "GET" and (name is None or r[1].endswith("/" + name)))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("root")
    ap.add_argument("--bind", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8081)
    ap.add_argument("--repo", help="serve as a fake Hub for this repo id (default: a plain mirror)")
    ap.add_argument("--commit", default=DEFAULT_COMMIT)
    ap.add_argument("--token", help="answer 401 unless Authorization: Bearer TOKEN")
    ap.add_argument("--delay", type=float, default=0.0, help="seconds per MiB sent (a slow link)")
    ap.add_argument("--log", help="append one JSON line per request (method, path, range, status, bytes)")
    args = ap.parse_args(argv)
    server = FakeHub(args.root, args.bind, args.port, args.repo, args.commit, args.token)
    server.delay = args.delay
    server.log_path = args.log
    print("serving %s on %s%s" % (server.root, server.url, " as hub repo %s" % args.repo if args.repo else ""),
          flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
