#!/usr/bin/env python3
"""Build a bare git repository that looks like SGLang's source repo, holding the simulator.

Tree: ``python/`` (the simulator package: pyproject.toml + sglang/, with cli_snapshot.json inside
the package), ``README.md``; one commit with fixed author/committer identity and dates, and a tag.
Same inputs -> same commit sha (idempotent).

    python tests/sandbox/sglang_sim/build_repo.py GIT_DIR [--tag v0.5.23] [--snapshot PATH]
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parents[2]
DEFAULT_SNAPSHOT = REPO_ROOT / "plugins" / "data" / "sglang_cli_0.5.23.json"
FIXED_DATE = "2026-01-01T00:00:00+0000"
README = """# sglang (simulator)

Test stand-in for SGLang {tag}: `python/` is installable with
`pip install --no-build-isolation --no-index ./python` and provides `python -m sglang.launch_server`.
Built by tests/sandbox/sglang_sim/build_repo.py; see python/sglang/README_SIM.md.
"""


def _git(args, cwd=None, env=None):
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout.strip()


def _copy_package(dst: Path, snapshot: Path):
    src = HERE
    shutil.copy2(src / "pyproject.toml", dst / "pyproject.toml")
    shutil.copy2(src / "sim_build_backend.py", dst / "sim_build_backend.py")
    shutil.copytree(src / "sglang", dst / "sglang",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "cli_snapshot.json"))
    shutil.copy2(snapshot, dst / "sglang" / "cli_snapshot.json")
    # CUDA kernels the build compiles with the real nvcc (sim_build_backend._cuda_kernels)
    shutil.copy2(src.parent / "standin_cuda.py", dst / "sandbox_cuda.py")
    shutil.copytree(src.parent / "kernels", dst / "csrc")


def build_sglang_repo(git_dir: Path, tag: str = "v0.5.23", snapshot: Path = DEFAULT_SNAPSHOT) -> str:
    git_dir, snapshot = Path(git_dir), Path(snapshot)
    if not snapshot.is_file():
        raise FileNotFoundError(f"CLI snapshot not found: {snapshot} (run tests/contract/export_sglang_cli.py)")
    if not (git_dir / "HEAD").exists():
        git_dir.mkdir(parents=True, exist_ok=True)
        _git(["init", "-q", "--bare", str(git_dir)])
    env = dict(os.environ, GIT_AUTHOR_NAME="sglang-sim", GIT_AUTHOR_EMAIL="sim@example.invalid",
               GIT_COMMITTER_NAME="sglang-sim", GIT_COMMITTER_EMAIL="sim@example.invalid",
               GIT_AUTHOR_DATE=FIXED_DATE, GIT_COMMITTER_DATE=FIXED_DATE, GIT_CONFIG_NOSYSTEM="1",
               HOME=tempfile.gettempdir())
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) / "work"
        (work / "python").mkdir(parents=True)
        _copy_package(work / "python", snapshot)
        (work / "README.md").write_text(README.format(tag=tag))
        for p in sorted(work.rglob("*")):  # stable modes regardless of umask
            if p.is_file():
                p.chmod(0o644)
        env_idx = dict(env, GIT_INDEX_FILE=str(Path(tmp) / "index"), GIT_DIR=str(git_dir), GIT_WORK_TREE=str(work))
        _git(["add", "-A", "."], cwd=work, env=env_idx)
        tree = _git(["write-tree"], cwd=work, env=env_idx)
        commit = subprocess.run(["git", "commit-tree", tree, "-m", f"sglang simulator {tag}"], cwd=work,
                                env=env_idx, check=True, capture_output=True, text=True).stdout.strip()
    _git(["--git-dir", str(git_dir), "update-ref", "refs/heads/main", commit], env=env)
    _git(["--git-dir", str(git_dir), "symbolic-ref", "HEAD", "refs/heads/main"], env=env)
    _git(["--git-dir", str(git_dir), "tag", "-f", tag, commit], env=env)
    return commit


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("git_dir", type=Path)
    ap.add_argument("--tag", default="v0.5.23")
    ap.add_argument("--snapshot", type=Path, default=DEFAULT_SNAPSHOT)
    a = ap.parse_args(argv)
    print(build_sglang_repo(a.git_dir, a.tag, a.snapshot))
    return 0


if __name__ == "__main__":
    sys.exit(main())
