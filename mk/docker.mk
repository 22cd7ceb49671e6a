# Docker images of the trainer (docker/, docs/DOCKER.md).
#   make build-train                      # CPU, CUDA or TPU image (use_gpu / use_tpu in infra/terraform.tfvars), pushed
#   make build-train GPU=1                # the CUDA image whatever tfvars says (GPU=0: the CPU image; ARGS=--tpu: TPU)
#   make build-train ARGS=--no-push       # build here only (make train-docker runs it)
#   make build-train PROJECT=../my-trainer   # your own project folder instead (gantry build --project)
#   make devcontainer PROJECT=../my-trainer  # its .devcontainer/devcontainer.json on that image
#   make docker-base && make build-train BASE_IMAGE=gantry-base:bookworm    # no registry reachable
#   make train-docker TRAIN_CONFIG=tictactoe ARGS="--run.max_steps=200"

GPU          ?=
BASE_IMAGE   ?=
TRAIN_IMAGE  ?= gantry-trainer:cpu
TRAIN_CONFIG ?= connect4
BUILD_FLAGS  ?=

.PHONY: build-train train-docker docker-base devcontainer

build-train: $(VENV)/.installed-dev ## build the trainer image (TPU if use_tpu, CUDA if use_gpu, else CPU) for linux/amd64 and push it to the deployment's registry
	$(PY) -m gantry build $(if $(filter 1,$(GPU)),--gpu,$(if $(filter 0,$(GPU)),--cpu)) \
		$(if $(BASE_IMAGE),--base-image $(BASE_IMAGE)) $(if $(PROJECT),--project $(PROJECT)) $(BUILD_FLAGS) $(ARGS)

train-docker: ## train in the local CPU image (make build-train first); Ctrl-C checkpoints, runs land in ./runs
	@docker image inspect $(TRAIN_IMAGE) >/dev/null 2>&1 || { echo "gantry: error: no local image $(TRAIN_IMAGE). \
	Build it first: make build-train (before make apply it builds here only)." >&2; exit 2; }
	@mkdir -p runs
	docker run --rm $$([ -t 0 ] && echo -it) --init --network host --shm-size=1g --user "$$(id -u):$$(id -g)" \
		-v "$(CURDIR)/runs:/runs" $(TRAIN_IMAGE) --config $(TRAIN_CONFIG) $(ARGS)

devcontainer: $(VENV)/.installed-dev ## write PROJECT's .devcontainer/devcontainer.json on the image its cloud run uses (builds it here if missing)
	@test -n "$(PROJECT)" || { echo "gantry: error: no project given. Use make devcontainer PROJECT=<your project's folder>." >&2; exit 2; }
	$(PY) -m gantry devcontainer $(if $(BASE_IMAGE),--base-image $(BASE_IMAGE)) --project $(PROJECT) $(ARGS)

docker-base: ## make gantry-base:bookworm from Debian packages (debootstrap, root) for machines with no registry
	bash scripts/docker_base.sh
