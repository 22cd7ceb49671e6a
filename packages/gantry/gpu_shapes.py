"""infra/gpu_shapes.json: the GPUs a deployment may ask for, the machine types that carry each count of them, their
quota names. One table for Terraform (infra/variables.tf's rules, modules/node_shape's machine type) and for gantry
(the machine type a tfvars file means, preflight's quotas, cost's vCPUs and memory); the sources are in the file."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

TABLE = Path(__file__).resolve().parents[2] / "infra" / "gpu_shapes.json"


@cache
def table() -> dict:
    return json.loads(TABLE.read_text())


def machine_type(accelerator_type: str, count: int, chosen: str = "") -> str:
    """The node's machine type: ``chosen`` (gpu_machine_type) when set, else the first the table lists for the count
    (n1-standard-8 for T4s, g2-standard-8 for one L4, a2-highgpu-4g for four A100s), as modules/node_shape picks."""
    if chosen:
        return chosen
    return table()["gpus"][accelerator_type]["machine_types"][str(count)][0]


def quota_metrics(accelerator_type: str) -> tuple[str, str]:
    """(on-demand, Spot) regional quota metrics of the GPU: NVIDIA_L4_GPUS, PREEMPTIBLE_NVIDIA_L4_GPUS."""
    gpu = table()["gpus"][accelerator_type]
    return gpu["quota"], gpu["spot_quota"]


def shape(machine_type: str) -> tuple[int, float] | None:
    """(vCPUs, GB) of a G2, A2 or A3 machine type, whose names do not say them; None for others."""
    found = table()["machine_types"].get(machine_type)
    return None if found is None else (found["vcpus"], float(found["memory_gb"]))
