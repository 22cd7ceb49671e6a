#!/usr/bin/env bash
# Makes .venv-xla: torch and torch_xla at the versions in packages/selfplay/data/xla-requirements.txt (torch_xla
# runs only beside the torch it was built for, which is older than the project's main venv's), plus the trainer.
# The XLA tests run the trainer there on torch_xla's CPU device (PJRT_DEVICE=CPU); on a TPU VM outside Docker
# the same venv trains on the TPU (add libtpu: .venv-xla/bin/pip install 'torch-xla[tpu]').
#
#   scripts/xla_venv.sh --path        # prints that default and makes nothing
#   scripts/xla_venv.sh [VENV]        # default: a folder outside the clone keyed by the pins and pyproject.toml
#                                     # (scripts/cache_dir.sh), so every clone on this machine shares one
#
# Environment:
#   PYTHON               the interpreter to build it from (default python3; PyPI's torch_xla wheels are for
#                        CPython 3.10-3.12 on x86_64 Linux only)
#   XLA_TORCH_INDEX_URL  an index with a CPU-only torch of the pinned version (default: docker/torch.json's
#                        cpu_index_url, PyPI's x86_64 torch brings ~3 GB of CUDA libraries that the XLA CPU device
#                        never uses). Where it cannot be reached, docker/torch_pins.py says so in one line and
#                        takes a local +cpu wheel (pip's find-links), or stops naming the fix rather than pull CUDA.
#
# Runs again in a second when the venv already holds these pins (a stamp file records them); a venv left half
# made by a failed run is started afresh. Exits non-zero with pip's reason when it cannot be made (the tests
# then skip, saying so).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
# The one place that says what the venv's key is made of; `xla_venv.sh --path` prints the default (mk/xla.mk, the tests).
default="$(bash "$root/scripts/cache_dir.sh" venv-xla packages/selfplay/data/xla-requirements.txt pyproject.toml)"
if [ "${1:-}" = --path ]; then
    echo "$default"
    exit 0
fi
venv="${1:-$default}"
mkdir -p "$(dirname "$venv")"
pins="$root/packages/selfplay/data/xla-requirements.txt"
stamp="$venv/.gantry-xla-pins"
python="${PYTHON:-python3}"

# One maker at a time: the venv is shared by every clone on the machine (and every xdist worker), and a second
# maker would delete the first one's half-made venv. The second waits, then finds it made.
exec 9>"$venv.lock"
flock 9
if [ -f "$stamp" ] && cmp -s "$pins" "$stamp" && "$venv/bin/python" -c "import torch_xla" 2>/dev/null; then
    exit 0
fi
machine="$(uname -m)"
if [ "$machine" != x86_64 ]; then
    echo "xla_venv: PyPI has torch_xla wheels for x86_64 Linux only, not $machine" >&2
    exit 1
fi

start=$(date +%s)
rm -rf "$venv"
"$python" -m venv "$venv"
pip=("$venv/bin/python" -m pip --disable-pip-version-check)
echo "xla_venv: installing $(grep -v '^#' "$pins" | tr '\n' ' ')into $venv"
# The laptop's torch install (CPU index, else find-links, never a silent CUDA download): docker/torch_pins.py.
TORCH_SPEC="" TORCH_INDEX_URL="${XLA_TORCH_INDEX_URL:-}" "$venv/bin/python" "$root/docker/torch_pins.py" install -r "$pins"
# The trainer and its own dependencies; torch is satisfied by the pinned one (pyproject asks torch>=2.3).
"${pip[@]}" install --quiet --progress-bar off -e "$root"
"$venv/bin/python" - "$pins" <<'PY'
import sys
from importlib import metadata

pins = [line.strip() for line in open(sys.argv[1]) if line.strip() and not line.startswith("#")]
for pin in pins:
    name, version = pin.split("==")
    have = metadata.version(name)
    if have.split("+")[0] != version:
        sys.exit(f"xla_venv: {name} {have} installed, {version} pinned: something upgraded it")
import torch
import torch_xla  # noqa: F401  (fails here, not in a test, when the pair does not load)

print(f"xla_venv: torch {torch.__version__}, torch_xla {metadata.version('torch-xla')}")
PY
cp "$pins" "$stamp"
# Venvs made for other pins or another pyproject.toml are stale here: ~7 GB each, so they go (a clone that still
# wants one makes it again).
for stale in "$(dirname "$venv")"/venv-xla-*; do
    case "$stale" in "$venv"|"$venv.lock") ;; *) rm -rf "$stale" ;; esac
done
echo "xla_venv: ready in $(( $(date +%s) - start )) s, $(du -sm "$venv" | cut -f1) MB"
