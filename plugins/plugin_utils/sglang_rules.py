# -*- coding: utf-8 -*-
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The rules SGLang options must meet beyond its parser: model family, GPU architecture, secrets, and SGLang's own
start-up checks (stdlib only). Each returns a list of messages, empty when the options are fine; the argv filters
(plugins/filter/sglang_argv.py) raise or report them with the parser's problems.

``sglang_option_rules`` (``model_family``, ``compute_capability`` arguments): Kimi models need
``--tool-call-parser kimi_k2 --reasoning-parser kimi_k2 --trust-remote-code`` (and, being MLA models, no
``trtllm_mha``); on compute capability 12.x (SM120) the attention backends the pinned stack has no kernels for
(``SM12X_ATTENTION_BACKENDS``: FA3, FlashMLA, CuteDSL MLA, trtllm MLA) and DeepGEMM backends are refused;
``--api-key``/``--admin-api-key`` are refused because argv is world-readable.

``STARTUP_RULES`` / ``sglang_startup_rules``
    the checks SGLang 0.5.23 runs after argparse that a Kimi deployment can hit (HiCache vs radix cache, tp/nodes,
    multi-node DP, served name, chunked prefill vs page size, attention DP vs replicas, HiCache fraction, MoE dense
    TP, torch.compile without padding), so they fail preflight rather than a started unit. Each rule cites the file
    of the 0.5.23 wheel that prints it; tests/contract/test_startup_rules.py finds the text there.
"""

from __future__ import absolute_import, annotations, division, print_function

from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_cli import normalise_options

__metaclass__ = type


def model_family(options: dict, family: str | None = None) -> str:
    """``family`` when given; else ``kimi`` when the model path or served name says Kimi; else ``""``."""
    if family:
        return str(family).strip().lower()
    opts = normalise_options(options)
    names = " ".join(str(opts.get(k) or "") for k in ("model-path", "served-model-name")).lower()
    return "kimi" if "kimi" in names else ""


# Kimi K2 / K2.5: kimi_k2 for both parsers (``kimi`` is an older
# reasoning-only format: wrong for K2/K2.5), and the model ships its own code (tokenizer) -> trust-remote-code.
_KIMI_REQUIRED = (("tool-call-parser", "kimi_k2"), ("reasoning-parser", "kimi_k2"), ("trust-remote-code", True))
# The options that pick an attention backend for the model's layers (one list of choices in SGLang 0.5.23:
# srt/arg_groups/choices.py ATTENTION_BACKEND_CHOICES), the EAGLE draft's, and the vision tower's.
_ATTENTION_OPTIONS = ("attention-backend", "decode-attention-backend", "prefill-attention-backend")
_DRAFT_ATTENTION = ("speculative-draft-attention-backend",)
_MM_ATTENTION = ("mm-attention-backend",)
# Attention backends SGLang 0.5.23 offers that cannot run on compute capability 12.x (SM120, RTX PRO 6000
# Blackwell) with the pinned kernels: (options, value, the wheel's own words for it, the wheel file that says them,
# why, what to use instead). tests/contract/test_startup_rules.py finds each text in the cited file. On SM120 the MLA
# default is triton (srt/arg_groups/model_override_base.py, get_default_attn_backend: fa3 on Hopper, flashinfer on
# SM100, else triton) and the vision tower's triton_attn (srt/layers/attention/vision.py).
SM12X_ATTENTION_BACKENDS = (
    (_ATTENTION_OPTIONS + _DRAFT_ATTENTION, "fa3",
     "FlashAttention v3 Backend requires SM>=80 and SM<=90", "srt/layers/attention/attention_registry.py",
     "SGLang refuses it at start, and sglang-kernel 0.4.10's flash_ops (FA3) holds no sm_120 code",
     "leave it unset (triton, SGLang's MLA default on SM120) or use triton"),
    (_MM_ATTENTION, "fa3",
     "The 'fa3' backend is not supported on Blackwell GPUs", "srt/layers/attention/vision.py",
     "SGLang refuses it at start, and sglang-kernel 0.4.10's flash_ops (FA3) holds no sm_120 code",
     "leave it unset (triton_attn on SM120) or use triton_attn"),
    (_ATTENTION_OPTIONS, "flashmla",
     "On SM120 (Blackwell Desktop / RTX PRO 6000) the flash_mla CUDA kernel is not available",
     "kernels/ops/attention/flash_mla_sm120.py",
     "SGLang does not check it, but its flash_mla kernels (sgl-flash-mla 1.0.0, sglang-kernel's flashmla_ops) are "
     "built for SM90 and SM100 only",
     "leave it unset (triton) or use triton"),
    (_ATTENTION_OPTIONS, "cutedsl_mla",
     "CuteDSL MLA backend is only supported on Blackwell GPUs (SM100)", "srt/arg_groups/overrides.py",
     "SGLang refuses it at start", "leave it unset (triton) or use triton"),
    (_ATTENTION_OPTIONS, "tokenspeed_mla",
     "CuteDSL MLA backend is only supported on Blackwell GPUs (SM100)", "srt/arg_groups/overrides.py",
     "SGLang turns it into cutedsl_mla (srt/arg_groups/serving_hook.py) and refuses that at start",
     "leave it unset (triton) or use triton"),
    (_ATTENTION_OPTIONS, "trtllm_mla",
     "TRTLLM MLA backend is only supported on Blackwell GPUs (SM100/SM12x)", "srt/arg_groups/overrides.py",
     "SGLang's own check lets SM12x through, but its prefill runs trtllm-gen kernels that exist for SM100/SM103 only (\"Unsupported "
     "architecture\" on RTX PRO 6000, sgl-project/sglang#24633) and its decode buffer is refused by FlashInfer's SM12x "
     "XQA path", "leave it unset (triton) or use triton"),
)
# MLA models (Kimi K2/K2.5 are) cannot use trtllm_mha on any GPU: (value, the wheel's words, where).
_MLA_REFUSED = (("trtllm_mha", "trtllm_mha backend can only be used with non-MLA models.",
                 "srt/layers/attention/attention_registry.py"),)
_DEEPGEMM_VALUES = {"fp8-gemm-backend": ("deep_gemm", "flashinfer_deepgemm"),
                    "moe-runner-backend": ("deep_gemm",),
                    "speculative-moe-runner-backend": ("deep_gemm",)}
# Secrets SGLang 0.5.23 takes only as options (no environment variable): argv is world-readable
# (/proc/PID/cmdline, ps) and ends up in the unit file and `systemctl show`.
_SECRET_OPTIONS = ("api-key", "admin-api-key")


def sglang_option_rules(options: dict, family: str | None = None, compute_capability: str | None = None) -> list[str]:
    """Model-family, GPU-architecture and secret rules over ``options``; a list of messages (empty = fine)."""
    opts = normalise_options(options)
    errors = []
    fam = model_family(opts, family)
    if fam == "kimi":
        for name, want in _KIMI_REQUIRED:
            have = opts.get(name)
            if want is True:
                if have is not True:
                    errors.append(f"Kimi models need --{name} (their tokenizer is code shipped with the model), "
                                  f"got {have!r}; set {name}: true")
            elif have != want:
                older = "kimi is an older reasoning-only format, wrong for K2/K2.5; " if have == "kimi" else ""
                errors.append(f"Kimi models need --{name} {want}, got {have!r}; {older}set {name}: {want}")
        for value, text, where in _MLA_REFUSED:
            for name in _ATTENTION_OPTIONS:
                if opts.get(name) == value:
                    errors.append(f"--{name} {value} cannot run a Kimi model: Kimi K2/K2.5 use MLA attention, which "
                                  f"SGLang refuses for it (SGLang 0.5.23, {where}: \"{text}\"); leave it unset or "
                                  f"use triton")
    cc = str(compute_capability or "").strip()
    if cc.split(".", maxsplit=1)[0] == "12":
        sm = "SM" + cc.replace(".", "")
        for names, value, text, where, why, instead in SM12X_ATTENTION_BACKENDS:
            for name in names:
                if opts.get(name) == value:
                    errors.append(f"--{name} {value} cannot run on compute capability {cc} ({sm}, RTX PRO 6000 "
                                  f"Blackwell): {why} (SGLang 0.5.23, {where}: \"{text}\"); {instead}")
        for name, bad in _DEEPGEMM_VALUES.items():
            if opts.get(name) in bad:
                errors.append(f"--{name} {opts[name]} uses DeepGEMM, which fails on compute capability {cc} ({sm}); "
                              f"leave it at auto or pick a non-DeepGEMM backend")
    for name in _SECRET_OPTIONS:
        if opts.get(name) not in (None, False, ""):
            errors.append(f"--{name} would put a secret in argv (world-readable in ps and /proc, and in the unit "
                          f"file and `systemctl show`); SGLang 0.5.23 reads it from no environment variable. "
                          f"Leave it out and protect the port (loopback + router, or a proxy holding the key)")
    return errors


# SGLang 0.5.23's own checks after argparse (ServerArgs resolution and check_server_args, sglang/srt/arg_groups/) that
# a Kimi-K2.5 deployment can hit, checked here so that they fail preflight instead of a started unit. Each entry:
# (name, the wheel's text for it -- tests/contract/test_startup_rules.py finds it in the wheel --, where, test,
# message). ``test(opts)`` is True when the options break the rule; ``opts`` holds normalised names.
def _opt_int(opts, name, default=None):
    try:
        return int(opts.get(name, default))
    except (TypeError, ValueError):
        return default


def _opt_float(opts, name):
    try:
        return float(opts[name]) if opts.get(name) is not None else None
    except (TypeError, ValueError):
        return None


def _eagle_topk_above_1(opts):
    algorithm = str(opts.get("speculative-algorithm") or "").upper()
    return algorithm not in ("", "NONE") and (_opt_int(opts, "speculative-eagle-topk", 1) or 1) > 1


def _tree_with(flag):
    """A rule's test: speculative decoding with a draft tree (topk above 1) and ``flag`` on."""
    return lambda o: bool(o.get(flag)) and _eagle_topk_above_1(o)


STARTUP_RULES = (
    ("hicache_needs_radix_cache",
     r"enable-hierarchical-cache and disable-radix-cache are mutually exclusive",
     "arg_groups/kv_cache_hook.py",
     lambda o: bool(o.get("enable-hierarchical-cache")) and bool(o.get("disable-radix-cache")),
     "--enable-hierarchical-cache and --disable-radix-cache are mutually exclusive in SGLang 0.5.23: HiCache extends "
     "the radix cache; drop one"),
    ("tp_divisible_by_nodes",
     r"tp_size must be divisible by number of nodes",
     "arg_groups/validation_hook.py check_server_args",
     lambda o: (_opt_int(o, "tp-size", 1) * _opt_int(o, "pp-size", 1)) % max(_opt_int(o, "nnodes", 1), 1) != 0,
     "--tp-size x --pp-size must be divisible by --nnodes (SGLang 0.5.23 asserts it at start-up)"),
    ("no_multinode_data_parallel",
     r"multi-node data-parallel replicas are not supported",
     "arg_groups/validation_hook.py check_server_args",
     lambda o: _opt_int(o, "dp-size", 1) > 1 and _opt_int(o, "nnodes", 1) > 1,
     "--dp-size > 1 with --nnodes > 1: SGLang 0.5.23 has no multi-node data-parallel replicas; use --attn-dp-size "
     "across nodes or one deployment per node"),
    ("served_name_without_colon",
     r"served_model_name cannot contain a colon",
     "arg_groups/validation_hook.py check_server_args",
     lambda o: ":" in str(o.get("served-model-name") or ""),
     "--served-model-name must not contain ':' (SGLang 0.5.23 reserves it for the model:adapter LoRA syntax)"),
    ("chunked_prefill_multiple_of_page",
     r"chunked_prefill_size must be divisible by page_size",
     "arg_groups/validation_hook.py check_server_args",
     lambda o: (_opt_int(o, "chunked-prefill-size", 0) or 0) > 0 and (_opt_int(o, "page-size", 0) or 0) > 0
     and _opt_int(o, "chunked-prefill-size") % _opt_int(o, "page-size") != 0,
     "--chunked-prefill-size must be a multiple of --page-size (SGLang 0.5.23 asserts it at start-up)"),
    ("attention_dp_or_replicas",
     r"data-parallel replicas combined with attention data parallelism are not supported",
     "arg_groups/parallel_hook.py",
     lambda o: _opt_int(o, "attn-dp-size", 1) > 1 and _opt_int(o, "dp-size", 1) > 1,
     "--attn-dp-size > 1 with --dp-size > 1: SGLang 0.5.23 does not combine attention DP with DP replicas"),
    ("hicache_fraction_in_range",
     r"--hicache-host-memory-fraction must be in \(0, 1\]",
     "arg_groups/hicache_hook.py handle_hicache_ratio_default",
     lambda o: _opt_float(o, "hicache-host-memory-fraction") is not None
     and not 0 < _opt_float(o, "hicache-host-memory-fraction") <= 1,
     "--hicache-host-memory-fraction must be in (0, 1]"),
    ("moe_dense_tp_size",
     r"moe_dense_tp_size only supports None, 1, or tp_size currently",
     "arg_groups/validation_hook.py check_server_args",
     lambda o: o.get("moe-dense-tp-size") is not None
     and _opt_int(o, "moe-dense-tp-size") not in (1, _opt_int(o, "tp-size", 1)),
     "--moe-dense-tp-size must be 1 or the --tp-size"),
    ("no_torch_compile_without_padding",
     r"--disable-cuda-graph-padding is incompatible with --enable-torch-compile",
     "arg_groups/validation_hook.py check_server_args",
     lambda o: bool(o.get("disable-cuda-graph-padding")) and bool(o.get("enable-torch-compile")),
     "--disable-cuda-graph-padding with --enable-torch-compile compiles once per batch size and stalls start-up for "
     "minutes (SGLang 0.5.23 refuses it); drop one"),
    # EAGLE's draft tree (--speculative-eagle-topk above 1) against the paths that verify a linear chain only
    ("eagle_topk_rejection_sampling",
     r"--speculative-use-rejection-sampling requires --speculative-eagle-topk=1\.",
     "arg_groups/speculative_hook.py _handle_eagle_family",
     _tree_with("speculative-use-rejection-sampling"),
     "--speculative-use-rejection-sampling needs --speculative-eagle-topk 1 (a chain; SGLang 0.5.23 refuses a tree)"),
    ("eagle_topk_unified_memory",
     r"--enable-unified-memory supports a linear draft chain only",
     "arg_groups/kv_cache_hook.py",
     _tree_with("enable-unified-memory"),
     "--enable-unified-memory needs --speculative-eagle-topk 1 (its pool moves accepted tokens page by page; SGLang "
     "0.5.23 refuses a draft tree)"),
    ("eagle_topk_hisparse",
     r"The minimal HiSparse spec integration supports linear speculation only",
     "arg_groups/hisparse_hook.py",
     _tree_with("enable-hisparse"),
     "--enable-hisparse with speculative decoding needs --speculative-eagle-topk 1 (SGLang 0.5.23 refuses a tree)"),
    ("eagle_topk_linear_replayssm",
     r"--enable-linear-replayssm-spec requires a linear draft chain",
     "arg_groups/attention_hook.py",
     _tree_with("enable-linear-replayssm-spec"),
     "--enable-linear-replayssm-spec needs --speculative-eagle-topk 1 (SGLang 0.5.23 refuses a tree)"),
)

# Architectures whose checkpoint carries its own draft (MTP/NextN layers): for these SGLang 0.5.23 makes
# --speculative-draft-model-path default to the model itself (arg_groups/speculative_hook.py _handle_eagle_family; the
# list is read from the wheel by tests/contract/test_startup_rules.py). For any other target, EAGLE/EAGLE3 without a
# draft path loads the target as its own draft: it reads every weight twice and fails (sgl-project/sglang#36528).
BUNDLED_DRAFT_ARCHITECTURES = (
    "DeepseekV32ForCausalLM", "DeepseekV3ForCausalLM", "DeepseekV4ForCausalLM", "Glm4MoeForCausalLM",
    "Glm4MoeLiteForCausalLM", "GlmMoeDsaForCausalLM", "BailingMoeForCausalLM", "BailingMoeV2ForCausalLM",
    "BailingMoeV2_5ForCausalLM", "MistralLarge3ForCausalLM", "PixtralForConditionalGeneration", "HYV3ForCausalLM",
    "HYV4ForCausalLM", "Qwen4ExpForConditionalGeneration",
)
# The architectures of the families the product knows (Kimi-K2.5's config.json; K2's is DeepSeek-V3's own class).
FAMILY_ARCHITECTURES = {"kimi": ("KimiK25ForConditionalGeneration",), "deepseek": ("DeepseekV3ForCausalLM",)}


def sglang_speculative_rules(options: dict, family: str | None = None) -> list[str]:
    """EAGLE/EAGLE3 that SGLang 0.5.23 cannot run as given: a target without a bundled draft and no
    --speculative-draft-model-path. Messages, empty = fine."""
    opts = normalise_options(options)
    algorithm = str(opts.get("speculative-algorithm") or "").upper()
    if algorithm not in ("EAGLE", "EAGLE3") or str(opts.get("speculative-draft-model-path") or "").strip():
        return []
    fam = model_family(opts, family)
    archs = FAMILY_ARCHITECTURES.get(fam, ())
    if archs and all(a in BUNDLED_DRAFT_ARCHITECTURES for a in archs):
        return []
    return ["--speculative-algorithm %s without --speculative-draft-model-path: %s carries no draft of its own "
            "(SGLang 0.5.23 defaults the draft to the model itself only for %s, arg_groups/speculative_hook.py "
            "_handle_eagle_family), so it would load the target as its own draft, read every weight twice and fail "
            "(sgl-project/sglang#36528); give the EAGLE3 draft's path (sglang_service_eagle3.draft_model_path)"
            % (algorithm, "/".join(archs) or "this model", ", ".join(BUNDLED_DRAFT_ARCHITECTURES[:3]) + ", ...")]


# The EAGLE3 drafts SGLang 0.5.23 can load: the EntryClass of its srt/models/*eagle3*.py (llama_eagle3.py: SpecForge's
# Llama layout, as lightseekorg/kimi-k2.5-eagle3 ships; kimi_k25_eagle3.py: the MLA layout of kimi-k2.5-eagle3-mla).
# The MLA ones are in srt/configs/model_config.py's MLA list. Both read from the wheel by
# tests/contract/test_startup_rules.py.
EAGLE3_DRAFT_ARCHITECTURES = ("LlamaForCausalLMEagle3", "Eagle3DeepseekV2ForCausalLM")
MLA_DRAFT_ARCHITECTURES = ("Eagle3DeepseekV2ForCausalLM",)


def _hidden_size(config: dict):
    """A config's hidden size: a multimodal wrapper's (Kimi-K2.5) is its text_config's."""
    text = config.get("text_config") if isinstance(config.get("text_config"), dict) else {}
    return config.get("hidden_size") or text.get("hidden_size")


def sglang_draft_problems(draft: dict | None, target: dict | None, draft_is_mla: bool = False,
                          draft_where: str = "the draft", target_where: str = "the model") -> list[str]:
    """An EAGLE3 draft that SGLang 0.5.23 would load only to fail, judged from both config.json files before either
    is staged. Messages, empty = fine.

    * Its architecture must be one of 0.5.23's EAGLE3 drafts (``EAGLE3_DRAFT_ARCHITECTURES``): a target checkpoint or
      a plain Llama given as the draft loads and then fails in the draft worker.
    * The target's hidden states it reads must be the target's width: the draft's ``target_hidden_size``, else its
      ``hidden_size``, against the target's (srt/speculative/eagle_utils.py get_draft_input_from_target_hidden_dim);
      a draft trained for another model fails at its first forward, after both loads.
    * ``draft_is_mla`` (sglang_service_eagle3) says no draft attention backend is needed; a non-MLA draft then
      inherits the target's MLA backend and fails.
    ``draft`` or ``target`` None: its config.json could not be read (the caller says why); nothing to judge."""
    if not isinstance(draft, dict) or not isinstance(target, dict):
        return []
    problems = []
    archs = draft.get("architectures") or []
    arch = archs[0] if archs else None
    if arch not in EAGLE3_DRAFT_ARCHITECTURES:
        problems.append("%s is not an EAGLE3 draft SGLang 0.5.23 can load: its config.json names %s (0.5.23's EAGLE3 "
                        "drafts: %s, srt/models/*eagle3*.py); point deployment_draft_model_repo_id at the draft "
                        "trained for this model, not at a target"
                        % (draft_where, arch or "no architecture", ", ".join(EAGLE3_DRAFT_ARCHITECTURES)))
        return problems
    wanted, target_hidden = draft.get("target_hidden_size") or draft.get("hidden_size"), _hidden_size(target)
    if wanted and target_hidden and int(wanted) != int(target_hidden):
        problems.append("%s reads target hidden states of width %s (its config.json's %s) but %s's hidden_size is %s: "
                        "it was trained for another model and fails at its first forward, after both loads "
                        "(srt/speculative/eagle_utils.py get_draft_input_from_target_hidden_dim); stage the draft "
                        "trained for this model" % (draft_where, wanted, "target_hidden_size"
                                                    if draft.get("target_hidden_size") else "hidden_size",
                                                    target_where, target_hidden))
    if draft_is_mla and arch not in MLA_DRAFT_ARCHITECTURES:
        problems.append("sglang_service_eagle3.draft_is_mla is true but %s is %s, not an MLA draft: without "
                        "--speculative-draft-attention-backend it inherits the target's MLA attention backend and "
                        "fails; set draft_is_mla false" % (draft_where, arch))
    return problems


def sglang_startup_rules(options: dict) -> list[str]:
    """SGLang 0.5.23's post-parse start-up checks (``STARTUP_RULES``) over ``options``: messages, empty = fine."""
    opts = normalise_options(options)
    return [message for _name, _text, _where, broken, message in STARTUP_RULES if broken(opts)]
