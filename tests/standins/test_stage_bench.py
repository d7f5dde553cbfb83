"""benchmarks/stage_bench.py: its standard-library safetensors writer (for a bare benchmark host) writes files the
safetensors package and model_stage's own header check both accept, tensor bytes where the header says."""

import importlib.util
import os
from pathlib import Path

import numpy as np
from safetensors.numpy import load_file

from ansible_collections.blackwell.sglang.plugins.module_utils.staging.safetensors_header import verify_shard

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("stage_bench", ROOT / "benchmarks" / "stage_bench.py")
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)


def test_stdlib_writer_output_loads_with_safetensors_and_passes_the_header_check(tmp_path):
    tensors = {"a.w0": os.urandom(1001), "a.w1": b"\x01" * 7, "b": os.urandom(4096)}
    path = str(tmp_path / "model-00001-of-000001.safetensors")
    bench.save_u8_tensors(tensors, path, {"format": "pt"})
    loaded = load_file(path)
    assert sorted(loaded) == sorted(tensors)
    for name, data in tensors.items():
        assert loaded[name].dtype == np.uint8 and loaded[name].tobytes() == data
    info = verify_shard(path)
    assert info["data_len"] == sum(len(d) for d in tensors.values())
    assert sorted(info["tensors"]) == sorted(tensors)
