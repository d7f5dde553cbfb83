"""model_stage refuses a checkpoint without the non-weight files its own configs require (Kimi-K2.5's shapes from
tests/sandbox/checkpoint.py: auto_map configs, tokenization_kimi.py -> tool_declaration_ts.py, tiktoken.model,
chat_template.jinja), before any shard moves and again before the rename; current never moves."""

import hashlib
import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file

from ansible_collections.blackwell.sglang.plugins.module_utils.staging import model_index
from ansible_collections.blackwell.sglang.plugins.module_utils.staging import model_staging
from ansible_collections.blackwell.sglang.plugins.module_utils.staging import model_store
from ansible_collections.blackwell.sglang.plugins.modules import model_stage

SANDBOX = Path(__file__).resolve().parents[3] / "sandbox"
sys.path.insert(0, str(SANDBOX))
import checkpoint  # noqa: E402
from fake_hub import FakeHub  # noqa: E402

SHARDS = ["model-%05d-of-%06d.safetensors" % (i, 3) for i in range(1, 4)]


def write_sums(root):
    names = sorted(n for n in os.listdir(str(root)) if n != "SHA256SUMS" and not n.startswith("."))
    (root / "SHA256SUMS").write_text("".join("%s  %s\n" % (hashlib.sha256((root / n).read_bytes()).hexdigest(), n)
                                             for n in names))


@pytest.fixture
def kimi(tmp_path):
    """A 3-shard real-format checkpoint with the sandbox's Kimi-K2.5-shaped non-weight files and SHA256SUMS."""
    src = tmp_path / "src"
    src.mkdir()
    weight_map, total = {}, 0
    for i, shard in enumerate(SHARDS):
        tensors = {"language_model.model.layers.%d.w" % i: np.full((64, 32), i, dtype=np.float16)}
        save_file(tensors, str(src / shard), metadata={"format": "pt"})
        weight_map.update(dict((k, shard) for k in tensors))
        total += sum(t.nbytes for t in tensors.values())
    (src / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": total},
                                                                   "weight_map": weight_map}))
    (src / "config.json").write_text(json.dumps(checkpoint.config_json(2, 8)))
    for name, text in checkpoint.tokenizer_files().items():
        (src / name).write_text(text)
    write_sums(src)
    return src


def args(src, tmp_path, **kw):
    base = dict(name="Kimi-K2.5", revision="r1", source="path", source_path=str(src), store=str(tmp_path / "store"),
                retries=0, retry_delay=0.0, timeout=10, progress_interval=0.0)
    base.update(kw)
    return base


def model_dir(tmp_path):
    return tmp_path / "store" / "Kimi-K2.5"


def test_complete_kimi_checkpoint_stages_every_non_weight_file(kimi, tmp_path, module_runner):
    kind, result = module_runner(model_stage, args(kimi, tmp_path))
    assert kind == "exit", result
    staged = set(os.listdir(str(model_dir(tmp_path) / "r1")))
    assert {"tiktoken.model", "tokenization_kimi.py", "tool_declaration_ts.py", "chat_template.jinja",
            "preprocessor_config.json", "kimi_k25_processor.py", "configuration_kimi_k25.py"} <= staged


def test_path_source_missing_tiktoken_fails_before_copying_and_current_stays(kimi, tmp_path, module_runner):
    assert module_runner(model_stage, args(kimi, tmp_path))[0] == "exit"      # r1 is current
    (kimi / "tiktoken.model").unlink()
    write_sums(kimi)
    kind, result = module_runner(model_stage, args(kimi, tmp_path, revision="r2"))
    assert kind == "fail"
    assert "tiktoken.model is missing from %s: needed as vocab_file of tokenization_kimi.TikTokenTokenizer" % kimi \
        in result["msg"]
    assert os.readlink(str(model_dir(tmp_path) / "current")) == "r1"
    assert not (model_dir(tmp_path) / "r2").exists() and not (model_dir(tmp_path) / "r2.partial").exists()


def test_http_source_missing_the_relative_import_fails_before_downloading(kimi, tmp_path, module_runner):
    (kimi / "tool_declaration_ts.py").unlink()
    write_sums(kimi)
    server = FakeHub(str(kimi)).start()
    try:
        kind, result = module_runner(model_stage, dict(args(kimi, tmp_path), source="http", url=server.url))
    finally:
        server.stop()
    assert kind == "fail"
    assert "tool_declaration_ts.py is missing from %s (SHA256SUMS): needed as imported by tokenization_kimi.py" \
        % server.url in result["msg"]
    assert not model_dir(tmp_path).joinpath("r1.partial").exists()
    assert not model_dir(tmp_path).joinpath("current").exists()


def test_verification_refuses_a_staged_tree_without_them(kimi, tmp_path):
    """The check before the rename (what catches an hf download that lacks them): finish() on a partial tree."""
    partial = tmp_path / "r1.partial"
    partial.mkdir()
    files = sorted(n for n in os.listdir(str(kimi)) if n not in ("tiktoken.model", "chat_template.jinja"))
    journal = {"files": {}}
    for name in files:
        (partial / name).write_bytes((kimi / name).read_bytes())
        journal["files"][name] = {"sha256": hashlib.sha256((kimi / name).read_bytes()).hexdigest()}
    index = model_index.load_index(str(partial / "model.safetensors.index.json"))
    current = tmp_path / "current"
    os.symlink("r0", str(current))
    with pytest.raises(model_store.StageError) as err:
        model_staging.finish(None, str(partial), str(tmp_path / "r1"), str(current), index, files, journal, {}, {},
                             "test")
    text = "; ".join(err.value.problems)
    assert "2 non-weight file(s)" in text and "tiktoken.model is missing" in text and "chat_template.jinja is missing" \
        in text
    assert os.readlink(str(current)) == "r0" and not (tmp_path / "r1").exists()


def test_symlinked_source_files_are_staged_as_real_files(kimi, tmp_path, module_runner):
    """An HF-cache-like source (snapshot entries linking into blobs/) stages real files."""
    blobs = tmp_path / "blobs"
    blobs.mkdir()
    for name in ("tokenization_kimi.py", "tool_declaration_ts.py"):
        target = blobs / hashlib.sha256(name.encode()).hexdigest()
        (kimi / name).rename(target)
        os.symlink(str(target), str(kimi / name))
    kind, result = module_runner(model_stage, args(kimi, tmp_path))
    assert kind == "exit", result
    staged = model_dir(tmp_path) / "r1" / "tool_declaration_ts.py"
    assert staged.is_file() and not staged.is_symlink()


def test_an_incomplete_staged_revision_is_not_made_current(kimi, tmp_path, module_runner):
    assert module_runner(model_stage, args(kimi, tmp_path))[0] == "exit"
    assert module_runner(model_stage, args(kimi, tmp_path, revision="r2"))[0] == "exit"
    assert module_runner(model_stage, args(kimi, tmp_path, revision="r1"))[0] == "exit"   # back on r1
    # r2 loses a file and its manifest entry (as if staged by an older release without the check)
    r2 = model_dir(tmp_path) / "r2"
    (r2 / "tiktoken.model").unlink()
    manifest = json.loads((r2 / ".manifest.json").read_text())
    del manifest["files"]["tiktoken.model"]
    (r2 / ".manifest.json").write_text(json.dumps(manifest))
    kind, result = module_runner(model_stage, args(kimi, tmp_path, revision="r2"))
    assert kind == "fail" and "is staged but incomplete" in result["msg"] and "tiktoken.model is missing" in result["msg"]
    assert os.readlink(str(model_dir(tmp_path) / "current")) == "r1"
