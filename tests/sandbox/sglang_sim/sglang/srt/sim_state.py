"""What each simulated GPU process publishes about itself, for the GPU stand-in (``fake_nvidia_smi.py``).

A real GPU knows which processes hold it and how much memory each uses; the simulator cannot touch a GPU, so each
scheduler writes a small JSON file ``$SGLANG_SIM_STATE_DIR/<pid>.json`` (default ``/tmp/sglang-sim``) at every
phase change and memory step, atomically (write + rename):

    {"pid": 1234, "title": "sglang::scheduler_TP3", "rank": "TP3", "gpu_id": 3,
     "cuda_visible_devices": "0,1,2,3,4,5,6,7" | null, "phase": "loading_weights",
     "gpu_memory_used_mib": 71234, "gpu_busy": true, "host_pinned_bytes": 0, "updated": 1764582000.1}

``phase`` uses the names of the product's log phases; ``gpu_id`` is the index among the visible devices (as CUDA
numbers them). A reader must check that ``pid`` is alive: a killed process leaves its file behind, as a dead
process leaves nothing on a real GPU.
"""
import json
import os
import time

from sglang.srt import sim_config

_STATE = {}


def state_dir():
    return sim_config.get("SGLANG_SIM_STATE_DIR") or "/tmp/sglang-sim"


def publish(**fields):
    """Merge ``fields`` into this process's state and write it out (errors are ignored: a read-only or missing
    directory must not break the server)."""
    _STATE.update(fields)
    _STATE.update(pid=os.getpid(), updated=time.time(),
                  cuda_visible_devices=os.environ.get("CUDA_VISIBLE_DEVICES"))
    directory = state_dir()
    try:
        os.makedirs(directory, exist_ok=True)
        try:
            os.chmod(directory, 0o1777)
        except OSError:
            pass
        path = os.path.join(directory, "%d.json" % os.getpid())
        tmp = path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(_STATE, fh)
        os.replace(tmp, path)
    except OSError:
        pass


def remove():
    try:
        os.unlink(os.path.join(state_dir(), "%d.json" % os.getpid()))
    except OSError:
        pass


def others():
    """The published state of every other live process (a foreign GPU holder, another server's ranks): list of dicts."""
    out = []
    directory = state_dir()
    try:
        names = os.listdir(directory)
    except OSError:
        return out
    for name in names:
        if not name.endswith(".json"):
            continue
        try:
            with open(os.path.join(directory, name), encoding="utf-8") as fh:
                entry = json.load(fh)
            pid = int(entry["pid"])
            if pid == os.getpid():
                continue
            with open("/proc/%d/stat" % pid) as fh:
                if fh.read().rsplit(")", 1)[1].split()[0] in ("Z", "X"):
                    continue  # exited (not yet reaped): its GPU memory is released
        except (OSError, ValueError, KeyError, TypeError, IndexError):
            continue  # gone (a killed process leaves its file), unreadable, or being replaced
        out.append(entry)
    return out
