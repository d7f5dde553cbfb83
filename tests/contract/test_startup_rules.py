"""Contract: each start-up rule the product checks before the unit starts (plugins/plugin_utils/sglang_rules.py
``STARTUP_RULES``) is a rule the pinned SGLang 0.5.23 really enforces: its text is printed by the file cited.
Skipped without .venv-sglang (tests/contract/install_real_sglang.sh)."""
import json
import pathlib

import pytest

import wheel_templates as wt

ROOT = pathlib.Path(__file__).resolve().parents[2]
SGLANG = wt.sglang_root(str(ROOT / ".venv-sglang"))
pytestmark = pytest.mark.skipif(SGLANG is None, reason=".venv-sglang has no sglang package")
from ansible_collections.blackwell.sglang.plugins.plugin_utils import sglang_rules  # noqa: E402


@pytest.fixture(scope="module")
def index():
    return wt.PatternIndex(wt.load_templates(SGLANG, str(ROOT / ".cache")))


@pytest.mark.parametrize("rule", sglang_rules.STARTUP_RULES, ids=lambda r: r[0])
def test_the_rule_is_sglangs_own(index, rule):
    name, text, where, _broken, _message = rule
    fits = index.fits(text)
    files = {place.split(":")[0] for _, places in fits for place in places}
    assert "srt/" + where.split()[0] in files, "%s: %r is not printed by %s (found in %s)" % (
        name, text, where, sorted(files))


def _words(path):
    with open(path, encoding="utf-8") as handle:
        return " ".join(handle.read().split())


@pytest.mark.parametrize("rule", sglang_rules.SM12X_ATTENTION_BACKENDS + tuple(
    ((), value, text, where, "", "") for value, text, where in sglang_rules._MLA_REFUSED), ids=lambda r: r[1])
def test_each_refused_attention_backend_cites_the_wheels_own_words(rule):
    """The words each SM120 backend refusal quotes (and the MLA refusal of trtllm_mha) stand in the cited file of the
    pinned wheel, and the value is one of that option's choices in the parser snapshot."""
    names, value, text, where = rule[:4]
    path = pathlib.Path(SGLANG) / where
    assert path.is_file(), where
    assert " ".join(text.split()) in _words(path), (value, where)
    snapshot = json.loads((ROOT / "plugins" / "data" / "sglang_cli_0.5.23.json").read_text())
    choices = {s.lstrip("-"): a.get("choices") or [] for a in snapshot["actions"] for s in a["option_strings"]}
    for name in names:  # the draft's option takes any string (no choices in the parser)
        assert value in choices[name] or not choices[name], (name, value, choices[name])


def test_the_architectures_with_a_bundled_draft_are_the_wheels():
    """sglang_rules.BUNDLED_DRAFT_ARCHITECTURES is the list SGLang 0.5.23's _handle_eagle_family defaults the draft
    path to the model for (arg_groups/speculative_hook.py); Kimi-K2.5's architecture is not in it, so EAGLE3 without
    a draft path loads the target as its own draft (sgl-project/sglang#36528)."""
    import ast

    path = pathlib.Path(SGLANG) / "srt" / "arg_groups" / "speculative_hook.py"
    tree = ast.parse(path.read_text())
    handler = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "_handle_eagle_family")
    lists = [[e.value for e in node.comparators[0].elts]
             for node in ast.walk(handler)
             if isinstance(node, ast.Compare) and isinstance(node.left, ast.Name) and node.left.id == "model_arch"
             and isinstance(node.ops[0], ast.In) and isinstance(node.comparators[0], ast.List)
             and "DeepseekV3ForCausalLM" in [getattr(e, "value", None) for e in node.comparators[0].elts]]
    assert lists, "no 'model_arch in [...]' list with DeepseekV3ForCausalLM in _handle_eagle_family"
    assert tuple(lists[0]) == sglang_rules.BUNDLED_DRAFT_ARCHITECTURES
    assert "KimiK25ForConditionalGeneration" not in lists[0]


def test_the_eagle3_draft_architectures_are_the_wheels():
    """sglang_rules.EAGLE3_DRAFT_ARCHITECTURES is every EntryClass of SGLang 0.5.23's srt/models/*eagle3*.py, and the
    MLA ones (MLA_DRAFT_ARCHITECTURES) are exactly those srt/configs/model_config.py gives MLA attention."""
    import ast

    models = pathlib.Path(SGLANG) / "srt" / "models"
    found = []
    for path in sorted(models.glob("*eagle3*.py")):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "EntryClass" for t in node.targets):
                value = node.value
                found += [e.id for e in value.elts] if isinstance(value, ast.List) else [value.id]
    assert sorted(found) == sorted(sglang_rules.EAGLE3_DRAFT_ARCHITECTURES)
    config = (pathlib.Path(SGLANG) / "srt" / "configs" / "model_config.py").read_text()
    mla = [a for a in found if '"%s" in self.hf_config.architectures' % a in config]
    assert tuple(mla) == sglang_rules.MLA_DRAFT_ARCHITECTURES
