"""EAGLE/EAGLE3 configurations SGLang 0.5.23 cannot run as given, refused by the inventory check (sglang_rules)."""

from ansible_collections.blackwell.sglang.plugins.filter.sglang_argv import sglang_argv_errors
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_rules import (
    sglang_speculative_rules, sglang_startup_rules,
)

KIMI = {"model-path": "/srv/models/Kimi-K2.5/current", "tp-size": 8, "trust-remote-code": True,
        "tool-call-parser": "kimi_k2", "reasoning-parser": "kimi_k2"}


def test_eagle3_without_a_draft_path_is_refused_for_kimi_with_the_field_case():
    problems = sglang_speculative_rules(dict(KIMI, **{"speculative-algorithm": "EAGLE3"}), "kimi")
    assert len(problems) == 1
    assert "KimiK25ForConditionalGeneration carries no draft of its own" in problems[0]
    assert "sgl-project/sglang#36528" in problems[0] and "_handle_eagle_family" in problems[0]
    assert sglang_speculative_rules(dict(KIMI, **{"speculative-algorithm": "EAGLE3",
                                                  "speculative-draft-model-path": "/srv/models/draft"}), "kimi") == []
    # DeepSeek-V3 carries its MTP layers: SGLang defaults the draft to the model
    assert sglang_speculative_rules({"model-path": "deepseek-ai/DeepSeek-V3", "speculative-algorithm": "EAGLE"},
                                    "deepseek") == []
    assert sglang_speculative_rules(dict(KIMI), "kimi") == []


def test_a_draft_tree_on_a_chain_only_path_is_refused():
    tree = dict(KIMI, **{"speculative-algorithm": "EAGLE3", "speculative-draft-model-path": "/d",
                         "speculative-eagle-topk": 4, "speculative-use-rejection-sampling": True})
    assert any("--speculative-use-rejection-sampling needs --speculative-eagle-topk 1" in p
               for p in sglang_startup_rules(tree))
    assert not sglang_startup_rules(dict(tree, **{"speculative-eagle-topk": 1}))


def test_the_inventory_check_reports_them_with_the_other_option_problems():
    problems = sglang_argv_errors(dict(KIMI, **{"speculative-algorithm": "EAGLE3", "enable-unified-memory": True,
                                                "speculative-eagle-topk": 2}), "0.5.23", model_family="kimi")
    assert any("without --speculative-draft-model-path" in p for p in problems)
    assert any("--enable-unified-memory needs --speculative-eagle-topk 1" in p for p in problems)
