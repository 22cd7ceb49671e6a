#!/bin/sh
# Entry point of the trainer images.
#   (no args) or flags      -> python -m selfplay launch FLAGS: trains on this node under torchrun,
#                              rendezvous from NNODES, NODE_RANK, MASTER_ADDR, MASTER_PORT, NPROC_PER_NODE
#   a selfplay verb (train, eval, ...) -> python -m selfplay VERB ARGS
#   a program on PATH (bash, python, pip) -> that program, e.g. for a look inside
# With GANTRY_REQUIRE_CUDA=1 (the CUDA image) the trainer starts only after cuda_check.py has proved
# that the host driver runs this torch's CUDA: it never trains on the CPU by accident.
set -eu

if [ "$#" -gt 0 ] && [ "${1#-}" = "$1" ]; then
    program="$(command -v "$1" || true)"
    case "$program" in
        /*) exec "$@" ;;   # a real program; shell builtins such as eval fall through to selfplay
    esac
fi

if [ "${GANTRY_REQUIRE_CUDA:-0}" = 1 ]; then
    python /opt/gantry/cuda_check.py
fi

if [ "$#" -gt 0 ] && [ "$1" = launch ]; then
    shift   # `launch` named explicitly: the same as flags alone
elif [ "$#" -gt 0 ] && [ "${1#-}" = "$1" ]; then
    exec python -m selfplay "$@"
fi

NNODES="${NNODES:-1}"
NODE_RANK="${NODE_RANK:-0}"
MASTER_ADDR="${MASTER_ADDR:-127.0.0.1}"
MASTER_PORT="${MASTER_PORT:-29500}"
if [ -z "${NPROC_PER_NODE:-}" ]; then
    # One learner per GPU on GPU nodes; one on CPU nodes (its actors use the other cores).
    NPROC_PER_NODE=1
    if [ "${GANTRY_REQUIRE_CUDA:-0}" = 1 ] && command -v nvidia-smi >/dev/null 2>&1; then
        NPROC_PER_NODE="$(nvidia-smi -L | grep -c '^GPU' || true)"
        [ "$NPROC_PER_NODE" -ge 1 ] || NPROC_PER_NODE=1
    fi
fi
export NNODES NODE_RANK MASTER_ADDR MASTER_PORT NPROC_PER_NODE
echo "gantry: node $NODE_RANK of $NNODES, rendezvous $MASTER_ADDR:$MASTER_PORT, $NPROC_PER_NODE process(es) on this node" >&2
exec python -m selfplay launch "$@"
