"""Proves, before training starts, that this container can run its torch wheel's CUDA on the host's GPU.

The CUDA image's entry point runs it (GANTRY_REQUIRE_CUDA=1) so that a missing ``--gpus all``, a
host driver older than the wheel's CUDA, or a GPU the wheel has no kernels for stops the container
with one line naming the cause and the fix, instead of a run that quietly trains on the CPU.

    python /opt/gantry/cuda_check.py        # exit 0 and one "CUDA ok" line, or exit 1 and the reason

Stdlib only apart from torch; the version helpers are unit-tested on machines without a GPU.
"""

from __future__ import annotations

import ctypes
import re
import shutil
import subprocess
import sys

_SMI_CUDA = re.compile(r"CUDA Version:\s*(\d+)\.(\d+)")


class CudaCheckError(RuntimeError):
    """The container cannot train on the GPU; the message names the cause and the fix."""


def parse_version(text: str) -> tuple[int, int]:
    """'13.0' or '13.0.1' -> (13, 0)."""
    major, minor = text.split(".")[:2]
    return int(major), int(minor)


def parse_smi_cuda_version(smi_output: str) -> tuple[int, int] | None:
    """The 'CUDA Version: 12.4' of nvidia-smi's banner: the newest CUDA the host driver supports."""
    found = _SMI_CUDA.search(smi_output)
    return (int(found.group(1)), int(found.group(2))) if found else None


def driver_cuda_version() -> tuple[tuple[int, int] | None, str]:
    """The driver's CUDA version (from nvidia-smi, else libcuda) and a one-line description of the GPUs."""
    smi = shutil.which("nvidia-smi")
    if smi:
        try:
            banner = subprocess.run([smi], check=False, capture_output=True, text=True, timeout=60).stdout
            gpus = subprocess.run([smi, "--query-gpu=name,driver_version", "--format=csv,noheader"],
                                  check=False, capture_output=True, text=True, timeout=60).stdout.strip().replace("\n", "; ")
        except (OSError, subprocess.TimeoutExpired) as e:
            banner, gpus = "", f"nvidia-smi failed: {e}"
        version = parse_smi_cuda_version(banner)
        if version:
            return version, gpus or "no GPU listed by nvidia-smi"
    # libcuda.so.1 is the host driver's library, mounted by the NVIDIA Container Toolkit.
    try:
        libcuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None, "no nvidia-smi and no libcuda.so.1 in the container"
    raw = ctypes.c_int()
    if libcuda.cuDriverGetVersion(ctypes.byref(raw)) != 0:
        return None, "libcuda.so.1 present but cuDriverGetVersion failed"
    return (raw.value // 1000, raw.value % 1000 // 10), "GPU names unknown (nvidia-smi missing)"


def compare(driver: tuple[int, int], wheel: tuple[int, int]) -> str | None:
    """None when the driver runs the wheel's CUDA; an error otherwise. CUDA keeps minor-version
    compatibility within a major release, so only an older major is fatal (a kernel test follows)."""
    if driver[0] < wheel[0]:
        # The image's CUDA is docker/torch.json's cuda (install_torch.sh holds the build to it), so the other fix is
        # there: PyTorch's CUDA indexes skip releases (no cu128 build of torch 2.13), hence no index URL is guessed.
        return (f"the host driver supports CUDA {driver[0]}.{driver[1]} but this image's torch needs CUDA "
                f"{wheel[0]}.{wheel[1]}: upgrade the host's NVIDIA driver to one that runs CUDA {wheel[0]}.{wheel[1]}, "
                f"or pin a torch built for CUDA {driver[0]}.x in docker/torch.json (torch, cuda, cuda_index_url) "
                f"and rebuild the CUDA image (docker/Dockerfile, FLAVOUR=cuda)")
    return None


def missing_kernels(capability: tuple[int, int], arch_list: list[str]) -> str | None:
    """None when the wheel holds kernels this GPU runs (sm_XY for its major at or below its capability, or PTX
    it can compile); an error otherwise. CUDA 13 builds start at sm_75: a V100 (7.0) or P100 (6.0) has none."""
    major, minor = capability
    sm = [tuple(map(int, divmod(int(a.split("_")[1]), 10))) for a in arch_list if a.startswith("sm_")]
    ptx = [tuple(map(int, divmod(int(a.split("_")[1]), 10))) for a in arch_list if a.startswith("compute_")]
    if any(m == major and n <= minor for m, n in sm) or any((m, n) <= (major, minor) for m, n in ptx):
        return None
    return (f"this image's torch has kernels for {', '.join(arch_list) or 'no GPU'} but this GPU is compute "
            f"{major}.{minor}: use a GPU of compute {min(sm, default=(0, 0))[0]}.{min(sm, default=(0, 0))[1]} "
            f"or newer (on GCP: accelerator_type = nvidia-tesla-t4)")


def check() -> str:
    import torch

    if torch.version.cuda is None:
        raise CudaCheckError(f"this torch ({torch.__version__}) has no CUDA: this is the CPU image; build "
                             f"docker/Dockerfile with FLAVOUR=cuda (make build-train with use_gpu = true), or set "
                             f"GANTRY_REQUIRE_CUDA=0 to train on the CPU on purpose")
    wheel = parse_version(torch.version.cuda)
    driver, gpus = driver_cuda_version()
    if driver is None:
        raise CudaCheckError(f"no NVIDIA driver is visible in the container ({gpus}): run it with --gpus all on a "
                             f"host with the NVIDIA driver and the NVIDIA Container Toolkit (nvidia-ctk)")
    problem = compare(driver, wheel)
    if problem:
        raise CudaCheckError(f"{problem} [{gpus}]")
    if not torch.cuda.is_available():
        raise CudaCheckError(f"torch.cuda.is_available() is False although the driver supports CUDA "
                             f"{driver[0]}.{driver[1]} [{gpus}]: check NVIDIA_VISIBLE_DEVICES and `nvidia-smi` "
                             f"inside the container")
    problem = missing_kernels(torch.cuda.get_device_capability(0), torch.cuda.get_arch_list())
    if problem:
        raise CudaCheckError(f"{problem} [{gpus}]")
    try:  # a real kernel: catches a wheel without kernels for this GPU ("no kernel image is available")
        x = torch.arange(1024, device="cuda", dtype=torch.float32)
        total = float((x * 2).sum().item())
        torch.cuda.synchronize()
    except Exception as e:  # noqa: BLE001 (torch raises RuntimeError or AcceleratorError by version)
        raise CudaCheckError(f"a CUDA kernel failed on {torch.cuda.get_device_name(0)}: {str(e).splitlines()[0]} "
                             f"(torch {torch.__version__}, CUDA {torch.version.cuda}, driver CUDA "
                             f"{driver[0]}.{driver[1]}): rebuild with a torch whose CUDA supports this GPU") from None
    if total != 1023 * 1024:
        raise CudaCheckError(f"a CUDA kernel returned {total}, not {1023 * 1024}: the GPU or driver is faulty")
    major, minor = torch.cuda.get_device_capability(0)
    return (f"CUDA ok: {torch.cuda.device_count()} x {torch.cuda.get_device_name(0)} (compute {major}.{minor}), "
            f"driver CUDA {driver[0]}.{driver[1]}, torch {torch.__version__} built for CUDA {torch.version.cuda}")


def main() -> int:
    try:
        print(f"gantry: {check()}", file=sys.stderr)
    except CudaCheckError as e:
        print(f"gantry: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
