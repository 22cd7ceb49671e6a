"""Plans that must fail before anything is created, with the message the user sees: the real
terraform binary plans a copy of infra/ against the stand-in google provider (issue 16)."""

import json
import re

import pytest
from standin_tools import REPO, STANDIN_VARS

pytestmark = pytest.mark.terraform


def refused_plan(terraform, infra, *variables) -> str:
    """Plan with -var pairs that must be refused; return what terraform printed, on one line per diagnostic."""
    args = [arg for name_value in variables for arg in ("-var", name_value)]
    result = terraform(infra, "plan", "-input=false", "-lock=false", "-no-color", *STANDIN_VARS, *args, check=False)
    assert result.returncode == 1, f"the plan was not refused:\n{result.stdout[-3000:]}"
    return re.sub(r"\s*│\s*", " ", result.stderr)


def test_spot_without_max_run_hours_is_refused_naming_the_fix(terraform, standin_infra):
    output = refused_plan(terraform, standin_infra, "spot=true", "max_run_hours=0")
    assert 'on variables.tf' in output and "var.spot" in output
    assert "spot = true needs max_run_hours > 0 (e.g. max_run_hours = 8)" in output


def test_a_retired_gpu_image_family_fails_plan_naming_the_family(terraform, standin_infra):
    # Deep Learning VM families reach end of support; this one did in April 2026. Plan must fail
    # before anything exists, with Google's 404 naming the family, not at instance creation.
    output = refused_plan(terraform, standin_infra, "use_gpu=true",
                          "gpu_image_family=common-cu128-ubuntu-2204-nvidia-570")
    assert ("error retrieving image information: googleapi: Error 404: The resource 'projects/deeplearning-platform-"
            "release/global/images/family/common-cu128-ubuntu-2204-nvidia-570' was not found, notFound") in output
    assert 'data.google_compute_image.boot' in output


# The oldest Linux driver branch that runs each CUDA release (NVIDIA's CUDA Toolkit release notes, "CUDA Toolkit
# and Corresponding Driver Versions"): a fact of the world the Deep Learning VM family names (...-nvidia-580).
MIN_DRIVER_FOR_CUDA = {"12.8": 570, "12.9": 575, "13.0": 580}


def test_the_default_gpu_family_plans_and_carries_the_trainer_images_cuda(terraform, standin_infra, tmp_path):
    plan = tmp_path / "gpu.tfplan"
    terraform(standin_infra, "plan", "-input=false", "-lock=false", *STANDIN_VARS, "-var", "use_gpu=true",
              f"-out={plan}")
    shown = terraform.json(standin_infra, "show", "-json", plan)
    family = shown["variables"]["gpu_image_family"]["value"]
    nodes = [r for r in shown["planned_values"]["root_module"]["resources"] if r["type"] == "google_compute_instance"]
    script = nodes[0]["values"]["metadata"]["startup-script"]
    # The boot check requires the CUDA image's CUDA, read from the one file that pins it (docker/torch.json) ...
    required = re.search(r'^readonly required_cuda="([^"]+)"$', script, flags=re.MULTILINE).group(1)
    assert required == json.loads((REPO / "docker" / "torch.json").read_text())["cuda"]
    # ... and the default family's driver runs it (driver 580 runs CUDA up to 13.0, whatever toolkit it ships).
    driver = int(re.search(r"-nvidia-(\d+)$", family).group(1))
    assert driver >= MIN_DRIVER_FOR_CUDA[required], (family, required)
