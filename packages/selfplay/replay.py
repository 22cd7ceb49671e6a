"""Replay ring buffer: uniform samples from a window that grows with the data, paced by fresh positions.

Positions are stored compactly (game state words, not encoded planes) and encoded when sampled.

Two rules decide what the learner sees (both after KataGo):

- **Window.** A batch is drawn uniformly from the newest ``window()`` positions, where the window
  grows sublinearly with the positions ever added: ``max(floor, scale * added ** exponent)``,
  capped by what is held. Early on, when the network changes fastest, only recent games count;
  later the window widens so a batch mixes hundreds of games instead of the last few dozen
  (whole games share one value target, so a narrow window gives perfectly correlated targets).
- **Pacing.** The learner may take ``samples_per_position`` samples per position ever added.
  When it is ahead it waits for self-play; when it is behind it trains without pause. This
  replaces a per-slot reuse cap, which let a fast learner drain only the newest ~1k positions.
"""

from __future__ import annotations

import numpy as np
import torch


class ReplayBuffer:
    def __init__(self, capacity: int, state_words: int, num_actions: int, samples_per_position: float = 4.0,
                 window_floor: int = 20_000, window_scale: float = 4.0, window_exponent: float = 0.75,
                 seed: int = 0):
        self.capacity = capacity
        self.samples_per_position = samples_per_position
        self.window_floor, self.window_scale, self.window_exponent = window_floor, window_scale, window_exponent
        self.states = np.zeros((capacity, state_words), dtype=np.uint64)
        self.policy = np.zeros((capacity, num_actions), dtype=np.float32)
        self.z = np.zeros(capacity, dtype=np.float32)
        self.q = np.zeros(capacity, dtype=np.float32)
        self.version = np.zeros(capacity, dtype=np.int64)
        self.size = 0
        self.cursor = 0  # the next slot written; the newest position is at cursor - 1
        self.added = 0  # positions ever added (the clock of the window and of the pacing)
        self.trained = 0  # samples ever handed to the learner
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
        self.cursor = int((self.cursor + n) % self.capacity)
        self.size = min(self.capacity, self.size + n)

    def window(self) -> int:
        """How many of the newest positions a batch is drawn from."""
        grown = self.window_scale * float(self.added) ** self.window_exponent
        return int(min(self.size, max(self.window_floor, grown)))

    def allowance(self) -> int:
        """Samples the learner may still take before it must wait for self-play (negative: it is ahead)."""
        return int(self.samples_per_position * self.added) - self.trained

    def ready(self, batch_size: int) -> bool:
        return self.window() >= batch_size and self.allowance() >= batch_size

    def sample(self, batch_size: int) -> dict[str, np.ndarray] | None:
        """A batch of distinct positions from the window, or None when the learner is ahead (it should wait)."""
        if not self.ready(batch_size):
            return None
        back = self.rng.choice(self.window(), size=batch_size, replace=False)  # 0 = the newest
        idx = (self.cursor - 1 - back) % self.capacity
        self.trained += batch_size
        return {"states": self.states[idx], "policy": self.policy[idx], "z": self.z[idx], "q": self.q[idx],
                "version": self.version[idx]}

    def samples_per_added(self) -> float:
        """Samples trained per position added so far (the pacing target when the learner keeps up)."""
        return self.trained / self.added if self.added else 0.0

    # -- checkpointing: tensors (torch.load(weights_only=True) refuses numpy) so a resumed run starts warm --
    def state_dict(self) -> dict:
        n = self.size
        order = (self.cursor - n + np.arange(n)) % self.capacity  # oldest first
        arrays = {"states": self.states[order].view(np.int64), "policy": self.policy[order], "z": self.z[order],
                  "q": self.q[order], "version": self.version[order]}
        return {**{k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in arrays.items()},
                "added": self.added, "trained": self.trained}

    def load_state_dict(self, d) -> None:
        d = {k: (v.numpy() if isinstance(v, torch.Tensor) else v) for k, v in d.items()}
        n = min(len(d["z"]), self.capacity)
        self.size = self.cursor = 0
        if n:
            states = np.asarray(d["states"])[-n:].view(np.uint64)
            self.add(states, np.asarray(d["policy"])[-n:], np.asarray(d["z"])[-n:], np.asarray(d["q"])[-n:],
                     np.asarray(d["version"])[-n:])
        self.added = int(d["added"])
        # A buffer saved before pacing (it has per-slot "uses" instead) starts on target: the learner
        # neither bursts through a backlog nor waits for one.
        self.trained = int(d["trained"]) if "trained" in d else int(self.samples_per_position * self.added)
