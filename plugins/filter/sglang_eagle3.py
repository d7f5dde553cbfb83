# -*- coding: utf-8 -*-
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter for EAGLE3 speculative decoding: the SGLang options it needs, checked before they reach the argv.

``sglang_eagle3_options``
    dict spec (``EAGLE3_DEFAULTS``: enabled, draft model, steps, top-k, draft tokens, whether the draft is MLA, its
    attention backend), the staged draft's directory -> dict of SGLang options (``{}`` when disabled), to merge into
    the options ``sglang_argv`` renders.

The facts (SGLang 0.5.23, as the function's checks say): a draft model inherits the target's attention backend
unless ``--speculative-draft-attention-backend`` is given, so a non-MLA draft of an MLA target (Kimi K2/K2.5 use
DeepSeek-V3's multi-head latent attention) needs one explicitly; that flag has no choices in the release's argparse
snapshot (plugins/plugin_utils/sglang_cli.py), so the backend is checked against ``--attention-backend``'s; with
top-k 1 the draft is a chain, and SGLang silently changes a ``--speculative-num-draft-tokens`` other than steps + 1.

``preflight_draft_problems``
    model_stage's plan (each source's config.json as read on the node), sglang_service_eagle3 -> list of problems
    with the draft against the model (``sglang_rules.sglang_draft_problems``), before anything is staged.
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_cli import (
    SnapshotError, load_snapshot, option_index)
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_rules import model_family, sglang_draft_problems

# MLA targets among the families we know (Kimi K2/K2.5 use DeepSeek-V3's multi-head latent attention).
_MLA_FAMILIES = ("kimi", "deepseek")
EAGLE3_DEFAULTS = {"enabled": False, "draft_model_path": "", "num_steps": 3, "eagle_topk": 1,
                   "num_draft_tokens": 4, "draft_is_mla": False, "draft_attention_backend": "triton"}


def sglang_eagle3_options(spec: dict | None, options: dict | None = None, family: str | None = None,
                          version: str = "0.5.23", staged_draft: str = "") -> dict:
    """EAGLE3 speculative-decoding options from ``spec`` (see ``EAGLE3_DEFAULTS``); ``{}`` when disabled.

    The draft is ``spec.draft_model_path`` or else ``staged_draft``, the revision directory model_stage stages the
    deployment's draft model into (deployment_draft_model_path, when deployment_draft_model_repo_id is set); one of
    the two, not both. A staged draft with EAGLE3 off is refused: it would be staged and never loaded.
    An MLA target (Kimi) with a non-MLA draft gets ``--speculative-draft-attention-backend`` explicitly
    (otherwise the draft inherits the target's MLA backend and fails); the backend must be one of
    the release's ``--attention-backend`` choices (the draft flag itself has no choices in 0.5.23).
    Raises AnsibleFilterError listing every problem.
    """
    spec = {**EAGLE3_DEFAULTS, **(spec or {})}
    given, staged = str(spec["draft_model_path"] or "").strip(), str(staged_draft or "").strip()
    if not spec["enabled"]:
        if staged:
            raise AnsibleFilterError(
                "invalid EAGLE3 settings:\n- a draft model is set (deployment_draft_model_repo_id, staged as %s) but "
                "EAGLE3 is off (sglang_service_eagle3.enabled): it would be staged and never loaded; enable EAGLE3 or "
                "clear deployment_draft_model_repo_id" % staged)
        return {}
    errors = []
    if given and staged and given != staged:
        errors.append(f"EAGLE3 has two drafts: draft_model_path {given} and the staged deployment_draft_model_repo_id "
                      f"({staged}); give one (the staged one is verified by model_stage)")
    draft = given or staged
    if not draft:
        errors.append("EAGLE3 needs a draft: set deployment_draft_model_repo_id (model_stage stages and verifies it) "
                      "or sglang_service_eagle3.draft_model_path (a directory of an EAGLE3 draft for this target)")
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
    out = {"speculative-algorithm": "EAGLE3", "speculative-draft-model-path": draft,
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


def preflight_draft_problems(plan: dict | None, spec: dict | None = None) -> list[str]:
    """The EAGLE3 draft model_stage will stage, judged against the model before either is staged (preflight).

    ``plan``: model_stage's ``model_stage_plan``; its ``draft`` (None without deployment_draft_model_repo_id) and
    ``source_index`` carry model_source_index's reading of each source's config.json (``config``, ``config_error``).
    ``spec``: sglang_service_eagle3. A draft whose config.json cannot be read is refused (SGLang could not load it);
    the model's unreadable config leaves the comparison out (model_stage refuses a model without one). Then
    ``sglang_rules.sglang_draft_problems``: an EAGLE3 architecture of 0.5.23, the target's hidden size, the MLA flag.
    """
    plan = plan or {}
    draft = plan.get("draft") or {}
    if not draft:
        return []
    reading = draft.get("source_index") or {}
    where = "the draft %s" % (reading.get("config_location") or draft.get("revision_dir") or "")
    if not isinstance(reading.get("config"), dict):
        return ["%s: its config.json could not be read (%s), so SGLang could not load it; check "
                "deployment_draft_model_repo_id and model_stage_draft_source*"
                % (where.strip(), reading.get("config_error") or "no answer")]
    target = (plan.get("source_index") or {}).get("config")
    spec = {**EAGLE3_DEFAULTS, **(spec or {})}
    return sglang_draft_problems(reading["config"], target if isinstance(target, dict) else None,
                                 draft_is_mla=bool(spec["draft_is_mla"]), draft_where=where.strip(),
                                 target_where="the model (%s)" % ((plan.get("source_index") or {}).get("config_location")
                                                                  or "its config.json"))


class FilterModule:
    def filters(self):
        return {"sglang_eagle3_options": sglang_eagle3_options, "preflight_draft_problems": preflight_draft_problems}
