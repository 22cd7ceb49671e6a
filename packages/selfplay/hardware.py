"""What this machine offers: usable cores (cgroup and SMT aware), learner device, precision."""

from __future__ import annotations

import math
import os
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path

import torch
from launch_contract import LOCAL_RANK_ENV

from .errors import ConfigError, RunError


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


def cores_per_rank() -> int:
    """This rank's share of the node: torchrun's LOCAL_WORLD_SIZE ranks (one per GPU) split its cores."""
    return max(1, physical_cores() // int(os.environ.get("LOCAL_WORLD_SIZE", "1")))


def default_actor_count(cores: int) -> int:
    """Physical cores minus one for the learner; on 1-2 cores, one actor per core.

    A 32x4 learner keeps up with an actor using about a quarter of a core (the 48x4 default still waits on
    self-play), so on a 2-core machine a core reserved for it sat ~60% idle. Two actors beside the learner there
    played 1.65x the positions of one (380 vs 230 per second) and lowered every Pons error after 30 minutes
    (bench/RESULTS.md, "What error does it reach in 30 minutes"). From 3 cores up the learner keeps its own core:
    several actors' data is more than a quarter core can train on.
    """
    return cores if cores <= 2 else cores - 1


def actor_count(requested: int, cores: int) -> tuple[int, str]:
    """The actors this rank starts, and a warning when the request was cut down.

    0 asks for the default. Each actor is a one-thread process that keeps a core busy: more actors than
    the rank's cores (SMT siblings counted, since two actors can share a physical core) only queue for
    the CPU, the load climbs and no game finishes, so a larger request is clamped, with a warning."""
    if requested == 0:
        return default_actor_count(cores), ""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    limit = _cgroup_cpu_limit()
    if limit is not None:
        cpus = min(cpus, max(1, math.floor(limit)))
    cap = max(1, cpus // int(os.environ.get("LOCAL_WORLD_SIZE", "1")))
    if requested <= cap:
        return requested, ""
    return cap, (f"actors.count={requested} is more than the {cap} CPU(s) this rank may use: starting {cap} "
                 f"(one busy process per CPU; more would only queue for it)")


def _cpu_flags() -> set[str]:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def cpu_has_native_bf16() -> bool:
    """AMX or AVX512-BF16: bf16 matrix instructions, so bf16 convolutions run ~2.5x faster than fp32."""
    return bool({"amx_bf16", "avx512_bf16"} & _cpu_flags())


def cpu_has_amx_bf16() -> bool:
    """AMX's bf16 tiles: the fastest bf16 convolutions on a CPU, where the 2-hour targets of #43 were met."""
    return "amx_bf16" in _cpu_flags()


def cpu_has_vnni() -> bool:
    """AVX512-VNNI or AVX-VNNI: 8-bit dot products summed into 32 bits in one instruction, what ONNX Runtime's int8
    kernels run on without the 16-bit intermediate sums that can saturate on plain AVX2."""
    return bool({"avx512_vnni", "avx_vnni"} & _cpu_flags())


def inference_dtype(requested: str = "auto") -> torch.dtype | None:
    """Autocast dtype for CPU self-play and evaluation: bf16 where the CPU has bf16 instructions.

    Search only ranks moves, so bf16's 8-bit mantissa costs nothing measurable in play strength,
    while it more than doubles positions/s on AVX512-BF16 and AMX machines. int8 is the actors' quantized ONNX
    Runtime graph (NetworkEvaluator); wherever else the setting is read (grading, the arena) the net runs fp32.
    """
    if requested in ("fp32", "int8") or (requested == "auto" and not cpu_has_native_bf16()):
        return None
    return torch.bfloat16


def leaves_served_by_learner(inference: str, device: torch.device, actor_numbers: str) -> bool:
    """Whether the learner's device answers every actor's leaves (leaf_server.py) instead of each actor's core.

    auto serves them from a GPU or XLA device only where the actors would search in fp32 (``actor_numbers``, what
    inference.actor_numbers says: "fp32", "bf16" or "int8"). On a 16-core Intel host with AMX beside an H200
    (bench/RESULTS.md, "On a GPU node"), served leaves played 1.12-1.26x the positions of fp32 actors but
    0.73-0.83x those of bf16 actors: an actor waiting on a round trip idles a core that would have run a bf16
    forward pass nearly as fast. int8 actors, 2.2x fp32's evaluations on a VNNI CPU, keep their cores too
    (unmeasured beside a GPU).
    """
    if inference != "auto":
        return inference == "learner"
    return device.type in ("cuda", "xla") and actor_numbers == "fp32"


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


XLA_REQUIREMENTS = Path(__file__).parent / "data" / "xla-requirements.txt"


def xla_requirements() -> list[str]:
    """The torch and torch_xla pins that work together (data/xla-requirements.txt, the one place they live)."""
    lines = XLA_REQUIREMENTS.read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")]


def xla_device() -> torch.device:
    """The XLA device (a TPU core, or torch_xla's CPU device under PJRT_DEVICE=CPU), or a one-line error naming the fix.

    torch_xla is an optional import: the base install, the CPU and the CUDA images never need it.
    """
    try:
        import torch_xla
    except (ImportError, OSError) as e:  # OSError: a torch_xla built for another torch fails to load its library
        first = str(e).splitlines()[0][:160] if str(e) else type(e).__name__
        raise RunError(f"run.device=xla needs torch_xla matching torch {torch.__version__} ({first}): "
                           f"pip install {' '.join(xla_requirements())}, or train in the TPU image "
                           f"(docker/Dockerfile.tpu)") from None
    return torch_xla.device()


def xla_requested() -> bool:
    """PJRT_DEVICE is set (the TPU image sets TPU; tests set CPU): run.device=auto then means XLA, and a machine
    without torch_xla says so rather than training on its CPU unnoticed."""
    return bool(os.environ.get("PJRT_DEVICE"))


def pick_device(requested: str) -> torch.device:
    if requested == "cuda" and not cuda_usable():
        raise RunError("run.device=cuda but CUDA cannot run a kernel here: check `nvidia-smi`, or use run.device=cpu")
    if requested == "cuda" or (requested == "auto" and cuda_usable()):
        return torch.device("cuda", int(os.environ.get(LOCAL_RANK_ENV, "0")))
    if requested == "xla" or (requested == "auto" and xla_requested()):
        return xla_device()
    return torch.device("cpu")


def pick_precision(device: torch.device, requested: str = "auto") -> Precision:
    """bf16 only where the hardware does it natively: AMX or AVX512-BF16 CPUs, CUDA compute capability >= 8, XLA.

    On a 2-core AVX512-BF16 EPYC a 32x4 learner step at batch 256 takes 95 ms in bf16 against 157 ms in
    fp32 (bench/), so bf16 autocast pays on AVX512-BF16 too, not only on AMX as first planned.

    torch.cuda.is_bf16_supported() answers True on a T4 (7.5) by emulation, so it is not asked.
    """
    capability = torch.cuda.get_device_capability(device) if device.type == "cuda" else None
    return precision_for(device, requested, capability, cpu_has_native_bf16())


def precision_for(device: torch.device, requested: str, capability: tuple[int, int] | None,
                  native_bf16: bool) -> Precision:
    """The policy itself, free of hardware queries so tests can pin every case."""
    if device.type == "xla":  # TPUs compute in bf16 natively (MXU); fp16 has no loss scaling there
        if requested == "fp16":
            raise ConfigError("learner.precision=fp16 needs CUDA: use auto (bf16), bf16 or fp32 on XLA")
        return Precision(device, None if requested == "fp32" else torch.bfloat16, False)
    if device.type == "cuda":
        if requested == "fp32":
            return Precision(device, None, False)
        if requested == "bf16" or (requested == "auto" and capability >= (8, 0)):
            return Precision(device, torch.bfloat16, False)
        return Precision(device, torch.float16, True)  # T4 (7.5), V100 (7.0): fp16 needs loss scaling
    if requested == "fp16":
        raise ConfigError("learner.precision=fp16 needs CUDA: use auto, fp32 or bf16 on a CPU")
    if requested == "bf16" or (requested == "auto" and native_bf16):
        return Precision(device, torch.bfloat16, False)
    return Precision(device, None, False)
