"""Versioned network weights in shared memory: the learner publishes, actors poll.

A seqlock guards the copy: the writer makes the sequence odd, copies, stores the new
version, and makes it even again; a reader retries if the sequence was odd or moved
while it copied. Actors therefore never see half-written weights and never block the learner.
"""

from __future__ import annotations

from multiprocessing import shared_memory

import numpy as np
import torch

_HEADER = 2  # int64 words: sequence, version


def flat_float_state(model: torch.nn.Module) -> list[tuple[str, torch.Tensor]]:
    """The floating-point entries of a state dict (BatchNorm's integer counter is not needed for inference)."""
    return [(k, v) for k, v in model.state_dict().items() if v.is_floating_point()]


class SharedWeights:
    def __init__(self, numel: int, name: str | None = None):
        size = 8 * _HEADER + 4 * numel
        self.owner = name is None
        self.shm = shared_memory.SharedMemory(name=name, create=self.owner, size=size)
        self.header = np.ndarray((_HEADER,), dtype=np.int64, buffer=self.shm.buf)
        self.data = np.ndarray((numel,), dtype=np.float32, buffer=self.shm.buf, offset=8 * _HEADER)
        if self.owner:
            self.header[:] = (0, -1)  # version -1 = nothing published yet
        self.numel = numel

    @property
    def name(self) -> str:
        return self.shm.name

    def publish(self, model: torch.nn.Module, version: int) -> None:
        flat = torch.cat([v.detach().float().cpu().reshape(-1) for _, v in flat_float_state(model)]).numpy()
        self.header[0] += 1          # odd: write in progress
        self.data[:] = flat
        self.header[1] = version
        self.header[0] += 1          # even: consistent

    def read_into(self, model: torch.nn.Module, have_version: int) -> int:
        """Copy newer weights into ``model``; return the version now held (unchanged if nothing newer)."""
        while True:
            seq = int(self.header[0])
            version = int(self.header[1])
            if version <= have_version:
                return have_version
            if seq % 2:
                continue
            flat = self.data.copy()
            if int(self.header[0]) == seq:
                break
        offset = 0
        state = model.state_dict()
        with torch.no_grad():
            for key, tensor in flat_float_state(model):
                n = tensor.numel()
                state[key].copy_(torch.from_numpy(flat[offset:offset + n]).view_as(tensor))
                offset += n
        return version

    def close(self) -> None:
        self.shm.close()
        if self.owner:
            self.shm.unlink()
