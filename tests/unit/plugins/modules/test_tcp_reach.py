"""tcp_reach: open, refused and unresolved against this host's loopback; unanswered by a non-routable address."""

import socket

from ansible_collections.blackwell.sglang.plugins.modules.tcp_reach import reach


def test_a_listener_is_open_and_a_closed_port_is_refused_but_reached():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        port = server.getsockname()[1]
        assert reach("127.0.0.1", port, 2) == {"state": "open", "reached": True, "address": "127.0.0.1",
                                               "error": None}
    closed = reach("127.0.0.1", port, 2)
    assert closed["state"] == "refused" and closed["reached"] is True and "refused" in closed["error"].lower()


def test_a_name_that_does_not_resolve_and_a_port_that_never_answers(monkeypatch):
    assert reach("no-such-host.invalid", 50000, 1)["state"] == "unresolved"

    def dropped(self, address):  # what a firewall that drops gives: nothing, until the timeout
        raise socket.timeout("timed out")
    monkeypatch.setattr(socket.socket, "connect", dropped)
    assert reach("127.0.0.1", 50000, 0.5) == {"state": "unanswered", "reached": False, "address": "127.0.0.1",
                                              "error": "no answer within 0.5 s"}
