"""Transient Compute errors (Google's real 503/500/429 bodies from the fake API) do not end a
command: every call the launcher makes retries with google-api-core's Retry (gantry.gcp)."""

from __future__ import annotations

import json
import time

import pytest
from fake_registry import FakeRegistry
from gantry.status import ExitStatus
from launch_contract import RunSpec
from launcher_helpers import needs_terraform
from runs_helpers import add_nodes, apply_outputs_module, cluster_outputs, metadata_items

pytestmark = [pytest.mark.terraform, needs_terraform]
NAMES = ["gantry-node-0", "gantry-node-1"]
SERIAL = r"/instances/gantry-node-0/serialPort$"


@pytest.fixture
def world(fake, deployment, tmp_path):
    with FakeRegistry() as registry:
        outputs = cluster_outputs(NAMES, registry_host=registry.host)
        apply_outputs_module(deployment.infra, outputs)
        registry.add("demo-project/gantry/gantry-trainer", "cpu")
        yield _world(fake, tmp_path)


def _world(fake, tmp_path):
    bucket = tmp_path / "bucket"
    bucket.mkdir()
    serial = tmp_path / "serial-0.log"
    serial.write_text("gantry-agent: started run r1\nstep 10 | games 40\n")
    vms = add_nodes(fake, NAMES)
    vms[0]["serialPortFile"] = str(serial)
    return {"vms": vms, "serial": serial, "environ": {"GANTRY_BUCKET_URL": f"file://{bucket}"}}


def report(state: str, run: str, rank: int, step: int = 40) -> dict[str, str]:
    return {"gantry/boot": "ready", "gantry/agent": json.dumps(
        {"state": state, "run": run, "node_rank": rank, "step": step, "heartbeat": int(time.time()), "detail": ""})}


def calls(fake, pattern: str) -> int:
    return sum(pattern in r for r in fake.requests)


def test_logs_survives_transient_errors_on_the_serial_port(cli, fake, world):
    for status in (503, 500, 502, 0, 429):  # google-cloud-compute's own default retries 503 only
        fake.fail_next(1, SERIAL, status=status)
    result = cli("logs", environ=world["environ"])
    assert result.status == ExitStatus.OK, result.output
    assert result.stdout == "gantry-agent: started run r1\nstep 10 | games 40\n"
    assert calls(fake, "/instances/gantry-node-0/serialPort?") == 6  # five failures, then the answer


def test_status_survives_503s_on_get_and_guest_attributes(cli, fake, world):
    for rank, vm in enumerate(world["vms"]):
        vm["guestAttributes"] = report("running", "r1", rank, 680)
    fake.fail_next(2, r"/instances/gantry-node-1$")
    fake.fail_next(2, r"/getGuestAttributes$", status=500)
    fake.fail_next(1, r"/getGuestAttributes$", status=429)
    result = cli("status", environ=world["environ"])
    assert result.status == ExitStatus.OK, result.output
    assert result.stdout.splitlines()[2].split()[:5] == ["1", "gantry-node-1", "running", "r1", "680"]


def test_run_follow_goes_on_through_503s_until_the_run_finishes(cli, fake, world):
    for rank, vm in enumerate(world["vms"]):
        vm["guestAttributes"] = report("finished", "r9", rank, 90)
    fake.fail_next(2, SERIAL)
    fake.fail_next(2, r"/getGuestAttributes$")
    fake.fail_next(1, r"/setMetadata$")
    result = cli("run", "--run-id", "r9", "--interval", "0.05", environ=world["environ"])
    assert result.status == ExitStatus.OK, result.output
    assert "Run r9 finished on every node" in result.stdout


def test_stop_survives_503s_and_a_fingerprint_race(cli, fake, world):
    for rank, vm in enumerate(world["vms"]):
        spec = RunSpec(run_id="r2", image="img", args=(), node_rank=rank, nnodes=2, master_addr="10.128.0.2")
        vm["metadata"]["items"].append({"key": "gantry-run", "value": spec.to_json()})
    fake.fail_next(2, r"/instances/gantry-node-0/setMetadata$")
    # Someone else (gcloud, the console) changes node 1's metadata between our read and our write.
    node1 = world["vms"][1]
    original = fake.handle

    def racing(path, query, body=None):
        if body is not None and path.endswith("/gantry-node-1/setMetadata") and "raced" not in metadata_items(node1):
            node1["metadata"]["items"].append({"key": "raced", "value": "by hand"})
            node1["metadata"]["fingerprint"] = "fp-7"
        return original(path, query, body)

    fake.handle = racing
    result = cli("stop", "-y", "--no-wait", environ=world["environ"])
    assert result.status == ExitStatus.OK, result.output
    for vm in world["vms"]:
        assert RunSpec.from_json(metadata_items(vm)["gantry-run"]).action == "stop"
    assert metadata_items(node1)["raced"] == "by hand"  # the retry read the new fingerprint and kept the key
    assert calls(fake, "POST /compute/v1/projects/demo-project/zones/us-central1-a/instances/gantry-node-1/"
                       "setMetadata") == 2


@pytest.mark.timeout(60)  # google-cloud-compute's built-in retry alone would keep trying 503s for 600 s
def test_a_lasting_outage_ends_in_one_line_after_the_deadline(cli, fake, world):
    fake.fail_next(10_000, SERIAL)
    started = time.monotonic()
    result = cli("logs", environ={**world["environ"], "GANTRY_RETRY_DEADLINE_S": "0.5"})
    assert time.monotonic() - started < 10
    assert result.status == ExitStatus.ERROR
    assert calls(fake, "/serialPort?") > 3
    assert len(result.stderr.strip().splitlines()) == 1 and "503" in result.stderr


def test_a_name_that_does_not_resolve_is_not_retried_for_minutes():
    """Offline or behind a proxy: say so at once instead of retrying DNS for the whole deadline."""
    import requests
    from gantry.gcp import is_transient

    with pytest.raises(requests.ConnectionError) as dns:
        requests.get("http://gantry-no-such-host.invalid/", timeout=10)
    with pytest.raises(requests.ConnectionError) as refused:
        requests.get("http://127.0.0.1:9/", timeout=10)
    assert not is_transient(dns.value) and is_transient(refused.value)
