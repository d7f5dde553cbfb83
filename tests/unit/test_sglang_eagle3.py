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
    assert "needs draft_model_path" in text
    assert "num_steps must be a positive integer, got 0" in text
    assert "draft_attention_backend 'nope' is not an attention backend of SGLang 0.5.23" in text


def test_eagle3_chain_needs_steps_plus_one_draft_tokens():
    with pytest.raises(AnsibleFilterError, match=r"num_draft_tokens must be num_steps \+ 1 = 4, got 8"):
        f.sglang_eagle3_options({"enabled": True, "draft_model_path": "/d", "num_draft_tokens": 8}, KIMI)


def test_eagle3_for_a_release_without_a_snapshot_is_a_filter_error():
    with pytest.raises(AnsibleFilterError, match=r"no argparse snapshot for SGLang 0\.0\.1 \(have: .*0\.5\.23"):
        f.sglang_eagle3_options({"enabled": True, "draft_model_path": "/d"}, KIMI, version="0.0.1")
