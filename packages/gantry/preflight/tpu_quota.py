"""Preflight's TPU quota check, through the Cloud Quotas API (a TPU VM draws on Cloud TPU's quotas, not Compute's).

GET https://cloudquotas.googleapis.com/v1/projects/P/locations/global/services/tpu.googleapis.com/quotaInfos
(cloud.google.com/docs/quotas/reference/rest/v1/projects.locations.services.quotaInfos/list) lists every quota of
Cloud TPU; a QuotaInfo's ``dimensionsInfos`` hold its value per zone ({"dimensions": {"zone": Z}, "details":
{"value": "8"}, "applicableLocations": [Z]}; empty details: the zone has none), and the entry without dimensions is
the default for the zones it lists. Limits only: Cloud Quotas reports no usage, so a TPU already running elsewhere
in the zone is not subtracted.

Each TPU generation has its own per-zone quota, on-demand or preemptible (Spot TPUs use the preemptible one), and
v2/v3 Pod quotas cannot be used for a v2-8 or v3-8 (cloud.google.com/tpu/docs/quota). The quota IDs are not in one
public table, and they differ in shape across generations (errors and users' scripts show
TPUV5sLitepodPerProjectPerZoneForTPUAPI, TPUV5sPreemptibleLitepodPerProjectPerZoneForTPUAPI,
TPUV4sPreemptiblePodPerProjectPerZoneForTPUAPI, TPUV2sPodPerProjectPerZoneForTPUAPI), so the check matches the IDs
by generation prefix, PerZone and Preemptible rather than naming each one. Units differ too (TensorCores for v2/v3,
chips or TensorCores for v4, chips for v5e), so only a zero is a blocker; less than the type's number is a warning.
"""

from __future__ import annotations

from gantry.config import Deployment
from gantry.gcp import GoogleApis
from gantry.preflight.checks import FAIL, OK, QUOTA_CONSOLE, WARN

SERVICE = "cloudquotas"
# tpu_type's generation (the name before its last -N) -> (quota ID prefix, a word the ID must hold, a word it must not)
GENERATIONS = {
    "v2": ("TPUV2s", "", "Pod"),  # single devices: the Pod quotas do not cover a v2-8
    "v3": ("TPUV3s", "", "Pod"),
    "v4": ("TPUV4", "", ""),  # every v4 is a slice: one quota per kind
    "v5litepod": ("TPUV5s", "Litepod", ""),  # v5e training and serving quotas both carry Litepod
}


def check(report, d: Deployment, apis: GoogleApis) -> None:
    """Adds one check, "TPU quota": FAIL when every matching quota is 0 in the zone (apply would be refused)."""
    from google.api_core.exceptions import Forbidden, NotFound

    name = "TPU quota"
    kind = "preemptible (Spot)" if d.spot else "on-demand"
    console = QUOTA_CONSOLE.format(project=d.project_id)
    generation, _, count = d.tpu_type.rpartition("-")
    if generation not in GENERATIONS:
        report.add(name, WARN, f"not checked: which Cloud TPU quota {d.tpu_type} draws on is not known here",
                   f"Check it at {console} (service Cloud TPU API, zone {d.zone}).")
        return
    path = f"v1/projects/{d.project_id}/locations/global/services/tpu.googleapis.com/quotaInfos"
    try:
        infos = apis.list(SERVICE, path, "quotaInfos")
    except (Forbidden, NotFound) as exc:
        # As for the other APIs preflight cannot ask (policies, the TPU API before the first apply): unchecked.
        report.add(name, WARN, f"not checked: the Cloud Quotas API did not answer ({exc.message})",
                   f"Enable it (`gcloud services enable cloudquotas.googleapis.com --project={d.project_id}`) or "
                   f"ask for roles/cloudquotas.viewer, or look at {console} (service Cloud TPU API, zone {d.zone}).")
        return
    found = {info["quotaId"]: value for info in infos if _draws_on(info.get("quotaId", ""), generation, d.spot)
             and (value := zone_value(info, d.zone)) is not None}
    need = int(count) if count.isdigit() else 1
    if not found:
        report.add(name, WARN, f"not checked: Cloud TPU reports no {kind} {generation} quota for zone {d.zone}",
                   f"Check it at {console}; a TRC allocation names its zones in its email.")
        return
    best_id, best = max(found.items(), key=lambda item: item[1])
    ids = ", ".join(sorted(found))
    if best == 0:
        report.add(name, FAIL, f"{kind} {generation} quota in {d.zone} is 0 ({ids}): Cloud TPU would refuse "
                               f"{d.tpu_type}",
                   f"Ask for it at {console} (filter on {best_id}), or: gcloud quotas preferences create "
                   f"--service=tpu.googleapis.com --project={d.project_id} --quota-id={best_id} "
                   f"--dimensions=zone={d.zone} --preferred-value={need} --email=YOUR_EMAIL. With a TPU Research "
                   "Cloud (TRC) allocation, set zone (and region) to a zone its email grants"
                   + ("" if d.spot else ", and spot to what it grants (on-demand or preemptible)") + ".")
        return
    if best < need:
        report.add(name, WARN, f"{kind} {generation} quota in {d.zone} is {best} ({best_id}), {d.tpu_type} may need "
                               f"{need} (chips or TensorCores, by generation)",
                   f"If `make apply` says quota, ask for more at {console} (filter on {best_id}).")
        return
    report.add(name, OK, f"{kind} {generation} quota in {d.zone}: {best} ({best_id}); in use not reported, "
                         "stock not checked")


def _draws_on(quota_id: str, generation: str, spot: bool) -> bool:
    prefix, must, must_not = GENERATIONS[generation]
    return (quota_id.startswith(prefix) and "PerZone" in quota_id and ("Preemptible" in quota_id) == spot
            and (not must or must in quota_id) and (not must_not or must_not not in quota_id))


def zone_value(info: dict, zone: str) -> int | None:
    """The quota's value in ``zone``: its own entry (empty details: 0), else the default entry's when it lists the
    zone, else None (the quota does not apply there)."""
    default = None
    for entry in info.get("dimensionsInfos", []):
        dimensions = entry.get("dimensions") or {}
        value = (entry.get("details") or {}).get("value")
        if dimensions.get("zone") == zone:
            return int(value) if value is not None else 0
        if not dimensions and zone in entry.get("applicableLocations", []):
            default = int(value) if value is not None else 0
    return default
