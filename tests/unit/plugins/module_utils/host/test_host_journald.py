"""host_journald: journald's burst scaling and available space (journald-rate-limit.c, journald-server.c),
its default limits, systemd time spans."""

import pytest

from ansible_collections.blackwell.sglang.plugins.module_utils.host import host_journald as jd


@pytest.mark.parametrize("burst,available,expected", [
    # journald-rate-limit.c burst_modulate, and what systemd 252 let through in the sandbox (46 MB available)
    (20, 46 * 1024 * 1024, 45), (10000, 46 * 1024 * 1024, 22500), (10000, 1024 * 1024, 10000), (10000, 0, 10000),
    (10000, 4 * 1024 ** 3, 10000 * 16 // 4), (100000, 3 * 1024 ** 3, 100000 * 15 // 4)])
def test_burst_modulate(burst, available, expected):
    assert jd.burst_modulate(burst, available) == expected


def test_journal_available_follows_cache_space_refresh():
    gib = 1024 ** 3
    # plenty of room: the limit is max_use
    assert jd.journal_available(1 * gib, 500 * gib, 4 * gib, 4 * gib, 16 * 1024 ** 2) == 3 * gib
    # free space down to keep_free: nothing left for the rate limit's scaling
    assert jd.journal_available(1 * gib, 3 * gib, 4 * gib, 4 * gib, 16 * 1024 ** 2) == 0


def test_journal_metrics_defaults_match_what_journald_reported():
    # the sandbox node's 12.6 GB tmpfs: journald reported DISK_KEEP_FREE=631902208 (5 %, page aligned)
    settings = {"Storage": "volatile", "RuntimeMaxUse": "64M"}
    assert jd.journal_metrics(settings, "volatile", 12637995008) == (67108864, 631902208, 16 * 1024 ** 2)
    assert jd.journal_metrics({}, "persistent", 1000204886016)[:2] == (4 * 1024 ** 3, 4 * 1024 ** 3)


def test_timespans():
    assert jd.parse_timespan("30s") == 30 and jd.parse_timespan("1min 30s") == 90
    assert jd.parse_timespan("500ms") == 0.5 and jd.parse_timespan("30") == 30
    with pytest.raises(ValueError):
        jd.parse_timespan("30 parsecs")
