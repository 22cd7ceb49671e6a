"""packages/toytrain under real torchrun, through the one run store: two ranks over gloo write a local folder, the
node agent's own code reads its stats and copies the folder to the bucket (fake-gcs-server), `make fetch`'s code
brings it home, and a fresh folder restored from the bucket, as on a new node, resumes the run."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest
from gantry.launches import fetch
from gantry_agent.outputs import stats_figures
from gantry_agent.sync import FolderSync
from launch_contract import sync_url

pytestmark = pytest.mark.slow


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun(steps: int, out: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node=2",
                           f"--master-port={free_port()}", "-m", "toytrain.train", f"--steps={steps}",
                           "--checkpoint-every=4", f"--out={out}"],
                          capture_output=True, text=True, timeout=180, check=False)


def test_toytrain_trains_two_ranks_and_resumes_from_the_bucket_copy_the_agent_keeps(tmp_path, gcs):
    gcs.create_bucket("runs-bucket")
    run_url = "gs://runs-bucket/runs/toy"
    first = torchrun(6, tmp_path / "node-a" / "out")
    assert first.returncode == 0, first.stdout + first.stderr
    assert "2 rank(s) over gloo, 2 per node (GANTRY_GPUS_PER_NODE=unset), steps 0 -> 6" in first.stdout
    stats = (tmp_path / "node-a" / "out" / "stats.jsonl").read_text()
    assert stats_figures(stats, ["loss"])[0] == 6  # the step the agent reports (--stats out/stats.jsonl)
    FolderSync(str(tmp_path / "node-a" / "out"), sync_url(run_url, 0, "out"), lambda: "", gcs.url).push()
    fetch(run_url, str(tmp_path / "fetched"))  # what make fetch brings home
    assert (tmp_path / "fetched" / "sync" / "node-0" / "out" / "ckpt.pt").is_file()

    fresh = FolderSync(str(tmp_path / "node-b" / "out"), sync_url(run_url, 0, "out"), lambda: "", gcs.url)
    assert fresh.restore() == 2  # a new node: only the bucket
    second = torchrun(10, tmp_path / "node-b" / "out")
    assert second.returncode == 0, second.stdout + second.stderr
    assert "steps 6 -> 10" in second.stdout
