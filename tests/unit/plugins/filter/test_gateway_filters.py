"""The gateway's inputs: which API keys are usable (every problem at once, never a key in a message), each key's
exact match, and the probe sources read from the hosts' gathered addresses."""

import re

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.blackwell.sglang.plugins.filter.sglang_gateway import (
    sglang_gateway_backend, sglang_gateway_keys, sglang_gateway_probe_sources)
from ansible_collections.blackwell.sglang.plugins.plugin_utils.api_keys import bearer_pattern, key_problems

GOOD = "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8S9t0-_.~+/=="


def test_usable_keys_have_no_problems():
    assert key_problems([{"name": "team-a", "key": GOOD}, {"name": "b.2", "key": "z" * 32}]) == []


@pytest.mark.parametrize("keys, expected", [
    (None, "deployment_api_keys is empty"),
    ([], "deployment_api_keys is empty"),
    (["k" * 40], "deployment_api_keys[0] must be a dict with name and key, got a str"),
    ([{"name": "a", "key": "k" * 31}], "deployment_api_keys[0] (a): the key has 31 characters, at least 32"),
    ([{"name": "a", "key": "k" * 31 + '"; }'}], "the key has characters outside A-Z a-z 0-9"),
    ([{"name": "a", "key": "k" * 20 + "==" + "k" * 20}], "the key has '=' other than at its end"),
    ([{"name": "has space", "key": "k" * 40}], "deployment_api_keys[0]: name must be 1-64 characters"),
    ([{"name": "a"}], "deployment_api_keys[0] (a): key is missing or not a string"),
    ([{"name": "a", "key": "k" * 40}, {"name": "a", "key": "j" * 40}], "deployment_api_keys[1] (a): the name is used twice"),
    ([{"name": "a", "key": "k" * 40}, {"name": "b", "key": "k" * 40}], "deployment_api_keys[1] (b): the same key"),
])
def test_each_unusable_key_is_named_without_its_key(keys, expected):
    problems = key_problems(keys)
    assert any(expected in p for p in problems), problems
    for entry in keys or []:
        if isinstance(entry, dict) and entry.get("key"):
            assert not any(entry["key"] in p for p in problems)


def test_the_filter_refuses_with_every_problem_and_no_key():
    with pytest.raises(AnsibleFilterError) as err:
        sglang_gateway_keys([{"name": "a", "key": "short"}, {"name": "a", "key": "x" * 40}])
    assert "at least 32" in str(err.value) and "used twice" in str(err.value)
    assert "short" not in str(err.value) and "x" * 40 not in str(err.value)


def test_a_keys_pattern_matches_its_header_exactly_and_case_sensitively():
    pattern = re.compile(bearer_pattern(GOOD))
    assert pattern.search("Bearer " + GOOD) and pattern.search("bearer " + GOOD)
    for header in ("Bearer " + GOOD.swapcase(), "Bearer " + GOOD + "x", "Bearer x" + GOOD, "Basic " + GOOD, GOOD,
                   "Bearer " + GOOD[:-1]):
        assert not pattern.search(header), header
    # every character but a letter or digit is escaped, so none is a regex or nginx metacharacter
    assert [e["name"] for e in sglang_gateway_keys([{"name": "a", "key": GOOD}])] == ["a"]
    assert "\\." in bearer_pattern(GOOD) and "\\+" in bearer_pattern(GOOD)


def test_probe_sources_are_loopback_and_each_hosts_gathered_addresses():
    hostvars = {"router-1": {"ansible_facts": {"all_ipv4_addresses": ["10.0.0.5", "10.0.0.5"],
                                               "all_ipv6_addresses": ["fd00::5"]}},
                "mon-1": {"ansible_facts": {"all_ipv4_addresses": ["10.0.1.9"]}}}
    assert sglang_gateway_probe_sources(["router-1", "mon-1"], hostvars, ["192.0.2.0/24", "198.51.100.7"]) == [
        "10.0.0.5/32", "10.0.1.9/32", "127.0.0.1/32", "192.0.2.0/24", "198.51.100.7/32", "::1/128", "fd00::5/128"]
    with pytest.raises(AnsibleFilterError, match="mon-2: no gathered addresses"):
        sglang_gateway_probe_sources(["mon-2"], hostvars)
    # not gathered in this run (--limit), but its ansible_host is an address
    assert "10.0.2.3/32" in sglang_gateway_probe_sources(["mon-3"], {"mon-3": {"ansible_host": "10.0.2.3"}})
    with pytest.raises(AnsibleFilterError, match="'router' is not an IP address"):
        sglang_gateway_probe_sources([], hostvars, ["router"])


@pytest.mark.parametrize("url, netloc", [("http://127.0.0.1:30001", "127.0.0.1:30001"),
                                         ("http://[::1]:30001", "[::1]:30001"),
                                         ("http://localhost:30001", "localhost:30001")])
def test_the_backend_is_what_nginx_proxies_to(url, netloc):
    assert sglang_gateway_backend(url) == netloc


@pytest.mark.parametrize("url, expected", [
    ("http://10.0.0.5:30001", "not on loopback: clients could reach it without a key. router must listen on 127.0.0.1"),
    ("http://0.0.0.0:30001", "not on loopback"),
    ("http://127.example.com:30001", "not on loopback"),
    ("http://127.0.0.1", "names no host and port"),
    ("http://127.0.0.1:port", "is not a URL"),
])
def test_a_backend_beyond_loopback_or_without_a_port_is_refused(url, expected):
    with pytest.raises(AnsibleFilterError, match=re.escape(expected)):
        sglang_gateway_backend(url, "router")
