"""answer_checks: golden prompts and degenerate output (sgl-project/sglang#23264, kvcache-ai/ktransformers#1961)."""

import pytest

from ansible_collections.blackwell.sglang.plugins.module_utils.health._answer_checks import (
    GOLDEN_PROMPTS, check_answer, degeneracy, needle_prompt,
)

REASONING = ("The user asks for the sum of two numbers, so I should add them: seventeen plus twenty-five. Seventeen "
             "and twenty make thirty-seven, and five more make forty-two. Let me double-check with the other order: "
             "twenty-five plus seventeen is also forty-two. The answer is 42, and the user wants the number only.")


@pytest.mark.parametrize("text,named", [
    ("foss " * 40, "'foss' 40 times in a row"),
    ("The answer is " + "foss foss foss " * 12, "'foss' 36 times in a row"),
    ("I think " + "the cat sat. " * 10, "'the cat sat .' 10 times in a row"),
    (" ".join(["a", "b", "c", "d", "e"] * 30), "'a b c d e'"),
])
def test_repetition_is_named(text, named):
    problem = degeneracy(text)
    assert problem and ("repeats" in problem or "collapsed" in problem), problem
    if "times in a row" in named:
        assert named in problem


def test_a_collapsed_vocabulary_is_named():
    words = ["alpha", "beta", "gamma", "delta"]
    text = " ".join(words[(i * 7 + i // 3) % 4] for i in range(80))
    assert "vocabulary collapsed: 4 distinct words in 80" in degeneracy(text)
    long_text = (REASONING + " ") * 3 + " ".join(words[(i * 7 + i // 3) % 4] for i in range(120))
    assert "vocabulary collapsed: 4 distinct words in 100" in degeneracy(long_text)


@pytest.mark.parametrize("text", ["", "42", "Paris", "READY", REASONING,
                                  "Hello! This is a simulated SGLang answer.", "ha ha ha ha ha ha ha"])
def test_ordinary_answers_are_not_degenerate(text):
    assert degeneracy(text) is None


def test_golden_answers_are_judged_and_a_wrong_one_names_prompt_expected_and_received():
    arithmetic, fact, fmt = GOLDEN_PROMPTS
    assert check_answer(arithmetic, "42") is None and check_answer(arithmetic, "The answer is 42.") is None
    assert check_answer(fact, "Paris.") is None and check_answer(fmt, "READY") is None
    wrong = check_answer(arithmetic, "420")
    assert wrong == "arithmetic: asked 'What is 17 + 25? Reply with the number only.', expected 42, received '420'"
    assert check_answer(fmt, "Sure: READY") is not None


def test_the_needle_lies_past_nine_tenths_of_the_filler():
    prompt, word = needle_prompt(10000)
    assert word in prompt and prompt.endswith("What is the secret word? Reply with the word only.")
    assert prompt.index(word) > 0.85 * len(prompt)
