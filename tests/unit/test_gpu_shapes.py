"""infra/gpu_shapes.json, the one table of the GPUs a deployment may ask for: read by Terraform (variables.tf's rules,
node_shape's machine type) and by gantry (gpu_shapes.py). What each side takes from it must hold together."""

from __future__ import annotations

from gantry import cost, gpu_shapes
from gantry.config import Deployment


def deployment(**gpu) -> Deployment:
    settings = dict(project_id="p", region="us-central1", zone="us-central1-a", fallback_zones=(), deployment_name="g",
                    use_gpu=True, node_count=1, cpu_machine_type="c4-highcpu-16", gpu_machine_type="",
                    accelerator_type="nvidia-tesla-t4", accelerator_count=1, spot=False, max_run_hours=6,
                    termination_action="STOP", idle_shutdown_minutes=30, boot_disk_size_gb=100,
                    cpu_image="ubuntu-os-cloud/ubuntu-2404-lts-amd64", gpu_image_project="deeplearning-platform-release",
                    gpu_image_family="common-cu129-ubuntu-2204-nvidia-580", use_tpu=False, tpu_type="v5litepod-1")
    return Deployment(**{**settings, **gpu})


def test_an_empty_gpu_machine_type_is_the_first_shape_listed_as_node_shape_takes_it():
    assert deployment().machine_type == "n1-standard-8"
    assert deployment(accelerator_type="nvidia-l4").shape == "g2-standard-8 + 1 x nvidia-l4"
    assert deployment(accelerator_type="nvidia-l4", accelerator_count=8).machine_type == "g2-standard-96"
    assert deployment(accelerator_type="nvidia-h100-80gb", accelerator_count=8).machine_type == "a3-highgpu-8g"
    assert deployment(accelerator_type="nvidia-l4", gpu_machine_type="g2-standard-16").machine_type == "g2-standard-16"


def test_every_gpu_names_both_quotas_and_every_fixed_shape_its_vcpus():
    table = gpu_shapes.table()
    for name, gpu in table["gpus"].items():
        assert gpu["spot_quota"] == f"PREEMPTIBLE_{gpu['quota']}", name  # preflight's Spot rule (_spot_metric)
        if gpu["family"] != "n1":
            for shapes in gpu["machine_types"].values():
                assert all(s.startswith(gpu["family"] + "-") and s in table["machine_types"] for s in shapes), name
    assert cost.machine_shape("a2-highgpu-4g", cost.load_prices()) == (48, 340.0)


def test_every_shape_of_a_priced_family_has_a_price():
    prices = cost.load_prices()
    for gpu in gpu_shapes.table()["gpus"].values():
        family = prices["machine_families"][gpu["family"]]
        if gpu["family"] == "n1" or not family["machine_types"]:
            continue  # priced per vCPU and GB, or not at all (the table says why)
        listed = [s for shapes in gpu["machine_types"].values() for s in shapes]
        unpriced = [s for s in listed if s not in family["machine_types"]]
        assert not unpriced or gpu["family"] == "a2" and all(s.startswith("a2-ultragpu") for s in unpriced), unpriced


def test_zones_follow_the_count_so_the_zone_rule_needs_no_gpu_machine_type():
    """variables.tf's zone rule reads the count's first machine type, never gpu_machine_type (a bad one would silence
    it): that holds while a machine type with zones of its own (zones_of) is the only one of its count."""
    for name, gpu in gpu_shapes.table()["gpus"].items():
        assert gpu["zones"] == sorted(gpu["zones"]) and len(gpu["zones"]) >= 5, name
        for machine_type, zones in gpu.get("zones_of", {}).items():
            counts = [count for count, types in gpu["machine_types"].items() if machine_type in types]
            assert [gpu["machine_types"][count] for count in counts] == [[machine_type]], (name, machine_type)
            assert zones and zones != gpu["zones"], (name, machine_type)
