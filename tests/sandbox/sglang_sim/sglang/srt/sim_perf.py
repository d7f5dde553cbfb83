"""Simulator-only: how fast the simulated server decodes, so a benchmark of it measures something.

Continuous batching as 0.5.23's scheduler runs it (``managers/scheduler.py`` event_loop_normal: a new prefill batch
first, else one decode step of the whole running batch): every running request gets its tokens from the same
steps, so a step's time is what each of them waits per token, and it grows with the batch. Each request thread of
the simulator paces itself by ``step_seconds`` of the batch it is in (``http_server.State.forward`` still holds the
one GPU for a prefill, so a prefill stops every request's tokens).

The coefficients are sandbox figures for Kimi-K2.5 at tp 8 on eight PCIe RTX PRO 6000, not measurements of the wheel
(no GPU here); each says where it comes from. Only their shape matters to the product's decisions:

- a decode step costs a fixed part (``SGLANG_SIM_STEP_BASE_MS``, 16 ms: the MoE weights read once a step, the
  all-reduces over PCIe) plus a part per token in the step (``SGLANG_SIM_STEP_PER_TOKEN_MS``, 0.3 ms): a single
  stream decodes at about 61 tokens/s, 128 streams at about 2350 tokens/s in all;
- EAGLE-3 (``--speculative-algorithm EAGLE3``) runs ``--speculative-num-steps`` draft steps (each
  ``SGLANG_SIM_DRAFT_STEP_MS`` 2 ms plus ``SGLANG_SIM_DRAFT_PER_TOKEN_MS`` 0.05 ms per token of the batch times
  ``--speculative-eagle-topk``), then verifies ``--speculative-num-draft-tokens`` tokens of every request in one
  target step, and keeps ``1 + a + a^2 + ... + a^steps`` tokens a step on average, ``a`` the per-token acceptance
  (``SGLANG_SIM_SPEC_ACCEPTANCE``, 0.62). With 0.5.23's EAGLE3 defaults for this model (3 steps, topk 1, 4 draft
  tokens) that is 2.24 tokens a step: a single stream at about 96 tokens/s, the figure the seed measured after its
  EAGLE-3 fixes, ahead of the 61 without. The verify step's cost grows with 4 tokens per request, so at a batch of
  about 20 and above speculation is behind: at 128 it makes about 1470 tokens/s against 2350.
- the prefix cache (RadixCache) serves a prompt's longest prefix seen before, by whole messages: a multi-turn chat's
  earlier turns cost no prefill; a prompt seen whole keeps its last token to compute (``managers/schedule_batch.py``
  ``_compute_max_prefix_len``: at most the input length less 1). The real cache also holds the answers it generated;
  this one holds prompts only, so a conversation's next turn finds a little less than on a real server. With
  speculation on, a request keeps only ``SGLANG_SIM_SPEC_CACHE_HIT_FRACTION`` (0) of those hits: speculative decoding lost its prefix-cache hits on multi-turn chat (sgl-project/sglang#32459).

``SGLANG_SIM_TIME_SCALE`` multiplies every decode step (the sandbox runs its smoke and load tests faster than real
time; a benchmark of the sandbox should run at 1). ``SGLANG_SIM_RELEASE_SLOWDOWN`` multiplies every step and every
prefill: a release that is slower than the one before (tests/sandbox/patches/0004-slower-release.patch sets it in
the release's own defaults).
"""
import collections
import hashlib
import json
import threading

from sglang.srt.sim_config import get_float

# 0.5.23 arg_groups/speculative_hook.py _auto_choose_speculative_params: EAGLE/EAGLE3 without explicit values get
# (steps 3, topk 1, draft tokens 4) for an architecture it has no other entry for (KimiK25ForConditionalGeneration).
SPEC_DEFAULTS = {"num_steps": 3, "eagle_topk": 1, "num_draft_tokens": 4}
# speculative/spec_info.py SpeculativeAlgorithm: the draft-model algorithms this model takes (EAGLE3 with a draft)
DRAFT_ALGORITHMS = ("EAGLE", "EAGLE3")


class Speculation:
    """The speculative options of one server (None when it does not speculate)."""

    def __init__(self, args):
        algorithm = (getattr(args, "speculative_algorithm", None) or "").upper()
        self.on = algorithm in DRAFT_ALGORITHMS
        self.num_steps = int(getattr(args, "speculative_num_steps", None) or SPEC_DEFAULTS["num_steps"])
        self.topk = int(getattr(args, "speculative_eagle_topk", None) or SPEC_DEFAULTS["eagle_topk"])
        self.draft_tokens = int(getattr(args, "speculative_num_draft_tokens", None) or SPEC_DEFAULTS["num_draft_tokens"])

    def accept_length(self):
        """Tokens kept per verify step: the bonus token plus each draft token accepted in a row."""
        if not self.on:
            return 1.0
        a = get_float("SGLANG_SIM_SPEC_ACCEPTANCE")
        return sum(a ** i for i in range(self.num_steps + 1))


def step_seconds(batch, spec, scale=None, floor=0.0):
    """Wall seconds of one decode step of a running batch of ``batch`` requests (at least 1): the model's time at the
    time scale, or ``floor`` (SGLANG_SIM_TOKEN_S, a scenario's fixed pace) where that is longer; a slower release
    (SGLANG_SIM_RELEASE_SLOWDOWN) is slower either way."""
    batch = max(int(batch), 1)
    per_seq = spec.draft_tokens if spec.on else 1
    ms = get_float("SGLANG_SIM_STEP_BASE_MS") + get_float("SGLANG_SIM_STEP_PER_TOKEN_MS") * batch * per_seq
    if spec.on:
        ms += spec.num_steps * (get_float("SGLANG_SIM_DRAFT_STEP_MS") + get_float("SGLANG_SIM_DRAFT_PER_TOKEN_MS") * batch * spec.topk)
    scale = get_float("SGLANG_SIM_TIME_SCALE") if scale is None else scale
    return max(ms / 1000.0 * scale, floor) * get_float("SGLANG_SIM_RELEASE_SLOWDOWN")


def tokens_per_second(batch, spec):
    """Output tokens/s of the whole batch at scale 1 (for docs and tests)."""
    return batch * spec.accept_length() / step_seconds(batch, spec, scale=1.0)


class Pacer:
    """One request's share of the steps: the pieces it may emit after each step (the accept length, carried over
    as a fraction so a run is reproducible)."""

    def __init__(self, spec):
        self.accept = spec.accept_length()
        self.credit = 0.0

    def next_count(self, left):
        self.credit += self.accept
        n = max(1, int(self.credit))
        self.credit -= n
        return min(n, left)


class PrefixCache:
    """The radix cache by whole messages: the longest prefix of a prompt's messages seen before, in tokens."""

    def __init__(self, capacity=4096):
        self.capacity = capacity
        self.entries = collections.OrderedDict()
        self.lock = threading.Lock()

    @staticmethod
    def _keys(messages, count_tokens):
        out = []
        for i in range(1, len(messages) + 1):
            text = json.dumps(messages[:i], sort_keys=True)
            out.append((hashlib.sha256(text.encode()).hexdigest(), count_tokens(messages[:i])))
        return out

    def match_and_insert(self, messages, count_tokens):
        """Tokens of the longest cached prefix by whole messages (a prompt seen whole: all but its last token), then
        the prompt's prefixes are cached."""
        if not isinstance(messages, list) or not messages:
            return 0
        keys = self._keys(messages, count_tokens)
        hit = 0
        with self.lock:
            for key, tokens in keys:
                if key in self.entries:
                    self.entries.move_to_end(key)
                    hit = tokens
            hit = min(hit, keys[-1][1] - 1)
            for key, tokens in keys:
                self.entries[key] = tokens
                self.entries.move_to_end(key)
            while len(self.entries) > self.capacity:
                self.entries.popitem(last=False)
        return hit
