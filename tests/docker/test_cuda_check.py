"""docker/cuda_check.py, the CUDA image's start-up guard: version parsing and comparison, and a real run
on this machine's CPU torch, which must fail loudly rather than let training start on the CPU."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

CHECK = Path(__file__).resolve().parents[2] / "docker" / "cuda_check.py"


@pytest.fixture(scope="module")
def cuda_check():
    spec = importlib.util.spec_from_file_location("cuda_check", CHECK)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SMI_BANNER = """
+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI 550.90.07              Driver Version: 550.90.07      CUDA Version: 12.4     |
|-----------------------------------------+------------------------+----------------------+
"""


def test_reads_the_drivers_cuda_version_from_nvidia_smi(cuda_check):
    assert cuda_check.parse_smi_cuda_version(SMI_BANNER) == (12, 4)
    assert cuda_check.parse_smi_cuda_version("No devices were found") is None
    assert cuda_check.parse_version("12.8") == (12, 8) and cuda_check.parse_version("13.0.1") == (13, 0)


def test_an_older_major_driver_is_fatal_a_newer_one_is_fine(cuda_check):
    assert cuda_check.compare(driver=(12, 4), wheel=(12, 8)) is None  # minor-version compatibility
    assert cuda_check.compare(driver=(13, 0), wheel=(12, 8)) is None
    problem = cuda_check.compare(driver=(11, 8), wheel=(12, 8))
    assert "supports CUDA 11.8" in problem and "needs CUDA 12.8" in problem
    assert "upgrade the host's NVIDIA driver" in problem and "whl/cu118" in problem


def test_cpu_torch_fails_loudly():
    pytest.importorskip("torch")
    import torch

    if torch.version.cuda is not None:
        pytest.skip("this torch has CUDA; the CPU-torch refusal is checked in the CPU image (test_cpu_image)")
    result = subprocess.run([sys.executable, str(CHECK)], check=False, capture_output=True, text=True, timeout=300)
    assert result.returncode == 1
    assert result.stderr.startswith("gantry: error: this torch") and "has no CUDA" in result.stderr
    assert "GANTRY_REQUIRE_CUDA=0" in result.stderr


@pytest.mark.gpu
def test_cuda_torch_passes_on_a_gpu_machine():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no usable CUDA GPU here")
    result = subprocess.run([sys.executable, str(CHECK)], check=False, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "CUDA ok:" in result.stderr
