#!/usr/bin/env python3
"""A persistent channel into one sandbox container: the sandbox's counterpart of ssh's ControlPersist.

A real host is reached over ssh with pipelining and ControlPersist (Ansible's ssh defaults): every module after the
first runs over an open connection, a round trip of a few milliseconds on a LAN. ``podman exec`` instead starts
podman, conmon and runc for each command, ~0.25 s on a 2-core sandbox machine, so a no-op deploy measured over plain
exec is mostly podman's start-up, not the product. This file gives the sandbox's connection plugin
(plugins/connection/podman.py) what ControlPersist gives ssh:

- an agent (``AGENT``), run once inside the container by ``podman exec -i <container> python3 -u -c AGENT``: it
  reads framed requests (argv, optional stdin) from its stdin, runs each as a child process in its own thread, and
  writes framed replies (rc, stdout, stderr);
- a master (``python3 podman_persist.py master ...``), one local process per container and user, that holds that
  exec open, listens on a unix socket, and passes each client's request to the agent; it exits when the agent does
  (the container stopped or was removed) or after ``--idle`` seconds without a request (ControlPersist's timeout);
- ``call()``, what the connection plugin runs in each task's worker: connect to the socket (starting the master
  under a lock when there is none), send one request, read its reply.

A command run through the agent gets what ``podman exec`` gives it: the container's environment and working
directory as the exec set them up, no stdin (``/dev/null``) unless one is piped, its exit status (128 + N when
killed by signal N), and output written before it exited (output from daemonised children still holding the pipes
is collected for a short grace period, then left). Frames: a 4-byte big-endian header length, a JSON header, then
the byte payloads the header sizes.
"""

import argparse
import fcntl
import hashlib
import json
import os
import socket
import struct
import subprocess
import sys
import threading
import time

# Runs inside the container (Debian's python3; standard library only).
AGENT = r'''
import json, os, struct, subprocess, sys, threading
inp, out, lock = sys.stdin.buffer, sys.stdout.buffer, threading.Lock()
def send(rid, rc, o, e):
    head = json.dumps({"id": rid, "rc": rc, "out": len(o), "err": len(e)}).encode()
    with lock:
        out.write(struct.pack("!I", len(head)) + head + o + e)
        out.flush()
def drain(pipe, chunks):
    for chunk in iter(lambda: os.read(pipe.fileno(), 65536), b""):
        chunks.append(chunk)
def run(rid, argv, data):
    try:
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL if data is None else subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    except OSError as exc:
        send(rid, 127 if isinstance(exc, FileNotFoundError) else 126, b"", (str(exc) + "\n").encode())
        return
    o, e = [], []
    readers = [threading.Thread(target=drain, args=(p.stdout, o), daemon=True),
               threading.Thread(target=drain, args=(p.stderr, e), daemon=True)]
    for t in readers:
        t.start()
    if data is not None:
        try:
            p.stdin.write(data)
        except BrokenPipeError:
            pass
        p.stdin.close()
    rc = p.wait()
    for t in readers:
        t.join(2.0)
    send(rid, 128 - rc if rc < 0 else rc, b"".join(o), b"".join(e))
send(-1, 0, b"", b"")
while True:
    h = inp.read(4)
    if len(h) < 4:
        break
    head = json.loads(inp.read(struct.unpack("!I", h)[0]))
    data = inp.read(head["stdin"]) if head["stdin"] >= 0 else None
    threading.Thread(target=run, args=(head["id"], head["argv"], data), daemon=True).start()
'''


def write_frame(stream, head, *payloads):
    """Write one frame (header dict, then payload bytes) to a binary file object or socket file."""
    raw = json.dumps(head).encode()
    stream.write(struct.pack("!I", len(raw)) + raw + b"".join(payloads))
    stream.flush()


def read_exact(stream, size):
    data = stream.read(size) if size else b""
    if len(data) < size:
        raise EOFError("channel closed after %d of %d bytes" % (len(data), size))
    return data


def read_head(stream, first=b""):
    """One frame's JSON header; ``first`` holds the bytes of its length prefix a caller has already read."""
    prefix = first + read_exact(stream, 4 - len(first))
    return json.loads(read_exact(stream, struct.unpack("!I", prefix)[0]))


def socket_path(container, user, podman_args):
    """Where the master for (container, user, podman's extra args) listens: ~/.ansible/cp, like ssh's ControlPath."""
    key = hashlib.sha1(json.dumps([container, user or "", podman_args]).encode()).hexdigest()[:16]
    return os.path.join(os.path.expanduser("~/.ansible/cp"), "podman-%s.sock" % key)


class Unavailable(Exception):
    """No master could take the request before it was sent: the caller may run the command another way."""


def _connect(path):
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(path)
    except OSError:
        sock.close()
        return None
    return sock


def master_argv(path, podman_exec, idle):
    """The command line that starts a master on ``path`` for ``podman_exec`` (e.g. [podman, exec, -i, NAME])."""
    return [sys.executable, os.path.abspath(__file__), "master", "--socket", path, "--idle", str(idle), "--"] + list(
        podman_exec)


def call(path, start_argv, argv, in_data=None, start_timeout=20.0):
    """Run ``argv`` (list of str) in the container through the master at ``path``; returns (rc, stdout, stderr).

    Starts the master (``start_argv``, from master_argv()) under a lock when none listens. Raises Unavailable when
    no master answers before the request is sent, and EOFError/OSError when the channel breaks after it was sent
    (the command may or may not have run, as with an ssh connection that drops).
    """
    sock = _connect(path)
    if sock is None:
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        with open(path + ".lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            sock = _connect(path)
            if sock is None:
                if os.path.exists(path):
                    os.unlink(path)
                with open(path + ".log", "wb") as log:
                    proc = subprocess.Popen(start_argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                            stderr=log, start_new_session=True)
                deadline = time.monotonic() + start_timeout
                while sock is None and time.monotonic() < deadline and proc.poll() is None:
                    time.sleep(0.02)
                    sock = _connect(path)
                if sock is None:
                    with open(path + ".log", "rb") as log:
                        err = log.read()[-2000:].decode(errors="replace").strip()
                    raise Unavailable("no podman master at %s: %s" % (path, err))
    with sock, sock.makefile("rwb") as stream:
        try:
            write_frame(stream, {"argv": argv, "stdin": -1 if in_data is None else len(in_data)}, in_data or b"")
        except OSError as exc:
            raise Unavailable(str(exc))
        first = stream.read(4)
        if not first:
            # Closed without a byte: a master that was exiting (idle) never took the request.
            raise Unavailable("the podman master at %s closed before taking the request" % path)
        head = read_head(stream, first)
        if "error" in head:
            raise EOFError(head["error"])
        return head["rc"], read_exact(stream, head["out"]), read_exact(stream, head["err"])


class Master:
    """One agent in one container, shared by the clients of one unix socket."""

    def __init__(self, podman_cmd, idle):
        self.agent = subprocess.Popen(podman_cmd + ["python3", "-u", "-c", AGENT], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE)
        self.idle = idle
        self.lock = threading.Lock()
        self.pending = {}
        self.next_id = 0
        self.busy = 0
        self.last = time.monotonic()
        self.dead = threading.Event()
        # The agent's hello (id -1): it runs. Without it (no such container, no python3) the master exits before
        # it listens, and the client runs its command through plain podman exec, which reports why.
        hello = read_head(self.agent.stdout)
        if hello.get("id") != -1:
            raise EOFError("unexpected first frame from the agent: %r" % hello)

    def replies(self):
        """Hand each of the agent's replies to the client waiting on its id; on EOF, fail every pending request."""
        try:
            while True:
                head = read_head(self.agent.stdout)
                body = read_exact(self.agent.stdout, head["out"]), read_exact(self.agent.stdout, head["err"])
                with self.lock:
                    slot = self.pending.pop(head["id"])
                slot.append((head, body))
                slot[0].set()
        except (EOFError, ValueError, OSError):
            pass
        self.dead.set()
        with self.lock:
            for slot in self.pending.values():
                slot[0].set()

    def serve_client(self, conn):
        with conn, conn.makefile("rwb") as stream:
            try:
                head = read_head(stream)
                data = read_exact(stream, head["stdin"]) if head["stdin"] >= 0 else b""
            except (EOFError, ValueError, OSError):
                return
            slot = [threading.Event()]
            with self.lock:
                if self.dead.is_set():
                    write_frame(stream, {"error": "the container's agent exited"})
                    return
                rid = self.next_id
                self.next_id += 1
                self.pending[rid] = slot
                self.busy += 1
                try:
                    write_frame(self.agent.stdin, {"id": rid, "argv": head["argv"], "stdin": head["stdin"]}, data)
                except OSError:
                    # The agent's stdin is gone (the container stopped): no reply will come, so fail this request
                    # now rather than wait on it forever (which would also keep the master from ever idling out).
                    self.pending.pop(rid, None)
                    slot[0].set()
            slot[0].wait()
            with self.lock:
                self.busy -= 1
                self.last = time.monotonic()
            if len(slot) < 2:
                write_frame(stream, {"error": "the container's agent exited"})
                return
            reply, (out, err) = slot[1]
            try:
                write_frame(stream, {"rc": reply["rc"], "out": len(out), "err": len(err)}, out, err)
            except OSError:
                pass

    def serve(self, path):
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.bind(path)
        os.chmod(path, 0o600)
        server.listen(64)
        server.settimeout(0.5)
        threading.Thread(target=self.replies, daemon=True).start()
        try:
            while not self.dead.is_set():
                with self.lock:
                    if not self.busy and time.monotonic() - self.last > self.idle:
                        break
                try:
                    conn, _ = server.accept()
                except socket.timeout:
                    continue
                with self.lock:
                    self.last = time.monotonic()
                threading.Thread(target=self.serve_client, args=(conn,), daemon=True).start()
        finally:
            # Unlink before closing: a client that finds no socket starts the next master (under the lock in call()).
            try:
                os.unlink(path)
            except OSError:
                pass
            server.close()
            if self.agent.poll() is None:
                self.agent.stdin.close()
                try:
                    self.agent.wait(5)
                except subprocess.TimeoutExpired:
                    self.agent.kill()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("master", help="hold one podman exec open and serve a unix socket")
    m.add_argument("--socket", required=True)
    m.add_argument("--idle", type=float, default=60.0, help="exit after this many seconds without a request")
    m.add_argument("podman", nargs=argparse.REMAINDER,
                   help="the exec command line up to the container, e.g. podman exec -i --user root NAME")
    opts = ap.parse_args(argv)
    podman_cmd = opts.podman[1:] if opts.podman[:1] == ["--"] else opts.podman
    try:
        master = Master(podman_cmd, opts.idle)
    except (EOFError, ValueError, OSError) as exc:
        sys.stderr.write("podman_persist: the agent did not start: %s\n" % exc)
        return 1
    master.serve(opts.socket)
    return 0


if __name__ == "__main__":
    sys.exit(main())
