"""Filters that turn structured SGLang and sglang-router options into a validated argv.

``sglang_argv``
    dict of SGLang options -> list of argv strings, validated against the argparse snapshot of the
    pinned SGLang release (``plugins/data/sglang_cli_<version>.json``, exported from the real package by
    ``tests/contract/export_sglang_cli.py``; loaded by plugins/plugin_utils/sglang_cli.py). Keys are long option
    names without the leading dashes (``tp-size``; ``tp_size`` is accepted and normalised). Never emits
    abbreviations: argparse would accept ``--tp`` for ``--tp-size`` today and silently change meaning when a release
    adds ``--tp-foo``. The model-family, hardware, secret and start-up rules of plugins/plugin_utils/sglang_rules.py
    are checked with the parser's.

``sglang_argv_errors``
    the same checks as a list of messages, for preflight to report with every other problem.

``sglang_router_argv``
    the same for the router (``python -m sglang_router.launch_router``), against the router's snapshot.
"""

from __future__ import annotations

import difflib
import json

from ansible.errors import AnsibleFilterError

from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_cli import (
    PRODUCTS, SnapshotError, load_snapshot, normalise_options, option_index)
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_rules import (
    sglang_option_rules, sglang_speculative_rules, sglang_startup_rules)

# Options removed or replaced in a release, with what to use instead (each checked in that release's server_args.py).
_REPLACED = {
    "cuda-graph-max-bs": "--cuda-graph-max-bs-decode",
    "enable-dp-attention": "--attn-dp-size",
}

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


def _render(options: dict, version: str, product: str = "sglang") -> tuple[list[str], list[str]]:
    """(argv, errors) for ``options`` against the snapshot of ``version``; see ``sglang_argv``."""
    if not isinstance(options, dict):
        raise AnsibleFilterError(f"sglang_argv expects a dict of options, got {type(options).__name__}")
    try:
        snapshot = load_snapshot(str(version), product)
    except SnapshotError as exc:
        raise AnsibleFilterError(str(exc)) from None
    label = f"{PRODUCTS[product][1]} {version}"
    index = option_index(snapshot)
    argv: list[str] = []
    errors: list[str] = []
    for raw_name, value in options.items():
        name = str(raw_name).lstrip("-").replace("_", "-")
        flag = "--" + name
        action = index.get(flag)
        if action is None:
            hint = ""
            if product == "sglang" and name in _REPLACED:
                hint = f"; {label} replaced it with {_REPLACED[name]}"
            else:
                near = difflib.get_close_matches(flag, list(index), n=3, cutoff=0.75)
                if near:
                    hint = f"; did you mean {' or '.join(near)}?"
            errors.append(f"{flag} is not an option of {label}{hint}")
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
                    f"{flag} {item!r} is not a valid choice in {label} "
                    f"(choose from {', '.join(str(c) for c in choices)})"
                )
            problem = _check_type(flag, action.get("type"), item)
            if problem:
                errors.append(problem)
        argv.append(flag)
        argv.extend(rendered)
    return argv, errors


def sglang_argv_errors(options: dict, version: str, model_family: str | None = None,
                       compute_capability: str | None = None) -> list[str]:
    """Every problem ``sglang_argv`` would raise for, as a list (for preflight's one failure)."""
    _argv, errors = _render(options, str(version))
    return (errors + sglang_option_rules(options, model_family, compute_capability) + sglang_startup_rules(options)
            + sglang_speculative_rules(options, model_family))


def sglang_argv(options: dict, version: str, model_family: str | None = None,
                compute_capability: str | None = None) -> list[str]:
    """Render ``options`` (option name -> value) as argv for ``python -m sglang.launch_server``.

    Values: ``True`` -> bare flag for store_true options; ``False``/``None`` -> omitted (a
    BooleanOptionalAction renders ``--no-NAME`` for False); a list -> one argv element per item for
    nargs options; a dict -> compact JSON (e.g. ``--model-loader-extra-config``); anything else -> str.
    Order follows the dict. Raises AnsibleFilterError listing every problem at once: unknown option
    (with the nearest names and the replacement for options a release removed), bad choice, wrong type,
    and the rules of ``sglang_option_rules`` (Kimi parsers, SM120 backends, secrets in argv).
    """
    argv, errors = _render(options, str(version))
    errors += (sglang_option_rules(options, model_family, compute_capability) + sglang_startup_rules(options)
               + sglang_speculative_rules(options, model_family))
    if errors:
        raise AnsibleFilterError("invalid SGLang options:\n- " + "\n- ".join(errors))
    return argv


def sglang_router_argv(options: dict, version: str) -> list[str]:
    """Render ``options`` as argv for ``python -m sglang_router.launch_router``, validated against the snapshot of
    the real router parser (``plugins/data/sglang_router_cli_<version>.json``; sglang-router 0.3.2
    router_args.py ``RouterArgs.add_cli_args(parser, use_router_prefix=False)``). Same value rules as
    ``sglang_argv``; ``--api-key`` is refused (argv is world-readable). Raises AnsibleFilterError listing every
    problem at once.
    """
    argv, errors = _render(options, str(version), "router")
    named = normalise_options(options)
    for secret in ("api-key", "oracle-password", "postgres-db-url", "redis-url"):
        if named.get(secret):
            errors.append(f"--{secret} would put a secret in the router's argv (world-readable in /proc); "
                          f"leave it out and keep the router on a private network")
    if errors:
        raise AnsibleFilterError("invalid sglang-router options:\n- " + "\n- ".join(errors))
    return argv


class FilterModule:
    def filters(self):
        return {"sglang_argv": sglang_argv, "sglang_argv_errors": sglang_argv_errors,
                "sglang_router_argv": sglang_router_argv}
