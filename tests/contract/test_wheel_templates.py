"""The template extractor and matcher of wheel_templates.py on small sources (no wheel needed)."""

import ast
import re
import textwrap

import pytest

import wheel_templates as wt

W = wt.WILD


def templates_of(source):
    tree = ast.parse(textwrap.dedent(source))
    return {wt._normalise(t) for t, _ in wt._file_templates(tree)}


def test_fstrings_concatenation_and_debug_fields_fold():
    got = templates_of('''
        def watch(proc, name, signum):
            logger.error(f"Subprocess {name} (pid={proc.pid}) crashed "
                         f"with exit code {proc.exitcode}. ")
            logger.error("crashed " + "with exit code " + str(proc.exitcode))
            logger.error(f"SIGQUIT received. {signum=}, frame.")
    ''')
    assert ("Subprocess ", W, " (pid=", W, ") crashed with exit code ", W, ". ") in got
    assert ("crashed with exit code ", W) in got
    assert ("SIGQUIT received. signum=", W, ", frame.") in got


def test_conditionals_bound_names_and_dict_subscripts_expand():
    got = templates_of('''
        def capture(runner, device):
            role = "draft" if runner.is_draft else "target"
            capture_name = f"{role} decode"
            names = defaultdict(lambda: "x graph", {"cuda": "CUDA graph", "cpu": "CPU graph"})
            logger.info(f"Capture {capture_name} {names[device]} begin.")
            logger.info(f"KV Cache {'VA upper bound' if runner.post else 'is allocated'}. dtype: {runner.dtype}")
    ''')
    assert ("Capture target decode CUDA graph begin.",) in got
    assert ("Capture draft decode CPU graph begin.",) in got
    assert ("KV Cache is allocated. dtype: ", W) in got


def test_percent_and_format_placeholders_and_grown_messages():
    got = templates_of('''
        BAR = "{desc}: {percentage:3.0f}% Completed | {n_fmt}/{total_fmt}"
        def log(self):
            logger.info("Allocating %s pool: %d tokens, %.2f GB host memory.", a, b, c)
            msg = f"Prefill batch, #new-seq: {n}, "
            msg += f"input throughput: {t}"
    ''')
    assert (W, ": ", W, "% Completed | ", W, "/", W) in got
    assert ("Allocating ", W, " pool: ", W, " tokens, ", W, " GB host memory.") in got
    assert ("Prefill batch, #new-seq: ", W, ", ", W) in got


def test_a_literal_must_land_on_literal_text():
    template = ("Capture ", W, " begin. avail mem=", W, " GB")
    assert wt.pattern_fits(r"Capture \w+ begin\.", template)
    assert wt.pattern_fits(r"Capture (?P<what>[\w ]+?) begin\. avail mem=\d", template)
    # "target decode" would have to come from the wildcard: a literal on a wildcard does not fit
    assert not wt.pattern_fits(r"Capture target decode begin", template)
    assert not wt.pattern_fits(r"Capture \w+ began", template)


def test_case_insensitive_patterns_and_classes_over_literals():
    assert wt.pattern_fits(re.compile(r"capture cuda graph failed", re.IGNORECASE), ("Capture cuda graph failed: ", W))
    assert wt.pattern_fits(r"exit code: -?\d+\)", ("(exit code: ", W, "). If"))
    assert not wt.pattern_fits(r"exit code: \d+\) now", ("(exit code: ", W, "). If"))


def test_too_generic_patterns_are_refused():
    index = wt.PatternIndex([(("Load weight end. elapsed=", W), "a.py:1")])
    assert index.fits(r"Load weight end\.")
    with pytest.raises(ValueError, match="too generic"):
        index.fits(r"\w+ end")


def test_concrete_lines_fit_whole_templates_only():
    index = wt.LineIndex([(("Load weight end. elapsed=", W, " s, type=", W), "model_runner.py:1373"),
                          (("Possible solutions:\n1. set --mem-fraction-static",), "runner.py:9")])
    assert index.source_of("Load weight end. elapsed=3.20 s, type=KimiK25") == "model_runner.py:1373"
    assert index.source_of("Load weight end. elapsed=3.20 s, dtype=torch.bfloat16") is None
    assert index.source_of("1. set --mem-fraction-static") == "runner.py:9"

