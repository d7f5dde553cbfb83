"""Contract: each start-up rule the product checks before the unit starts (plugins/module_utils/sglang_rules.py
``STARTUP_RULES``) is a rule the pinned SGLang 0.5.23 really enforces: its text is printed by the file cited.
Skipped without .venv-sglang (tests/contract/install_real_sglang.sh)."""
import pathlib

import pytest

import wheel_templates as wt

ROOT = pathlib.Path(__file__).resolve().parents[2]
SGLANG = wt.sglang_root(str(ROOT / ".venv-sglang"))
pytestmark = pytest.mark.skipif(SGLANG is None, reason=".venv-sglang has no sglang package")
from ansible_collections.blackwell.sglang.plugins.module_utils import sglang_rules  # noqa: E402


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
