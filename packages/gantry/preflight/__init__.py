"""Preflight: will `terraform apply` of this deployment succeed, and what would stop it?

Read-only calls to the Compute API, in the order a failure is cheapest to explain:
credentials (and a user's quota project) -> the APIs Terraform cannot enable itself (gantry.preflight.project_setup) ->
project and Compute API -> zone -> machine type -> accelerator -> quotas for the
whole deployment (node_count x the need of one node: gantry.preflight.vm_quotas). A TPU VM: the type (Cloud TPU API) and
its quota (Cloud Quotas API, gantry.preflight.tpu_quota) instead of the VM checks. Every failed check names the
exact shortfall and the command or console page that fixes it; when the chosen zone
lacks the shape, the zones of the region that have it are listed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gantry.config import Deployment
from gantry.errors import CredentialsError, GantryError
from gantry.gcp import LOGIN_FIX, Compute, GoogleApis, short_name
from gantry.preflight import policies, project_setup, tpu_quota, vm_quotas
from gantry.preflight.checks import FAIL, OK, QUOTA_CONSOLE, WARN, Check


@dataclass
class Report:
    deployment: Deployment
    checks: list[Check] = field(default_factory=list)
    cpus_per_node: int | None = None  # from machineTypes.get, for quotas and the cost estimate
    memory_gb_per_node: float | None = None

    @property
    def failed(self) -> list[Check]:
        return [c for c in self.checks if c.status == FAIL]

    def add(self, name, status, detail, *fixes) -> Check:
        check = Check(name, status, detail, list(fixes))
        self.checks.append(check)
        return check


def run(deployment: Deployment, compute: Compute, apis: GoogleApis | None = None) -> Report:
    """``apis``: also check the organisation policies (gantry.preflight.policies) through Resource Manager."""
    report = Report(deployment)
    # The APIs Terraform cannot enable itself come first: on a fresh project they are the first fix to make.
    disabled = project_setup.check_apis(report, deployment, apis) if apis is not None else set()
    try:
        _run(report, deployment, compute, apis)
    except _Stop:
        pass  # a check that later ones depend on failed; it is already in the report
    else:
        if apis is not None and disabled:  # Resource Manager is off, or Service Usage (which hides whether it is)
            report.add("org policies", WARN, "not checked until the APIs above are enabled")
        elif apis is not None:
            policies.check(report, deployment, apis)
    return report


class _Stop(Exception):
    pass


def _run(report: Report, d: Deployment, compute: Compute, apis: GoogleApis | None = None) -> None:
    from google.api_core import exceptions as api

    # Project and Compute API in one call: projects.get also carries the project-wide quotas.
    from google.auth.exceptions import RefreshError, TransportError
    from requests.exceptions import RequestException

    try:
        project = compute.projects.get(project=d.project_id)
    except api.GoogleAPICallError as exc:
        report.add("project", FAIL, *_project_error(exc, d.project_id))
        raise _Stop from exc
    except RefreshError as exc:
        raise CredentialsError(f"your Google Cloud credentials could not be refreshed ({exc})", LOGIN_FIX) from exc
    except (TransportError, RequestException) as exc:
        raise GantryError(f"cannot reach the Compute API ({exc.__class__.__name__})",
                          "Check this machine's network and proxy settings, then `make preflight` again.") from exc
    report.add("project", OK, f"{d.project_id} reachable, Compute Engine API enabled")

    zones = {z.name: short_name(z.region) for z in compute.zones.list(project=d.project_id)}
    region_zones = sorted(z for z, r in zones.items() if r == d.region)
    if not region_zones:
        report.add("region", FAIL, f"region {d.region} has no zones visible to project {d.project_id}",
                   f"Set region in infra/terraform.tfvars to one of: {', '.join(sorted(set(zones.values())))}.")
        raise _Stop
    if d.zone not in region_zones:
        report.add("zone", FAIL, f"zone {d.zone} does not exist in {d.region}",
                   f"Set zone in infra/terraform.tfvars to one of: {', '.join(region_zones)}.")
        raise _Stop

    if d.use_tpu:
        # The TPU VM is created by the Cloud TPU API, not Compute: the VM shape, image and CPU/GPU
        # quota checks below do not apply to it; its type and quota are Cloud TPU's (gantry.preflight.tpu_quota).
        if apis is None:
            report.add("TPU", WARN, f"{d.tpu_type} in {d.zone}: TPU type and quota not checked",
                       f"Check your TRC allocation or TPU quota for {d.tpu_type} in {d.zone}: "
                       + QUOTA_CONSOLE.format(project=d.project_id))
            return
        _check_tpu_type(report, d, apis)
        tpu_quota.check(report, d, apis)
        return

    shape_ok = _check_shape(report, d, compute, d.zone)
    offering = zones_offering(d, compute) if not shape_ok or d.fallback_zones else []
    if not shape_ok:
        report.checks[-1].fixes.append(where_else(d, offering))
    if d.fallback_zones:
        _check_fallback_zones(report, d, offering)
    _check_image(report, d, compute)

    region = compute.regions.get(project=d.project_id, region=d.region)
    vm_quotas.check(report, d, vm_quotas.quota_map(project.quotas), vm_quotas.quota_map(region.quotas))


def _check_tpu_type(report: Report, d: Deployment, apis: GoogleApis) -> None:
    """The zone offers the TPU type: Cloud TPU API v2 projects.locations.acceleratorTypes.get."""
    from google.api_core.exceptions import Forbidden, NotFound

    path = f"v2/projects/{d.project_id}/locations/{d.zone}/acceleratorTypes/{d.tpu_type}"
    listing = f"`gcloud compute tpus accelerator-types list --zone={d.zone} --project={d.project_id}`"
    try:
        accelerator = apis.call("GET", "tpu", path)
    except NotFound:
        report.add("TPU type", FAIL, f"{d.tpu_type} is not offered in {d.zone}",
                   f"{listing} lists what is; set zone (and region) in infra/terraform.tfvars to a zone "
                   "infra/tpu_zones.json lists for the type.")
        return
    except Forbidden as exc:
        # tpu.googleapis.com is enabled by `make apply` (infra/locals.tf required_apis): before the
        # first apply the API answers 403 SERVICE_DISABLED, which must not block that apply.
        report.add("TPU type", WARN, f"the Cloud TPU API did not answer ({exc.message}), so {d.tpu_type} in "
                                     f"{d.zone} is unchecked",
                   f"`make apply` enables tpu.googleapis.com; then `make preflight` again, or run {listing}.")
        return
    configs = ", ".join(f"{c.get('type')} {c.get('topology')}" for c in accelerator.get("acceleratorConfigs", []))
    report.add("TPU type", OK, f"{d.tpu_type} in {d.zone}" + (f" ({configs})" if configs else ""))


def _check_shape(report: Report, d: Deployment, compute: Compute, zone: str) -> bool:
    from google.api_core.exceptions import NotFound

    try:
        machine = compute.machine_types.get(project=d.project_id, zone=zone, machine_type=d.machine_type)
    except NotFound:
        report.add("machine type", FAIL, f"{d.machine_type} is not offered in {zone}")
        return False
    report.cpus_per_node = machine.guest_cpus
    report.memory_gb_per_node = machine.memory_mb / 1024
    report.add("machine type", OK, f"{d.machine_type} in {zone}: {machine.guest_cpus} vCPU, "
                                   f"{machine.memory_mb / 1024:g} GB")
    if not d.use_gpu:
        return True
    try:
        accelerator = compute.accelerator_types.get(project=d.project_id, zone=zone,
                                                    accelerator_type=d.accelerator_type)
    except NotFound:
        report.add("accelerator", FAIL, f"{d.accelerator_type} is not offered in {zone}")
        return False
    most = accelerator.maximum_cards_per_instance
    if d.accelerator_count > most:
        report.add("accelerator", FAIL, f"{d.accelerator_type}: at most {most} per VM in {zone}, "
                                        f"accelerator_count = {d.accelerator_count}",
                   f"Set accelerator_count to {most} or less and raise node_count instead.")
        return False
    report.add("accelerator", OK, f"{d.accelerator_type} in {zone}, up to {most} per VM")
    return True


def _check_image(report: Report, d: Deployment, compute: Compute) -> None:
    """The boot image family still has a live image (families retire: Deep Learning VM ones within ~2 years)."""
    from google.api_core.exceptions import Forbidden, NotFound

    setting = "gpu_image_family" if d.use_gpu else "cpu_image"
    try:
        image = compute.images.get_from_family(project=d.image_project, family=d.image_family)
    except Forbidden:
        report.add("boot image", WARN, f"not checked: project {d.image_project} does not let you read its images")
        return
    except NotFound:
        live = sorted({i.family for i in compute.images.list(project=d.image_project)
                       if i.family and not (i.deprecated and i.deprecated.state)
                       and i.family.split("-")[0] == d.image_family.split("-")[0]})
        listed = f" Live families like it: {', '.join(live[:8])}." if live else ""
        report.add("boot image", FAIL, f"image family {d.image_project}/{d.image_family} has no live image: "
                                       "retired, or never existed",
                   f"Set {setting} in infra/terraform.tfvars to a live family.{listed} `gcloud compute images list "
                   f"--project {d.image_project} --no-standard-images` lists them all.")
        return
    report.add("boot image", OK, f"{d.image_project}/{d.image_family} -> {image.name}")


def _check_fallback_zones(report: Report, d: Deployment, offering: list[str]) -> None:
    """A stock-out would move the nodes to these zones (gantry.flows.apply): each must offer the shape."""
    shape = d.shape
    lacking = [z for z in d.fallback_zones if z not in offering]
    if not lacking:
        report.add("fallback zones", OK, f"{', '.join(d.fallback_zones)} offer {shape}")
        return
    here = [z for z in offering if z.startswith(d.region + "-") and z != d.zone]
    report.add("fallback zones", WARN, f"{', '.join(lacking)} of fallback_zones do not offer {shape}: a stock-out "
               "that moves there fails", f"Remove them from fallback_zones in infra/terraform.tfvars; zones of "
               f"{d.region} that offer {shape}: {', '.join(here) or 'none besides zone'}.")


def zones_offering(d: Deployment, compute: Compute) -> list[str]:
    """Every zone, in any region, that offers the machine type and (GPU path) the accelerator
    with at least accelerator_count per VM: two aggregated lists, whatever the region."""
    def offered(client, name: str, attribute: str, enough=lambda item: True) -> set[str]:
        found = set()
        pages = client.aggregated_list(request={"project": d.project_id, "filter": f'name = "{name}"'})
        for scope, listed in pages:
            if any(item.name == name and enough(item) for item in getattr(listed, attribute)):
                found.add(scope.removeprefix("zones/"))
        return found

    zones = offered(compute.machine_types, d.machine_type, "machine_types")
    if d.use_gpu:
        zones &= offered(compute.accelerator_types, d.accelerator_type, "accelerator_types",
                         lambda item: item.maximum_cards_per_instance >= d.accelerator_count)
    return sorted(zones)


def where_else(d: Deployment, zones: list[str]) -> str:
    """The settings that lead to a zone with the shape: this region's zones first, then other regions."""
    shape = d.shape
    here = [z for z in zones if z.startswith(d.region + "-") and z != d.zone]
    if here:
        return (f"Zones of {d.region} that offer {shape}: {', '.join(here)}; set zone = \"{here[0]}\" "
                "in infra/terraform.tfvars.")
    if zones:
        regions: dict[str, list[str]] = {}
        for zone in zones:
            regions.setdefault(zone.rsplit("-", 1)[0], []).append(zone)
        listed = "; ".join(f"{r} ({', '.join(z)})" for r, z in sorted(regions.items())[:6])
        return (f"No other zone of {d.region} offers {shape}; these regions do: {listed}. Set region and zone "
                "in infra/terraform.tfvars (quotas are per region: `make preflight` checks them).")
    what = "machine type" if not d.use_gpu else "machine type and accelerator combination"
    return (f"No zone of any region offers {shape}: it is not a {what} Compute Engine has. "
            f"`gcloud compute machine-types list --filter=name:{d.machine_type}` and "
            "`gcloud compute accelerator-types list` show what exists; fix infra/terraform.tfvars.")


# ---- errors ----
def _project_error(exc, project: str) -> tuple[str, str]:
    reason = getattr(exc, "reason", None)
    if exc.code == 403 and reason in ("SERVICE_DISABLED", "accessNotConfigured"):
        return (f"the Compute Engine API is disabled in project {project}",
                (f"Enable it: gcloud services enable compute.googleapis.com --project={project} "
                 "(takes a minute), then `make preflight` again."))
    if exc.code in (403, 404):
        return (f"project {project} not found, or your credentials cannot see it ({exc.code} {reason or ''})",
                ("Check project_id in infra/terraform.tfvars (`gcloud projects list` shows yours) and that "
                 "your account has roles/compute.viewer or more on it."))
    if exc.code == 401:
        raise CredentialsError("Google Cloud rejected the credentials on this machine (401)", LOGIN_FIX)
    return (f"the Compute API answered {exc.code}: {exc.message}",
            "Try again; if it persists see status.cloud.google.com.")



def render(report: Report) -> list[str]:
    lines = [f"Preflight for {report.deployment.describe()}:"]
    for check in report.checks:
        lines.append(f"  [{check.status:^4}] {check.name}: {check.detail}")
        lines.extend(f"         fix: {fix}" for fix in check.fixes)
    return lines
