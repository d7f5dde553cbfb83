"""sglang_argv: structured options -> argv validated against SGLang 0.5.23's own argparse snapshot, with the option and
start-up rules of module_utils/sglang_rules.py."""

import re

import pytest
from ansible.errors import AnsibleFilterError

from conftest import SGLANG_VERSION as V

from ansible_collections.blackwell.sglang.plugins.filter import sglang_argv as f
from ansible_collections.blackwell.sglang.plugins.plugin_utils import sglang_rules as rules

KIMI = {
    "model-path": "/srv/models/Kimi-K2.5/current",
    "tp-size": 8,
    "trust-remote-code": True,
    "tool-call-parser": "kimi_k2",
    "reasoning-parser": "kimi_k2",
    "enable-hierarchical-cache": True,
}


def test_kimi_defaults_render_in_order_without_abbreviations():
    assert f.sglang_argv(KIMI, V) == [
        "--model-path", "/srv/models/Kimi-K2.5/current",
        "--tp-size", "8",
        "--trust-remote-code",
        "--tool-call-parser", "kimi_k2",
        "--reasoning-parser", "kimi_k2",
        "--enable-hierarchical-cache",
    ]


def test_underscored_names_are_normalised_and_false_flags_dropped():
    argv = f.sglang_argv({"tp_size": 8, "trust_remote_code": False, "port": None}, V)
    assert argv == ["--tp-size", "8"]


def test_kimi_is_not_a_tool_call_parser():
    with pytest.raises(AnsibleFilterError, match=r"--tool-call-parser 'kimi' is not a valid choice in SGLang 0\.5\.23"):
        f.sglang_argv({**KIMI, "tool-call-parser": "kimi"}, V)


def test_removed_flag_names_its_replacement():
    with pytest.raises(AnsibleFilterError, match=r"--cuda-graph-max-bs is not an option of SGLang 0\.5\.23.*--cuda-graph-max-bs-decode"):
        f.sglang_argv({"cuda-graph-max-bs": 256}, V)


def test_abbreviation_is_unknown_not_silently_expanded():
    with pytest.raises(AnsibleFilterError, match=r"--tp is not an option"):
        f.sglang_argv({"tp": 8}, V)


def test_every_problem_is_listed_at_once():
    with pytest.raises(AnsibleFilterError) as err:
        f.sglang_argv({"tp-size": "eight", "tool-call-parser": "kimi", "no-such-flag": 1}, V)
    text = str(err.value)
    assert "--tp-size expects an integer, got 'eight'" in text
    assert "'kimi' is not a valid choice" in text
    assert "--no-such-flag is not an option" in text


def test_json_values_are_rendered_compactly():
    argv = f.sglang_argv({"model-loader-extra-config": {"enable_multithread_load": True, "num_threads": 16}}, V)
    assert argv == ["--model-loader-extra-config", '{"enable_multithread_load":true,"num_threads":16}']


def test_unknown_version_says_which_snapshots_exist():
    with pytest.raises(AnsibleFilterError, match=r"no argparse snapshot for SGLang 0\.0\.1 \(have: .*0\.5\.23"):
        f.sglang_argv(KIMI, "0.0.1")
    with pytest.raises(AnsibleFilterError, match=r"no argparse snapshot for sglang-router 0\.0\.1 \(have: .*0\.3\.2"):
        f.sglang_router_argv({"port": 30000}, "0.0.1")


# --- model-family, SM120 and secret rules ---------------------------------------------------------


def test_kimi_model_without_kimi_parsers_or_remote_code_is_refused_listing_all():
    opts = {"model-path": "/srv/models/Kimi-K2.5/current", "tp-size": 8, "tool-call-parser": "qwen"}
    with pytest.raises(AnsibleFilterError) as err:
        f.sglang_argv(opts, V)
    text = str(err.value)
    assert "Kimi models need --tool-call-parser kimi_k2, got 'qwen'" in text
    assert "Kimi models need --reasoning-parser kimi_k2, got None" in text
    assert "Kimi models need --trust-remote-code" in text


def test_kimi_detected_from_served_name_or_forced_by_family():
    assert rules.sglang_option_rules({"model-path": "/m", "served-model-name": "kimi-k2.5"})
    assert rules.sglang_option_rules({"model-path": "/m"}, family="kimi")
    assert rules.sglang_option_rules({"model-path": "/srv/Kimi"}, family="generic") == []
    assert f.sglang_argv(KIMI, V) and rules.sglang_option_rules(KIMI, compute_capability="12.0") == []


@pytest.mark.parametrize("name, value", [
    ("attention-backend", "trtllm_mla"), ("decode-attention-backend", "trtllm_mla"),
    ("fp8-gemm-backend", "deep_gemm"), ("moe-runner-backend", "deep_gemm"),
])
def test_sm120_refuses_trtllm_mla_and_deepgemm(name, value):
    with pytest.raises(AnsibleFilterError, match=r"--%s %s .*compute capability 12\.0 \(SM120" % (name, value)):
        f.sglang_argv({**KIMI, name: value}, V, compute_capability="12.0")
    # Hopper (9.0) may use them: the rule names the field fact, not the option.
    assert f.sglang_argv({**KIMI, name: value}, V, compute_capability="9.0")


@pytest.mark.parametrize("name, value, says", [
    ("attention-backend", "fa3", "FlashAttention v3 Backend requires SM>=80 and SM<=90"),
    ("prefill-attention-backend", "fa3", "flash_ops (FA3) holds no sm_120 code"),
    ("speculative-draft-attention-backend", "fa3", "attention_registry.py"),
    ("mm-attention-backend", "fa3", "The 'fa3' backend is not supported on Blackwell GPUs"),
    ("attention-backend", "flashmla", "built for SM90 and SM100 only"),
    ("decode-attention-backend", "flashmla", "flash_mla CUDA kernel is not available"),
    ("attention-backend", "cutedsl_mla", "only supported on Blackwell GPUs (SM100)"),
    ("decode-attention-backend", "tokenspeed_mla", "turns it into cutedsl_mla"),
    ("prefill-attention-backend", "trtllm_mla", "sgl-project/sglang#24633"),
])
def test_sm120_refuses_attention_backends_without_sm120_kernels(name, value, says):
    errors = f.sglang_argv_errors({**KIMI, name: value}, V, compute_capability="12.0")
    assert len(errors) == 1, errors
    assert errors[0].startswith("--%s %s cannot run on compute capability 12.0 (SM120" % (name, value)), errors
    assert says in errors[0] and "use triton" in errors[0], errors
    # Hopper (9.0) may use them; a backend that runs on SM120 passes there.
    assert f.sglang_argv_errors({**KIMI, name: value}, V, compute_capability="9.0") == []
    assert f.sglang_argv_errors({**KIMI, name: "triton" if name != "mm-attention-backend" else "triton_attn"}, V,
                                compute_capability="12.0") == []


def test_mla_models_refuse_trtllm_mha_on_any_gpu_but_the_draft_may_use_it():
    for cc in ("12.0", "9.0"):
        errors = f.sglang_argv_errors({**KIMI, "attention-backend": "trtllm_mha"}, V, compute_capability=cc)
        assert len(errors) == 1 and "trtllm_mha backend can only be used with non-MLA models." in errors[0], errors
    # An EAGLE-3 draft is a Llama-architecture (MHA) model: trtllm_mha runs on SM120 (fmha_v2 prefill, XQA decode).
    assert rules.sglang_option_rules({**KIMI, "speculative-draft-attention-backend": "trtllm_mha"},
                                     compute_capability="12.0") == []


def test_api_key_in_argv_is_refused():
    errors = f.sglang_argv_errors({**KIMI, "api-key": "sk-secret"}, V, compute_capability="12.0")
    assert len(errors) == 1 and errors[0].startswith("--api-key would put a secret in argv")
    assert "sk-secret" not in errors[0]


def test_argv_errors_lists_parser_and_rule_problems_without_raising():
    errors = f.sglang_argv_errors({**KIMI, "tool-call-parser": "kimi", "attention-backend": "trtllm_mla"}, V,
                                  compute_capability="12.0")
    assert len(errors) == 3, errors


# SGLang 0.5.23's start-up rules after argparse (STARTUP_RULES): each broken alone, each named in the message.
KIMI_BASE = {"model-path": "/srv/models/Kimi-K2.5/current", "tp-size": 8, "trust-remote-code": True,
             "tool-call-parser": "kimi_k2", "reasoning-parser": "kimi_k2"}
# an EAGLE3 draft tree (with its draft, so only the rule under test breaks)
_TREE = {"speculative-algorithm": "EAGLE3", "speculative-draft-model-path": "/srv/models/draft",
         "speculative-eagle-topk": 4, "speculative-num-steps": 3, "speculative-num-draft-tokens": 8}
BROKEN = {
    "hicache_needs_radix_cache": ({"enable-hierarchical-cache": True, "disable-radix-cache": True}, "mutually exclusive"),
    "tp_divisible_by_nodes": ({"nnodes": 3}, "divisible by --nnodes"),
    "no_multinode_data_parallel": ({"dp-size": 2, "nnodes": 2}, "no multi-node data-parallel"),
    "served_name_without_colon": ({"served-model-name": "kimi:prod"}, "must not contain ':'"),
    "chunked_prefill_multiple_of_page": ({"chunked-prefill-size": 1000, "page-size": 64}, "multiple of --page-size"),
    "attention_dp_or_replicas": ({"attn-dp-size": 2, "dp-size": 2}, "attention DP with DP replicas"),
    "hicache_fraction_in_range": ({"hicache-host-memory-fraction": 1.5}, "(0, 1]"),
    "moe_dense_tp_size": ({"moe-dense-tp-size": 4}, "--moe-dense-tp-size must be 1 or the --tp-size"),
    "no_torch_compile_without_padding": ({"disable-cuda-graph-padding": True, "enable-torch-compile": True},
                                         "compiles once per batch size"),
    "eagle_topk_rejection_sampling": (dict(_TREE, **{"speculative-use-rejection-sampling": True}),
                                      "--speculative-use-rejection-sampling needs --speculative-eagle-topk 1"),
    "eagle_topk_unified_memory": (dict(_TREE, **{"enable-unified-memory": True}),
                                  "--enable-unified-memory needs --speculative-eagle-topk 1"),
    "eagle_topk_hisparse": (dict(_TREE, **{"enable-hisparse": True}), "--enable-hisparse with speculative decoding"),
    "eagle_topk_linear_replayssm": (dict(_TREE, **{"enable-linear-replayssm-spec": True}),
                                    "--enable-linear-replayssm-spec needs --speculative-eagle-topk 1"),
}


def test_every_startup_rule_has_a_case():
    assert sorted(BROKEN) == sorted(rule[0] for rule in rules.STARTUP_RULES)


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_a_startup_rule_of_sglang_fails_before_the_unit_starts(name):
    extra, words = BROKEN[name]
    errors = f.sglang_argv_errors({**KIMI_BASE, **extra}, V)
    assert len(errors) == 1 and words in errors[0], errors
    with pytest.raises(AnsibleFilterError, match=re.escape(words)):
        f.sglang_argv({**KIMI_BASE, **extra}, V)


def test_the_kimi_profile_breaks_no_startup_rule():
    assert rules.sglang_startup_rules({**KIMI_BASE, "enable-hierarchical-cache": True, "nnodes": 2,
                                             "chunked-prefill-size": 8192, "page-size": 64,
                                             "served-model-name": "Kimi-K2.5", "moe-dense-tp-size": 1}) == []
