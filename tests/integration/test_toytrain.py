"""packages/toytrain under real torchrun: two ranks over gloo, its records read by the node agent's own reader,
its output mirrored to the bucket (fake-gcs-server), and a second launch with a fresh staging folder resuming from the bucket."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from gantry.runs import fetch
from launch_contract import RUN_DIR_ENV, STAGING_ENV, newest_record

pytestmark = pytest.mark.slow


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun(steps: int, run_dir: str, staging: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, RUN_DIR_ENV: run_dir, STAGING_ENV: str(staging)}
    return subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node=2", f"--master-port={free_port()}",
                           "-m", "toytrain.train", f"--steps={steps}", "--checkpoint-every=4"],
                          env=env, capture_output=True, text=True, timeout=180, check=False)


def test_toytrain_trains_two_ranks_mirrors_to_the_bucket_and_resumes_from_it(tmp_path, gcs):
    gcs.create_bucket("runs-bucket")
    url = "gs://runs-bucket/runs/toy"  # fake-gcs-server through the program's gcsfs (tests/gcs_server.py)
    first = torchrun(6, url, tmp_path / "staging-a")
    assert first.returncode == 0, first.stdout + first.stderr
    assert "2 rank(s) over gloo, steps 0 -> 6" in first.stdout
    assert newest_record(str(tmp_path / "staging-a"))["step"] == 6  # what the agent reports
    fetch(url, str(tmp_path / "fetched"))  # what make fetch brings home
    assert newest_record(str(tmp_path / "fetched"))["step"] == 6 and (tmp_path / "fetched" / "ckpt.pt").is_file()

    second = torchrun(10, url, tmp_path / "staging-b")  # a fresh VM: only the bucket
    assert second.returncode == 0, second.stdout + second.stderr
    assert "steps 6 -> 10" in second.stdout
    fetch(url, str(tmp_path / "fetched"))
    assert newest_record(str(tmp_path / "fetched"))["step"] == 10
