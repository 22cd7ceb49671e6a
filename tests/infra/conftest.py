"""Fixtures shared by tests/infra.

The stand-in google provider (tools/tf-standin) lets the real `terraform` binary init, validate,
plan, test, apply and destroy infra/ offline. These fixtures install it into a private filesystem
mirror once per session and work on a copy of infra/, so no lock file, state or .terraform/ is
ever written into the repository (a committed lock file must carry the real provider's hashes).
"""

import importlib.util
import os
import shutil
from pathlib import Path

import pytest
from standin_tools import REPO, STANDIN, STANDIN_VARS, Terraform, copy_repo_tree


@pytest.fixture(scope="session")
def standin_env(tmp_path_factory) -> dict:
    """Environment whose TF_CLI_CONFIG_FILE installs hashicorp/google 8.7.0 from the stand-in mirror."""
    if shutil.which("terraform") is None:
        pytest.skip("terraform is not installed here; the infra tests need Terraform >= 1.9 on PATH")
    spec = importlib.util.spec_from_file_location("tf_standin_mirror", STANDIN / "mirror.py")
    mirror = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mirror)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TF_")}
    env.update(mirror.prepare(tmp_path_factory.mktemp("standin")))
    return env


@pytest.fixture(scope="session")
def terraform(standin_env) -> Terraform:
    return Terraform(standin_env)


@pytest.fixture(scope="session")
def standin_infra(tmp_path_factory, terraform) -> Path:
    """An initialized copy of infra/ (with infra/tests) against the stand-in provider."""
    if not (REPO / "infra" / "main.tf").exists():
        pytest.skip("infra/ has no root module yet")
    root = copy_repo_tree(tmp_path_factory.mktemp("repo"))
    terraform(root, "init", "-input=false", "-backend=false")
    return root


@pytest.fixture(scope="session")
def standin_plan_json(standin_infra, terraform, tmp_path_factory) -> dict:
    """`terraform show -json` of a plan of the GPU + Spot + 3-node + max_run_hours shape, the widest one."""
    plan = tmp_path_factory.mktemp("plan") / "gpu-spot.tfplan"
    terraform(standin_infra, "plan", "-input=false", "-lock=false", *STANDIN_VARS, "-var", "use_gpu=true",
              "-var", "spot=true", "-var", "node_count=3", "-var", "max_run_hours=4", f"-out={plan}")
    return terraform.json(standin_infra, "show", "-json", plan)
