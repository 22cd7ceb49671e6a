"""Every GPU of a node used (#96), proven without one: `selfplay launch` starts one rank per GPU the node has (its
torchrun's --nproc-per-node), and each rank takes the GPU of its LOCAL_RANK, never all of them cuda:0."""

from __future__ import annotations

import argparse
import socket

import pytest
import torch
from launch_contract import LOCAL_RANK_ENV, MASTER_PORT_ENV, NNODES_ENV, NODE_RANK_ENV, NPROC_PER_NODE_ENV
from selfplay import hardware
from selfplay.cli import launch


class Started(Exception):
    """What the stand-in Popen raises once it has the command: nothing is started."""


@pytest.mark.parametrize("gpus, expected", [(8, 8), (0, None)])
def test_launch_starts_one_rank_per_gpu_of_the_node(monkeypatch, gpus, expected):
    monkeypatch.setattr(hardware, "cuda_usable", lambda: gpus > 0)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: gpus)
    for name in (NNODES_ENV, NODE_RANK_ENV, NPROC_PER_NODE_ENV):
        monkeypatch.delenv(name, raising=False)
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        monkeypatch.setenv(MASTER_PORT_ENV, str(free.getsockname()[1]))
    commands = []

    def popen(cmd, **_):
        commands.append(cmd)
        raise Started
    monkeypatch.setattr(launch.subprocess, "Popen", popen)
    monkeypatch.setattr(launch.train, "run", lambda *a: commands.append(["train.run"]) or 0)
    args = argparse.Namespace(config="tictactoe", debug=False)
    if expected is None:  # a CPU node: one rank, trained in this process
        assert launch.run(args, []) == 0 and commands == [["train.run"]]
        return
    with pytest.raises(Started):
        launch.run(args, [])
    assert f"--nproc-per-node={expected}" in commands[0] and "torch.distributed.run" in commands[0]


@pytest.mark.parametrize("local_rank", [0, 3, 7])
def test_each_rank_takes_the_gpu_of_its_local_rank(monkeypatch, local_rank):
    monkeypatch.setattr(hardware, "cuda_usable", lambda: True)
    monkeypatch.setenv(LOCAL_RANK_ENV, str(local_rank))
    assert hardware.pick_device("auto") == torch.device("cuda", local_rank)
    assert hardware.pick_device("cuda") == torch.device("cuda", local_rank)
