"""The network as search sees it: numpy planes in, numpy logits and values out, timed.

Actors, evaluation and benchmarks all go through ``NetworkEvaluator`` so that what the
benchmark measures is exactly what self-play runs: BatchNorm folded into the convs,
channels-last tensors, bf16 autocast where the CPU has bf16 instructions.
"""

from __future__ import annotations

import time
from contextlib import nullcontext

import numpy as np
import torch

from .model import PolicyValueNet, fold_batchnorm


class NetworkEvaluator:
    """Callable ``planes [N, C, H, W] -> (logits [N, A], values [N])`` that counts calls, positions and seconds."""

    def __init__(self, model: PolicyValueNet, dtype: torch.dtype | None = None):
        self.dtype = dtype
        self.refresh(model)
        self.seconds = 0.0
        self.positions = 0
        self.calls = 0

    def refresh(self, model: PolicyValueNet) -> None:
        """Rebuild the folded copy after the source model's weights changed."""
        self.net = fold_batchnorm(model)

    def __call__(self, planes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        start = time.perf_counter()
        x = torch.from_numpy(planes).contiguous(memory_format=torch.channels_last)
        autocast = torch.autocast("cpu", dtype=self.dtype) if self.dtype is not None else nullcontext()
        with torch.inference_mode(), autocast:
            logits, value = self.net(x)
        out = logits.float().numpy(), value.float().numpy()
        self.seconds += time.perf_counter() - start
        self.positions += len(planes)
        self.calls += 1
        return out
