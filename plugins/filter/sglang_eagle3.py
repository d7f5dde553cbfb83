# -*- coding: utf-8 -*-
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter for EAGLE3 speculative decoding: the SGLang options it needs, checked before they reach the argv.

``sglang_eagle3_options``
    dict spec (``EAGLE3_DEFAULTS``: enabled, draft model, steps, top-k, draft tokens, whether the draft is MLA, its
    attention backend) -> dict of SGLang options (``{}`` when disabled), to merge into the options ``sglang_argv``
    renders.

The facts (SGLang 0.5.23, as the function's checks say): a draft model inherits the target's attention backend
unless ``--speculative-draft-attention-backend`` is given, so a non-MLA draft of an MLA target (Kimi K2/K2.5 use
DeepSeek-V3's multi-head latent attention) needs one explicitly; that flag has no choices in the release's argparse
snapshot (plugins/module_utils/sglang_cli.py), so the backend is checked against ``--attention-backend``'s; with
top-k 1 the draft is a chain, and SGLang silently changes a ``--speculative-num-draft-tokens`` other than steps + 1.
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.blackwell.sglang.plugins.module_utils.sglang_cli import (
    SnapshotError, load_snapshot, option_index)
from ansible_collections.blackwell.sglang.plugins.module_utils.sglang_rules import model_family

# MLA targets among the families we know (Kimi K2/K2.5 use DeepSeek-V3's multi-head latent attention).
_MLA_FAMILIES = ("kimi", "deepseek")
EAGLE3_DEFAULTS = {"enabled": False, "draft_model_path": "", "num_steps": 3, "eagle_topk": 1,
                   "num_draft_tokens": 4, "draft_is_mla": False, "draft_attention_backend": "triton"}


def sglang_eagle3_options(spec: dict | None, options: dict | None = None, family: str | None = None,
                          version: str = "0.5.23") -> dict:
    """EAGLE3 speculative-decoding options from ``spec`` (see ``EAGLE3_DEFAULTS``); ``{}`` when disabled.

    An MLA target (Kimi) with a non-MLA draft gets ``--speculative-draft-attention-backend`` explicitly
    (otherwise the draft inherits the target's MLA backend and fails); the backend must be one of
    the release's ``--attention-backend`` choices (the draft flag itself has no choices in 0.5.23).
    Raises AnsibleFilterError listing every problem.
    """
    spec = {**EAGLE3_DEFAULTS, **(spec or {})}
    if not spec["enabled"]:
        return {}
    errors = []
    if not str(spec["draft_model_path"] or "").strip():
        errors.append("EAGLE3 needs draft_model_path (a directory or hub id of the EAGLE3 draft for this target)")
    nums = {}
    for key in ("num_steps", "eagle_topk", "num_draft_tokens"):
        try:
            nums[key] = int(spec[key])
            if nums[key] < 1:
                raise ValueError
        except (TypeError, ValueError):
            errors.append(f"EAGLE3 {key} must be a positive integer, got {spec[key]!r}")
    if len(nums) == 3 and nums["eagle_topk"] == 1 and nums["num_draft_tokens"] != nums["num_steps"] + 1:
        errors.append(f"EAGLE3 with eagle_topk 1 drafts a chain: num_draft_tokens must be num_steps + 1 = "
                      f"{nums['num_steps'] + 1}, got {nums['num_draft_tokens']} (SGLang would silently change it)")
    out = {"speculative-algorithm": "EAGLE3", "speculative-draft-model-path": spec["draft_model_path"],
           "speculative-num-steps": nums.get("num_steps"), "speculative-eagle-topk": nums.get("eagle_topk"),
           "speculative-num-draft-tokens": nums.get("num_draft_tokens")}
    target_mla = model_family(options or {}, family) in _MLA_FAMILIES
    if target_mla and not spec["draft_is_mla"]:
        backend = str(spec["draft_attention_backend"] or "")
        try:
            index = option_index(load_snapshot(str(version)))
        except SnapshotError as exc:
            raise AnsibleFilterError(str(exc)) from None
        choices = [str(c) for c in (index["--attention-backend"].get("choices") or [])]
        if backend not in choices:
            errors.append(f"EAGLE3 draft_attention_backend {backend!r} is not an attention backend of SGLang {version} "
                          f"(choose from {', '.join(choices)}); an MLA target with a non-MLA draft needs one "
                          f"explicitly, triton works on SM120")
        out["speculative-draft-attention-backend"] = backend
    if errors:
        raise AnsibleFilterError("invalid EAGLE3 settings:\n- " + "\n- ".join(errors))
    return out


class FilterModule:
    def filters(self):
        return {"sglang_eagle3_options": sglang_eagle3_options}
