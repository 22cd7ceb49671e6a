"""Tic-tac-toe, batched: small enough that tests train it to perfect play in seconds."""

from __future__ import annotations

import numpy as np

from .base import Game, StepResult, bit_planes

_LINES = np.array(
    [sum(1 << c for c in line) for line in
     ((0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6))],
    dtype=np.uint64,
)
_CELL_BITS = np.arange(9, dtype=np.uint64)


class TicTacToe(Game):
    name = "tictactoe"
    num_actions = 9
    board_shape = (3, 3)
    num_planes = 2
    state_words = 2
    max_moves = 9
    flip_action = np.array([2, 1, 0, 5, 4, 3, 8, 7, 6])

    def initial_states(self, n: int) -> np.ndarray:
        return np.zeros((n, 2), dtype=np.uint64)

    def legal_mask(self, states: np.ndarray) -> np.ndarray:
        return ((states[:, 1:2] >> _CELL_BITS[None, :]) & np.uint64(1)) == 0

    def play(self, states: np.ndarray, actions: np.ndarray) -> StepResult:
        position, mask = states[:, 0], states[:, 1]
        new_mask = mask | (np.uint64(1) << actions.astype(np.uint64))
        new_position = position ^ mask  # the opponent's stones: they move next
        mover_stones = new_position ^ new_mask
        won = ((mover_stones[:, None] & _LINES[None, :]) == _LINES[None, :]).any(axis=1)
        full = np.bitwise_count(new_mask) == 9
        value = np.where(won, np.float32(-1.0), np.float32(0.0)).astype(np.float32)
        return StepResult(np.stack([new_position, new_mask], axis=1), won | full, value)

    def encode(self, states: np.ndarray) -> np.ndarray:
        own = bit_planes(states[:, 0], _CELL_BITS)
        opp = bit_planes(states[:, 0] ^ states[:, 1], _CELL_BITS)
        return np.stack([own, opp], axis=1).reshape(len(states), 2, 3, 3)

    def render(self, state: np.ndarray) -> str:
        planes = self.encode(state.reshape(1, -1))[0]
        first_to_move = int(np.bitwise_count(state[1])) % 2 == 0
        me, them = ("X", "O") if first_to_move else ("O", "X")
        return "\n".join(
            " ".join(me if planes[0, r, c] else them if planes[1, r, c] else "." for c in range(3)) for r in range(3)
        )
