#!/usr/bin/env python3
"""Stand-in ``torch`` wheel for sandbox nodes (stdlib only, pure Python, no network).

``build_torch_wheel(wheelhouse, version="2.14.1+cu130", cuda="13.0")`` writes
``torch-2.14.1+cu130-py3-none-any.whl`` (correct dist-info: METADATA, WHEEL, top_level.txt, RECORD) into
``wheelhouse`` and a PEP 503 simple index beside it (``<wheelhouse>/simple/torch/index.html``), so a node
can install it the way a real host installs from https://download.pytorch.org/whl/cu130:
``pip install --index-url file:///srv/sandbox/wheelhouse/simple torch==2.14.1``.
``write_package(dir)`` writes the bare package (for tests that put it on ``sys.path``).

What the package answers (the subset the release probe uses):

* ``torch.__version__`` ("2.14.1+cu130"), ``torch.version.cuda`` ("13.0");
* ``torch.cuda.is_available()``, ``device_count()``, ``get_device_name(i)``, ``get_device_capability(i)``:
  from the node's fake GPUs, read with the nvidia-smi stand-in (``$FAKE_TORCH_NVIDIA_SMI`` or ``nvidia-smi``
  on PATH, which reads /etc/sandbox/gpus.json); no nvidia-smi or an nvidia-smi failure -> no CUDA;
* ``torch.cuda.get_arch_list()``: the archs "this torch was compiled for". Default
  ``sm_75 sm_80 sm_86 sm_90 sm_100 sm_110 sm_120``; overridden by ``$FAKE_TORCH_ARCH_LIST`` (space, comma
  or semicolon separated), else by ``{"arch_list": [...]}`` in ``$FAKE_TORCH_CONFIG`` or
  /etc/sandbox/torch.json -- drop sm_120 there to simulate a torch without SM120 kernels;
* one kernel op: ``torch.ones(4, device="cuda").sum().item() == 4.0``. On a CUDA device whose capability
  (``sm_<major><minor>``) is not in the arch list it raises ``RuntimeError: CUDA error: no kernel image is
  available for execution on the device``, the classic SM120 failure of a build without sm_120 kernels;
* ``torch.utils.cpp_extension._get_cuda_arch_flags`` and ``_get_num_workers``: torch's own functions, their
  text copied from the real torch wheel when the artifacts are built (real_sources.torch_cpp_extension;
  ``cpp_extension=`` below), so a build stand-in that imports them derives nvcc flags from
  ``TORCH_CUDA_ARCH_LIST`` exactly as the real torch does; ``torch.distributed.is_available()`` is False (the
  only part of torch.distributed those functions touch).
"""

from __future__ import annotations

import base64
import hashlib
import html
import sys
import textwrap
import urllib.parse
import zipfile
from pathlib import Path

DEFAULT_VERSION = "2.14.1+cu130"
DEFAULT_CUDA = "13.0"
DEFAULT_ARCH_LIST = ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_110", "sm_120"]
ZIP_DATE = (2026, 1, 1, 0, 0, 0)

_SANDBOX = '''\
"""Where the stand-in torch gets its GPUs and its compiled arch list from (see fake_torch.py)."""
import json
import os
import re
import shutil
import subprocess

DEFAULT_ARCH_LIST = %(arch_list)r
CONFIG_PATH = "/etc/sandbox/torch.json"


def arch_list():
    raw = os.environ.get("FAKE_TORCH_ARCH_LIST")
    if raw is not None:
        return [a for a in re.split(r"[\\s,;]+", raw) if a]
    path = os.environ.get("FAKE_TORCH_CONFIG") or CONFIG_PATH
    if os.path.isfile(path):
        with open(path) as fh:
            cfg = json.load(fh)
        if "arch_list" in cfg:
            return list(cfg["arch_list"])
    return list(DEFAULT_ARCH_LIST)


_GPUS = None


def gpus():
    """[(name, (major, minor)), ...] from the nvidia-smi stand-in; [] when there is no usable GPU."""
    global _GPUS
    if _GPUS is None:
        smi = os.environ.get("FAKE_TORCH_NVIDIA_SMI") or shutil.which("nvidia-smi")
        found = []
        if smi:
            try:
                out = subprocess.run([smi, "--query-gpu=name,compute_cap", "--format=csv,noheader"],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                out = None
            if out is not None and out.returncode == 0:
                for line in out.stdout.decode().splitlines():
                    if "," not in line:
                        continue
                    name, cap = (part.strip() for part in line.rsplit(",", 1))
                    m = re.fullmatch(r"(\\d+)\\.(\\d+)", cap)
                    if m:
                        found.append((name, (int(m.group(1)), int(m.group(2)))))
        _GPUS = found
    return _GPUS
'''

_VERSION = '''\
__version__ = "%(version)s"
cuda = "%(cuda)s"
git_version = "sandbox-stand-in"
debug = False
'''

_INIT = '''\
"""torch (sandbox stand-in): versions, CUDA device queries and one kernel op. Not a tensor library."""
from . import cuda, distributed, version
from .version import __version__


class device:
    def __init__(self, spec="cpu"):
        spec = str(spec)
        kind, _, index = spec.partition(":")
        if kind not in ("cpu", "cuda"):
            raise RuntimeError("Expected one of cpu, cuda device type at start of device string: " + spec)
        self.type = kind
        self.index = int(index) if index else (0 if kind == "cuda" else None)

    def __repr__(self):
        return "device(type=%%r%%s)" %% (self.type, "" if self.index is None else ", index=%%d" %% self.index)


class Tensor:
    def __init__(self, values, device_):
        self._values = [float(v) for v in values]
        self.device = device_

    def _run_kernel(self, op):
        if self.device.type == "cuda":
            cuda._launch(self.device.index, op)

    def sum(self):
        self._run_kernel("reduce_sum")
        return Tensor([sum(self._values)], self.device)

    def item(self):
        if len(self._values) != 1:
            raise RuntimeError("a Tensor with %%d elements cannot be converted to Scalar" %% len(self._values))
        return self._values[0]

    def cpu(self):
        return Tensor(self._values, device("cpu"))

    def tolist(self):
        return list(self._values)

    def __repr__(self):
        dev = "" if self.device.type == "cpu" else ", device='cuda:%%d'" %% self.device.index
        return "tensor(%%r%%s)" %% (self._values if len(self._values) != 1 else self._values[0], dev)


def ones(n, device=None):  # noqa: A002 - torch's own keyword
    dev = globals()["device"](device or "cpu")
    t = Tensor([1.0] * int(n), dev)
    t._run_kernel("fill")
    return t
'''

_CUDA = '''\
"""torch.cuda (sandbox stand-in)."""
from .. import _sandbox


def is_available():
    return bool(_sandbox.gpus())


def device_count():
    return len(_sandbox.gpus())


def _gpu(index):
    gpus = _sandbox.gpus()
    if not gpus:
        raise RuntimeError("Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU "
                           "and installed a driver from http://www.nvidia.com/Download/index.aspx")
    index = 0 if index is None else int(index)
    if not 0 <= index < len(gpus):
        raise RuntimeError("CUDA error: invalid device ordinal")
    return gpus[index]


def get_device_name(device=None):
    return _gpu(device)[0]


def get_device_capability(device=None):
    return _gpu(device)[1]


def get_arch_list():
    if not is_available():
        return []
    return _sandbox.arch_list()


def _launch(index, op):
    major, minor = _gpu(index)[1]
    if "sm_%%d%%d" %% (major, minor) not in _sandbox.arch_list():
        raise RuntimeError("CUDA error: no kernel image is available for execution on the device\\n"
                           "CUDA kernel errors might be asynchronously reported at some other API call, so the "
                           "stacktrace below might be incorrect.\\nFor debugging consider passing "
                           "CUDA_LAUNCH_BLOCKING=1")


def synchronize(device=None):
    _gpu(device)
'''


_DISTRIBUTED = '''\
"""torch.distributed (sandbox stand-in): no distributed backend."""


def is_available():
    return False
'''


def package_files(version=DEFAULT_VERSION, cuda=DEFAULT_CUDA, arch_list=None, cpp_extension=None):
    """{relative path: text} of the ``torch`` package; ``cpp_extension``: the text of torch/utils/cpp_extension.py
    (real_sources.torch_cpp_extension()), left out when None."""
    params = {"version": version, "cuda": cuda, "arch_list": list(arch_list or DEFAULT_ARCH_LIST)}
    files = {
        "torch/__init__.py": _INIT % params,
        "torch/version.py": _VERSION % params,
        "torch/_sandbox.py": _SANDBOX % params,
        "torch/cuda/__init__.py": _CUDA % params,
        "torch/distributed/__init__.py": _DISTRIBUTED,
    }
    if cpp_extension is not None:
        files["torch/utils/__init__.py"] = '"""torch.utils (sandbox stand-in): only cpp_extension."""\n'
        files["torch/utils/cpp_extension.py"] = cpp_extension
    return files


def write_package(dest, **kwargs):
    """Write the bare ``torch`` package under ``dest`` (put ``dest`` on sys.path to import it)."""
    dest = Path(dest)
    for rel, text in package_files(**kwargs).items():
        path = dest / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return dest / "torch"


def _record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d" % (name, digest, len(data))


def wheel_name(version=DEFAULT_VERSION):
    return "torch-%s-py3-none-any.whl" % version


def wheel_bytes(version=DEFAULT_VERSION, cuda=DEFAULT_CUDA, cpp_extension=None):
    """The wheel's entries as [(arcname, bytes)], RECORD last (deterministic)."""
    distinfo = "torch-%s.dist-info" % version
    metadata = textwrap.dedent("""\
        Metadata-Version: 2.1
        Name: torch
        Version: %s
        Summary: Tensors and dynamic neural networks (sandbox stand-in: CUDA %s queries and one kernel op)
        Requires-Python: >=3.9
        """) % (version, cuda)
    files = package_files(version, cuda, cpp_extension=cpp_extension)
    entries = [(rel, text.encode()) for rel, text in sorted(files.items())]
    entries += [(distinfo + "/METADATA", metadata.encode()),
                (distinfo + "/WHEEL", b"Wheel-Version: 1.0\nGenerator: fake_torch\nRoot-Is-Purelib: true\n"
                                      b"Tag: py3-none-any\n"),
                (distinfo + "/top_level.txt", b"torch\n")]
    record = [_record_line(n, d) for n, d in entries] + [distinfo + "/RECORD,,"]
    entries.append((distinfo + "/RECORD", ("\n".join(record) + "\n").encode()))
    return entries


def _write_if_changed(path: Path, data: bytes) -> bool:
    if path.is_file() and path.read_bytes() == data:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    tmp.replace(path)
    return True


def build_torch_wheel(wheelhouse, version=DEFAULT_VERSION, cuda=DEFAULT_CUDA, cpp_extension=None):
    """Write the wheel and the simple index into ``wheelhouse``; return (wheel name, changed)."""
    import io

    wheelhouse = Path(wheelhouse)
    name = wheel_name(version)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for arc, data in wheel_bytes(version, cuda, cpp_extension):
            zi = zipfile.ZipInfo(arc, date_time=ZIP_DATE)
            zi.external_attr = 0o644 << 16
            zi.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(zi, data)
    changed = _write_if_changed(wheelhouse / name, buf.getvalue())
    write_simple_index(wheelhouse)
    return name, changed


def write_simple_index(wheelhouse):
    """PEP 503 index ``<wheelhouse>/simple/`` over every wheel in ``wheelhouse`` (hrefs with sha256)."""
    wheelhouse = Path(wheelhouse)
    projects = {}
    for whl in sorted(wheelhouse.glob("*.whl")):
        project = whl.name.split("-")[0].lower().replace("_", "-")
        projects.setdefault(project, []).append(whl)
    root = ["<!DOCTYPE html>", "<html><body>"]
    for project, wheels in sorted(projects.items()):
        root.append('<a href="%s/">%s</a><br>' % (project, project))
        lines = ["<!DOCTYPE html>", "<html><body>"]
        for whl in wheels:
            sha = hashlib.sha256(whl.read_bytes()).hexdigest()
            href = "../../%s#sha256=%s" % (urllib.parse.quote(whl.name), sha)
            lines.append('<a href="%s">%s</a><br>' % (html.escape(href), html.escape(whl.name)))
        lines.append("</body></html>")
        _write_if_changed(wheelhouse / "simple" / project / "index.html", ("\n".join(lines) + "\n").encode())
    root.append("</body></html>")
    _write_if_changed(wheelhouse / "simple" / "index.html", ("\n".join(root) + "\n").encode())


if __name__ == "__main__":
    print(build_torch_wheel(sys.argv[1] if len(sys.argv) > 1 else ".sandbox/artifacts/wheelhouse")[0])
