"""What scripts/sandbox-deploy.sh does before its first playbook, for the benchmarks that start sandbox nodes.

Builds the stand-ins (.sandbox/artifacts, tests/sandbox/build_artifacts.py) and the node image
(tests/sandbox/image/build-image.sh); each is a no-op when its recipe is unchanged. Untimed by its callers.
"""

import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def prepare():
    """Build the stand-ins and the node image; raises subprocess.CalledProcessError (with the tool's stderr on the
    terminal) when either fails."""
    for argv in (["python", "tests/sandbox/build_artifacts.py", "--out", ".sandbox/artifacts"],
                 ["tests/sandbox/image/build-image.sh"]):
        subprocess.run(argv, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
