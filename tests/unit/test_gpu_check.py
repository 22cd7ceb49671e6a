"""scripts/gpu_check.py, the GPU path's proof on a GPU machine: its checks rehearsed here on CPUs (the same launches
over gloo, two ranks), its JSON, and its refusal to pass on a machine whose torch sees no GPU."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from checkout import REPO

SCRIPT = REPO / "scripts" / "gpu_check.py"


def gpu_check(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], cwd=REPO, capture_output=True, text=True,
                          timeout=600, check=False)


@pytest.mark.slow
def test_the_checks_rehearsed_on_cpus_train_two_ranks_and_resume_with_one_json():
    done = gpu_check("--device", "cpu", "--python", sys.executable, "--checks", "torch,train,resume", "--steps", "20")
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert report["ok"] and report["failed"] == [] and [c["name"] for c in report["checks"]] == ["torch", "train",
                                                                                                  "resume"]
    train, resume = report["checks"][1:]
    assert train["ranks"] == 2 and train["steps"] == 20 and train["steps_per_s"] > 0 and train["simulations_per_s"] > 0
    assert resume["resumed_at"] == 20  # the relaunch reloaded the train check's final checkpoint


def test_a_torch_that_sees_no_gpu_fails_every_check_in_the_json_and_exits_1():
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU: scripts/gpu_check.py proves it instead")
    done = gpu_check("--python", sys.executable, "--checks", "torch,train")
    assert done.returncode == 1
    report = json.loads(done.stdout)
    assert report["failed"] == ["torch", "train"] and not report["ok"]
    assert "sees no CUDA device" in report["checks"][0]["problem"]
    assert report["checks"][1]["problem"].startswith("skipped: torch does not see the device")


def test_an_unknown_check_is_one_line_and_exit_2():
    done = gpu_check("--checks", "torch,nccl")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.splitlines()[-1].endswith("--checks nccl: no such check; choose from "
                                                 "torch,image,train,resume,tests,bench")
