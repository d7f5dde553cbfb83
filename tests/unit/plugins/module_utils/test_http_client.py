"""http_client's URL normalisation (how JsonClient keeps its base URL and the router modules compare worker URLs)."""

from ansible_collections.blackwell.sglang.plugins.module_utils.http_client import normalise_url


def test_normalise_url():
    assert normalise_url("HTTP://Node-1:30000/") == "http://node-1:30000"
    assert normalise_url(" http://a:1/x/ ") == "http://a:1/x"
