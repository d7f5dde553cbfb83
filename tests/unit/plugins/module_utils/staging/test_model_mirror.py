"""model_mirror: what its messages may show, and ``get_range`` (a safetensors header over HTTP) against a real
``http.server`` on 127.0.0.1 (test_model_stage_single.RangeServer), with and without Range support."""

import os
import pathlib
import sys

import pytest

from ansible_collections.blackwell.sglang.plugins.module_utils.staging.model_mirror import FetchError, Mirror, redact_url

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "modules"))
from test_model_stage_single import RangeServer  # noqa: E402


def test_redact_url_drops_credentials():
    assert redact_url("https://user:pw@mirror.example/models/K") == "https://mirror.example/models/K"


BIG = 64 * 1024 * 1024


@pytest.fixture
def big(tmp_path):
    """A 64 MiB file (sparse) whose first bytes are known."""
    path = tmp_path / "model.safetensors"
    with open(str(path), "wb") as handle:
        handle.write(bytes(range(256)) * 4)
        handle.truncate(BIG)
    return path


def test_get_range_asks_for_the_bytes_it_needs(big):
    server = RangeServer(big.parent)
    try:
        mirror = Mirror(server.url, retries=0, timeout=5)
        assert mirror.get_range(big.name, 0, 8) == bytes(range(8))
        assert mirror.get_range(big.name, 8, 300) == (bytes(range(256)) * 2)[8:308]
        assert mirror.get_range(big.name, BIG - 4, 100) == b"\0" * 4  # fewer at the end of the file
        assert mirror.get_range(big.name, BIG + 10, 8) == b""  # 416: nothing there
        with pytest.raises(FetchError) as err:
            mirror.get_range("absent.safetensors", 0, 8)
        assert err.value.status == 404 and "HTTP 404" in err.value.reason
    finally:
        server.stop()
    assert [(g[1], g[2], g[3]) for g in server.gets[:4]] == [
        ("bytes=0-7", 206, 8), ("bytes=8-307", 206, 300), ("bytes=%d-%d" % (BIG - 4, BIG + 95), 206, 4),
        ("bytes=%d-%d" % (BIG + 10, BIG + 17), 416, 0)]


def test_get_range_from_a_server_that_ignores_range_reads_only_what_it_needs(big):
    """http.server itself answers 200 and the whole file: read as far as the bytes asked for, then closed."""
    server = RangeServer(big.parent, ranges=False)
    try:
        mirror = Mirror(server.url, retries=0, timeout=5)
        assert mirror.get_range(big.name, 8, 16) == bytes(range(8, 24))
        gets = server.gets
    finally:
        server.stop()
    assert gets[0][1:3] == ("bytes=8-23", 200)
    assert gets[0][3] < BIG // 4  # the rest was never sent: the client closed the connection


def test_get_range_of_nothing_sends_no_request():
    assert Mirror("http://127.0.0.1:9", retries=0).get_range("x", 8, 0) == b""
