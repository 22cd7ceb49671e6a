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

And one rule decides the targets a sampled position is trained on (``duplicate_targets``):

- **Duplicates.** With ``"mean"``, a position recorded several times in the window (the openings above all) is
  trained on the mean of its copies' targets: policy, game result z and search value q. One game's result is a
  coin flip for a position many moves from the end; the mean over every game that passed through it is that
  position's expected result under today's play, the target the value head is after. ``"own"``: each copy its
  own targets.
"""

from __future__ import annotations

import numpy as np
import torch


class PositionGroups:
    """The sums of the targets of every copy of a position among the slots that joined, so that the mean over
    a position's copies is one gather. Groups live in arrays; a position's group is freed when its last copy
    leaves, so at most one group per joined slot is alive."""

    def __init__(self, capacity: int, num_actions: int):
        self.slot_group = np.full(capacity, -1, dtype=np.int64)  # the group of each joined slot, -1: not joined
        self.group_of: dict[bytes, int] = {}  # position (its state words' bytes) -> its group
        self.key: list[bytes | None] = []  # group -> its position
        self.free: list[int] = []
        self.count = np.zeros(0, dtype=np.int64)
        self.z = np.zeros(0)  # float64 sums: a position seen all run long is added and taken away millions of times
        self.q = np.zeros(0)
        self.policy = np.zeros((0, num_actions))

    def join(self, slots: np.ndarray, states: np.ndarray, policy, z, q) -> None:
        groups = np.fromiter((self._group(row.tobytes()) for row in states), dtype=np.int64, count=len(slots))
        self.slot_group[slots] = groups
        self._add(groups, 1, policy, z, q)

    def leave(self, slots: np.ndarray, policy, z, q) -> None:
        groups = self.slot_group[slots]
        self.slot_group[slots] = -1
        self._add(groups, -1, policy, z, q)
        for g in np.unique(groups[self.count[groups] == 0]).tolist():
            del self.group_of[self.key[g]]
            self.key[g] = None
            self.z[g] = self.q[g] = self.policy[g] = 0.0  # exact zeros again, whatever the rounding left
            self.free.append(g)

    def means(self, slots: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """policy, z, q: the means over each slot's position's joined copies; and how many copies that is."""
        groups = self.slot_group[slots]
        n = self.count[groups][:, None]
        return ((self.policy[groups] / n).astype(np.float32), (self.z[groups] / n[:, 0]).astype(np.float32),
                (self.q[groups] / n[:, 0]).astype(np.float32), n[:, 0])

    def _add(self, groups, sign: int, policy, z, q) -> None:
        np.add.at(self.count, groups, sign)
        np.add.at(self.z, groups, sign * z.astype(np.float64))
        np.add.at(self.q, groups, sign * q.astype(np.float64))
        np.add.at(self.policy, groups, sign * policy.astype(np.float64))

    def _group(self, key: bytes) -> int:
        g = self.group_of.get(key)
        if g is None:
            if not self.free:
                self._grow()
            g = self.group_of[key] = self.free.pop()
            self.key[g] = key
        return g

    def _grow(self) -> None:
        old = len(self.count)
        new = max(1024, 2 * old)
        self.count = np.concatenate([self.count, np.zeros(new - old, dtype=np.int64)])
        self.z, self.q = (np.concatenate([a, np.zeros(new - old)]) for a in (self.z, self.q))
        self.policy = np.concatenate([self.policy, np.zeros((new - old, self.policy.shape[1]))])
        self.key += [None] * (new - old)
        self.free += range(new - 1, old - 1, -1)


class ReplayBuffer:
    def __init__(self, capacity: int, state_words: int, num_actions: int, samples_per_position: float = 4.0,
                 window_floor: int = 20_000, window_scale: float = 4.0, window_exponent: float = 0.75,
                 seed: int = 0, duplicate_targets: str = "mean"):
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
        self.groups = PositionGroups(capacity, num_actions) if duplicate_targets == "mean" else None
        self.grouped = 0  # the newest this many positions are joined to their groups: the window, or a bit more

    def add(self, states, policy, z, q, version) -> None:
        n = len(states)
        self.added += n
        if n > self.capacity:  # keep only the newest
            states, policy, z, q, version = (a[-self.capacity:] for a in (states, policy, z, q, version))
            n = self.capacity
        self._ungroup_oldest(self.grouped - (self.capacity - n))  # the slots about to be overwritten
        idx = (self.cursor + np.arange(n)) % self.capacity
        self.states[idx], self.policy[idx], self.z[idx], self.q[idx] = states, policy, z, q
        self.version[idx] = version
        self.cursor = int((self.cursor + n) % self.capacity)
        self.size = min(self.capacity, self.size + n)
        if self.groups is not None:
            self.groups.join(idx, states, policy, z, q)
            self.grouped += n
            self._ungroup_oldest(self.grouped - self.window())  # out of the window: for good, it only moves on

    def _ungroup_oldest(self, k: int) -> None:
        """The oldest ``k`` grouped positions leave their groups."""
        if self.groups is None or k <= 0:
            return
        idx = (self.cursor - self.grouped + np.arange(k)) % self.capacity
        self.groups.leave(idx, self.policy[idx], self.z[idx], self.q[idx])
        self.grouped -= k

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
        batch = {"states": self.states[idx], "policy": self.policy[idx], "z": self.z[idx], "q": self.q[idx],
                 "version": self.version[idx], "copies": np.ones(batch_size, dtype=np.int64)}
        if self.groups is not None:
            grouped = back < self.grouped  # all of them, unless a tiny window_floor let the window outgrow it
            policy, z, q, copies = self.groups.means(idx[grouped])
            for key, mean in (("policy", policy), ("z", z), ("q", q), ("copies", copies)):
                batch[key][grouped] = mean
        return batch

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
        groups, self.groups, self.grouped = self.groups, None, 0  # grouped below, over the saved run's window
        if n:
            states = np.asarray(d["states"])[-n:].view(np.uint64)
            self.add(states, np.asarray(d["policy"])[-n:], np.asarray(d["z"])[-n:], np.asarray(d["q"])[-n:],
                     np.asarray(d["version"])[-n:])
        self.added = int(d["added"])
        if groups is not None:
            self.groups = PositionGroups(self.capacity, self.policy.shape[1])
            self.grouped = self.window()
            idx = (self.cursor - self.grouped + np.arange(self.grouped)) % self.capacity
            self.groups.join(idx, self.states[idx], self.policy[idx], self.z[idx], self.q[idx])
        # A buffer saved before pacing (it has per-slot "uses" instead) starts on target: the learner
        # neither bursts through a backlog nor waits for one.
        self.trained = int(d["trained"]) if "trained" in d else int(self.samples_per_position * self.added)
