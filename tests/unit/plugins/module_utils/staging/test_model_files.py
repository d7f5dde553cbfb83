"""model_files: the non-weight files a checkpoint's own configs require (the sandbox checkpoint's stand-ins are
shaped like Kimi-K2.5's: auto_map configs, tokenization_kimi.py -> tool_declaration_ts.py, tiktoken.model)."""

import json
import os
from pathlib import Path
import sys

import pytest

from ansible_collections.blackwell.sglang.plugins.module_utils.staging import model_files as mf

sys.path.insert(0, str(Path(__file__).resolve().parents[4] / "sandbox"))
import checkpoint  # noqa: E402  (tests/sandbox/checkpoint.py)


def kimi_files():
    files = checkpoint.tokenizer_files()
    files["config.json"] = json.dumps(checkpoint.config_json(2, 8))
    return files


def readers(files):
    return (lambda n: files.get(n)), (lambda n: n in files)


def test_kimi_required_set_comes_from_its_configs():
    required, problems = mf.required_files(readers(kimi_files())[0])
    assert problems == []
    assert sorted(required) == [
        "chat_template.jinja", "configuration_deepseek.py", "configuration_kimi_k25.py", "kimi_k25_processor.py",
        "kimi_k25_vision_processing.py", "media_utils.py", "modeling_deepseek.py", "modeling_kimi_k25.py",
        "tiktoken.model", "tokenization_kimi.py", "tool_declaration_ts.py"]
    assert required["tool_declaration_ts.py"] == "imported by tokenization_kimi.py (from .tool_declaration_ts import ...)"
    assert required["tiktoken.model"] == ("vocab_file of tokenization_kimi.TikTokenTokenizer (tokenization_kimi.py "
                                          "vocab_files_names)")
    assert required["kimi_k25_processor.py"].startswith("preprocessor_config.json auto_map AutoProcessor")


def test_complete_checkpoint_has_no_problem():
    assert mf.missing_files(*readers(kimi_files()), where="/src") == []


@pytest.mark.parametrize("gone,named", [
    ("tiktoken.model", "tiktoken.model is missing from /src: needed as vocab_file of tokenization_kimi.TikTokenTokenizer"),
    ("tool_declaration_ts.py", "tool_declaration_ts.py is missing from /src: needed as imported by tokenization_kimi.py"),
    ("chat_template.jinja", "chat_template.jinja is missing from /src: needed as tokenizer_config.json has no chat_template"),
    ("kimi_k25_processor.py", "kimi_k25_processor.py is missing from /src: needed as preprocessor_config.json auto_map "
                              "AutoProcessor -> kimi_k25_processor.KimiK25Processor"),
    ("media_utils.py", "media_utils.py is missing from /src: needed as imported by kimi_k25_vision_processing.py"),
])
def test_each_missing_file_is_named_with_why(gone, named):
    files = kimi_files()
    del files[gone]
    problems = mf.missing_files(*readers(files), where="/src")
    assert len(problems) == 1 and named in problems[0], problems
    assert problems[0].startswith("1 non-weight file(s) the checkpoint's own configs require are missing")


def test_every_missing_file_at_once():
    files = kimi_files()
    for name in ("tiktoken.model", "tool_declaration_ts.py", "chat_template.jinja"):
        del files[name]
    problems = mf.missing_files(*readers(files), where="/src")
    assert problems[0].startswith("3 non-weight file(s)")


def test_a_missing_tokenizer_module_hides_what_it_would_import():
    # without tokenization_kimi.py its imports and vocab files cannot be derived: the module itself is named
    files = kimi_files()
    del files["tokenization_kimi.py"]
    problems = mf.missing_files(*readers(files), where="/src")
    assert "tokenization_kimi.py is missing" in problems[0] and "tool_declaration_ts.py" not in problems[0]


def test_chat_template_in_tokenizer_config_or_json_file_is_enough():
    files = kimi_files()
    del files["chat_template.jinja"]
    files["chat_template.json"] = json.dumps({"chat_template": "{{ messages }}"})
    assert mf.missing_files(*readers(files), where="/src") == []
    files = kimi_files()
    del files["chat_template.jinja"]
    tok = json.loads(files["tokenizer_config.json"])
    tok["chat_template"] = "{{ messages }}"
    files["tokenizer_config.json"] = json.dumps(tok)
    assert mf.missing_files(*readers(files), where="/src") == []


def test_a_plain_checkpoint_needs_nothing_beyond_its_configs():
    files = {"config.json": json.dumps({"architectures": ["LlamaForCausalLM"]})}
    assert mf.required_files(readers(files)[0]) == ({}, [])


def test_auto_map_forms():
    cfg = {"auto_map": {"AutoTokenizer": ["tokenization_x.XTokenizer", None],
                        "AutoConfig": "other/repo--configuration_x.XConfig",
                        "AutoModel": "pkg.modeling_x.XModel"}}
    assert mf.auto_map_refs(cfg) == [("AutoModel", "pkg.modeling_x.XModel"),
                                     ("AutoTokenizer", "tokenization_x.XTokenizer")]
    assert mf.module_file("pkg.modeling_x.XModel") == "pkg/modeling_x.py"


def test_relative_imports_use_transformers_patterns():
    source = ("import os\nfrom .a import x\n    from .b.c import y\nimport .d\nfrom . import e\n"
              "try:\n    from .f import g\nexcept ImportError:\n    from f import g\n")
    assert mf.relative_imports(source) == ["a", "b.c", "d", "f"]


def test_vocab_files_from_class_literal_or_module_dict():
    assert mf.vocab_files("class T:\n    vocab_files_names = {'vocab_file': 'v.model', 'tokenizer_file': 't.json'}\n",
                          "T") == {"vocab_file": "v.model", "tokenizer_file": "t.json"}
    assert mf.vocab_files(checkpoint.remote_code_files()["tokenization_kimi.py"], "TikTokenTokenizer") == {
        "vocab_file": "tiktoken.model"}
    assert mf.vocab_files("def broken(:\n", "T") == {}


def test_symlinks_are_refused(tmp_path):
    (tmp_path / "blob").write_text("x")
    os.symlink(str(tmp_path / "blob"), str(tmp_path / "tool_declaration_ts.py"))
    problems = mf.symlinks(str(tmp_path), ["tool_declaration_ts.py", "blob"])
    assert len(problems) == 1 and "tool_declaration_ts.py: is a symlink to" in problems[0]
