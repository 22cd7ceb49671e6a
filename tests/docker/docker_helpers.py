"""Plain helpers of the container tests (fixtures live in conftest.py)."""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path

import pytest

# the Debian-bootstrapped base (scripts/docker_base.sh) used where no registry can be pulled from
LOCAL_BASE = "gantry-base:bookworm"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def docker(*args: str, timeout: float = 300, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout, check=check)


def logs(name: str) -> str:
    result = docker("logs", name, check=False)
    return result.stdout + result.stderr


def wait_for(predicate, what: str, name_for_logs: list[str], limit_s: float = 420):
    """Poll until predicate() is truthy; on the limit, fail with the containers' logs."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        for name in name_for_logs:  # a container that died will never get there
            state = docker("inspect", "-f", "{{.State.Running}} {{.State.ExitCode}}", name, check=False).stdout.split()
            if state and state[0] == "false":
                pytest.fail(f"{name} exited (code {state[1]}) before {what}:\n{logs(name)[-4000:]}")
        time.sleep(2)
    pytest.fail(f"no {what} within {limit_s:.0f} s:\n" + "\n".join(logs(n)[-3000:] for n in name_for_logs))


def checkpoints(run_dir: Path) -> list[Path]:
    return sorted(run_dir.glob("ckpt-*.pt"))


def trained_checkpoints(run_dir: Path) -> list[Path]:
    """Checkpoints past step 0 (ckpt-<step>.pt): the learner has taken steps, not only started."""
    return [p for p in checkpoints(run_dir) if int(p.stem.split("-")[1]) > 0]


def runs_dir(tmp_path: Path) -> Path:
    """A host folder the image's non-root user (uid 1000) can write, mounted at /runs."""
    d = tmp_path / "runs"
    d.mkdir()
    d.chmod(0o777)
    return d
