# The offline stand-in for hashicorp/google and google-beta 8.7.0 (tools/tf-standin, docs/STANDIN.md): lets the
# real terraform binary init, validate, plan, test, apply and destroy infra/ with no cloud account.

STANDIN_DIR ?= .cache/tf-standin/run

.PHONY: standin-schema standin-schema-check standin-env standin-plan test-standin

standin-schema: ## regenerate tools/tf-standin/google{,_beta}_schema_8.7.0.json from PyPI's cdktn-provider-google{,-beta} 21.1.0
	$(PYTHON) scripts/extract_google_schema.py
	$(PYTHON) scripts/extract_google_schema.py --provider google-beta

standin-schema-check: ## fail when the committed stand-in schema differs from a fresh extraction
	$(PYTHON) scripts/extract_google_schema.py --check
	$(PYTHON) scripts/extract_google_schema.py --provider google-beta --check

standin-env: ## print the exports that point terraform at the stand-in mirror (eval them in a shell)
	@$(PYTHON) tools/tf-standin/mirror.py $(abspath $(STANDIN_DIR))

standin-plan: ## plan a throwaway copy of infra/ against the stand-in (ARGS='-var use_gpu=true ...')
	@set -e; eval "$$($(PYTHON) tools/tf-standin/mirror.py $(abspath $(STANDIN_DIR)))"; \
	rm -rf $(STANDIN_DIR)/repo; mkdir -p $(STANDIN_DIR)/repo; \
	cp -r infra $(STANDIN_DIR)/repo/infra; rm -rf $(STANDIN_DIR)/repo/infra/.terraform*; \
	ln -s $(abspath packages) $(STANDIN_DIR)/repo/packages; \
	terraform -chdir=$(STANDIN_DIR)/repo/infra init -input=false -backend=false >/dev/null; \
	terraform -chdir=$(STANDIN_DIR)/repo/infra plan -input=false -var project_id=standin-proj $(ARGS)

test-standin: $(VENV)/.installed-dev ## the stand-in provider's tests: schema, validate, terraform test, apply/destroy, checkov on plan JSON
	$(PY) -m pytest tests/infra -k standin $(ARGS)
