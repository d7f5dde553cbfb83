"""sglang_observe: what counts as a scheduler process."""

from ansible_collections.blackwell.sglang.plugins.module_utils.health.sglang_observe import is_scheduler_title


def test_scheduler_titles():
    assert is_scheduler_title("sglang::scheduler_TP3\0")
    assert is_scheduler_title("sglang::scheduler\0")  # 0.5.23 at tp 1
    assert is_scheduler_title("sglang::scheduler_DP0_TP3" + " " * 30)
    assert not is_scheduler_title("sglang::detokenizer\0")
    assert not is_scheduler_title("python3\0-m\0sglang::scheduler_TP0\0")
