# -*- coding: utf-8 -*-
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which process listens on which TCP port, from /proc (stdlib only; what ``ss -ltnp`` shows).

``/proc/net/tcp`` and ``/proc/net/tcp6`` list every socket of the network namespace: ``local_address`` is
``HEXADDR:HEXPORT`` (the address in host byte order, 4-byte words for IPv6), ``st`` ``0A`` is LISTEN, ``uid`` is the
socket owner's user id and ``inode`` names the socket. A process holds it when one of its ``/proc/<pid>/fd/*`` links
reads ``socket:[<inode>]``. Reading another user's fd links needs CAP_SYS_PTRACE (the kernel's ptrace access check
in proc_fd_link): root on a host has it, root in a container usually not (podman drops it), a plain user never. The
uid is readable by anyone, so an unseen holder is still named by its user. Field layout: Linux
Documentation/networking/proc_net_tcp.rst.
"""

from __future__ import absolute_import, division, print_function

import ipaddress
import os
import pwd
import socket
import struct

__metaclass__ = type

LISTEN = "0A"
ESTABLISHED = "01"
WILDCARDS = ("0.0.0.0", "::")
# The names Debian's /etc/hosts gives the loopback addresses (netbase).
LOOPBACK_NAMES = ("localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback")


def _address(hexaddr):
    """The printable address of a /proc/net/tcp{,6} ``local_address`` host part."""
    raw = bytes(bytearray.fromhex(hexaddr))
    if len(raw) == 4:
        return socket.inet_ntop(socket.AF_INET, struct.pack("<I", struct.unpack(">I", raw)[0]))
    words = struct.unpack(">4I", raw)
    packed = b"".join(struct.pack("<I", w) for w in words)
    text = socket.inet_ntop(socket.AF_INET6, packed)
    return text[7:] if text.startswith("::ffff:") and "." in text else text


def parse_proc_net_tcp(text):
    """Listening sockets of one /proc/net/tcp{,6} table: list of dicts ``address``, ``port``, ``uid``, ``inode``."""
    out = []
    for line in (text or "").splitlines()[1:]:
        fields = line.split()
        if len(fields) < 10 or fields[3] != LISTEN:
            continue
        host, dummy, port = fields[1].partition(":")
        try:
            out.append({"address": _address(host), "port": int(port, 16), "uid": int(fields[7]),
                        "inode": int(fields[9])})
        except (ValueError, struct.error, OSError):
            continue
    return out


def established_peers(port, proc="/proc"):
    """Remote addresses of the established connections (``st`` ``01``) to local ``port``, one entry per connection, from
    both tables. On rank 0 of a multi-node group the ``--dist-init-addr`` port is torch's TCPStore, which every rank of
    every node holds a connection to once it joined the rendezvous."""
    peers = []
    for name in ("tcp", "tcp6"):
        try:
            with open(os.path.join(proc, "net", name)) as handle:
                text = handle.read()
        except (IOError, OSError):
            continue
        for line in text.splitlines()[1:]:
            fields = line.split()
            if len(fields) < 4 or fields[3] != ESTABLISHED:
                continue
            local_port, remote = fields[1].partition(":")[2], fields[2].partition(":")[0]
            try:
                if int(local_port, 16) == int(port):
                    peers.append(_address(remote))
            except (ValueError, struct.error, OSError):
                continue
    return peers


def socket_owners(inodes, proc="/proc"):
    """``{inode: pid}`` for the sockets in ``inodes`` that a process we may inspect holds."""
    wanted = set(inodes)
    owners = {}
    if not wanted:
        return owners
    try:
        pids = [p for p in os.listdir(proc) if p.isdigit()]
    except OSError:
        return owners
    for pid in pids:
        fd_dir = os.path.join(proc, pid, "fd")
        try:
            fds = os.listdir(fd_dir)
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(os.path.join(fd_dir, fd))
            except OSError:
                continue
            if target.startswith("socket:["):
                try:
                    inode = int(target[8:-1])
                except ValueError:
                    continue
                if inode in wanted and inode not in owners:
                    owners[inode] = int(pid)
        if len(owners) == len(wanted):
            break
    return owners


def process_text(pid, proc="/proc"):
    """``/proc/<pid>/cmdline`` as one line (the process title a server set, else its argv), or its ``comm``."""
    try:
        with open(os.path.join(proc, str(pid), "cmdline"), "rb") as fh:
            raw = fh.read()
        text = " ".join(part.decode("utf-8", "replace") for part in raw.split(b"\0") if part)
        if text:
            return text[:300]
        with open(os.path.join(proc, str(pid), "comm")) as fh:
            return fh.read().strip()
    except (IOError, OSError):
        return None


def user_name(uid):
    """The login name of ``uid``, or None when the passwd database has none."""
    try:
        return pwd.getpwuid(int(uid)).pw_name
    except (KeyError, TypeError, ValueError):
        return None


def listeners(ports, proc="/proc"):
    """Listening TCP sockets on ``ports``: list of dicts ``address``, ``port``, ``pid`` (None when the holder cannot be
    seen), ``process``, ``uid`` and ``user`` (the socket's owner, known even when the PID is not); sorted by port then
    address."""
    wanted = set(int(p) for p in ports or [])
    found = []
    for table in ("tcp", "tcp6"):
        try:
            with open(os.path.join(proc, "net", table)) as fh:
                found += [s for s in parse_proc_net_tcp(fh.read()) if s["port"] in wanted]
        except (IOError, OSError):
            continue
    owners = socket_owners([s["inode"] for s in found], proc)
    out = []
    for sock in found:
        pid = owners.get(sock["inode"])
        out.append({"address": sock["address"], "port": sock["port"], "pid": pid,
                    "process": process_text(pid, proc) if pid else None,
                    "uid": sock["uid"], "user": user_name(sock["uid"])})
    return sorted(out, key=lambda s: (s["port"], s["address"]))


def clashes(listen_address, bind_address):
    """Whether a socket listening on ``listen_address`` keeps a server from binding ``bind_address`` on the same port
    (either is a wildcard, or they are the same address)."""
    return listen_address in WILDCARDS or bind_address in WILDCARDS or listen_address == bind_address


def is_loopback(host):
    """Whether ``host`` (an address, bracketed IPv6 included, or a name) reaches only this machine: 127.0.0.0/8,
    ::1, an IPv4-mapped loopback, or one of the loopback names of /etc/hosts. A wildcard (0.0.0.0, ::) is not."""
    text = str(host or "").strip().strip("[]").lower()
    if text in LOOPBACK_NAMES:
        return True
    try:
        address = ipaddress.ip_address(u"%s" % text)
    except ValueError:
        return False
    mapped = getattr(address, "ipv4_mapped", None)
    return bool((mapped or address).is_loopback)
