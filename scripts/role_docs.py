#!/usr/bin/env python3
"""Render each role's variable table from its meta/argument_specs.yml into README.md.

The README's tables live between `<!-- role-vars:start -->` and `<!-- role-vars:end -->`.
`scripts/role_docs.py` rewrites them; `scripts/role_docs.py --check` exits 1 when README.md is stale
(tests/unit/test_readme.py runs the check, so the README cannot drift from the argument specs).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
START, END = "<!-- role-vars:start -->", "<!-- role-vars:end -->"
ORDER = ["deployment", "preflight", "cuda_toolkit", "flashinfer_build", "sglang_build", "model_stage", "sglang_service", "smoke_health",
         "sglang_router", "monitoring"]


def _cell(value) -> str:
    if value is None:
        return ""
    if isinstance(value, (dict, list)):
        text = json.dumps(value, separators=(", ", ": "))
    else:
        text = str(value)
    return "`" + text.replace("|", "\\|") + "`" if text != "" else '`""`'


def render() -> str:
    roles = sorted((p.parent.parent.name for p in ROOT.glob("roles/*/meta/argument_specs.yml")),
                   key=lambda r: (ORDER.index(r) if r in ORDER else len(ORDER), r))
    out = [START]
    for role in roles:
        spec = yaml.safe_load((ROOT / "roles" / role / "meta" / "argument_specs.yml").read_text())["argument_specs"]["main"]
        # Defaults live in one place, the role's defaults/main.yml (the argument specs give types and meanings).
        defaults_file = ROOT / "roles" / role / "defaults" / "main.yml"
        defaults = (yaml.safe_load(defaults_file.read_text()) or {}) if defaults_file.exists() else {}
        out += ["", f"### {role}", "", spec.get("short_description", ""), "",
                "| variable | type | default | meaning |", "|---|---|---|---|"]
        for name, opt in (spec.get("options") or {}).items():
            desc = opt.get("description", "")
            desc = " ".join(desc) if isinstance(desc, list) else desc
            default = _cell(defaults[name]) if name in defaults else ("required" if opt.get("required") else "")
            if opt.get("no_log"):
                desc += " (secret)"
            out.append(f"| `{name}` | {opt.get('type', 'str')} | {default} | {desc.replace('|', '/')} |")
    out += ["", END]
    return "\n".join(out)


def main(argv: list[str]) -> int:
    readme = ROOT / "README.md"
    text = readme.read_text()
    if START not in text or END not in text:
        print(f"README.md lacks the {START} / {END} markers", file=sys.stderr)
        return 1
    new = text[: text.index(START)] + render() + text[text.index(END) + len(END):]
    if "--check" in argv:
        if new != text:
            print("README.md role variable tables are stale: run scripts/role_docs.py", file=sys.stderr)
            return 1
        return 0
    readme.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
