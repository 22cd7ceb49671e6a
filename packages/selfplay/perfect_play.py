"""Perfect first-player play: moving first from the empty board, does the net keep the forced win against every
best defence?

Connect Four is a first-player win (Allis, 1988). The check walks the tree of games in which the net chooses its
move (MCTS at a fixed simulation count, no noise, so one move a position) and the defender plays *every* reply
the solver (bitbully) scores best for it, i.e. every reply that delays the loss the longest. A line ends when the
net connects four, or when the net's move gives up the win (the solver then scores some defender reply as a draw
or better). Positions reached by different move orders are searched once, so the walk costs as many searches as
there are distinct positions, while the line count is that of every move sequence.

The walk stops at the end of the ply in which the net first gives up the win: the verdict is then known, and the rest
of a weak net's tree is the costly part (a 1-hour AVX2 net at 600 simulations first lost a line with its 7th stone,
then searched 7.3k positions in 7 minutes, 9 lines lost, the tree still doubling each ply; bench/RESULTS.md). A net
that keeps the win is walked whole.

    lines explored:  every sequence of moves from the empty board to the end of such a game (for a net that gave
                     up the win: those that ended by the ply where it first did)
    wins:            the lines the net won
    first_loss:      the shortest line (then the lowest columns) whose last move, the net's, gave up the win
    perfect:         every line won; None when the guard (max_positions) ended the walk before a verdict
    stopped_at_ply:  the ply (moves played) where the walk stopped: first_loss's, or the guard's; None when it walked
                     every line

The guard ends the walk without a verdict rather than raising: a caller such as `make bench` calls it after hours
of training and grading, and writes what was counted instead of a traceback.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from .evaluate import EvalError, solver
from .games import ConnectFour

# the walk's guard against a defender tree far larger than expected; measured trees are far smaller (bench/RESULTS.md)
MAX_POSITIONS = 200_000

# (states [N, words], a line of 0-indexed columns reaching each) -> one column each, for the player to move
ChooseMoves = Callable[[np.ndarray, list[list[int]]], np.ndarray]


def check_first_player(choose: ChooseMoves, start: list[int] = (), max_positions: int = MAX_POSITIONS,
                       progress=print) -> dict:
    """Walk every best defence against ``choose``, moving first from the empty board (or moving next after
    ``start``, a won position); the counts and the first line that lost the win."""
    agent, Board = solver()
    game = ConnectFour()
    started = time.perf_counter()
    root = game.states_from_moves([list(start)])[0]
    if max(agent.score_all_moves(Board.from_moves(list(start))).values()) <= 0:
        raise EvalError(f"the side to move after {list(start)} has no forced win: start from a won position")
    # the positions where the net moves next, one level (ply) at a time: key -> [a line reaching it, lines, state]
    level = {root.tobytes(): [list(start), 1, root]}
    lines = wins = searched = 0
    first_loss: list[int] | None = None
    guard_ply: int | None = None  # the ply where the guard ended the walk, if it did
    while level:
        if searched + len(level) > max_positions:
            guard_ply = len(next(iter(level.values()))[0])
            progress(f"perfect play: the defender tree passed {max_positions} positions at ply {guard_ply}: "
                     f"no verdict (check_first_player's max_positions raises the guard)")
            break
        entries = sorted(level.values(), key=lambda e: e[0])  # lowest columns first: first_loss is then stable
        states = np.stack([e[2] for e in entries])
        chosen = choose(states, [e[0] for e in entries])
        searched += len(entries)
        after = game.play(states, chosen)
        level = {}
        for i, (moves, count, _) in enumerate(entries):
            line = [*moves, int(chosen[i])]
            if after.terminal[i]:  # the net connected four (a full board would be a draw, and the solver said win)
                lines += count
                wins += count if after.value[i] < 0 else 0
                if after.value[i] >= 0 and first_loss is None:
                    first_loss = line
                continue
            scores = agent.score_all_moves(Board.from_moves(line))  # the defender's point of view
            best = max(scores.values())
            if best >= 0:  # the net's move let the defender draw or win
                lines += count
                if first_loss is None:
                    first_loss = line
                continue
            replies = sorted(c for c, s in scores.items() if s == best)
            replied = game.play(np.repeat(after.states[i:i + 1], len(replies), axis=0), np.array(replies))
            for j, col in enumerate(replies):  # a best defence never ends the game: its score would not be < 0
                key = replied.states[j].tobytes()
                if key in level:
                    level[key][1] += count
                else:
                    level[key] = [[*line, col], count, replied.states[j]]
        if first_loss is not None:  # the verdict is known: a weak net's remaining tree would cost the most
            break
        if level:
            progress(f"perfect play: ply {len(entries[0][0]) + 2}: {len(level)} positions for the net to move, "
                     f"{lines} lines ended so far ({wins} won), {time.perf_counter() - started:.0f} s")
    return {"lines": lines, "wins": wins, "positions_searched": searched, "first_loss": first_loss,
            "perfect": None if guard_ply is not None else wins == lines and first_loss is None,
            "stopped_at_ply": guard_ply if first_loss is None else len(first_loss),
            "seconds": time.perf_counter() - started}


def format_result(result: dict, simulations: int) -> str:
    if result["perfect"] is None:
        verdict = (f"no verdict: the defender tree passed the walk's guard at ply {result['stopped_at_ply']} "
                   f"(check_first_player's max_positions)")
    elif result["perfect"]:
        verdict = "kept the forced win in every line"
    else:
        verdict = (f"gave up the win; first in {' '.join(str(c) for c in result['first_loss'])} (0-indexed columns; "
                   f"the walk stopped at that ply)")
    return (f"perfect first-player play at {simulations} simulations: {result['wins']} of {result['lines']} lines won, "
            f"{result['positions_searched']} positions searched, {result['seconds']:.0f} s: {verdict}")
