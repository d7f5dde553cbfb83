"""Rebuild SGLang 0.5.23's own CLI parser from a snapshot of the real one.

The snapshot (``sglang/cli_snapshot.json``, exported by tests/contract/export_sglang_cli.py from the
real package) holds every option string, nargs, choices, type, default and help text; argparse
then behaves as the real parser does: unique prefixes (``--tp 8``), ambiguous prefixes
(``--cuda-graph-max-bs``), invalid choices and unknown options exit 2 with argparse's message.
The custom ``type=`` callables and Action classes are re-implemented here with the same names,
because argparse prints a type's ``__name__`` in its messages.
"""
import argparse
import json
import os
import re
import sys
from decimal import Decimal

SNAPSHOT_PATH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "cli_snapshot.json")


def load_snapshot(path=None):
    path = path or os.environ.get("SGLANG_SIM_CLI_SNAPSHOT") or SNAPSHOT_PATH
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


# ---- type callables (same names as upstream, own code) -------------------------------------

def loads(value):
    return json.loads(value)


def nullable_str(val):
    if not val or val == "None":
        return None
    return val


def human_readable_int(value):
    value = value.strip()
    si = {"k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}
    iec = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|k|M|G|T)", value)
    if m:
        number, suffix = m.groups()
        if suffix in iec:
            if "." in number:
                raise argparse.ArgumentTypeError(
                    f"Decimals are not allowed with IEC suffixes like '{suffix}'. "
                    f"Use an integer IEC value such as '{int(Decimal(number))}{suffix}', "
                    f"or an SI value such as '{number}{suffix[0]}'."
                )
            return int(number) * iec[suffix]
        return int(Decimal(number) * si[suffix])
    try:
        return int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"Invalid integer value: '{value}'. "
            "Use a plain integer, SI suffixes (1k, 1M), or IEC suffixes (1Ki, 1Mi). "
            "Suffixes are case-sensitive."
        )


def json_list_type(value):
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        raise argparse.ArgumentTypeError(
            f"Invalid JSON list: {value}. Please provide a valid JSON list."
        )


def parse_cuda_graph_backend_arg(raw):
    if raw == "tc_piecewise":
        raise argparse.ArgumentTypeError("tc_piecewise was removed; select breakable, full, or disabled")
    return raw


_CG_PHASES = ("decode", "prefill")
_CG_ALLOWED_KEYS = {"decode": ("backend", "max_bs", "bs"),
                    "prefill": ("backend", "max_bs", "bs", "max_context_size")}


def parse_cuda_graph_config_arg(raw):
    try:
        parsed = json.loads(raw)
    except json.JSONDecodeError as e:
        raise argparse.ArgumentTypeError(f"--cuda-graph-config must be JSON: {e}")
    if not isinstance(parsed, dict):
        raise argparse.ArgumentTypeError(
            f"--cuda-graph-config must be a JSON object, got {type(parsed).__name__}")
    result = {}
    for phase, settings in parsed.items():
        phase = str(phase)
        if phase not in _CG_PHASES:
            raise argparse.ArgumentTypeError(
                f"--cuda-graph-config: unknown phase '{phase}', expected one of {_CG_PHASES}")
        if not isinstance(settings, dict):
            raise argparse.ArgumentTypeError(
                f"--cuda-graph-config['{phase}'] must be a JSON object, got {type(settings).__name__}")
        if "backend" in settings:
            parse_cuda_graph_backend_arg(settings["backend"])
        allowed = _CG_ALLOWED_KEYS[phase]
        result[phase] = {}
        for key, value in settings.items():
            if key not in allowed:
                raise argparse.ArgumentTypeError(
                    f"--cuda-graph-config['{phase}']: unknown key '{key}', expected one of {allowed}")
            result[phase][key] = value
    return result


TYPES = {
    None: None, "int": int, "float": float, "str": str, "json": loads,
    "nullable_str": nullable_str, "human_readable_int": human_readable_int,
    "json_list_type": json_list_type, "parse_cuda_graph_backend_arg": parse_cuda_graph_backend_arg,
    "parse_cuda_graph_config_arg": parse_cuda_graph_config_arg,
}


# ---- custom actions (same behaviour as upstream's argparse_actions, own code) -----------------

def _deprecated_warning(message):
    # Upstream logs through logging before basicConfig runs: Python's last-resort handler prints
    # the bare message on stderr.
    print(f"\033[1;33m{message}\033[0m", file=sys.stderr)


class LoRAPathAction(argparse.Action):
    def __call__(self, parser, namespace, values, option_string=None):
        out = []
        for item in values or []:
            item = item.strip()
            if item.startswith("{") and item.endswith("}"):
                obj = json.loads(item)
                assert "lora_path" in obj and "lora_name" in obj, (
                    f"{item!r} looks like a JSON str, but it does not contain 'lora_name' and 'lora_path' keys.")
                out.append(obj)
            else:
                out.append(item)
        setattr(namespace, self.dest, out)


class DeprecatedAction(argparse.Action):
    def __init__(self, option_strings, dest, error_message=None, nargs=0, **kw):
        self.error_message = error_message
        super().__init__(option_strings, dest, nargs=nargs, **kw)

    def __call__(self, parser, namespace, values, option_string=None):
        if self.error_message is not None:
            parser.error(self.error_message)
        _deprecated_warning(f"The command line argument '{option_string}' is deprecated and "
                            "will be removed in future versions.")


class DeprecatedStoreTrueAction(argparse.Action):
    def __init__(self, option_strings, dest, new_flag=None, nargs=0, const=True, default=False, **kw):
        self.new_flag = new_flag
        super().__init__(option_strings, dest, nargs=nargs, const=const, default=default, **kw)

    def __call__(self, parser, namespace, values, option_string=None):
        repl = f" Use '{self.new_flag}' instead." if self.new_flag else ""
        _deprecated_warning(f"'{option_string}' is deprecated and will be removed in a future release.{repl}")
        setattr(namespace, self.dest, True)


class DeprecatedStoreConstAction(argparse.Action):
    def __init__(self, option_strings, dest, new_flag=None, const_value=None, nargs=0, default=None, **kw):
        self.new_flag = new_flag
        self.const_value = const_value
        super().__init__(option_strings, dest, nargs=nargs, default=default, **kw)

    def __call__(self, parser, namespace, values, option_string=None):
        repl = f" Use '{self.new_flag}' instead." if self.new_flag else ""
        _deprecated_warning(f"'{option_string}' is deprecated and will be removed in a future release.{repl}")
        setattr(namespace, self.dest, self.const_value)


class DeprecatedAliasStoreAction(argparse.Action):
    def __init__(self, option_strings, dest, new_flag=None, **kw):
        self.new_flag = new_flag
        super().__init__(option_strings, dest, **kw)

    def __call__(self, parser, namespace, values, option_string=None):
        repl = f" Use '{self.new_flag}' instead." if self.new_flag else ""
        _deprecated_warning(f"'{option_string}' is deprecated and will be removed in a future release.{repl}")
        setattr(namespace, self.dest, values)


CUSTOM_ACTIONS = {c.__name__: c for c in (LoRAPathAction, DeprecatedAction, DeprecatedStoreTrueAction,
                                          DeprecatedStoreConstAction, DeprecatedAliasStoreAction)}


def _value(v):
    if isinstance(v, dict) and set(v) == {"repr"}:
        return None  # not representable; upstream never needs these for parsing
    return v


def build_parser(snapshot=None):
    snap = snapshot if snapshot is not None else load_snapshot()
    parser = argparse.ArgumentParser(prog=snap.get("prog", "sglang serve"),
                                     allow_abbrev=snap.get("allow_abbrev", True),
                                     prefix_chars=snap.get("prefix_chars", "-"),
                                     add_help=snap.get("add_help", True))
    for a in snap["actions"]:
        kind = a["action"]
        if kind == "help":
            continue
        opts = list(a["option_strings"])
        common = {"dest": a["dest"], "help": a.get("help"), "required": a.get("required", False)}
        if a.get("metavar") is not None:
            common["metavar"] = a["metavar"] if not isinstance(a["metavar"], list) else tuple(a["metavar"])
        if a["type"] not in TYPES:
            raise ValueError(f"snapshot names an unknown type {a['type']!r} for {opts}")
        typ = TYPES[a["type"]]
        if kind == "store":
            kw = dict(common, default=_value(a["default"]), type=typ, choices=a["choices"])
            if a["nargs"] is not None:
                kw["nargs"] = a["nargs"]
            if a["const"] is not None:
                kw["const"] = a["const"]
            parser.add_argument(*opts, **kw)
        elif kind in ("store_true", "store_false"):
            parser.add_argument(*opts, action=kind, default=_value(a["default"]), **common)
        elif kind in ("store_const", "append_const"):
            parser.add_argument(*opts, action=kind, const=a["const"], default=_value(a["default"]), **common)
        elif kind in ("append", "count"):
            kw = dict(common, default=_value(a["default"]))
            if kind == "append":
                kw.update(type=typ, choices=a["choices"])
                if a["nargs"] is not None:
                    kw["nargs"] = a["nargs"]
            parser.add_argument(*opts, action=kind, **kw)
        elif kind == "BooleanOptionalAction":
            positive = [o for o in opts if not (o.startswith("--no-") and "--" + o[5:] in opts)]
            parser.add_argument(*positive, action=argparse.BooleanOptionalAction,
                                default=_value(a["default"]), **common)
        elif kind in CUSTOM_ACTIONS:
            kw = dict(common, default=_value(a["default"]), type=typ, choices=a["choices"], nargs=a["nargs"])
            kw.update(a.get("extra") or {})
            if kind == "LoRAPathAction" and a["const"] is not None:
                kw["const"] = a["const"]
            parser.add_argument(*opts, action=CUSTOM_ACTIONS[kind], **kw)
        else:
            raise ValueError(f"snapshot names an action this simulator cannot rebuild: {kind} for {opts}")
    return parser


def prepare_server_args(argv):
    """Parse argv like upstream prepare_server_args (argparse errors exit 2)."""
    return build_parser().parse_args(argv)
