"""The game protocol: every operation works on a batch of states at once.

A state is a fixed-width row of uint64 words, so a batch of states is a 2-D array
``[N, state_words]`` and search trees can store states in plain arrays. Values are
always from the point of view of the player to move in the state they describe.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class StepResult:
    states: np.ndarray    # uint64 [N, state_words]: the positions after the move
    terminal: np.ndarray  # bool [N]: the game is over
    value: np.ndarray     # float32 [N]: result for the player to move in `states` (-1 loss, 0 draw); 0 if not terminal


class Game:
    """Base class. Subclasses set the attributes and implement the batched methods."""

    name: str
    num_actions: int        # size of the policy vector
    board_shape: tuple[int, int]  # (height, width) of the encoded planes
    num_planes: int         # input channels of the network
    state_words: int        # uint64 words per state
    max_moves: int          # longest possible game, in moves
    flip_action: np.ndarray  # permutation of actions under a left-right mirror of the board

    def initial_states(self, n: int) -> np.ndarray:
        """``n`` copies of the start position, uint64 [n, state_words]."""
        raise NotImplementedError

    def legal_mask(self, states: np.ndarray) -> np.ndarray:
        """bool [N, num_actions]."""
        raise NotImplementedError

    def play(self, states: np.ndarray, actions: np.ndarray) -> StepResult:
        """Apply one legal action per state. Does not modify ``states``."""
        raise NotImplementedError

    def encode(self, states: np.ndarray) -> np.ndarray:
        """Network input, float32 [N, num_planes, H, W], from the mover's point of view."""
        raise NotImplementedError

    def render(self, state: np.ndarray) -> str:
        """A human-readable board for one state (row vector)."""
        raise NotImplementedError

    # -- helpers shared by all games ------------------------------------------------

    def flip_planes(self, planes: np.ndarray) -> np.ndarray:
        """Mirror encoded planes left-right (matches ``flip_action``)."""
        return np.ascontiguousarray(planes[..., ::-1])

    def flip_policy(self, policy: np.ndarray) -> np.ndarray:
        """Mirror policy vectors [N, A] left-right: new[a] = old[flip_action[a]]."""
        return np.ascontiguousarray(policy[:, self.flip_action])

    def states_from_moves(self, move_lists: list[list[int]]) -> np.ndarray:
        """Replay 0-indexed action sequences from the start (sequences may differ in length)."""
        states = self.initial_states(len(move_lists))
        longest = max((len(m) for m in move_lists), default=0)
        for t in range(longest):
            rows = np.array([i for i, m in enumerate(move_lists) if len(m) > t], dtype=np.int64)
            actions = np.array([move_lists[i][t] for i in rows], dtype=np.int64)
            legal = self.legal_mask(states[rows])
            if not legal[np.arange(len(rows)), actions].all():
                bad = int(rows[~legal[np.arange(len(rows)), actions]][0])
                raise ValueError(f"illegal move {move_lists[bad][t]} at ply {t} in sequence #{bad}")
            states[rows] = self.play(states[rows], actions).states
        return states


def bit_planes(words: np.ndarray, cell_bits: np.ndarray) -> np.ndarray:
    """Unpack uint64 words [N] into float32 [N, len(cell_bits)] of 0/1 at the given bit indices."""
    return ((words[:, None] >> cell_bits[None, :]) & np.uint64(1)).astype(np.float32)
