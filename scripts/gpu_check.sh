#!/usr/bin/env bash
# On a machine with an NVIDIA GPU: the CUDA tests, a 1-rank nccl run, and a short benchmark (inference placed on the
# actors' cores vs. served from the GPU).
#
#   scripts/gpu_check.sh                   # .venv with docker/torch.json's CUDA torch (TORCH_SPEC), then the checks
#   PYTHON=python3 scripts/gpu_check.sh    # an interpreter that already has CUDA torch and the trainer's
#                                          # dependencies (a Deep Learning VM, a CUDA container): no install,
#                                          # packages/ on PYTHONPATH
#
# Every step runs even when one before it failed; the exit status is non-zero if any failed, and the last
# line names them.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
failed=()
step() {  # step NAME COMMAND...: run it, remember NAME when it fails
    local name=$1; shift
    echo "== $name"
    "$@" || failed+=("$name")
}
if [ -n "${PYTHON:-}" ]; then
    py=$PYTHON
    export PYTHONPATH="$PWD/packages${PYTHONPATH:+:$PYTHONPATH}"
else
    # The CUDA torch the CUDA image carries (docker/torch.json's version, PyPI's CUDA build), into .venv even where a
    # CPU one is already there (make's TORCH_SPEC replaces it): `make install-dev` alone takes the CPU build.
    make install-dev TORCH_SPEC="torch==$(python3 docker/torch_pins.py get torch)" >/dev/null || exit 1
    py=.venv/bin/python
fi
nvidia-smi --query-gpu=name,driver_version,compute_cap,memory.total --format=csv
"$py" -c 'import torch; assert torch.cuda.is_available(), "torch sees no CUDA device: check the driver and the CUDA build of torch"; print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name(0))' || exit 1
step "gpu tests" "$py" -m pytest -p no:cacheprovider -m gpu -v tests/integration tests/unit
run_dir=$(mktemp -d)
step "nccl launch" env NPROC_PER_NODE="$("$py" -c 'import torch; print(max(1, torch.cuda.device_count()))')" \
    "$py" -m selfplay launch --config tictactoe --run.dir="$run_dir" --run.max_steps=50 --eval.every_minutes=0 \
    --dist.backend=nccl
# Two ranks on one GPU is not a layout nccl accepts, so the rank-scaling case runs only with several GPUs.
scaling=0
[ "$("$py" -c 'import torch; print(torch.cuda.device_count())')" -gt 1 ] && scaling=${SCALING_SECONDS:-30}
step "bench" "$py" -m bench.run --seconds "${BENCH_SECONDS:-5}" --scaling-seconds "$scaling" \
    --placement-seconds "${PLACEMENT_SECONDS:-30}"
if [ ${#failed[@]} -gt 0 ]; then
    echo "gpu_check: FAILED: ${failed[*]}"
    exit 1
fi
echo "gpu_check: all passed"
