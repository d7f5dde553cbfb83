"""One model over two nodes in the SGLang 0.5.23 simulator: the follower is not a server, and the ranks meet
through ``--dist-init-addr`` (tests/sandbox/sglang_sim/sglang/srt/distributed.py).

Both "nodes" run here on 127.0.0.1, each with its own HTTP port; every wait is bounded.
"""
import json
import os
import signal
import time

import pytest

from test_sglang_sim import Sim, ckpt, free_port, pkg  # noqa: F401 (fixtures)

READY = "The server is fired up and ready to roll!"


@pytest.fixture
def group(pkg, tmp_path):  # noqa: F811
    sims = []

    def _start(rank, ckpt, dist_port, nnodes=2, tp=4, extra=(), env=None):  # noqa: F811
        args = ["--model-path", str(ckpt), "--tp", str(tp), "--nnodes", str(nnodes), "--node-rank", str(rank),
                "--dist-init-addr", f"127.0.0.1:{dist_port}", *extra]
        sims.append(Sim(pkg, tmp_path, args, env))
        return sims[-1]
    yield _start
    for s in sims:
        s.stop()


def serving_group(group, ckpt):  # noqa: F811
    """A follower and its rank 0, both serving (rank 0's ready line, the follower's dummy health app)."""
    port = free_port()
    follower = group(1, ckpt, port)
    leader = group(0, ckpt, port)
    leader.wait_ready(30)
    follower.wait_for(lambda: "Dummy health check server started" in follower.log, 10, "the dummy health server")
    return follower, leader


def titles(sim):
    return sorted(c[1] for c in sim.children())


def test_the_follower_serves_only_the_dummy_health_app_and_stops_with_rank_0(group, ckpt):  # noqa: F811
    port = free_port()
    follower = group(1, ckpt, port, extra=["--enable-metrics"])
    leader = group(0, ckpt, port)
    leader.wait_ready(30)
    # the follower runs its own ranks (TP2, TP3 of 4) and nothing else: no detokenizer, no tokenizer
    assert titles(follower) == [b"sglang::scheduler_TP2\0", b"sglang::scheduler_TP3\0"]
    follower.wait_for(lambda: "Dummy health check server started in background thread at 127.0.0.1:%d"
                      % follower.port in follower.log, 10, "the dummy health server")
    for path in ("/health", "/health_generate", "/ping", "/metrics"):
        assert follower.get(path) == (200, b""), path
    assert follower.get("/v1/models") == (404, b'{"detail":"Not Found"}')
    assert follower.get("/model_info")[0] == 404
    log = follower.log
    assert READY not in log and "Uvicorn running" not in log and "Load weight end" in log
    assert "Multi-thread loading shards" not in log  # the bar is global rank 0's
    assert leader.post("/v1/chat/completions", {"model": "x", "messages": [{"role": "user", "content": "hi"}],
                                                "max_tokens": 4})[0] == 200

    # SIGTERM on a follower only waits for rank 0
    follower.proc.send_signal(signal.SIGTERM)
    follower.wait_for(lambda: "SIGTERM received on node_rank 1; waiting for the rank-0 ShutdownReq broadcast to stop "
                      "the schedulers." in follower.log, 5, "the follower's SIGTERM line")
    time.sleep(1)
    assert follower.proc.poll() is None and follower.get("/health")[0] == 200

    # rank 0's drain ends with the ShutdownReq, which stops the follower's ranks, and the follower with them
    leader.proc.send_signal(signal.SIGTERM)
    assert leader.wait_exit(20) is not None
    assert follower.wait_exit(10) == 0
    ended = [line for line in follower.log.splitlines() if "Scheduler or DataParallelController" in line]
    assert len(ended) == 2 and all(line.endswith("terminated with 0") for line in ended), ended


def test_a_missing_follower_holds_rank_0_silent_in_init_parallel_until_the_store_times_out(group, ckpt):  # noqa: F811
    leader = group(0, ckpt, free_port(), extra=["--dist-timeout", "4"])
    leader.wait_for(lambda: "Init parallel begin." in leader.log, 10, "Init parallel begin")
    time.sleep(2)
    assert "Init parallel ends" not in leader.log and leader.proc.poll() is None
    assert leader.get("/health")[0] is None
    assert leader.wait_exit(15) is not None
    assert "torch.distributed.DistStoreError: Timed out after 5 seconds waiting for clients. 2/4 clients joined." \
        in leader.log


def test_a_follower_without_rank_0_times_out_connecting(group, ckpt):  # noqa: F811
    port = free_port()
    follower = group(1, ckpt, port, extra=["--dist-timeout", "2"])
    assert follower.wait_exit(15) is not None
    assert (f"torch.distributed.DistNetworkError: The client socket has timed out after 2000ms while trying to "
            f"connect to (127.0.0.1, {port}).") in follower.log


def test_a_taken_dist_init_port_is_torchs_listen_error(group, ckpt):  # noqa: F811
    import socket
    with socket.socket() as holder:
        holder.bind(("", 0))
        holder.listen(1)
        port = holder.getsockname()[1]
        leader = group(0, ckpt, port, extra=["--dist-timeout", "2"])
        assert leader.wait_exit(15) is not None
    assert ("torch.distributed.DistNetworkError: The server socket has failed to listen on any local network "
            f"address. port: {port}, useIpv6: false, code: -98, name: EADDRINUSE, message: address already in use"
            in leader.log)


def test_a_dead_follower_rank_leaves_its_parent_and_dummy_health_up_and_rank_0s_next_forward_hangs(group,
                                                                                                   ckpt):  # noqa: F811
    port = free_port()
    follower = group(1, ckpt, port)
    leader = group(0, ckpt, port)
    leader.wait_ready(30)
    pid = [p for p, title in follower.children() if title == b"sglang::scheduler_TP3\0"][0]
    os.kill(pid, signal.SIGKILL)
    time.sleep(1)
    assert follower.proc.poll() is None and follower.get("/health") == (200, b"")
    assert "terminated with" not in follower.log  # it joins TP2 first, which still runs
    body = {"model": "x", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
    with pytest.raises(OSError):  # a timeout: the all-reduce waits for a rank that is gone
        leader.post("/v1/chat/completions", body, timeout=3)


def test_losing_rank_0_fails_every_follower_rank_with_glooss_error(group, ckpt):  # noqa: F811
    port = free_port()
    follower = group(1, ckpt, port)
    leader = group(0, ckpt, port)
    leader.wait_ready(30)
    os.killpg(leader.pgid, signal.SIGKILL)
    assert follower.wait_exit(15) is not None
    log = follower.log
    assert "Scheduler hit an exception" in log
    assert "RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc] Connection closed by " \
           f"peer [127.0.0.1]:{port}" in log


# ---- the health verdict of each node of a group, from the live processes (sglang_observe + sglang_verdict) ------

def observation(sim, t):
    """What UnitObserver sees of a node without systemd: the process tree under the server's pid, its log, /health."""
    from ansible_collections.blackwell.sglang.plugins.module_utils.health import sglang_log, sglang_observe

    count, ranks, activity = sglang_observe.schedulers_ranks_and_activity(sim.proc.pid)
    code, dummy_latency, dummy_error = sglang_observe.probe_health(sim.url(""), 5)
    return {"t": t, "active_state": "active", "sub_state": "running", "result": "success", "main_pid": sim.proc.pid,
            "n_restarts": 0, "schedulers": count, "scheduler_ranks": ranks, "activity": activity,
            "log": sglang_log.parse_log(sim.log), "http_code": code}


def test_the_follower_is_ready_when_its_ranks_are_and_a_dead_rank_there_is_crashed_by_name(group, ckpt):  # noqa: F811
    from ansible_collections.blackwell.sglang.plugins.module_utils.health.sglang_verdict import classify

    follower, leader = serving_group(group, ckpt)
    verdict = classify([observation(follower, 0.0)], 2)
    assert verdict["verdict"] == "ready" and "node of rank >= 1" in verdict["reason"], verdict
    assert classify([observation(leader, 0.0)], 2)["verdict"] == "ready"

    pid = [p for p, title in follower.children() if title == b"sglang::scheduler_TP3\0"][0]
    os.kill(pid, signal.SIGKILL)
    # unreaped (its parent waits on TP2 first): a zombie, whose empty cmdline is no scheduler's
    follower.wait_for(lambda: observation(follower, 0.0)["schedulers"] == 1, 3, "the rank's death")
    # a watch that starts now, never having seen both ranks, still knows: the follower had served
    verdict = classify([observation(follower, 0.0)], 2)
    assert verdict["verdict"] == "crashed", verdict
    assert "only 1 of 2 scheduler processes are alive" in verdict["reason"] and "gone: TP3" in verdict["reason"]
    assert "restart the group from rank 0" in verdict["reason"]


def test_rank_0_waiting_for_a_missing_node_is_stalled_in_init_parallel(group, ckpt):  # noqa: F811
    from ansible_collections.blackwell.sglang.plugins.module_utils.health.sglang_verdict import classify

    leader = group(0, ckpt, free_port())
    leader.wait_for(lambda: "Init parallel begin." in leader.log, 10, "Init parallel begin")
    time.sleep(0.5)
    history = [observation(leader, 0.0)]
    time.sleep(1.5)
    history.append(observation(leader, 1.5))
    verdict = classify(history, 2, stall_timeout=1.0)
    assert verdict["verdict"] == "stalled" and verdict["phase"] == "init_parallel", verdict
    assert verdict["stopped_at"] == "Init parallel begin."


def test_rank_0_names_the_node_that_never_joined_its_rendezvous(group, ckpt, tmp_path):  # noqa: F811
    """What sglang_health adds to rank 0's init_parallel verdict: its own ranks hold connections to the store (seen in
    this namespace's /proc/net/tcp), none comes from the missing node's address."""
    from ansible_collections.blackwell.sglang.plugins.module_utils.host.listeners import established_peers
    from ansible_collections.blackwell.sglang.plugins.modules import sglang_health

    port = free_port()
    leader = group(0, ckpt, port)
    leader.wait_for(lambda: len(established_peers(port)) >= 2, 10, "rank 0's own ranks in its store")
    assert set(established_peers(port)) == {"127.0.0.1"}
    missing = {"name": "gpu-1", "node_rank": 1, "address": "192.0.2.7"}
    seen = sglang_health.rendezvous([missing, {"name": "gpu-0", "node_rank": 0, "address": "127.0.0.1"}], port, 5)
    assert seen["connections"] == {"127.0.0.1": 2}
    assert seen["missing"] == [dict(missing, addresses=["192.0.2.7"])]
    assert sglang_health.rendezvous_message(seen).startswith(
        f"rank 0 waits in init_parallel for ranks that never joined the rendezvous on port {port} (2 connection(s), "
        "none from gpu-1 (node rank 1, 192.0.2.7)): start SGLang there")


def test_the_followers_phase_is_ready_and_a_later_failure_is_one_while_serving(group, ckpt):  # noqa: F811
    from ansible_collections.blackwell.sglang.plugins.module_utils.health import sglang_log

    follower, leader = serving_group(group, ckpt)
    assert sglang_log.parse_log(follower.log)["phase"] == "ready"
    os.killpg(leader.pgid, signal.SIGKILL)
    assert follower.wait_exit(15) is not None
    parsed = sglang_log.parse_log(follower.log)
    assert parsed["crash_phase"] == "serving" and "Connection closed by peer" in parsed["error"], parsed
