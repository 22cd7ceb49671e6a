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
    ({"use_gpu": True, "accelerator_type": "nvidia-l4"}, {"accelerator_type"}),
    # The CUDA image's torch is a CUDA 13 build (docker/torch.json): no kernels below compute capability 7.5.
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
