#!/usr/bin/env python3
"""What one task costs over each connection a deploy can use (on-demand benchmark; not in CI).

    source scripts/env.sh && python benchmarks/connection_cost.py [--repeat 8]

deploy_cost.py's per-task figures are taken over the sandbox's connection; this says which of them carry over to a
real host reached over ssh. The same short playbook (``--repeat`` times each of: ping, stat, an unchanged
``file``, an unchanged ``copy``, ``command``) runs over:

- ``podman exec``: the sandbox connection with ``SANDBOX_PODMAN_PERSIST=0``, one podman exec per command;
- ``podman channel``: the sandbox connection as the sandbox uses it (tests/sandbox/podman_persist.py, the
  counterpart of ssh's ControlPersist);
- ``ssh``: Ansible's ssh connection with its defaults (ControlMaster auto, ControlPersist 60 s) and pipelining, to
  root@127.0.0.1 on this machine, when an sshd answers there with key login (skipped otherwise; ``apt-get install
  openssh-server``, ``ssh-keygen -A``, ``/usr/sbin/sshd``, a key in /root/.ssh/authorized_keys);
- ``local``: no transport at all, the floor Ansible itself sets (fork, templating, module start-up).

The container is a throwaway sandbox node from the node image (``sglang-bench-connection``), removed at the end.
Prints the mean seconds per task of each kind and transport (the first of each kind is left out: it builds the
module's payload once per run).
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import sandbox_prep

ROOT = sandbox_prep.ROOT
NAME = "sglang-bench-connection"
KINDS = {
    "ping": {"ansible.builtin.ping": {}},
    "stat": {"ansible.builtin.stat": {"path": "/etc/hostname"}},
    "file (unchanged)": {"ansible.builtin.file": {"path": "/tmp", "state": "directory"}},
    "copy (unchanged)": {"ansible.builtin.copy": {"content": "x\n", "dest": "/tmp/connection-cost", "mode": "0644"}},
    "command": {"ansible.builtin.command": "true", "changed_when": False},
}
PROFILE = re.compile(r"^(\S+) -{3,} (\d+\.\d+)s$", re.M)


def playbook(path, repeat):
    tasks = []
    for kind, body in KINDS.items():
        for i in range(repeat + 1):
            tasks.append(dict(body, name="%s#%d" % (kind.split()[0], i)))
    with open(path, "w") as f:
        json.dump([{"hosts": "all", "gather_facts": False, "tasks": tasks}], f)  # JSON is YAML


def run(inventory, play, env):
    env = dict(os.environ, ANSIBLE_CALLBACKS_ENABLED="ansible.posix.profile_tasks", PROFILE_TASKS_SORT_ORDER="none",
               PROFILE_TASKS_TASK_OUTPUT_LIMIT="all", ANSIBLE_PIPELINING="true", **env)
    proc = subprocess.run(["ansible-playbook", "-i", inventory, play], cwd=ROOT, capture_output=True, text=True,
                          env=env)
    if proc.returncode != 0:
        return None, proc.stdout[-1500:] + proc.stderr[-1500:]
    per = {}
    for name, sec in PROFILE.findall(proc.stdout):
        kind, i = name.rsplit("#", 1)
        if i != "0":
            per.setdefault(kind, []).append(float(sec))
    return dict((k, sum(v) / len(v)) for k, v in per.items()), None


def ssh_works():
    return subprocess.run(["ssh", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no", "-o", "ConnectTimeout=3",
                           "root@127.0.0.1", "true"], capture_output=True).returncode == 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=8, help="tasks of each kind timed per transport")
    opts = ap.parse_args(argv)
    sandbox_prep.prepare()
    subprocess.run(["podman", "rm", "-f", NAME], capture_output=True)
    subprocess.run(["podman", "run", "-d", "--name", NAME, "--systemd=always", "localhost/sglang-sandbox-node:current",
                    "/sbin/init"], check=True, capture_output=True)
    tmp = tempfile.mkdtemp(prefix="connection-cost-")
    try:
        play = os.path.join(tmp, "play.yml")
        playbook(play, opts.repeat)
        # (label, inventory line, environment)
        transports = [
            ("podman exec", "%s ansible_connection=podman" % NAME, {"SANDBOX_PODMAN_PERSIST": "0"}),
            ("podman channel", "%s ansible_connection=podman" % NAME, {}),
            ("ssh", "127.0.0.1 ansible_connection=ssh ansible_user=root ansible_python_interpreter=/usr/bin/python3",
             {"ANSIBLE_HOST_KEY_CHECKING": "false"}),
            ("local", "localhost ansible_connection=local ansible_python_interpreter=%s" % sys.executable, {}),
        ]
        rows = {}
        for label, line, env in transports:
            if label == "ssh" and not ssh_works():
                print("ssh: skipped (no sshd with key login for root@127.0.0.1)")
                continue
            inv = os.path.join(tmp, label.replace(" ", "-") + ".ini")
            with open(inv, "w") as f:
                f.write(line + "\n")
            got, err = run(inv, play, env)
            if got is None:
                print("%s: failed: %s" % (label, err))
                continue
            rows[label] = got
        kinds = [k.split()[0] for k in KINDS]
        print("%-16s" % "seconds/task" + "".join("%10s" % k for k in kinds))
        for label, got in rows.items():
            print("%-16s" % label + "".join("%10.3f" % got.get(k, float("nan")) for k in kinds))
    finally:
        subprocess.run(["podman", "rm", "-f", NAME], capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
