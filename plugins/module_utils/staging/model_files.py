# -*- coding: utf-8 -*-
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The non-weight files a checkpoint needs, derived from its own configs (stdlib only).

A checkpoint served with ``--trust-remote-code`` loads code from its own directory. SGLang 0.5.23 builds the
tokenizer from ``tokenizer_config.json``'s ``auto_map["AutoTokenizer"]`` (srt/utils/hf_transformers/tokenizer.py)
and the processor from ``auto_map["AutoProcessor"]`` of the model config or ``preprocessor_config.json``
(srt/utils/hf_transformers/processor.py), both through transformers' ``get_class_from_dynamic_module``. transformers
5.19.0 (the version sglang 0.5.23 pins) copies each such module and, recursively, every module it imports
relatively (dynamic_module_utils.get_relative_imports: ``^\\s*import\\s+\\.(\\S+)\\s*$`` and
``^\\s*from\\s+\\.(\\S+)\\s+import``), from the same directory. A slow tokenizer opens the files of its class's
``vocab_files_names`` (Kimi: ``{"vocab_file": "tiktoken.model"}``), and a tokenizer without a ``chat_template`` key
reads ``chat_template.jinja`` (or the legacy ``chat_template.json``; transformers utils CHAT_TEMPLATE_FILE).

A checkpoint missing one of them loads every weight and then fails. So the required set comes from the checkpoint:
``auto_map`` of config.json, tokenizer_config.json, preprocessor_config.json, processor_config.json and
video_preprocessor_config.json, the files those modules import, the tokenizer's vocab files and the chat template.
Nothing here names a Kimi file.
"""

from __future__ import absolute_import, division, print_function

import ast
import json
import os
import re

from ansible_collections.blackwell.sglang.plugins.module_utils.staging.model_index import INDEX_NAME

__metaclass__ = type

# transformers 5.19.0 utils/__init__.py: CONFIG_NAME, IMAGE_PROCESSOR_NAME (= FEATURE_EXTRACTOR_NAME),
# PROCESSOR_NAME, VIDEO_PROCESSOR_NAME; tokenization_utils_base.py TOKENIZER_CONFIG_FILE.
CONFIG_FILES = ("config.json", "tokenizer_config.json", "preprocessor_config.json", "processor_config.json",
                "video_preprocessor_config.json")
CHAT_TEMPLATE_FILES = ("chat_template.jinja", "chat_template.json")
# Optional entries of a tokenizer's vocab_files_names: the fast tokenizer's JSON beside a slow tokenizer.
OPTIONAL_VOCAB_KEYS = ("tokenizer_file",)
# Weight files: outside the index's shards they are left out of a staging (select_files), and the hf source's plan
# fetches none of them (model_sources.HfSource.plan).
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf", ".h5", ".msgpack", ".ckpt")
_RELATIVE_IMPORTS = (re.compile(r"^\s*import\s+\.(\S+)\s*$", re.MULTILINE),
                     re.compile(r"^\s*from\s+\.(\S+)\s+import", re.MULTILINE))


def auto_map_refs(config):
    """``auto_map`` of a config dict -> [(auto class, "module.Class")]; list values ([slow, fast]) give each
    non-null entry; references into another repository (``repo--module.Class``) are left out."""
    refs = []
    auto_map = config.get("auto_map") if isinstance(config, dict) else None
    for auto_class, value in sorted((auto_map or {}).items()):
        for ref in (value if isinstance(value, (list, tuple)) else [value]):
            if isinstance(ref, str) and "." in ref and "--" not in ref:
                refs.append((auto_class, ref))
    return refs


def module_file(ref):
    """``"tokenization_kimi.TikTokenTokenizer"`` -> ``"tokenization_kimi.py"``."""
    return ref.rsplit(".", 1)[0].replace(".", "/") + ".py"


def relative_imports(source):
    """Modules ``source`` imports relatively, as transformers finds them -> sorted names (``tool_declaration_ts``)."""
    found = set()
    for pattern in _RELATIVE_IMPORTS:
        found.update(pattern.findall(source or ""))
    return sorted(found)


def vocab_files(source, class_name):
    """The ``vocab_files_names`` of ``class_name`` in ``source`` (a dict literal in the class, or a module-level dict
    it names) -> dict key -> file name; {} when not found or not literal."""
    try:
        tree = ast.parse(source or "")
    except SyntaxError:
        return {}
    module_dicts = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    module_dicts[target.id] = node.value
    for node in tree.body:
        if not (isinstance(node, ast.ClassDef) and node.name == class_name):
            continue
        for stmt in node.body:
            if isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "vocab_files_names"
                                                    for t in stmt.targets):
                value = stmt.value
                if isinstance(value, ast.Name):
                    value = module_dicts.get(value.id)
                try:
                    literal = ast.literal_eval(value) if value is not None else None
                except ValueError:
                    return {}
                return dict((k, v) for k, v in (literal or {}).items() if isinstance(v, str))
    return {}


def required_files(read):
    """(required, problems) for the checkpoint ``read`` gives access to.

    ``read(name)`` returns the text of a top-level file or None when the checkpoint has none. ``required`` maps each
    needed file to why it is needed. A config that is not JSON gives nothing here (model_stage's verification
    reports it); ``problems`` is kept for callers and always empty today."""
    required, problems, configs = {}, [], {}
    for name in CONFIG_FILES:
        text = read(name)
        if text is None:
            continue
        try:
            configs[name] = json.loads(text)
        except ValueError:
            continue
    queue = []
    for name, config in configs.items():
        for auto_class, ref in auto_map_refs(config):
            path = module_file(ref)
            required.setdefault(path, "%s auto_map %s -> %s" % (name, auto_class, ref))
            queue.append(path)
    seen = set()
    while queue:
        path = queue.pop(0)
        if path in seen:
            continue
        seen.add(path)
        source = read(path)
        if source is None:
            continue
        base = os.path.dirname(path)
        for dep in relative_imports(source):
            dep_path = os.path.join(base, dep.replace(".", "/") + ".py")
            required.setdefault(dep_path, "imported by %s (from .%s import ...)" % (path, dep))
            queue.append(dep_path)
    tok = configs.get("tokenizer_config.json")
    if isinstance(tok, dict):
        for auto_class, ref in auto_map_refs(tok):
            if auto_class != "AutoTokenizer":
                continue
            source = read(module_file(ref))
            if source is None:
                continue
            class_name = ref.rsplit(".", 1)[1]
            for key, fname in sorted(vocab_files(source, class_name).items()):
                if key not in OPTIONAL_VOCAB_KEYS:
                    required.setdefault(fname, "%s of %s (%s vocab_files_names)" % (key, ref, module_file(ref)))
        if not tok.get("chat_template"):
            required.setdefault(CHAT_TEMPLATE_FILES[0], "tokenizer_config.json has no chat_template, so the tokenizer "
                                                        "reads it from chat_template.jinja (or chat_template.json)")
    return required, problems


def missing_files(read, exists, where):
    """Problems (list of str): one summary naming every required file the checkpoint lacks and why it is needed.

    ``read(name)``: text or None (only configs and modules are read); ``exists(name)``: whether the checkpoint has
    the file (vocab files and templates are only looked for, never read)."""
    required, problems = required_files(read)
    missing = []
    for name, why in sorted(required.items()):
        if name == CHAT_TEMPLATE_FILES[0]:
            if any(exists(n) for n in CHAT_TEMPLATE_FILES):
                continue
        elif exists(name):
            continue
        missing.append("%s is missing from %s: needed as %s" % (name, where, why))
    if missing:
        problems.append("%d non-weight file(s) the checkpoint's own configs require are missing (SGLang would load "
                        "every weight and then fail): %s. Stage from a source that has them"
                        % (len(missing), "; ".join(missing)))
    return problems


def dir_reader(root, names=None):
    """(read, exists) over a local directory, limited to ``names`` (the files that will be staged) when given."""
    def exists(name):
        return (names is None or name in names) and os.path.isfile(os.path.join(root, name))

    def read(name):
        if not exists(name):
            return None
        try:
            with open(os.path.join(root, name), "rb") as handle:
                return handle.read().decode("utf-8", "replace")
        except (IOError, OSError):
            return None
    return read, exists


def symlinks(root, files):
    """Problems for staged files that are symlinks (an HF cache layout): transformers resolves a remote-code module
    and looks for its relative imports beside the link's target, where the blob has a hash for a name."""
    out = []
    for rel in sorted(files):
        path = os.path.join(root, rel)
        if os.path.islink(path):
            out.append("%s: is a symlink to %s; stage real files (copy or hardlink), not links into a cache"
                       % (path, os.readlink(path)))
    return out


def select_files(names, shards, is_dir=None):
    """Split candidate ``names`` (a source's listing) into (files to stage: a set, skipped: a sorted list).

    Staged: every shard in ``shards``, the index, and each other top-level file that is not a weight file; skipped
    (reported, not staged): directories (``is_dir``), nested names, and weight files the index does not name
    (another format's copy of the weights). Hidden names are neither."""
    files, skipped = set(shards), []
    files.add(INDEX_NAME)
    for entry in sorted(names):
        if entry.startswith(".") or "/." in entry:
            continue
        if entry in shards or entry == INDEX_NAME:
            continue
        if is_dir is not None and is_dir(entry):
            skipped.append(entry + "/")
        elif "/" in entry:
            skipped.append(entry)
        elif entry.lower().endswith(WEIGHT_SUFFIXES):
            skipped.append(entry)
        else:
            files.add(entry)
    return files, skipped
