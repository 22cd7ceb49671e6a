# Gantry: one target per step. `make help` lists them.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON     ?= python3
VENV       ?= .venv
PY         := $(VENV)/bin/python
# torch's version lives in docker/torch.json; docker/torch_pins.py installs it CPU-only (PyTorch's CPU index, else
# a local +cpu wheel; on Linux it refuses PyPI's CUDA build in one line). A GPU laptop sets TORCH_SPEC (e.g.
# torch==2.13.0, PyPI's CUDA 13.0 build), installed as given; TORCH_INDEX_URL names another torch index.
TORCH_SPEC ?=
CONFIG     ?= packages/selfplay/configs/connect4.yaml
RUN_DIR    ?= runs/local
ARGS       ?=
# pytest-xdist workers: most tests wait on subprocesses, servers and the Docker engine, so more workers than
# cores pays (tests/conftest.py keeps the tests of one expensive fixture on one worker). 0 = no xdist.
TEST_WORKERS ?= 4
TEST_REPORT  := .cache/test-report.xml
PYTEST       = $(PY) -m pytest $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadgroup) --junitxml=$(TEST_REPORT)

# ---- environments (created on first use, refreshed when pyproject.toml changes) ----
$(VENV)/.installed: pyproject.toml docker/torch.json
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	TORCH_SPEC="$(TORCH_SPEC)" $(PY) docker/torch_pins.py install
	$(PY) -m pip install -q -e .
	@touch $@

$(VENV)/.installed-dev: $(VENV)/.installed
	$(PY) -m pip install -q -e ".[dev,cloud]"
	@touch $@

# Each area adds its own targets in mk/<area>.mk (infra, launcher, docker): one file an owner.
-include mk/*.mk

.PHONY: help install install-dev train-local eval test test-fast bench lint clean

help: ## list the targets
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-14s %s\n", $$1, $$2}'

install: $(VENV)/.installed ## create .venv with the trainer

install-dev: $(VENV)/.installed-dev ## create .venv with the trainer, launcher and test tools

# ---- the trainer, on this machine ----
train-local: $(VENV)/.installed ## train Connect Four here (Ctrl-C checkpoints; run again to resume)
	$(PY) -m selfplay train --config $(CONFIG) --run.dir=$(RUN_DIR) $(ARGS)

eval: $(VENV)/.installed ## grade the newest checkpoint of RUN_DIR on the Pons test sets
	$(PY) -m selfplay eval --checkpoint $(RUN_DIR) $(ARGS)

test: $(VENV)/.installed-dev lint ## lint, then the whole test suite (slow, terraform and docker tests included)
	$(PYTEST) $(ARGS)

test-fast: $(VENV)/.installed-dev ## the suite without the slow tests
	$(PYTEST) -m "not slow" $(ARGS)

bench: $(VENV)/.installed ## self-play, learner and training benchmarks -> bench/results/*.json + a table
	$(PY) -m bench.run $(ARGS)

lint: $(VENV)/.installed-dev ## ruff over the Python code (rules: pyproject.toml [tool.ruff.lint])
	$(VENV)/bin/ruff check packages tests bench

clean: ## remove caches (keeps .venv and runs/)
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
	rm -rf .pytest_cache .ruff_cache
