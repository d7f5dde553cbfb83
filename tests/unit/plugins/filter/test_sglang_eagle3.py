"""sglang_eagle3_options: EAGLE3 speculative-decoding settings -> SGLang options, checked against SGLang 0.5.23's
argparse snapshot."""

import pytest
from ansible.errors import AnsibleFilterError

from conftest import SGLANG_VERSION as V

from ansible_collections.blackwell.sglang.plugins.filter import sglang_argv
from ansible_collections.blackwell.sglang.plugins.filter import sglang_eagle3 as f

# A Kimi target with what sglang_argv requires of one (module_utils/sglang_rules.py): both kimi_k2 parsers and
# trust-remote-code.
KIMI = {"model-path": "/srv/models/Kimi-K2.5/current", "tp-size": 8, "trust-remote-code": True,
        "tool-call-parser": "kimi_k2", "reasoning-parser": "kimi_k2"}


def test_eagle3_off_by_default():
    assert f.sglang_eagle3_options(None, KIMI) == {}
    assert f.sglang_eagle3_options({"enabled": False, "draft_model_path": "/d"}, KIMI) == {}


def test_eagle3_kimi_target_with_non_mla_draft_gets_an_explicit_draft_backend():
    opts = f.sglang_eagle3_options({"enabled": True, "draft_model_path": "/srv/models/kimi-eagle3"}, KIMI)
    assert opts == {
        "speculative-algorithm": "EAGLE3", "speculative-draft-model-path": "/srv/models/kimi-eagle3",
        "speculative-num-steps": 3, "speculative-eagle-topk": 1, "speculative-num-draft-tokens": 4,
        "speculative-draft-attention-backend": "triton",
    }
    argv = sglang_argv.sglang_argv({**KIMI, **opts}, V, compute_capability="12.0")
    assert argv[-2:] == ["--speculative-draft-attention-backend", "triton"]


def test_eagle3_mla_draft_or_non_mla_target_needs_no_draft_backend():
    spec = {"enabled": True, "draft_model_path": "/d"}
    assert "speculative-draft-attention-backend" not in f.sglang_eagle3_options({**spec, "draft_is_mla": True}, KIMI)
    assert "speculative-draft-attention-backend" not in f.sglang_eagle3_options(spec, {"model-path": "/m/llama"})


def test_eagle3_problems_listed_together():
    with pytest.raises(AnsibleFilterError) as err:
        f.sglang_eagle3_options({"enabled": True, "num_steps": 0, "draft_attention_backend": "nope"}, KIMI)
    text = str(err.value)
    assert "EAGLE3 needs a draft: set deployment_draft_model_repo_id" in text
    assert "num_steps must be a positive integer, got 0" in text
    assert "draft_attention_backend 'nope' is not an attention backend of SGLang 0.5.23" in text


def test_eagle3_chain_needs_steps_plus_one_draft_tokens():
    with pytest.raises(AnsibleFilterError, match=r"num_draft_tokens must be num_steps \+ 1 = 4, got 8"):
        f.sglang_eagle3_options({"enabled": True, "draft_model_path": "/d", "num_draft_tokens": 8}, KIMI)


def test_eagle3_for_a_release_without_a_snapshot_is_a_filter_error():
    with pytest.raises(AnsibleFilterError, match=r"no argparse snapshot for SGLang 0\.0\.1 \(have: .*0\.5\.23"):
        f.sglang_eagle3_options({"enabled": True, "draft_model_path": "/d"}, KIMI, version="0.0.1")


def test_eagle3_takes_the_staged_draft_and_refuses_two_drafts_or_a_draft_without_eagle3():
    staged = "/srv/models/kimi-k2.5-eagle3/0123abc"
    opts = f.sglang_eagle3_options({"enabled": True}, KIMI, staged_draft=staged)
    assert opts["speculative-draft-model-path"] == staged
    # the same path given twice is one draft
    assert f.sglang_eagle3_options({"enabled": True, "draft_model_path": staged}, KIMI, staged_draft=staged) == opts
    with pytest.raises(AnsibleFilterError, match=r"EAGLE3 has two drafts: draft_model_path /other/draft and the staged"):
        f.sglang_eagle3_options({"enabled": True, "draft_model_path": "/other/draft"}, KIMI, staged_draft=staged)
    with pytest.raises(AnsibleFilterError, match=r"staged as /srv/models/kimi-k2.5-eagle3/0123abc\) but EAGLE3 is off"):
        f.sglang_eagle3_options({"enabled": False}, KIMI, staged_draft=staged)


# config.json of the real checkpoints, reduced to what the check reads: Kimi-K2.5 (hidden 7168 in text_config),
# lightseekorg/kimi-k2.5-eagle3 (SpecForge's Llama layout) and its MLA sibling.
TARGET = {"architectures": ["KimiK25ForConditionalGeneration"], "text_config": {"hidden_size": 7168}}
LLAMA_DRAFT = {"architectures": ["LlamaForCausalLMEagle3"], "hidden_size": 7168, "draft_vocab_size": 32000}
MLA_DRAFT = {"architectures": ["Eagle3DeepseekV2ForCausalLM"], "hidden_size": 7168}


def plan(draft_config, target_config=TARGET, error=None):
    return {"source_index": {"config": target_config, "config_location": "http://m/Kimi-K2.5/config.json"},
            "draft": {"revision_dir": "/srv/models/kimi-k2.5-eagle3/main",
                      "source_index": {"config": draft_config, "config_error": error,
                                       "config_location": "http://m/kimi-k2.5-eagle3/config.json"}}}


def test_a_draft_that_matches_the_model_passes_and_no_draft_means_nothing_to_check():
    assert f.preflight_draft_problems(plan(LLAMA_DRAFT)) == []
    assert f.preflight_draft_problems(plan(MLA_DRAFT), {"draft_is_mla": True}) == []
    assert f.preflight_draft_problems({"source_index": {"config": TARGET}, "draft": None}) == []


def test_a_target_given_as_the_draft_is_refused_naming_the_eagle3_architectures():
    problems = f.preflight_draft_problems(plan(TARGET))
    assert len(problems) == 1
    assert "http://m/kimi-k2.5-eagle3/config.json is not an EAGLE3 draft SGLang 0.5.23 can load" in problems[0]
    assert "KimiK25ForConditionalGeneration" in problems[0] and "LlamaForCausalLMEagle3" in problems[0]


def test_a_draft_trained_for_another_model_is_refused_with_both_widths():
    other = dict(LLAMA_DRAFT, hidden_size=4096)  # e.g. a Llama-3-8B EAGLE3 draft
    problems = f.preflight_draft_problems(plan(other))
    assert len(problems) == 1 and "width 4096 (its config.json's hidden_size)" in problems[0]
    assert "http://m/Kimi-K2.5/config.json)'s hidden_size is 7168" in problems[0]
    # a draft that says which target width it reads is judged by that
    assert f.preflight_draft_problems(plan(dict(other, target_hidden_size=7168))) == []


def test_an_mla_flag_on_a_llama_draft_and_an_unreadable_draft_config_are_refused():
    problems = f.preflight_draft_problems(plan(LLAMA_DRAFT), {"draft_is_mla": True})
    assert len(problems) == 1 and "draft_is_mla is true but" in problems[0]
    problems = f.preflight_draft_problems(plan(None, error="HTTP 404 Not Found"))
    assert len(problems) == 1 and "could not be read (HTTP 404 Not Found)" in problems[0]
    # the model's own config unreadable: nothing to compare, the architecture still checked
    assert f.preflight_draft_problems(plan(LLAMA_DRAFT, target_config=None)) == []
