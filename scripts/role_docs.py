#!/usr/bin/env python3
"""Render each role's variable table from its meta/argument_specs.yml into the role's README.md.

Each roles/<role>/README.md holds its table between `<!-- role-vars:start -->` and `<!-- role-vars:end -->`; the
prose around the markers is the role's own and is kept. A role without a README gets one (its title, the argument
specs' short description and description, then the table). `scripts/role_docs.py` rewrites the tables;
`scripts/role_docs.py --check` exits 1 and names each stale README (tests/unit/test_readme.py runs the check, so no
README can drift from the argument specs). Defaults come from the role's defaults/main.yml (or defaults/main/*.yml), their one place.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "sandbox"))
from role_defaults import role_defaults  # noqa: E402  (defaults/main.yml or defaults/main/*.yml)

START, END = "<!-- role-vars:start -->", "<!-- role-vars:end -->"


def _cell(value) -> str:
    if value is None:
        return ""
    if isinstance(value, (dict, list)):
        text = json.dumps(value, separators=(", ", ": "))
    else:
        text = str(value)
    return "`" + text.replace("|", "\\|") + "`" if text != "" else '`""`'


def _text(value) -> str:
    return " ".join(value) if isinstance(value, list) else (value or "")


def table(role: str) -> str:
    """The variable tables of ``role``: one per entry point (main first), with defaults from defaults/main.yml."""
    specs = yaml.safe_load((ROOT / "roles" / role / "meta" / "argument_specs.yml").read_text())["argument_specs"]
    defaults = role_defaults(role)
    out = [START]
    for entry in sorted(specs, key=lambda e: (e != "main", e)):
        spec = specs[entry]
        if entry != "main":
            out += ["", f"Entry point `{entry}` (`tasks_from: {entry}`): {_text(spec.get('short_description'))}"]
        options = spec.get("options") or {}
        if not options:
            out += ["", "No variables of its own."]
            continue
        out += ["", "| variable | type | default | meaning |", "|---|---|---|---|"]
        for name, opt in options.items():
            desc = _text(opt.get("description"))
            default = _cell(defaults[name]) if name in defaults else ("required" if opt.get("required") else "")
            if opt.get("no_log"):
                desc += " (secret)"
            out.append(f"| `{name}` | {opt.get('type', 'str')} | {default} | {desc.replace('|', '/')} |")
    out += ["", END]
    return "\n".join(out)


def readme(role: str, current: str | None) -> str:
    """The role README with a fresh table: the current prose kept, or a new README when there is none."""
    if current is not None and START in current and END in current:
        return current[: current.index(START)] + table(role) + current[current.index(END) + len(END):]
    spec = yaml.safe_load((ROOT / "roles" / role / "meta" / "argument_specs.yml").read_text())["argument_specs"]["main"]
    head = [f"# Role `blackwell.sglang.{role}`", "", _text(spec.get("short_description")), ""]
    if spec.get("description"):
        head += [_text(spec["description"]), ""]
    head += ["## Variables", "", "Generated from `meta/argument_specs.yml` by `scripts/role_docs.py`; defaults from "
             "`defaults/main.yml` (a unit test fails when this table is stale).", "", ""]
    return "\n".join(head) + table(role) + "\n"


def main(argv: list[str]) -> int:
    stale = []
    for spec_file in sorted(ROOT.glob("roles/*/meta/argument_specs.yml")):
        role = spec_file.parent.parent.name
        path = ROOT / "roles" / role / "README.md"
        current = path.read_text() if path.exists() else None
        new = readme(role, current)
        if new != current:
            stale.append(str(path.relative_to(ROOT)))
            if "--check" not in argv:
                path.write_text(new)
    if "--check" in argv and stale:
        print("stale role variable tables (run scripts/role_docs.py): " + ", ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
