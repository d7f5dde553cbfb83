"""listeners: /proc/net/tcp{,6} and /proc/<pid>/fd read the way ss -ltnp does, against a fake /proc and this host's."""

import os
import socket

from ansible_collections.blackwell.sglang.plugins.module_utils.host.listeners import (
    clashes, established_peers, is_loopback, listeners, parse_proc_net_tcp)

# Recorded /proc/net/tcp lines (Linux 6.x): 127.0.0.1:30000 LISTEN, 0.0.0.0:22 LISTEN, an ESTABLISHED connection.
TCP = """  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:7530 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 41001 1 0000000000000000 100 0 0 10 0
   1: 00000000:0016 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 41002 1 0000000000000000 100 0 0 10 0
   2: 0100007F:7530 0100007F:D2F0 01 00000000:00000000 00:00000000 00000000     0        0 41003 1 0000000000000000 20 4 0 10 -1
"""
# /proc/net/tcp6: [::]:30000 (held by uid 998, a service user) and [::1]:8000 LISTEN.
TCP6 = """  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000000000000:7530 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000   998        0 42001 1 0000000000000000 100 0 0 10 0
   1: 00000000000000000000000001000000:1F40 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 42002 1 0000000000000000 100 0 0 10 0
"""


def test_parse_listening_sockets_only():
    assert parse_proc_net_tcp(TCP) == [{"address": "127.0.0.1", "port": 30000, "uid": 0, "inode": 41001},
                                       {"address": "0.0.0.0", "port": 22, "uid": 0, "inode": 41002}]
    assert parse_proc_net_tcp(TCP6) == [{"address": "::", "port": 30000, "uid": 998, "inode": 42001},
                                        {"address": "::1", "port": 8000, "uid": 0, "inode": 42002}]


def test_established_peers_of_a_port_from_both_tables(tmp_path):
    """Rank 0's rendezvous port: one entry per established connection, IPv4-mapped IPv6 as IPv4; listeners and other
    ports' connections left out."""
    proc = tmp_path / "proc"
    (proc / "net").mkdir(parents=True)
    (proc / "net" / "tcp").write_text(TCP)
    tcp6 = TCP6 + (
        "   2: 0000000000000000FFFF00000100000A:7530 0000000000000000FFFF00000200000A:A1B2 01 00000000:00000000 "
        "00:00000000 00000000     0        0 42003 1 0000000000000000 20 4 0 10 -1\n"
        "   3: 00000000000000000000000001000000:7530 B80D0120000000000000000007000000:A1B3 01 00000000:00000000 "
        "00:00000000 00000000     0        0 42004 1 0000000000000000 20 4 0 10 -1\n")
    (proc / "net" / "tcp6").write_text(tcp6)
    assert established_peers(30000, str(proc)) == ["127.0.0.1", "10.0.0.2", "2001:db8::7"]
    assert established_peers(22, str(proc)) == []


def test_listeners_name_the_process_holding_each_socket(tmp_path, monkeypatch):
    """A socket whose holder cannot be read (another user's process, no CAP_SYS_PTRACE) keeps its owner's uid."""
    import ansible_collections.blackwell.sglang.plugins.module_utils.host.listeners as mod
    monkeypatch.setattr(mod, "user_name", lambda uid: {0: "root", 998: "sglang"}.get(uid))
    proc = tmp_path / "proc"
    (proc / "net").mkdir(parents=True)
    (proc / "net" / "tcp").write_text(TCP)
    (proc / "net" / "tcp6").write_text(TCP6)
    (proc / "4242" / "fd").mkdir(parents=True)
    os.symlink("socket:[41001]", str(proc / "4242" / "fd" / "5"))
    os.symlink("/dev/null", str(proc / "4242" / "fd" / "0"))
    (proc / "4242" / "cmdline").write_bytes(b"python3\x00-m\x00http.server\x0030000\x00")
    found = listeners([30000], str(proc))
    assert found == [{"address": "127.0.0.1", "port": 30000, "pid": 4242, "process": "python3 -m http.server 30000",
                      "uid": 0, "user": "root"},
                     {"address": "::", "port": 30000, "pid": None, "process": None, "uid": 998, "user": "sglang"}]


def test_a_real_listener_on_this_host_is_found_with_its_pid():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    try:
        port = server.getsockname()[1]
        found = listeners([port])
        assert [(s["address"], s["port"], s["pid"], s["uid"]) for s in found] == [
            ("127.0.0.1", port, os.getpid(), os.getuid())]
    finally:
        server.close()


def test_which_addresses_clash():
    assert clashes("0.0.0.0", "127.0.0.1") and clashes("127.0.0.1", "0.0.0.0") and clashes("::", "10.0.0.5")
    assert clashes("127.0.0.1", "127.0.0.1")
    assert not clashes("127.0.0.1", "10.0.0.5")


def test_which_hosts_are_loopback():
    """The gateway refuses a backend beyond loopback and the endpoint publishes no router URL for one: both ask this.
    A prefix test called 127.example.com and localhost.evil.net loopback; a wildcard reaches every address."""
    for host in ("127.0.0.1", "127.1.2.3", "::1", "[::1]", "::ffff:127.0.0.1", "localhost", "LOCALHOST",
                 "ip6-localhost"):
        assert is_loopback(host), host
    for host in ("0.0.0.0", "::", "", None, "10.0.0.5", "127.example.com", "localhost.evil.net", "gpu-1", "::2",
                 "128.0.0.1"):
        assert not is_loopback(host), host
