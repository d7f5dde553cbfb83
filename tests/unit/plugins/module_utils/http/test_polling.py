"""polling.wait_until with a fake clock: bounded by its timeout, done at the first truthy value."""

import pytest

from ansible_collections.blackwell.sglang.plugins.module_utils.http.polling import wait_until


def _fake_time():
    now = [0.0]

    def sleep(seconds):
        now[0] += seconds

    return (lambda: now[0]), sleep


def test_wait_until_is_bounded():
    clock, sleep = _fake_time()
    calls = []
    value, waited = wait_until(lambda: calls.append(1), 5, 0.5, clock=clock, sleep=sleep)
    assert value is None and waited == pytest.approx(5.0) and len(calls) == 11


def test_wait_until_returns_the_first_truthy_value():
    clock, sleep = _fake_time()
    calls = []

    def third():
        calls.append(1)
        return len(calls) >= 3 and "ready"

    assert wait_until(third, 5, 0.5, clock=clock, sleep=sleep) == ("ready", pytest.approx(1.0))
