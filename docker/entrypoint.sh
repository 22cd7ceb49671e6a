#!/bin/sh
# Entry point of the trainer images.
#   (no args) or flags      -> python -m selfplay launch FLAGS: trains on this node (under torchrun when
#                              NNODES, NPROC_PER_NODE or the GPUs ask for more than one rank), rendezvous
#                              from NNODES, NODE_RANK, MASTER_ADDR, MASTER_PORT
#   a selfplay verb (train, eval, ...) -> python -m selfplay VERB ARGS
#   a program on PATH (bash, python, pip) -> that program, e.g. for a look inside
# In the CUDA image (GANTRY_IMAGE_FLAVOUR=cuda, or GANTRY_REQUIRE_CUDA=1 anywhere) the trainer starts only after
# cuda_check.py has proved that the host driver runs this torch's CUDA: it never trains on the CPU by accident.
# GANTRY_REQUIRE_CUDA=0 skips the check on purpose.
set -eu

if [ "$#" -gt 0 ] && [ "${1#-}" = "$1" ]; then
    program="$(command -v "$1" || true)"
    case "$program" in
        /*) exec "$@" ;;   # a real program; shell builtins such as eval fall through to selfplay
    esac
fi

case "${GANTRY_REQUIRE_CUDA:-${GANTRY_IMAGE_FLAVOUR:-cpu}}" in
    1|cuda) python /opt/gantry/cuda_check.py ;;
esac

if [ "$#" -gt 0 ] && [ "$1" = launch ]; then
    shift   # `launch` named explicitly: the same as flags alone
elif [ "$#" -gt 0 ] && [ "${1#-}" = "$1" ]; then
    exec python -m selfplay "$@"
fi

# `selfplay launch` decides everything per node (ranks: one per GPU, else one; rendezvous defaults), so
# the image, `make train-local` and the agent's containers share one rule.
exec python -m selfplay launch "$@"
