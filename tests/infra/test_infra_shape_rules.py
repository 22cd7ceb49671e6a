"""The shape and scheduling rules of infra/variables.tf, the one place they live (node_shape declares its
inputs with types only: its variables.tf says why). Each bad combination fails Terraform's offline check of
variables.tf (gantry.terraform.check_variables, what every gantry verb runs) on the variable the user set,
and on no other; these were node_shape's validation.tftest.hcl while the module carried a copy of the rules."""

import json

import pytest
from gantry.terraform import check_variables
from infra_tools import INFRA, require_tool

pytestmark = pytest.mark.terraform


@pytest.mark.parametrize("settings, failing", [
    ({"use_gpu": True, "gpu_machine_type": "c4-highcpu-16"}, {"gpu_machine_type"}),  # a T4 attaches only to N1
    ({"cpu_machine_type": "n1-standard-8"}, {"cpu_machine_type"}),  # the GPU path's shape without use_gpu
    ({"cpu_machine_type": "n2-standard-16"}, {"cpu_machine_type"}),  # non-C4 without allow_non_c4_cpu_shape
    ({"cpu_machine_type": "c4-highcpu-22"}, {"cpu_machine_type"}),  # no such C4 size
    # Google's C4 table has -lssd shapes for standard and highmem only (issue #32), and from 4 vCPUs.
    ({"cpu_machine_type": "c4-highcpu-16-lssd"}, {"cpu_machine_type"}),
    ({"cpu_machine_type": "c4-standard-2-lssd"}, {"cpu_machine_type"}),
    ({"node_count": 0}, {"node_count"}),
    ({"node_count": 1.5}, {"node_count"}),
    # infra/gpu_shapes.json: G2, A2 and A3 carry their GPUs in the machine type, so the pair must exist
    ({"use_gpu": True, "accelerator_type": "nvidia-l4", "gpu_machine_type": "n1-standard-8"}, {"gpu_machine_type"}),
    ({"use_gpu": True, "accelerator_type": "nvidia-l4", "gpu_machine_type": "g2-standard-24"}, {"gpu_machine_type"}),
    ({"use_gpu": True, "accelerator_type": "nvidia-l4", "accelerator_count": 3}, {"accelerator_count"}),
    ({"use_gpu": True, "accelerator_type": "nvidia-l4", "accelerator_count": 8}, set()),
    ({"use_gpu": True, "accelerator_type": "nvidia-tesla-a100", "accelerator_count": 16}, set()),
    ({"use_gpu": True, "accelerator_type": "nvidia-tesla-a100", "accelerator_count": 4,  # a2-highgpu-8g carries 8
      "gpu_machine_type": "a2-highgpu-8g"}, {"gpu_machine_type"}),
    ({"use_gpu": True, "accelerator_type": "nvidia-a100-80gb", "accelerator_count": 16}, {"accelerator_count"}),
    ({"use_gpu": True, "accelerator_type": "nvidia-h100-80gb", "accelerator_count": 1}, {"accelerator_count"}),
    ({"use_gpu": True, "accelerator_type": "nvidia-h100-80gb", "accelerator_count": 1, "spot": True,
      "max_run_hours": 6}, set()),  # a3-highgpu-1g: Spot only
    ({"use_gpu": True, "accelerator_count": 2, "gpu_machine_type": "n1-standard-64"}, {"gpu_machine_type"}),
    ({"use_gpu": True, "accelerator_count": 4, "gpu_machine_type": "n1-standard-64"}, set()),  # 96 vCPUs with 4
    # The CUDA image's torch is a CUDA 13 build (docker/torch.json): no kernels below compute capability 7.5.
    # zones per GPU and machine type (infra/gpu_shapes.json): H100 and L4 are not in us-central1-f, T4s are
    ({"use_gpu": True, "accelerator_type": "nvidia-h100-80gb", "accelerator_count": 8, "zone": "us-central1-f"},
     {"zone"}),
    ({"use_gpu": True, "accelerator_type": "nvidia-l4", "zone": "us-central1-f"}, {"zone"}),
    ({"use_gpu": True, "accelerator_type": "nvidia-a100-80gb", "zone": "us-central1-b"}, {"zone"}),
    ({"use_gpu": True, "zone": "us-central1-f"}, set()),
    ({"use_gpu": False, "zone": "us-central1-f"}, set()),  # checked only on the GPU path
    ({"use_gpu": True, "accelerator_type": "nvidia-l4", "fallback_zones": ["us-central1-b", "us-central1-f"]},
     {"fallback_zones"}),
    # a3-highgpu-8g is the one H100 shape not in europe-west8-c (the machine type's zones, not its family's)
    ({"use_gpu": True, "accelerator_type": "nvidia-h100-80gb", "accelerator_count": 8, "region": "europe-west8",
      "zone": "europe-west8-c"}, {"zone"}),
    ({"use_gpu": True, "accelerator_type": "nvidia-h100-80gb", "accelerator_count": 1, "spot": True,
      "region": "europe-west8", "zone": "europe-west8-c"}, set()),
    ({"use_gpu": True, "accelerator_type": "nvidia-tesla-v100"}, {"accelerator_type"}),
    ({"use_gpu": True, "accelerator_count": 3}, {"accelerator_count"}),
    ({"boot_disk_size_gb": 20}, {"boot_disk_size_gb"}),
    ({"max_run_hours": -1}, {"max_run_hours"}),
    ({"spot": True, "max_run_hours": 0}, {"spot"}),  # a preempted node would leave the others billing
    ({"termination_action": "SUSPEND"}, {"termination_action"}),
    ({"cpu_image": "ubuntu-2404-lts-amd64"}, {"cpu_image"}),  # PROJECT/FAMILY
    ({"cpu_machine_type": "n2-standard-16", "allow_non_c4_cpu_shape": True}, set()),  # the deliberate override
    ({"cpu_machine_type": "c4-standard-8-lssd"}, set()),
    ({"use_gpu": False, "gpu_machine_type": "c4-highcpu-16"}, set()),  # checked only on the GPU path
])
def test_each_bad_shape_fails_on_the_variable_it_set(tmp_path, settings, failing):
    require_tool("terraform", "install Terraform >= 1.9 (CI machines have 1.11)")
    lines = ['project_id = "my-project"'] + [f"{name} = {json.dumps(value)}" for name, value in settings.items()]
    var_file = tmp_path / "terraform.tfvars"
    var_file.write_text("\n".join(lines) + "\n")
    diagnostics, values = check_variables(INFRA / "variables.tf", var_file)
    errors = [d for d in diagnostics if d["severity"] == "error"]
    assert {d["snippet"]["code"].split("=")[0].strip() for d in errors} == failing, errors
    assert all(d["summary"] == "Invalid value for variable" for d in errors)
    assert (values is None) == bool(failing)


def test_a_gpu_pair_that_does_not_exist_names_the_shapes_that_do(tmp_path):
    require_tool("terraform", "install Terraform >= 1.9 (CI machines have 1.11)")
    var_file = tmp_path / "terraform.tfvars"
    var_file.write_text('project_id = "my-project"\nuse_gpu = true\naccelerator_type = "nvidia-l4"\n'
                        'accelerator_count = 5\n')
    diagnostics, _ = check_variables(INFRA / "variables.tf", var_file)
    (error,) = [d for d in diagnostics if d["severity"] == "error"]
    assert error["detail"].startswith("accelerator_count 5 of nvidia-l4 is not a shape Google offers: a node takes 1, 2, 4, 8 "
                                      "(infra/gpu_shapes.json); for more GPUs raise node_count.")


@pytest.mark.parametrize("settings, message", [
    ('accelerator_type = "nvidia-h100-80gb"\naccelerator_count = 8\nzone = "us-central1-f"\n',
     ("8 x nvidia-h100-80gb is not offered in zone us-central1-f: in region us-central1 use zone "
     "us-central1-a or us-central1-b or us-central1-c (infra/gpu_shapes.json).")),
    ('accelerator_type = "nvidia-l4"\nregion = "us-central2"\nzone = "us-central2-b"\n',
     ("1 x nvidia-l4 is not offered in zone us-central2-b: region us-central2 has none; set region and zone "
     "to one of asia-east1, ")),
])
def test_a_gpu_in_a_zone_without_it_names_the_zones_that_have_it(tmp_path, settings, message):
    require_tool("terraform", "install Terraform >= 1.9 (CI machines have 1.11)")
    var_file = tmp_path / "terraform.tfvars"
    var_file.write_text(f'project_id = "my-project"\nuse_gpu = true\n{settings}')
    diagnostics, _ = check_variables(INFRA / "variables.tf", var_file)
    (error,) = [d for d in diagnostics if d["severity"] == "error"]
    assert error["detail"].startswith(message), error["detail"]
