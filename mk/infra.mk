# infra/: static checks that need no cloud account and no google provider download.
# (make preflight / apply / destroy belong to the launcher's mk file.)

# Outside the clone, keyed by its requirements (scripts/cache_dir.sh): installed once per machine.
CHECKOV_VENV ?= $(shell bash scripts/cache_dir.sh venv-checkov tests/infra/requirements-checkov.txt)
RENDER_GPU   ?= false
# Provider-free runs: no CLI config, so Terraform never consults a mirror or the registry.
TF_OFFLINE   := TF_CLI_CONFIG_FILE=/dev/null TF_IN_AUTOMATION=1
INFRA_MODULES := infra/modules/node_shape infra/modules/startup_script

.PHONY: infra-check infra-fmt infra-fmt-check infra-test-modules infra-checkov infra-shellcheck infra-render infra-checkov-venv

infra-check: infra-fmt-check infra-test-modules infra-checkov infra-shellcheck ## fmt, provider-free module tests, checkov and shellcheck over infra/
	@echo "infra-check: all passed"

infra-fmt: ## rewrite infra/ in canonical Terraform style
	terraform fmt -recursive infra

infra-fmt-check: ## fail when infra/ is not terraform fmt-clean
	terraform fmt -check -recursive -diff infra

infra-test-modules: ## terraform test in the provider-free modules (offline, no provider download)
	@set -e; for module in $(INFRA_MODULES); do \
		data=$$(mktemp -d); \
		echo "== terraform test $$module"; \
		$(TF_OFFLINE) TF_DATA_DIR=$$data terraform -chdir=$$module init -backend=false -input=false >/dev/null; \
		$(TF_OFFLINE) TF_DATA_DIR=$$data terraform -chdir=$$module test; \
		rm -rf $$data; \
	done

$(CHECKOV_VENV)/.installed: tests/infra/requirements-checkov.txt
	python3 -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/python -m pip install -q -r $<
	@touch $@

infra-checkov-venv: $(CHECKOV_VENV)/.installed ## install checkov into its own venv (its pins conflict with .venv)

infra-checkov: $(CHECKOV_VENV)/.installed ## checkov over infra/ (and docker/ Dockerfiles); skips are justified inline
	$(CHECKOV_VENV)/bin/checkov --directory infra --framework terraform --skip-download --compact --quiet
	@if ls docker/Dockerfile* >/dev/null 2>&1; then \
		$(CHECKOV_VENV)/bin/checkov --directory docker --framework dockerfile --skip-download --compact --quiet; \
	fi

infra-render: ## print the node startup script exactly as a VM gets it (RENDER_GPU=true for the GPU path)
	@tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	printf '%s\n' 'module "startup_script" {' \
		'  source          = "$(CURDIR)/infra/modules/startup_script"' \
		'  deployment_name = "gantry"' \
		'  registry_host   = "us-central1-docker.pkg.dev"' \
		'  use_gpu         = $(RENDER_GPU)' \
		'}' \
		'output "script" { value = module.startup_script.script }' >"$$tmp/main.tf"; \
	$(TF_OFFLINE) TF_DATA_DIR=$$tmp/.tf terraform -chdir=$$tmp init -input=false >/dev/null && \
	$(TF_OFFLINE) TF_DATA_DIR=$$tmp/.tf terraform -chdir=$$tmp apply -auto-approve -input=false >/dev/null && \
	$(TF_OFFLINE) TF_DATA_DIR=$$tmp/.tf terraform -chdir=$$tmp output -raw script

infra-shellcheck: ## shellcheck the rendered startup script (CPU and GPU) and every script in scripts/ and docker/
	@set -e; tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	for gpu in false true; do $(MAKE) -s --no-print-directory infra-render RENDER_GPU=$$gpu >"$$tmp/startup-gpu-$$gpu.sh"; done; \
	shellcheck --severity=style --shell=bash "$$tmp"/startup-gpu-*.sh; \
	find scripts docker infra -name '*.sh' -not -path '*/.terraform/*' -print0 2>/dev/null | xargs -0 -r shellcheck --severity=style --external-sources; \
	echo "infra-shellcheck: clean"
