# -*- coding: utf-8 -*-
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Progress of a staging: ``staged 12/64 shards, 143.2/547.0 GB, 1.9 GB/s, ETA 3m`` lines, at most one per interval,
into a list and (appended) into a progress file that an operator or the role can tail; and ``follow_process``, which
runs a child (the hf helper) while its progress is read from outside it."""

from __future__ import absolute_import, division, print_function

import subprocess
import threading
import time

__metaclass__ = type

GB = 1000.0 ** 3


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
