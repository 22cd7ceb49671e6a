"""Replay ring buffer with a cap on how often each position is trained on.

Positions are stored compactly (game state words, not encoded planes) and encoded when
sampled. Each slot counts its uses; only slots below ``max_reuse`` are eligible, so a
learner that outpaces self-play waits (throttles) instead of overfitting old games.
"""

from __future__ import annotations

import numpy as np
import torch


class ReplayBuffer:
    def __init__(self, capacity: int, state_words: int, num_actions: int, max_reuse: int, seed: int = 0):
        self.capacity = capacity
        self.max_reuse = max_reuse
        self.states = np.zeros((capacity, state_words), dtype=np.uint64)
        self.policy = np.zeros((capacity, num_actions), dtype=np.float32)
        self.z = np.zeros(capacity, dtype=np.float32)
        self.q = np.zeros(capacity, dtype=np.float32)
        self.version = np.zeros(capacity, dtype=np.int64)
        self.uses = np.full(capacity, max_reuse, dtype=np.int32)  # empty slots count as used up
        self.size = 0
        self.cursor = 0
        self.added = 0  # positions ever added
        self.rng = np.random.default_rng(seed)

    def add(self, states, policy, z, q, version) -> None:
        n = len(states)
        self.added += n
        if n > self.capacity:  # keep only the newest
            states, policy, z, q, version = (a[-self.capacity:] for a in (states, policy, z, q, version))
            n = self.capacity
        idx = (self.cursor + np.arange(n)) % self.capacity
        self.states[idx], self.policy[idx], self.z[idx], self.q[idx] = states, policy, z, q
        self.version[idx] = version
        self.uses[idx] = 0
        self.cursor = int((self.cursor + n) % self.capacity)
        self.size = min(self.capacity, self.size + n)

    def eligible(self) -> int:
        return int(np.count_nonzero(self.uses < self.max_reuse))

    def sample(self, batch_size: int) -> dict[str, np.ndarray] | None:
        """A batch of distinct eligible positions, or None when too few are left (the learner should wait)."""
        pool = np.flatnonzero(self.uses < self.max_reuse)
        if len(pool) < batch_size:
            return None
        idx = self.rng.choice(pool, size=batch_size, replace=False)
        self.uses[idx] += 1
        return {"states": self.states[idx], "policy": self.policy[idx], "z": self.z[idx], "q": self.q[idx],
                "version": self.version[idx]}

    def mean_uses(self) -> float:
        """Average uses of the positions currently held (how hard the learner leans on them)."""
        if self.size == 0:
            return 0.0
        held = self.uses[: self.size] if self.size < self.capacity else self.uses
        return float(held.mean())

    # -- checkpointing: tensors (torch.load(weights_only=True) refuses numpy) so a resumed run starts warm --
    def state_dict(self) -> dict:
        n = self.size
        order = (self.cursor - n + np.arange(n)) % self.capacity  # oldest first
        arrays = {"states": self.states[order].view(np.int64), "policy": self.policy[order], "z": self.z[order],
                  "q": self.q[order], "version": self.version[order], "uses": self.uses[order]}
        return {**{k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in arrays.items()}, "added": self.added}

    def load_state_dict(self, d) -> None:
        d = {k: (v.numpy() if isinstance(v, torch.Tensor) else v) for k, v in d.items()}
        n = min(len(d["z"]), self.capacity)
        self.__init__(self.capacity, self.states.shape[1], self.policy.shape[1], self.max_reuse)
        if n:
            states = np.asarray(d["states"])[-n:].view(np.uint64)
            self.add(states, np.asarray(d["policy"])[-n:], np.asarray(d["z"])[-n:], np.asarray(d["q"])[-n:],
                     np.asarray(d["version"])[-n:])
            self.uses[:n] = np.asarray(d["uses"])[-n:]
        self.added = int(d["added"])
