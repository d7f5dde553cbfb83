# The sandbox nodes' connection: containers.podman.podman (the `ansible` 12.3.0 package's containers.podman 1.18.0) with
# pipelining, the way a real host is reached (ssh with ansible.cfg's `[connection] pipelining = true`).
"""Sandbox connection plugin: podman exec, with Ansible's module pipelining."""
from __future__ import annotations

DOCUMENTATION = r"""
name: podman
short_description: Run tasks in a sandbox node's podman container, one podman exec per module (pipelining)
description:
  - The sandbox's stand-in for ssh. It is containers.podman.podman (same options, same file transfer through the
    container's mount), with Ansible's pipelining, which that plugin declares unsupported because it never hands a
    command its stdin.
  - Without pipelining every module costs five podman execs (home directory, temporary directory, chmod, run, remove),
    about 1.6 s a task on a 2-core sandbox machine; with it, one exec that reads the module from stdin (about 0.75 s).
    A real host runs its modules the same way, over ssh with pipelining.
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
  podman_executable:
    description: The podman executable.
    default: podman
    vars:
      - name: ansible_podman_executable
    env:
      - name: ANSIBLE_PODMAN_EXECUTABLE
"""

import shlex

from ansible.module_utils.common.text.converters import to_native
from ansible.plugins.connection import ConnectionBase, ensure_connect
from ansible_collections.containers.podman.plugins.connection.podman import Connection as PodmanConnection


class Connection(PodmanConnection):
    """containers.podman.podman whose exec passes stdin (`podman exec -i`) when Ansible pipes a module into it."""

    transport = "podman"
    has_pipelining = True

    @ensure_connect
    def exec_command(self, cmd, in_data=None, sudoable=False):
        """Run `cmd` in the container; with `in_data` (a pipelined module), on the exec's stdin.

        Returns (rc, stdout bytes, stderr bytes), as containers.podman.podman does.
        """
        ConnectionBase.exec_command(self, cmd, in_data=in_data, sudoable=sudoable)
        args = ["exec", "-i"] if in_data is not None else ["exec"]
        if self.user:
            args.extend(("--user", self.user))
        return self._podman(args, shlex.split(to_native(cmd, errors="surrogate_or_strict")), in_data)
