"""The network as search sees it: numpy planes in, numpy logits and values out, timed.

Actors, evaluation and benchmarks all go through ``NetworkEvaluator`` so that what the
benchmark measures is exactly what self-play runs: BatchNorm folded into the convs,
channels-last tensors, bf16 autocast where the CPU has bf16 instructions, and in fp32 (CPUs
without bf16) ONNX Runtime, which runs this small net 1.65x faster than eager torch (onnx_net.py).
"""

from __future__ import annotations

import time
from contextlib import nullcontext

import numpy as np
import torch

from . import onnx_net
from .errors import ConfigError
from .hardware import cpu_has_amx_bf16, cpu_has_vnni, inference_dtype
from .model import PolicyValueNet, fold_batchnorm


def runs_int8(precision: str, runtime: str = "auto") -> bool:
    """Whether the actors run ONNX Runtime's int8 graph: asked for (actors.precision=int8), or auto on a CPU with
    VNNI and without AMX. Without bf16 it played 1.4x the games of the fp32 graph in 30 minutes and lowered the error
    on two seeds; with AVX512-BF16 (the EPYC) it ran 2.1x torch's bf16 simulations a second, gave the learner 1.6x
    the steps and lowered the error on two seeds (bench/RESULTS.md). AMX keeps torch's bf16: int8 ran 1.55x its
    simulations there too, but the 2-hour targets were met with bf16 actors and int8's training there is
    unmeasured. Auto leaves an AVX2 CPU without VNNI in fp32: its 8-bit products can saturate, and on the AVX2-only
    EPYC int8 actors gave 1.2x the steps but lowered the error on one seed of two. Grading and the arena run
    hardware.inference_dtype's numbers whatever this says, unless `selfplay eval --precision int8` asks."""
    if precision == "int8":
        return True
    return (precision == "auto" and runtime != "torch" and cpu_has_vnni() and not cpu_has_amx_bf16()
            and onnx_net.available())


def actor_dtype(precision: str, runtime: str = "auto") -> torch.dtype | None:
    """The autocast dtype of an actor's own net: none for the int8 graph (ONNX Runtime's), else what evaluation
    runs (hardware.inference_dtype)."""
    return None if runs_int8(precision, runtime) else inference_dtype(precision)


def actor_numbers(precision: str, runtime: str = "auto") -> str:
    """What an actor's own net computes in: "int8" (runs_int8), "bf16" (hardware.inference_dtype) or "fp32"."""
    return numbers_of(runs_int8(precision, runtime), actor_dtype(precision, runtime))


def numbers_of(int8: bool, dtype: torch.dtype | None) -> str:
    """The name of what a forward pass computes in: "int8", "bf16" or "fp32"."""
    return "int8" if int8 else "fp32" if dtype is None else "bf16"


def pick_runtime(requested: str, dtype: torch.dtype | None, int8: bool = False) -> str:
    """What runs the forward pass: ONNX Runtime for fp32 where it imports (auto), else torch; int8 only in ONNX Runtime.

    bf16 stays with torch: its oneDNN bf16 kernels are what make AVX512-BF16 and AMX CPUs 2-2.7x faster."""
    if int8:
        if requested == "torch":
            raise ConfigError("actors.precision=int8 runs in ONNX Runtime: drop actors.runtime=torch, "
                              "or use actors.precision=fp32")
        requested = "onnxruntime"
    if requested == "onnxruntime":
        if dtype is not None:
            raise ConfigError("actors.runtime=onnxruntime runs fp32 only: add --actors.precision=fp32, or use auto")
        if not onnx_net.available():
            raise ConfigError("actors.runtime=onnxruntime but onnxruntime or onnx does not import: "
                             "pip install onnxruntime onnx, or use actors.runtime=torch")
        return "onnxruntime"
    if requested == "auto" and dtype is None and onnx_net.available():
        return "onnxruntime"
    return "torch"


class NetworkEvaluator:
    """Callable ``planes [N, C, H, W] -> (logits [N, A], values [N])`` that counts calls, positions and seconds."""

    def __init__(self, model: PolicyValueNet, dtype: torch.dtype | None = None, runtime: str = "auto",
                 int8: bool = False):
        self.dtype = dtype
        self.runtime = pick_runtime(runtime, dtype, int8)
        self.int8 = int8
        self.numbers = numbers_of(int8, dtype)
        # int8: the planes last evaluated, on which a refresh measures the activations' ranges (fp32 until then)
        self.calibration: np.ndarray | None = None
        self.refresh(model)
        self.seconds = 0.0
        self.positions = 0
        self.calls = 0

    def refresh(self, model: PolicyValueNet) -> None:
        """Rebuild the folded copy (and its ONNX Runtime session) after the source model's weights changed."""
        self.net = fold_batchnorm(model)
        self.onnx = onnx_net.OnnxForward(self.net, torch.get_num_threads(), self.calibration) \
            if self.runtime == "onnxruntime" else None

    def __call__(self, planes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        start = time.perf_counter()
        if self.int8:
            self.calibration = planes
        if self.onnx is not None:
            out = self.onnx(planes)
        else:
            x = torch.from_numpy(planes).contiguous(memory_format=torch.channels_last)
            autocast = torch.autocast("cpu", dtype=self.dtype) if self.dtype is not None else nullcontext()
            with torch.inference_mode(), autocast:
                logits, value = self.net(x)
            out = logits.float().numpy(), value.float().numpy()
        self.seconds += time.perf_counter() - start
        self.positions += len(planes)
        self.calls += 1
        return out
