#!/usr/bin/env bash
# Installs the Dev Containers CLI (@devcontainers/cli from npm), which tests/docker/test_devcontainer.py
# drives against the Docker engine of 20-docker.sh: `devcontainer up`, then `make test-fast` inside.
# Pinned, so CI tests the CLI version the docs name. Idempotent: a no-op when that version is installed.
# Needs Node.js >= 20 (the CLI's engines field); Debian's nodejs + npm when there is none.
set -euo pipefail
version=0.89.0

if command -v devcontainer >/dev/null 2>&1 && [ "$(devcontainer --version 2>/dev/null)" = "$version" ]; then
    echo "30-devcontainer-cli: @devcontainers/cli $version already installed"
    exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
fi
node_major="$(node -p 'process.versions.node.split(".")[0]')"
if [ "$node_major" -lt 20 ]; then
    echo "30-devcontainer-cli: Node.js $(node --version) is too old: @devcontainers/cli $version needs >= 20" >&2
    exit 1
fi
npm install --global --no-audit --no-fund --loglevel=error "@devcontainers/cli@$version"
echo "30-devcontainer-cli: installed @devcontainers/cli $(devcontainer --version) (Node.js $(node --version))"
