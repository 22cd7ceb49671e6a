"""Preflight on a fresh project (issue 32, point 2): the APIs Terraform cannot enable itself (Service Usage,
Cloud Resource Manager), asked through the fake Service Usage API, and the quota project of user credentials,
read from an Application Default Credentials file as `gcloud auth application-default login` writes it."""

import json

import pytest
from gantry import preflight
from gantry.gcp import find_credentials
from gantry.preflight import project_setup
from gantry.status import ExitStatus
from launcher_helpers import needs_terraform
from local_cloud.googleapis import error

CRM = "cloudresourcemanager.googleapis.com"
SERVICE_USAGE = "serviceusage.googleapis.com"


@pytest.mark.terraform
@needs_terraform
def test_a_disabled_resource_manager_api_is_named_with_its_enable_command_not_a_missing_role(cli, deployment, apis):
    apis.disabled_services.add(CRM)
    deployment.write()
    result = cli("preflight")
    assert result.status == ExitStatus.CHECK_FAILED
    out = result.stdout
    assert f"[FAIL] API {CRM}: disabled in project demo-project" in out
    assert f"fix: Run `gcloud services enable {CRM} --project=demo-project`, then `make preflight` again." in out
    assert "[warn] org policies: not checked until the APIs above are enabled" in out
    assert "roles/orgpolicy.policyViewer" not in out  # the old report blamed a role
    assert f"GET /v1/projects/demo-project/services/{CRM}" in apis.requests
    assert result.stderr.startswith(f"gantry: error: preflight found 1 blocker(s): API {CRM}")


@pytest.mark.terraform
@needs_terraform
def test_a_disabled_service_usage_api_is_one_command_enabling_both(cli, deployment, apis):
    apis.disabled_services.add(SERVICE_USAGE)
    deployment.write()
    result = cli("preflight")
    assert result.status == ExitStatus.CHECK_FAILED
    assert f"[FAIL] API {SERVICE_USAGE}: disabled in project demo-project" in result.stdout
    assert f"gcloud services enable {SERVICE_USAGE} {CRM} --project=demo-project" in result.stdout


@pytest.mark.terraform
@needs_terraform
def test_enabled_setup_apis_pass_and_an_org_policy_call_to_a_disabled_api_says_so(cli, deployment, apis):
    deployment.write()
    clean = cli("preflight")
    assert clean.status == ExitStatus.OK, clean.output
    assert f"[ ok ] setup APIs: {SERVICE_USAGE}, {CRM} enabled" in clean.stdout
    # Service Usage says enabled, Resource Manager still answers SERVICE_DISABLED (an enable not yet propagated)
    apis.errors[r":getEffectiveOrgPolicy$"] = (403, apis.service_disabled(CRM))
    racing = cli("preflight")
    assert racing.status == ExitStatus.CHECK_FAILED
    assert "[FAIL] org policies: not checked: the Cloud Resource Manager API is disabled" in racing.stdout
    assert f"gcloud services enable {CRM} --project=demo-project" in racing.stdout
    assert "roles/orgpolicy.policyViewer" not in racing.stdout
    # a real permission refusal still asks for the role
    apis.errors[r":getEffectiveOrgPolicy$"] = (403, error(403, "PERMISSION_DENIED", "The caller does not have permission"))
    assert "roles/orgpolicy.policyViewer" in cli("preflight").stdout


def _adc_file(tmp_path, quota_project):
    """~/.config/gcloud/application_default_credentials.json as `gcloud auth application-default login` writes it
    (type authorized_user; set-quota-project adds quota_project_id)."""
    info = {"account": "", "client_id": "764086051850-x.apps.googleusercontent.com", "client_secret": "secret",
            "refresh_token": "1//refresh", "type": "authorized_user", "universe_domain": "googleapis.com"}
    if quota_project:
        info["quota_project_id"] = quota_project
    path = tmp_path / "application_default_credentials.json"
    path.write_text(json.dumps(info))
    return path


@pytest.mark.parametrize("quota_project, status", [(None, "FAIL"), ("other-project", "warn"), ("demo-project", "ok")])
def test_user_credentials_need_the_project_as_quota_project(tmp_path, monkeypatch, quota_project, status):
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(_adc_file(tmp_path, quota_project)))
    monkeypatch.delenv("GOOGLE_CLOUD_QUOTA_PROJECT", raising=False)  # google.auth would apply it over the file's
    credentials, _ = find_credentials({})  # what preflight runs with: google.auth.default, no network
    report = preflight.Report(deployment=None)
    project_setup.check_quota_project(report, credentials, "demo-project")
    (check,) = report.checks
    assert (check.name, check.status) == ("quota project", status)
    if status != "ok":
        assert check.fixes == [("Run `gcloud auth application-default set-quota-project demo-project`, then "
                                "`make preflight` again.")]
    if quota_project is None:
        assert check.detail.startswith("your user credentials have no quota project")


def test_service_account_and_anonymous_credentials_have_no_quota_project_to_check():
    from google.auth.credentials import AnonymousCredentials

    report = preflight.Report(deployment=None)
    project_setup.check_quota_project(report, AnonymousCredentials(), "demo-project")
    assert report.checks == []
