"""examples/chess_selfplay, the project a user brings with their own trainer: run from its command line as its README
says, it trains, checkpoints, resumes and stops like a plain program, and it knows nothing of the kit."""

from __future__ import annotations

import ast
import json
import re
import shlex
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from checkout import REPO

EXAMPLE = REPO / "examples" / "chess_selfplay"
KIT_SECTION = "## Running it on the kit"  # the README's one part about the kit, which the kit's commands fill
KIT_NAMES = re.compile(r"gantry|launch_contract|\bselfplay\b", re.IGNORECASE)  # GANTRY_* included
KIT_MODULES = {"gantry", "gantry_agent", "launch_contract", "selfplay", "toytrain"}
QUICK = ["--games-per-iter", "4", "--max-plies", "40", "--workers", "2"]  # the README's "a few seconds" settings


def readme_command() -> list[str]:
    """The README's command that trains on CPU, as the venv's python runs it."""
    line = next(line for line in (EXAMPLE / "README.md").read_text().splitlines()
                if line.startswith("python scripts/train_multi_gpu.py"))
    return [sys.executable, *shlex.split(line)[1:]]


def train(project: Path, *args: str, timeout: int = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "scripts/train_multi_gpu.py", *args], cwd=project, capture_output=True,
                          text=True, timeout=timeout, check=False)


@pytest.fixture
def project(tmp_path) -> Path:
    """A copy of the example, as a user's checkout: its default save dir lands in the copy."""
    copy = tmp_path / "chess_selfplay"
    shutil.copytree(EXAMPLE, copy, ignore=shutil.ignore_patterns("checkpoints", "__pycache__"))
    return copy


@pytest.mark.slow
def test_it_trains_checkpoints_and_resumes_where_it_stopped(project):
    first = train(project, "--gpus", "cpu", "--iterations", "2", *QUICK)
    assert first.returncode == 0, first.stdout + first.stderr
    assert re.findall(r"^iteration (\d+)/2:", first.stdout, re.MULTILINE) == ["1", "2"]  # a line per iteration
    saved = project / "checkpoints"
    assert sorted(p.name for p in saved.iterdir()) == ["model_1.pt", "model_2.pt", "training_stats.json"]
    stats = json.loads((saved / "training_stats.json").read_text())
    assert stats["iteration"] == 2 and stats["games"] == 4 and stats["positions"] > 0
    assert stats["wins"] + stats["draws"] + stats["losses"] == 4
    assert torch.load(saved / "model_2.pt")["iteration"] == 2

    again = subprocess.run(readme_command(), cwd=project, capture_output=True, text=True, timeout=120, check=False)
    assert again.returncode == 0, again.stdout + again.stderr
    assert f"resumed from {Path('checkpoints') / 'model_2.pt'} at iteration 2" in again.stdout
    assert re.findall(r"^iteration (\d+)/3:", again.stdout, re.MULTILINE) == ["3"]
    assert json.loads((saved / "training_stats.json").read_text())["iteration"] == 3
    assert (saved / "model_3.pt").is_file()


@pytest.mark.slow
def test_sigterm_finishes_the_write_and_exits_143_with_a_whole_newest_checkpoint(project):
    run = subprocess.Popen([sys.executable, "scripts/train_multi_gpu.py", "--iterations", "100000", *QUICK],
                           cwd=project, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        lines = iter(run.stdout.readline, "")
        assert any(line.startswith("iteration 5/") for line in lines)  # past the kept three: old ones pruned
        run.send_signal(signal.SIGTERM)
        rest = run.communicate(timeout=60)[0]
    finally:
        run.kill()
    assert run.returncode == 128 + signal.SIGTERM, rest
    assert re.search(r"stopped by signal 15 at iteration \d+", rest)
    saved = project / "checkpoints"
    models = sorted(saved.glob("model_*.pt"), key=lambda p: int(p.stem.split("_")[1]))
    assert len(models) == 3 and not list(saved.glob("*.tmp"))
    newest = torch.load(models[-1])  # whole: it loads
    assert newest["iteration"] == json.loads((saved / "training_stats.json").read_text())["iteration"]


def test_bad_gpus_is_one_line_and_writes_nothing(project):
    result = train(project, "--gpus", "0,x", timeout=60)
    assert result.returncode == 2
    assert result.stderr.splitlines()[-1] == \
        "train_multi_gpu.py: error: --gpus '0,x': give GPU indices like 0,1, or 'all', or 'cpu'"
    assert not (project / "checkpoints").exists()


def test_the_example_knows_nothing_of_the_kit():
    """It is what a user brings: it imports and names none of the kit's modules or GANTRY_* variables. The README
    alone may speak of the kit, in its section that says how to run the project on it."""
    files = [path for path in EXAMPLE.rglob("*") if path.is_file() and "__pycache__" not in path.parts]
    assert {path.name for path in files} >= {"train_multi_gpu.py", "requirements.txt", "README.md"}
    for path in files:
        text = path.read_text()
        if path.name == "README.md":
            assert KIT_SECTION in text
            text = text.split(KIT_SECTION)[0]
        assert not KIT_NAMES.findall(text), path
        if path.suffix == ".py":
            imported = {alias.name.split(".")[0] for node in ast.walk(ast.parse(text))
                        if isinstance(node, ast.Import) for alias in node.names}
            imported |= {node.module.split(".")[0] for node in ast.walk(ast.parse(text))
                         if isinstance(node, ast.ImportFrom) and node.module}
            assert not imported & KIT_MODULES, path


def test_the_readme_install_line_is_satisfied_by_the_venv_and_leaves_torch_to_the_image(project):
    """The README's pip line parses and the suite's venv already meets it (checked offline: nothing installed)."""
    line = next(line for line in (EXAMPLE / "README.md").read_text().splitlines() if line.startswith("pip install"))
    command = [sys.executable, "-m", *shlex.split(line), "--no-index", "--dry-run"]
    result = subprocess.run(command, cwd=project, capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    requirements = [line.split("#")[0].strip() for line in (EXAMPLE / "requirements.txt").read_text().splitlines()]
    assert "chess>=1.10" in requirements and "torch" in requirements  # unpinned: the kit's image pins torch
