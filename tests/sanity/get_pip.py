"""Stand-in for pip's get-pip.py, which ansible-test 2.19 downloads to bootstrap pip into each sanity test's venv.

Its download host is unreachable from the test machines (only the package registries are), and ansible-test names
the fix itself: "The bootstrap script can be manually downloaded and saved to: ~/.ansible/test/cache/get_pip_<v>.py"
(ansible_test/_util/target/setup/requirements.py, bootstrap()). scripts/test.sh saves this file there instead.

ansible-test runs it as __main__ (quiet_pip.py, runpy.run_module) with pip-install arguments, exactly as it runs the
real get-pip.py: the pinned pip and its infrastructure packages. This installs pip from the Python's own ensurepip
wheel, then installs those same pinned packages from the package index.
"""

import ensurepip
import importlib.metadata
import subprocess
import sys

# get-pip.py's own options (pip install has neither): leave setuptools / wheel out of the venv.
OWN = {"--no-setuptools": "setuptools", "--no-wheel": "wheel"}
args = [a for a in sys.argv[1:] if a not in OWN]
leave_out = [OWN[a] for a in sys.argv[1:] if a in OWN]

ensurepip.bootstrap(upgrade=True)
pip = [sys.executable, "-m", "pip"]
rc = subprocess.call(pip + ["install", *args])


def installed(name):
    try:
        importlib.metadata.distribution(name)
        return True
    except importlib.metadata.PackageNotFoundError:
        return False


leave_out = [name for name in leave_out if installed(name)]
if rc == 0 and leave_out:  # ensurepip brings setuptools along on Python 3.11
    rc = subprocess.call(pip + ["uninstall", "--yes", "--quiet", *leave_out])
sys.exit(rc)
