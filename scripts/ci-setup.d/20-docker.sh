#!/usr/bin/env bash
# Docker engine for tests/docker: Debian's docker.io, dockerd started by hand (no systemd here)
# with vfs storage, no iptables and no bridge (containers use the host network), and a base image
# bootstrapped from Debian packages because no registry can be pulled from.
# Idempotent: quick when the engine answers and the base image exists.
set -euo pipefail
cd "$(dirname "$0")/../.."

log=/var/log/gantry-dockerd.log
export DEBIAN_FRONTEND=noninteractive

# docker-compose (v1, Debian's) only validates docker/compose.yaml in tests/docker.
if ! command -v dockerd >/dev/null 2>&1 || ! command -v debootstrap >/dev/null 2>&1 \
        || ! command -v docker-compose >/dev/null 2>&1 || ! command -v docker-registry >/dev/null 2>&1; then
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends docker.io debootstrap docker-compose docker-registry >/dev/null
    echo "20-docker: installed docker.io $(dockerd --version | awk '{print $3}' | tr -d ,), debootstrap, docker-compose"
fi

if docker info >/dev/null 2>&1; then
    echo "20-docker: engine already answers ($(docker info -f '{{.ServerVersion}} {{.Driver}}'))"
else
    echo "20-docker: starting dockerd (vfs, no iptables, no bridge), log in $log"
    # A pid file left by a dockerd that died with its machine would stop the new one from starting.
    if [ -f /var/run/docker.pid ] && ! kill -0 "$(cat /var/run/docker.pid)" 2>/dev/null; then
        rm -f /var/run/docker.pid
    fi
    setsid nohup dockerd --storage-driver=vfs --iptables=false --bridge=none >"$log" 2>&1 </dev/null &
    for _ in $(seq 1 60); do
        docker info >/dev/null 2>&1 && break
        sleep 1
    done
    if ! docker info >/dev/null 2>&1; then
        tail -n 20 "$log" >&2
        echo "20-docker: dockerd did not answer within 60 s (log: $log)" >&2
        exit 1
    fi
    echo "20-docker: engine up ($(docker info -f '{{.ServerVersion}} {{.Driver}}'))"
fi

bash scripts/docker_base.sh
