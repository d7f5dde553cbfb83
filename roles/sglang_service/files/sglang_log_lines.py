"""Run a command with its output turned into journal records, tqdm's redraws included (Python 3 stdlib only).

Usage: python3 sglang_log_lines.py [--redraw-idle-s S] [--drain-s S] -- COMMAND [ARG...]

Why: journald (systemd 252 on Debian 12, as every release since) splits a service's stdout and stderr streams into
records at newlines only. tqdm, which SGLang 0.5.23 uses for its weight-loading bar (``model_loader/weight_utils.py``:
``Multi-thread loading shards``, ``position=tqdm._get_free_pos()``, no newline until the bar closes), redraws with
``\\r``; so the whole bar of a 6-25 minute load reaches the journal as one record when it closes, or when the process
dies, with the crash's first log line glued to its end. Nothing else has the bar's count: the process's open shard
files say which shard is being read, not how many are done, and its I/O counters say only that something moves. This
wrapper is the unit's main process: it starts COMMAND with its stdout and stderr on two pipes, writes every ``\\n``-
or ``\\r``-terminated piece to its own stdout or stderr as one line (one journal record), and a redraw that has sat
``--redraw-idle-s`` without its successor as well, so the journal shows each redraw while the load runs.

Process semantics stay the server's: the signals systemd sends the main process (SIGTERM, SIGINT, SIGHUP, SIGQUIT,
SIGUSR1, SIGUSR2) are forwarded to COMMAND; when COMMAND ends, what is still in the pipes is written out (at most
``--drain-s`` seconds, for a stray child that still holds them), and the wrapper ends as COMMAND did: the same exit
code, or killed by the same signal (without a core of its own), so systemd's ExecMainCode/ExecMainStatus and Result
read as they would without it. It is never COMMAND's child, so SGLang's ``kill_process_tree`` of itself (SIGQUIT from
a failed rank) cannot kill it before the failing rank's traceback is written.
"""

import argparse
import os
import re
import resource
import select
import signal
import subprocess
import sys
import time

FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)
# A record longer than this is written as it is (journald's own LineMax is 48 KiB): no unbounded buffer.
MAX_RECORD = 64 * 1024
TERMINATOR = re.compile(b"\r\n|\r|\n")


class Splitter(object):
    """Bytes of one stream in, records out: a piece ends at ``\\n``, ``\\r\\n`` or ``\\r``.

    A piece that began right after a ``\\r`` is a redraw: its padding (tqdm pads a shorter redraw with spaces) is
    stripped, an empty one is dropped, and ``flush_idle`` writes it once no byte came for ``idle_s``. Empty lines
    between ``\\n`` are kept (a traceback's chained parts are separated by them)."""

    def __init__(self, idle_s):
        self.idle_s = idle_s
        self.buf = b""
        self.redraw = False  # the buffered piece began right after a \r
        self.cr_pending = False  # the last byte seen was a \r: a \n next makes it \r\n, not a redraw
        self.flushed = False  # the line so far was written by flush_idle: a bare \n next only ends it
        self.last = 0.0

    @staticmethod
    def _record(piece, redraw, newline):
        """The record of a piece (a list of 0 or 1 bytes): a redraw without its padding, none for a blank redraw or
        for an empty piece ended by a ``\\r``."""
        if redraw:
            piece = piece.rstrip(b" ")
            return [piece] if piece.strip() else []
        return [piece] if (piece or newline) else []

    def feed(self, data, now):
        """Records completed by ``data`` (list of bytes, without terminators)."""
        out = []
        self.last = now
        if self.cr_pending and data:
            self.cr_pending = False
            if data[:1] == b"\n":  # \r\n split between two reads: the piece before it was already written
                data = data[1:]
                self.redraw = False
        if self.buf and self.redraw and data[:1] != b"\r":
            # tqdm writes a redraw with one write (atomic on a pipe up to PIPE_BUF): a redraw still buffered when the
            # next read comes is whole, and what follows it on its line (a log line glued to the bar) is a new record
            out.extend(self._record(self.buf, True, True))
            self.buf, self.redraw, self.flushed = b"", False, True
        buf = self.buf + data
        start = 0
        for match in TERMINATOR.finditer(buf):
            piece = buf[start:match.start()]
            if not (self.flushed and not piece):
                out.extend(self._record(piece, self.redraw, match.group() != b"\r"))
            self.flushed = False
            self.redraw = match.group() == b"\r"
            self.cr_pending = self.redraw and match.end() == len(buf)
            start = match.end()
        self.buf = buf[start:]
        self.flushed = self.flushed and not self.buf
        if len(self.buf) >= MAX_RECORD:
            out.extend(self._record(self.buf, self.redraw, True))
            self.buf, self.redraw = b"", False
        return out

    def flush_idle(self, now):
        """A redraw that has waited ``idle_s`` for its successor, as a record (its line may continue: the rest is a
        new record)."""
        if self.buf and self.redraw and now - self.last >= self.idle_s:
            out = self._record(self.buf, True, True)
            self.buf, self.redraw, self.flushed = b"", False, True
            return out
        return []

    def close(self):
        """Whatever is left, at the end of the stream."""
        out = self._record(self.buf, self.redraw, True) if self.buf else []
        self.buf, self.redraw = b"", False
        return out


def _write(fd, records):
    if records:
        data = b"".join(r + b"\n" for r in records)
        while data:
            try:
                data = data[os.write(fd, data):]
            except InterruptedError:
                continue
            except OSError:
                return  # the journal stream is gone: nothing to write to


def pump(streams, child, redraw_idle_s, drain_s, clock=time.monotonic):
    """Copy ``streams`` (dict read fd -> write fd) record by record until every read end is at EOF, or ``drain_s``
    seconds after ``child`` ended (``child.poll()`` not None)."""
    splitters = dict((fd, Splitter(redraw_idle_s)) for fd in streams)
    open_fds = set(streams)
    ended_at = None
    while open_fds:
        now = clock()
        if ended_at is None and child.poll() is not None:
            ended_at = now
        if ended_at is not None and now - ended_at >= drain_s:
            break
        try:
            ready, _w, _x = select.select(list(open_fds), [], [], min(redraw_idle_s, 0.5))
        except InterruptedError:
            continue
        now = clock()
        for fd in ready:
            try:
                data = os.read(fd, 65536)
            except InterruptedError:
                continue
            if not data:
                open_fds.discard(fd)
                _write(streams[fd], splitters[fd].close())
                continue
            _write(streams[fd], splitters[fd].feed(data, now))
        for fd in open_fds:
            _write(streams[fd], splitters[fd].flush_idle(now))
    for fd in open_fds:
        _write(streams[fd], splitters[fd].close())


def end_like(returncode):
    """Exit as the child did: its code, or its signal (no core dump of our own)."""
    if returncode is not None and returncode < 0:
        sig = -returncode
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if sig not in (signal.SIGKILL, signal.SIGSTOP):
            signal.signal(sig, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, [sig])
        os.kill(os.getpid(), sig)
        return 128 + sig
    return returncode or 0


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--redraw-idle-s", type=float, default=0.25,
                        help="write a \\r redraw once no byte followed it for this long (default 0.25)")
    parser.add_argument("--drain-s", type=float, default=5.0,
                        help="after the command ended, keep copying its pipes for at most this long (default 5)")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    if args.command[:1] == ["--"]:
        args.command = args.command[1:]
    if not args.command:
        parser.error("a command is required after --")
    return args


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    try:
        child = subprocess.Popen(args.command, stdout=out_w, stderr=err_w, close_fds=True)
    except OSError as exc:
        sys.stderr.write("%s: cannot run %s: %s\n" % (os.path.basename(sys.argv[0]), args.command[0], exc))
        return 127
    finally:
        os.close(out_w)
        os.close(err_w)

    def forward(signum, frame):
        try:
            child.send_signal(signum)
        except OSError:
            pass

    for sig in FORWARDED:
        signal.signal(sig, forward)
    pump({out_r: sys.stdout.fileno(), err_r: sys.stderr.fileno()}, child, args.redraw_idle_s, args.drain_s)
    while True:
        try:
            returncode = child.wait()
            break
        except InterruptedError:
            continue
    return end_like(returncode)


if __name__ == "__main__":
    sys.exit(main())
