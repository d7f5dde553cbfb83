#!/usr/bin/env bash
# Build the sandbox GPU node image: a Debian 12 (bookworm) systemd rootfs made with debootstrap
# --variant=minbase from this host's own apt mirror, imported into podman as
#   localhost/sglang-sandbox-node:<recipe-hash>   and tagged   localhost/sglang-sandbox-node:current
#
# The recipe hash covers this script and packages.txt. An image whose tag matches the hash is reused
# (a no-op run takes well under a second); only a changed recipe rebuilds (~1-2 min).
# Logs go to stderr; the image reference is the only line on stdout:  ref=$(build-image.sh)
#
# Environment:
#   SANDBOX_IMAGE_NAME      image name (default localhost/sglang-sandbox-node)
#   SANDBOX_DEBIAN_MIRROR   Debian mirror URL (default: taken from this host's apt sources)
#   SANDBOX_SECURITY_MIRROR debian-security mirror URL (default: from this host's apt sources, may be empty)
#   SANDBOX_IMAGE_FORCE=1   rebuild even when the image exists
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"
name="${SANDBOX_IMAGE_NAME:-localhost/sglang-sandbox-node}"
suite=bookworm

log() { printf '[build-image] %s\n' "$*" >&2; }
die() { printf '[build-image] ERROR: %s\n' "$*" >&2; exit 1; }

# podman on these hosts needs runc and lowered ulimits: use the project's containers.conf unless the
# caller chose another.
export CONTAINERS_CONF="${CONTAINERS_CONF:-$repo/tests/sandbox/containers.conf}"

[ "$(id -u)" = 0 ] || die "run as root (debootstrap and rootful podman need it)"
for tool in podman debootstrap sha256sum; do
  command -v "$tool" >/dev/null || die "$tool not found; run scripts/bootstrap.sh first"
done

# Package list: packages.txt without comments/blank lines, joined by commas.
mapfile -t packages < <(sed -e 's/#.*//' -e 's/[[:space:]]//g' "$here/packages.txt" | grep -v '^$')
[ "${#packages[@]}" -gt 0 ] || die "no packages in $here/packages.txt"
include="$(IFS=,; echo "${packages[*]}")"

hash="$(cat "$here/build-image.sh" "$here/packages.txt" | sha256sum | cut -c1-12)"
ref="$name:$hash"
current="$name:current"

if [ "${SANDBOX_IMAGE_FORCE:-0}" != 1 ] && podman image exists "$ref"; then
  podman tag "$ref" "$current"
  log "image $ref exists (recipe unchanged); tagged $current"
  echo "$ref"
  exit 0
fi

# --- Mirror discovery: the host's own apt sources (deb822 first, then one-line format). ---
# Prints "URI<TAB>SUITES" for each deb source.
host_sources() {
  local f
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    awk 'BEGIN { RS=""; FS="\n" }
         {
           types=""; uris=""; suites=""; enabled="yes"
           for (i = 1; i <= NF; i++) {
             line = $i; sub(/^[ \t]+/, "", line)
             if (line ~ /^#/) continue
             split(line, kv, ":"); key = tolower(kv[1]); val = substr(line, length(kv[1]) + 2)
             gsub(/^[ \t]+|[ \t]+$/, "", val)
             if (key == "types") types = val
             else if (key == "uris") uris = val
             else if (key == "suites") suites = val
             else if (key == "enabled") enabled = tolower(val)
           }
           if (enabled == "no" || (" " types " ") !~ / deb /) next
           n = split(uris, u, /[ \t]+/)
           for (j = 1; j <= n; j++) print u[j] "\t" suites
         }' "$f"
  done
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] || continue
    awk '$1 == "deb" { i = 2; if ($2 ~ /^\[/) { while ($i !~ /\]$/) i++; i++ } print $i "\t" $(i + 1) }' "$f"
  done
}
pick_mirror() {  # $1 = suite to look for
  host_sources | awk -F'\t' -v s="$1" '{ n = split($2, a, /[ \t]+/); for (i = 1; i <= n; i++) if (a[i] == s) { print $1; exit } }'
}
mirror="${SANDBOX_DEBIAN_MIRROR:-$(pick_mirror "$suite")}"
security="${SANDBOX_SECURITY_MIRROR-$(pick_mirror "$suite-security")}"
mirror="${mirror%/}"; security="${security%/}"
[ -n "$mirror" ] || die "no '$suite' deb source in /etc/apt/sources.list(.d); set SANDBOX_DEBIAN_MIRROR"
log "recipe hash $hash; mirror $mirror${security:+; security $security}"

# --- Build (one at a time per host). ---
exec 9>/var/lock/sglang-sandbox-image.lock
flock 9
if [ "${SANDBOX_IMAGE_FORCE:-0}" != 1 ] && podman image exists "$ref"; then  # built while we waited
  podman tag "$ref" "$current"; echo "$ref"; exit 0
fi

workdir="$(mktemp -d /var/tmp/sglang-sandbox-image.XXXXXX)"
cleanup() { rm -rf --one-file-system "$workdir"; }
trap cleanup EXIT
rootfs="$workdir/rootfs"
start=$(date +%s)

log "debootstrap --variant=minbase $suite (${#packages[@]} extra packages) ..."
debootstrap --variant=minbase --include="$include" "$suite" "$rootfs" "$mirror" \
  >"$workdir/debootstrap.log" 2>&1 || { tail -n 40 "$workdir/debootstrap.log" >&2; die "debootstrap failed"; }

# apt sources inside the image: the same mirror the image was built from.
rm -f "$rootfs/etc/apt/sources.list"
{
  printf 'Types: deb\nURIs: %s\nSuites: %s %s-updates\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
    "$mirror" "$suite" "$suite"
  if [ -n "$security" ]; then
    printf '\nTypes: deb\nURIs: %s\nSuites: %s-security\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
      "$security" "$suite"
  fi
} >"$rootfs/etc/apt/sources.list.d/debian.sources"
printf 'Acquire::Languages "none";\nAPT::Install-Recommends "false";\n' >"$rootfs/etc/apt/apt.conf.d/90sandbox"

# systemd in a container: every container gets its own machine-id; units that need real hardware or
# kernel access a container does not have are masked, so `systemctl is-system-running` says `running`.
: >"$rootfs/etc/machine-id"
rm -f "$rootfs/var/lib/dbus/machine-id"
for unit in \
  systemd-remount-fs.service \
  systemd-firstboot.service \
  sys-kernel-config.mount \
  sys-kernel-debug.mount \
  sys-kernel-tracing.mount \
  sys-fs-fuse-connections.mount \
  systemd-modules-load.service \
  kmod-static-nodes.service \
  systemd-udevd.service \
  systemd-udev-trigger.service \
  systemd-udev-settle.service \
  getty.target \
  console-getty.service \
  e2scrub_reap.service \
  apt-daily.timer \
  apt-daily-upgrade.timer \
  ; do
  ln -sf /dev/null "$rootfs/etc/systemd/system/$unit"
done
# Headless: boot to multi-user.
ln -sf /lib/systemd/system/multi-user.target "$rootfs/etc/systemd/system/default.target"
# journald: keep logs in memory-backed /run, small.
mkdir -p "$rootfs/etc/systemd/journald.conf.d"
printf '[Journal]\nStorage=volatile\nRuntimeMaxUse=64M\n' >"$rootfs/etc/systemd/journald.conf.d/90-sandbox.conf"

chroot "$rootfs" apt-get clean
rm -rf "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/log/*.log "$rootfs"/tmp/* "$rootfs"/var/tmp/*
echo "$hash" >"$rootfs/etc/sglang-sandbox-image"

log "importing rootfs ($(du -sh --one-file-system "$rootfs" | cut -f1)) ..."
tar --numeric-owner --xattrs -C "$rootfs" -c . | podman import --quiet \
  --change 'CMD ["/sbin/init"]' \
  --change 'STOPSIGNAL SIGRTMIN+3' \
  --change "LABEL io.sglang-ansible.sandbox-image=$hash" \
  - "$ref" >/dev/null
podman tag "$ref" "$current"
# Drop images of older recipes (kept when a container still uses one).
podman images --noheading --format '{{.Repository}}:{{.Tag}}' --filter "reference=$name" \
  | grep -vxF -e "$ref" -e "$current" | xargs -r podman rmi >/dev/null 2>&1 || true
log "built $ref (+ $current) in $(( $(date +%s) - start )) s"
echo "$ref"
