#!/usr/bin/env bash
# initializeCommand of the dev container (runs on the host before the build): makes sure the trainer
# image that .devcontainer/Dockerfile starts from exists, building docker/Dockerfile only when
# it is missing. The dev container runs the workspace's code, so an older trainer image is fine;
# `docker rmi gantry-trainer:cpu` (or `make build-train ARGS=--no-push`) refreshes it.
#   GANTRY_TRAINER_IMAGE   the image to use instead of gantry-trainer:cpu (CI: the tests' image)
#   GANTRY_BASE_IMAGE      its base when built here (default: gantry-base:bookworm when the engine
#                          has it, i.e. no registry here; else the Dockerfile's python:3.11-slim-bookworm)
# Local torch wheels and proxy CAs go in docker/wheels and docker/certs, as for any plain build.
set -euo pipefail
cd "$(dirname "$0")/.."

image="${GANTRY_TRAINER_IMAGE:-gantry-trainer:cpu}"
if docker image inspect "$image" >/dev/null 2>&1; then
    echo "trainer_image: using $image"
    exit 0
fi
base="${GANTRY_BASE_IMAGE:-}"
if [ -z "$base" ] && docker image inspect gantry-base:bookworm >/dev/null 2>&1; then
    base=gantry-base:bookworm
fi
echo "trainer_image: no $image yet: building docker/Dockerfile (a few minutes, once)"
# The host network: engines started without a bridge (as in CI) give RUN steps no other.
docker build --network host -f docker/Dockerfile -t "$image" ${base:+--build-arg "BASE_IMAGE=$base"} .
