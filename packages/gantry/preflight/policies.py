"""Preflight's organisation-policy checks: constraints that let `terraform apply` succeed and then
break the kit quietly (or fail it halfway, after the network, bucket and repository exist).

Each is read with Cloud Resource Manager v1 ``projects.getEffectiveOrgPolicy`` (the policy in force
on the project, inherited from folders and the organisation) over REST. A project outside any
organisation answers an empty policy: nothing enforced. No permission to read policies (403) is a
warning, never a blocker.
"""

from __future__ import annotations

from gantry.config import Deployment
from gantry.gcp import GoogleApis
from gantry.preflight.checks import FAIL, OK, WARN
from gantry.preflight.project_setup import SERVICE_DISABLED, enable_command

# constraint -> (does it apply to this deployment, what it breaks when enforced)
BOOLEAN = {
    "compute.disableGuestAttributesAccess": (
        lambda d: True,
        ("nodes report their boot and run state through guest attributes, so `make status` and "
         "`make run-gcp` would never see a node ready or a run finish")),
    "compute.disableInstanceDataAccessApis": (
        lambda d: True,
        ("getSerialPortOutput is refused, so `make logs` and the output `make run-gcp` follows (serial "
         "port 2) stay empty")),
    "compute.requireShieldedVm": (
        lambda d: d.use_gpu,
        ("every new VM must have Secure Boot on, and GPU nodes are created with it off because the NVIDIA "
         "driver of the Deep Learning VM image is not signed for it: instance creation is refused, after the "
         "network, bucket and repository exist")),
}
TRUSTED_IMAGES = "compute.trustedImageProjects"


def check(report, d: Deployment, apis: GoogleApis) -> None:
    from google.api_core.exceptions import GoogleAPICallError

    wanted = [c for c, (applies, _) in BOOLEAN.items() if applies(d)] + [TRUSTED_IMAGES]
    broken = []
    for constraint in wanted:
        try:
            policy = apis.call("POST", "cloudresourcemanager", f"v1/projects/{d.project_id}:getEffectiveOrgPolicy",
                               body={"constraint": f"constraints/{constraint}"})
        except GoogleAPICallError as exc:
            if getattr(exc, "reason", None) == SERVICE_DISABLED:  # the API is off: no role would help
                report.add("org policies", FAIL, f"not checked: the Cloud Resource Manager API is disabled in project "
                                                 f"{d.project_id}, and `make apply` needs it (the nodes' IAM roles)",
                           f"Run `{enable_command(d.project_id, 'cloudresourcemanager.googleapis.com')}`, then "
                           "`make preflight` again.")
                return
            if exc.code in (401, 403):
                report.add("org policies", WARN, f"not checked: reading {constraint} was refused ({exc.code}: "
                                                 f"{exc.message.splitlines()[0][:120]})",
                           "Ask for roles/orgpolicy.policyViewer on the project to have preflight check the "
                           "organisation policies that break the kit.")
                return
            raise
        if constraint == TRUSTED_IMAGES:
            if not _image_trusted(policy, d.image_project):
                broken.append(report.add(
                    f"org policy {constraint}", FAIL,
                    f"the boot image project {d.image_project} is not trusted: instance creation fails, after "
                    "the network, bucket and repository exist",
                    f"Ask your organisation admin to allow it: gcloud resource-manager org-policies allow "
                    f"{constraint} projects/{d.image_project} --project={d.project_id}."))
        elif policy.get("booleanPolicy", {}).get("enforced"):
            broken.append(report.add(
                f"org policy {constraint}", FAIL, f"enforced: {BOOLEAN[constraint][1]}",
                f"Ask your organisation admin to exempt the project: gcloud resource-manager org-policies "
                f"disable-enforce {constraint} --project={d.project_id}."))
    if not broken:
        report.add("org policies", OK, f"none of {', '.join(wanted)} gets in the way")


def _image_trusted(policy: dict, image_project: str) -> bool:
    rule = policy.get("listPolicy")
    if not rule:
        return True  # no policy set anywhere: every image project is allowed
    if rule.get("allValues") in ("ALLOW", "DENY"):
        return rule["allValues"] == "ALLOW"
    names = {f"projects/{image_project}", image_project}

    def listed(key: str) -> bool:
        return any(value.removeprefix("is:") in names for value in rule.get(key, []))

    if listed("deniedValues"):
        return False
    return listed("allowedValues") if rule.get("allowedValues") else True
