#!/usr/bin/env bash
# Installs ShellCheck, which tests/infra runs on the rendered node startup script and on every
# shell script in scripts/ and docker/. Idempotent: a no-op when it is already installed.
set -euo pipefail
if command -v shellcheck >/dev/null 2>&1; then
    echo "10-shellcheck: $(shellcheck --version | sed -n 's/^version: //p') already installed"
    exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends shellcheck >/dev/null
echo "10-shellcheck: installed $(shellcheck --version | sed -n 's/^version: //p')"
