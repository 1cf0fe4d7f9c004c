#!/usr/bin/env bash
# Build the Debian base images the Dockerfile starts FROM, locally, from
# Debian packages, and import them into podman:
#
#   debian:bookworm       (and docker.io/library/debian:bookworm)
#   debian:bookworm-slim  (and docker.io/library/debian:bookworm-slim)
#
# Why: where no container registry is reachable (air-gapped sites, the
# project's CI machines) `FROM debian:bookworm-slim` cannot be pulled. A
# debootstrap of the same suite from the Debian mirror apt already uses gives
# an equivalent image, and the Dockerfile stays the standard one.
#
# Both images come from one `debootstrap --variant=minbase` run: the first is
# that tree as it is, the second the same tree with documentation, man pages
# and locales removed and dpkg told not to install them again (as Debian's
# own -slim images do).
#
# Usage: docker/build-base-image.sh [--force]
#   --force          rebuild even if podman already has both images
#   DEBIAN_MIRROR    mirror to use (default: the one in apt's sources)
#   DEBIAN_SECURITY  security mirror written into the image's apt sources
#                    (default: the one in apt's sources, if any)
# Needs root (debootstrap), podman and debootstrap (`make image` installs them).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export CONTAINERS_CONF=${CONTAINERS_CONF:-$here/containers.conf}
suite=bookworm
force=0
[ "${1:-}" = --force ] && force=1

log() { printf 'build-base-image: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

if [ $force = 0 ] && podman image exists "debian:$suite" && podman image exists "debian:$suite-slim"; then
    log "debian:$suite and debian:$suite-slim already in podman; nothing to do (--force rebuilds)"
    exit 0
fi
[ "$(id -u)" = 0 ] || die "debootstrap needs root"
command -v debootstrap >/dev/null || die "debootstrap missing: apt-get install -y debootstrap"
command -v podman >/dev/null || die "podman missing: apt-get install -y podman runc"

# --------------------------------------------------------- the apt mirror
# Print the first URI that apt uses for suite $1, from the deb822 files
# (*.sources) and then the one-line format (sources.list, *.list).
apt_uri_for_suite() {
    local want=$1 f uris
    # collected whole, not piped into head: under pipefail a loop that prints
    # again after head has its line takes SIGPIPE and fails the pipeline
    uris=$(for f in /etc/apt/sources.list.d/*.sources; do
        [ -r "$f" ] || continue
        # One paragraph per stanza; take URIs of a stanza whose Suites has $want.
        awk -v want="$want" '
            BEGIN { RS = ""; FS = "\n" }
            {
                uris = ""; hit = 0; enabled = 1
                for (i = 1; i <= NF; i++) {
                    line = $i
                    if (line ~ /^[ \t]*#/) continue
                    if (line ~ /^Enabled:[ \t]*no/) enabled = 0
                    if (line ~ /^URIs:/) { sub(/^URIs:[ \t]*/, "", line); uris = line }
                    if (line ~ /^Suites:/) {
                        sub(/^Suites:[ \t]*/, "", line)
                        n = split(line, s, /[ \t]+/)
                        for (j = 1; j <= n; j++) if (s[j] == want) hit = 1
                    }
                }
                if (hit && enabled && uris != "") { split(uris, u, /[ \t]+/); print u[1]; exit }
            }' "$f"
    done)
    [ -n "$uris" ] || uris=$(for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
        [ -r "$f" ] || continue
        # deb [options] URI SUITE COMPONENTS...
        awk -v want="$want" '
            $1 == "deb" {
                i = 2
                if ($i ~ /^\[/) { while (i <= NF && $i !~ /\]$/) i++; i++ }
                if ($(i + 1) == want) { print $i; exit }
            }' "$f"
    done)
    [ -n "$uris" ] || return 1
    echo "${uris%%$'\n'*}"
}

mirror=${DEBIAN_MIRROR:-$(apt_uri_for_suite "$suite" || true)}
security=${DEBIAN_SECURITY:-$(apt_uri_for_suite "$suite-security" || true)}
[ -n "$mirror" ] || die "no Debian mirror for '$suite' in /etc/apt/sources*; set DEBIAN_MIRROR"
log "mirror: $mirror${security:+ (security: $security)}"

# ------------------------------------------------------------ debootstrap
work=$(mktemp -d "${TMPDIR:-/var/tmp}/attn-base.XXXXXX")
trap 'rm -rf "$work"' EXIT
rootfs=$work/rootfs
arch=$(dpkg --print-architecture)

log "debootstrap --variant=minbase $suite ($arch) ..."
debootstrap --variant=minbase --arch="$arch" "$suite" "$rootfs" "$mirror" >"$work/debootstrap.log" 2>&1 \
    || { tail -n 30 "$work/debootstrap.log" >&2; die "debootstrap failed (log above)"; }

# apt sources in the image: the same mirror, the way Debian's images write them.
rm -f "$rootfs/etc/apt/sources.list"
{
    printf 'Types: deb\nURIs: %s\nSuites: %s %s-updates\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
        "$mirror" "$suite" "$suite"
    if [ -n "$security" ]; then
        printf '\nTypes: deb\nURIs: %s\nSuites: %s-security\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
            "$security" "$suite"
    fi
} >"$rootfs/etc/apt/sources.list.d/debian.sources"

# apt inside containers: drop downloaded .debs after installing, skip
# translations, and do not pull in recommended packages behind the user's back.
cat >"$rootfs/etc/apt/apt.conf.d/docker-clean" <<'EOF'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
EOF
echo 'Acquire::Languages "none";' >"$rootfs/etc/apt/apt.conf.d/docker-no-languages"
echo 'APT::AutoRemove::SuggestsImportant "false";' >"$rootfs/etc/apt/apt.conf.d/docker-autoremove-suggests"
# Policy: no daemons start during image builds.
printf '#!/bin/sh\nexit 101\n' >"$rootfs/usr/sbin/policy-rc.d"
chmod 755 "$rootfs/usr/sbin/policy-rc.d"

# Empty what a running system fills in and an image must not carry.
clean_tree() {
    rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/* "$1"/var/log/* "$1"/tmp/* "$1"/var/tmp/* \
        "$1"/debootstrap
    : >"$1/etc/machine-id"
}
clean_tree "$rootfs"

import() { # import TREE NAME: tar the tree into podman as NAME and its docker.io alias
    local tree=$1 name=$2
    log "importing $name"
    tar --numeric-owner --xattrs -C "$tree" \
        --exclude='./dev/*' --exclude='./proc/*' --exclude='./sys/*' --exclude='./run/*' \
        -cf - . | podman import -q --change 'CMD ["bash"]' - "$name" >/dev/null
    podman tag "$name" "docker.io/library/$name"
}

import "$rootfs" "debian:$suite"

# ------------------------------------------------------------------ slim
# The path-exclude rules make dpkg skip these paths in every later install too.
cat >"$rootfs/etc/dpkg/dpkg.cfg.d/docker-slim" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
EOF
find "$rootfs/usr/share/doc" -mindepth 1 ! -name copyright ! -type d -delete 2>/dev/null || true
find "$rootfs/usr/share/doc" -mindepth 1 -type d -empty -delete 2>/dev/null || true
rm -rf "$rootfs"/usr/share/man/* "$rootfs"/usr/share/groff/* "$rootfs"/usr/share/info/* \
    "$rootfs"/usr/share/lintian/* "$rootfs"/usr/share/linda/*
find "$rootfs/usr/share/locale" -mindepth 1 -maxdepth 1 ! -name locale.alias -exec rm -rf {} + 2>/dev/null || true

import "$rootfs" "debian:$suite-slim"

podman image ls --format '{{.Repository}}:{{.Tag}} {{.Size}}' | grep -E "debian:$suite(-slim)?( |$)" >&2 || true
log "done"
