"""gantry run / status / logs / stop on a Cloud TPU VM (use_tpu): the Cloud TPU API v2 over REST, served by
fake_googleapis with Google's JSON shapes, terraform output from an outputs-only module, and the bucket behind
fake-gcs-server (packages/local_cloud/storage.py). No Compute call may reach the node: a TPU VM is not a Compute instance."""

from __future__ import annotations

import json
import time

import pytest
from gantry.status import ExitStatus
from gantry_agent import storage
from launch_contract import RunSpec, console_log_url
from launcher_helpers import needs_terraform
from runs_helpers import apply_outputs_module, cluster_outputs

pytestmark = [pytest.mark.terraform, needs_terraform]
NODE = "gantry-node-0"




@pytest.fixture
def tpu(apis, deployment, registry, gcs):
    outputs = {**cluster_outputs([NODE], registry_host=registry.host), "use_tpu": True}
    apply_outputs_module(deployment.infra, outputs)
    digest = registry.add("demo-project/gantry/gantry-trainer", "tpu")  # `make build-train` with use_tpu
    gcs.create_bucket(outputs["bucket"])
    return {"node": apis.add_tpu_node(NODE, state="STOPPED"), "bucket": f"gs://{outputs['bucket']}", "gcs": gcs,
            "environ": {},
            "image": f"{outputs['image_repository_url']}/gantry-trainer@{digest}"}


def agent_report(state: str, run: str, step: int | None) -> dict[str, str]:
    return {"gantry/boot": "ready", "gantry/agent": json.dumps(
        {"state": state, "run": run, "node_rank": 0, "step": step, "heartbeat": int(time.time()),
         "figures": {"losses/total": 1.25}, "detail": ""})}


def test_run_starts_the_stopped_tpu_node_and_patches_the_spec_into_its_metadata_then_status_reads_the_agent(
        cli, fake, apis, tpu):
    result = cli("run", "--detach", "--run-id", "t1", "--", "--run.max_steps=50", environ=tpu["environ"])
    assert result.status == ExitStatus.OK, result.output
    assert "node 0 gantry-node-0 is STOPPED: starting it" in result.stdout
    assert apis.tpu_actions == ["start gantry-node-0", "patch gantry-node-0 metadata"]
    metadata = tpu["node"]["metadata"]
    assert metadata["gantry-agent"] == "# the agent" and metadata["startup-script"] == "#!/bin/bash"
    spec = RunSpec.from_json(metadata["gantry-run"])
    assert spec.tpu and spec.image == tpu["image"] and spec.node_rank == 0 and spec.nnodes == 1
    assert spec.args[-1] == "--run.max_steps=50" and spec.run_dir == f"{tpu['bucket']}/runs/t1"
    assert any(r.startswith("GET /v2/projects/demo-project/locations/us-central1-a/operations/") for r in apis.requests)
    assert not any("/instances/" in r for r in fake.requests), "a TPU VM is not a Compute instance"

    tpu["node"]["guestAttributes"] = agent_report("running", "t1", 42)
    status = cli("status", environ=tpu["environ"])
    assert status.status == ExitStatus.OK, status.output
    assert status.stdout.splitlines()[1].split()[:5] == ["0", "gantry-node-0", "running", "t1", "42"]
    assert "node 0: step 42 | loss 1.250" in status.stdout  # as the kit's gantry.yaml formats it
    assert any(r.endswith(":getGuestAttributes") for r in apis.requests)

    tpu["node"]["state"] = "REPAIRING"  # the TPU's own state shows while it is not READY
    assert cli("status", environ=tpu["environ"]).stdout.splitlines()[1].split()[:3] == ["0", NODE, "repairing"]


def test_logs_reads_the_run_output_the_agent_keeps_in_the_bucket(cli, apis, tpu):
    tpu["node"]["state"] = "READY"
    assert cli("run", "--detach", "--run-id", "t2", environ=tpu["environ"]).status == ExitStatus.OK
    empty = cli("logs", environ=tpu["environ"])
    assert empty.status == ExitStatus.OK and empty.stdout == ""  # nothing uploaded yet
    log = console_log_url(f"{tpu['bucket']}/runs/t2", 0)
    assert log == f"{tpu['bucket']}/runs/t2/logs/node-0.log"
    # what the TPU VM's agent uploads (gantry_agent.console_log), through its own client
    storage.upload(log, b"gantry-agent: started run t2\nstep 10 | games 40\n", lambda: "vm-token", tpu["gcs"].url)
    result = cli("logs", environ=tpu["environ"])
    assert result.status == ExitStatus.OK, result.output
    assert result.stdout == "gantry-agent: started run t2\nstep 10 | games 40\n"


def test_stop_stops_the_trainer_then_the_tpu_node(cli, apis, tpu):
    tpu["node"]["state"] = "READY"
    assert cli("run", "--detach", "--run-id", "t3", environ=tpu["environ"]).status == ExitStatus.OK
    tpu["node"]["guestAttributes"] = agent_report("stopped", "t3", 90)  # the agent's answer to action=stop
    result = cli("stop", "-y", "--timeout", "30", environ=tpu["environ"])
    assert result.status == ExitStatus.OK, result.output
    assert RunSpec.from_json(tpu["node"]["metadata"]["gantry-run"]).action == "stop"
    assert apis.tpu_actions[-2:] == ["patch gantry-node-0 metadata", "stop gantry-node-0"]  # the spec, then nodes:stop
    assert tpu["node"]["state"] == "STOPPED"
    assert "node 0 gantry-node-0: TPU node stopped, no longer billing for the TPU" in result.stdout


def test_a_preempted_spot_tpu_is_named_with_the_way_to_recreate_it_not_started(cli, apis, tpu):
    tpu["node"].update(state="READY", schedulingConfig={"spot": True})
    assert cli("run", "--detach", "--run-id", "t4", environ=tpu["environ"]).status == ExitStatus.OK
    tpu["node"]["state"] = "PREEMPTED"
    expected = ("gantry: error: TPU node(s) gantry-node-0 (us-central1-a) were preempted: a preempted Spot TPU cannot "
                "be started again, only deleted and created anew. Delete it (`gcloud compute tpus tpu-vm delete "
                "gantry-node-0 --zone=us-central1-a`), then: Run `make apply` to create the nodes again, then "
                "`make run-gcp ARGS=\"--resume t4\"`: the checkpoints are in the bucket.")
    status = cli("status", environ=tpu["environ"])
    assert status.status == ExitStatus.ERROR
    assert status.stdout.splitlines()[1].split()[:3] == ["0", NODE, "preempted"]
    assert status.stderr.strip() == expected and "Traceback" not in status.output
    run = cli("run", "--detach", "--resume", "t4", environ=tpu["environ"])
    assert run.status == ExitStatus.ERROR and run.stderr.strip() == expected
    assert "start gantry-node-0" not in apis.tpu_actions
