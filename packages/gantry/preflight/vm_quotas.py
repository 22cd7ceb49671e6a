"""Preflight's Compute quotas for a VM deployment (preflight runs it after the shape checks, into its Report): the
whole deployment's need (node_count x one node's vCPUs, boot disk and GPUs) against the project's and the region's
limits less their usage, with the family, Spot and GPU quota rules Google documents; a shortfall names the quota and
the `gcloud quotas preferences create` that asks for more."""

from __future__ import annotations

from gantry import gpu_shapes
from gantry.config import Deployment
from gantry.cost import load_prices, machine_shape
from gantry.preflight.checks import FAIL, OK, QUOTA_CONSOLE, WARN


def quota_map(quotas) -> dict[str, tuple[float, float]]:
    return {q.metric: (q.limit, q.usage) for q in quotas}


def check(report, d: Deployment, project: dict, region: dict) -> None:
    cpus = report.cpus_per_node
    if cpus is None:  # not offered in this zone: size the check from the name, so all blockers show at once
        shape = machine_shape(d.machine_type, load_prices())
        if shape is None:
            report.add("quotas", WARN, f"not checked: the vCPU count of {d.machine_type} is unknown")
            return
        cpus = shape[0]
    n = d.node_count
    _quota(report, d, "CPUS_ALL_REGIONS", project, cpus * n, regional=False)
    _check_cpus(report, d, region, cpus * n)
    _check_disk(report, d, region, d.boot_disk_size_gb * n)
    if d.use_gpu:
        gpus = d.accelerator_count * n
        _quota(report, d, "GPUS_ALL_REGIONS", project, gpus, regional=False)
        metric, _ = gpu_shapes.quota_metrics(d.accelerator_type)
        if d.spot:
            _quota(report, d, _spot_metric(region, metric), region, gpus, regional=True)
        else:
            _check_gpus(report, d, region, metric, gpus)


# Google's "Limit the run time of a VM" (cloud.google.com/compute/docs/instances/limit-vm-runtime): "GPU VMs that are
# configured to be automatically deleted after a predefined run time of 7 days or less can consume either preemptible
# or standard allocation quotas". New projects have 0 standard T4s; preemptible GPU quota is often what they have.
PREEMPTIBLE_GPU_QUOTA_MAX_RUN_HOURS = 7 * 24


def may_use_preemptible_gpu_quota(d: Deployment) -> bool:
    return d.termination_action == "DELETE" and 0 < d.max_run_hours <= PREEMPTIBLE_GPU_QUOTA_MAX_RUN_HOURS


def _check_gpus(report, d: Deployment, region: dict, metric: str, need: float) -> None:
    preemptible = f"PREEMPTIBLE_{metric}"

    def free(name: str) -> float:
        limit, usage = region.get(name, (0, 0))
        return limit - usage

    if may_use_preemptible_gpu_quota(d):
        # Either quota will do: one short is a warning, both short blocks (as C4_CPUS and CPUS).
        short = [m for m in (metric, preemptible) if free(m) < need]
        for name, other in ((metric, preemptible), (preemptible, metric)):
            _quota(report, d, name, region, need, regional=True, blocking=len(short) == 2,
                   note=f" (GPU VMs deleted within 7 days may use {other} instead; apply may still work.)")
        return
    _quota(report, d, metric, region, need, regional=True)
    if free(metric) < need <= free(preemptible):
        report.checks[-1].fixes.append(
            f"Or use the preemptible GPU quota ({preemptible}, free {free(preemptible):g}) without Spot: set "
            f"termination_action = \"DELETE\" and max_run_hours <= {PREEMPTIBLE_GPU_QUOTA_MAX_RUN_HOURS} in "
            "infra/terraform.tfvars (GPU VMs deleted within 7 days may use it: "
            "cloud.google.com/compute/docs/instances/limit-vm-runtime).")


def _check_cpus(report, d: Deployment, region: dict, need: float) -> None:
    if d.spot and _spot_metric(region, "CPUS") != "CPUS":
        # Spot VMs of every family, C4 included, draw on PREEMPTIBLE_CPUS once the project has some.
        _quota(report, d, "PREEMPTIBLE_CPUS", region, need, regional=True)
        return
    family_metric = f"{d.machine_type.split('-')[0].upper()}_CPUS"  # C4_CPUS; N1 has none
    if family_metric not in region:
        _quota(report, d, "CPUS", region, need, regional=True)
        return
    # C4 may count against CPUS or C4_CPUS: one short is a warning, both short blocks.
    short = [m for m in (family_metric, "CPUS") if m in region and region[m][0] - region[m][1] < need]
    for metric, other in ((family_metric, "CPUS"), ("CPUS", family_metric)):
        _quota(report, d, metric, region, need, regional=True, blocking=len(short) == 2,
               note=f" ({d.machine_type} VMs may count against {other} instead; apply may still work.)")


# Boot disk type (prices.json, as infra/modules/node_shape picks it) -> the regional quota it draws on.
DISK_METRICS = {"pd-balanced": "SSD_TOTAL_GB", "pd-ssd": "SSD_TOTAL_GB", "pd-standard": "DISKS_TOTAL_GB"}


def _check_disk(report, d: Deployment, region: dict, need: float) -> None:
    family = d.machine_type.split("-")[0]
    disk_type = load_prices()["machine_families"].get(family, {}).get("boot_disk_type")
    if disk_type in DISK_METRICS:
        metric = DISK_METRICS[disk_type]
    elif disk_type == "hyperdisk-balanced":
        # Hyperdisk Balanced capacity has its own regional quota. Its name is not in Google's public Quota.Metric
        # enum (HYPERDISK_BALANCED_TOTAL_GB in third-party code): take that one when the API reports it, else the
        # one other capacity metric it reports (never a _HIGH_AVAILABILITY_ one, which C4 boot disks do not use).
        reported = sorted(m for m in region if m.startswith("HYPERDISK_BALANCED") and m.endswith("_GB")
                          and "HIGH_AVAILABILITY" not in m)
        metric = ("HYPERDISK_BALANCED_TOTAL_GB" if "HYPERDISK_BALANCED_TOTAL_GB" in region or not reported
                  else reported[0])
    else:
        report.add("quota boot disks", WARN, f"not checked: the boot disk type of {d.machine_type} is unknown")
        return
    _quota(report, d, metric, region, need, regional=True)


def _spot_metric(region: dict, metric: str) -> str:
    """Spot VMs draw on PREEMPTIBLE_<metric> when the project has been granted some, else on <metric>."""
    preemptible = f"PREEMPTIBLE_{metric}"
    return preemptible if region.get(preemptible, (0, 0))[0] > 0 else metric


def _quota(report, d: Deployment, metric: str, quotas: dict, need: float, regional: bool,
           blocking: bool = True, note: str = "") -> None:
    scope = d.region if regional else "project"
    name = f"quota {metric} ({scope})"
    if metric not in quotas:
        report.add(name, WARN, f"not reported by the API; cannot check the {need:g} this deployment needs")
        return
    limit, usage = quotas[metric]
    free = limit - usage
    if need <= free:
        report.add(name, OK, f"need {need:g}, free {free:g} (limit {limit:g}, in use {usage:g})")
        return
    short = need - free
    quota_id = metric.replace("_", "-") + ("-per-project-region" if regional else "-per-project")
    dims = f" --dimensions=region={d.region}" if regional else ""
    report.add(
        name, FAIL if blocking else WARN,
        f"need {need:g} ({d.node_count} node(s)), limit {limit:g}, in use {usage:g}: short by {short:g}",
        f"Raise {metric} to at least {usage + need:g} at {QUOTA_CONSOLE.format(project=d.project_id)} "
        f"(filter on {metric}), or: gcloud quotas preferences create --service=compute.googleapis.com "
        f"--project={d.project_id} --quota-id={quota_id}{dims} --preferred-value={usage + need:g} "
        "--email=YOUR_EMAIL. " + ("New projects get 0 GPUs; approval takes minutes to days." if "GPU" in metric
                                  else "Approval takes minutes to days.")
        + ("" if blocking else note),
    )
