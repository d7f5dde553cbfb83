#!/usr/bin/env python3
"""Small but real-format stand-in for the Kimi-K2.5 checkpoint (safetensors shards + index + config).

``make_checkpoint(out_dir, num_shards=64, shard_bytes=2 MiB, name_format=...)`` writes::

    model-00001-of-000064.safetensors ... model-00064-of-000064.safetensors   (real Kimi-K2.5 naming)
    model.safetensors.index.json   {"metadata": {"total_size": N}, "weight_map": {tensor: shard}}
    config.json                    KimiK25ForConditionalGeneration / model_type kimi_k25, text_config, auto_map ...
    tokenizer_config.json, preprocessor_config.json (auto_map), tiktoken.model, chat_template.jinja,
    generation_config.json and the remote-code modules (tokenization_kimi.py -> tool_declaration_ts.py,
    configuration_kimi_k25.py, modeling_kimi_k25.py, kimi_k25_processor.py, ...): see remote_code_files()
    SHA256SUMS                     sha256sum format, every file above (for an http source)

What is faithful:

* Tensor names follow the real checkpoint: ``language_model.model.layers.N.self_attn.*`` (MLA: q_a_proj,
  kv_a_proj_with_mqa, kv_b_proj, ...; BF16), ``language_model.model.layers.N.mlp.experts.E.{gate,up,down}_proj.
  {weight_packed (I32), weight_scale (BF16), weight_shape (I32)}`` (compressed-tensors pack-quantized INT4,
  group size 32), ``...mlp.shared_experts.*`` (BF16), ``...mlp.gate.weight`` / ``e_score_correction_bias``,
  ``language_model.model.embed_tokens.weight``, ``language_model.lm_head.weight``, ``vision_tower.*``,
  ``mm_projector.*``. Layer 0 is dense (first_k_dense_replace = 1).
* Real safetensors files written with the ``safetensors`` library (BF16 as a true ``BF16`` dtype, header
  metadata ``{"format": "pt"}``), so ``safe_open`` and a header parser see what they see on the real files.
* ``metadata.total_size`` is the sum of tensor data bytes (as HF computes it), not file sizes.
* Shard 1 is smaller (embeddings, vision tower, projector), like the real ~1 GB shard 1.

What is scaled down: dimensions. ``config.json`` keeps the real keys and non-size values, but the size-driving
numbers (hidden_size, layer/expert counts, vocab) describe the miniature actually on disk, so config and
tensors agree. ``num_hidden_layers`` stays 61 when the byte budget allows (default 64 x 2 MiB does), and the
expert count per layer is chosen to fill the budget.

Deterministic: same arguments -> byte-identical files (seeded numpy RNG, fixed ordering). Idempotent: a stamp
``<out_dir>/../.<name>.stamp`` holds the recipe hash and file sizes; a match means nothing is written.

``make_draft(out_dir)`` writes an EAGLE3 draft for it the way such drafts are published (lightseekorg/kimi-k2.5-eagle3:
``config.json`` with ``LlamaForCausalLMEagle3``, one ``model.safetensors``, no index), plus SHA256SUMS.

CLI: ``python tests/sandbox/checkpoint.py OUT [--shards N] [--shard-mb X]``
"""

import argparse
import hashlib
import json
import os
from pathlib import Path

import numpy as np

DEFAULT_NAME_FORMAT = "model-{index:05d}-of-{total:06d}.safetensors"
SEED = 20260127

# miniature dimensions (real values in comments)
HIDDEN = 256                # 7168
VOCAB = 256                 # 163840
DENSE_INTER = 256           # 18432
MOE_INTER = 128             # 2048
HEADS = 2                   # 64
Q_LORA = 64                 # 1536
KV_LORA = 32                # 512
QK_NOPE = 32                # 128
QK_ROPE = 16                # 64
V_HEAD = 32                 # 128
GROUP = 32                  # int4 group size (real: 32)
VISION_HIDDEN = 32          # 1152
VISION_LAYERS = 2           # 27
REAL_LAYERS = 61
TOPK = 8

BYTES = {"BF16": 2, "F32": 4, "I32": 4}


# ------------------------------------------------------------------------------------------- spec
def _attn(prefix):
    return [
        (prefix + "input_layernorm.weight", "BF16", (HIDDEN,)),
        (prefix + "post_attention_layernorm.weight", "BF16", (HIDDEN,)),
        (prefix + "self_attn.q_a_proj.weight", "BF16", (Q_LORA, HIDDEN)),
        (prefix + "self_attn.q_a_layernorm.weight", "BF16", (Q_LORA,)),
        (prefix + "self_attn.q_b_proj.weight", "BF16", (HEADS * (QK_NOPE + QK_ROPE), Q_LORA)),
        (prefix + "self_attn.kv_a_proj_with_mqa.weight", "BF16", (KV_LORA + QK_ROPE, HIDDEN)),
        (prefix + "self_attn.kv_a_layernorm.weight", "BF16", (KV_LORA,)),
        (prefix + "self_attn.kv_b_proj.weight", "BF16", (HEADS * (QK_NOPE + V_HEAD), KV_LORA)),
        (prefix + "self_attn.o_proj.weight", "BF16", (HIDDEN, HEADS * V_HEAD)),
    ]


def _int4_linear(prefix, out_f, in_f):
    return [
        (prefix + ".weight_packed", "I32", (out_f, in_f // 8)),
        (prefix + ".weight_scale", "BF16", (out_f, in_f // GROUP)),
        (prefix + ".weight_shape", "I32", (2,)),
    ]


def build_spec(layers, experts):
    """Ordered list of (name, dtype, shape) plus the index where the head (shard 1) ends."""
    head = [("language_model.model.embed_tokens.weight", "BF16", (VOCAB, HIDDEN))]
    for b in range(VISION_LAYERS):
        p = "vision_tower.encoder.blocks.%d." % b
        head += [(p + "norm0.weight", "BF16", (VISION_HIDDEN,)), (p + "norm1.weight", "BF16", (VISION_HIDDEN,)),
                 (p + "wqkv.weight", "BF16", (3 * VISION_HIDDEN, VISION_HIDDEN)),
                 (p + "wo.weight", "BF16", (VISION_HIDDEN, VISION_HIDDEN)),
                 (p + "mlp.fc0.weight", "BF16", (4 * VISION_HIDDEN, VISION_HIDDEN)),
                 (p + "mlp.fc1.weight", "BF16", (VISION_HIDDEN, 4 * VISION_HIDDEN))]
    head += [("vision_tower.patch_embed.proj.weight", "BF16", (VISION_HIDDEN, 3, 14, 14)),
             ("mm_projector.pre_norm.weight", "BF16", (VISION_HIDDEN,)),
             ("mm_projector.proj.0.weight", "BF16", (HIDDEN, VISION_HIDDEN * 4)),
             ("mm_projector.proj.2.weight", "BF16", (HIDDEN, HIDDEN))]
    p0 = "language_model.model.layers.0."
    body = _attn(p0) + [(p0 + "mlp.gate_proj.weight", "BF16", (DENSE_INTER, HIDDEN)),
                        (p0 + "mlp.up_proj.weight", "BF16", (DENSE_INTER, HIDDEN)),
                        (p0 + "mlp.down_proj.weight", "BF16", (HIDDEN, DENSE_INTER))]
    for n in range(1, layers):
        p = "language_model.model.layers.%d." % n
        body += _attn(p)
        body += [(p + "mlp.gate.weight", "BF16", (experts, HIDDEN)),
                 (p + "mlp.gate.e_score_correction_bias", "F32", (experts,)),
                 (p + "mlp.shared_experts.gate_proj.weight", "BF16", (MOE_INTER, HIDDEN)),
                 (p + "mlp.shared_experts.up_proj.weight", "BF16", (MOE_INTER, HIDDEN)),
                 (p + "mlp.shared_experts.down_proj.weight", "BF16", (HIDDEN, MOE_INTER))]
        for e in range(experts):
            q = p + "mlp.experts.%d." % e
            body += _int4_linear(q + "gate_proj", MOE_INTER, HIDDEN)
            body += _int4_linear(q + "up_proj", MOE_INTER, HIDDEN)
            body += _int4_linear(q + "down_proj", HIDDEN, MOE_INTER)
    tail = [("language_model.model.norm.weight", "BF16", (HIDDEN,)),
            ("language_model.lm_head.weight", "BF16", (VOCAB, HIDDEN))]
    return head + body + tail, len(head)


def _nbytes(item):
    n = BYTES[item[1]]
    for d in item[2]:
        n *= d
    return n


def _total(spec):
    return sum(_nbytes(t) for t in spec)


def choose_shape(num_shards, shard_bytes):
    """Pick (layers, experts) so the tensors roughly fill the byte budget."""
    budget = shard_bytes * (num_shards - 1) + shard_bytes // 10
    lo, hi = TOPK, 384
    if _total(build_spec(REAL_LAYERS, lo)[0]) <= budget:
        while lo < hi:                      # largest expert count that fits with 61 layers
            mid = (lo + hi + 1) // 2
            if _total(build_spec(REAL_LAYERS, mid)[0]) <= budget:
                lo = mid
            else:
                hi = mid - 1
        return REAL_LAYERS, lo
    layers = REAL_LAYERS
    while layers > 2 and _total(build_spec(layers, TOPK)[0]) > budget:
        layers -= 1
    return layers, TOPK


def partition(spec, head_len, num_shards):
    """Shard 1 = head; the rest is split into num_shards-1 shards of about equal bytes."""
    shards = [spec[:head_len]]
    rest = spec[head_len:]
    if num_shards == 1:
        return [spec]
    if len(rest) < num_shards - 1:
        raise ValueError("only %d tensors for %d shards: use fewer shards" % (len(rest), num_shards - 1))
    total = _total(rest)
    per = total / (num_shards - 1)
    buckets = [[] for _ in range(num_shards - 1)]
    acc = 0
    for item in rest:
        idx = min(int(acc / per), num_shards - 2) if per else 0
        buckets[idx].append(item)
        acc += _nbytes(item)
    # never leave a shard empty: borrow the last tensor of the previous non-empty bucket
    for i in range(len(buckets)):
        if not buckets[i]:
            j = i - 1
            while j >= 0 and len(buckets[j]) < 2:
                j -= 1
            if j < 0:
                raise ValueError("cannot fill %d shards" % num_shards)
            buckets[i].append(buckets[j].pop())
    return shards + buckets


# ------------------------------------------------------------------------------------------- data
def _data(rng, name, dtype, shape):
    count = int(np.prod(shape)) if shape else 1
    if dtype == "I32":
        return rng.integers(-2**31, 2**31 - 1, size=count, dtype=np.int64).astype(np.int32).reshape(shape)
    if dtype == "F32":
        return (rng.standard_normal(count).astype(np.float32) * 0.01).reshape(shape)
    # BF16: upper 16 bits of small float32 values
    f = (rng.standard_normal(count).astype(np.float32) * 0.02)
    return (f.view(np.uint32) >> 16).astype(np.uint16).reshape(shape)


def _save(path, tensors, metadata):
    """tensors: ordered list of (name, dtype, np.ndarray). Uses the safetensors library."""
    try:
        from safetensors import TensorSpec, serialize_file  # safetensors >= 0.7
    except ImportError:
        TensorSpec = None
    if TensorSpec is not None:
        names = {"BF16": "bfloat16", "F32": "float32", "I32": "int32", "I64": "int64", "BOOL": "bool"}
        specs = {n: TensorSpec(dtype=names[d], shape=a.shape, data_ptr=a.ctypes.data, data_len=a.nbytes)
                 for n, d, a in tensors}
        serialize_file(specs, str(path), metadata=metadata)
        return
    try:
        from safetensors import serialize_file  # older API: dicts with raw bytes
        names = {"BF16": "bfloat16", "F32": "float32", "I32": "int32", "I64": "int64", "BOOL": "bool"}
        serialize_file({n: {"dtype": names[d], "shape": list(a.shape), "data": a.tobytes()}
                        for n, d, a in tensors}, str(path), metadata=metadata)
    except ImportError:
        raise SystemExit("the safetensors package is required (pip install safetensors)")


# ------------------------------------------------------------------------------------------- files
def config_json(layers, experts):
    quant = {
        "quant_method": "compressed-tensors", "format": "pack-quantized",
        "quantization_status": "compressed",
        "config_groups": {"group_0": {
            "targets": ["Linear"], "input_activations": None, "output_activations": None,
            "weights": {"num_bits": 4, "type": "int", "symmetric": True, "strategy": "group",
                        "group_size": GROUP, "dynamic": False, "actorder": None, "observer": "minmax"}}},
        "ignore": ["lm_head", "re:.*self_attn.*", "re:.*shared_experts.*", "re:.*mlp\\.(gate|up|gate_up|down)_proj.*"],
        "kv_cache_scheme": None,
    }
    text = {
        "architectures": ["DeepseekV3ForCausalLM"], "model_type": "kimi_k2",
        "vocab_size": VOCAB, "hidden_size": HIDDEN, "intermediate_size": DENSE_INTER,
        "moe_intermediate_size": MOE_INTER, "num_hidden_layers": layers, "num_nextn_predict_layers": 0,
        "num_attention_heads": HEADS, "num_key_value_heads": HEADS, "n_shared_experts": 1,
        "n_routed_experts": experts, "num_experts_per_tok": TOPK, "routed_scaling_factor": 2.827,
        "kv_lora_rank": KV_LORA, "q_lora_rank": Q_LORA, "qk_rope_head_dim": QK_ROPE, "v_head_dim": V_HEAD,
        "qk_nope_head_dim": QK_NOPE, "topk_method": "noaux_tc", "n_group": 1, "topk_group": 1,
        "norm_topk_prob": True, "scoring_func": "sigmoid", "first_k_dense_replace": 1, "moe_layer_freq": 1,
        "hidden_act": "silu", "max_position_embeddings": 262144, "rms_norm_eps": 1e-05,
        "rope_theta": 50000.0,
        "rope_scaling": {"type": "yarn", "factor": 64.0, "original_max_position_embeddings": 4096,
                         "beta_fast": 32.0, "beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 1.0},
        "attention_bias": False, "attention_dropout": 0.0, "tie_word_embeddings": False,
        "bos_token_id": 163584, "eos_token_id": 163585, "pad_token_id": 163839,
        "torch_dtype": "bfloat16", "use_cache": True, "quantization_config": quant,
    }
    return {
        "architectures": ["KimiK25ForConditionalGeneration"],
        "auto_map": {
            "AutoConfig": "configuration_kimi_k25.KimiK25Config",
            "AutoModel": "modeling_kimi_k25.KimiK25ForConditionalGeneration",
            "AutoModelForCausalLM": "modeling_kimi_k25.KimiK25ForConditionalGeneration",
        },
        "model_type": "kimi_k25",
        "bos_token_id": 163584, "eos_token_id": 163585, "pad_token_id": 163839,
        "media_placeholder_token_id": 163605, "ignore_index": -100,
        "tie_word_embeddings": False, "torch_dtype": "bfloat16",
        "use_unified_vision_chunk": True, "video_placeholder": "<|kimi_k25_video_placeholder|>",
        "text_config": text,
        "vision_config": {"model_type": "kimi_k25_vision", "patch_size": 14, "init_pos_emb_height": 64,
                          "init_pos_emb_width": 64, "init_pos_emb_time": 4, "pos_emb_type": "divided_fixed",
                          "vt_num_attention_heads": 2, "vt_num_hidden_layers": VISION_LAYERS,
                          "vt_hidden_size": VISION_HIDDEN, "vt_intermediate_size": 4 * VISION_HIDDEN,
                          "merge_kernel_size": [2, 2], "mm_hidden_size": VISION_HIDDEN,
                          "text_hidden_size": HIDDEN, "projector_hidden_act": "gelu"},
        "transformers_version": "4.57.1",
        "quantization_config": quant,
    }


# Non-weight files shaped like the real repository's (moonshotai/Kimi-K2.5 file list as copied by MindSpeed-MM's
# Kimi-K2.5 recipe: chat_template.jinja, config.json, configuration_deepseek.py, configuration_kimi_k25.py,
# generation_config.json, kimi_k25_processor.py, kimi_k25_vision_processing.py, media_utils.py, modeling_deepseek.py,
# modeling_kimi_k25.py, preprocessor_config.json, tiktoken.model, tokenization_kimi.py, tokenizer_config.json,
# tool_declaration_ts.py). What each stand-in keeps is what the product reads: the auto_map entries, the import
# lines transformers follows (``from .x import``), the tokenizer's vocab_files_names, the template's special
# tokens. Verified against public copies of the real files: config.json's auto_map; tokenization_kimi.py's
# ``VOCAB_FILES_NAMES = {"vocab_file": "tiktoken.model"}``, ``from .tool_declaration_ts import
# encode_tools_to_typescript_style`` and ``class TikTokenTokenizer(PreTrainedTokenizer)``; modeling_kimi_k25.py's
# ``from .configuration_kimi_k25 import KimiK25Config`` and ``from .modeling_deepseek import DeepseekV3ForCausalLM``;
# preprocessor_config.json's auto_map AutoImageProcessor / AutoProcessor; the media_proc_cfg keys SGLang 0.5.23
# reads (srt/multimodal/processors/kimi_k25.py). Inferred from the file list (each file there is imported by
# something): configuration_kimi_k25.py -> .configuration_deepseek, modeling_deepseek.py -> .configuration_deepseek,
# kimi_k25_vision_processing.py -> .media_utils. None of the code runs in the sandbox (every class raises) but the
# tokenizer and the configs it loads first: the serving benchmark (sglang/benchmark/utils.py get_tokenizer) counts
# tokens with it.

_STANDIN = ('"""Sandbox stand-in for Kimi-K2.5\'s %s (remote code).\n\n'
            'Same file name, classes and import lines as the real one (what transformers follows when it copies remote\n'
            'code); no working body. Loading it raises."""\n')


def _stub_class(name, base):
    return ("\n\nclass %s(%s):\n    def __init__(self, *args, **kwargs):  # pragma: no cover\n"
            "        raise NotImplementedError(\"sandbox stand-in: %s\")\n" % (name, base, name))


_CONFIG_STANDIN = ('"""Sandbox stand-in for Kimi-K2.5\'s %s (remote code).\n\n'
                   'Same file name, classes and import lines as the real one; each config holds what config.json says\n'
                   '(the tokenizer loads the model\'s config first, so it must construct)."""\n')


def _config_class(name, model_type):
    return ("\n\nclass %s(PretrainedConfig):\n    model_type = %r\n\n"
            "    def __init__(self, **kwargs):\n        super().__init__(**kwargs)\n" % (name, model_type))


# The one stand-in that works: the serving benchmark loads the tokenizer (sglang/benchmark/utils.py get_tokenizer).
TOKENIZER_STANDIN = r'''"""Sandbox stand-in for Kimi-K2.5's tokenization_kimi.py (remote code).

Same file name, class, vocabulary file and import lines as the real one (and base64); a working tokenizer over the
checkpoint's tiktoken.model (every byte, and the words the simulated model writes) and the special tokens of
tokenizer_config.json. Written for the sandbox, not copied: the serving benchmark counts tokens with it."""

import base64
import os
from logging import getLogger

import tiktoken
from tiktoken.load import load_tiktoken_bpe
from transformers.tokenization_utils import PreTrainedTokenizer

from .tool_declaration_ts import encode_tools_to_typescript_style

logger = getLogger(__name__)
VOCAB_FILES_NAMES = {"vocab_file": "tiktoken.model"}
# words with their leading space, numbers, punctuation runs, whitespace (GPT-2's split, as tiktoken encodings use)
PATTERN = r""" ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""


class TikTokenTokenizer(PreTrainedTokenizer):
    vocab_files_names = VOCAB_FILES_NAMES
    model_input_names = ["input_ids", "attention_mask"]

    def __init__(self, vocab_file, added_tokens_decoder=None, **kwargs):
        # load_tiktoken_bpe's format, read here: tiktoken caches a file by its path (in $TMPDIR/data-gym-cache), so a
        # vocabulary replaced under the same path would be read stale
        with open(vocab_file, "rb") as fh:
            ranks = {base64.b64decode(token): int(rank) for token, rank in (line.split() for line in fh if line.strip())}
        specials = {}
        for index, token in (added_tokens_decoder or {}).items():
            specials[getattr(token, "content", None) or token["content"]] = int(index)
        self.model = tiktoken.Encoding(name=os.path.basename(vocab_file), pat_str=PATTERN,
                                       mergeable_ranks=ranks, special_tokens=specials)
        self.byte_of = {rank: token for token, rank in ranks.items()}
        super().__init__(added_tokens_decoder=added_tokens_decoder, **kwargs)

    @property
    def vocab_size(self):
        return self.model.n_vocab

    def get_vocab(self):
        vocab = {token.decode("latin-1"): rank for rank, token in self.byte_of.items()}
        vocab.update(self.added_tokens_encoder)
        return vocab

    def _tokenize(self, text, **kwargs):
        return [self.byte_of[i].decode("latin-1") for i in self.model.encode_ordinary(text)]

    def _convert_token_to_id(self, token):
        return self.model.encode_single_token(token.encode("latin-1"))

    def _convert_id_to_token(self, index):
        return self.byte_of[index].decode("latin-1")

    def convert_tokens_to_string(self, tokens):
        return b"".join(t.encode("latin-1") for t in tokens).decode("utf-8", errors="replace")
'''


def remote_code_files():
    """Top-level .py files of the checkpoint -> text."""
    files = {}
    files["configuration_deepseek.py"] = (
        _CONFIG_STANDIN % "configuration_deepseek.py"
        + "\nfrom transformers.configuration_utils import PretrainedConfig\n"
        + _config_class("DeepseekV3Config", "deepseek_v3"))
    files["configuration_kimi_k25.py"] = (
        _CONFIG_STANDIN % "configuration_kimi_k25.py"
        + "\nfrom transformers.configuration_utils import PretrainedConfig\n\n"
          "from .configuration_deepseek import DeepseekV3Config\n"
        + _config_class("KimiK25VisionConfig", "kimi_k25_vision") + _config_class("KimiK25Config", "kimi_k25"))
    files["modeling_deepseek.py"] = (
        _STANDIN % "modeling_deepseek.py"
        + "\nimport torch\nfrom transformers.modeling_utils import PreTrainedModel\n\n"
          "from .configuration_deepseek import DeepseekV3Config\n"
        + _stub_class("DeepseekV3ForCausalLM", "PreTrainedModel"))
    files["modeling_kimi_k25.py"] = (
        _STANDIN % "modeling_kimi_k25.py"
        + "\nimport math\n\nimport torch\nfrom transformers.modeling_utils import PreTrainedModel\n\n"
          "from .configuration_kimi_k25 import KimiK25Config\nfrom .modeling_deepseek import DeepseekV3ForCausalLM\n"
        + _stub_class("MoonViT3dPretrainedModel", "PreTrainedModel")
        + _stub_class("KimiK25ForConditionalGeneration", "PreTrainedModel"))
    files["tool_declaration_ts.py"] = (
        _STANDIN % "tool_declaration_ts.py"
        + "\n\ndef encode_tools_to_typescript_style(tools):  # pragma: no cover\n"
          "    \"\"\"The real one renders OpenAI tool schemas as TypeScript declarations for the chat template.\"\"\"\n"
          "    raise NotImplementedError(\"sandbox stand-in: encode_tools_to_typescript_style\")\n")
    files["tokenization_kimi.py"] = TOKENIZER_STANDIN
    files["media_utils.py"] = (
        _STANDIN % "media_utils.py"
        + "\nfrom datetime import datetime, timezone\n\n\n"
          "def ensure_media_type(media):  # pragma: no cover\n"
          "    raise NotImplementedError(\"sandbox stand-in: ensure_media_type\")\n")
    files["kimi_k25_vision_processing.py"] = (
        _STANDIN % "kimi_k25_vision_processing.py"
        + "\nfrom transformers.image_processing_utils import BaseImageProcessor\n\n"
          "from .media_utils import ensure_media_type\n"
        + _stub_class("KimiK25VisionProcessor", "BaseImageProcessor"))
    files["kimi_k25_processor.py"] = (
        _STANDIN % "kimi_k25_processor.py"
        + "\nfrom transformers.processing_utils import ProcessorMixin\n"
        + _stub_class("KimiK25Processor", "ProcessorMixin"))
    return files


# Shaped like Kimi's template: role headers with <|im_*|> tokens, the tool declaration block (K2.5's tokenizer
# passes tools_ts_str, rendered by tool_declaration_ts.py), <think> handling and the tool-call markup the
# kimi_k2 parsers read.
CHAT_TEMPLATE = """\
{%- if tools -%}
  <|im_system|>tool_declare<|im_middle|>{{ tools_ts_str if tools_ts_str is defined else tools | tojson }}<|im_end|>
{%- endif -%}
{%- for message in messages -%}
  {%- if loop.first and message['role'] != 'system' -%}
    <|im_system|>system<|im_middle|>You are Kimi, an AI assistant created by Moonshot AI.<|im_end|>
  {%- endif -%}
  {%- if message['role'] == 'system' -%}<|im_system|>system<|im_middle|>
  {%- elif message['role'] == 'user' -%}<|im_user|>user<|im_middle|>
  {%- elif message['role'] == 'tool' -%}<|im_system|>tool<|im_middle|>## Return of {{ message['tool_call_id'] }}
{% else -%}<|im_assistant|>assistant<|im_middle|>
  {%- endif -%}
  {%- if message['role'] == 'assistant' -%}<think>{{ message.get('reasoning_content', '') }}</think>{%- endif -%}
  {{- message['content'] if message['content'] is string else '' -}}
  {%- if message.get('tool_calls') -%}
    <|tool_calls_section_begin|>
    {%- for tool_call in message['tool_calls'] -%}
      <|tool_call_begin|>{{ tool_call['id'] }}<|tool_call_argument_begin|>{{ tool_call['function']['arguments'] }}<|tool_call_end|>
    {%- endfor -%}
    <|tool_calls_section_end|>
  {%- endif -%}
  <|im_end|>
{%- endfor -%}
{%- if add_generation_prompt -%}<|im_assistant|>assistant<|im_middle|>{%- if thinking is defined and thinking is false -%}<think></think>{%- else -%}<think>{%- endif -%}{%- endif -%}
"""


def _sim_words():
    """The words the simulator's model thinks in (``_THOUGHT_WORDS`` of its http_server.py, read, not imported)."""
    import ast
    src = (Path(__file__).resolve().parent / "sglang_sim" / "sglang" / "srt" / "entrypoints" / "http_server.py")
    for node in ast.walk(ast.parse(src.read_text())):
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "_THOUGHT_WORDS":
            return list(ast.literal_eval(node.value))
    raise LookupError("_THOUGHT_WORDS not found in %s" % src)


def bpe_ranks():
    """A small BPE vocabulary: the 256 bytes, then each word the simulator's model writes (with its leading space)
    built up by merges one byte at a time, as a BPE vocabulary holds its words; so the benchmark's tokenizer counts
    about one token per simulated token, as the real tokenizer counts the real model's."""
    ranks = {bytes([i]): i for i in range(256)}
    words = _sim_words() + ["The", "user", "wrote", "characters", "Hello", "This", "is", "simulated", "SGLang",
                            "answer", "Paris", "Tokyo", "Rome", "Berlin"]
    for word in sorted(set(words)):
        token = (" " + word).encode()
        for end in range(2, len(token) + 1):
            ranks.setdefault(token[:end], len(ranks))
    return ranks


def tokenizer_files():
    special = {"163584": "[BOS]", "163585": "[EOS]", "163586": "<|im_end|>", "163601": "<|im_user|>",
               "163587": "<|im_assistant|>", "163588": "<|im_system|>", "163595": "<|tool_calls_section_begin|>",
               "163596": "<|tool_calls_section_end|>", "163597": "<|tool_call_begin|>",
               "163598": "<|tool_call_argument_begin|>", "163599": "<|tool_call_end|>",
               "163605": "<|media_pad|>", "163606": "<think>", "163607": "</think>", "163839": "[PAD]"}
    tok_cfg = {
        "added_tokens_decoder": {k: {"content": v, "lstrip": False, "normalized": False, "rstrip": False,
                                     "single_word": False, "special": True} for k, v in special.items()},
        "additional_special_tokens": ["<|im_end|>", "<|im_user|>", "<|im_assistant|>", "<|im_system|>"],
        "auto_map": {"AutoTokenizer": ["tokenization_kimi.TikTokenTokenizer", None]},
        "bos_token": "[BOS]", "eos_token": "[EOS]", "pad_token": "[PAD]", "unk_token": "[UNK]",
        "clean_up_tokenization_spaces": False, "model_max_length": 1000000000000000019884624838656,
        "tokenizer_class": "TikTokenTokenizer",
    }
    preprocessor = {
        "auto_map": {"AutoImageProcessor": "kimi_k25_vision_processing.KimiK25VisionProcessor",
                     "AutoProcessor": "kimi_k25_processor.KimiK25Processor"},
        "image_processor_type": "KimiK25VisionProcessor",
        # the keys SGLang 0.5.23 reads from media_proc_cfg (srt/multimodal/processors/kimi_k25.py); values scaled
        "media_proc_cfg": {"patch_size": 14, "merge_kernel_size": 2, "in_patch_limit": 16384,
                           "patch_limit_on_one_side": 512, "image_mean": [0.5, 0.5, 0.5],
                           "image_std": [0.5, 0.5, 0.5]},
    }
    import base64
    # tiktoken's BPE file format (load_tiktoken_bpe): "<base64 token bytes> <rank>" per line.
    tiktoken = "".join("%s %d\n" % (base64.b64encode(token).decode(), rank) for token, rank in bpe_ranks().items())
    gen = {"bos_token_id": 163584, "eos_token_id": 163586, "max_length": 262144, "temperature": 1.0,
           "top_p": 0.95, "transformers_version": "4.57.1"}
    files = {
        "tokenizer_config.json": json.dumps(tok_cfg, indent=2) + "\n",
        "preprocessor_config.json": json.dumps(preprocessor, indent=2) + "\n",
        "tiktoken.model": tiktoken,
        "chat_template.jinja": CHAT_TEMPLATE,
        "generation_config.json": json.dumps(gen, indent=2) + "\n",
    }
    files.update(remote_code_files())
    return files


def _sha256(path, bufsize=1 << 20):
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while True:
            b = fh.read(bufsize)
            if not b:
                break
            h.update(b)
    return h.hexdigest()


def _recipe(num_shards, shard_bytes, name_format):
    h = hashlib.sha256(Path(__file__).read_bytes())
    h.update(json.dumps([num_shards, shard_bytes, name_format]).encode())
    return h.hexdigest()


def _stamp_path(out_dir: Path):
    return out_dir.parent / (".%s.stamp" % out_dir.name)


def _stamp_ok(out_dir: Path, recipe):
    sp = _stamp_path(out_dir)
    try:
        st = json.loads(sp.read_text())
    except (OSError, ValueError):
        return None
    if st.get("recipe") != recipe:
        return None
    for name, size in st.get("files", {}).items():
        p = out_dir / name
        if not p.is_file() or p.stat().st_size != size:
            return None
    return st


def _unchanged(out_dir, recipe):
    """The stamp's summary (``rebuilt`` False) when ``out_dir`` already holds what ``recipe`` writes, else None."""
    st = _stamp_ok(out_dir, recipe)
    if st is not None:
        st["rebuilt"] = False
    return st


def make_checkpoint(out_dir, num_shards=64, shard_bytes=2 * 1024 * 1024, name_format=DEFAULT_NAME_FORMAT,
                    force=False):
    """Write the checkpoint; returns a summary dict (with "rebuilt": False when the stamp matched)."""
    out_dir = Path(out_dir)
    if num_shards < 1:
        raise ValueError("num_shards must be >= 1")
    recipe = _recipe(num_shards, shard_bytes, name_format)
    unchanged = None if force else _unchanged(out_dir, recipe)
    if unchanged:
        return unchanged
    out_dir.mkdir(parents=True, exist_ok=True)
    layers, experts = choose_shape(num_shards, shard_bytes)
    spec, head_len = build_spec(layers, experts)
    shards = partition(spec, head_len, num_shards)
    rng = np.random.default_rng(SEED)
    packed_shapes = {n[: -len(".weight_packed")]: shp for n, _d, shp in spec if n.endswith(".weight_packed")}
    weight_map = {}
    total_size = 0
    files = {}
    # remove shards from an earlier recipe with different names/counts
    for old in out_dir.glob("*.safetensors"):
        old.unlink()
    for i, items in enumerate(shards, start=1):
        fname = name_format.format(index=i, total=num_shards)
        tensors = []
        for name, dtype, shape in items:
            if name.endswith(".weight_shape"):
                # [out_features, in_features] of the unpacked int4 weight
                out_f, packed_in = packed_shapes[name[: -len(".weight_shape")]]
                arr = np.array([out_f, packed_in * 8], dtype=np.int32)
            else:
                arr = np.ascontiguousarray(_data(rng, name, dtype, shape))
            tensors.append((name, dtype, arr))
            weight_map[name] = fname
            total_size += arr.nbytes
        tmp = out_dir / (fname + ".partial")
        _save(tmp, tensors, {"format": "pt"})
        os.chmod(tmp, 0o644)
        os.replace(tmp, out_dir / fname)
        files[fname] = (out_dir / fname).stat().st_size
    index = {"metadata": {"total_size": total_size}, "weight_map": dict(sorted(weight_map.items()))}
    extra = {"model.safetensors.index.json": json.dumps(index, indent=2) + "\n",
             "config.json": json.dumps(config_json(layers, experts), indent=2) + "\n"}
    extra.update(tokenizer_files())
    for name, text in extra.items():
        (out_dir / name).write_text(text)
        files[name] = (out_dir / name).stat().st_size
    sums = "".join("%s  %s\n" % (_sha256(out_dir / n), n) for n in sorted(files))
    (out_dir / "SHA256SUMS").write_text(sums)
    files["SHA256SUMS"] = (out_dir / "SHA256SUMS").stat().st_size
    summary = {"recipe": recipe, "dir": str(out_dir), "num_shards": num_shards, "layers": layers,
               "experts": experts, "tensors": len(weight_map), "total_size": total_size, "files": files}
    _stamp_path(out_dir).write_text(json.dumps(summary, indent=1) + "\n")
    summary["rebuilt"] = True
    return summary


# ------------------------------------------------------------------------------------------- the EAGLE3 draft
DRAFT_VOCAB = 64            # draft_vocab_size (real: 32000); its lm_head predicts only these tokens
DRAFT_INTER = 512           # 18432 (a dense Llama MLP)
# The target layers whose hidden states the draft reads (3 of 61, as SpecForge picks low/middle/high).
AUX_LAYERS = [2, 30, 58]


def draft_config_json():
    """config.json of an EAGLE3 draft for Kimi-K2.5 in the shape lightseekorg/kimi-k2.5-eagle3 ships (SpecForge's
    LlamaForCausalLMEagle3: one Llama decoder layer over the concatenated target hidden states, its own small
    vocabulary mapped back by d2t), miniature like the target: hidden and target_hidden_size are the target's."""
    return {
        "architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama",
        "hidden_size": HIDDEN, "target_hidden_size": HIDDEN, "intermediate_size": DRAFT_INTER,
        "num_hidden_layers": 1, "num_attention_heads": HEADS, "num_key_value_heads": HEADS,
        "head_dim": HIDDEN // HEADS, "hidden_act": "silu", "max_position_embeddings": 262144,
        "rms_norm_eps": 1e-05, "rope_theta": 50000.0, "tie_word_embeddings": False,
        "vocab_size": VOCAB, "draft_vocab_size": DRAFT_VOCAB,
        "eagle_config": {"eagle_aux_hidden_state_layer_ids": AUX_LAYERS, "use_aux_hidden_state": True},
        "bos_token_id": 163584, "eos_token_id": 163585, "pad_token_id": 163839, "torch_dtype": "bfloat16",
    }


def draft_spec():
    """(name, dtype, shape) of the draft's tensors, SpecForge's names: fc, midlayer.*, norm, lm_head, d2t, t2d."""
    head_dim = HIDDEN // HEADS
    spec = [("d2t", "I64", [DRAFT_VOCAB]), ("t2d", "BOOL", [VOCAB]),
            ("fc.weight", "BF16", [HIDDEN, HIDDEN * len(AUX_LAYERS)]),
            ("midlayer.hidden_norm.weight", "BF16", [HIDDEN]), ("midlayer.input_layernorm.weight", "BF16", [HIDDEN])]
    for proj, shape in (("q_proj", [HEADS * head_dim, 2 * HIDDEN]), ("k_proj", [HEADS * head_dim, 2 * HIDDEN]),
                        ("v_proj", [HEADS * head_dim, 2 * HIDDEN]), ("o_proj", [HIDDEN, HEADS * head_dim])):
        spec.append(("midlayer.self_attn.%s.weight" % proj, "BF16", shape))
    spec += [("midlayer.post_attention_layernorm.weight", "BF16", [HIDDEN]),
             ("midlayer.mlp.gate_proj.weight", "BF16", [DRAFT_INTER, HIDDEN]),
             ("midlayer.mlp.up_proj.weight", "BF16", [DRAFT_INTER, HIDDEN]),
             ("midlayer.mlp.down_proj.weight", "BF16", [HIDDEN, DRAFT_INTER]),
             ("norm.weight", "BF16", [HIDDEN]), ("lm_head.weight", "BF16", [DRAFT_VOCAB, HIDDEN])]
    return spec


def make_draft(out_dir, force=False):
    """Write the EAGLE3 draft as such drafts are published: config.json and one model.safetensors, no index (SGLang
    globs the directory's *.safetensors), plus SHA256SUMS for an http source. Same stamp as make_checkpoint."""
    out_dir = Path(out_dir)
    recipe = _recipe(1, 0, "draft")
    unchanged = None if force else _unchanged(out_dir, recipe)
    if unchanged:
        return unchanged
    out_dir.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(SEED + 1)
    tensors = []
    for name, dtype, shape in draft_spec():
        if name == "d2t":  # draft token i is target token i + d2t[i]: the draft's vocabulary, spread out
            arr = np.arange(DRAFT_VOCAB, dtype=np.int64) * (VOCAB // DRAFT_VOCAB - 1)
        elif name == "t2d":
            arr = np.zeros(VOCAB, dtype=np.uint8)
            arr[np.arange(DRAFT_VOCAB) * (VOCAB // DRAFT_VOCAB)] = 1
        else:
            arr = np.ascontiguousarray(_data(rng, name, dtype, shape))
        tensors.append((name, dtype, arr))
    files = {}
    tmp = out_dir / "model.safetensors.partial"
    _save(tmp, tensors, {"format": "pt"})
    os.chmod(tmp, 0o644)
    os.replace(tmp, out_dir / "model.safetensors")
    (out_dir / "config.json").write_text(json.dumps(draft_config_json(), indent=2) + "\n")
    for name in ("model.safetensors", "config.json"):
        files[name] = (out_dir / name).stat().st_size
    (out_dir / "SHA256SUMS").write_text("".join("%s  %s\n" % (_sha256(out_dir / n), n) for n in sorted(files)))
    files["SHA256SUMS"] = (out_dir / "SHA256SUMS").stat().st_size
    summary = {"recipe": recipe, "dir": str(out_dir), "tensors": len(tensors),
               "total_size": sum(a.nbytes for _n, _d, a in tensors), "files": files}
    _stamp_path(out_dir).write_text(json.dumps(summary, indent=1) + "\n")
    summary["rebuilt"] = True
    return summary


def main(argv=None):
    ap = argparse.ArgumentParser(description="Write a small real-format Kimi-K2.5-like checkpoint.")
    ap.add_argument("out")
    ap.add_argument("--shards", type=int, default=64)
    ap.add_argument("--shard-mb", type=float, default=2.0)
    ap.add_argument("--name-format", default=DEFAULT_NAME_FORMAT)
    ap.add_argument("--force", action="store_true")
    args = ap.parse_args(argv)
    s = make_checkpoint(args.out, args.shards, int(args.shard_mb * 1024 * 1024), args.name_format, args.force)
    print("%s: %d shards, %d tensors, total_size %d, layers %d, experts %d%s" % (
        s["dir"], s["num_shards"], s["tensors"], s["total_size"], s["layers"], s["experts"],
        "" if s["rebuilt"] else " (unchanged)"))


if __name__ == "__main__":
    main()
