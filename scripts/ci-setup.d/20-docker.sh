#!/usr/bin/env bash
# Docker engine for tests/docker: Debian's docker.io, dockerd started by hand (no systemd here)
# with no iptables and no bridge (containers use the host network), and a base image bootstrapped
# from Debian packages because no registry can be pulled from.
# Storage: overlay2 where the kernel mounts overlay on /var/lib/docker (CI's VMs: ext4), else vfs (an
# engine inside a container), which copies the whole tree for every layer and every container.
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

# Starts dockerd on storage driver $1; true once it answers, false (and no dockerd left) if it exits or
# stays silent for 60 s.
start_dockerd() {
    # A pid file left by a dockerd that died (with its machine, or refusing a driver) would stop the next one.
    if [ -f /var/run/docker.pid ] && ! kill -0 "$(cat /var/run/docker.pid)" 2>/dev/null; then
        rm -f /var/run/docker.pid
    fi
    echo "20-docker: starting dockerd ($1, no iptables, no bridge), log in $log"
    setsid nohup dockerd --storage-driver="$1" --iptables=false --bridge=none >>"$log" 2>&1 </dev/null &
    local pid=$!
    for _ in $(seq 1 60); do
        docker info >/dev/null 2>&1 && return 0
        kill -0 "$pid" 2>/dev/null || return 1
        sleep 1
    done
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    return 1
}

if docker info >/dev/null 2>&1; then
    echo "20-docker: engine already answers ($(docker info -f '{{.ServerVersion}} {{.Driver}}'))"
else
    if ! start_dockerd overlay2; then
        echo "20-docker: overlay2 refused here (log: $log); vfs instead"
        if ! start_dockerd vfs; then
            tail -n 20 "$log" >&2
            echo "20-docker: dockerd did not answer within 60 s (log: $log)" >&2
            exit 1
        fi
    fi
    echo "20-docker: engine up ($(docker info -f '{{.ServerVersion}} {{.Driver}}'))"
fi

bash scripts/docker_base.sh
