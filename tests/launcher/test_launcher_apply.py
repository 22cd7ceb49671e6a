"""gantry apply: preflight (fake Compute API), then the real terraform on the provider-free module."""

import json
import subprocess
import sys

import pytest
from gantry.status import ExitStatus
from gantry.terraform import Terraform
from launcher_helpers import isolated_environ, needs_terraform

pytestmark = [pytest.mark.terraform, needs_terraform,
              pytest.mark.filterwarnings("ignore:The 'warn' method is deprecated:DeprecationWarning")]

STOCKOUT = ("Error: Error waiting for instance to create: The zone 'projects/demo-project/zones/us-central1-a' "
            "does not have enough resources available to fulfill the request. '(resource type:compute)'. "
            "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS: capacity for c4-highcpu-16 is available in "
            "us-central1-b, us-central1-c.")
QUOTA = ("Error: Error creating instance: googleapi: Error 403: Quota 'NVIDIA_T4_GPUS' exceeded.  Limit: 0.0 "
         "in region us-central1., quotaExceeded")


@pytest.fixture
def deployment(tf_deployment):
    return tf_deployment  # the cli fixture runs in this one: infra/ is the provider-free module


def last_line(text: str) -> str:
    return text.strip().splitlines()[-1]


def test_apply_runs_preflight_then_terraform(cli, deployment):
    deployment.write(node_count=2)
    result = cli("apply", "-y")
    assert result.status == ExitStatus.OK, result.output
    out = result.stdout
    assert out.index("[ ok ] project") < out.index("terraform init") < out.index("Apply complete!")
    assert "bucket: demo-project-gantry-runs" in out
    assert "node_names: ['gantry-node-0', 'gantry-node-1']" in out
    assert "Billing now: about $1.38/h until `make destroy`" in out
    assert deployment.state_file().exists()


def test_stockout_names_zones_with_capacity_and_what_was_left(cli, deployment):
    deployment.write(fail_with=STOCKOUT)
    result = cli("apply", "-y")
    assert result.status == ExitStatus.ERROR
    error = last_line(result.stderr)
    assert error.startswith("gantry: error: terraform apply failed. Stock-out: zone us-central1-a has no capacity "
                            "for c4-highcpu-16")
    assert "Google named zones with capacity: us-central1-b, us-central1-c" in error
    assert 'Set zone = "us-central1-b"' in error
    assert "Half-applied: 3 resource(s) were created before the failure" in error
    assert "terraform_data.network" in error and "`make destroy`" in error
    assert "ZONE_RESOURCE_POOL_EXHAUSTED" in result.stderr  # terraform's own text was streamed too


def test_a_plain_text_stockout_lists_the_zones_that_offer_the_shape(cli, deployment):
    deployment.write(fail_with="Error: ZONE_RESOURCE_POOL_EXHAUSTED in zones/us-central1-a")
    error = last_line(cli("apply", "-y").stderr)
    assert "Other zones of us-central1 offer c4-highcpu-16: us-central1-b, us-central1-c." in error
    assert 'Set zone = "us-central1-b"' in error


def test_a_stockout_when_compute_cannot_say_where_else_points_at_preflight(cli, deployment, fake):
    deployment.write(fail_with="Error: ZONE_RESOURCE_POOL_EXHAUSTED in zones/us-central1-a")
    denied = "Required 'compute.machineTypes.list' permission for 'projects/demo-project'"
    fake.errors["/aggregated/"] = (403, "forbidden", denied)
    error = last_line(cli("apply", "-y", "--skip-preflight").stderr)
    assert "`make preflight` lists the zones that offer the shape" in error


def node_ids(deployment) -> dict[int, str]:
    """The fixture's node resources in state, by index: a replaced node gets a new id."""
    state = json.loads(deployment.state_file().read_text())
    nodes = next(r for r in state["resources"] if r["type"] == "terraform_data" and r["name"] == "node")
    return {i["index_key"]: i["attributes"]["id"] for i in nodes["instances"]}


def test_a_stockout_moves_the_nodes_to_the_next_fallback_zone_and_they_stay_there(cli, deployment):
    # zone set in the file, as infra/terraform.tfvars.example sets it: the fallback's -var must win over it
    deployment.write(zone="us-central1-a", fallback_zones=["us-central1-b", "us-central1-c"],
                     stocked_out_zones=["us-central1-a", "us-central1-b"])
    result = cli("apply", "-y")
    assert result.status == ExitStatus.OK, result.output
    out = result.stdout
    assert "[ ok ] fallback zones: us-central1-b, us-central1-c offer c4-highcpu-16" in out
    assert out.index("Stock-out: zone us-central1-a has no capacity for c4-highcpu-16 right now. Moving to "
                     "us-central1-b (fallback_zones)") < out.index("Stock-out: zone us-central1-b") < \
        out.index("Created 1 x c4-highcpu-16 (on-demand) in us-central1-c")
    assert "later `make apply`s keep them there until `make destroy`" in out
    assert Terraform(deployment.infra).outputs()["zone"] == "us-central1-c"
    placed = node_ids(deployment)

    # zone has capacity again and the user adds a node: node 0 stays in us-central1-c, not recreated in -a
    deployment.write(zone="us-central1-a", node_count=2, fallback_zones=["us-central1-b", "us-central1-c"])
    grown = cli("apply", "-y")
    assert grown.status == ExitStatus.OK, grown.output
    assert "The nodes are in us-central1-c, where a stock-out in us-central1-a moved them" in grown.stdout
    assert Terraform(deployment.infra).outputs()["zone"] == "us-central1-c"
    assert node_ids(deployment)[0] == placed[0] and len(node_ids(deployment)) == 2


def test_when_every_zone_is_stocked_out_none_of_them_is_suggested(cli, deployment):
    deployment.write(fallback_zones=["us-central1-b", "us-central1-c"],
                     stocked_out_zones=["us-central1-a", "us-central1-b", "us-central1-c"])
    result = cli("apply", "-y")
    assert result.status == ExitStatus.ERROR
    error = last_line(result.stderr)
    assert error.startswith("gantry: error: terraform apply failed. Stock-out: zones us-central1-a, us-central1-b, "
                            "us-central1-c (zone, then fallback_zones) have no capacity for c4-highcpu-16")
    assert 'Set zone = "' not in error and "`make preflight` lists the zones" in error
    assert "Half-applied:" in error


def test_only_a_stockout_moves_zones(cli, deployment):
    deployment.write(fallback_zones=["us-central1-b"], fail_with=QUOTA)
    result = cli("apply", "-y")
    assert result.status == ExitStatus.ERROR
    assert "Moving to" not in result.stdout and "Quota: quota NVIDIA_T4_GPUS" in last_line(result.stderr)


def test_preflight_warns_of_a_fallback_zone_without_the_shape(cli, deployment):
    deployment.write(fallback_zones=["us-central1-f"])  # N1 and T4s only: no C4
    result = cli("preflight")
    assert result.status == ExitStatus.OK, result.output
    assert ("[warn] fallback zones: us-central1-f of fallback_zones do not offer c4-highcpu-16: a stock-out that "
            "moves there fails") in result.stdout
    assert "zones of us-central1 that offer c4-highcpu-16: us-central1-b, us-central1-c" in result.stdout


def test_quota_exceeded_during_apply(cli, deployment):
    deployment.write(fail_with=QUOTA)
    result = cli("apply", "-y", "--skip-preflight")
    assert result.status == ExitStatus.ERROR
    error = last_line(result.stderr)
    assert "Quota: quota NVIDIA_T4_GPUS in us-central1 is too low (limit 0.0)" in error
    assert "iam-admin/quotas?project=demo-project" in error


def test_preflight_blocker_stops_before_terraform(cli, deployment, fake):
    fake.project_quotas["GPUS_ALL_REGIONS"] = (0, 0)
    deployment.write(use_gpu=True)
    result = cli("apply", "-y")
    assert result.status == ExitStatus.CHECK_FAILED
    assert "nothing was created" in result.stderr
    assert "terraform init" not in result.stdout
    assert not deployment.state_file().exists()


def test_missing_tfvars(cli):
    result = cli("apply", "-y")
    assert result.status == ExitStatus.ERROR
    assert "terraform.tfvars not found. Copy infra/terraform.tfvars.example" in result.stderr


def test_terraform_not_installed(cli, deployment, tmp_path, monkeypatch):
    deployment.write()
    (tmp_path / "empty-bin").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    result = cli("apply", "-y")
    assert result.status == ExitStatus.ERROR
    assert last_line(result.stderr).startswith("gantry: error: terraform not found")
    assert "developer.hashicorp.com/terraform/install" in result.stderr


def test_unrecognised_failure_keeps_terraforms_words(cli, deployment):
    deployment.write(fail_with="Error: googleapi: Error 400: Invalid value for field 'resource.labels'")
    result = cli("apply", "-y", "--skip-preflight")
    assert result.status == ExitStatus.ERROR
    error = last_line(result.stderr)
    assert error.startswith("gantry: error: terraform apply failed (exit 1)")
    assert "Half-applied" in error
    assert "'resource.labels'" in result.output  # terraform's own text reached the user


# Google's text when Terraform enabled Artifact Registry seconds ago (google_project_service) and then
# creates the repository; and IAM a second after the nodes' service account was created.
JUST_ENABLED = ("Error: Error creating Repository: googleapi: Error 403: Artifact Registry API has not been used in "
                "project 123456789012 before or it is disabled. Enable it by visiting https://console.developers"
                ".google.com/apis/api/artifactregistry.googleapis.com/overview?project=123456789012 then retry. If "
                "you enabled this API recently, wait a few minutes for the action to propagate to our systems and "
                "retry.")
NEW_ACCOUNT = ("Error: Error applying IAM policy for storage bucket \\\"b/demo-project-gantry-runs\\\": Error setting "
               "IAM policy for storage bucket: googleapi: Error 400: Service account "
               "gantry-node@demo-project.iam.gserviceaccount.com does not exist., badRequest")
NO_WAIT = {"GANTRY_APPLY_RETRY_WAIT_S": "0.1"}


@pytest.mark.parametrize(("text", "why"), [
    (JUST_ENABLED, ("Applying once more in 0 s: artifactregistry.googleapis.com answered 403 SERVICE_DISABLED: "
                    "newly enabled APIs take 1-3 minutes to answer.")),
    (NEW_ACCOUNT, ("Applying once more in 0 s: IAM does not know the new service account "
                   "gantry-node@demo-project.iam.gserviceaccount.com yet")),
])
def test_a_fresh_projects_first_apply_waits_and_applies_once_more(cli, deployment, text, why):
    deployment.write(fail_once_with=text)
    result = cli("apply", "-y", "--skip-preflight", environ=NO_WAIT)
    assert result.status == ExitStatus.OK, result.output
    assert why in result.stdout
    assert result.stdout.count("Apply complete!") == 1
    assert "node_names: ['gantry-node-0']" in result.stdout


# google_project_iam_member in a project whose Cloud Resource Manager API is off (it was never in required_apis).
CRM_DISABLED = ("Error: Error retrieving IAM policy for project \\\"demo-project\\\": googleapi: Error 403: Cloud Resource "
                "Manager API has not been used in project 123456789012 before or it is disabled. Enable it by visiting "
                "https://console.developers.google.com/apis/api/cloudresourcemanager.googleapis.com/overview?project="
                "123456789012 then retry. If you enabled this API recently, wait a few minutes for the action to "
                "propagate to our systems and retry.")


def test_a_setup_api_that_is_off_is_not_waited_for_but_named_with_its_enable_command(cli, deployment):
    """Terraform enables APIs through Service Usage and grants roles through Resource Manager: when either is off,
    another try cannot help (issue 32), so apply fails at once with the command that fixes it."""
    deployment.write(fail_with=CRM_DISABLED)
    result = cli("apply", "-y", "--skip-preflight", environ=NO_WAIT)
    assert result.status == ExitStatus.ERROR
    assert "Applying once more" not in result.stdout
    assert "gcloud services enable cloudresourcemanager.googleapis.com --project=demo-project" in result.stderr


def test_an_api_that_stays_disabled_fails_after_one_more_try(cli, deployment):
    deployment.write(fail_with=JUST_ENABLED)
    result = cli("apply", "-y", "--skip-preflight", environ=NO_WAIT)
    assert result.status == ExitStatus.ERROR
    assert result.stdout.count("Applying once more") == 1
    assert last_line(result.stderr).startswith("gantry: error: terraform apply failed")


def test_apply_says_what_it_creates_and_bills_then_asks_at_a_terminal(cli, deployment):
    deployment.write(node_count=2)
    declined = cli("apply", answer="n")
    assert declined.status == ExitStatus.ERROR
    out = declined.stdout
    assert "To create in project demo-project, zone us-central1-a: 2 x c4-highcpu-16 (on-demand)" in out
    assert "Billing: $0.69/h per node, $1.38/h in total" in out
    assert out.index("Billing:") < out.index("Create it and start billing? [y/N]")
    assert "terraform init" not in out and not deployment.state_file().exists()
    assert last_line(declined.stderr) == ("gantry: error: apply cancelled; nothing was created. Run `make apply` "
                                          "again and answer y, or `make apply ARGS=-y` to skip the question.")
    accepted = cli("apply", answer="y")
    assert accepted.status == ExitStatus.OK, accepted.output
    assert "Apply complete!" in accepted.stdout


def test_apply_y_does_not_ask(cli, deployment):
    deployment.write()
    result = cli("apply", "-y", answer="n")  # a terminal that would say no: -y never asks it
    assert result.status == ExitStatus.OK, result.output
    assert "Create it and start billing?" not in result.stdout and "Billing: $0.69/h per node" in result.stdout


def test_apply_without_a_terminal_or_y_refuses_in_one_line_and_creates_nothing(fake, apis, deployment, tmp_path):
    """`make apply < /dev/null` (#42): the verb that starts billing goes on only when someone said yes."""
    deployment.write(node_count=2)
    environ = isolated_environ(tmp_path, GANTRY_COMPUTE_ENDPOINT=fake.endpoint, GANTRY_GOOGLEAPIS_ENDPOINT=apis.endpoint)
    result = subprocess.run([sys.executable, "-m", "gantry", "apply", "--infra-dir", str(deployment.infra)],
                            stdin=subprocess.DEVNULL, capture_output=True, text=True, env=environ, timeout=120,
                            check=False, cwd=deployment.root)
    assert result.returncode == ExitStatus.ERROR, result.stdout + result.stderr
    said = ("gantry: error: apply asks before it goes on and stdin is not a terminal; nothing was created. Run it at "
            "a terminal, or pass -y to go on without the question (`make apply ARGS=-y`).")
    assert result.stderr.splitlines() == [said], result.stderr
    assert "Billing: $0.69/h per node" in result.stdout  # the bill is stated before the refusal
    assert "terraform init" not in result.stdout and not deployment.state_file().exists()
