# -*- coding: utf-8 -*-
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The serving benchmark's workloads: fixed, seeded, written in the dataset formats of SGLang 0.5.23's own benchmark.

Three workloads, each generated from ``WORKLOAD_SEED`` alone (``random.Random``, same bytes on every host and run):

- ``short_chat``: one-turn questions of 20-60 words, each after a sentence of its own (``--dataset-name openai``: a JSONL line per request with
  ``messages`` and ``max_tokens``, ``sglang/benchmark/datasets/openai_dataset.py``);
- ``long_prefill``: a document of about 3000 tokens and one question about it (the same format), so the prefill
  dominates: what a RAG or code-review request costs;
- ``multi_turn``: conversations of four turns under a system prompt of about 1500 tokens of its own
  (``--dataset-name agentic-trace``: ``{"conversations": [[{"messages": [...]}, ...], ...]}``,
  ``sglang/benchmark/datasets/agentic_trace.py``). The benchmark replays each conversation turn by turn, sending the
  server's own answers back, so every turn after the first repeats a prefix the server has seen: the prefix cache's
  workload, and where speculative decoding loses its cache hits (sgl-project/sglang#32459).

The text is plain English from word lists; only its length and its repetition matter to the measurement.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import random

WORKLOAD_SEED = 20261206
MULTI_TURN_TURNS = 4
# name -> (dataset name of sglang.benchmark.serving, file name, requests in the file, turns a request)
WORKLOADS = {
    "short_chat": ("openai", "short_chat.jsonl", 2048, 1),
    "long_prefill": ("openai", "long_prefill.jsonl", 512, 1),
    "multi_turn": ("agentic-trace", "multi_turn.json", 1024, MULTI_TURN_TURNS),
}

_SUBJECTS = ("a database index", "the water cycle", "a compiler", "a bicycle gear", "photosynthesis", "a hash table",
             "the stock market", "a jazz standard", "a sourdough starter", "a suspension bridge", "the immune system",
             "a neural network", "a chess opening", "a volcano", "public key cryptography", "a garden pond",
             "the printing press", "a heat pump", "an orbital transfer", "a courtroom appeal")
_TASKS = ("Explain how {s} works to a new colleague", "Compare {s} with something from everyday life",
          "List the three most common mistakes people make about {s}", "Write a short story in which {s} matters",
          "Summarise the history of {s} in a paragraph", "Describe how to teach {s} to a twelve-year-old",
          "Give a step-by-step plan to learn about {s} in a week", "What would change if {s} did not exist")
_STYLES = ("Keep it concise.", "Use plain language.", "Be precise and give examples.", "Answer as a list.",
           "Mention one open question.", "Avoid jargon where you can.", "End with a one-line summary.")
_WORDS = ("the", "system", "value", "each", "request", "model", "time", "data", "first", "after", "result", "change",
          "process", "small", "large", "order", "report", "level", "section", "review", "number", "state", "field",
          "because", "where", "which", "during", "between", "within", "without", "against", "toward", "measure",
          "design", "limit", "source", "record", "signal", "pattern", "network", "storage", "cost", "owner", "policy")


def _sentence(rng, words):
    n = rng.randint(8, 18)
    text = " ".join(rng.choice(words) for dummy in range(n))
    return text[0].upper() + text[1:] + "."


def _text(rng, tokens):
    """About ``tokens`` tokens of filler prose (a real tokenizer makes about one token of 4.5 characters)."""
    out, size = [], 0
    while size < tokens * 4.5:
        s = _sentence(rng, _WORDS)
        out.append(s)
        size += len(s) + 1
    return " ".join(out)


def _question(rng):
    return "%s. %s" % (rng.choice(_TASKS).format(s=rng.choice(_SUBJECTS)), rng.choice(_STYLES))


def short_chat(rng, count):
    """A question with a sentence of context each: no two alike, so the prefix cache does not serve one from another."""
    return [{"messages": [{"role": "user", "content": "%s %s" % (_sentence(rng, _WORDS), _question(rng))}],
             "max_tokens": 256} for dummy in range(count)]


def long_prefill(rng, count):
    return [{"messages": [{"role": "user", "content": "Read this report.\n\n%s\n\n%s" % (_text(rng, 3000), _question(rng))}],
             "max_tokens": 256} for dummy in range(count)]


def multi_turn(rng, count):
    conversations = []
    for dummy in range(count):
        system = "You are the assistant of a research team. Their notes follow.\n\n" + _text(rng, 1500)
        turns = [{"messages": [{"role": "system", "content": system}, {"role": "user", "content": _question(rng)}]}]
        turns += [{"messages": [{"role": "user", "content": _question(rng)}]} for dummy in range(MULTI_TURN_TURNS - 1)]
        conversations.append(turns)
    return {"metadata": {"name": "multi_turn", "seed": WORKLOAD_SEED, "turns": MULTI_TURN_TURNS}, "conversations": conversations}


def render(name):
    """The text of one workload's file (same bytes for the same name, everywhere)."""
    if name not in WORKLOADS:
        raise KeyError("unknown workload %r (known: %s)" % (name, ", ".join(sorted(WORKLOADS))))
    rng = random.Random("%s:%d" % (name, WORKLOAD_SEED))
    count = WORKLOADS[name][2]
    data = {"short_chat": short_chat, "long_prefill": long_prefill, "multi_turn": multi_turn}[name](rng, count)
    if isinstance(data, list):
        return "".join(json.dumps(row, sort_keys=True) + "\n" for row in data)
    return json.dumps(data, sort_keys=True) + "\n"
