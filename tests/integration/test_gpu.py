"""CUDA paths: skipped without a usable GPU; scripts/gpu_check.sh runs them where one exists."""

import subprocess
import sys

import pytest
import torch
from selfplay.distributed import choose_backend
from selfplay.hardware import cuda_usable, pick_device, pick_precision

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not cuda_usable(), reason="no usable CUDA device here (scripts/gpu_check.sh runs "
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
                             "--eval.every_minutes=0", "--run.device=cuda"],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "learner cuda/" in result.stdout
    assert (tmp_path / "ckpt-000000030.pt").is_file()
