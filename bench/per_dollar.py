"""What a million self-play positions cost on each node shape the kit offers (C4 sizes, N1 + T4).

$ per million positions = a node's list price per hour (gantry.cost, the table `make cost` prints) divided by the
positions it plays in an hour. On a deployment, `make status` prints this figure from the master's own pace, measured
on the node you rent; `make bench` prices this machine's pace as the C4 with as many vCPUs, and RECORDED lists
figures measured on other machines, each with the file it was read from and why it stands for a shape. Every row says
whether its pace was measured on that shape (none yet: no C4 or T4 has been rented for Gantry) or on a stand-in.
"""

from __future__ import annotations

import dataclasses
import functools
import tempfile
from pathlib import Path

from gantry import config, cost
from gantry.config import Deployment

INFRA = Path(__file__).resolve().parents[1] / "infra"

# Paces measured on machines that stand in for a kit shape (one 30 s run each, so read them as +-15%:
# bench/RESULTS.md, "On a GPU node, where should self-play's network run?"). The H200 host's Intel Xeon has AMX and
# bf16 like a C4's, but its learner trained on the H200, where a C4's shares the CPU: an upper bound for the C4. The
# N1 + T4 row is the same host held to fp32 actors (an N1's CPUs have no bf16) with leaves served by the GPU: an
# upper bound too, since an N1's CPUs and a T4 are both slower than that Xeon and an H200.
RECORDED = [
    {"shape": "c4-highcpu-8", "gpu": False, "positions_per_s": 4919.2,
     "basis": "stand-in: 8 vCPUs of an AMX Xeon (H200 host), bf16 actors; learner on the GPU",
     "source": "bench/results/gpu-placement-20261126-041000.json rows[0]"},
    {"shape": "c4-highcpu-16", "gpu": False, "positions_per_s": 8906.0,
     "basis": "stand-in: 16 vCPUs of an AMX Xeon (H200 host), bf16 actors; learner on the GPU",
     "source": "bench/results/gpu-20261126-035457.json inference_placement[0]"},
    {"shape": "n1-standard-8", "gpu": True, "positions_per_s": 5743.3,
     "basis": "stand-in: 8 vCPUs of an AMX Xeon held to fp32, leaves served by an H200 (not a T4)",
     "source": "bench/results/gpu-placement-20261126-041000.json rows[3]"},
]


@functools.cache
def infra_defaults() -> Deployment:
    """infra/variables.tf's settings, read the way `make cost` reads them (through Terraform: gantry.config)."""
    with tempfile.TemporaryDirectory() as folder:
        tfvars = Path(folder) / "terraform.tfvars"
        tfvars.write_text('project_id = "bench-project"\n')
        return config.load(tfvars, INFRA)


def node_hourly(shape: str, gpu: bool, spot: bool) -> float:
    """One node's list price, as `make cost` prices it (boot disk included)."""
    deployment = infra_defaults()
    field = "gpu_machine_type" if gpu else "cpu_machine_type"
    return cost.estimate(dataclasses.replace(deployment, use_gpu=gpu, spot=spot, **{field: shape})).node_hourly


def price(row: dict) -> dict:
    """The row with its node's $/h and $ per million positions, on-demand and Spot."""
    out = dict(row)
    for kind, spot in (("on_demand", False), ("spot", True)):
        hourly = node_hourly(row["shape"], row["gpu"], spot)
        out[f"{kind}_per_hour"] = hourly
        out[f"{kind}_per_million_positions"] = cost.per_million(hourly, row["positions_per_s"])
    return out


def this_machine(positions_per_s: float, vcpus: int, cpu: str) -> dict:
    """This machine's pace priced as the C4 with as many vCPUs (infra/variables.tf says which sizes exist)."""
    return {"shape": f"c4-highcpu-{vcpus}", "gpu": False, "positions_per_s": positions_per_s,
            "basis": f"stand-in: this machine ({vcpus} x {cpu}), make train-local's config", "source": "this run"}


def table_rows(measured: dict) -> list[dict]:
    return [price(r) for r in [measured, *RECORDED]]
