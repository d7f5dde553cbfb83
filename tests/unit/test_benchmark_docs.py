"""The docs' benchmark commands exist: every ``benchmarks/<script>.py`` a doc (or the README) names is a script in the
repository, and every option a documented command line gives it is one of that script's own argparse options (read
from its source, so the script is not run). A renamed script or a dropped flag fails here, not in a reader's shell."""

import ast
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOCS = sorted(ROOT.glob("docs/*.md")) + [ROOT / "README.md"]
# a command line in a doc: the script, then its words up to the end of the code span, line or comment
COMMAND = re.compile(r"benchmarks/([a-z_]+)\.py((?:[ \t]+(?!#)[^\s`)|;]+)*)")


def options(script):
    """The long options a benchmark script's argparse accepts (its add_argument calls' flags)."""
    flags = set()
    for node in ast.walk(ast.parse(script.read_text())):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument":
            flags |= {a.value for a in node.args if isinstance(a, ast.Constant) and str(a.value).startswith("--")}
    return flags


def documented():
    """(doc, script name, [flags]) of every benchmark command line in the docs."""
    out = []
    for doc in DOCS:
        for match in COMMAND.finditer(doc.read_text()):
            words = match.group(2).split()
            out.append((doc.name, match.group(1), [w.split("=")[0].strip("[]") for w in words if w.lstrip("[").startswith("--")]))
    return out


def test_the_docs_name_benchmark_commands():
    scripts = {name for _, name, _ in documented()}
    assert {"rolling_redeploy", "deploy_cost", "multinode_group", "stage_bench", "crash_to_verdict"} <= scripts


@pytest.mark.parametrize("doc,name,flags", documented(), ids=lambda v: v if isinstance(v, str) else None)
def test_each_documented_benchmark_command_exists_with_its_options(doc, name, flags):
    script = ROOT / "benchmarks" / ("%s.py" % name)
    assert script.is_file(), "%s names benchmarks/%s.py, which does not exist" % (doc, name)
    unknown = sorted(set(flags) - options(script))
    assert not unknown, "%s gives benchmarks/%s.py options it does not take: %s" % (doc, name, unknown)


def test_a_dropped_option_is_caught(tmp_path):
    script = tmp_path / "bench.py"
    script.write_text("import argparse\nap = argparse.ArgumentParser()\nap.add_argument('--fleet', action='store_true')\n")
    assert options(script) == {"--fleet"}
    line = "run `python benchmarks/bench.py --fleet --gone 3` here"
    match = COMMAND.search(line)
    assert match.group(1) == "bench" and match.group(2).split() == ["--fleet", "--gone", "3"]
