"""docker/cuda_check.py, the CUDA image's start-up guard: version parsing and comparison, and a real run
on this machine's CPU torch, which must fail loudly rather than let training start on the CPU."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest
from checkout import REPO

CHECK = REPO / "docker" / "cuda_check.py"


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
    assert cuda_check.compare(driver=(13, 2), wheel=(13, 0)) is None
    assert cuda_check.compare(driver=(13, 0), wheel=(12, 8)) is None
    # the image's CUDA is docker/torch.json's; a driver 570 (CUDA 12.8) cannot run it
    cuda = json.loads((CHECK.parent / "torch.json").read_text())["cuda"]
    problem = cuda_check.compare(driver=(12, 8), wheel=cuda_check.parse_version(cuda))
    assert "supports CUDA 12.8" in problem and f"needs CUDA {cuda}" in problem
    assert "upgrade the host's NVIDIA driver" in problem and "docker/torch.json" in problem
    assert "download.pytorch.org" not in problem  # no guessed index: PyTorch has no cu128 build of 2.13


def test_a_gpu_older_than_the_wheels_kernels_is_named_before_any_kernel_runs(cuda_check):
    """CUDA 13 builds hold sm_75 and newer: a V100 (7.0) fails with the GPU and the fix, not 'no kernel image'."""
    arch = ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120", "compute_120"]
    assert cuda_check.missing_kernels((7, 5), arch) is None  # T4
    assert cuda_check.missing_kernels((8, 9), arch) is None  # L4: sm_86 runs on 8.9
    problem = cuda_check.missing_kernels((7, 0), arch)
    assert "compute 7.0" in problem and "compute 7.5 or newer" in problem and "nvidia-tesla-t4" in problem


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
