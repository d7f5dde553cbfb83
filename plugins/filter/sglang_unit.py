"""Filters for the SGLang systemd unit: start/stop timeouts and the multi-node options.

``sglang_timeout_start_sec``
    model size in bytes (index ``metadata.total_size``) -> seconds for ``TimeoutStartSec=``.
``sglang_unit_errors``
    timeouts -> list of problems (stop timeout must exceed the drain time).
``sglang_multinode_options``
    list of node hostnames + this host -> ``{nnodes, node-rank, dist-init-addr}`` (``{}`` on one node).
``sglang_unit_recovery``
    ``systemd_service`` status -> whether a failed unit was started again, and why.
``systemd_quote``
    list of argv strings -> one command line for ``ExecStart=`` (SGLang's and the router's units), quoted so that
    systemd's own parser (systemd.service(5) "COMMAND LINES", systemd.unit(5) "SPECIFIERS") gives back the same list.
"""

from __future__ import annotations

import math
import re

from ansible.errors import AnsibleFilterError

# Time before and after reading the weights: process start, NCCL init, KV allocation, CUDA-graph capture
# and warmup (minutes on 8 ranks: SGLang 0.5.23 logs each phase, and /health answers only after warmup), and the
# read rate we plan with: 200 MB/s is a cold NFS or a busy disk; local NVMe reads ~1 GB/s (a 547 GB Kimi-K2.5 load
# takes ~10 minutes).
DEFAULT_BASE_SEC = 600
DEFAULT_READ_BYTES_PER_SEC = 200 * 1000 ** 2


def sglang_timeout_start_sec(model_bytes, setting="auto", base_sec=DEFAULT_BASE_SEC,
                             read_bytes_per_sec=DEFAULT_READ_BYTES_PER_SEC):
    """``TimeoutStartSec=`` value: ``setting`` unless it is ``auto``; then base + size / read rate, rounded up
    to a whole minute; ``infinity`` when the size is unknown (no index yet, e.g. check mode on a fresh host).

    Raises AnsibleFilterError for a setting that is neither ``auto``, ``infinity`` nor a positive integer.
    """
    text = str(setting).strip()
    if text != "auto":
        if text == "infinity" or (text.isdigit() and int(text) > 0):
            return text
        raise AnsibleFilterError(
            f"TimeoutStartSec must be auto, infinity or a positive number of seconds, got {setting!r}")
    if model_bytes in (None, "", 0):
        return "infinity"
    try:
        size = int(model_bytes)
        rate = float(read_bytes_per_sec)
        if size < 0 or rate <= 0:
            raise ValueError
    except (TypeError, ValueError):
        raise AnsibleFilterError(
            f"model size {model_bytes!r} / read rate {read_bytes_per_sec!r} must be positive numbers")
    return str(int(math.ceil((int(base_sec) + size / rate) / 60.0)) * 60)


def sglang_unit_errors(timeout_stop_sec, drain_timeout_sec, timeout_start_sec="auto"):
    """Problems with the unit's timing, every one at once (empty = fine)."""
    errors = []
    try:
        stop, drain = int(timeout_stop_sec), int(drain_timeout_sec)
    except (TypeError, ValueError):
        return [f"TimeoutStopSec {timeout_stop_sec!r} and the drain time {drain_timeout_sec!r} must be whole seconds"]
    if stop <= drain:
        errors.append(f"TimeoutStopSec {stop} s must exceed the drain time {drain} s: on stop SGLang drains in-flight "
                      f"requests and systemd SIGKILLs whatever is left at TimeoutStopSec, dropping them; "
                      f"raise sglang_service_timeout_stop_sec above {drain} (e.g. {drain + 60})")
    try:
        sglang_timeout_start_sec(None, timeout_start_sec)
    except AnsibleFilterError as exc:
        errors.append(str(exc))
    return errors


_HOST = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?$")


def sglang_multinode_options(nodes, this_host, dist_init_host="", port=20000, tp_size=None, socket_ifname=""):
    """``{"nnodes": N, "node-rank": R, "dist-init-addr": "HOST:PORT"}`` for this host; ``{}`` for zero or one node.

    :param nodes: inventory hostnames of the nodes serving one model, in rank order (rank 0 first).
    :param this_host: ``inventory_hostname``.
    :param dist_init_host: address of rank 0 as the other nodes reach it; empty -> ``nodes[0]``.
    :param tp_size: total tensor parallel size across nodes (must divide evenly among the nodes).
    :param socket_ifname: NCCL/GLOO socket interface; required with more than one node, because NCCL
        otherwise picks the first interface it finds (docker0, a management NIC) and hangs or crawls.
    Raises AnsibleFilterError listing every problem.
    """
    nodes = [str(n) for n in (nodes or [])]
    if len(nodes) <= 1:
        if nodes and str(this_host) != nodes[0]:
            raise AnsibleFilterError(f"{this_host} is not in sglang_service_nodes {nodes}")
        return {}
    errors = []
    dupes = sorted({n for n in nodes if nodes.count(n) > 1})
    if dupes:
        errors.append(f"sglang_service_nodes lists {', '.join(dupes)} more than once")
    if str(this_host) not in nodes:
        errors.append(f"{this_host} is not in sglang_service_nodes {nodes}; add it or leave it out of this play")
    host = str(dist_init_host or nodes[0])
    if not _HOST.match(host):
        errors.append(f"dist-init host {host!r} must be a hostname or IPv4 address")
    try:
        port_i = int(port)
        if not 1 <= port_i <= 65535:
            raise ValueError
    except (TypeError, ValueError):
        errors.append(f"dist-init port {port!r} must be 1-65535")
        port_i = 0
    if tp_size is not None:
        try:
            if int(tp_size) % len(nodes):
                errors.append(f"--tp-size {tp_size} does not split evenly over {len(nodes)} nodes; it is the total "
                              f"across nodes (e.g. {8 * len(nodes)} for {len(nodes)} x 8 GPUs)")
        except (TypeError, ValueError):
            errors.append(f"--tp-size {tp_size!r} is not an integer")
    if not str(socket_ifname or "").strip():
        errors.append("more than one node needs sglang_service_socket_ifname (NCCL_SOCKET_IFNAME/GLOO_SOCKET_IFNAME): "
                      "without it NCCL and Gloo pick the first interface they find and hang or crawl")
    if errors:
        raise AnsibleFilterError("invalid multi-node settings:\n- " + "\n- ".join(errors))
    return {"nnodes": len(nodes), "node-rank": nodes.index(str(this_host)), "dist-init-addr": f"{host}:{port_i}"}


def sglang_unit_recovery(status):
    """Whether a deploy must start the unit again because it failed, from ``systemd_service``'s ``status``
    (ActiveState, Result, NRestarts): dict ``restarted`` (bool), ``active_state``, ``result``, ``n_restarts``,
    ``why`` (None when the unit had not failed).

    A failed unit with automatic restarts behind it is one systemd gave up on (StartLimitBurst starts within
    StartLimitIntervalSec): measured on systemd 252 (Debian 12), its Result stays the last failure's (``signal``,
    ``exit-code``) with NRestarts counting the restarts; ``Result=start-limit-hit`` appears only once a start request
    itself was refused. Either way ``systemctl start`` alone is refused until ``systemctl reset-failed``."""
    status = status or {}
    state, result, restarts = status.get("ActiveState"), status.get("Result"), status.get("NRestarts")
    failed = state == "failed"
    try:
        restarted_before = int(restarts) > 0
    except (TypeError, ValueError):
        restarted_before = False
    gave_up = result == "start-limit-hit" or restarted_before
    why = None
    if failed:
        why = "the unit had failed (Result=%s, %s automatic restart(s)%s); this run started it again" % (
            result or "?", restarts if restarts not in (None, "") else "?",
            ", then systemd stopped restarting it: start limit hit" if gave_up else "")
    return {"restarted": failed, "active_state": state, "result": result, "n_restarts": restarts, "why": why}


# Characters that need no quoting in a systemd command line.
_SAFE = re.compile(r"^[A-Za-z0-9_@%+=:,./-]+$")


def systemd_quote(argv) -> str:
    """Quote ``argv`` (list of str) for ``ExecStart=`` so systemd splits it back into the same list.

    systemd expands specifiers (``%`` -> ``%%``) and environment variables (``$`` -> ``$$``) and
    splits words C-style: inside double quotes ``\\`` and ``"`` are escaped, newlines become ``\\n``.
    Raises AnsibleFilterError for an empty argv or a relative executable path.
    """
    if isinstance(argv, (str, bytes)) or not argv:
        raise AnsibleFilterError("systemd_quote expects a non-empty list of arguments")
    words = []
    for i, arg in enumerate(argv):
        arg = str(arg)
        if i == 0 and not arg.startswith("/"):
            raise AnsibleFilterError(f"the executable must be an absolute path, got {arg!r}")
        escaped = arg.replace("%", "%%").replace("$", "$$")
        if arg and _SAFE.match(arg):
            words.append(escaped)
            continue
        escaped = (
            escaped.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")
        )
        words.append(f'"{escaped}"')
    return " ".join(words)


class FilterModule:
    def filters(self):
        return {
            "sglang_timeout_start_sec": sglang_timeout_start_sec,
            "sglang_unit_errors": sglang_unit_errors,
            "sglang_unit_recovery": sglang_unit_recovery,
            "sglang_multinode_options": sglang_multinode_options,
            "systemd_quote": systemd_quote,
        }
