"""Helpers of the stand-in provider tests (tests/infra/test_standin_*.py and conftest.py).
Named standin_* so it never shadows another directory's helper or conftest module."""

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from checkout import REPO

STANDIN = REPO / "tools" / "tf-standin"
FIXTURES = Path(__file__).resolve().parent / "fixtures"
# A project id that passes infra/'s validation and is plainly not a real project.
STANDIN_VARS = ["-var", "project_id=standin-proj"]


class Terraform:
    """`terraform` with the stand-in's CLI config; every call returns the CompletedProcess."""

    def __init__(self, env: dict):
        self.env = env

    def __call__(self, cwd: Path, *args, check: bool = True, timeout: int = 120) -> subprocess.CompletedProcess:
        result = subprocess.run(["terraform", *map(str, args)], check=False, cwd=cwd, env=self.env, capture_output=True,
                                text=True, timeout=timeout)
        if check and result.returncode != 0:
            output = re.sub(r"\x1b\[[0-9;]*m", "", f"{result.stdout[-4000:]}\n{result.stderr[-4000:]}")
            pytest.fail(f"terraform {' '.join(map(str, args))} in {cwd} exited {result.returncode}:\n{output}")
        return result

    def json(self, cwd: Path, *args) -> dict:
        return json.loads(self(cwd, *args).stdout)


def copy_repo_tree(dest: Path, tree: str = "infra") -> Path:
    """Copy `tree` under dest and link the repo's other top-level entries beside it, so paths
    like ${path.module}/../packages/gantry_agent resolve as they do in the checkout."""
    ignore = shutil.ignore_patterns(".terraform", ".terraform.lock.hcl", "*.tfstate*", "terraform.tfvars")
    shutil.copytree(REPO / tree, dest / tree, ignore=ignore)
    for entry in REPO.iterdir():
        if entry.name not in (tree, ".git") and not (dest / entry.name).exists():
            (dest / entry.name).symlink_to(entry)
    return dest / tree
