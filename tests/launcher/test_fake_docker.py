"""fake_docker understands every flag the agent passes, or refuses it: what test_agent.py proves with it holds for
the real engine's command line (the node twin runs the real engine)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from agent_helpers import FAKE_DOCKER
from gantry_agent.containers import docker_run_args
from gantry_agent.settings import Settings
from launch_contract import RunSpec


def docker(state: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(FAKE_DOCKER), *args], env={"FAKE_DOCKER_STATE": str(state),
                          "PATH": "/usr/bin:/bin"}, capture_output=True, text=True, timeout=60, check=False)


@pytest.mark.parametrize("kind", ["cpu", "gpu", "tpu", "torchrun", "command"])
def test_every_flag_of_the_agents_docker_run_is_understood(tmp_path, kind):
    program = {"torchrun": ("-m", "this"), "command": ("sleep", "30")}.get(kind, ("--run.max_steps=0",))
    run = RunSpec(run_id="r1", image="repo/img@sha256:abc", node_rank=0, nnodes=1, master_addr="127.0.0.1",
                  gpu=kind == "gpu", tpu=kind == "tpu", torchrun=kind == "torchrun", command=kind == "command",
                  args=program, sync=("ckpt",) if kind == "command" else ())
    args = docker_run_args(run, str(tmp_path / "runs"), Settings({"GANTRY_AGENT_DOCKER_RUN_ARGS": "-v /b:/b"}),
                           workdir="/workspace")
    try:
        result = docker(tmp_path, *args)
        assert result.returncode == 0, result.stderr
        container = json.loads((tmp_path / f"{run.container}.json").read_text())
    finally:
        docker(tmp_path, "rm", "-f", run.container)  # the command is real: stop it before it trains
    assert container["gpus"] == ("all" if kind == "gpu" else None)
    assert container["privileged"] is (kind == "tpu")
    if kind == "torchrun":  # --entrypoint torchrun replaces the image's entry point
        assert Path(container["command"][0]).name == "torchrun" and container["command"][-2:] == ["-m", "this"]
    elif kind == "command":  # --entrypoint "": the arguments alone, as given
        assert container["command"] == ["sleep", "30"] and container["entrypoint"] == ""
        assert container["volumes"]["/workspace/ckpt"] == str(tmp_path / "runs" / "sync" / "ckpt")
    else:
        assert container["command"][1:4] == ["-m", "selfplay", "launch"] and container["command"][-1] == args[-1]


def test_a_flag_the_agent_never_passes_is_refused_as_docker_refuses_it(tmp_path):
    result = docker(tmp_path, "run", "-d", "--name", "x", "--cpus", "2", "repo/img")
    assert result.returncode == 125 and "unknown flag: --cpus" in result.stderr
