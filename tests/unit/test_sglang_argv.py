"""sglang_argv: structured options -> argv validated against SGLang 0.5.23's own argparse snapshot."""

import re

import pytest
from ansible.errors import AnsibleFilterError

from conftest import SGLANG_VERSION as V

from ansible_collections.blackwell.sglang.plugins.filter import sglang_argv as f

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


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["/opt/x/python", "-m", "sglang.launch_server"], "/opt/x/python -m sglang.launch_server"),
        (["/p", "50%"], "/p 50%%"),
        (["/p", "a b"], '/p "a b"'),
        (["/p", 'say "hi"'], '/p "say \\"hi\\""'),
        (["/p", "C:\\dir"], '/p "C:\\\\dir"'),
        (["/p", "$HOME"], '/p "$$HOME"'),
        (["/p", '{"num_threads":16}'], '/p "{\\"num_threads\\":16}"'),
        (["/p", ""], '/p ""'),
    ],
)
def test_systemd_quote(argv, expected):
    assert f.systemd_quote(argv) == expected


def test_systemd_quote_refuses_relative_executable_and_empty_argv():
    with pytest.raises(AnsibleFilterError):
        f.systemd_quote(["python3", "-m", "x"])
    with pytest.raises(AnsibleFilterError):
        f.systemd_quote([])


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
    assert f.sglang_option_rules({"model-path": "/m", "served-model-name": "kimi-k2.5"})
    assert f.sglang_option_rules({"model-path": "/m"}, family="kimi")
    assert f.sglang_option_rules({"model-path": "/srv/Kimi"}, family="generic") == []
    assert f.sglang_argv(KIMI, V) and f.sglang_option_rules(KIMI, compute_capability="12.0") == []


@pytest.mark.parametrize("name, value", [
    ("attention-backend", "trtllm_mla"), ("decode-attention-backend", "trtllm_mla"),
    ("fp8-gemm-backend", "deep_gemm"), ("moe-runner-backend", "deep_gemm"),
])
def test_sm120_refuses_trtllm_mla_and_deepgemm(name, value):
    with pytest.raises(AnsibleFilterError, match=r"--%s %s .*compute capability 12\.0 \(SM120" % (name, value)):
        f.sglang_argv({**KIMI, name: value}, V, compute_capability="12.0")
    # Hopper (9.0) may use them: the rule names the field fact, not the option.
    assert f.sglang_argv({**KIMI, name: value}, V, compute_capability="9.0")


def test_api_key_in_argv_is_refused():
    errors = f.sglang_argv_errors({**KIMI, "api-key": "sk-secret"}, V, compute_capability="12.0")
    assert len(errors) == 1 and errors[0].startswith("--api-key would put a secret in argv")
    assert "sk-secret" not in errors[0]


def test_argv_errors_lists_parser_and_rule_problems_without_raising():
    errors = f.sglang_argv_errors({**KIMI, "tool-call-parser": "kimi", "attention-backend": "trtllm_mla"}, V,
                                  compute_capability="12.0")
    assert len(errors) == 3, errors


# --- EAGLE3 -----------------------------------------------------------------------------------------


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
    argv = f.sglang_argv({**KIMI, **opts}, V, compute_capability="12.0")
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


# SGLang 0.5.23's start-up rules after argparse (STARTUP_RULES): each broken alone, each named in the message.
KIMI_BASE = {"model-path": "/srv/models/Kimi-K2.5/current", "tp-size": 8, "trust-remote-code": True,
             "tool-call-parser": "kimi_k2", "reasoning-parser": "kimi_k2"}
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
}


def test_every_startup_rule_has_a_case():
    assert sorted(BROKEN) == sorted(rule[0] for rule in f.STARTUP_RULES)


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_a_startup_rule_of_sglang_fails_before_the_unit_starts(name):
    extra, words = BROKEN[name]
    errors = f.sglang_argv_errors({**KIMI_BASE, **extra}, V)
    assert len(errors) == 1 and words in errors[0], errors
    with pytest.raises(AnsibleFilterError, match=re.escape(words)):
        f.sglang_argv({**KIMI_BASE, **extra}, V)


def test_the_kimi_profile_breaks_no_startup_rule():
    assert f.sglang_startup_rules({**KIMI_BASE, "enable-hierarchical-cache": True, "nnodes": 2,
                                             "chunked-prefill-size": 8192, "page-size": 64,
                                             "served-model-name": "Kimi-K2.5", "moe-dense-tp-size": 1}) == []


@pytest.mark.parametrize("options, want", [
    ({"tp-size": 8}, 8),
    ({"tp-size": 4}, 4),
    ({}, 1),  # the parser's defaults: tp 1, pp 1, dp 1, one node
    ({"tp-size": 16, "nnodes": 2}, 8),  # one TP group over two nodes: half the ranks each
    ({"tp-size": 8, "pp-size": 2, "nnodes": 2}, 8),  # one pipeline stage of 8 ranks per node
    ({"tp-size": 4, "pp-size": 2}, 8),  # both stages on one node
    ({"tp-size": 2, "dp-size": 4}, 8),  # 4 replicas of 2 ranks (the DP controller starts each group)
    ({"tp-size": 8, "attn-dp-size": 8}, 8),  # attention DP inside the TP group: no extra process
    ({"tp-size": 8, "dp-size": 8, "enable-dp-attention": True}, 8),  # the deprecated spelling of attn-dp-size 8
])
def test_schedulers_per_node_follow_0_5_23_rank_layout(options, want):
    assert f.sglang_schedulers_per_node(options, V) == want


def test_endpoint_is_what_the_options_say():
    """The served name, port and scheduler count smoke_health, the router and drain use come from the options the
    unit runs with (issue 14: a served name with spaces and quotes, tp 4 on port 8000)."""
    ep = f.sglang_service_endpoint({"served-model-name": 'Kimi 100% "K2.5"', "tp-size": 4, "port": 8000,
                                    "host": "0.0.0.0"}, V, "sglang-kimi.service", "gpu-1.internal")
    assert ep == {"unit": "sglang-kimi.service", "host": "0.0.0.0", "port": 8000, "scheme": "http",
                  "probe_url": "http://127.0.0.1:8000", "router_url": "http://gpu-1.internal:8000",
                  "served_model_name": 'Kimi 100% "K2.5"', "schedulers": 4}


def test_endpoint_defaults_are_the_parsers_and_loopback_has_no_router_url():
    ep = f.sglang_service_endpoint({"model-path": "/srv/m"}, V, "u.service", "gpu-0")
    assert (ep["host"], ep["port"]) == ("127.0.0.1", 30000)  # 0.5.23 server_args defaults, from the snapshot
    assert ep["probe_url"] == "http://127.0.0.1:30000" and ep["router_url"] is None
    assert ep["served_model_name"] == "/srv/m"  # 0.5.23 serves the model path when no name is given
    v6 = f.sglang_service_endpoint({"host": "::", "port": 9000, "ssl-certfile": "/etc/c.pem"}, V, "u", "fd00::7")
    assert v6["probe_url"] == "https://[::1]:9000" and v6["router_url"] == "https://[fd00::7]:9000"


def test_node_address_prefers_the_advertised_name_then_a_real_ansible_host():
    assert f.node_address("gpu-1", "gpu-1.internal", "10.0.0.6", "ssh") == "gpu-1.internal"
    assert f.node_address("gpu-1", "", "10.0.0.6", None) == "10.0.0.6"
    assert f.node_address("sglang-fleet-gpu-0", "", "sglang-fleet-gpu-0", "containers.podman.podman") == \
        "sglang-fleet-gpu-0"
    assert f.node_address("gpu-2", None, None, "ssh") == "gpu-2"


def test_router_metrics_endpoint_reads_the_options_then_the_router_parser():
    """Where monitoring scrapes the router: its prometheus-host/-port options, unset ones at sglang-router 0.3.2's
    parser defaults (0.0.0.0:29000); a loopback listener has no URL for another host."""
    ep = f.sglang_router_metrics_endpoint({"policy": "cache_aware"}, "0.3.2", "router-1")
    assert ep == {"host": "0.0.0.0", "port": 29000, "local_url": "http://127.0.0.1:29000",
                  "scrape_url": "http://router-1:29000"}
    lo = f.sglang_router_metrics_endpoint({"prometheus-host": "127.0.0.1", "prometheus_port": 9400}, "0.3.2", "r")
    assert lo["local_url"] == "http://127.0.0.1:9400" and lo["scrape_url"] is None
    v6 = f.sglang_router_metrics_endpoint({"prometheus-host": "::"}, "0.3.2", "fd00::9")
    assert v6["local_url"] == "http://[::1]:29000" and v6["scrape_url"] == "http://[fd00::9]:29000"
    with pytest.raises(AnsibleFilterError, match="--prometheus-port must be an integer"):
        f.sglang_router_metrics_endpoint({"prometheus-port": "x"}, "0.3.2")
