# -*- coding: utf-8 -*-
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Is what the model says right? Golden prompts a working model cannot miss, and degenerate output (stdlib only).

A server can answer ``/health`` 200 and stream well-formed chat completions of garbage: Kimi-K2.5's INT4 checkpoint
bound to a wrong MoE kernel path on SM12x answered ``foss foss foss ...`` (sgl-project/sglang#23264); one FP8 GEMM
backend garbled everything past ~55k tokens (kvcache-ai/ktransformers#1961). ``degeneracy`` names such output:
one word or phrase repeated many times in a row, or a vocabulary collapsed to a handful of words in a stretch of 100. ``GOLDEN_PROMPTS``
are asked at temperature 0 with thinking off; ``check_answer`` says what was expected and what came.
"""

from __future__ import absolute_import, division, print_function

import re

__metaclass__ = type

# name, prompt, a regex the answer must match (searched, case-sensitive), what a reader is told was expected
GOLDEN_PROMPTS = (
    {"name": "arithmetic", "prompt": "What is 17 + 25? Reply with the number only.", "expect": r"(?<!\d)42(?!\d)",
     "expected": "42"},
    {"name": "fact", "prompt": "What is the capital of France? Reply with one word.", "expect": r"\bParis\b",
     "expected": "Paris"},
    {"name": "format", "prompt": "Reply with exactly the word READY in capital letters and nothing else.",
     "expect": r"^\W*READY\W*$", "expected": "READY alone"},
)
# A run of the same n-gram (n <= 4) this many times in a row is degenerate; so is a window of COLLAPSE_WINDOW words
# (the whole text, from COLLAPSE_MIN_WORDS words, when shorter) with under COLLAPSE_RATIO distinct ones. A window, not
# the whole text: the share of distinct words falls as any text grows, a model's long reasoning too, while 100 words
# of it hold 50 or more distinct ones.
REPEAT_RUN = 8
COLLAPSE_WINDOW = 100
COLLAPSE_MIN_WORDS = 60
COLLAPSE_RATIO = 0.25
_WORD = re.compile(r"\w+|[^\w\s]")


def degeneracy(text):
    """A sentence naming what makes ``text`` degenerate, or None."""
    words = _WORD.findall(text or "")
    best = None
    for n in range(1, 5):
        i = 0
        while i + n <= len(words):
            gram = words[i:i + n]
            run = 1
            while words[i + run * n:i + (run + 1) * n] == gram:
                run += 1
            if run >= REPEAT_RUN and (best is None or run * n > best[0] * len(best[1])):
                best = (run, gram)
            i += run * n if run > 1 else 1
    if best is not None:
        return "the output repeats %r %d times in a row" % (" ".join(best[1]), best[0])
    lowered = [w.lower() for w in words if w.isalnum()]
    if len(lowered) < COLLAPSE_MIN_WORDS:
        return None
    size = min(COLLAPSE_WINDOW, len(lowered))
    fewest = min(len(set(lowered[i:i + size])) for i in range(0, len(lowered) - size + 1, max(size // 4, 1)))
    if fewest < COLLAPSE_RATIO * size:
        return "the output's vocabulary collapsed: %d distinct words in %d" % (fewest, size)
    return None


def check_answer(golden, answer):
    """None when ``answer`` is what ``golden`` expects, else a sentence naming the prompt, the expected and the
    received text."""
    if re.search(golden["expect"], (answer or "").strip()):
        return None
    return "%s: asked %r, expected %s, received %r" % (
        golden["name"], golden["prompt"], golden["expected"], (answer or "")[:200])


def needle_prompt(tokens, word="PERIWINKLE"):
    """A long-context probe: about ``tokens`` tokens of filler with a secret word placed near its end, then the
    question. Returns (prompt, expected word)."""
    filler = "The quick brown fox jumps over the lazy dog near the river bank today. "
    count = max(int(tokens) // 14, 1)
    head = filler * (count - max(count // 10, 1))
    tail = filler * max(count // 10, 1)
    return ("%sThe secret word is %s. %sWhat is the secret word? Reply with the word only." % (head, word, tail),
            word)
