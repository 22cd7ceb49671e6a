#!/usr/bin/env bash
# On a machine with an NVIDIA GPU: the CUDA tests, a 2-rank nccl run, and a short benchmark.
# Usage: scripts/gpu_check.sh            (creates .venv like `make test` when missing)
set -euo pipefail
cd "$(dirname "$0")/.."
nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv
make install-dev >/dev/null
py=.venv/bin/python
"$py" -c 'import torch; assert torch.cuda.is_available(), "torch sees no CUDA device: check the driver and the CUDA build of torch"; print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name(0))'
"$py" -m pytest -m gpu -v tests
run_dir=$(mktemp -d)
NPROC_PER_NODE=$("$py" -c 'import torch; print(max(1, torch.cuda.device_count()))') \
    "$py" -m selfplay launch --config tictactoe --run.dir="$run_dir" --run.max_steps=50 --eval.every_minutes=0
"$py" -m bench.run --seconds 10
