"""Offline wheelhouse for the sandbox node: the build backends pip needs for source installs.

On a real host pip fetches setuptools and wheel from the index into an isolated build environment
when it builds FlashInfer or SGLang from source. The sandbox node has no index, so the builds run with
``--no-index --find-links /srv/sandbox/wheelhouse`` and find the same backends here. Downloaded once on
the controller (which reaches PyPI); pinned so the sandbox build is reproducible.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

# Build backends the stand-in sources declare in pyproject.toml [build-system].
PINS = ("setuptools==80.9.0", "wheel==0.45.1")


def build_wheelhouse(out: Path) -> list[str]:
    """Download PINS as py3 wheels into ``out`` unless already there; return the wheel file names."""
    out.mkdir(parents=True, exist_ok=True)
    wanted = {pin.split("==")[0]: pin.split("==")[1] for pin in PINS}
    present = {p.name.split("-")[0].lower(): p.name.split("-")[1] for p in out.glob("*.whl")}
    if any(present.get(name) != version for name, version in wanted.items()):
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
             "--dest", str(out), *PINS],
            check=True,
        )
    return sorted(p.name for p in out.glob("*.whl"))


if __name__ == "__main__":
    print("\n".join(build_wheelhouse(Path(sys.argv[1] if len(sys.argv) > 1 else ".sandbox/artifacts/wheelhouse"))))
