"""sha256_manifest: SHA256SUMS and JSON manifests."""

import pytest

from ansible_collections.blackwell.sglang.plugins.module_utils.staging._sha256_manifest import parse_manifest, parse_sha256sums

A, B = "a" * 64, "B" * 64


def test_sha256sums_text_and_binary_markers():
    text = "%s  model-00001-of-000064.safetensors\n%s *./config.json\n\n# comment\n" % (A, B)
    assert parse_sha256sums(text) == {"model-00001-of-000064.safetensors": A, "config.json": B.lower()}


def test_sha256sums_bad_lines_are_named():
    with pytest.raises(ValueError, match=r"SHA256SUMS: line\(s\) 2, 3 are not"):
        parse_sha256sums("%s  ok\nnot a line\n%s\n" % (A, A[:10]))


def test_json_manifest_carries_sizes():
    sums, sizes = parse_manifest(b'{"files": {"x.safetensors": {"sha256": "%s", "size": 12}, "c.json": "%s"}}' % (
        A.encode(), B.encode()))
    assert sums == {"x.safetensors": A, "c.json": B.lower()} and sizes == {"x.safetensors": 12}


def test_json_manifest_without_sha_is_refused():
    with pytest.raises(ValueError, match="no valid sha256 for x"):
        parse_manifest(b'{"files": {"x": {"size": 1}}}', "m.json")
