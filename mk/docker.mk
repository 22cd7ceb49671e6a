# Docker images of the trainer (docker/, docs/DOCKER.md).
#   make build-train                      # CPU, CUDA or TPU image (use_gpu / use_tpu in infra/terraform.tfvars), pushed
#   make build-train GPU=1                # the CUDA image whatever tfvars says (GPU=0: the CPU image; ARGS=--tpu: TPU)
#   make build-train ARGS=--no-push       # build here only (make train-docker runs it)
#   make build-train PROJECT=../my-trainer   # your own project folder instead (gantry build --project)
#   make devcontainer PROJECT=../my-trainer  # its .devcontainer/devcontainer.json on that image
#   make docker-base && make build-train BASE_IMAGE=gantry-base:bookworm    # no registry reachable
#   make train-docker TRAIN_CONFIG=tictactoe ARGS="--run.max_steps=200"   # the CPU image (GPU=0), runs/docker-tictactoe

#: 1: build-train builds the CUDA image, 0: the CPU one (default: use_gpu in infra/terraform.tfvars)
GPU          ?=
#: the base image build-train builds on instead of python:3.11-slim-bookworm (make docker-base: gantry-base:bookworm)
BASE_IMAGE   ?=
#: the local image train-docker runs
TRAIN_IMAGE  ?= gantry-trainer:cpu
#: trainer config (a packaged name) of train-docker
TRAIN_CONFIG ?= connect4
#: run folder of train-docker, under runs/ (mounted at /runs): not train-local's RUN_DIR
TRAIN_RUN_DIR ?= runs/docker-$(TRAIN_CONFIG)
BUILD_FLAGS  ?=

.PHONY: build-train train-docker run-local docker-base devcontainer test-cuda-image

build-train: $(VENV)/.installed-dev ## build the trainer image (TPU if use_tpu, CUDA if use_gpu, else CPU) for linux/amd64 and push it to the deployment's registry
	$(PY) -m gantry build $(if $(filter 1,$(GPU)),--gpu,$(if $(filter 0,$(GPU)),--cpu)) \
		$(if $(BASE_IMAGE),--base-image $(BASE_IMAGE)) $(if $(PROJECT),--project $(call quote,$(PROJECT))) $(BUILD_FLAGS) $(ARGS)

train-docker: ## train in the local CPU image (make build-train GPU=0 ARGS=--no-push first); Ctrl-C checkpoints, runs land in TRAIN_RUN_DIR
	@docker image inspect $(TRAIN_IMAGE) >/dev/null 2>&1 || { echo "gantry: error: no local image $(TRAIN_IMAGE). \
	Build it first: make build-train GPU=0 ARGS=--no-push (the CPU image, whatever use_gpu says)." >&2; exit 2; }
	@mkdir -p runs
	docker run --rm $$([ -t 0 ] && echo -it) --init --network host --shm-size=1g --user "$$(id -u):$$(id -g)" \
		-v "$(CURDIR)/runs:/runs" $(TRAIN_IMAGE) --config $(call quote,$(TRAIN_CONFIG)) $(call quote,--run.dir=$(TRAIN_RUN_DIR)) $(ARGS)

run-local: $(VENV)/.installed-dev ## run PROJECT's built image here as one node runs it, as you (ARGS="--sync DIR -- COMMAND"); nothing bills
	@test -n "$(PROJECT)" || { echo "gantry: error: no project given. Use make run-local PROJECT=<your project's folder> ARGS=\"-- COMMAND\"." >&2; exit 2; }
	$(PY) -m gantry run-local --project $(call quote,$(PROJECT)) $(ARGS)

devcontainer: $(VENV)/.installed-dev ## write PROJECT's .devcontainer/devcontainer.json on the image its cloud run uses (builds it here if missing)
	@test -n "$(PROJECT)" || { echo "gantry: error: no project given. Use make devcontainer PROJECT=<your project's folder>." >&2; exit 2; }
	$(PY) -m gantry devcontainer $(if $(BASE_IMAGE),--base-image $(BASE_IMAGE)) --project $(call quote,$(PROJECT)) $(ARGS)

test-cuda-image: $(VENV)/.installed-dev ## build the CUDA image here (5.4 GB, not pushed) and check it; CI does not: run it before landing a change to docker/
	$(PY) -m gantry build --gpu --no-push $(if $(BASE_IMAGE),--base-image $(BASE_IMAGE))
	$(PYTEST) tests/docker/test_cuda_image.py $(ARGS)

docker-base: ## make gantry-base:bookworm from Debian packages (debootstrap, root) for machines with no registry
	bash scripts/docker_base.sh
