"""Filters that turn structured SGLang options into a validated argv and a systemd ExecStart line.

``sglang_argv``
    dict of SGLang options -> list of argv strings, validated against the argparse snapshot of the
    pinned SGLang release (``plugins/data/sglang_cli_<version>.json``, exported from the real package by
    ``tests/contract/export_sglang_cli.py``). Keys are long option names without the leading dashes
    (``tp-size``; ``tp_size`` is accepted and normalised). Never emits abbreviations: argparse would accept
    ``--tp`` for ``--tp-size`` today and silently change meaning when a release adds ``--tp-foo``.

``systemd_quote``
    list of argv strings -> one command line for ``ExecStart=``, quoted so that systemd's own parser
    (systemd.service(5) "COMMAND LINES", systemd.unit(5) "SPECIFIERS") gives back the same list.
"""

from __future__ import annotations

import difflib
import json
import os
import re

from ansible.errors import AnsibleFilterError

DATA_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data")

_SNAPSHOTS: dict[str, dict] = {}

# Options removed or replaced in a release, with what to use instead (FIELD_NOTES "Launch").
_REPLACED = {
    "cuda-graph-max-bs": "--cuda-graph-max-bs-decode",
    "enable-dp-attention": "--attn-dp-size",
}


def load_snapshot(version: str) -> dict:
    """Return the argparse snapshot of SGLang ``version`` as exported from the real package.

    Shape: ``{"sglang_version": str, "allow_abbrev": bool, "actions": [{"option_strings": [...],
    "dest": str, "action": str, "nargs": ..., "choices": list|None, "type": str|None, ...}]}``.
    Raises AnsibleFilterError naming the versions we have when there is no snapshot for ``version``.
    """
    if version not in _SNAPSHOTS:
        path = os.path.join(DATA_DIR, f"sglang_cli_{version}.json")
        if not os.path.exists(path):
            have = sorted(
                f[len("sglang_cli_"):-len(".json")]
                for f in os.listdir(DATA_DIR)
                if f.startswith("sglang_cli_") and f.endswith(".json")
            ) if os.path.isdir(DATA_DIR) else []
            raise AnsibleFilterError(
                f"no argparse snapshot for SGLang {version} (have: {', '.join(have) or 'none'}); "
                f"export one with tests/contract/export_sglang_cli.py"
            )
        with open(path, encoding="utf-8") as fh:
            _SNAPSHOTS[version] = json.load(fh)
    return _SNAPSHOTS[version]


def _option_index(snapshot: dict) -> dict[str, dict]:
    index = {}
    for action in snapshot["actions"]:
        for opt in action.get("option_strings") or []:
            if opt.startswith("--"):
                index[opt] = action
    return index


_FLAG_ACTIONS = {"store_true", "store_false", "store_const", "count"}


def _check_type(flag: str, type_name: str | None, value: str) -> str | None:
    if type_name == "int":
        try:
            int(value)
        except ValueError:
            return f"{flag} expects an integer, got {value!r}"
    elif type_name == "float":
        try:
            float(value)
        except ValueError:
            return f"{flag} expects a number, got {value!r}"
    elif type_name == "json":
        try:
            json.loads(value)
        except ValueError as exc:
            return f"{flag} expects JSON, got {value!r} ({exc})"
    return None


def _scalar(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(",", ":"), sort_keys=True)
    return str(value)


def sglang_argv(options: dict, version: str = "0.5.23") -> list[str]:
    """Render ``options`` (option name -> value) as argv for ``python -m sglang.launch_server``.

    Values: ``True`` -> bare flag for store_true options; ``False``/``None`` -> omitted (a
    BooleanOptionalAction renders ``--no-NAME`` for False); a list -> one argv element per item for
    nargs options; a dict -> compact JSON (e.g. ``--model-loader-extra-config``); anything else -> str.
    Order follows the dict. Raises AnsibleFilterError listing every problem at once: unknown option
    (with the nearest names and the replacement for options a release removed), bad choice, wrong type.
    """
    if not isinstance(options, dict):
        raise AnsibleFilterError(f"sglang_argv expects a dict of options, got {type(options).__name__}")
    snapshot = load_snapshot(str(version))
    index = _option_index(snapshot)
    argv: list[str] = []
    errors: list[str] = []
    for raw_name, value in options.items():
        name = str(raw_name).lstrip("-").replace("_", "-")
        flag = "--" + name
        action = index.get(flag)
        if action is None:
            hint = ""
            if name in _REPLACED:
                hint = f"; SGLang {version} replaced it with {_REPLACED[name]}"
            else:
                near = difflib.get_close_matches(flag, list(index), n=3, cutoff=0.75)
                if near:
                    hint = f"; did you mean {' or '.join(near)}?"
            errors.append(f"{flag} is not an option of SGLang {version}{hint}")
            continue
        kind = action.get("action")
        if value is None:
            continue
        if kind in _FLAG_ACTIONS:
            if not isinstance(value, bool):
                errors.append(f"{flag} is a flag: give true or false, got {value!r}")
            elif value:
                argv.append(flag)
            continue
        if kind == "BooleanOptionalAction":
            if not isinstance(value, bool):
                errors.append(f"{flag} takes true or false, got {value!r}")
            else:
                argv.append(flag if value else "--no-" + name)
            continue
        if value is False:
            continue
        nargs = action.get("nargs")
        values = value if isinstance(value, list) and nargs not in (None, "?") else [value]
        if isinstance(value, list) and nargs in (None, "?"):
            values = [_scalar(value)]
        rendered = [_scalar(v) for v in values]
        choices = action.get("choices")
        for item in rendered:
            if choices is not None and item not in [str(c) for c in choices]:
                errors.append(
                    f"{flag} {item!r} is not a valid choice in SGLang {version} "
                    f"(choose from {', '.join(str(c) for c in choices)})"
                )
            problem = _check_type(flag, action.get("type"), item)
            if problem:
                errors.append(problem)
        argv.append(flag)
        argv.extend(rendered)
    if errors:
        raise AnsibleFilterError("invalid SGLang options:\n- " + "\n- ".join(errors))
    return argv


# Characters that need no quoting in a systemd command line.
_SAFE = re.compile(r"^[A-Za-z0-9_@%+=:,./-]+$")


def systemd_quote(argv) -> str:
    """Quote ``argv`` (list of str) for ``ExecStart=`` so systemd splits it back into the same list.

    systemd expands specifiers (``%`` -> ``%%``) and environment variables (``$`` -> ``$$``) and
    splits words C-style: inside double quotes ``\\`` and ``"`` are escaped, newlines become ``\\n``.
    Raises AnsibleFilterError for an empty argv or a relative executable path.
    """
    if isinstance(argv, (str, bytes)) or not argv:
        raise AnsibleFilterError("systemd_quote expects a non-empty list of arguments")
    words = []
    for i, arg in enumerate(argv):
        arg = str(arg)
        if i == 0 and not arg.startswith("/"):
            raise AnsibleFilterError(f"the executable must be an absolute path, got {arg!r}")
        escaped = arg.replace("%", "%%").replace("$", "$$")
        if arg and _SAFE.match(arg):
            words.append(escaped)
            continue
        escaped = (
            escaped.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")
        )
        words.append(f'"{escaped}"')
    return " ".join(words)


class FilterModule:
    def filters(self):
        return {"sglang_argv": sglang_argv, "systemd_quote": systemd_quote}
