"""CUDA paths: skipped without a usable GPU; scripts/gpu_check.py runs them where one exists."""

import subprocess
import sys

import pytest
import torch
from selfplay.distributed import choose_backend
from selfplay.hardware import cuda_usable, pick_device, pick_precision

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not cuda_usable(), reason="no usable CUDA device here (scripts/gpu_check.py runs "
                                                           "these on a GPU machine)")]


def test_auto_picks_cuda_nccl_and_the_native_precision():
    device = pick_device("auto")
    assert device.type == "cuda" and choose_backend("auto") == "nccl"
    p = pick_precision(device)
    if torch.cuda.get_device_capability(device) >= (8, 0):
        assert p.dtype == torch.bfloat16 and not p.use_grad_scaler
    else:  # T4: is_bf16_supported() says True by emulation; we must still choose fp16 + GradScaler
        assert p.dtype == torch.float16 and p.use_grad_scaler


def test_a_short_training_runs_its_learner_on_the_gpu(tmp_path):
    result = subprocess.run([sys.executable, "-m", "selfplay", "train", "--config", "tictactoe",
                             f"--run.dir={tmp_path}", "--run.max_steps=30", "--actors.count=1",
                             "--eval.every_minutes=0", "--run.device=cuda", "--actors.inference=learner"],
                            capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "learner cuda/" in result.stdout
    assert "self-play leaves are evaluated on the learner's cuda:0" in result.stdout
    assert (tmp_path / "ckpt-000000030.pt").is_file()


def test_leaves_served_on_the_gpu_match_the_cpu_network():
    import multiprocessing as mp
    import threading

    import numpy as np
    from selfplay.games import make_game
    from selfplay.inference import NetworkEvaluator
    from selfplay.leaf_server import LeafServer, LeafSlots, RemoteEvaluator
    from selfplay.model import build_model

    game = make_game("connect4")
    model = build_model(game, 32, 2).eval()
    leaves = game.encode(game.initial_states(64))
    slots = LeafSlots(1, 64, leaves.shape[1:], game.num_actions)
    device = pick_device("cuda")
    server = LeafServer(slots, device, pick_precision(device).dtype)
    server.publish(model.to(device), 3)
    ours, theirs = mp.Pipe()
    server.attach(0, ours)
    actor = RemoteEvaluator(LeafSlots(**slots.spec()), 0, theirs)
    result = {}
    t = threading.Thread(target=lambda: result.update(out=actor(leaves)))
    t.start()
    while t.is_alive():
        server.serve_once(timeout=0.05)
    want_logits, want_values = NetworkEvaluator(model.cpu(), None)(leaves)
    logits, values = result["out"]
    assert actor.version == 3
    np.testing.assert_allclose(logits, want_logits, atol=0.05)  # fp16/bf16 on the GPU
    np.testing.assert_allclose(values, want_values, atol=0.05)
    actor.slots.close()
    slots.close()
