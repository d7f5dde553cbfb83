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
import re
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


def _specs(role: str) -> dict:
    return yaml.safe_load((ROOT / "roles" / role / "meta" / "argument_specs.yml").read_text())["argument_specs"]


def _row(name: str, opt: dict, defaults: dict, owner: str = "") -> str:
    desc = _text(opt.get("description"))
    default = _cell(defaults[name]) if name in defaults else ("required" if opt.get("required") else "")
    if opt.get("no_log"):
        desc += " (secret)"
    owner = f" {owner} |" if owner else ""
    return f"| `{name}` |{owner} {opt.get('type', 'str')} | {default} | {desc.replace('|', '/')} |"


def documented() -> dict:
    """{variable: (role, its option spec)} over every role's argument specs (the first entry point that has it)."""
    out = {}
    for spec_file in sorted(ROOT.glob("roles/*/meta/argument_specs.yml")):
        role = spec_file.parent.parent.name
        for spec in _specs(role).values():
            for name, opt in (spec.get("options") or {}).items():
                out.setdefault(name, (role, opt))
    return out


def read_variables(role: str) -> set:
    """The documented variables the role's own files (tasks, handlers, templates, defaults, vars, files) name."""
    names, known = set(), documented()
    for path in sorted((ROOT / "roles" / role).rglob("*")):
        if path.is_file() and path.suffix in (".yml", ".j2", ".py", ".sh", ".json") and "meta" not in path.parts:
            names |= set(re.findall(r"\b[a-z][a-z0-9_]*\b", path.read_text(errors="replace"))) & known.keys()
    return names


def table(role: str) -> str:
    """The variable tables of ``role``: one per entry point (main first), with defaults from defaults/main.yml, an
    entry point whose options are another's (one definition, by a YAML anchor) named so; then the variables of other
    roles' specs that its files read, with the role that documents them."""
    specs = _specs(role)
    # a role's own defaults, else the base role's (every role depends on it: the unit's account, say)
    defaults = {**role_defaults("deployment"), **role_defaults(role)}
    out, seen = [START], {}
    for entry in sorted(specs, key=lambda e: (e != "main", e)):
        spec = specs[entry]
        if entry != "main":
            out += ["", f"Entry point `{entry}` (`tasks_from: {entry}`): {_text(spec.get('short_description'))}"]
        options = spec.get("options") or {}
        if not options:
            out += ["", "No variables of its own."]
            continue
        same = next((other for other, opts in seen.items() if opts == options), None)
        if same:
            out += ["", f"The same variables as `{same}` (one definition), checked when this entry point runs."]
            continue
        seen[entry] = options
        out += ["", "| variable | type | default | meaning |", "|---|---|---|---|"]
        out += [_row(name, opt, defaults) for name, opt in options.items()]
    own = {name for spec in specs.values() for name in (spec.get("options") or {})}
    known = documented()
    others = sorted(read_variables(role) - own, key=lambda n: (known[n][0], n))
    if others:
        out += ["", "Read from other roles' variables (documented, with their defaults, in the role named):", "",
                "| variable | role | type | default | meaning |", "|---|---|---|---|---|"]
        by_role = {}
        for name in others:
            by_role.setdefault(known[name][0], []).append(name)
        for owner, names in by_role.items():
            owner_defaults = role_defaults(owner)
            out += [_row(name, known[name][1], owner_defaults, owner=owner) for name in names]
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
