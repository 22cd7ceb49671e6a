"""Two torchrun nodes on localhost (gloo): same steps, same weights, and rank 0's checkpoint resumes."""

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from train_helpers import wait_for_steps

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


@contextlib.contextmanager
def two_nodes_running(run_dir, after: int = 0):
    """Two nodes training without a step limit; yields once rank 0 has stepped past ``after``, kills whatever is
    left."""
    port = free_port()
    nodes = [launch_node(r, port, run_dir, 100000) for r in (0, 1)]
    try:
        wait_for_steps(run_dir, after=after)
        yield nodes
    finally:
        for n in nodes:
            n.kill()


def test_sigterm_on_the_master_checkpoints_and_the_other_node_exits_to_be_started_again(tmp_path):
    """A Spot preemption of one node: the group stops at one step with rank 0's checkpoint; the signalled node is
    done (exit 0), the other is not (a preempted peer is no finished run: its agent must start it again, not record
    an end), and says so in one line."""
    run = tmp_path / "run"
    with two_nodes_running(run) as nodes:
        nodes[0].send_signal(signal.SIGTERM)  # a Spot preemption notice on the master
        # a guard against a hang, not a speed limit: a loaded machine may take longer than a quiet one
        outs = [n.communicate(timeout=180)[0] for n in nodes]
    assert [n.returncode for n in nodes] == [0, 1], outs
    assert finish_line(outs[0]) == finish_line(outs[1])      # both stopped at the same step, same weights
    step = finish_line(outs[0])[0]
    assert (run / f"ckpt-{step:09d}.pt").is_file()
    assert (f"selfplay: error: rank 1 stopped at step {step} because another rank was signalled (its node shut "
            "down or was preempted); the checkpoint is written") in outs[1], outs[1]
    assert "selfplay: error" not in outs[0] and "failed without saying why" not in outs[1], outs


def test_a_lost_node_ends_the_run_with_a_message_and_a_checkpoint_not_a_hang(tmp_path):
    run = tmp_path / "run"
    with two_nodes_running(run) as nodes:
        # the whole second node vanishes: its launcher, torchrun and every rank and actor
        _kill_tree(nodes[1].pid)
        out, _ = nodes[0].communicate(timeout=180)
    assert nodes[0].returncode != 0
    assert "lost contact with another rank at step" in out and "start every node again to resume" in out
    written = re.search(r"the run resumes from step \d+ \((ckpt-\d{9}\.pt), written now\)", out)
    assert written and (run / written.group(1)).is_file(), out  # rank 0 names the checkpoint it wrote


def test_losing_rank_0_tells_rank_1_which_checkpoint_the_run_resumes_from_in_one_line(tmp_path):
    run = tmp_path / "run"
    run_two_nodes(run, 10)  # rank 0 writes ckpt-000000010.pt; the next session resumes from it
    with two_nodes_running(run, after=10) as nodes:
        _kill_tree(nodes[0].pid)  # the master vanishes; only it writes checkpoints
        out, _ = nodes[1].communicate(timeout=180)
    assert nodes[1].returncode != 0
    lines = out.strip().splitlines()
    tail = lines[next((i for i, line in enumerate(lines) if "lost contact" in line), 0):]
    assert len(tail) == 1, out  # the exit is the one line: no resource_tracker warnings after it
    assert "resource_tracker" not in out and "leaked" not in out, out
    line = tail[0]
    assert line.startswith("selfplay: error: rank 1 lost contact with another rank at step "), line
    # the network's words whole (Connection reset by peer, or the like), not cut mid-word
    said = re.search(r"at step \d+ \((.*)\): the run resumes", line)
    assert said and not said.group(1).endswith("...") and "pair.cc" not in said.group(1), line
    assert line.endswith("the run resumes from step 10 (ckpt-000000010.pt, the newest checkpoint rank 0 reported); "
                         "start every node again to resume"), line


def test_a_lost_rank_on_one_machine_says_to_run_the_same_command_again(tmp_path):
    """One machine, two ranks (#42): there is no other node to start, so the line does not say to start every node."""
    run, port = tmp_path / "run", free_port()
    env = {**os.environ, "NPROC_PER_NODE": "2", "MASTER_PORT": str(port)}
    launch = subprocess.Popen([sys.executable, "-m", "selfplay", "launch", "--config", "tictactoe", f"--run.dir={run}",
                               "--actors.count=1", "--run.log_every_seconds=2", "--dist.timeout_s=60"],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_for_steps(run)
        os.kill(_rank_pid(port, rank=1), signal.SIGKILL)  # the rank alone: torchrun and rank 0 live on
        out, _ = launch.communicate(timeout=180)
    finally:
        _kill_tree(launch.pid)
    assert launch.returncode != 0
    line = out.strip().splitlines()[-1]
    assert line.startswith("selfplay: error: rank 0 lost contact with another rank at step "), out
    assert line.endswith("written now); run the same command again to resume") and "every node" not in out, line


def _rank_pid(master_port: int, rank: int) -> int:
    """The process of one rank of the launch that serves ``master_port``, found by the variables torchrun gave it."""
    for proc in Path("/proc").iterdir():
        try:
            environ = dict(item.split(b"=", 1) for item in (proc / "environ").read_bytes().split(b"\0") if b"=" in item)
            command = (proc / "cmdline").read_bytes()
        except OSError:  # gone, or not ours to read
            continue
        if (environ.get(b"MASTER_PORT") == str(master_port).encode() and environ.get(b"RANK") == str(rank).encode()
                and b"selfplay\0train" in command):
            return int(proc.name)
    raise AssertionError(f"no rank {rank} of the launch on port {master_port}")


def _kill_tree(pid: int) -> None:
    children = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True, check=False).stdout.split()
    for child in children:
        _kill_tree(int(child))
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def test_a_master_port_in_use_is_one_line_before_torchrun_starts(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = {**os.environ, "NNODES": "2", "NODE_RANK": "0", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}
        result = subprocess.run([sys.executable, "-m", "selfplay", "launch", "--config", "tictactoe",
                                 f"--run.dir={tmp_path / 'run'}"], capture_output=True, text=True, env=env,
                                timeout=120, check=False)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [(
        f"selfplay: error: MASTER_PORT={port} is in use on this node (another run? `ss -ltnp | grep {port}`): "
        "stop it, or set MASTER_PORT to a free port on every node")]
    assert not (tmp_path / "run").exists()


def test_nccl_without_cuda_is_refused_even_for_one_process(tmp_path):
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA: nccl is a valid choice here")
    result = subprocess.run([sys.executable, "-m", "selfplay", "train", "--config", "tictactoe",
                             f"--run.dir={tmp_path / 'run'}", "--dist.backend=nccl"], capture_output=True, text=True,
                            timeout=120, check=False)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [(
        "selfplay: error: dist.backend=nccl needs a working CUDA GPU on every node: use dist.backend=gloo "
        "(or auto) on CPU machines")]


def test_a_failing_rank_says_why_in_one_line_without_torchruns_report(tmp_path):
    (tmp_path / "tmp").mkdir()
    env = {**os.environ, "NPROC_PER_NODE": "2", "MASTER_PORT": str(free_port()), "TMPDIR": str(tmp_path / "tmp")}
    result = subprocess.run([sys.executable, "-m", "selfplay", "launch", "--config", "tictactoe",
                             "--run.dir=/proc/not-writable", "--dist.timeout_s=60"], capture_output=True, text=True,
                            env=env, timeout=300, check=False)
    assert result.returncode != 0
    assert "selfplay: error: run.dir /proc/not-writable cannot be written" in result.stderr.splitlines()[0]
    assert "ChildFailedError" not in result.stderr and "Traceback" not in result.stderr, result.stderr
    assert "OMP_NUM_THREADS" not in result.stderr
    assert list((tmp_path / "tmp").glob("selfplay-torchrun-*.log")) == []  # the error did not name it: not kept
