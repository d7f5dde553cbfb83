"""sglang_endpoint: where a deployed SGLang and sglang-router listen (unset options at the parsers' defaults), the name
other hosts reach a node at, and the scheduler processes per node."""

import pytest
from ansible.errors import AnsibleFilterError

from conftest import SGLANG_VERSION as V

from ansible_collections.blackwell.sglang.plugins.filter import sglang_endpoint as f


@pytest.mark.parametrize("options, want", [
    ({"tp-size": 8}, 8),
    ({"tp-size": 4}, 4),
    ({}, 1),  # the parser's defaults: tp 1, pp 1, dp 1, one node
    ({"tp-size": 16, "nnodes": 2}, 8),  # one TP group over two nodes: half the ranks each
    ({"tp-size": 8, "pp-size": 2, "nnodes": 2}, 8),  # one pipeline stage of 8 ranks per node
    ({"tp-size": 4, "pp-size": 2}, 8),  # both stages on one node
    ({"tp-size": 2, "dp-size": 4}, 8),  # 4 replicas of 2 ranks (the DP controller starts each group)
    ({"tp-size": 8, "attn-dp-size": 8}, 8),  # attention DP inside the TP group: no extra process
    ({"tp-size": 8, "dp-size": 8, "enable-dp-attention": True}, 8),  # the deprecated spelling of attn-dp-size 8
])
def test_schedulers_per_node_follow_0_5_23_rank_layout(options, want):
    assert f.sglang_schedulers_per_node(options, V) == want


def test_endpoint_is_what_the_options_say():
    """The served name, port and scheduler count smoke_health, the router and drain use come from the options the
    unit runs with, not from defaults restated elsewhere: a served name with spaces and quotes, tp 4 on port 8000."""
    ep = f.sglang_service_endpoint({"served-model-name": 'Kimi 100% "K2.5"', "tp-size": 4, "port": 8000,
                                    "host": "0.0.0.0"}, V, "sglang-kimi.service", "gpu-1.internal")
    assert ep == {"unit": "sglang-kimi.service", "host": "0.0.0.0", "port": 8000, "scheme": "http", "loopback_only": False,
                  "probe_url": "http://127.0.0.1:8000", "router_url": "http://gpu-1.internal:8000", "gateway_url": None,
                  "served_model_name": 'Kimi 100% "K2.5"', "schedulers": 4, "node_rank": 0, "group": [],
                  "serves_api": True, "rendezvous": None}


def test_behind_the_gateway_the_router_and_clients_use_its_port_and_probes_sglangs_own():
    """With the gateway in front (roles/sglang_gateway on deployment_port), SGLang listens on loopback: the router's
    URL is the gateway's on the node's address, the node's own probes go to SGLang's listener, and the gateway's own
    URL on the node is published for the functional smoke."""
    ep = f.sglang_service_endpoint({"port": 30001}, V, "sglang-kimi.service", "gpu-1.internal", gateway_port="30000")
    assert (ep["host"], ep["port"], ep["loopback_only"]) == ("127.0.0.1", 30001, True)
    assert ep["probe_url"] == "http://127.0.0.1:30001"
    assert ep["gateway_url"] == "http://127.0.0.1:30000" and ep["router_url"] == "http://gpu-1.internal:30000"
    assert f.sglang_service_endpoint({}, V, "u", None, gateway_port=30000)["router_url"] is None
    with pytest.raises(AnsibleFilterError, match="the gateway port must be an integer"):
        f.sglang_service_endpoint({}, V, "u", "gpu-1", gateway_port="http")


def test_endpoint_defaults_are_the_parsers_and_loopback_has_no_router_url():
    ep = f.sglang_service_endpoint({"model-path": "/srv/m"}, V, "u.service", "gpu-0")
    assert (ep["host"], ep["port"]) == ("127.0.0.1", 30000)  # 0.5.23 server_args defaults, from the snapshot
    assert ep["probe_url"] == "http://127.0.0.1:30000" and ep["router_url"] is None
    assert ep["served_model_name"] == "/srv/m"  # 0.5.23 serves the model path when no name is given
    v6 = f.sglang_service_endpoint({"host": "::", "port": 9000, "ssl-certfile": "/etc/c.pem"}, V, "u", "fd00::7")
    assert v6["probe_url"] == "https://[::1]:9000" and v6["router_url"] == "https://[fd00::7]:9000"


def test_node_address_prefers_the_advertised_name_then_a_real_ansible_host():
    assert f.node_address("gpu-1", "gpu-1.internal", "10.0.0.6", "ssh") == "gpu-1.internal"
    assert f.node_address("gpu-1", "", "10.0.0.6", None) == "10.0.0.6"
    assert f.node_address("sglang-fleet-gpu-0", "", "sglang-fleet-gpu-0", "containers.podman.podman") == \
        "sglang-fleet-gpu-0"
    assert f.node_address("gpu-2", None, None, "ssh") == "gpu-2"


def test_router_metrics_endpoint_reads_the_options_then_the_router_parser():
    """Where monitoring scrapes the router: its prometheus-host/-port options, unset ones at sglang-router 0.3.2's
    parser defaults (0.0.0.0:29000); a loopback listener has no URL for another host."""
    ep = f.sglang_router_metrics_endpoint({"policy": "cache_aware"}, "0.3.2", "router-1")
    assert ep == {"host": "0.0.0.0", "port": 29000, "local_url": "http://127.0.0.1:29000",
                  "scrape_url": "http://router-1:29000"}
    lo = f.sglang_router_metrics_endpoint({"prometheus-host": "127.0.0.1", "prometheus_port": 9400}, "0.3.2", "r")
    assert lo["local_url"] == "http://127.0.0.1:9400" and lo["scrape_url"] is None
    v6 = f.sglang_router_metrics_endpoint({"prometheus-host": "::"}, "0.3.2", "fd00::9")
    assert v6["local_url"] == "http://[::1]:29000" and v6["scrape_url"] == "http://[fd00::9]:29000"
    with pytest.raises(AnsibleFilterError, match="--prometheus-port must be an integer"):
        f.sglang_router_metrics_endpoint({"prometheus-port": "x"}, "0.3.2")


def test_endpoints_of_a_release_without_a_snapshot_are_filter_errors():
    with pytest.raises(AnsibleFilterError, match=r"no argparse snapshot for SGLang 0\.0\.1"):
        f.sglang_service_endpoint({"port": 8000}, "0.0.1", "u.service")
    with pytest.raises(AnsibleFilterError, match=r"no argparse snapshot for sglang-router 0\.0\.1"):
        f.sglang_router_metrics_endpoint({}, "0.0.1")
