"""Filters for the podman sandbox (tests/sandbox/playbooks/sandbox.yml)."""

from __future__ import annotations


def sandbox_stale_containers(ps_entries, node_names, image_id, alive=(), fresh=False, destroy=False):
    """Return the names of project containers to remove before (re)creating the sandbox nodes.

    ``ps_entries`` is ``podman ps --all --format json`` (dicts with ``Names``, ``State``, ``ImageID``)
    filtered by the project label; ``node_names`` the inventory's node list; ``image_id`` the ID of the
    current node image; ``alive`` the names whose systemd answered ``podman exec NAME systemctl
    is-system-running``. A node is kept only when it is wanted, running, alive (podman's records outlive
    their processes after a machine restart) and on the current image; everything else goes. With
    ``fresh`` or ``destroy`` every project container and every node name goes.
    """
    names_seen = []
    keep = set()
    for entry in ps_entries or []:
        names = entry.get("Names") or []
        name = names[0] if isinstance(names, list) and names else str(names)
        names_seen.append(name)
        if (
            not (fresh or destroy)
            and name in node_names
            and entry.get("State") == "running"
            and name in alive
            and (entry.get("ImageID") or "").replace("sha256:", "") == (image_id or "").replace("sha256:", "")
        ):
            keep.add(name)
    # Node names without the label (a container made by hand) are removed too, unless kept above.
    candidates = list(dict.fromkeys(names_seen + list(node_names)))
    return [n for n in candidates if n not in keep]


def sandbox_gpu_device_files(gpus_json):
    """The device files the NVIDIA driver makes for the stand-in GPUs (``gpus.json``): /dev/nvidiactl (char 195:255),
    /dev/nvidia-uvm (the uvm module's dynamic major, minor 0) and /dev/nvidia<N> (195:N) per GPU, as
    ``[{"name", "major", "minor"}]`` (nvidia-modprobe.c and the driver's nv.c name and number them so)."""
    gpus = (gpus_json or {}).get("gpus") or []
    return ([{"name": "nvidiactl", "major": 195, "minor": 255}, {"name": "nvidia-uvm", "major": 509, "minor": 0}]
            + [{"name": "nvidia%d" % i, "major": 195, "minor": i} for i in range(len(gpus))])


class FilterModule:
    def filters(self):
        return {"sandbox_stale_containers": sandbox_stale_containers,
                "sandbox_gpu_device_files": sandbox_gpu_device_files}
