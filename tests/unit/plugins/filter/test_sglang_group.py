"""sglang_group_agreement and interface_addresses: a multi-node group is refused before anything changes (issue 41)."""

import pytest

from ansible_collections.blackwell.sglang.plugins.filter.sglang_group import interface_addresses, sglang_group_agreement


def node(name, rank, **over):
    facts = {"name": name, "node_rank": rank, "gpu_count": 8, "compute_capability": "12.0",
             "release": {"sglang": "0.5.23", "method": "wheel", "cuda": "13.0"}, "model_revision": "abc123",
             "options": {"tp-size": 16, "nnodes": 2}, "ifname": "eth0", "addresses": ["10.0.0.%d" % (rank + 1)]}
    facts.update(over)
    return facts


def test_a_group_that_agrees_has_no_problem_and_one_node_is_no_group():
    assert sglang_group_agreement([node("gpu-0", 0), node("gpu-1", 1)]) == []
    assert sglang_group_agreement([node("gpu-0", 0, gpu_count=4)]) == []


def test_every_disagreement_at_once_with_the_nodes_the_values_and_the_fix():
    problems = sglang_group_agreement([
        node("gpu-0", 0), node("gpu-1", 1, gpu_count=4, compute_capability="10.0", model_revision="def456",
                               release={"sglang": "0.5.22", "method": "wheel", "cuda": "13.0"},
                               options={"tp-size": 16, "nnodes": 2, "mem-fraction-static": 0.8}),
        node("gpu-2", 2, addresses=None), node("gpu-3", 3, addresses=[],
                                                rendezvous={"state": "unanswered", "reached": False,
                                                            "error": "no answer within 3 s"})])
    text = "\n".join(problems)
    assert len(problems) == 8, text
    assert ("gpu-3 (node rank 3) does not reach rank 0's --dist-init-addr (unanswered: no answer within 3 s): its "
            "ranks could never join the group") in text
    assert ("the nodes of the group disagree on the GPU count: 4 on gpu-1 (node rank 1); 8 on gpu-0 (node rank 0), "
            "gpu-2 (node rank 2), gpu-3 (node rank 3): every node of a group needs") in text
    assert "GPU compute capability: 10.0 on gpu-1 (node rank 1); 12.0 on gpu-0" in text
    assert "SGLang release: cuda=13.0, method=wheel, sglang=0.5.22 on gpu-1" in text
    assert "model revision: abc123 on gpu-0" in text and "def456 on gpu-1" in text
    assert "SGLang options (--node-rank aside)" in text and "mem-fraction-static=0.8" in text
    assert "gpu-2 (node rank 2) has no address on eth0, the NCCL/Gloo interface (sglang_service_socket_ifname): it " \
           "has no such interface" in text
    assert "gpu-3 (node rank 3) has no address on eth0" in text and "the interface has no IP address" in text


def test_a_node_preflight_did_not_reach_is_named_from_the_group():
    problems = sglang_group_agreement([node("gpu-0", 0), {"unchecked": True}], ["gpu-0", "gpu-1"])
    assert problems == ["gpu-1 (node rank 1) was not checked (unreachable, or left out of this run by --limit): the "
                        "nodes of a group deploy and start together"]


def test_interface_addresses_from_ansibles_network_facts():
    fact = {"device": "eth0", "ipv4": {"address": "10.0.0.1", "netmask": "255.255.255.0"},
            "ipv4_secondaries": [{"address": "10.0.1.1"}], "ipv6": [{"address": "fe80::1", "scope": "link"}]}
    assert interface_addresses(fact) == ["10.0.0.1", "10.0.1.1", "fe80::1"]
    assert interface_addresses({"device": "eth1", "active": True}) == []
    assert interface_addresses(None) is None
    with pytest.raises(Exception, match="expects an interface fact"):
        interface_addresses("eth0")


def test_rollout_batches_switch_a_group_as_one_batch_and_refuse_a_split_group():
    from ansible_collections.blackwell.sglang.plugins.filter.sglang_group import rollout_batches

    def ep(group=()):
        return {"sglang_service_endpoint": {"group": list(group)}}
    pair = ["gpu-1", "gpu-2"]
    hostvars = {"gpu-0": ep(), "gpu-1": ep(pair), "gpu-2": ep(pair), "gpu-3": ep()}
    assert rollout_batches(["gpu-0", "gpu-1", "gpu-2", "gpu-3"], hostvars) == [1, 2, 1]
    assert rollout_batches(["gpu-2", "gpu-1"], hostvars) == [2]
    assert rollout_batches([], hostvars) == [1]
    with pytest.raises(Exception, match=r"the multi-node group gpu-1, gpu-2 must be listed together, all of it, .*"
                                        r"\(found gpu-1, gpu-0 from gpu-1 on\)"):
        rollout_batches(["gpu-1", "gpu-0", "gpu-2"], hostvars)


def test_group_not_ready_names_each_node_with_its_verdict():
    from ansible_collections.blackwell.sglang.plugins.filter.sglang_group import group_not_ready

    hostvars = {"gpu-1": {"smoke_health_report": {"verdict": "ready", "phase": "ready"}},
                "gpu-2": {"smoke_health_report": {"verdict": "crashed", "phase": "serving"}}, "gpu-3": {}}
    assert group_not_ready(["gpu-1", "gpu-2", "gpu-3"], hostvars) == [
        "gpu-2 (node rank 1): crashed in phase serving", "gpu-3 (node rank 2): no verdict"]
    assert group_not_ready(["gpu-1"], hostvars) == []
