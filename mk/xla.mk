# The XLA learner (the TPU path) on torch_xla's CPU device, in its own venv: torch_xla needs the torch it was
# built for (packages/selfplay/data/xla-requirements.txt), older than .venv's.
#   make xla-venv                 # the XLA venv: CPU-only torch from PyTorch's CPU index (docker/torch_pins.py); where
#                                 # only PyPI's CUDA build is reachable it stops naming the fix, and
#                                 # TORCH_ALLOW_CUDA=1 make xla-venv takes it (~4.2 GB download, 7.4 GB on disk;
#                                 # the XLA tests do so; docs/TPU.md)
#   make test-xla                 # the XLA tests (make test runs them too, making the venv on first use)

# Outside the clone, keyed by what it is made from (scripts/cache_dir.sh): made once per machine and pins.
XLA_VENV ?= $(shell bash scripts/xla_venv.sh --path)

.PHONY: xla-venv test-xla

xla-venv: ## make the XLA venv (XLA_VENV, outside the clone): torch + torch_xla at the pinned versions, and the trainer
	bash scripts/xla_venv.sh $(XLA_VENV)

test-xla: $(VENV)/.installed-dev xla-venv ## the XLA learner's tests on torch_xla's CPU device (PJRT_DEVICE=CPU)
	GANTRY_XLA_VENV=$(abspath $(XLA_VENV)) $(PY) -m pytest tests/integration/test_xla.py $(ARGS)
