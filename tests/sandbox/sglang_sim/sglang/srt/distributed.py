"""Where the ranks of one node wait for each other, as the collectives of SGLang 0.5.23 make them.

Real ranks meet in NCCL/gloo collectives: the process groups at ``Init parallel`` (``distributed/bootstrap.py``),
the distributed free-memory probe behind ``Memory baseline taken``, the MIN all-reduce that sizes the KV pool after
the weights, the all-reduces inside every captured graph and the HiCache auto-size MIN all-reduce. So a rank that
hangs holds every other rank at the next meeting point (their logs stop at ``Load weight end``, not at ready), and a
rank that died leaves the others waiting until the parent kills the tree. ``barrier(name)`` is that meeting: each
rank drops a file ``<name>.<rank>`` in a directory of this launch and waits for all ``tp_size`` files.

Across nodes (``--nnodes`` > 1) the ranks meet where 0.5.23 makes them meet: ``distributed/bootstrap.py
_resolve_dist_init_method`` turns ``--dist-init-addr`` into ``tcp://HOST:PORT`` and
``distributed/parallel_state.py init_distributed_environment`` hands it to ``torch.distributed.init_process_group``
(timeout ``--dist-timeout``, else torch's ``default_pg_nccl_timeout``, 10 minutes). torch's TCP rendezvous makes
global rank 0 the TCPStore's server on that port; every other rank is a client. So here:

- global rank 0 (``TP0`` on node rank 0) listens on the port (all addresses, as TCPStore does). A taken port is
  ``torch.distributed.DistNetworkError: The server socket has failed to listen on any local network address. port:
  P, useIpv6: false, code: -98, name: EADDRINUSE, message: address already in use``;
- it waits, silent, for every rank of every node; those missing at the timeout give ``torch.distributed.
  DistStoreError: Timed out after T+1 seconds waiting for clients. J/W clients joined.``;
- a client retries its connection until the timeout: ``torch.distributed.DistNetworkError: The client socket has
  timed out after Tms while trying to connect to (HOST, PORT).``;
- every later meeting point goes through the store; a rank whose connection drops is gone from the group: the
  others' next collective never ends (rank 0's parent is told through ``group-lost-<run id>``, a forward then
  hangs as NCCL's does), and when global rank 0 goes, every client's gloo pair fails (``Connection closed by peer``,
  the string in torch 2.14.1's ``libtorch_cpu.so``, gloo's ``transport/tcp/pair.cc``);
- global rank 0's ShutdownReq reaches every rank (0.5.23 broadcasts each request over the TP group's CPU group):
  that is how the ranks of a follower node stop (``entrypoints/engine.py``: a follower's SIGTERM only waits for it).

The texts are torch 2.14.1's (``libtorch_cpu.so``'s format strings); the waits are the real ones times
``SGLANG_SIM_DIST_TIMEOUT_SCALE``, while the messages give the real seconds.
"""
import errno
import json
import os
import socket
import threading
import time

from sglang.srt import sim_config, sim_state


class DistStoreError(RuntimeError):
    """torch.distributed.DistStoreError (module set to match tracebacks)."""


class DistNetworkError(RuntimeError):
    """torch.distributed.DistNetworkError."""


DistStoreError.__module__ = DistNetworkError.__module__ = "torch.distributed"
GLOO_PAIR = "/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc"
DEFAULT_TIMEOUT_S = 600  # torch/distributed/constants.py default_pg_nccl_timeout
_GROUP = None


def timeout_s(cfg):
    return int(cfg.get("dist_timeout") or DEFAULT_TIMEOUT_S)


def _wall(seconds):
    return seconds * sim_config.get_float("SGLANG_SIM_DIST_TIMEOUT_SCALE")


def lost_flag(cfg):
    return os.path.join(sim_state.state_dir(), "group-lost-" + cfg["run_id"])


class _Store(threading.Thread):
    """The TCPStore server global rank 0 hosts: a JSON line per message."""

    def __init__(self, cfg):
        super().__init__(daemon=True, name="tcpstore")
        self.cfg, self.world = cfg, cfg["tp_size"]
        self.cond = threading.Condition()
        self.members = {}  # rank -> the writer of its connection
        self.meetings = {}  # name -> {rank: value}
        port = int(cfg["dist_init_addr"].rsplit(":", 1)[1])
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        # c10d's socket.cpp sets SO_REUSEADDR on the server socket: the last run's connections in TIME_WAIT do not
        # keep a restart from listening; a live listener still does
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self.sock.bind(("", port))
        except OSError as exc:
            name = errno.errorcode.get(exc.errno, str(exc.errno))
            raise DistNetworkError(
                f"The server socket has failed to listen on any local network address. port: {port}, useIpv6: false, "
                f"code: {-exc.errno}, name: {name}, message: {(exc.strerror or '').lower()}") from None
        self.sock.listen(256)

    def run(self):
        while True:
            conn, _ = self.sock.accept()
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _send(self, rank, message):
        writer = self.members.get(rank)
        if writer is None:
            return
        try:
            writer.write((json.dumps(message) + "\n").encode())
            writer.flush()
        except OSError:
            pass

    def _serve(self, conn):
        reader, writer = conn.makefile("rb"), conn.makefile("wb")
        rank = None
        for raw in reader:
            msg = json.loads(raw)
            with self.cond:
                if "join" in msg:
                    rank = msg["join"]
                    self.members[rank] = writer
                elif "meet" in msg:
                    here = self.meetings.setdefault(msg["meet"], {})
                    here[rank] = msg.get("value")
                    if len(here) == self.world:
                        del self.meetings[msg["meet"]]
                        for r in list(self.members):
                            self._send(r, {"met": msg["meet"], "values": list(here.values())})
                elif "shutdown" in msg:
                    for r in list(self.members):
                        if r != rank:
                            self._send(r, {"shutdown": True})
                    self._send(rank, {"met": "shutdown", "values": []})  # sent: rank 0 may exit now
                self.cond.notify_all()
        with self.cond:
            if rank is not None and self.members.pop(rank, None) is not None:
                with open(lost_flag(self.cfg), "a") as fh:
                    fh.write(f"{rank}\n")
            self.cond.notify_all()

    def wait_for_clients(self):
        real = timeout_s(self.cfg)
        deadline = time.monotonic() + _wall(real)
        with self.cond:
            while len(self.members) < self.world:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise DistStoreError(f"Timed out after {real + 1} seconds waiting for clients. "
                                         f"{len(self.members)}/{self.world} clients joined.")
                self.cond.wait(min(left, 0.5))


class _Client:
    """One rank's connection to the store, and the thread that reads what the store sends it."""

    def __init__(self, cfg, on_shutdown):
        host, port = cfg["dist_init_addr"].rsplit(":", 1)
        real = timeout_s(cfg)
        deadline = time.monotonic() + _wall(real)
        while True:
            try:
                self.sock = socket.create_connection((host, int(port)), timeout=5)
                break
            except OSError:
                if time.monotonic() >= deadline:
                    raise DistNetworkError(f"The client socket has timed out after {real * 1000}ms while trying to "
                                           f"connect to ({host}, {port}).") from None
                time.sleep(0.2)
        self.sock.settimeout(None)
        self.peer = f"[{self.sock.getpeername()[0]}]:{port}"
        self.cfg, self.on_shutdown = cfg, on_shutdown
        self.writer = self.sock.makefile("wb")
        self.cond = threading.Condition()
        self.met, self.closed = {}, False
        self._write({"join": cfg["tp_rank"]})
        threading.Thread(target=self._read, daemon=True, name="gloo-pair").start()

    def _write(self, msg):
        self.writer.write((json.dumps(msg) + "\n").encode())
        self.writer.flush()

    def _read(self):
        for raw in self.sock.makefile("rb"):
            msg = json.loads(raw)
            if msg.get("shutdown") and self.on_shutdown:
                self.on_shutdown()
            with self.cond:
                if "met" in msg:
                    self.met[msg["met"]] = msg["values"]
                self.cond.notify_all()
        with self.cond:
            self.closed = True
            self.cond.notify_all()
        if self.on_shutdown:
            self.on_shutdown(RuntimeError(f"[{GLOO_PAIR}] Connection closed by peer {self.peer}"))

    def meet(self, name, value):
        self._write({"meet": name, "value": value})
        with self.cond:
            while name not in self.met:  # a lost rank 0 ends this process from the reader thread
                self.cond.wait(0.5)
            return self.met.pop(name)

    def shutdown_group(self):
        try:
            self._write({"shutdown": True})
        except OSError:
            return
        with self.cond:
            self.cond.wait_for(lambda: "shutdown" in self.met or self.closed, timeout=5)


def init_process_group(cfg, on_shutdown):
    """``Init parallel``'s process groups: one node meets in files; several meet in global rank 0's store.
    ``on_shutdown(error=None)`` (a follower node's ranks; None on node rank 0, whose parent owns its ranks) runs in
    the client's reader thread when rank 0's ShutdownReq arrives (no error) or the connection to rank 0 is lost (the
    gloo error)."""
    global _GROUP
    if int(cfg.get("nnodes") or 1) <= 1:
        barrier(cfg, "init_parallel")
        return
    store = None
    if cfg["tp_rank"] == 0:
        store = _Store(cfg)
        store.start()
    _GROUP = _Client(cfg, on_shutdown)
    if store is not None:
        store.wait_for_clients()
    barrier(cfg, "init_parallel")


def shutdown_group():
    """Global rank 0 forwards the ShutdownReq to every rank of the group."""
    if _GROUP is not None and _GROUP.cfg["tp_rank"] == 0:
        _GROUP.shutdown_group()


def barrier(cfg, name, poll_s=0.01, value=None):
    """Wait for every rank at ``name``; with ``value``, an all-gather of it: returns the list of every rank's value
    (what an all-reduce is built from), else None."""
    if _GROUP is not None:
        values = _GROUP.meet(name, None if value is None else float(value))
        return None if value is None else values
    directory = os.path.join(sim_state.state_dir(), "barrier-" + cfg["run_id"])
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "%s.%d" % (name, cfg["tp_rank"]))
    with open(path + ".tmp", "w") as fh:
        fh.write("" if value is None else repr(float(value)))
    os.replace(path + ".tmp", path)
    want = cfg["ranks_per_host"]
    while True:
        mine = [f for f in os.listdir(directory) if f.rsplit(".", 1)[0] == name]
        if len(mine) >= want:
            break
        time.sleep(poll_s)
    if value is None:
        return None
    values = []
    for f in mine:
        with open(os.path.join(directory, f)) as fh:
            values.append(float(fh.read()))
    return values
