# Runs on the VMs (packages/gantry/launches/, the node agent packages/gantry_agent): no SSH needed.
#   make run-gcp ARGS="-- --config connect4"       # start a run on every node, then follow it (Ctrl-C detaches)
#   make run-gcp ARGS="--resume run-20260601-120000"
#   make run-gcp ARGS="-- -m toytrain.train --steps 200"   # your own torchrun program (docs/LAUNCHER.md: Your own trainer)
#   make run-gcp PROJECT=../my-trainer ARGS="--sync checkpoints -- python train.py --gpus all"   # your own project
#   make status | make logs ARGS=--follow | make stop ARGS=-y | make fetch RUN=run-20260601-120000

#: the cloud run make fetch copies into runs/RUN
RUN ?=

.PHONY: run-gcp status logs stop fetch push-train

run-gcp: $(VENV)/.installed-dev ## start a training run on every node (stopped nodes are started), then follow it; Ctrl-C detaches
	$(PY) -m gantry run $(if $(PROJECT),--project $(call quote,$(PROJECT))) $(ARGS)

status: $(VENV)/.installed-dev ## per-node state, run, step, heartbeat, uptime and its cost; the latest Pons error rates and arena Elo
	$(PY) -m gantry status $(ARGS)

logs: $(VENV)/.installed-dev ## the master's trainer output from its serial port (ARGS=--follow keeps reading)
	$(PY) -m gantry logs $(ARGS)

stop: $(VENV)/.installed-dev ## stop the run with a final checkpoint (asks; ARGS=-y); says when the nodes power off (ARGS="-y --power-off": now)
	$(PY) -m gantry stop $(ARGS)

fetch: $(VENV)/.installed-dev ## copy a run (checkpoints, stats, TensorBoard events) from the bucket into runs/RUN (make fetch RUN=...)
	@test -n "$(RUN)" || { echo "gantry: error: no run given. Use make fetch RUN=<run id> (make status shows it)." >&2; exit 2; }
	$(PY) -m gantry fetch $(call quote,$(RUN)) $(ARGS)

push-train: $(VENV)/.installed-dev ## push the built trainer image to the deployment's registry (make build-train does it too)
	$(PY) -m gantry push $(ARGS)
