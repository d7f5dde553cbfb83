# -*- coding: utf-8 -*-
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The deployment's API keys (``deployment_api_keys``): what a key may be, and the gateway's match for it (stdlib only).

A key is what a client sends as ``Authorization: Bearer <key>`` (RFC 6750 section 2.1: the b64token alphabet,
A-Z a-z 0-9 ``- . _ ~ + /`` and trailing ``=``). The gateway (nginx) matches the header against each key with a
case-sensitive regular expression: nginx's ``map`` matches plain strings ignoring case (ngx_http_map_module: "Strings
are matched ignoring the case"), which would accept ``abc`` for ``ABC``. Only the alphabet above is accepted, so a key
can never close the quoted string or the expression it is written into, and no problem message ever repeats a key.
"""

from __future__ import annotations

import re

MIN_KEY_CHARS = 32
_KEY_RE = re.compile(r"[A-Za-z0-9._~+/-]+=*")
_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def key_problems(keys, where="deployment_api_keys") -> list[str]:
    """Every problem of ``keys`` (a list of dicts ``name``, ``key``), at once; empty when they are usable.

    Checked: at least one key; each entry a dict with a ``name`` (1-64 of A-Z a-z 0-9 . _ -, starting alphanumeric,
    what the gateway logs) and a ``key`` of at least ``MIN_KEY_CHARS`` characters of the b64token alphabet; no name
    or key twice. A message names the entry by its name or position and never contains the key.
    """
    if not isinstance(keys, (list, tuple)) or not keys:
        return [f"{where} is empty: the gateway would refuse every request. Add a key (ansible-vault encrypt_string "
                f"--name key \"$(openssl rand -base64 36)\") as a list of dicts name, key"]
    errors, names, seen = [], set(), set()
    for index, entry in enumerate(keys):
        label = f"{where}[{index}]"
        if not isinstance(entry, dict):
            errors.append(f"{label} must be a dict with name and key, got a {type(entry).__name__}")
            continue
        name, key = entry.get("name"), entry.get("key")
        if not isinstance(name, str) or not _NAME_RE.fullmatch(name):
            errors.append(f"{label}: name must be 1-64 characters of A-Z a-z 0-9 . _ - starting with a letter or "
                          f"digit (the gateway logs it), got {name!r}")
        else:
            label = f"{label} ({name})"
            if name in names:
                errors.append(f"{label}: the name is used twice")
            names.add(name)
        if not isinstance(key, str) or not key:
            errors.append(f"{label}: key is missing or not a string")
            continue
        if len(key) < MIN_KEY_CHARS:
            errors.append(f"{label}: the key has {len(key)} characters, at least {MIN_KEY_CHARS} are needed "
                          f"(openssl rand -base64 36 gives 48)")
        if not _KEY_RE.fullmatch(key):
            bad = sorted({c for c in key if not re.fullmatch(r"[A-Za-z0-9._~+/=-]", c)})
            what = "characters outside A-Z a-z 0-9 - . _ ~ + / =" if bad else "'=' other than at its end"
            errors.append(f"{label}: the key has {what} (RFC 6750 b64token)")
        if key in seen:
            errors.append(f"{label}: the same key as an earlier entry")
        seen.add(key)
    return errors


def bearer_pattern(key: str) -> str:
    """The case-sensitive PCRE that matches ``Authorization: Bearer <key>`` exactly (the scheme's case is free, RFC
    7235 section 2.1). ``key`` must have passed ``key_problems``; every character but a letter or digit is escaped."""
    escaped = "".join(c if c.isalnum() else "\\" + c for c in key)
    return "^[Bb][Ee][Aa][Rr][Ee][Rr] +" + escaped + "$"
