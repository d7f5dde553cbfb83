# -*- coding: utf-8 -*-
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Read and check a safetensors file's header without reading its data (stdlib only).

Format (huggingface/safetensors README, "Format" section,
https://github.com/huggingface/safetensors#format):

* 8 bytes: N, an unsigned little-endian 64-bit integer, the size of the header;
* N bytes: a UTF-8 JSON object ``{"TENSOR_NAME": {"dtype": "F16", "shape": [1, 16, 256],
  "data_offsets": [BEGIN, END]}, ..., "__metadata__": {str: str}}``; it may be padded with
  trailing spaces (0x20); the reference loader refuses headers over 100 MB;
* the rest: the byte buffer. ``data_offsets`` are relative to the start of the buffer, END
  exclusive; tensors must cover the buffer exactly, with no holes and no overlap
  (the reference implementation's validation; a buffer shorter than the offsets gives
  ``MetadataIncompleteBuffer``, which is what a truncated download looks like).

Sizes: element size in bits per dtype (``DTYPE_BITS``); a tensor takes
``prod(shape) * bits / 8`` bytes.
"""

from __future__ import absolute_import, division, print_function

import json
import os
import struct

__metaclass__ = type

HEADER_PREFIX = 8
MAX_HEADER_BYTES = 100 * 1000 * 1000

# dtype -> bits per element (safetensors Dtype enum; sub-byte types pack densely).
DTYPE_BITS = {
    "BOOL": 8, "U8": 8, "I8": 8, "F8_E5M2": 8, "F8_E4M3": 8, "F8_E8M0": 8,
    "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6,
    "I16": 16, "U16": 16, "F16": 16, "BF16": 16,
    "I32": 32, "U32": 32, "F32": 32,
    "I64": 64, "U64": 64, "F64": 64, "C64": 64,
}


class ShardError(Exception):
    """A safetensors file is unusable. ``path`` names the file, ``reason`` says why
    (several problems joined with ``; ``). ``str()`` gives ``"<path>: <reason>"``."""

    def __init__(self, path, reason):
        super(ShardError, self).__init__("%s: %s" % (path, reason))
        self.path = path
        self.reason = reason


def read_header(path, file_size=None):
    """Read the header of ``path``.

    :returns: dict ``header_len`` (int, bytes of JSON), ``file_size`` (int, bytes),
        ``data_len`` (int, bytes after the header), ``metadata`` (dict or None),
        ``tensors`` (dict name -> {dtype, shape, data_offsets}).
    :raises ShardError: file too short, header length past end of file, header too large,
        header not JSON / not an object.
    """
    if file_size is None:
        file_size = os.stat(path).st_size
    with open(path, "rb") as handle:
        def read(start, length):
            handle.seek(start)
            return handle.read(length)
        return header_from_reader(path, read, file_size)


def header_from_reader(path, read, file_size=None):
    """``read_header`` over ``read(start, length)`` -> bytes (fewer at the end of the file): a local file, or ranged
    GETs of a file on a mirror. It reads the 8-byte length, then the header, never the tensor data.

    ``path`` names the file in messages. ``file_size`` None (not known yet) skips the check of the header length
    against the end of the file, and ``data_len`` is then None.
    """
    prefix = read(0, HEADER_PREFIX)
    if len(prefix) < HEADER_PREFIX:
        raise ShardError(path, "file is %d bytes, shorter than the 8-byte header length; the file is truncated, "
                               "fetch it again" % (len(prefix) if file_size is None else file_size))
    (header_len,) = struct.unpack("<Q", prefix)
    if file_size is not None and header_len > file_size - HEADER_PREFIX:
        raise ShardError(path, "header length %d runs past end of file (%d bytes); the file is truncated or not "
                               "safetensors, fetch it again" % (header_len, file_size))
    if header_len > MAX_HEADER_BYTES:
        raise ShardError(path, "header length %d is over the %d-byte limit of the safetensors loader; not a "
                               "safetensors file" % (header_len, MAX_HEADER_BYTES))
    raw = read(HEADER_PREFIX, header_len)
    if len(raw) < header_len:
        raise ShardError(path, "header length %d but only %d header bytes could be read; the file is truncated"
                         % (header_len, len(raw)))
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ShardError(path, "header is not valid UTF-8 JSON (%s); the file is corrupt, fetch it again" % exc)
    if not isinstance(header, dict):
        raise ShardError(path, "header is a JSON %s, expected an object of tensors" % type(header).__name__)
    metadata = header.pop("__metadata__", None)
    return {
        "header_len": header_len,
        "file_size": file_size,
        "data_len": None if file_size is None else file_size - HEADER_PREFIX - header_len,
        "metadata": metadata,
        "tensors": header,
    }


def tensor_nbytes(dtype, shape):
    """Bytes taken by a tensor of ``dtype`` (str) and ``shape`` (list of int); raises ValueError."""
    if dtype not in DTYPE_BITS:
        raise ValueError("unknown dtype %r" % (dtype,))
    if not isinstance(shape, list) or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
        raise ValueError("shape %r is not a list of non-negative integers" % (shape,))
    count = 1
    for dim in shape:
        count *= dim
    bits = count * DTYPE_BITS[dtype]
    if bits % 8:
        raise ValueError("shape %r of %s does not fill whole bytes" % (shape, dtype))
    return bits // 8


def check_layout(info):
    """Problems (list of str) with the tensors' byte layout in ``info`` (from ``read_header``):
    bad entries, sizes that disagree with dtype x shape, holes, overlaps, and a buffer that is
    shorter (truncated) or longer than the tensors."""
    problems, spans = [], []
    if info["metadata"] is not None and not (
            isinstance(info["metadata"], dict) and all(isinstance(v, str) for v in info["metadata"].values())):
        problems.append("__metadata__ must map strings to strings")
    for name, entry in sorted(info["tensors"].items()):
        if not isinstance(entry, dict):
            problems.append("tensor %s: entry is not an object" % name)
            continue
        offsets = entry.get("data_offsets")
        if (not isinstance(offsets, list) or len(offsets) != 2
                or not all(isinstance(o, int) and not isinstance(o, bool) and o >= 0 for o in offsets)
                or offsets[0] > offsets[1]):
            problems.append("tensor %s: data_offsets %r is not [begin, end] with 0 <= begin <= end" % (name, offsets))
            continue
        try:
            want = tensor_nbytes(entry.get("dtype"), entry.get("shape"))
        except ValueError as exc:
            problems.append("tensor %s: %s" % (name, exc))
        else:
            if offsets[1] - offsets[0] != want:
                problems.append("tensor %s: data_offsets %r span %d bytes, but %s %r needs %d"
                                % (name, offsets, offsets[1] - offsets[0], entry.get("dtype"), entry.get("shape"), want))
        spans.append((offsets[0], offsets[1], name))
    spans.sort()
    cursor, last_name = 0, None
    for begin, end, name in spans:
        if begin > cursor:
            problems.append("hole of %d bytes before tensor %s (bytes %d-%d are not covered by any tensor)"
                            % (begin - cursor, name, cursor, begin))
        elif begin < cursor:
            problems.append("tensor %s (bytes %d-%d) overlaps tensor %s (ends at %d)" % (name, begin, end, last_name, cursor))
        if end >= cursor:
            cursor, last_name = end, name
    data_len = info["data_len"]
    if cursor > data_len:
        problems.append("tensors need %d data bytes but only %d follow the header: file truncated by %d bytes "
                        "(safetensors would raise MetadataIncompleteBuffer); fetch it again"
                        % (cursor, data_len, cursor - data_len))
    elif cursor < data_len:
        problems.append("%d bytes after the last tensor are not covered by any tensor (tensors end at %d of %d "
                        "data bytes)" % (data_len - cursor, cursor, data_len))
    return problems


def verify_shard(path, file_size=None):
    """Read and check ``path``; return the ``read_header`` dict plus ``tensor_count`` (int)
    and ``tensor_bytes`` (int, sum of tensor sizes). Raises ``ShardError`` listing every
    problem in the file."""
    info = read_header(path, file_size)
    problems = check_layout(info)
    if problems:
        raise ShardError(path, "; ".join(problems))
    info["tensor_count"] = len(info["tensors"])
    info["tensor_bytes"] = info["data_len"]
    return info
