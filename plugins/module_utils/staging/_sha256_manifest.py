# -*- coding: utf-8 -*-
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""sha256 manifests of a model directory: ``SHA256SUMS`` (``sha256sum`` output: ``<64 hex><space><space or *><name>``)
or JSON ``{"files": {"<name>": {"sha256": "<hex>", "size": <bytes>}}}``."""

from __future__ import absolute_import, division, print_function

import json
import re

__metaclass__ = type

_SUM_LINE = re.compile(r"^([0-9a-fA-F]{64}) [ *](.+)$")


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
