"""What this machine offers: usable cores (cgroup and SMT aware), learner device, precision."""

from __future__ import annotations

import math
import os
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path

import torch


def _cgroup_cpu_limit() -> float | None:
    """CPUs allowed by a cgroup v2 (cpu.max) or v1 (cfs quota) limit, or None when unlimited."""
    try:
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text().split()
        if quota != "max":
            return int(quota) / int(period)
    except (OSError, ValueError):
        pass
    try:
        quota = int(Path("/sys/fs/cgroup/cpu/cpu.cfs_quota_us").read_text())
        period = int(Path("/sys/fs/cgroup/cpu/cpu.cfs_period_us").read_text())
        if quota > 0:
            return quota / period
    except (OSError, ValueError):
        pass
    return None


def physical_cores() -> int:
    """Cores this process may use, counting SMT siblings once and honouring affinity and cgroup limits."""
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))
    cores = set()
    for cpu in cpus:
        try:
            siblings = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list").read_text().strip()
            cores.add(siblings)  # SMT siblings share one list, e.g. "0,32"
        except OSError:
            cores.add(str(cpu))
    count = len(cores)
    limit = _cgroup_cpu_limit()
    if limit is not None:
        count = min(count, max(1, math.floor(limit)))
    return max(1, count)


def default_actor_count() -> int:
    """Physical cores minus one for the learner, at least one."""
    return max(1, physical_cores() - 1)


def cpu_has_amx() -> bool:
    try:
        return "amx_bf16" in Path("/proc/cpuinfo").read_text()
    except OSError:
        return False


def cuda_usable() -> bool:
    """CUDA present and able to run a kernel (not merely compiled in)."""
    if not torch.cuda.is_available():
        return False
    try:
        torch.zeros(1, device="cuda").add_(1)
        return True
    except RuntimeError:
        return False


@dataclass(frozen=True)
class Precision:
    device: torch.device
    dtype: torch.dtype | None  # autocast dtype, None = plain fp32
    use_grad_scaler: bool

    def autocast(self):
        if self.dtype is None:
            return nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=self.dtype)

    def describe(self) -> str:
        name = {None: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}[self.dtype]
        return f"{self.device.type}/{name}" + ("+GradScaler" if self.use_grad_scaler else "")


def pick_device(requested: str) -> torch.device:
    if requested == "cuda" and not cuda_usable():
        raise RuntimeError("run.device=cuda but CUDA cannot run a kernel here: check `nvidia-smi`, or use run.device=cpu")
    if requested == "cuda" or (requested == "auto" and cuda_usable()):
        return torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)))
    return torch.device("cpu")


def pick_precision(device: torch.device, requested: str = "auto") -> Precision:
    """bf16 only where the hardware does it natively: AMX CPUs, CUDA compute capability >= 8.

    torch.cuda.is_bf16_supported() answers True on a T4 (7.5) by emulation, so it is not asked.
    """
    if device.type == "cuda":
        native_bf16 = torch.cuda.get_device_capability(device) >= (8, 0)
        if requested == "fp32":
            return Precision(device, None, False)
        if requested == "bf16" or (requested == "auto" and native_bf16):
            return Precision(device, torch.bfloat16, False)
        return Precision(device, torch.float16, True)
    if requested == "fp16":
        raise ValueError("learner.precision=fp16 needs CUDA: use auto, fp32 or bf16 on a CPU")
    if requested == "bf16" or (requested == "auto" and cpu_has_amx()):
        return Precision(device, torch.bfloat16, False)
    return Precision(device, None, False)
