"""model_mirror: what its messages may show."""

from ansible_collections.blackwell.sglang.plugins.module_utils.model_mirror import redact_url


def test_redact_url_drops_credentials():
    assert redact_url("https://user:pw@mirror.example/models/K") == "https://mirror.example/models/K"
