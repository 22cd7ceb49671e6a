# The launcher (packages/gantry): preflight -> apply -> ... -> destroy, settings from infra/terraform.tfvars.
# Pass gantry flags through ARGS, e.g. `make destroy ARGS=-y` or `make apply ARGS=--skip-preflight`.

.PHONY: preflight cost apply destroy

preflight: $(VENV)/.installed-dev ## check credentials, Compute API, machine/GPU in the zone and quotas; print $/h (creates nothing)
	$(PY) -m gantry preflight $(ARGS)

cost: $(VENV)/.installed-dev ## $/h of the nodes in infra/terraform.tfvars and the cost of a max_run_hours run (offline)
	$(PY) -m gantry cost $(ARGS)

apply: $(VENV)/.installed-dev ## preflight, what it creates and its $/h, asks (ARGS=-y), then terraform apply: billing starts
	$(PY) -m gantry apply $(ARGS)

destroy: $(VENV)/.installed-dev ## terraform destroy, then list anything labelled with the deployment still billing (asks first; ARGS=-y)
	$(PY) -m gantry destroy $(ARGS)
