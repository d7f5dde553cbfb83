"""model_index for a single-file checkpoint (config.json + one model.safetensors, no index): the index derived from
the file's safetensors header, the listing rule (one model.safetensors, or refused), and the preflight line."""

import json
import os

import numpy as np
import pytest
from safetensors.numpy import save_file

from ansible_collections.blackwell.sglang.plugins.module_utils.staging.model_index import (
    INDEX_NAME, SINGLE_FILE, ModelIndexError, index_from_header, load_header_index, load_model_index, model_weights,
    parse_index, single_file_name,
)
from ansible_collections.blackwell.sglang.plugins.module_utils.staging.safetensors_header import (
    ShardError, header_from_reader, read_header,
)

TENSORS = {"fc.weight": np.ones((128, 384), dtype=np.float32), "d2t": np.arange(64, dtype=np.int64),
           "midlayer.mlp.down_proj.weight": np.ones((256, 512), dtype=np.float16)}


@pytest.fixture
def single(tmp_path):
    path = tmp_path / SINGLE_FILE
    save_file(TENSORS, str(path), metadata={"format": "pt"})
    return path


def test_index_from_header_is_what_parse_index_gives_for_the_equivalent_index(single):
    index = index_from_header(read_header(str(single)))
    total = sum(t.nbytes for t in TENSORS.values())
    assert index == parse_index({"metadata": {"total_size": total},
                                 "weight_map": dict((t, SINGLE_FILE) for t in TENSORS)})
    assert index["shards"] == [SINGLE_FILE] and index["total_size"] == total
    assert index["tensors_by_shard"] == {SINGLE_FILE: sorted(TENSORS)}


def test_load_header_index_names_the_file_it_read(single, tmp_path):
    assert load_header_index(str(single))["total_size"] == sum(t.nbytes for t in TENSORS.values())
    (tmp_path / "short").write_bytes(b"\x01\x02")
    with pytest.raises(ModelIndexError, match=r"short: file is 2 bytes, shorter than the 8-byte header length"):
        load_header_index(str(tmp_path / "short"))
    with pytest.raises(ModelIndexError, match="nowhere: cannot read the safetensors header"):
        load_header_index(str(tmp_path / "nowhere"))


def test_index_from_header_refuses_what_gives_no_size():
    with pytest.raises(ModelIndexError, match="u.safetensors: the safetensors header lists no tensors"):
        index_from_header({"tensors": {}}, where="u.safetensors")
    with pytest.raises(ModelIndexError) as err:
        index_from_header({"tensors": {"a": {"dtype": "Q7", "shape": [2]}, "b": [1], "c": {"dtype": "F32",
                                                                                          "shape": [4]}}})
    assert err.value.path == SINGLE_FILE
    assert err.value.reason == "tensor a: unknown dtype 'Q7'; tensor b: entry is not an object"


def test_header_from_reader_reads_the_header_alone_and_as_read_header_does(single):
    reads = []
    with open(str(single), "rb") as handle:
        def read(start, length):
            reads.append((start, length))
            handle.seek(start)
            return handle.read(length)
        info = header_from_reader("url", read)
    assert info["data_len"] is None and info["file_size"] is None  # the size was not given
    local = read_header(str(single))
    assert info["tensors"] == local["tensors"] and info["metadata"] == local["metadata"] == {"format": "pt"}
    assert reads == [(0, 8), (8, local["header_len"])]
    with pytest.raises(ShardError, match=r"^url: file is 3 bytes, shorter than the 8-byte header length"):
        header_from_reader("url", lambda start, length: b"abc")


def test_single_file_name_rules():
    assert single_file_name(["config.json", SINGLE_FILE, "training_state.pt"], "d") == SINGLE_FILE
    assert single_file_name([INDEX_NAME, SINGLE_FILE, "model-00001-of-00002.safetensors"], "d") is None
    assert single_file_name(["config.json"], "d") is None  # no weights: reading the index says what is missing
    assert single_file_name([SINGLE_FILE, "sub/other.safetensors", ".hidden.safetensors"], "d") == SINGLE_FILE
    with pytest.raises(ModelIndexError) as err:
        single_file_name([SINGLE_FILE, "consolidated.safetensors"], "d")
    assert str(err.value).startswith("d: has no %s but 2 safetensors files (consolidated.safetensors, %s): "
                                     % (INDEX_NAME, SINGLE_FILE))
    with pytest.raises(ModelIndexError, match="its one safetensors file is w.safetensors, not model.safetensors"):
        single_file_name(["w.safetensors"], "d")


def test_load_model_index_prefers_the_index_file(single, tmp_path):
    index, where = load_model_index(str(tmp_path))
    assert where == str(single) and index["shards"] == [SINGLE_FILE]
    (tmp_path / INDEX_NAME).write_text(json.dumps({"metadata": {"total_size": 5},
                                                   "weight_map": {"a": "x.safetensors"}}))
    index, where = load_model_index(str(tmp_path))
    assert where == os.path.join(str(tmp_path), INDEX_NAME) and index["total_size"] == 5


def test_model_weights_says_a_single_file_figure_comes_from_its_header():
    source = {"index": "http://m/draft/model.safetensors", "total_size_bytes": 2 * 10 ** 9, "shards": 1}
    chosen = model_weights(None, source)
    assert chosen["source"] == "2.00 GB in 1 shard, the tensors in the safetensors header of " \
                               "http://m/draft/model.safetensors"
    assert chosen["total_size_bytes"] == 2 * 10 ** 9 and chosen["fallback"] is False
