#!/usr/bin/env bash
# Prints the folder a tool's cache of NAME lives in, outside the clone and keyed by the files it is made from:
#   scripts/cache_dir.sh venv-xla packages/selfplay/data/xla-requirements.txt pyproject.toml
#   -> ~/.cache/gantry/venv-xla-<first 12 hex digits of sha256 over those files' contents>
# A fresh clone on the same machine finds what an earlier one made (CI's second run needs no new venvs), and a
# change to any input file names a new folder, so a stale cache is never used. GANTRY_CACHE_DIR moves the root.
set -euo pipefail
name="$1"; shift
root="$(cd "$(dirname "$0")/.." && pwd)"
cache="${GANTRY_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/gantry}"
key="$(cd "$root" && cat -- "$@" | sha256sum | cut -c1-12)"
echo "$cache/$name-$key"
