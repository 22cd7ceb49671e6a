"""The Makefile's .venv: a TORCH_SPEC that differs from the one .venv's torch was installed with installs torch again
(a GPU laptop's `make train-local TORCH_SPEC=torch==2.13.0` after a CPU install); without one nothing is redone."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from suite_make import ROOT, clean_environ

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="no make on PATH")
INSTALL = "docker/torch_pins.py install"


def dry_run(venv: Path, *words: str) -> str:
    made = subprocess.run(["make", "-n", "--no-print-directory", "-C", str(ROOT), "train-local", f"VENV={venv}",
                           *words], capture_output=True, text=True, timeout=60, check=True, env=clean_environ())
    return made.stdout


def made_venv(tmp_path: Path, spec: str) -> Path:
    """A venv as make leaves it after an install with this TORCH_SPEC (stamps newer than pyproject.toml)."""
    venv = tmp_path / "venv"
    venv.mkdir()
    (venv / ".torch-spec").write_text(f"{spec}\n")
    (venv / ".installed").touch()
    return venv


@pytest.mark.parametrize("made_with, asked, installs", [
    ("", "", False),                            # make train-local, again
    ("", "torch==2.13.0", True),                # the README's GPU laptop, after a CPU install
    ("torch==2.13.0", "torch==2.13.0", False),  # the same spec again
    ("torch==2.13.0", "", False),               # without TORCH_SPEC the venv keeps its torch
    ("torch==2.13.0", "torch==2.12.0", True)])
def test_a_torch_spec_other_than_the_venvs_installs_torch_again(tmp_path, made_with, asked, installs):
    out = dry_run(made_venv(tmp_path, made_with), *([f"TORCH_SPEC={asked}"] if asked else []))
    assert (f'TORCH_SPEC="{asked}" ' in out and INSTALL in out) == installs, out
    assert out.splitlines()[-1].rstrip().endswith("-m selfplay train --config 'packages/selfplay/configs/connect4.yaml' "
                                         "'--run.dir=runs/local'"), out
    if installs:  # then the trainer is linked again and the spec remembered
        assert "pip install -q -e ." in out and f"echo '{asked}' >" in out


def test_a_new_venv_installs_torch_then_the_trainer(tmp_path):
    out = dry_run(tmp_path / "new")
    assert out.index(INSTALL) < out.index("pip install -q -e .") < out.index("-m selfplay train")


def test_a_venv_folder_with_a_space_is_refused_in_one_line_before_anything_runs(tmp_path):
    venv = tmp_path / "my venv"
    made = subprocess.run(["make", "--no-print-directory", "-C", str(ROOT), "train-local", f"VENV={venv}"],
                          capture_output=True, text=True, timeout=60, check=False, env=clean_environ())
    assert made.returncode != 0 and not venv.exists()
    assert f"VENV='{venv}' holds a space, and make cannot name files in such a folder" in made.stderr, made.stderr
