"""gantry destroy: terraform destroy, then the Compute inventory of what still carries the label."""

import pytest
from gantry.status import ExitStatus
from launcher_helpers import needs_terraform

pytestmark = [pytest.mark.terraform, needs_terraform,
              pytest.mark.filterwarnings("ignore:The 'warn' method is deprecated:DeprecationWarning")]

LABEL = {"gantry-deployment": "gantry"}


@pytest.fixture
def deployment(tf_deployment):
    return tf_deployment


@pytest.fixture
def applied(cli, deployment):
    deployment.write(node_count=2)
    assert cli("apply", "-y", "--skip-preflight").status == ExitStatus.OK
    return deployment


def test_clean_teardown_proves_nothing_is_left(cli, applied, fake):
    fake.add_instance("someone-else", "us-central1-a", {"gantry-deployment": "other"})
    result = cli("destroy", "-y")
    assert result.status == ExitStatus.OK, result.output
    assert "Destroy complete!" in result.stdout
    assert "nothing left billing" in result.stdout
    assert "Deleted: bucket gs://demo-project-gantry-runs" in result.stdout
    assert "someone-else" not in result.stdout  # only this deployment's label counts
    assert any("aggregated/disks?filter=labels.gantry-deployment" in r for r in fake.requests)
    assert "terraform_data" not in applied.state_file().read_text()


def test_leftover_disk_is_named_with_its_delete_command(cli, applied, fake):
    fake.add_disk("gantry-node-0-scratch", "us-central1-a", LABEL, size_gb=200)
    result = cli("destroy", "-y")
    assert result.status == ExitStatus.LEFTOVERS
    assert "1 resource(s) still exist and bill" in result.stdout
    assert "gantry-node-0-scratch" in result.stdout and "200 GB" in result.stdout
    assert ("gcloud compute disks delete gantry-node-0-scratch --zone=us-central1-a --project=demo-project"
            in result.stdout)
    assert "nothing left billing" not in result.stdout
    assert result.stderr.strip().splitlines()[-1].startswith("gantry: error: 1 resource(s) of deployment gantry")


def test_leftover_vm_and_address(cli, applied, fake):
    fake.add_instance("gantry-node-1", "us-central1-b", LABEL, status="TERMINATED")
    fake.add_address("gantry-ip", "us-central1", LABEL)
    result = cli("destroy", "-y")
    assert result.status == ExitStatus.LEFTOVERS
    assert "gcloud compute instances delete gantry-node-1 --zone=us-central1-b" in result.stdout
    assert "gcloud compute addresses delete gantry-ip --region=us-central1" in result.stdout


def test_bucket_with_run_data_is_kept(cli, deployment):
    deployment.write(bucket_holds_data=True)
    assert cli("apply", "-y", "--skip-preflight").status == ExitStatus.OK
    result = cli("destroy", "-y")
    assert result.status == ExitStatus.OK, result.output
    assert "nothing left billing" in result.stdout
    assert "Kept: bucket gs://demo-project-gantry-runs with the run data" in result.stdout
    assert "--delete-data" in result.stdout


def test_delete_data_empties_the_bucket_first(cli, applied, gcs):
    gcs.create_bucket("demo-project-gantry-runs")
    for name in ("runs/r1/step-100.pt", "runs/r1/stats.jsonl"):
        gcs.write(f"gs://demo-project-gantry-runs/{name}", b"data")
    result = cli("destroy", "-y", "--delete-data")
    assert result.status == ExitStatus.OK, result.output
    assert gcs.names("gs://demo-project-gantry-runs") == []
    assert "Emptied gs://demo-project-gantry-runs: 2 object(s) deleted" in result.stdout
    assert "after --delete-data emptied it" in result.stdout


def test_destroy_failure_still_shows_the_inventory(cli, applied, fake, monkeypatch):
    monkeypatch.setenv("FIXTURE_DESTROY_FAILS", "Error: Error when reading or editing Bucket: googleapi: 500 boom")
    fake.add_instance("gantry-node-0", "us-central1-a", LABEL)
    result = cli("destroy", "-y")
    assert result.status == ExitStatus.ERROR, result.output
    assert "gantry-node-0" in result.stdout and "still exist and bill" in result.stdout
    assert "terraform destroy failed" in result.stderr.strip().splitlines()[-1]


def test_asks_before_destroying(cli, applied):
    result = cli("destroy", answer="n\n")
    assert result.status == ExitStatus.ERROR
    assert "Delete deployment 'gantry' in project demo-project" in result.stdout
    assert "cancelled; nothing was destroyed" in result.stderr
    assert "terraform_data.network" in applied.state_file().read_text()
    result = cli("destroy", answer="y\n")
    assert result.status == ExitStatus.OK, result.output


def test_refuses_without_a_terminal_or_yes(cli, applied):
    result = cli("destroy")
    assert result.status == ExitStatus.ERROR
    said = ("gantry: error: destroy asks before it goes on and stdin is not a terminal; nothing was destroyed. Run it "
            "at a terminal, or pass -y to go on without the question (`make destroy ARGS=-y`).")
    assert result.stderr.splitlines() == [said]  # apply's line too: Environment.confirm_or_refuse
    assert "terraform_data.network" in applied.state_file().read_text()


def test_destroy_of_nothing_is_fine(cli, deployment):
    deployment.write()
    result = cli("destroy", "-y")
    assert result.status == ExitStatus.OK, result.output
    assert "nothing left billing" in result.stdout


def test_everything_a_failed_destroy_left_is_named_with_its_delete_command(cli, applied, fake, apis, monkeypatch):
    monkeypatch.setenv("FIXTURE_DESTROY_FAILS", "Error: Error waiting for Deleting Network: googleapi: 400 in use")
    fake.add_network("gantry")
    fake.add_network("spare")  # another deployment's VPC in the same project: not ours
    apis.add_deployment("gantry")
    apis.add_deployment("spare")
    result = cli("destroy", "-y")
    assert result.status == ExitStatus.ERROR, result.output
    out = result.stdout
    assert "8 resource(s) still exist and bill" in out  # router, 2 firewall rules, subnet, VPC, repo, bucket, account
    for command in (
        "gcloud compute routers delete gantry-router --region=us-central1 --project=demo-project",
        "gcloud compute firewall-rules delete gantry-allow-iap-ssh --project=demo-project",
        "gcloud compute firewall-rules delete gantry-allow-internal --project=demo-project",
        "gcloud compute networks subnets delete gantry-nodes --region=us-central1 --project=demo-project",
        "gcloud compute networks delete gantry-vpc --project=demo-project",
        "gcloud artifacts repositories delete gantry --location=us-central1 --project=demo-project",
        "gcloud storage rm --recursive gs://demo-project-gantry-runs --project=demo-project",
        "gcloud iam service-accounts delete gantry-node@demo-project.iam.gserviceaccount.com --project=demo-project",
    ):
        assert command in out
    assert "Cloud NAT gantry-nat" in out
    assert "spare" not in out
    assert "Deleted: bucket" not in out  # the bucket is still there
    order = [out.index(command) for command in ("delete gantry-router", "delete gantry-vpc", "rm --recursive gs://")]
    assert order == sorted(order)  # the router and firewalls before the network, in the order that works


def test_an_api_the_inventory_may_not_ask_is_named_not_reported_clean(cli, applied, apis):
    from local_cloud.googleapis import error

    apis.errors[r"/serviceAccounts$"] = (403, error(
        403, "PERMISSION_DENIED", "Permission 'iam.serviceAccounts.list' denied on resource (or it may not exist).",
        reason="IAM_PERMISSION_DENIED", service="iam.googleapis.com"))
    result = cli("destroy", "-y")
    assert result.status == ExitStatus.OK, result.output
    assert "nothing left billing among what could be checked" in result.stdout
    assert "Not checked: service accounts (403: Permission 'iam.serviceAccounts.list' denied" in result.stdout


def test_leftover_tpu_node_and_queued_resource_are_named_with_their_delete_commands(cli, applied, apis):
    """A TPU VM is a Cloud TPU node, not a Compute instance: only the Cloud TPU API lists it (and the queued
    resource that would create one), so without this section destroy could say nothing bills while a TPU does."""
    apis.add_tpu_node("gantry-tpu-0", zone="us-central1-a", tpu_type="v3-8", state="READY")
    apis.add_queued_resource("gantry-tpu-queued", zone="us-central1-a")
    other = apis.add_tpu_node("someone-elses-tpu", zone="us-central1-a")
    other["labels"] = {"gantry-deployment": "other"}
    apis.add_queued_resource("their-queue", zone="us-central1-a", labels={"gantry-deployment": "other"})
    result = cli("destroy", "-y")
    assert result.status == ExitStatus.LEFTOVERS, result.output
    out = result.stdout
    assert "2 resource(s) still exist and bill" in out
    assert "gantry-tpu-0" in out and "v3-8, READY" in out
    assert "queued resource, WAITING_FOR_RESOURCES" in out
    assert ("gcloud compute tpus queued-resources delete --force gantry-tpu-queued --zone=us-central1-a "
            "--project=demo-project") in out
    assert "gcloud compute tpus tpu-vm delete gantry-tpu-0 --zone=us-central1-a --project=demo-project" in out
    assert "someone-elses-tpu" not in out and "their-queue" not in out
    assert "GET /v2/projects/demo-project/locations/us-central1-a/nodes" in apis.requests
    assert "GET /v2/projects/demo-project/locations/us-central1-a/queuedResources" in apis.requests


def test_a_project_without_the_cloud_tpu_api_has_no_tpu_to_list(cli, applied, apis):
    from local_cloud.googleapis import error

    # Google's answer for an API never enabled (AIP-193 ErrorInfo, reason SERVICE_DISABLED).
    apis.errors[r"^/v2/projects/demo-project/locations/[^/]+/nodes$"] = (403, error(
        403, "PERMISSION_DENIED", "Cloud TPU API has not been used in project demo-project before or it is disabled.",
        reason="SERVICE_DISABLED", service="tpu.googleapis.com"))
    result = cli("destroy", "-y")
    assert result.status == ExitStatus.OK, result.output
    assert "nothing left billing." in result.stdout and "Not checked" not in result.stdout
