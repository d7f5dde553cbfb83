#!/usr/bin/env python3
"""Export a JSON snapshot of the REAL SGLang server CLI parser.

Run inside .venv-sglang (tests/contract/install_real_sglang.sh):

    .venv-sglang/bin/python tests/contract/export_sglang_cli.py plugins/data/sglang_cli_0.5.23.json

or, for the router's parser (``RouterArgs.add_cli_args(parser, use_router_prefix=False)``, as
``sglang_router.launch_router.parse_router_args`` builds it), inside .venv-router
(tests/contract/install_real_router.sh):

    .venv-router/bin/python tests/contract/export_sglang_cli.py --router plugins/data/sglang_router_cli_0.3.2.json

It builds ``argparse.ArgumentParser()``, calls ``ServerArgs.add_cli_args(parser)`` and writes
everything needed to rebuild an equivalent parser: per action its option strings, dest, action
kind, nargs, const, default, type, choices, required, help, metavar and any extra attributes of
SGLang's own Action subclasses (``new_flag``, ``const_value``, ...). Non-JSON defaults are written
as ``{"repr": "..."}``. The snapshot also records ``prog`` as SGLang's own
``prepare_server_args`` sets it (``sglang serve``), because argparse prints it in error messages.
"""
import argparse
import inspect
import json
import sys

ACTION_NAMES = {
    argparse._StoreAction: "store",
    argparse._StoreTrueAction: "store_true",
    argparse._StoreFalseAction: "store_false",
    argparse._StoreConstAction: "store_const",
    argparse._AppendAction: "append",
    argparse._AppendConstAction: "append_const",
    argparse._CountAction: "count",
    argparse._HelpAction: "help",
    argparse._VersionAction: "version",
    argparse.BooleanOptionalAction: "BooleanOptionalAction",
}
STANDARD_ATTRS = set(vars(argparse.Action(["--x"], "x"))) | {"container"}


def jsonable(value):
    try:
        json.dumps(value, allow_nan=False)
        return value
    except (TypeError, ValueError):
        if isinstance(value, (list, tuple)):
            return [jsonable(v) for v in value]
        return {"repr": repr(value)}


def type_name(t):
    if t is None:
        return None
    if t in (int, float, str):
        return t.__name__
    if t is json.loads:
        return "json"
    name = getattr(t, "__name__", None) or type(t).__name__
    mod = getattr(t, "__module__", "") or ""
    if mod.startswith("orjson") and name == "loads":
        return "json"
    return name


def describe_type(t):
    """Source location of a custom callable type, so a rebuild can be reviewed against it."""
    if t is None or t in (int, float, str) or t is json.loads:
        return None
    try:
        return {"module": t.__module__, "qualname": t.__qualname__}
    except AttributeError:
        return {"repr": repr(t)}


def build_parser(router):
    """(parser, version key, version, prog) of the real SGLang server or router parser."""
    parser = argparse.ArgumentParser()
    if router:
        import importlib.metadata

        from sglang_router.router_args import RouterArgs

        RouterArgs.add_cli_args(parser, use_router_prefix=False)
        return parser, "sglang_router_version", importlib.metadata.version("sglang-router"), "launch_router.py"
    import sglang
    from sglang.srt.server_args import ServerArgs

    ServerArgs.add_cli_args(parser)
    return parser, "sglang_version", sglang.__version__, "sglang serve"


def main(argv):
    router = "--router" in argv[1:]
    argv = [a for a in argv if a != "--router"]
    if len(argv) != 2:
        print("usage: export_sglang_cli.py [--router] OUTPUT.json", file=sys.stderr)
        return 2
    parser, version_key, version, prog = build_parser(router)
    actions = []
    for a in parser._actions:
        kind = ACTION_NAMES.get(type(a), type(a).__name__)
        extra = {k: jsonable(v) for k, v in vars(a).items() if k not in STANDARD_ATTRS}
        entry = {
            "option_strings": list(a.option_strings),
            "dest": a.dest,
            "action": kind,
            "nargs": a.nargs,
            "const": jsonable(a.const),
            "default": jsonable(a.default),
            "type": type_name(a.type),
            # A set of choices (0.5.23's --sampling-backend) iterates in hash order, which changes between
            # runs: sort it so the export is reproducible (test_real_parser compares exports).
            # The router builds its choice lists from sets too (tool-call parsers): sort all of its lists.
            "choices": (jsonable(sorted(a.choices, key=str) if isinstance(a.choices, (set, frozenset)) or router
                                 else list(a.choices)) if a.choices is not None else None),
            "required": bool(a.required),
            "help": a.help,
            "metavar": jsonable(a.metavar),
        }
        if describe_type(a.type):
            entry["type_source"] = describe_type(a.type)
        if extra:
            entry["extra"] = extra
        if kind not in ACTION_NAMES.values():
            entry["action_source"] = {
                "module": type(a).__module__,
                "qualname": type(a).__qualname__,
                "bases": [b.__name__ for b in inspect.getmro(type(a))[1:-1]],
            }
        actions.append(entry)

    snapshot = {
        version_key: version,
        "generated_by": "tests/contract/export_sglang_cli.py" + (" --router" if router else ""),
        "python_version": "%d.%d" % sys.version_info[:2],
        "prog": prog,
        "allow_abbrev": parser.allow_abbrev,
        "prefix_chars": parser.prefix_chars,
        "add_help": parser.add_help,
        "actions": actions,
    }
    with open(argv[1], "w", encoding="utf-8") as fh:
        json.dump(snapshot, fh, indent=1, sort_keys=False)
        fh.write("\n")
    print(f"wrote {argv[1]}: {len(actions)} actions, {version_key} {version}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
