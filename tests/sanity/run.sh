#!/usr/bin/env bash
# ansible-test sanity on the collection as shipped: built from this checkout and installed into a collections path
# outside it (scripts/install-collection.sh), because ansible-test lists a collection's files with git when the
# directory is inside a git work tree, and the checkout's .cache/ is ignored there.
# Usage: tests/sanity/run.sh [ansible-test sanity options, e.g. --test pep8]
# The ignore file ships with the collection: tests/sanity/ignore-<core major.minor>.txt (each line says why).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# ansible-test bootstraps pip into each test's venv with a script from a host these machines cannot reach; it reads
# a copy from its cache instead (tests/sanity/get_pip.py says how). The version is ansible-test's pinned pip.
pip_version="$(python - <<'PY'
import inspect, re
from ansible_test._internal import python_requirements as pr
print(re.search(r"pip='([0-9.]+)'", inspect.getsource(pr.get_venv_packages)).group(1))
PY
)"
cache="$HOME/.ansible/test/cache"
mkdir -p "$cache"
cp "$repo/tests/sanity/get_pip.py" "$cache/get_pip_${pip_version//./_}.py"
root="$(mktemp -d "${TMPDIR:-/tmp}/blackwell-sglang-sanity.XXXXXX")"
trap 'rm -rf "$root"' EXIT
"$repo/scripts/install-collection.sh" "$root" >/dev/null
cd "$root/ansible_collections/blackwell/sglang"
py="$(python -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
ansible-test sanity --venv --python "$py" --color no "$@"
