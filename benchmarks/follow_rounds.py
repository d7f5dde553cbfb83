#!/usr/bin/env python3
"""How many rounds job_follow survives and what one round costs (on-demand benchmark; CI runs ~400 in
tests/unit/plugins/action/test_job_follow.py and over podman in molecule/staging).

A self-including task file, what the roles used before, dies of ``RecursionError`` after ~300 rounds on
ansible-core 2.19. This runs a background job that writes a progress line every 0.1 s for ``--seconds`` and follows
it with ``--interval`` (0: as fast as rounds go) on the local connection, or on an inventory host (``--host`` with
``-i``/``-c`` for the sandbox node: ``--inventory inventory/sandbox --host sglang-sandbox-gpu-0``).

    python benchmarks/follow_rounds.py --seconds 20            # prints rounds, s/round, PASS when >= --min-rounds
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import textwrap
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

PLAY = """
- hosts: {hosts}
  gather_facts: false
  tasks:
    - name: A job that writes a progress line every 0.1 s
      ansible.builtin.shell: for i in $(seq {steps}); do echo "step $i" >> {progress}; sleep 0.1; done; echo done
      async: {timeout}
      poll: 0
      register: job
    - name: Follow it
      blackwell.sglang.job_follow:
        results_file: "{{{{ job.results_file }}}}"
        progress_file: {progress}
        interval: {interval}
        timeout: {timeout}
        label: bench
      register: followed
    - name: Show what came back
      ansible.builtin.debug:
        msg: "rounds={{{{ followed.rounds }}}} rc={{{{ followed.rc }}}} stdout={{{{ followed.stdout }}}}"
"""


def run(seconds, interval, workdir, inventory=None, host=None, connection=None):
    """Run the play; returns (returncode, rounds or None, wall seconds, output)."""
    progress = "/tmp/follow-rounds-%d.progress" % os.getpid()
    play = os.path.join(workdir, "follow.yml")
    with open(play, "w") as fh:
        fh.write(textwrap.dedent(PLAY.format(hosts=host or "localhost", steps=int(seconds * 10), progress=progress,
                                             interval=interval, timeout=int(seconds * 10 + 600))))
    # The repo's ansible.cfg: its collections_path makes the checkout blackwell.sglang (job_follow by FQCN).
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_LOCALHOST_WARNING="false",
               ANSIBLE_INVENTORY_UNPARSED_WARNING="false")
    argv = [sys.executable, "-m", "ansible.cli.playbook"]
    if inventory:
        argv += ["-i", inventory]
    else:
        argv += ["-i", "localhost,", "-c", connection or "local", "-e", "ansible_python_interpreter=%s" % sys.executable]
    t0 = time.monotonic()
    proc = subprocess.run(argv + [play], capture_output=True, text=True, env=env, cwd=workdir)
    wall = time.monotonic() - t0
    found = re.search(r"rounds=(\d+)", proc.stdout)
    return proc.returncode, int(found.group(1)) if found else None, wall, proc.stdout + proc.stderr


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=20.0, help="how long the followed job runs")
    ap.add_argument("--interval", type=float, default=0.0, help="job_follow interval (0: rounds back to back)")
    ap.add_argument("--min-rounds", type=int, default=1000)
    ap.add_argument("--inventory", help="an inventory (e.g. inventory/sandbox) instead of the local connection")
    ap.add_argument("--host", help="the inventory host to run on")
    opts = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as workdir:
        rc, rounds, wall, output = run(opts.seconds, opts.interval, workdir, opts.inventory, opts.host)
    if rc != 0 or rounds is None:
        print(output[-3000:])
        print("FAIL: the play failed (exit %s)" % rc)
        return 1
    print("job %.0f s, interval %g s: %d rounds in %.1f s wall, %.1f ms per round, RecursionError: %s"
          % (opts.seconds, opts.interval, rounds, wall, 1000.0 * opts.seconds / rounds,
             "yes" if "RecursionError" in output else "no"))
    ok = rounds >= opts.min_rounds and "RecursionError" not in output
    print("PASS" if ok else "FAIL: fewer than %d rounds" % opts.min_rounds)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
