"""Shared by tests/infra: run terraform on provider-free configs, render the startup script,
and provide checkov from its own venv. Named infra_* so it never shadows another test helper."""

import fcntl
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from checkout import REPO

INFRA = REPO / "infra"
MODULES = INFRA / "modules"
PROVIDER_FREE_MODULES = ("node_shape", "startup_script")
CHECKOV_REQUIREMENTS = Path(__file__).with_name("requirements-checkov.txt")


def cache_dir(name: str, *inputs: str) -> Path:
    """Where scripts/cache_dir.sh keeps NAME: outside the clone, keyed by the contents of ``inputs`` (repository
    paths), so a fresh clone on this machine reuses what an earlier one installed."""
    made = subprocess.run(["bash", str(REPO / "scripts/cache_dir.sh"), name, *inputs], capture_output=True,
                          text=True, check=True, timeout=60)
    return Path(made.stdout.strip())


CHECKOV_VENV = cache_dir("venv-checkov", str(CHECKOV_REQUIREMENTS.relative_to(REPO)))


def require_tool(name: str, how_to_install: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.skip(f"{name} is not installed here; {how_to_install}")
    return path


def terraform_env(data_dir: Path) -> dict:
    """Environment for provider-free runs: no CLI config (so no mirror or registry is consulted)
    and a private data dir (so nothing is written under infra/)."""
    env = dict(os.environ)
    env.update(TF_CLI_CONFIG_FILE=os.devnull, TF_DATA_DIR=str(data_dir), TF_IN_AUTOMATION="1")
    env.pop("TF_CLI_ARGS", None)
    return env


def run(cmd, *, cwd=REPO, env=None, timeout=120, input_text=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(c) for c in cmd],
        check=False,
        cwd=cwd,
        env=env,
        input=input_text,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def render_startup_script(tmp_path: Path, **variables) -> str:
    """Render infra/modules/startup_script with Terraform itself, exactly as a node receives it."""
    config_dir = tmp_path / "render"
    config_dir.mkdir()
    values = {
        "deployment_name": "gantry",
        "registry_host": "us-central1-docker.pkg.dev",
        # what the root module passes (infra/locals.tf): the CUDA image's CUDA, one fact in docker/torch.json
        "required_cuda_version": json.loads((REPO / "docker" / "torch.json").read_text())["cuda"],
    }
    values.update(variables)

    def hcl(value):
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, (int, float)):
            return str(value)
        return '"' + str(value) + '"'

    arguments = "\n".join(f"  {key} = {hcl(value)}" for key, value in values.items())
    (config_dir / "main.tf").write_text(
        f'module "startup_script" {{\n  source = "{MODULES / "startup_script"}"\n{arguments}\n}}\n\n'
        'output "script" {\n  value = module.startup_script.script\n}\n'
    )
    return apply_and_read_output(config_dir, tmp_path / "tf-data", "script")


def apply_and_read_output(config_dir: Path, tf_data: Path, output: str) -> str:
    """`terraform apply` of a provider-free configuration, then one of its outputs as raw text."""
    env = terraform_env(tf_data)
    for cmd in (["init", "-input=false"], ["apply", "-auto-approve", "-input=false"]):
        result = run(["terraform", *cmd], cwd=config_dir, env=env)
        assert result.returncode == 0, f"terraform {cmd[0]} failed:\n{result.stdout}\n{result.stderr}"
    result = run(["terraform", "output", "-raw", output], cwd=config_dir, env=env)
    assert result.returncode == 0, result.stderr
    return result.stdout


def checkov_binary() -> Path:
    """checkov from its own venv (CHECKOV_VENV), installed on first use (one-time, a few minutes) under a lock."""
    binary = CHECKOV_VENV / "bin" / "checkov"
    stamp = CHECKOV_VENV / ".installed"
    CHECKOV_VENV.mkdir(parents=True, exist_ok=True)
    with open(CHECKOV_VENV / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        fresh = stamp.exists() and stamp.stat().st_mtime >= CHECKOV_REQUIREMENTS.stat().st_mtime
        if not (fresh and binary.exists()):
            python = shutil.which("python3") or sys.executable
            steps = (
                [python, "-m", "venv", CHECKOV_VENV],
                [CHECKOV_VENV / "bin" / "python", "-m", "pip", "install", "-q", "-r", CHECKOV_REQUIREMENTS],
            )
            for step in steps:
                result = run(step, timeout=900)
                assert result.returncode == 0, f"installing checkov failed: {result.stderr[-2000:]}"
            stamp.touch()
    return binary
