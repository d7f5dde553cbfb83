#!/usr/bin/env bash
# Idempotent set-up of a controller / CI machine (fresh Debian 12, as root or with sudo):
#   1. apt packages for the podman sandbox (skipped when all are installed),
#   2. .venv/ at the repo root from requirements.txt (rebuilt only when requirements.txt changed;
#      the sha256 of requirements.txt is stamped in .venv/.requirements.sha256),
#   3. promtool from the distribution's prometheus package into .venv/bin (the alert rules' unit tests).
# Collections (containers.podman, community.general, ansible.posix) come bundled with the pinned
# `ansible` package; see requirements.yml.
# Prints one line per step saying what it did. Then: `source scripts/env.sh`.
#
# Environment:
#   BOOTSTRAP_PYTHON   interpreter for the venv (default /usr/bin/python3, else python3 on PATH)
#   BOOTSTRAP_GALAXY=1 also run `ansible-galaxy collection install -r requirements.yml` (needs Galaxy)
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
say() { printf '[bootstrap] %s\n' "$*"; }
die() { printf '[bootstrap] ERROR: %s\n' "$*" >&2; exit 1; }
t0=$(date +%s)

# --- 1. apt packages ---------------------------------------------------------------------------------
apt_packages=(
  podman runc debootstrap uidmap slirp4netns fuse-overlayfs  # rootful podman with runc (crun fails here)
  netavark aardvark-dns iptables                             # bridge networks with container DNS
  dpkg-dev apt-utils gnupg git                               # fake apt repos / source repos in tests
  g++                                                        # host compiler of the real nvcc in unit/contract tests
  shellcheck                                                 # ansible-test sanity's shellcheck test (skipped without)
  nginx                                                      # the gateway's real config (tests/standins/test_gateway_nginx.py)
  python3 python3-venv                                       # the controller venv
)
missing=()
for p in "${apt_packages[@]}"; do
  [ "$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)" = installed ] || missing+=("$p")
done
if [ "${#missing[@]}" -eq 0 ]; then
  say "apt: all ${#apt_packages[@]} packages present, nothing to install"
else
  sudo=""
  if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null || die "need root or sudo to install: ${missing[*]}"
    sudo="sudo"
  fi
  say "apt: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  # runc is named explicitly so apt does not pick crun for podman's `crun | runc` dependency.
  $sudo apt-get install -y -qq "${apt_packages[@]}" >/dev/null
  say "apt: installed ${#missing[@]} package(s)"
fi

# --- 2. controller venv ------------------------------------------------------------------------------
venv="$repo/.venv"
stamp="$venv/.requirements.sha256"
want="$(sha256sum "$repo/requirements.txt" | cut -d' ' -f1)"
if [ -x "$venv/bin/python" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  say "venv: $venv up to date (requirements.txt ${want:0:12})"
else
  py="${BOOTSTRAP_PYTHON:-}"
  if [ -z "$py" ]; then
    if [ -x /usr/bin/python3 ]; then py=/usr/bin/python3; else py="$(command -v python3)"; fi
  fi
  [ -n "$py" ] || die "no python3 found"
  if [ -d "$venv" ]; then say "venv: requirements.txt changed, rebuilding $venv"; else say "venv: creating $venv"; fi
  rm -rf "$venv"
  "$py" -m venv "$venv"
  if ! "$venv/bin/python" -m pip install --disable-pip-version-check -r "$repo/requirements.txt" \
      >"$venv/pip-install.log" 2>&1; then
    tail -n 30 "$venv/pip-install.log" >&2
    die "pip install -r requirements.txt failed (full log: $venv/pip-install.log)"
  fi
  echo "$want" >"$stamp"
  say "venv: installed requirements.txt (${want:0:12}) with $("$venv/bin/python" --version)"
fi

# --- 3. promtool -------------------------------------------------------------------------------------
# The unit tests check and test the monitoring role's alert rules with the real promtool, from the distribution's
# prometheus package. Its files are unpacked, not installed: installing the package on a machine whose PID 1 is not
# systemd starts a Prometheus daemon through the package's init.d script.
if "$venv/bin/promtool" --version >/dev/null 2>&1; then
  say "promtool: $("$venv/bin/promtool" --version 2>&1 | head -1)"
else
  tmp="$(mktemp -d)"
  if ! (cd "$tmp" && apt-get download -qq prometheus >/dev/null 2>&1); then
    sudo=""
    [ "$(id -u)" = 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    (cd "$tmp" && apt-get download -qq prometheus >/dev/null 2>&1) || die "apt-get download prometheus failed"
  fi
  dpkg-deb -x "$tmp"/prometheus_*.deb "$tmp/root"
  install -m 0755 "$tmp/root/usr/bin/promtool" "$venv/bin/promtool"
  rm -rf "$tmp"
  say "promtool: unpacked from $(cd "$venv" && bin/promtool --version 2>&1 | head -1)"
fi

# --- 4. collections ----------------------------------------------------------------------------------
if [ "${BOOTSTRAP_GALAXY:-0}" = 1 ]; then
  "$venv/bin/ansible-galaxy" collection install -r "$repo/requirements.yml"
  say "collections: installed from requirements.yml"
else
  say "collections: using those bundled with the ansible package ($("$venv/bin/python" - <<'PY'
import json, pathlib, ansible_collections
root = pathlib.Path(ansible_collections.__path__[0])
out = []
for ns, name in (("containers", "podman"), ("community", "general"), ("ansible", "posix")):
    out.append(f"{ns}.{name} {json.loads((root / ns / name / 'MANIFEST.json').read_text())['collection_info']['version']}")
print(", ".join(out))
PY
))"
fi
say "done in $(( $(date +%s) - t0 )) s; next: source scripts/env.sh"
