# Gantry: one target per step. `make help` lists them.
SHELL := /bin/bash
.DEFAULT_GOAL := help

# A setting whose line above is a `#: ` comment is one a user sets: make help lists it with that comment.
#: the trainer config of train-local
CONFIG     ?= packages/selfplay/configs/connect4.yaml
#: the run folder of train-local, eval, arena and plot
RUN_DIR    ?= runs/local
#: extra flags for the target's command: ARGS="--run.max_minutes=30", ARGS=-y
ARGS       ?=
# A project of your own (a folder with a Dockerfile, pyproject.toml or requirements.txt): make build-train and make
# run-gcp build and run it instead of the kit's trainer (docs/LAUNCHER.md, "Your own project").
#: a folder of your own project: build-train and run-gcp build and run it (docs/LAUNCHER.md)
PROJECT    ?=
# torch's version lives in docker/torch.json; docker/torch_pins.py installs it CPU-only (PyTorch's CPU index, else
# a local +cpu wheel; on Linux it refuses PyPI's CUDA build in one line). A GPU laptop sets TORCH_SPEC (e.g.
# torch==2.13.0, PyPI's CUDA 13.0 build), installed as given, into an existing .venv too (TORCH_STAMP);
# TORCH_INDEX_URL names another torch index.
#: the torch .venv gets instead of docker/torch.json's CPU build (a GPU laptop: torch==2.13.0)
TORCH_SPEC ?=
#: the interpreter that creates .venv
PYTHON     ?= python3
#: the venv every target uses
VENV       ?= .venv
PY         := $(VENV)/bin/python
# Make names its targets ($(VENV)/.installed) by words: a folder with a space cannot be one, however the recipes
# quote it, so $(PY) is used unquoted and such a VENV is refused here, in one line, before anything runs.
ifneq ($(words $(VENV)),1)
$(error VENV='$(VENV)' holds a space, and make cannot name files in such a folder: choose one without, e.g. VENV=.venv)
endif
# pytest-xdist workers: most tests wait on subprocesses, servers and the Docker engine, so more workers than
# cores pays (tests/conftest.py keeps the tests of one expensive fixture on one worker). 0 = no xdist.
#: pytest-xdist workers of test and test-fast, 0 = none
TEST_WORKERS ?= 4
TEST_REPORT  := .cache/test-report.xml
PYTEST       = $(PY) -m pytest $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadgroup) --junitxml=$(TEST_REPORT)

# ---- environments (created on first use, refreshed when pyproject.toml or docker/torch.json changes) ----
# TORCH_STAMP holds the TORCH_SPEC the venv's torch was installed with: a TORCH_SPEC that differs from it (a GPU
# laptop's, once a CPU .venv exists) installs torch again; without TORCH_SPEC the venv keeps the torch it has.
TORCH_STAMP := $(VENV)/.torch-spec
ifneq ($(TORCH_SPEC),)
ifneq ($(TORCH_SPEC),$(shell cat $(TORCH_STAMP) 2>/dev/null))
.PHONY: $(TORCH_STAMP)
endif
endif

$(TORCH_STAMP): docker/torch.json
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	TORCH_SPEC="$(TORCH_SPEC)" $(PY) docker/torch_pins.py install
	@echo '$(TORCH_SPEC)' >$@

$(VENV)/.installed: pyproject.toml $(TORCH_STAMP)
	$(PY) -m pip install -q -e .
	@touch $@

$(VENV)/.installed-dev: $(VENV)/.installed
	$(PY) -m pip install -q -e ".[dev,cloud]"
	@touch $@

# Each area adds its own targets in mk/<area>.mk (infra, launcher, docker): one file an owner.
-include mk/*.mk

# A command-line variable that no makefile here assigns, and that no recipe's program reads from the environment,
# stops make before any target runs (`make train-local CONFG=x.yaml` would otherwise train the default config),
# naming the nearest setting (difflib). The names are read from the makefiles themselves, so the list cannot go
# stale; the settings it names are the ?= ones, the variables meant to be set.
ENV_VARIABLES := TORCH_INDEX_URL TORCH_ALLOW_CUDA PIP_INDEX_URL XLA_TORCH_INDEX_URL GANTRY_BASE_IMAGE GANTRY_CACHE_DIR
assigned = $(shell sed -nE 's/^([A-Z][A-Z0-9_]*) *$(1)=.*/\1/p' $(MAKEFILE_LIST))
SETTINGS := $(sort $(call assigned,[?]) $(ENV_VARIABLES))
UNKNOWN_VARIABLES := $(foreach v,$(.VARIABLES),$(if $(filter command line,$(origin $(v))),$(v)))
UNKNOWN_VARIABLES := $(sort $(filter-out $(SETTINGS) $(call assigned,[?:+]?),$(UNKNOWN_VARIABLES)))
# "CONFG (did you mean CONFIG?)" for each unknown name
NEAREST = import difflib, sys; known = sys.argv[1].split(); print(", ".join(name + "".join(f" (did you mean {m}?)" \
          for m in difflib.get_close_matches(name, known, 1)) for name in sys.argv[2:]))
ifeq ($(MAKELEVEL),0)  # a sub-make inherits the command line: checked once, by the outer make
ifneq ($(UNKNOWN_VARIABLES),)
$(error $(shell $(PYTHON) -c '$(NEAREST)' "$(SETTINGS)" $(UNKNOWN_VARIABLES) 2>/dev/null || echo $(UNKNOWN_VARIABLES)): no makefile here reads it, so make \
        stopped; fix the spelling (the settings: $(SETTINGS)))
endif
endif

.PHONY: help help-all install install-dev train-local eval arena plot tensorboard test test-fast bench compare lint clean

# `make help` in the order of a user's journey; each line is the target's own `## ` comment (Makefile, mk/*.mk).
# The maintainers' targets (infra checks, the stand-in provider, the XLA venv) stay out of it: make help-all.
HELP_LOCAL       := install train-local eval arena plot tensorboard train-docker run-local devcontainer
HELP_CLOUD       := local-cloud cost preflight build-train apply push-train run-gcp status preempt fault logs stop \
                    fetch destroy local-cloud-down
HELP_DEVELOPMENT := install-dev test test-fast lint bench compare clean help-all
HELP_MAINTAINERS := infra-check infra-fmt infra-fmt-check infra-test-modules infra-checkov-venv infra-checkov \
                    infra-render infra-shellcheck standin-schema standin-schema-check standin-env standin-plan \
                    test-standin xla-venv test-xla docker-base test-cuda-image
HELP_MARK := \#\#
# The settings make help lists: each ?= line whose line above is a `#: ` comment (Makefile, mk/*.mk), and that comment.
USER_SETTINGS := $(shell awk '/^\#: /{ok=1; next} ok && /^[A-Z][A-Z0-9_]* *[?]=/{print $$1} {ok=0}' $(MAKEFILE_LIST))
help_text = $(shell awk -v name=$(1) '/^\#: /{text=substr($$0, 4); next} $$1 == name && text {print text; exit} {text=""}' \
            $(MAKEFILE_LIST))
quote = '$(subst ','\'',$(1))'
help_group = echo "$(1)"; for t in $(2); do grep -hE "^$$t:.*$(HELP_MARK) " $(MAKEFILE_LIST) | \
	awk -F':.*$(HELP_MARK) ' '{printf "  make %-14s %s\n", $$1, $$2}'; done

help: ## list the targets and variables
	@$(call help_group,Local (this machine):,$(HELP_LOCAL))
	@echo; $(call help_group,Cloud (infra/terraform.tfvars; billing from make apply to make destroy):,$(HELP_CLOUD))
	@echo; $(call help_group,Development:,$(HELP_DEVELOPMENT))
	@echo; echo "Variables (make TARGET VAR=value):"
	@$(foreach v,$(USER_SETTINGS),printf '  %-14s %s%s\n' $(v) $(call quote,$(call help_text,$(v))) \
		$(call quote,$(if $($(v)), (now $($(v)))));)
	@echo "  (a variable no makefile here reads, such as a misspelt one, stops make naming the nearest setting)"

help-all: help ## also the maintainers' targets: infra checks, the stand-in provider, the XLA venv
	@echo; $(call help_group,Maintainers:,$(HELP_MAINTAINERS))

install: $(VENV)/.installed ## create .venv with the trainer

install-dev: $(VENV)/.installed-dev ## create .venv with the trainer, launcher and test tools

# ---- the trainer, on this machine ----
train-local: $(VENV)/.installed ## train Connect Four here (Ctrl-C checkpoints; run again to resume)
	$(PY) -m selfplay train --config $(call quote,$(CONFIG)) $(call quote,--run.dir=$(RUN_DIR)) $(ARGS)

eval: $(VENV)/.installed ## grade the newest checkpoint of RUN_DIR on the Pons test sets
	$(PY) -m selfplay eval --checkpoint $(call quote,$(RUN_DIR)) $(ARGS)

arena: $(VENV)/.installed ## W-D-L and Elo of RUN_DIR's newest checkpoint against rule-only baselines (ARGS=--every-checkpoint)
	$(PY) -m selfplay arena --checkpoint $(call quote,$(RUN_DIR)) $(ARGS)

plot: $(VENV)/.installed ## Pons error and Elo of RUN_DIR against minutes -> RUN_DIR/progress.svg
	$(PY) -m selfplay plot --run $(call quote,$(RUN_DIR)) $(ARGS)

tensorboard: $(VENV)/.installed ## TensorBoard over runs/ (local and fetched runs), at http://localhost:6006
	$(PY) -m tensorboard.main --logdir runs $(ARGS)  # the module, not bin/tensorboard: the dev container's venv has no script

test: $(VENV)/.installed-dev lint ## lint, then the whole test suite (slow, terraform and docker tests included)
	$(PYTEST) $(ARGS)

test-fast: $(VENV)/.installed-dev ## the suite without the slow tests
	$(PYTEST) -m "not slow" $(ARGS)

bench: $(VENV)/.installed ## self-play, learner and training benchmarks -> bench/results/*.json + a table
	$(PY) -m bench.run $(ARGS)

compare: $(VENV)/.installed ## an A/B arm beside its control, checkpoint by checkpoint (ARGS="ARM.json CONTROL.json")
	$(PY) -m bench.compare $(ARGS)

lint: $(VENV)/.installed-dev ## ruff over the Python code (rules: pyproject.toml [tool.ruff.lint])
	$(VENV)/bin/ruff check packages tests bench examples scripts

clean: ## remove caches (keeps .venv and runs/)
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
	rm -rf .pytest_cache .ruff_cache
