"""Contract: each start-up rule the product checks before the unit starts (plugins/filter/sglang_argv.py
``STARTUP_RULES``) is a rule the pinned SGLang 0.5.23 really enforces: its text is printed by the file cited.
Skipped without .venv-sglang (tests/contract/install_real_sglang.sh)."""
import importlib.util
import pathlib

import pytest

import wheel_templates as wt

ROOT = pathlib.Path(__file__).resolve().parents[2]
SGLANG = wt.sglang_root(str(ROOT / ".venv-sglang"))
pytestmark = pytest.mark.skipif(SGLANG is None, reason=".venv-sglang has no sglang package")
_spec = importlib.util.spec_from_file_location("contract_sglang_argv_rules", ROOT / "plugins" / "filter" / "sglang_argv.py")
argv_filter = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(argv_filter)


@pytest.fixture(scope="module")
def index():
    return wt.PatternIndex(wt.load_templates(SGLANG, str(ROOT / ".cache")))


@pytest.mark.parametrize("rule", argv_filter.STARTUP_RULES, ids=lambda r: r[0])
def test_the_rule_is_sglangs_own(index, rule):
    name, text, where, _broken, _message = rule
    fits = index.fits(text)
    files = {place.split(":")[0] for _, places in fits for place in places}
    assert "srt/" + where.split()[0] in files, "%s: %r is not printed by %s (found in %s)" % (
        name, text, where, sorted(files))
