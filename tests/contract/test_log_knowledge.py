"""Contract: what the product reads in SGLang's log is text the pinned SGLang 0.5.23 wheel really prints.

``plugins/module_utils/health/sglang_log_text.py`` names every pattern the product relies on in ``WHEEL_TEXT`` (with the
file that prints it) or ``FOREIGN_TEXT`` (another program's text, not checked here). The wheel in ``.venv-sglang`` is
parsed with ``ast`` into templates (``wheel_templates.py``: f-strings, ``%`` formats, ``+`` and conditional parts folded,
values as wildcards). Each ``WHEEL_TEXT`` pattern must fit a template with its literal characters on the
template's literal text, and the same pattern with any one of its words changed must fit none: a pattern whose
words are invented, or that fits only because a wildcard could be anything, fails.

Skipped, with the reason, when .venv-sglang is absent (tests/contract/install_real_sglang.sh). The templates are
cached under .cache/ by the wheel's file list and the extractor's own code (about 30 s to build on 2 cores).
"""

import ast
import os
import pathlib
import re

import pytest

import wheel_templates as wt
from ansible_collections.blackwell.sglang.plugins.module_utils.health import sglang_log_text

ROOT = pathlib.Path(__file__).resolve().parents[2]
SGLANG = wt.sglang_root(str(ROOT / ".venv-sglang"))
SRT = os.path.join(SGLANG, "srt") if SGLANG else None
pytestmark = pytest.mark.skipif(
    SGLANG is None, reason=".venv-sglang has no sglang package: run tests/contract/install_real_sglang.sh")


@pytest.fixture(scope="module")
def templates():
    return wt.load_templates(SGLANG, str(ROOT / ".cache"))


@pytest.fixture(scope="module")
def index(templates):
    return wt.PatternIndex(templates)


_WORD = re.compile(r"\\.|\[(?:\\.|[^\]])*\]|\(\?P<\w+>|\(\?[:=!]|\{\d+(?:,\d*)?\}|([A-Za-z]{3,})")


def words(pattern):
    """(start, end) of each literal word (3+ letters) in a regex's source, skipping escapes, classes and
    group syntax."""
    return [m.span(1) for m in _WORD.finditer(pattern) if m.group(1)]


def mutations(pattern):
    """The pattern with one word changed at a time (its last letter replaced): list of (word, regex source)."""
    out = []
    for start, end in words(pattern):
        word = pattern[start:end]
        changed = word[:-1] + ("q" if word[-1] != "q" else "z")
        out.append((word, pattern[:start] + changed + pattern[end:]))
    return out


@pytest.mark.parametrize("name", sorted(sglang_log_text.WHEEL_TEXT))
def test_every_pattern_fits_text_the_wheel_prints(index, name):
    pattern, where = sglang_log_text.WHEEL_TEXT[name]
    fits = index.fits(pattern)
    assert fits, "%s: %r fits no template of the SGLang 0.5.23 wheel (said to come from %s)" % (name, pattern, where)
    files = {place.split(":")[0] for _, places in fits for place in places}
    cited = "srt/" + where.split()[0].split(",")[0]
    assert any(f == cited or f.startswith(cited.rstrip("*").split("*")[0]) for f in files), (
        "%s: %r fits %s, not the cited %s" % (name, pattern, sorted(files), where))


@pytest.mark.parametrize("name", sorted(sglang_log_text.WHEEL_TEXT))
def test_a_changed_word_makes_every_pattern_fit_nothing(index, name):
    pattern, _ = sglang_log_text.WHEEL_TEXT[name]
    changed = mutations(pattern)
    assert changed, "%s: %r has no word to change; it is too generic to be checked" % (name, pattern)
    for word, mutant in changed:
        fits = index.fits(mutant)
        assert not fits, "%s: with %r changed, %r still fits %s: the pattern does not depend on that word" % (
            name, word, mutant, [places for _, places in fits[:3]])


@pytest.mark.parametrize("name", sorted(sglang_log_text.WHEEL_TEXT))
def test_no_pattern_hides_alternatives(name):
    """Alternatives would let one invented branch pass unnoticed: each text is an entry of its own."""
    pattern, _ = sglang_log_text.WHEEL_TEXT[name]
    assert "|" not in re.sub(r"\\.|\[(?:\\.|[^\]])*\]", "", pattern), "%s: split %r into one entry per text" % (
        name, pattern)


def test_the_functions_named_in_tracebacks_exist_in_the_wheel():
    for name, where in sglang_log_text.WHEEL_FUNCTIONS.items():
        path = os.path.join(SRT, where.split()[0])
        tree = ast.parse(pathlib.Path(path).read_text())
        defined = {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
        assert name in defined, "%s is not defined in %s" % (name, path)


def test_a_word_the_wheel_never_prints_is_caught(index):
    """The test of the test, on the real wheel: 0.5.8's wording and two invented ones fit nothing."""
    for pattern in (r"Init torch distributed begin", r"Capture cuda graph begin\. This can take up to several minutes",
                    r"server_args=ServerArgs\(", r"Load weight commence"):
        assert not index.fits(pattern), pattern


def test_text_that_only_a_wildcard_could_produce_is_caught(index):
    """``logger.info(f"{msg}")`` templates are everywhere; a pattern must not fit through them."""
    assert not index.fits(r"Capture target decode CUDA graph begun")
    with pytest.raises(ValueError, match="too generic"):
        index.fits(r"\w+ end")


FIXTURES = ROOT / "tests" / "unit" / "fixtures" / "sglang_logs"


@pytest.fixture(scope="module")
def judge(templates):
    import log_lines

    return log_lines.LineJudge(templates)


@pytest.mark.parametrize("name", sorted(p.name for p in FIXTURES.glob("*.log")))
def test_every_line_of_a_log_fixture_is_printed_by_the_real_stack(judge, name):
    """The fixtures the product's parser is tested on (hand-written from the wheel's templates, and recordings of
    the simulator) hold only lines SGLang 0.5.23, uvicorn, CPython, torch or transformers print."""
    unknown = judge.unknown((FIXTURES / name).read_bytes().decode("utf-8", "replace"))
    assert not unknown, "%s: lines nothing in the real stack prints:\n%s" % (
        name, "\n".join("%d: %s" % (n, line[:200]) for n, line in unknown[:10]))


def test_an_invented_line_in_a_fixture_is_caught(judge):
    assert judge.origin("[2026-05-18 10:00:09 TP0] Init torch distributed begin.") is None
    assert judge.origin("[2026-05-18 10:00:09 TP0] Capture cuda graph bs [1, 2, 4]") is None
    assert judge.origin("[2026-05-18 10:00:09] INFO:     Uvicorn running on http://127.0.0.1:30000") is None
    # 0.5.23 gives uvicorn its timestamp (set_uvicorn_logging_configs): uvicorn's own bare default is not its form
    assert judge.origin("INFO:     Uvicorn running on http://127.0.0.1:30000 (Press CTRL+C to quit)") is None
    uvicorn = ("[2026-05-18 10:00:09] INFO:     Uvicorn running on http://127.0.0.1:30000 (Press CTRL+C to quit)",
               '[2026-05-18 10:00:09] INFO:     127.0.0.1:51828 - "GET /health HTTP/1.1" 503 Service Unavailable',
               "[2026-05-18 10:00:09] ERROR:    [Errno 98] error while attempting to bind on address "
               "('127.0.0.1', 30000): address already in use")
    for line in uvicorn:
        assert judge.origin(line)[0] == "foreign", line
    assert judge.origin("[2026-05-18 10:00:09 TP0] Init parallel begin.")[0] == "sglang"
