"""Two torchrun nodes on localhost (gloo): same steps, same weights, and rank 0's checkpoint resumes."""

import re
import socket
import subprocess
import sys

import pytest
import torch

pytestmark = pytest.mark.slow


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch_node(rank: int, port: int, run_dir, steps: int):
    env = {"NNODES": "2", "NODE_RANK": str(rank), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
           "NPROC_PER_NODE": "1", "PATH": "/usr/bin:/bin"}
    return subprocess.Popen(
        [sys.executable, "-m", "selfplay", "launch", "--config", "tictactoe", f"--run.dir={run_dir}",
         f"--run.max_steps={steps}", "--actors.count=1", "--run.log_every_seconds=2", "--dist.timeout_s=120"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def run_two_nodes(run_dir, steps):
    port = free_port()
    nodes = [launch_node(r, port, run_dir, steps) for r in (0, 1)]
    outs = []
    for n in nodes:
        out, _ = n.communicate(timeout=300)
        outs.append(out)
        assert n.returncode == 0, out
    return outs


def finish_line(out: str):
    m = re.search(r"rank (\d) finished at step (\d+), weights checksum (-?[\d.]+)", out)
    assert m, out
    return int(m.group(2)), m.group(3)


def test_two_nodes_train_in_step_and_rank0_checkpoint_resumes(tmp_path):
    run = tmp_path / "run"
    out0, out1 = run_two_nodes(run, 30)
    assert "rank 0/2 (gloo)" in out0
    assert finish_line(out0) == finish_line(out1)          # same step count, identical weights
    assert finish_line(out0)[0] == 30
    assert torch.load(run / "ckpt-000000030.pt", weights_only=True)["step"] == 30

    out0, out1 = run_two_nodes(run, 45)
    assert "resumed from" in out0 and "at step 30" in out0
    assert finish_line(out0) == finish_line(out1) and finish_line(out0)[0] == 45
