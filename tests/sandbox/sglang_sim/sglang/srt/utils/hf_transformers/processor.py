"""``get_processor``: what loading Kimi-K2.5's processor (and with it the tokenizer) checks, from disk.

SGLang 0.5.23 loads it in the parent (``managers/tokenizer_manager.py`` TokenizerManager.init_tokenizer_and_processor
-> ``get_processor_wrapper``; Kimi-K2.5 is multimodal) and in every scheduler (``managers/scheduler.py``
Scheduler.init_tokenizer) before any weight is read, through transformers' AutoProcessor with
``trust_remote_code``. The checks and their texts follow transformers 5.19.0:

* a checkpoint whose configs name remote code (``auto_map``) needs ``trust_remote_code`` (dynamic_module_utils.py
  resolve_trust_remote_code: ``The repository ... contains custom code which must be executed ...``);
* every module ``auto_map`` names for the classes AutoConfig / AutoProcessor / AutoTokenizer / the image, video
  and feature processors load (SGLang brings its own model code, so ``AutoModel*`` entries are never imported),
  and every file those modules import relatively (``from .tool_declaration_ts
  import ...``), must be in the directory (utils/hub.py cached_files: ``... does not appear to have a file named
  X. Checkout ...``);
* the tokenizer's vocabulary files (``VOCAB_FILES_NAMES`` of the remote tokenizer module, ``tiktoken.model`` for
  Kimi) are looked up optionally; a missing one reaches the tokenizer as None and tiktoken's loader fails on it.

The fault ``SGLANG_SIM_FAULT=tokenizer_load_failure[:FILE]`` makes FILE (default ``tiktoken.model``) count as
missing.
"""
import ast
import json
import os

from sglang.srt import sim_config

_CONFIGS = ("config.json", "tokenizer_config.json", "preprocessor_config.json", "processor_config.json")


def _missing_by_fault():
    kind, arg, _ = sim_config.fault()
    return (arg or "tiktoken.model") if kind == "tokenizer_load_failure" else None


def _exists(path, hidden):
    return os.path.isfile(path) and os.path.basename(path) != hidden


def _auto_map_modules(model_path):
    modules = []
    for name in _CONFIGS:
        path = os.path.join(model_path, name)
        if not os.path.isfile(path):
            continue
        with open(path, encoding="utf-8") as fh:
            auto_map = (json.load(fh) or {}).get("auto_map") or {}
        for key, ref in auto_map.items():
            if key.startswith("AutoModel"):
                continue
            for item in ref if isinstance(ref, list) else [ref]:
                if isinstance(item, str) and "." in item:
                    modules.append(item.rsplit(".", 1)[0].split("--")[-1] + ".py")
    return list(dict.fromkeys(modules))


def _relative_imports(path):
    with open(path, encoding="utf-8") as fh:
        tree = ast.parse(fh.read())
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level:
            if node.module:
                out.append(node.module.split(".")[0] + ".py")
            else:
                out.extend(alias.name + ".py" for alias in node.names)
    return out


def _vocab_files(path):
    with open(path, encoding="utf-8") as fh:
        tree = ast.parse(fh.read())
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "VOCAB_FILES_NAMES" for t in node.targets):
            try:
                return [v for v in ast.literal_eval(node.value).values() if isinstance(v, str)]
            except ValueError:
                return []
    return []


def _not_found(model_path, filename):
    return OSError(f"{model_path} does not appear to have a file named {filename}. Checkout "
                   f"'https://huggingface.co/{model_path}/tree/main' for available files.")


def get_processor(tokenizer_name, *args, trust_remote_code=False, **kwargs):
    hidden = _missing_by_fault()
    modules = _auto_map_modules(tokenizer_name)
    if modules and not trust_remote_code:
        raise ValueError(f"The repository {tokenizer_name} contains custom code which must be executed "
                         f"to correctly load the model. You can inspect the repository "
                         f"content at {os.path.abspath(tokenizer_name)} .\n"
                         "Please pass the argument `trust_remote_code=True` to allow custom code to be run.")
    seen = set()
    todo = list(modules)
    while todo:
        name = todo.pop(0)
        if name in seen:
            continue
        seen.add(name)
        path = os.path.join(tokenizer_name, name)
        if not _exists(path, hidden):
            raise _not_found(tokenizer_name, name)
        todo.extend(_relative_imports(path))
    for name in sorted(seen):
        for vocab in _vocab_files(os.path.join(tokenizer_name, name)):
            if not _exists(os.path.join(tokenizer_name, vocab), hidden):
                # transformers passes a missing optional vocab file on as None; tiktoken opens it
                raise TypeError("expected str, bytes or os.PathLike object, not NoneType")
    if hidden and hidden not in seen:
        # the fault names a file nothing above looked at: fail the way a missing vocabulary file does
        raise TypeError("expected str, bytes or os.PathLike object, not NoneType")
    return {"model_path": tokenizer_name, "modules": sorted(seen)}
