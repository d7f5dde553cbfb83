"""safetensors_header against files written by the reference library (safetensors + numpy in the test venv)."""

import json
import struct

import numpy as np
import pytest
from safetensors.numpy import save_file

from ansible_collections.blackwell.sglang.plugins.module_utils.staging.model_index import ModelIndexError, load_index, parse_index
from ansible_collections.blackwell.sglang.plugins.module_utils.staging.safetensors_header import ShardError, read_header, tensor_nbytes, verify_shard


def real_shard(path, n=3):
    tensors = {"layer.%d.weight" % i: np.arange(16 * (i + 1), dtype=np.float16).reshape(4, 4 * (i + 1))
               for i in range(n)}
    tensors["scale"] = np.array([1.5], dtype=np.float32)
    save_file(tensors, str(path), metadata={"format": "pt"})
    return tensors


def hand_shard(path, header, data_len, pad=b""):
    raw = json.dumps(header).encode() + pad
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + b"\0" * data_len)


def test_reference_file_verifies(tmp_path):
    path = tmp_path / "model-00001-of-000002.safetensors"
    tensors = real_shard(path)
    info = verify_shard(str(path))
    assert info["metadata"] == {"format": "pt"}
    assert sorted(info["tensors"]) == sorted(tensors)
    assert info["tensor_count"] == 4
    assert info["tensor_bytes"] == sum(t.nbytes for t in tensors.values())
    assert info["file_size"] == path.stat().st_size


def test_truncated_by_one_byte_is_metadata_incomplete(tmp_path):
    path = tmp_path / "s.safetensors"
    real_shard(path)
    path.write_bytes(path.read_bytes()[:-1])
    with pytest.raises(ShardError) as err:
        verify_shard(str(path))
    assert err.value.path == str(path)
    assert str(err.value).startswith(str(path) + ": ")
    assert "file truncated by 1 bytes" in err.value.reason
    assert "MetadataIncompleteBuffer" in err.value.reason


def test_header_length_past_end_of_file(tmp_path):
    path = tmp_path / "s.safetensors"
    path.write_bytes(struct.pack("<Q", 1234) + b"{" + b" " * 291)
    with pytest.raises(ShardError, match=r"header length 1234 runs past end of file \(300 bytes\)"):
        verify_shard(str(path))


def test_shorter_than_prefix(tmp_path):
    path = tmp_path / "s.safetensors"
    path.write_bytes(b"\x01\x02")
    with pytest.raises(ShardError, match="file is 2 bytes, shorter than the 8-byte header length"):
        read_header(str(path))


def test_header_not_json(tmp_path):
    path = tmp_path / "s.safetensors"
    path.write_bytes(struct.pack("<Q", 4) + b"<htm")
    with pytest.raises(ShardError, match="header is not valid UTF-8 JSON"):
        verify_shard(str(path))


def test_padding_spaces_are_allowed(tmp_path):
    path = tmp_path / "s.safetensors"
    hand_shard(path, {"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}, 8, pad=b"    ")
    assert verify_shard(str(path))["tensor_count"] == 1


def test_hole_overlap_and_trailing_bytes_all_listed(tmp_path):
    path = tmp_path / "s.safetensors"
    header = {
        "a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
        "b": {"dtype": "F32", "shape": [2], "data_offsets": [12, 20]},   # hole 8-12
        "c": {"dtype": "F32", "shape": [2], "data_offsets": [16, 24]},   # overlaps b
        "d": {"dtype": "BF16", "shape": [3], "data_offsets": [24, 28]},  # wrong size (needs 6)
    }
    hand_shard(path, header, 40)
    with pytest.raises(ShardError) as err:
        verify_shard(str(path))
    reason = err.value.reason
    assert "hole of 4 bytes before tensor b" in reason
    assert "tensor c (bytes 16-24) overlaps tensor b" in reason
    assert "tensor d: data_offsets [24, 28] span 4 bytes, but BF16 [3] needs 6" in reason
    assert "12 bytes after the last tensor are not covered" in reason


def test_unknown_dtype_and_bad_offsets(tmp_path):
    path = tmp_path / "s.safetensors"
    hand_shard(path, {"a": {"dtype": "Q4", "shape": [2], "data_offsets": [0, 1]},
                      "b": {"dtype": "F16", "shape": [1], "data_offsets": [3, 1]}}, 1)
    with pytest.raises(ShardError) as err:
        verify_shard(str(path))
    assert "tensor a: unknown dtype 'Q4'" in err.value.reason
    assert "tensor b: data_offsets [3, 1] is not [begin, end]" in err.value.reason


@pytest.mark.parametrize("dtype, shape, nbytes", [("F4", [4], 2), ("BF16", [2, 3], 12), ("I64", [], 8),
                                                  ("F8_E4M3", [0, 5], 0), ("U8", [7], 7)])
def test_tensor_nbytes(dtype, shape, nbytes):
    assert tensor_nbytes(dtype, shape) == nbytes


def test_index_is_the_truth(tmp_path):
    path = tmp_path / "model.safetensors.index.json"
    path.write_text(json.dumps({"metadata": {"total_size": 123},
                                "weight_map": {"a": "model-1-of-61.safetensors", "b": "model-1-of-61.safetensors",
                                               "c": "model-61-of-61.safetensors"}}))
    index = load_index(str(path))
    assert index["shards"] == ["model-1-of-61.safetensors", "model-61-of-61.safetensors"]
    assert index["total_size"] == 123
    assert index["tensors_by_shard"]["model-1-of-61.safetensors"] == ["a", "b"]


def test_index_problems_listed_together():
    with pytest.raises(ModelIndexError) as err:
        parse_index({"metadata": {"total_size": "many"}, "weight_map": {"a": "../x.safetensors", "b": "/etc/passwd",
                                                                          "c": 3}})
    reason = err.value.reason
    assert "outside the model directory" in reason and "'/etc/passwd'" in reason
    assert "maps to 3" in reason and "total_size 'many'" in reason


@pytest.mark.parametrize("content, match", [(None, "cannot read the index"), ("", "index is empty"),
                                            ("{", "not valid JSON"), ("{}", "weight_map is missing or empty")])
def test_index_unusable(tmp_path, content, match):
    path = tmp_path / "model.safetensors.index.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(ModelIndexError, match=match):
        load_index(str(path))
