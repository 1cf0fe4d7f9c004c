#!/usr/bin/env bash
# Build the attention-server image from docker/Dockerfile (what `make image`
# runs). Uses Docker when a Docker daemon answers, else podman: then the two
# Debian base images are first built locally from Debian packages
# (docker/build-base-image.sh, skipped when podman already has them), since no
# registry may be reachable, and podman builds with --pull=never.
#
# Usage: docker/build-image.sh [TAG...]     (default: attention-server:latest)
#   CONTAINER_ENGINE=docker|podman   force the engine
# The image is built in Docker's format under podman too: the OCI format has
# no HEALTHCHECK, and podman would drop it.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
export CONTAINERS_CONF=${CONTAINERS_CONF:-$here/containers.conf}
[ $# -gt 0 ] || set -- attention-server:latest
tags=()
for t in "$@"; do tags+=(-t "$t"); done

engine=${CONTAINER_ENGINE:-}
if [ -z "$engine" ]; then
    if command -v docker >/dev/null && docker info >/dev/null 2>&1; then engine=docker; else engine=podman; fi
fi

case $engine in
docker)
    exec docker build -f "$root/docker/Dockerfile" "${tags[@]}" "$root"
    ;;
podman)
    command -v podman >/dev/null || { echo "build-image: podman missing: apt-get install -y podman runc debootstrap" >&2; exit 1; }
    "$here/build-base-image.sh"
    # --network=host: RUN apt-get reaches the Debian mirror the way the host does.
    exec podman build --network=host --pull=never --format docker \
        -f "$root/docker/Dockerfile" "${tags[@]}" "$root"
    ;;
*)
    echo "build-image: CONTAINER_ENGINE must be docker or podman, not '$engine'" >&2
    exit 1
    ;;
esac
