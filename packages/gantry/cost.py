"""What a deployment costs per hour, from the price table in prices.json (data, dated).

The table holds per-vCPU, per-GB and per-GPU list prices for us-central1; a machine
type's vCPUs and memory come from the Compute API when preflight has asked, else from
its name (c4-highcpu-16 = 16 vCPUs x 2 GB). TPU VMs (use_tpu) are priced per chip-hour
from the table's "tpus" section; a TPU Research Cloud (TRC) allocation makes them free,
and `gantry cost --trc` says so while still showing the list price.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from gantry.config import DEFAULT_RUN_MAX_MINUTES, MAX_MINUTES_FLAG, Deployment

PRICES_PATH = Path(__file__).with_name("prices.json")
HOURS_PER_MONTH = 730  # Google's billing convention


def load_prices(path: Path = PRICES_PATH) -> dict:
    return json.loads(Path(path).read_text())


@dataclass
class Estimate:
    node_hourly: float | None  # one node incl. GPU and boot disk; None when the table lacks the shape
    node_count: int
    spot: bool
    max_run_hours: float
    lines: list[tuple[str, float]] = field(default_factory=list)  # (what, $/h) for one node
    notes: list[str] = field(default_factory=list)
    table_date: str = ""
    free_under_trc: bool = False  # a TPU VM that a TRC allocation covers: the lines are what it would cost

    @property
    def hourly(self) -> float | None:
        return None if self.node_hourly is None else self.node_hourly * self.node_count

    @property
    def run_cost(self) -> float | None:
        if self.hourly is None or not self.max_run_hours:
            return None
        return self.hourly * self.max_run_hours


def machine_shape(machine_type: str, prices: dict) -> tuple[int, float] | None:
    """(vCPUs, GB) from a predefined machine type name (a GPU family's from infra/gpu_shapes.json, whose names do
    not say them), or None for shapes we cannot read."""
    from gantry import gpu_shapes

    known = gpu_shapes.shape(machine_type)
    if known is not None:
        return known
    match = re.fullmatch(r"([a-z]\d+[a-z]?)-(standard|highcpu|highmem)-(\d+)", machine_type)
    if not match:
        return None
    family, kind, cpus = match.group(1), match.group(2), int(match.group(3))
    ratio = prices["machine_families"].get(family, {}).get("gb_per_vcpu", {}).get(kind)
    return None if ratio is None else (cpus, cpus * ratio)


def estimate(deployment: Deployment, prices: dict | None = None,
             cpus: int | None = None, memory_gb: float | None = None, trc: bool = False) -> Estimate:
    """trc: the project has a TPU Research Cloud allocation (TPU VMs free while it lasts)."""
    prices = prices or load_prices()
    result = Estimate(None, deployment.node_count, deployment.spot, deployment.max_run_hours,
                      table_date=prices["date"])
    if deployment.use_tpu:
        return _estimate_tpu(deployment, prices["tpus"], result, trc)
    if trc:
        result.notes.append("a TRC allocation covers TPUs only; these C4/N1 nodes bill at list price")
    family = deployment.machine_type.split("-", 1)[0]
    rates = prices["machine_families"].get(family)
    if cpus is None or memory_gb is None:
        shape = machine_shape(deployment.machine_type, prices)
        if shape:
            cpus, memory_gb = shape
    if rates is None or cpus is None:
        result.notes.append(f"no price for {deployment.machine_type} in the table (families: "
                            f"{', '.join(prices['machine_families'])}); add it to packages/gantry/prices.json")
        return result
    prefix = "spot_" if deployment.spot else ""
    kind = "Spot" if deployment.spot else "on-demand"
    host = rates.get("machine_types", {}).get(deployment.machine_type)  # G2, A2: a price per machine type
    if "machine_types" in rates and host is None:
        result.notes.append(f"no price for {deployment.machine_type} in the table ({rates['unpriced']}); add it to "
                            "packages/gantry/prices.json")
        return result
    vm = host[prefix + "hour"] if host else \
        cpus * rates[prefix + "vcpu_hour"] + memory_gb * rates[prefix + "gb_hour"]
    result.lines.append((f"{deployment.machine_type} ({cpus} vCPU, {memory_gb:g} GB), {kind}", vm))
    if deployment.use_gpu:
        gpu = prices["gpus"].get(deployment.accelerator_type)
        if gpu is None:
            why = prices.get("gpus_unpriced", {}).get(deployment.accelerator_type, "")
            result.notes.append(f"no price for {deployment.accelerator_type} in the table{f' ({why})' if why else ''}; "
                                "add it to packages/gantry/prices.json")
            return result
        gpu_hour = deployment.accelerator_count * gpu["spot_hour" if deployment.spot else "hour"]
        result.lines.append((f"{deployment.accelerator_count} x {deployment.accelerator_type}, {kind}", gpu_hour))
    disk_type = rates["boot_disk_type"]
    disk_gb = deployment.boot_disk_size_gb
    disk_hour = disk_gb * prices["disks_gb_month"][disk_type] / HOURS_PER_MONTH
    result.lines.append((f"boot disk {disk_gb} GB {disk_type}", disk_hour))
    result.node_hourly = sum(cost for _, cost in result.lines)
    if deployment.region != prices["region"]:
        result.notes.append(f"prices are {prices['region']}'s; {deployment.region} may differ by 10-25%")
    if deployment.spot:
        result.notes.append("Spot prices change up to once a day and nodes can be preempted")
    return result


def _estimate_tpu(deployment: Deployment, tpus: dict, result: Estimate, trc: bool) -> Estimate:
    """A TPU VM is billed per chip-hour, host VM and boot disk included (cloud.google.com/tpu/pricing)."""
    result.table_date = tpus["date"]
    shape = tpus["types"].get(deployment.tpu_type)
    if shape is None:
        result.notes.append(f"no price for TPU type {deployment.tpu_type} in the table (types: "
                            f"{', '.join(tpus['types'])}); add it to packages/gantry/prices.json")
        return result
    rates = tpus["generations"][shape["generation"]]
    kind = "Spot" if deployment.spot else "on-demand"
    chip_hour = rates["spot_chip_hour" if deployment.spot else "chip_hour"]
    result.lines.append((f"{deployment.tpu_type} TPU VM ({shape['chips']} chips x ${chip_hour:g}/chip-h), {kind}",
                         shape["chips"] * chip_hour))
    result.node_hourly = sum(cost for _, cost in result.lines)
    result.free_under_trc = trc
    if rates.get("region") and deployment.region != rates["region"]:
        result.notes.append(f"TPU {shape['generation']} prices are {rates['region']}'s; {deployment.region} may differ")
    if deployment.spot:
        result.notes.append("Spot TPUs can be preempted at any time")
    return result


def per_million(node_hourly: float, per_s: float) -> float | None:
    """$ of one node per million units of work (positions, samples, tokens) at its list price; None at no pace."""
    return node_hourly / (per_s * 3600) * 1e6 if per_s > 0 else None


def describe_pace_cost(node_hourly: float, per_s: float, unit: str) -> str:
    """The figure that compares node shapes: what a million ``unit`` cost on this one at the pace it reports
    (gantry.yaml's pace: the kit's trainer names its self-play positions)."""
    dollars = per_million(node_hourly, per_s)
    if dollars is None:
        return f"no {unit} in the newest report yet, so no $ per million {unit}"
    return (f"${dollars:.3f} per million {unit} ({per_s:,.0f} {unit}/s on node 0 at ${node_hourly:.3f}/h a node, "
            "list price)")


def render(result: Estimate, local: bool = False) -> list[str]:
    """Lines a person reads: per-node breakdown, the deployment's $/h, a run's cost. ``local``: the deployment is the
    local cloud's (gantry.local_world), which bills none of it."""
    lines = [f"Cost estimate (list prices, table dated {result.table_date}; packages/gantry/prices.json):"]
    if local:
        lines.append("  the local cloud bills none of it; on Google Cloud the same deployment would cost:")
    if result.free_under_trc:
        lines.append("  free under a TRC allocation (TPU Research Cloud); without one it would cost:")
    for what, hourly in result.lines:
        lines.append(f"  {what:<58} ${hourly:6.3f}/h")
    if result.hourly is not None:
        nodes = f"{result.node_count} node{'s' if result.node_count > 1 else ''}"
        lines.append(f"  {nodes + ' in total':<58} ${result.hourly:6.3f}/h  (${result.hourly * 24:.2f} a day)")
        if result.run_cost is not None:
            lines.append(f"  {'a run of max_run_hours = ' + format(result.max_run_hours, 'g'):<58} "
                         f"${result.run_cost:6.2f}")
        else:
            lines.append("  max_run_hours = 0: no time limit, the nodes bill until `make destroy`")
    for note in result.notes:
        lines.append(f"  note: {note}")
    return lines + limits(result.max_run_hours)


def limits(max_run_hours: float) -> list[str]:
    """The two time limits that end a forgotten run, and how to change them (0 removes one, on purpose)."""
    launches = (f"  runs:    every `make run-gcp` launch stops {DEFAULT_RUN_MAX_MINUTES:g} minutes after it starts, with a "
                f"checkpoint (SIGTERM), whatever it runs (ARGS=\"{MAX_MINUTES_FLAG} N\"; 0 = no limit)")
    if max_run_hours:
        nodes = (f"  nodes:   power off after max_run_hours = {max_run_hours:g} hours up, even without this machine "
                 "(infra/terraform.tfvars; 0 = no limit)")
    else:
        nodes = ("  nodes:   max_run_hours = 0: no limit; an idle node powers off after idle_shutdown_minutes, a "
                 "training one bills until `make destroy`")
    return ["Time limits:", launches, nodes]
