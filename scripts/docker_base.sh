#!/usr/bin/env bash
# Builds a Debian base image for the trainer images from Debian packages alone
# (debootstrap + docker import), for machines that cannot pull from any registry.
# It holds what the Dockerfiles need of a base: python3.11 with venv, CA certificates, useradd, and libpython3.11
# (the shared libpython that torch_xla's _XLAC links against, which python:3.11-slim has and Debian's python3 lacks).
#
#   scripts/docker_base.sh [TAG]          # default gantry-base:bookworm; quick no-op when TAG exists
#   FORCE=1 scripts/docker_base.sh        # rebuild even if TAG exists
#   DEBIAN_MIRROR=http://mirror.example/debian scripts/docker_base.sh
#
# Then: docker build --build-arg BASE_IMAGE=gantry-base:bookworm -f docker/Dockerfile .
set -euo pipefail

tag="${1:-${GANTRY_BASE_IMAGE:-gantry-base:bookworm}}"
suite="${DEBIAN_SUITE:-bookworm}"   # bookworm's python3 is 3.11, the CPython the torch wheels target (cp311)
mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
recipe=2   # bump when what goes into the image changes, so cached bases built by an older recipe are redone

if ! docker info >/dev/null 2>&1; then
    echo "docker_base: no Docker engine answers: start Docker Desktop or \`sudo systemctl start docker\`" >&2
    exit 1
fi
cached="$(docker image inspect -f '{{ index .Config.Labels "gantry.base-recipe" }}' "$tag" 2>/dev/null || true)"
if [ "${FORCE:-0}" != 1 ] && [ "$cached" = "$recipe" ]; then
    echo "docker_base: $tag already exists (FORCE=1 rebuilds it)"
    exit 0
fi
if ! command -v debootstrap >/dev/null 2>&1; then
    echo "docker_base: debootstrap is missing: \`sudo apt-get install debootstrap\`" >&2
    exit 1
fi
if [ "$(id -u)" != 0 ]; then
    echo "docker_base: debootstrap needs root: run \`sudo $0\`" >&2
    exit 1
fi

root="$(mktemp -d /tmp/gantry-base.XXXXXX)"
trap 'rm -rf "$root"' EXIT
start=$(date +%s)
echo "docker_base: debootstrap $suite from $mirror into $root"
debootstrap --variant=minbase --include=python3,python3-venv,libpython3.11,ca-certificates,passwd \
    "$suite" "$root" "$mirror" >"$root.log" 2>&1 || { tail -n 30 "$root.log" >&2; exit 1; }
rm -f "$root.log"
# What an image never needs: package caches, lists, docs, man pages.
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* \
    "$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/info/*
chmod 755 "$root"   # mktemp made it 0700, and the tree's root becomes the image's /
tar --numeric-owner -C "$root" -c . | docker import \
    --change 'ENV LANG=C.UTF-8' \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'CMD ["/bin/bash"]' \
    --change "LABEL gantry.base-recipe=$recipe" \
    --change "LABEL org.opencontainers.image.description=\"Debian $suite minbase + python3 venv (gantry scripts/docker_base.sh)\"" \
    - "$tag" >/dev/null
echo "docker_base: built $tag in $(( $(date +%s) - start )) s, $(docker image inspect -f '{{.Size}}' "$tag" | awk '{printf "%.0f MB", $1/1e6}')"
