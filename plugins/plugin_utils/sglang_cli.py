# -*- coding: utf-8 -*-
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The argparse snapshots of SGLang and sglang-router, for the filters that render and check their options
(stdlib only).

A snapshot is ``plugins/data/sglang_cli_<version>.json`` (SGLang's ``python -m sglang.launch_server`` parser) or
``plugins/data/sglang_router_cli_<version>.json`` (``python -m sglang_router.launch_router``), exported from the
real package by ``tests/contract/export_sglang_cli.py`` and compared with the real parser by
``tests/contract/test_real_parser.py``. Option names here are long names without the leading dashes
(``tp-size``); ``normalise_options`` turns ``tp_size`` / ``--tp-size`` into that form.
"""

from __future__ import absolute_import, annotations, division, print_function

import json
import os

__metaclass__ = type

DATA_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data")

_SNAPSHOTS: dict[str, dict] = {}

# Products whose parsers we snapshot: file prefix and the name used in messages.
PRODUCTS = {"sglang": ("sglang_cli_", "SGLang"), "router": ("sglang_router_cli_", "sglang-router")}


class SnapshotError(ValueError):
    """There is no snapshot for the version asked for; the message names the versions there are."""


def load_snapshot(version: str, product: str = "sglang") -> dict:
    """Return the argparse snapshot of SGLang (or, ``product="router"``, sglang-router) ``version`` as
    exported from the real package.

    Shape: ``{"sglang_version": str, "allow_abbrev": bool, "actions": [{"option_strings": [...],
    "dest": str, "action": str, "nargs": ..., "choices": list|None, "type": str|None, ...}]}``.
    Raises SnapshotError naming the versions we have when there is no snapshot for ``version`` (the filters
    raise it again as AnsibleFilterError).
    """
    prefix, label = PRODUCTS[product]
    key = prefix + version
    if key not in _SNAPSHOTS:
        path = os.path.join(DATA_DIR, f"{prefix}{version}.json")
        if not os.path.exists(path):
            have = sorted(
                f[len(prefix):-len(".json")]
                for f in os.listdir(DATA_DIR)
                if f.startswith(prefix) and f.endswith(".json")
            ) if os.path.isdir(DATA_DIR) else []
            raise SnapshotError(
                f"no argparse snapshot for {label} {version} (have: {', '.join(have) or 'none'}); "
                f"export one with tests/contract/export_sglang_cli.py"
            )
        with open(path, encoding="utf-8") as fh:
            _SNAPSHOTS[key] = json.load(fh)
    return _SNAPSHOTS[key]


def option_index(snapshot: dict) -> dict[str, dict]:
    """``{"--long-name": action}`` for every long option of ``snapshot``."""
    index = {}
    for action in snapshot["actions"]:
        for opt in action.get("option_strings") or []:
            if opt.startswith("--"):
                index[opt] = action
    return index


def normalise_options(options: dict) -> dict:
    """``options`` with every name a long option name without its dashes: ``tp_size``, ``--tp-size`` -> ``tp-size``."""
    return {str(k).lstrip("-").replace("_", "-"): v for k, v in options.items()}
