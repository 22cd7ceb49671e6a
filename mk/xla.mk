# The XLA learner (the TPU path) on torch_xla's CPU device, in its own venv: torch_xla needs the torch it was
# built for (packages/selfplay/data/xla-requirements.txt), older than .venv's.
#   make xla-venv                 # .venv-xla (first time: ~4.2 GB download, 7.4 GB on disk: PyPI's torch brings CUDA libraries; docs/TPU.md)
#   make test-xla                 # the XLA tests (make test runs them too, making the venv on first use)

XLA_VENV ?= .venv-xla

.PHONY: xla-venv test-xla

xla-venv: ## make .venv-xla: torch + torch_xla at the pinned versions, and the trainer
	bash scripts/xla_venv.sh $(XLA_VENV)

test-xla: $(VENV)/.installed-dev xla-venv ## the XLA learner's tests on torch_xla's CPU device (PJRT_DEVICE=CPU)
	GANTRY_XLA_VENV=$(abspath $(XLA_VENV)) $(PY) -m pytest tests/integration/test_xla.py $(ARGS)
