"""gantry run / status / logs / stop / fetch against the fake Compute API, with terraform output from
an outputs-only module and a file:// directory standing in for the bucket."""

from __future__ import annotations

import json
import time

import pytest
from gantry.status import ExitStatus
from launcher_helpers import needs_terraform
from runs_helpers import add_nodes, apply_outputs_module, cluster_outputs, metadata_items

pytestmark = [pytest.mark.terraform, needs_terraform]
NAMES = ["gantry-node-0", "gantry-node-1"]


@pytest.fixture
def world(fake, deployment, tmp_path):
    apply_outputs_module(deployment.infra, cluster_outputs(NAMES))
    bucket = tmp_path / "bucket"
    bucket.mkdir()
    return {"vms": add_nodes(fake, NAMES, statuses=["RUNNING", "TERMINATED"]), "bucket": bucket,
            "environ": {"GANTRY_BUCKET_URL": f"file://{bucket}"}}


def test_run_starts_stopped_nodes_and_writes_a_spec_per_rank_keeping_other_keys(cli, fake, world):
    result = cli("run", "--detach", "--run-id", "r1", "--config", "tictactoe", "--", "--run.max_steps=50",
                 environ=world["environ"])
    assert result.status == ExitStatus.OK, result.output
    assert fake.started == ["gantry-node-1"]  # node 1 was TERMINATED (idle shutdown): started first
    assert "node 1 gantry-node-1 is TERMINATED: starting it" in result.stdout
    specs = []
    for rank, vm in enumerate(world["vms"]):
        items = metadata_items(vm)
        assert items["gantry-agent"] == "# the agent" and items["startup-script"] == "#!/bin/bash"
        assert vm["metadata"]["fingerprint"] != "fp-0"
        spec = json.loads(items["gantry-run"])
        assert spec["node_rank"] == rank and spec["nnodes"] == 2 and spec["action"] == "start"
        specs.append(spec)
    assert specs[0]["master_addr"] == specs[1]["master_addr"] == "10.128.0.2"
    assert specs[0]["image"] == "us-central1-docker.pkg.dev/demo-project/gantry/gantry-trainer:cpu"
    assert specs[0]["args"] == ["--config", "tictactoe", f"--run.dir=file://{world['bucket']}/runs/r1",
                                "--run.max_steps=50"]
    assert specs[0]["launched_at"] == specs[1]["launched_at"]
    assert "make status" in result.stdout

    time.sleep(0.01)
    again = cli("run", "--detach", "--resume", "r1", environ=world["environ"])
    assert again.status == ExitStatus.OK, again.output
    resumed = json.loads(metadata_items(world["vms"][0])["gantry-run"])
    assert resumed["run_id"] == "r1" and resumed["launched_at"] != specs[0]["launched_at"]


def test_status_shows_each_node_and_the_latest_pons_errors(cli, world):
    now = int(time.time())
    for rank, vm in enumerate(world["vms"]):
        vm["status"] = "RUNNING"
        vm["guestAttributes"] = {"gantry/boot": "ready", "gantry/agent": json.dumps(
            {"state": "running", "run": "r1", "node_rank": rank, "step": 680 + rank, "heartbeat": now - 30,
             "progress": "step 680 | games 2.1k | loss 1.2", "detail": ""})}
    stats = world["bucket"] / "runs" / "r1"
    stats.mkdir(parents=True)
    (stats / "stats.jsonl").write_text("\n".join(json.dumps(r) for r in [
        {"kind": "eval", "step": 600, "eval/begin_easy/mcts_weak": 0.05, "eval/middle_medium/mcts_weak": 0.12},
        {"kind": "train", "step": 680, "charts/step": 680}]) + "\n")
    result = cli("status", environ=world["environ"])
    assert result.status == ExitStatus.OK, result.output
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["NODE", "NAME", "STATE", "RUN", "STEP", "HEARTBEAT"]
    assert lines[1].split()[:5] == ["0", "gantry-node-0", "running", "r1", "680"]
    assert lines[2].split()[:5] == ["1", "gantry-node-1", "running", "r1", "681"]
    assert "3" in lines[1].split()[5] and lines[1].endswith("s ago")
    assert "master: step 680 | games 2.1k" in result.stdout
    assert "Pons MCTS weak errors at step 600: begin_easy 5.0%  middle_medium 12.0%" in result.stdout


def test_status_of_a_booting_and_a_stopped_node(cli, world):
    world["vms"][0]["guestAttributes"] = {"gantry/boot": "error: nvidia-smi not found"}
    result = cli("status", environ=world["environ"])
    assert result.status == ExitStatus.OK, result.output
    assert result.stdout.splitlines()[2].split()[:3] == ["1", "gantry-node-1", "terminated"]
    assert "node 0 boot error: nvidia-smi not found" in result.stdout


def test_logs_reads_the_masters_serial_port_and_follows_from_offsets(cli, fake, world, tmp_path):
    serial = tmp_path / "serial-0.log"
    serial.write_text("gantry-agent: started run r1\nstep 10 | games 40\n")
    world["vms"][0]["serialPortFile"] = str(serial)
    result = cli("logs", environ=world["environ"])
    assert result.status == ExitStatus.OK, result.output
    assert result.stdout == "gantry-agent: started run r1\nstep 10 | games 40\n"
    assert any("/instances/gantry-node-0/serialPort?" in r and "port=2" in r for r in fake.requests)
    result = cli("logs", "--node", "5", environ=world["environ"])
    assert result.status == ExitStatus.ERROR and "--node 5 does not exist. Choose 0..1." in result.stderr


def test_stop_sets_action_stop_on_every_started_node(cli, world):
    assert cli("run", "--detach", "--run-id", "r2", environ=world["environ"]).status == ExitStatus.OK
    refused = cli("stop", environ=world["environ"])
    assert refused.status == ExitStatus.ERROR and "Pass -y" in refused.stderr
    result = cli("stop", "-y", "--no-wait", environ=world["environ"])
    assert result.status == ExitStatus.OK, result.output
    for vm in world["vms"]:
        spec = json.loads(metadata_items(vm)["gantry-run"])
        assert spec["action"] == "stop" and spec["run_id"] == "r2"
    assert "nothing to stop" in cli("stop", "-y", environ=world["environ"]).stdout


def test_fetch_copies_checkpoints_and_stats_but_not_partial_uploads(cli, world, deployment):
    run = world["bucket"] / "runs" / "r3"
    run.mkdir(parents=True)
    (run / "ckpt-000000040.pt").write_bytes(b"x" * 1000)
    (run / "stats.jsonl").write_text('{"step": 40}\n')
    (run / ".ckpt-000000050.pt.part").write_bytes(b"half")
    result = cli("fetch", "r3", environ=world["environ"])
    assert result.status == ExitStatus.OK, result.output
    local = deployment.root / "runs" / "r3"
    assert sorted(p.name for p in local.iterdir()) == ["ckpt-000000040.pt", "stats.jsonl"]
    assert "Copied 2 file(s)" in result.stdout
    missing = cli("fetch", "nope", environ=world["environ"])
    assert missing.status == ExitStatus.ERROR and "no run at file://" in missing.stderr


def test_without_a_deployment_the_run_verbs_say_apply_first(cli, deployment):
    apply_outputs_module(deployment.infra, {"bucket": "b"})
    result = cli("status")
    assert result.status == ExitStatus.ERROR
    assert "no deployment found. Run `make apply` first" in result.stderr


def test_run_follows_until_every_node_reports_the_run_done(cli, world):
    for rank, vm in enumerate(world["vms"]):
        vm["guestAttributes"] = {"gantry/agent": json.dumps(
            {"state": "finished", "run": "r9", "node_rank": rank, "step": 90, "heartbeat": int(time.time())})}
    result = cli("run", "--run-id", "r9", "--interval", "0.1", environ=world["environ"])
    assert result.status == ExitStatus.OK, result.output
    assert "[node 0 gantry-node-0] finished" in result.stdout and "[node 1 gantry-node-1] finished" in result.stdout
    assert "Run r9 finished on every node. Copy it here with `make fetch RUN=r9`." in result.stdout
