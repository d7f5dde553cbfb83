# The sandbox nodes' connection: containers.podman.podman (the `ansible` 12.3.0 package's containers.podman 1.18.0) with
# pipelining and a persistent channel, the way a real host is reached (ssh with ansible.cfg's
# `[connection] pipelining = true` and ssh's default ControlPersist).
"""Sandbox connection plugin: podman, with Ansible's module pipelining and a persistent channel per container."""
from __future__ import annotations

DOCUMENTATION = r"""
name: podman
short_description: Run tasks in a sandbox node's podman container, one command per module over a persistent channel
description:
  - The sandbox's stand-in for ssh. It is containers.podman.podman (same options, same file transfer through the
    container's mount), with Ansible's pipelining, which that plugin declares unsupported because it never hands a
    command its stdin.
  - Without pipelining every module costs five commands (home directory, temporary directory, chmod, run, remove);
    with it, one command that reads the module from stdin. A real host runs its modules the same way, over ssh with
    pipelining.
  - Commands run over one persistent channel per container (tests/sandbox/podman_persist.py), as ssh's
    ControlPersist keeps one connection per host open; a command then costs about 2 ms of transport instead of a
    podman exec (0.13-0.3 s on a 2-core sandbox machine). O(persist_seconds=0) runs one podman exec per command,
    which costs about what ssh does per command there (benchmarks/connection_cost.py).
  - It shadows the short name C(podman), which molecule's podman driver writes into its inventories, and which the
    sandbox inventories use; the FQCN containers.podman.podman stays the unpiped plugin.
extends_documentation_fragment:
  - connection_pipelining
options:
  remote_addr:
    description: The container's name or ID.
    default: inventory_hostname
    vars:
      - name: ansible_host
      - name: inventory_hostname
      - name: ansible_podman_host
  remote_user:
    description: User (name or UID) the commands run as in the container.
    ini:
      - section: defaults
        key: remote_user
    env:
      - name: ANSIBLE_REMOTE_USER
    vars:
      - name: ansible_user
  podman_extra_args:
    description: Extra arguments for the podman command line.
    default: ''
    ini:
      - section: defaults
        key: podman_extra_args
    vars:
      - name: ansible_podman_extra_args
    env:
      - name: ANSIBLE_PODMAN_EXTRA_ARGS
  persist_seconds:
    description:
      - How long the container's persistent channel (tests/sandbox/podman_persist.py) stays open without a command,
        as ssh's ControlPersist keeps a real host's connection. Each command then costs a round trip on a unix socket
        and a fork in the container instead of a podman exec.
      - 0 runs every command as its own podman exec (no channel).
    type: float
    default: 60
    env:
      - name: SANDBOX_PODMAN_PERSIST
    vars:
      - name: ansible_podman_persist_seconds
  podman_executable:
    description: The podman executable.
    default: podman
    vars:
      - name: ansible_podman_executable
    env:
      - name: ANSIBLE_PODMAN_EXECUTABLE
"""

import importlib.util
import os
import shlex

from ansible.errors import AnsibleConnectionFailure
from ansible.module_utils.common.process import get_bin_path
from ansible.module_utils.common.text.converters import to_native
from ansible.plugins.connection import ConnectionBase, ensure_connect
from ansible.utils.display import Display
from ansible_collections.containers.podman.plugins.connection.podman import Connection as PodmanConnection

display = Display()
_SPEC = importlib.util.spec_from_file_location(
    "sandbox_podman_persist", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "podman_persist.py"))
persist = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(persist)


class Connection(PodmanConnection):
    """containers.podman.podman that runs commands over a persistent channel (or `podman exec`), passing stdin when
    Ansible pipes a module into it."""

    transport = "podman"
    has_pipelining = True

    def _connect(self):
        """Nothing to open per task: the channel is opened on the first command, the mount on the first file copy."""
        ConnectionBase._connect(self)
        self._connected = True
        return self

    def _mounted(self):
        """containers.podman's mount of the container's filesystem (put_file and fetch_file copy through it)."""
        if self._mount_point is None:
            PodmanConnection._connect(self)

    def put_file(self, in_path, out_path):
        self._mounted()
        return super().put_file(in_path, out_path)

    def fetch_file(self, in_path, out_path):
        self._mounted()
        return super().fetch_file(in_path, out_path)

    @ensure_connect
    def exec_command(self, cmd, in_data=None, sudoable=False):
        """Run `cmd` in the container; with `in_data` (a pipelined module), on its stdin.

        Over the persistent channel when persist_seconds > 0, else (or when no channel can be opened) as one
        `podman exec`. Returns (rc, stdout bytes, stderr bytes), as containers.podman.podman does.
        """
        ConnectionBase.exec_command(self, cmd, in_data=in_data, sudoable=sudoable)
        argv = shlex.split(to_native(cmd, errors="surrogate_or_strict"))
        idle = float(self.get_option("persist_seconds") or 0)
        if idle > 0:
            podman = [get_bin_path(self.get_option("podman_executable"))]
            podman += shlex.split(to_native(self.get_option("podman_extra_args") or ""))
            podman += ["exec", "-i"] + (["--user", self.user] if self.user else []) + [self._container_id]
            path = persist.socket_path(self._container_id, self.user, podman)
            for attempt in (1, 2):
                try:
                    return persist.call(path, persist.master_argv(path, podman, idle), argv, in_data)
                except persist.Unavailable as exc:
                    display.vvvv("podman channel, try %d: %s" % (attempt, exc), host=self._container_id)
                except (EOFError, OSError) as exc:
                    raise AnsibleConnectionFailure("the channel into %s broke during %r: %s" % (
                        self._container_id, cmd, exc))
        args = ["exec", "-i"] if in_data is not None else ["exec"]
        if self.user:
            args.extend(("--user", self.user))
        return self._podman(args, argv, in_data)
