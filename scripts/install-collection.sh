#!/usr/bin/env bash
# Build the collection blackwell.sglang from this checkout (galaxy.yml; build_ignore keeps the harness out) and install
# the tarball into a collections path of its own, as a user would:
#   scripts/install-collection.sh [COLLECTIONS_DIR]      (default .cache/collections)
# Prints the tarball and where it went. The default molecule scenario converges from that copy, and
# ansible-test sanity runs on it (scripts/test.sh).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dest="${1:-$repo/.cache/collections}"
dist="$repo/.cache/dist"
mkdir -p "$dist"
cd "$repo"
tarball="$(ansible-galaxy collection build --force --output-path "$dist" . | sed -n 's/^Created collection for .* at //p')"
[ -f "$tarball" ] || { echo "install-collection: no tarball built" >&2; exit 1; }
rm -rf "$dest/ansible_collections/blackwell/sglang"
ANSIBLE_COLLECTIONS_PATH="$dest" ansible-galaxy collection install --force --no-deps -p "$dest" "$tarball" >/dev/null
echo "install-collection: $tarball -> $dest/ansible_collections/blackwell/sglang"
