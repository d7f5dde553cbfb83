"""Where the ranks of one node wait for each other, as the collectives of SGLang 0.5.23 make them.

Real ranks meet in NCCL/gloo collectives: the process groups at ``Init parallel`` (``distributed/bootstrap.py``),
the distributed free-memory probe behind ``Memory baseline taken``, the MIN all-reduce that sizes the KV pool after
the weights, the all-reduces inside every captured graph and the HiCache auto-size MIN all-reduce. So a rank that
hangs holds every other rank at the next meeting point (their logs stop at ``Load weight end``, not at ready), and a
rank that died leaves the others waiting until the parent kills the tree. ``barrier(name)`` is that meeting: each
rank drops a file ``<name>.<rank>`` in a directory of this launch and waits for all ``tp_size`` files.
"""
import os
import time

from sglang.srt import sim_state


def barrier(cfg, name, poll_s=0.01, value=None):
    """Wait for every rank at ``name``; with ``value``, an all-gather of it: returns the list of every rank's value
    (what an all-reduce is built from), else None."""
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
