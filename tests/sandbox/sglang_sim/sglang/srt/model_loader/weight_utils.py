"""Weight loading as every rank does it: the index's weight_map names the shards, every shard is
opened and its safetensors header validated and its bytes read through mmap; rank 0 draws the tqdm bar on
stderr (SGLang 0.5.23 ``model_loader/weight_utils.py``: desc ``Multi-thread loading shards`` by default,
``Loading safetensors checkpoint shards`` with checkpoint prefetch; ``bar_format`` is ``utils/common.py
BAR_FORMAT``).

Error messages follow the safetensors package: by default the current wording
(``Error while deserializing header: incomplete metadata, file not fully covered``, class
``safetensors._safetensors_rust.SafetensorError``); ``SGLANG_SIM_SAFETENSORS_STYLE=legacy`` gives the
older Debug names (``MetadataIncompleteBuffer``, class ``safetensors_rust.SafetensorError``).
"""
import glob
import json
import mmap
import os
import sys
import time

from sglang.srt import sim_config

# upstream: "{desc}: {percentage:3.0f}% Completed | {n_fmt}/{total_fmt} [{elapsed}<{remaining}, {rate_fmt}]"
BAR_FORMAT = "{desc}: {percentage:3.0f}% Completed | {n_fmt}/{total_fmt} [{elapsed}<{remaining}, {rate_fmt}]"

_LEGACY_NAMES = {
    "header too small": "HeaderTooSmall",
    "invalid header length": "InvalidHeaderLength",
    "header too large": "HeaderTooLarge",
    "incomplete metadata, file not fully covered": "MetadataIncompleteBuffer",
    "invalid header deserialization": "InvalidHeaderDeserialization",
    "invalid header start": "InvalidHeaderStart",
    "invalid offset": "InvalidOffset",
}


class SafetensorError(Exception):
    """Stands in for safetensors' Rust exception (module set below to match tracebacks)."""


def _configure_error_class():
    legacy = sim_config.get("SGLANG_SIM_SAFETENSORS_STYLE") == "legacy"
    SafetensorError.__module__ = "safetensors_rust" if legacy else "safetensors._safetensors_rust"
    return legacy


def _header_error(reason):
    if _configure_error_class():
        reason = _LEGACY_NAMES.get(reason, reason)
    return SafetensorError(f"Error while deserializing header: {reason}")


def format_interval(t):
    mins, s = divmod(int(t), 60)
    h, m = divmod(mins, 60)
    return f"{h:d}:{m:02d}:{s:02d}" if h else f"{m:02d}:{s:02d}"


class Progress:
    """The subset of tqdm that SGLang's loader uses: bar_format, \\r redraws, mininterval 0.1 s."""

    def __init__(self, total, desc, bar_format=BAR_FORMAT, file=None, one_line_each=False):
        self.total, self.desc, self.bar_format = total, desc, bar_format
        self.file = file or sys.stderr
        self.one_line_each = one_line_each
        self.n = 0
        self.start = time.time()
        self.last_print = 0.0
        self.last_len = 0
        self._draw()

    def _bar(self):
        """tqdm's 10-cell bar (no terminal width under systemd): full blocks, then one partial cell."""
        frac = self.n / self.total if self.total else 0.0
        cells = frac * 10
        full = int(cells)
        part = " ▏▎▍▌▋▊▉"[int((cells - full) * 8)] if full < 10 else ""
        return ("█" * full + part).ljust(10)

    def _meter(self):
        elapsed = time.time() - self.start
        rate = self.n / elapsed if (self.n and elapsed) else None
        if rate is None:
            rate_fmt = "?it/s"
        elif 1 / rate > 1:
            rate_fmt = f"{1 / rate:5.2f}s/it"
        else:
            rate_fmt = f"{rate:5.2f}it/s"
        remaining = format_interval((self.total - self.n) / rate) if rate else "?"
        return self.bar_format.format(
            desc=self.desc, percentage=100.0 * self.n / self.total if self.total else 0.0,
            n_fmt=str(self.n), total_fmt=str(self.total), elapsed=format_interval(elapsed),
            remaining=remaining, rate_fmt=rate_fmt, bar=self._bar())

    def _draw(self):
        s = self._meter()
        if self.one_line_each:
            self.file.write(s + "\n")
        else:
            self.file.write("\r" + s + " " * max(self.last_len - len(s), 0))
        self.last_len = len(s)
        self.file.flush()
        self.last_print = time.time()

    def update(self, k=1):
        self.n += k
        if self.one_line_each or time.time() - self.last_print >= 0.1 or self.n >= self.total:
            self._draw()

    def close(self):
        if not self.one_line_each:
            self.file.write("\n")
            self.file.flush()


def read_index(model_path):
    with open(os.path.join(model_path, "model.safetensors.index.json"), encoding="utf-8") as fh:
        return json.load(fh)


def shard_files(model_path):
    """The index's shards, refused before any is read when one is not on disk (0.5.23
    ``filter_duplicate_safetensors_files``: "Fail fast if the index references shard files that are not on disk").
    Without an index (a single-file checkpoint: an EAGLE3 draft's ``model.safetensors``), every ``*.safetensors`` of
    the directory, as ``filter_duplicate_safetensors_files`` returns the glob unchanged then."""
    if not os.path.isfile(os.path.join(model_path, "model.safetensors.index.json")):
        return sorted(glob.glob(os.path.join(model_path, "*.safetensors")))
    index = read_index(model_path)
    files = sorted({os.path.join(model_path, f) for f in index["weight_map"].values()})
    missing_files = [f for f in files if not os.path.isfile(f)]
    if missing_files:
        raise RuntimeError(
            f"model.safetensors.index.json references {len(missing_files)} shard file(s) missing "
            f"from {model_path} (incomplete download?): "
            f"{[os.path.basename(f) for f in missing_files]}"
        )
    return files


def check_safetensors_file(path):
    """Open a shard and validate its header the way safetensors.safe_open does."""
    if not os.path.exists(path):
        raise FileNotFoundError(f"No such file or directory: {path}")
    size = os.path.getsize(path)
    with open(path, "rb") as fh:
        head = fh.read(8)
        if len(head) < 8:
            raise _header_error("header too small")
        n = int.from_bytes(head, "little")
        if n > 100_000_000:
            raise _header_error("header too large")
        if 8 + n > size:
            raise _header_error("invalid header length")
        raw = fh.read(n)
    if not raw.startswith(b"{"):
        raise _header_error("invalid header start")
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise _header_error("invalid header deserialization")
    end = 0
    for name, info in header.items():
        if name == "__metadata__":
            continue
        start, stop = info["data_offsets"]
        if start > stop:
            raise _header_error("invalid offset")
        end = max(end, stop)
    if 8 + n + end != size:
        raise _header_error("incomplete metadata, file not fully covered")
    return header


def load_shard_data(path, seconds):
    """Read the shard's bytes through mmap, as safetensors does, spread over ``seconds``.

    Real loading touches every byte of every shard (page faults under mmap), so the process tree's I/O
    counters move all through a load even when no log line does; a stand-in that only slept would be
    quieter than the real server and hide what a stall check must see.
    """
    size = os.path.getsize(path)
    steps = max(1, int(seconds / 0.05)) if seconds else 1
    with open(path, "rb") as fh:
        if size == 0:
            return
        with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            step = -(-size // steps)
            for offset in range(0, size, step):
                mm[offset:offset + step]  # noqa: B018 - touching the pages is the point
                if seconds:
                    time.sleep(seconds / steps)


def iterate_shards(files, multithread=True, on_shard=None, after_shard=None, show=True):
    """Walk shards with the progress bar of the chosen loader (drawn only when ``show``: rank 0);
    ``on_shard(i)`` runs before shard i, ``after_shard(i)`` after it was read."""
    legacy = sim_config.get("SGLANG_SIM_PROGRESS_FORMAT") == "legacy"
    desc = "Multi-thread loading shards" if (multithread and not legacy) else "Loading safetensors checkpoint shards"
    delay = sim_config.get_float("SGLANG_SIM_SHARD_DELAY_S")
    bar = Progress(len(files), desc, one_line_each=legacy) if show else None
    for i, path in enumerate(files, start=1):
        if on_shard is not None:
            on_shard(i)
        check_safetensors_file(path)
        load_shard_data(path, delay)
        if after_shard is not None:
            after_shard(i)
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
