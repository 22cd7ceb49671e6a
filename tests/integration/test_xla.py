"""The XLA learner (the TPU path), proven on torch_xla's CPU device (PJRT_DEVICE=CPU).

torch_xla runs only beside the torch it was built for (packages/selfplay/data/xla-requirements.txt), older than
this project's main venv's, so these tests run the trainer in its own venv (outside the clone), which
scripts/xla_venv.sh makes on first use (minutes: PyPI's x86_64 torch brings its CUDA libraries) and keeps. Where
it cannot be made (no PyPI, another CPU architecture) they skip, saying why.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from checkout import REPO as ROOT
from selfplay.checkpoint import load
from train_helpers import records

# tiny budgets: a few learner steps after a 128-position buffer
# fp32 actors: actors.inference=auto then serves their leaves from the XLA device on every CPU (with bf16 it would
# leave them on the actor's core, hardware.leaves_served_by_learner)
SHORT = ["--config", "tictactoe", "--actors.count=1", "--actors.precision=fp32", "--actors.games=16",
         "--learner.batch_size=32",
         "--learner.min_replay=128", "--learner.window_floor=2000", "--learner.publish_every=2",
         "--run.log_every_seconds=1", "--eval.every_minutes=0"]


def test_run_device_xla_without_torch_xla_is_one_line_naming_the_pins(tmp_path):
    """In the main venv (no torch_xla): the user is told what to install, in one line, before anything starts."""
    pytest.importorskip("torch")
    try:
        import torch_xla  # noqa: F401
        pytest.skip("torch_xla is installed in this venv")
    except ImportError:
        pass
    pins = [line for line in (ROOT / "packages/selfplay/data/xla-requirements.txt").read_text().splitlines()
            if line and not line.startswith("#")]
    for env in ({}, {"PJRT_DEVICE": "TPU"}):  # run.device=xla, and auto where PJRT_DEVICE asks for XLA
        args = ["--run.device=xla"] if not env else []
        result = subprocess.run([sys.executable, "-m", "selfplay", "train", "--config", "tictactoe",
                                 f"--run.dir={tmp_path / 'run'}", *args], capture_output=True, text=True,
                                timeout=120, check=False, env={**os.environ, **env})
        assert result.returncode == 1, result.stdout + result.stderr
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("selfplay: error: run.device=xla needs torch_xla"), lines
        assert f"pip install {' '.join(pins)}" in lines[0] and "docker/Dockerfile.tpu" in lines[0]
        assert not list((tmp_path / "run").glob("ckpt-*.pt"))


@pytest.fixture(scope="module")
def xla_python() -> str:
    """The XLA venv's python, made by scripts/xla_venv.sh when missing; a skip with the script's reason otherwise.
    The venv is GANTRY_XLA_VENV, else the script's own default outside the clone (`xla_venv.sh --path`)."""
    venv = Path(os.environ.get("GANTRY_XLA_VENV") or subprocess.run(
        ["bash", str(ROOT / "scripts/xla_venv.sh"), "--path"], capture_output=True, text=True, check=True,
        timeout=60).stdout.strip())
    try:
        # TORCH_ALLOW_CUDA=1: where PyTorch's CPU index is out of reach (this project's machines reach PyPI only)
        # the pinned torch is PyPI's CUDA build; the tests take it, as before, rather than skip (one line says so).
        made = subprocess.run(["bash", str(ROOT / "scripts/xla_venv.sh"), str(venv)], capture_output=True,
                              text=True, timeout=1800, check=False, env={**os.environ, "TORCH_ALLOW_CUDA": "1"})
    except subprocess.TimeoutExpired:
        pytest.skip("scripts/xla_venv.sh took over 30 minutes (a slow mirror?): no XLA venv")
    if made.returncode != 0:
        reason = (made.stderr.strip() or made.stdout.strip()).splitlines()[-1:] or ["no output"]
        pytest.skip(f"no XLA venv (scripts/xla_venv.sh failed: {reason[0][:300]})")
    return str(venv / "bin/python")


def xla_selfplay(python: str, *args, timeout=600):
    env = {**os.environ, "PJRT_DEVICE": "CPU", "PYTHONPATH": str(ROOT / "packages")}
    return subprocess.run([python, "-m", "selfplay", *args], capture_output=True, text=True, timeout=timeout,
                          check=False, env=env)


# The first test to ask for the venv makes it: minutes, longer than pytest's default 900 s on a slow mirror.
# xla_python gives up (a skip) after 30 minutes, before this limit fails the test.
XLA_TIMEOUT = pytest.mark.timeout(2400)


@pytest.mark.slow
@pytest.mark.xla
@XLA_TIMEOUT
def test_the_xla_learner_trains_tictactoe_serving_the_actors_leaves_then_resumes(tmp_path, xla_python):
    run = tmp_path / "run"
    # run.device=auto: PJRT_DEVICE (the TPU image sets it) is what picks XLA
    first = xla_selfplay(xla_python, "train", f"--run.dir={run}", "--run.max_steps=6", *SHORT)
    out = first.stdout + first.stderr
    assert first.returncode == 0, out
    assert "learner xla/bf16" in out  # bf16 on XLA, no GradScaler
    assert "self-play leaves are evaluated on the learner's xla:0" in out  # actors.inference=auto
    saved = load(run / "ckpt-000000006.pt")  # here, in the main venv's torch: host tensors, no torch_xla needed
    assert saved.step == 6 and saved.replay["z"].shape[0] >= 128
    tensors = [*saved.model.values(), *saved.ema.values()]
    assert all(t.device.type == "cpu" for t in tensors)
    assert all(torch.isfinite(t).all() for t in tensors if t.is_floating_point())
    losses = [r["losses/total"] for r in records(run) if r["losses/total"] is not None]
    assert losses and all(0 < x < 10 for x in losses)

    second = xla_selfplay(xla_python, "train", f"--run.dir={run}", "--run.max_steps=10", *SHORT)
    out = second.stdout + second.stderr
    assert second.returncode == 0, out
    assert f"resumed from {run / 'ckpt-000000006.pt'} at step 6" in out
    resumed = load(run / "ckpt-000000010.pt")
    assert resumed.step == 10
    moved = [k for k, v in resumed.model.items() if v.is_floating_point() and not torch.equal(v, saved.model[k])]
    assert moved  # the resumed learner stepped on from the saved weights
    # the optimizer's moments came back too: AdamW's step count goes on from 6
    assert {int(s["step"]) for s in resumed.optimizer["state"].values()} == {10}


@pytest.mark.slow
@pytest.mark.xla
@XLA_TIMEOUT
def test_learner_steps_and_served_leaves_compile_once_each(xla_python):
    """XLA compiles a program per graph shape: a learner step that recompiles every step (a shape or a constant
    that changes) or a leaf batch size per request would make a TPU slower than the host CPU. After warm-up, more
    steps and leaf batches of many sizes add no compilation beyond the padded buckets."""
    script = r"""
import json, sys, threading, multiprocessing as mp
import numpy as np, torch
import torch_xla.debug.metrics as met
from selfplay.config import Config
from selfplay.distributed import DistInfo
from selfplay.games import make_game
from selfplay.hardware import pick_device, pick_precision
from selfplay.inference import NetworkEvaluator
from selfplay.leaf_server import LeafServer, LeafSlots, RemoteEvaluator, bucket_size
from selfplay.learner import Learner
from selfplay.model import build_model

cfg = Config()
cfg.learner.batch_size = 32
game = make_game("tictactoe")
device = pick_device("xla")
learner = Learner(cfg, game, pick_precision(device), DistInfo(), 0)
rng = np.random.default_rng(0)
states = game.initial_states(32)
batch = {"states": states, "policy": np.full((32, 9), 1 / 9, np.float32), "z": rng.uniform(-1, 1, 32),
         "q": rng.uniform(-1, 1, 32), "version": np.zeros(32)}

def compiles():
    data = met.metric_data("CompileTime")
    return data[0] if data else 0

for _ in range(3):  # warm-up: the first step compiles, and AdamW's state appears after it
    learner.set_progress(0.1, 0)
    learner.step(batch)
warm = compiles()
for i in range(5):  # a learning rate that changes every step, as the cosine schedule does
    learner.set_progress(0.2 + 0.1 * i, i + 1)
    learner.step(batch)
step_compiles = compiles() - warm

model = build_model(game, 16, 1).eval()
leaves = game.encode(game.initial_states(40))
slots = LeafSlots(1, 40, leaves.shape[1:], game.num_actions)
server = LeafServer(slots, device, torch.bfloat16)
server.publish(model.to(device), 3)
ours, theirs = mp.Pipe()
server.attach(0, ours)
actor = RemoteEvaluator(LeafSlots(**slots.spec()), 0, theirs)
before = compiles()
sizes = list(range(1, 41))
for n in sizes:
    out = {}
    t = threading.Thread(target=lambda: out.update(r=actor(leaves[:n])))
    t.start()
    while t.is_alive():
        server.serve_once(timeout=0.05)
    t.join()
want_logits, want_values = NetworkEvaluator(model.cpu(), None)(leaves[:40])
logits, values = out["r"]
print("RESULT " + json.dumps({
    "step_compiles": step_compiles, "leaf_compiles": compiles() - before,
    "buckets": len({bucket_size(n, 40) for n in sizes}), "version": actor.version,
    "logit_error": float(np.abs(logits - want_logits).max()), "value_error": float(np.abs(values - want_values).max())}))
actor.slots.close()
slots.close()
"""
    result = subprocess.run([xla_python, "-c", script], capture_output=True, text=True, timeout=600, check=False,
                            env={**os.environ, "PJRT_DEVICE": "CPU", "PYTHONPATH": str(ROOT / "packages")})
    assert result.returncode == 0, result.stdout + result.stderr
    (line,) = [line for line in result.stdout.splitlines() if line.startswith("RESULT ")]
    said = json.loads(line.removeprefix("RESULT "))
    assert said["step_compiles"] == 0, said
    # one program per padded bucket (8, 16, 32, 40), whatever the 40 request sizes were
    assert said["leaf_compiles"] <= said["buckets"] == 4, said
    assert said["version"] == 3
    assert said["logit_error"] < 0.05 and said["value_error"] < 0.05, said  # bf16 on XLA vs fp32 on the CPU


@pytest.mark.slow
@pytest.mark.xla
@XLA_TIMEOUT
def test_more_than_one_rank_on_xla_is_refused_by_every_rank_in_one_line(tmp_path, xla_python):
    """DDP over XLA is not wired: two ranks under torchrun each stop before training, saying what to run instead."""
    result = subprocess.run([xla_python, "-m", "torch.distributed.run", "--nproc-per-node=2", "--master-port=29533",
                             "-m", "selfplay", "train", "--config", "tictactoe", f"--run.dir={tmp_path / 'run'}",
                             "--run.device=xla", "--dist.timeout_s=60"], capture_output=True, text=True, timeout=300,
                            check=False, env={**os.environ, "PJRT_DEVICE": "CPU", "PYTHONPATH": str(ROOT / "packages")})
    assert result.returncode != 0
    errors = [line for line in (result.stdout + result.stderr).splitlines() if line.startswith("selfplay: error:")]
    assert sorted(errors) == [f"selfplay: error: run.device=xla trains on one XLA device with one rank, and this is "
                              f"rank {rank} of 2: run one node with NPROC_PER_NODE=1 (a TPU VM's host cores run the "
                              f"actors)" for rank in (0, 1)]
    assert not list((tmp_path / "run").glob("ckpt-*.pt"))
