"""Connect Four on bitboards (Pascal Pons's layout), batched with numpy.

Bit ``col * 7 + row`` is a cell, row 0 at the bottom; each column has one spare bit on
top so a shift never carries into the next column. A state is two words:
``position`` (stones of the player to move) and ``mask`` (all stones). Playing column
``c`` is ``position ^= mask; mask |= mask + bottom(c)``, which hands the move over.
"""

from __future__ import annotations

import numpy as np

from .base import Game, StepResult, bit_planes

WIDTH, HEIGHT = 7, 6
_H1 = HEIGHT + 1
_U = np.uint64
_BOTTOM = np.array([1 << (c * _H1) for c in range(WIDTH)], dtype=np.uint64)
_TOP = np.array([1 << (HEIGHT - 1 + c * _H1) for c in range(WIDTH)], dtype=np.uint64)
_BOARD = np.uint64(sum(((1 << HEIGHT) - 1) << (c * _H1) for c in range(WIDTH)))  # the 42 playable bits
# Allis's rule of zugzwang: with the board otherwise filled, the first player's threats on odd rows (1st, 3rd, 5th
# from the bottom) and the second player's on even rows are the ones that win
_ODD_ROWS = np.uint64(sum(1 << (c * _H1 + r) for c in range(WIDTH) for r in range(0, HEIGHT, 2)))
_EVEN_ROWS = _BOARD ^ _ODD_ROWS
# cell index in the planes (row-major, top row first) -> bit index
_CELL_BITS = np.array([c * _H1 + (HEIGHT - 1 - r) for r in range(HEIGHT) for c in range(WIDTH)], dtype=np.uint64)


def four_in_a_row(stones: np.ndarray) -> np.ndarray:
    """bool [N]: the bitboards hold four aligned stones (vertical, horizontal, both diagonals)."""
    found = np.zeros(stones.shape, dtype=bool)
    for shift in (_U(1), _U(_H1), _U(_H1 - 1), _U(_H1 + 1)):
        pairs = stones & (stones >> shift)
        found |= (pairs & (pairs >> (shift + shift))) != 0
    return found


def mover_is_first(mask: np.ndarray) -> np.ndarray:
    """bool [N]: the player to move made the first move (an even number of stones are down)."""
    return np.bitwise_count(mask) % 2 == 0


def winning_cells(stones: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """uint64 [N]: the empty cells where one more of ``stones`` would make four (playable now or not).

    Pons's compute_winning_position: for each direction, a cell wins when three stones line up with it on one
    side, or two on one side and one on the other."""
    found = (stones << _U(1)) & (stones << _U(2)) & (stones << _U(3))  # vertical: three below
    for step in (_U(_H1), _U(_H1 - 1), _U(_H1 + 1)):  # horizontal and both diagonals
        pair = (stones << step) & (stones << (step + step))
        found |= pair & (stones << (step * _U(3)))
        found |= pair & (stones >> step)
        pair = (stones >> step) & (stones >> (step + step))
        found |= pair & (stones << step)
        found |= pair & (stones >> (step * _U(3)))
    return found & (_BOARD ^ mask)


class ConnectFour(Game):
    name = "connect4"
    num_actions = WIDTH
    board_shape = (HEIGHT, WIDTH)
    # own stones, the opponent's, the cells where each would make four (its threats), the rows where the mover's
    # threats win by zugzwang
    num_planes = 5
    state_words = 2
    max_moves = WIDTH * HEIGHT
    flip_action = np.arange(WIDTH - 1, -1, -1)

    def initial_states(self, n: int) -> np.ndarray:
        return np.zeros((n, 2), dtype=np.uint64)

    def legal_mask(self, states: np.ndarray) -> np.ndarray:
        return (states[:, 1:2] & _TOP[None, :]) == 0

    def play(self, states: np.ndarray, actions: np.ndarray) -> StepResult:
        position, mask = states[:, 0], states[:, 1]
        new_mask = mask | (mask + _BOTTOM[actions])
        new_position = position ^ mask    # the opponent's stones: they move next
        mover_stones = new_position ^ new_mask
        won = four_in_a_row(mover_stones)
        full = np.bitwise_count(new_mask) == self.max_moves
        value = np.where(won, np.float32(-1.0), np.float32(0.0)).astype(np.float32)
        out = np.stack([new_position, new_mask], axis=1)
        return StepResult(out, won | full, value)

    def encode(self, states: np.ndarray) -> np.ndarray:
        """Stones, threats and the mover's rows: KataGo gives its net liberties and ladders, the facts its game
        turns on; Connect Four's are the threats, the empty cells that would complete a four, and whose rows
        they are on: the first player's threats win on odd rows, the second player's on even ones (Allis, 1988).
        Which player the mover is hangs on the parity of all stones, which no stack of 3x3 convolutions counts."""
        position, mask = states[:, 0], states[:, 1]
        opponent = position ^ mask
        words = (position, opponent, winning_cells(position, mask), winning_cells(opponent, mask),
                 np.where(mover_is_first(mask), _ODD_ROWS, _EVEN_ROWS))
        planes = np.stack([bit_planes(w, _CELL_BITS) for w in words], axis=1)
        return planes.reshape(len(states), self.num_planes, HEIGHT, WIDTH)

    def render(self, state: np.ndarray) -> str:
        planes = self.encode(state.reshape(1, -1))[0]
        me, them = ("X", "O") if mover_is_first(state[1]) else ("O", "X")
        rows = []
        for r in range(HEIGHT):
            rows.append(" ".join(me if planes[0, r, c] else them if planes[1, r, c] else "." for c in range(WIDTH)))
        return "\n".join(rows + ["1 2 3 4 5 6 7"])

    @staticmethod
    def parse_pons_moves(text: str) -> list[int]:
        """Pons notation: 1-indexed column digits, e.g. '4453' -> [3, 3, 4, 2]."""
        return [int(ch) - 1 for ch in text.strip()]
