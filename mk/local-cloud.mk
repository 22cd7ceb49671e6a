# The local cloud (packages/local_cloud): the cloud walkthrough on this machine before it bills. While it is up every
# cloud target talks to it (gantry.local_world) and says so; local-cloud-down goes back to Google Cloud.

#: how many Spot nodes make local-cloud starts (containers on this machine)
NODES ?= 2
#: which node of the local cloud make preempt preempts
NODE ?=
#: what make fault gives the local cloud: stockout, quota or none
FAULT ?=

.PHONY: local-cloud local-cloud-down preempt fault

local-cloud: $(VENV)/.installed-dev ## rehearse here first: Google's stand-ins and NODES Spot nodes on this machine, which every cloud target talks to (bills nothing)
	$(PY) -m local_cloud up --nodes $(call quote,$(NODES))

preempt: $(VENV)/.installed-dev ## local cloud: preempt node NODE as Google preempts a Spot VM (SIGTERM, 30 s, stopped); make status restarts it
	$(PY) -m local_cloud preempt $(if $(NODE),--node $(call quote,$(NODE)))

fault: $(VENV)/.installed-dev ## local cloud: FAULT=stockout (zone full: apply moves on) or FAULT=quota (CPUs short: preflight blocks); FAULT=none ends it
	$(PY) -m local_cloud fault $(call quote,$(FAULT))

local-cloud-down: $(VENV)/.installed-dev ## stop the local cloud (its nodes, containers, bucket); cloud targets talk to Google again
	$(PY) -m local_cloud down
