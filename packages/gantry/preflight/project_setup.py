"""Preflight's first-apply checks: what a fresh project needs before `terraform apply` can enable the rest.

infra/ enables the APIs it uses (infra/locals.tf required_apis), but two of them must already be on, since
Terraform calls them to get there: Service Usage (google_project_service enables every API through it) and
Cloud Resource Manager (google_project_iam_member reads and writes the project's IAM policy through it). The
provider bills every call to the project (infra/providers.tf: user_project_override, billing_project), so
neither can be enabled by Terraform in a project where it is off: a 403 SERVICE_DISABLED that no retry fixes.

User credentials (`gcloud auth application-default login`) also need a quota project: without one, APIs such
as Resource Manager, Service Usage and Cloud Quotas refuse the launcher's own calls, and the google provider's
calls to them fail the same way (terraform-provider-google #7351, #1538).

Each finding names the one command that fixes it.
"""

from __future__ import annotations

from gantry.config import Deployment
from gantry.gcp import GoogleApis
from gantry.preflight.checks import FAIL, OK, WARN

# The APIs that must be on before the first apply; infra/locals.tf's required_apis lists them too (keeping them
# on: destroy leaves APIs enabled), and tests/infra/test_infra_static.py checks that it does.
SETUP_APIS = {
    "serviceusage.googleapis.com": "Service Usage API (Terraform enables every other API through it)",
    "cloudresourcemanager.googleapis.com": "Cloud Resource Manager API (the nodes' IAM roles, the org-policy checks)",
}
SERVICE_DISABLED = "SERVICE_DISABLED"  # google.rpc.ErrorInfo reason of a call to an API that is off in the project


def enable_command(project: str, *services: str) -> str:
    return f"gcloud services enable {' '.join(services)} --project={project}"


def quota_project_command(project: str) -> str:
    return f"gcloud auth application-default set-quota-project {project}"


def check_quota_project(report, credentials, project: str) -> None:
    """User credentials carry the quota project their calls are billed to; service accounts use their own project."""
    from google.oauth2.credentials import Credentials as UserCredentials

    if not isinstance(credentials, UserCredentials):
        return
    quota_project = credentials.quota_project_id
    fix = f"Run `{quota_project_command(project)}`, then `make preflight` again."
    if not quota_project:
        report.add("quota project", FAIL, "your user credentials have no quota project: Resource Manager, Service "
                                          "Usage and Cloud Quotas refuse their calls (403), gantry's and Terraform's",
                   fix)
    elif quota_project != project:
        report.add("quota project", WARN, f"your user credentials bill API calls to project {quota_project}, not "
                                          f"{project}: that project must have the same APIs enabled", fix)
    else:
        report.add("quota project", OK, f"{project} (your user credentials' calls are billed to it)")


def check_apis(report, d: Deployment, apis: GoogleApis) -> set[str]:
    """Service Usage services.get of each setup API (cloud.google.com/service-usage/docs/reference/rest/v1/services/get:
    a Service with "state": "ENABLED" or "DISABLED"). Returns the ones known to be off."""
    from google.api_core.exceptions import GoogleAPICallError

    disabled = set()
    for service in SETUP_APIS:
        try:
            state = apis.call("GET", "serviceusage", f"v1/projects/{d.project_id}/services/{service}").get("state")
        except GoogleAPICallError as exc:  # no permission, or a project that is not there (the checks below say)
            if getattr(exc, "reason", None) == SERVICE_DISABLED:
                # Service Usage is off itself, so the others cannot be read: enabling an API that is on is a no-op.
                report.add("API serviceusage.googleapis.com", FAIL,
                           f"disabled in project {d.project_id}: the {SETUP_APIS['serviceusage.googleapis.com']}; "
                           "Terraform cannot enable it itself",
                           f"Run `{enable_command(d.project_id, *SETUP_APIS)}`, then `make preflight` again.")
                return {"serviceusage.googleapis.com"}
            report.add("setup APIs", WARN, f"not checked: Service Usage refused to say whether {service} is enabled "
                                           f"({exc.code}: {exc.message.splitlines()[0][:120]})",
                       f"If `make apply` fails on it: {enable_command(d.project_id, *SETUP_APIS)}")
            return disabled
        if state != "ENABLED":
            disabled.add(service)
            report.add(f"API {service}", FAIL, f"disabled in project {d.project_id}: the {SETUP_APIS[service]}; "
                                               "Terraform cannot enable it itself",
                       f"Run `{enable_command(d.project_id, service)}`, then `make preflight` again.")
    if not disabled:
        report.add("setup APIs", OK, f"{', '.join(SETUP_APIS)} enabled")
    return disabled
