"""Helpers shared by the launcher tests (a unique module name: tests/infra has a conftest too)."""

from __future__ import annotations

import dataclasses
import functools
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from checkout import REPO

FIXTURE_MODULE = Path(__file__).parent / "fixtures" / "module"

needs_terraform = pytest.mark.skipif(shutil.which("terraform") is None,
                                     reason="terraform binary not on PATH (CI installs it)")


@functools.cache
def _infra_defaults():
    from gantry import config

    with tempfile.TemporaryDirectory(prefix="gantry-defaults-") as folder:
        path = Path(folder) / "terraform.tfvars.json"
        path.write_text('{"project_id": "my-project"}')
        return config.load(path, REPO / "infra")


def gantry_deployment(**settings):
    """A gantry.config.Deployment with infra/variables.tf's defaults, read the way every verb reads them
    (config.load, through Terraform), and ``settings`` replaced on top without Terraform's checks, so
    a test can price a shape infra/ refuses (a3-highgpu-8g, v9-8)."""
    return dataclasses.replace(_infra_defaults(), **settings)


class Deployment:
    """A work directory with infra/terraform.tfvars; ``infra`` is the module directory."""

    def __init__(self, root: Path, module: Path | None = None):
        self.root = root
        self.infra = root / "infra"
        if module is not None:
            shutil.copytree(module, self.infra)
        self.infra.mkdir(exist_ok=True)
        # The settings' rules every verb checks a tfvars file against (gantry.config.check).
        shutil.copy(REPO / "infra" / "variables.tf", self.infra / "variables.tf")
        for table in (REPO / "infra").glob("*.json"):  # the TPU and GPU rules read them (tpu_zones, gpu_shapes)
            shutil.copy(table, self.infra / table.name)
        self.tfvars = self.infra / "terraform.tfvars"

    def write(self, **settings) -> Path:
        settings = {"project_id": "demo-project", **settings}
        lines = []
        for key, value in settings.items():
            text = ("true" if value else "false") if isinstance(value, bool) else \
                (f'"{value}"' if isinstance(value, str) else json.dumps(value) if isinstance(value, list) else str(value))
            lines.append(f"{key} = {text}")
        self.tfvars.write_text("\n".join(lines) + "\n")
        return self.tfvars

    def state_file(self) -> Path:
        return self.infra / "terraform.tfstate"


class Result:
    def __init__(self, status, stdout: str, stderr: str):
        self.status, self.stdout, self.stderr = status, stdout, stderr

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


class NotATerminal(io.StringIO):
    def isatty(self) -> bool:
        return False


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def isolated_environ(tmp_path: Path, **extra: str) -> dict[str, str]:
    """An environment with no Google credentials and no metadata-server probing, so
    google.auth never leaves this machine (its GCE check would try 169.254.169.254)."""
    environ = {k: v for k, v in os.environ.items()
               if not k.startswith(("GOOGLE_", "CLOUDSDK_", "GCE_", "GANTRY_"))}
    environ.update(HOME=str(tmp_path), CLOUDSDK_CONFIG=str(tmp_path / "gcloud"), NO_GCE_CHECK="true",
                   GCE_METADATA_HOST="127.0.0.1:9", GCE_METADATA_IP="127.0.0.1:9", **extra)
    return environ


def run_module(args: list[str], cwd: Path, environ: dict[str, str]) -> subprocess.CompletedProcess:
    """Run `python -m gantry ...` as a user would, in a subprocess."""
    return subprocess.run([sys.executable, "-m", "gantry", *args], cwd=cwd, env=environ,
                          capture_output=True, text=True, timeout=120, check=False)
