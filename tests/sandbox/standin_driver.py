"""The NVIDIA driver, as the real torch sees it, on a sandbox node (stdlib only): the node's sitecustomize.

A sandbox node has the real torch 2.14.1+cu130 in its releases (tests/sandbox/closure.py) but no GPU and no driver
(libcuda.so.1), so the real ``torch.cuda.is_available()`` is False and every CUDA call fails. A real host's driver is
system-wide; so is this stand-in: tests/sandbox/playbooks/sandbox_prepare.yml installs it as Debian's
``/etc/python3.11/sitecustomize.py`` (the conffile ``/usr/lib/python3.11/sitecustomize.py`` links to, imported by every
python3.11 process, a release venv's included). It does nothing until a process imports ``torch``; then it answers
what the driver would, from the GPUs of the nvidia-smi stand-in (``/etc/sandbox/gpus.json``, the same source the
sandbox's nvidia-smi and its monitoring read):

* ``torch.cuda.is_available()``, ``device_count()``, ``get_device_name(i)``, ``get_device_capability(i)``, honouring
  ``CUDA_VISIBLE_DEVICES`` (indices); no GPU, or an nvidia-smi failure (the faults scenario's "driver gone"): no CUDA,
  and the real torch's own words for it (``Found no NVIDIA driver on your system...``);
* ``torch.cuda.get_arch_list()`` stays the real one: the real torch's ``torch._C._cuda_getArchFlags()`` (what the
  wheel was compiled for), asked only when ``is_available()`` says yes, as torch/cuda/__init__.py does;
* one kernel launch: ``torch.ones(..., device="cuda")`` is computed on the CPU when the real arch list has an image
  for the GPU (SASS of the same major and a minor not above the GPU's, or PTX not above it); otherwise it raises what
  the real runtime raises, ``CUDA error: no kernel image is available for execution on the device``.

Where the texts come from: both are torch 2.14.1+cu130's own, in its ``torch/lib/libc10_cuda.so`` (the wheel's file;
read with ``strings`` on this project's machine): "Found no NVIDIA driver on your system..." (raised by
``torch._C._cuda_init`` when no driver loads, seen verbatim here from the real torch without this stand-in), and the
two lines after the CUDA error ("CUDA kernel errors might be asynchronously reported..." and "For debugging consider
passing CUDA_LAUNCH_BLOCKING=1"); "no kernel image is available for execution on the device" is the CUDA runtime's
``cudaGetErrorString(cudaErrorNoKernelImageForDevice)``, which torch prefixes with "CUDA error: ".

Everything else of torch is the real package. Nothing here runs on a real host.
"""

import importlib.abc
import importlib.util
import os
import re
import shutil
import subprocess
import sys

NO_DRIVER = ("Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU and installed a driver "
             "from http://www.nvidia.com/Download/index.aspx")
NO_KERNEL_IMAGE = ("CUDA error: no kernel image is available for execution on the device\n"
                   "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace "
                   "below might be incorrect.\nFor debugging consider passing CUDA_LAUNCH_BLOCKING=1")

_GPUS = None


def gpus():
    """[(name, (major, minor)), ...] the process may use: the nvidia-smi stand-in's GPUs, CUDA_VISIBLE_DEVICES
    applied; [] without a usable GPU."""
    global _GPUS
    if _GPUS is None:
        found = []
        smi = shutil.which("nvidia-smi")
        if smi:
            try:
                proc = subprocess.run([smi, "--query-gpu=name,compute_cap", "--format=csv,noheader"],
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30, check=False)
            except (OSError, subprocess.TimeoutExpired):
                proc = None
            if proc is not None and proc.returncode == 0:
                for line in proc.stdout.decode(errors="replace").splitlines():
                    name, _, cap = line.rpartition(",")
                    match = re.fullmatch(r"\s*(\d+)\.(\d+)\s*", cap)
                    if name and match:
                        found.append((name.strip(), (int(match.group(1)), int(match.group(2)))))
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        if visible is not None:
            picked = []
            for part in visible.split(","):
                if not part.strip().isdigit() or int(part) >= len(found):
                    break  # the runtime stops at the first invalid entry
                picked.append(found[int(part)])
            found = picked
        _GPUS = found
    return _GPUS


def _gpu(device):
    found = gpus()
    if not found:
        raise RuntimeError(NO_DRIVER)
    if device is None:
        index = 0
    elif isinstance(device, int):
        index = device
    elif isinstance(device, str):
        index = int(device.split(":", 1)[1]) if ":" in device else 0
    else:  # a torch.device
        index = 0 if device.index is None else int(device.index)
    if not 0 <= index < len(found):
        raise RuntimeError("CUDA error: invalid device ordinal")
    return found[index]


def has_image(arch_list, capability):
    """Does an arch list (torch's: "sm_120", "compute_120", ...) hold code the GPU of ``capability`` runs?"""
    major, minor = capability
    for arch in arch_list:
        match = re.fullmatch(r"(sm|compute)_(\d+?)(\d)[af]?", str(arch))
        if not match:
            continue
        kind, a_major, a_minor = match.group(1), int(match.group(2)), int(match.group(3))
        if kind == "sm" and a_major == major and a_minor <= minor:
            return True
        if kind == "compute" and (a_major, a_minor) <= (major, minor):
            return True
    return False


def install_into(torch):
    """Answer torch.cuda's device queries and one kernel launch as the driver would (see the module docstring)."""
    cuda = torch.cuda
    cuda.is_available = lambda: bool(gpus())
    cuda.device_count = lambda: len(gpus())
    cuda.get_device_name = lambda device=None: _gpu(device)[0]
    cuda.get_device_capability = lambda device=None: _gpu(device)[1]
    real_ones = torch.ones

    def ones(*size, **kwargs):
        device = kwargs.get("device")
        if device is not None and str(getattr(device, "type", device)).startswith("cuda"):
            capability = _gpu(device)[1]
            if not has_image(cuda.get_arch_list(), capability):
                raise RuntimeError(NO_KERNEL_IMAGE)
            kwargs["device"] = "cpu"
        return real_ones(*size, **kwargs)

    torch.ones = ones


class _TorchHook(importlib.abc.MetaPathFinder):
    """Runs install_into once the real torch has been imported."""

    def find_spec(self, name, path=None, target=None):
        if name != "torch":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec("torch")
        if spec is None or spec.loader is None:
            return spec
        exec_module = spec.loader.exec_module

        def exec_and_install(module):
            exec_module(module)
            # The stand-in torch of the scenarios that build from the stand-in sources (fake_torch.py) answers these
            # itself, from the same GPUs.
            if getattr(getattr(module, "version", None), "git_version", None) != "sandbox-stand-in":
                install_into(module)

        spec.loader.exec_module = exec_and_install
        return spec


if "torch" not in sys.modules and not any(isinstance(f, _TorchHook) for f in sys.meta_path):
    sys.meta_path.insert(0, _TorchHook())
