"""Which self-play moves change a game's solved result: where self-play's draws come from.

Connect Four is a first-player win (Allis, 1988), so every game that does not end in the first player's win holds
a move that gave the win away, and every drawn game's early positions carry a value target of "draw" where the
position was won. ``selfplay eval --selfplay-games N`` plays N games with a checkpoint's self-play weights
(Checkpoint.selfplay_weights: what the actors played, not the graded average) under its run's own self-play
settings (random openings, moves sampled in proportion to the visits, full and fast searches, root noise) and asks
the solver (bitbully) of every move whether it kept the mover's best result (win > draw > loss):

    changed, by kind:  of the moves of each kind (actors.MOVE_KINDS), how many lowered the mover's solved result
    drawn games:       whose move, of which kind and at which ply, last changed the result of each drawn game

The run's draw rate (progress lines, stats.jsonl) says how many games are drawn; this says which moves drew them.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass

import numpy as np

from .actors import MOVE_KINDS, OPENING, SelfPlayWorker
from .evaluate import solver

RESULT_NAMES = ("second player won", "drawn", "first player won")  # indexed by the first player's result + 1


@dataclass
class PlayedGame:
    """One self-play game: its moves (0-indexed columns), how each was chosen, and the first player's result."""
    moves: list[int]
    kinds: list[int]
    first_player_result: int  # +1 win, 0 draw, -1 loss

    @property
    def opened(self) -> bool:
        """Did it open with random moves (search.random_opening_fraction)?"""
        return bool(self.kinds) and self.kinds[0] == OPENING


def play_games(worker: SelfPlayWorker, count: int) -> list[PlayedGame]:
    """``count`` games, the first game of each of the worker's lock-step slots (worker.cfg.actors.games of them)."""
    rules = worker.game
    moves: list[list[int]] = [[] for _ in range(count)]
    kinds: list[list[int]] = [[] for _ in range(count)]
    results: list[int | None] = [None] * count
    while any(r is None for r in results):
        chosen = worker.choose_moves()
        step = rules.play(worker.states, chosen.actions)
        worker.ply += 1
        for g in range(count):
            if results[g] is None:
                moves[g].append(int(chosen.actions[g]))
                kinds[g].append(int(chosen.kinds[g]))
                if step.terminal[g]:  # step.value: the result for the player to move next, the loser or a draw
                    last_mover_is_first = len(moves[g]) % 2 == 1
                    results[g] = int(-step.value[g]) if last_mover_is_first else int(step.value[g])
        worker.states = step.states
        worker.restart(np.flatnonzero(step.terminal))  # an ended slot starts another game (lock-step), not counted
    return [PlayedGame(m, k, r) for m, k, r in zip(moves, kinds, results)]


def changed_moves(game: PlayedGame, score_all_moves) -> list[bool]:
    """For each move: did it lower the mover's solved result (win > draw > loss) below the position's best?
    ``score_all_moves(moves) -> {column: score}`` scores the position after ``moves`` for the side to move."""
    changed = []
    for ply, col in enumerate(game.moves):
        scores = score_all_moves(tuple(game.moves[:ply]))
        changed.append(np.sign(scores[col]) < np.sign(max(scores.values())))
    return changed


def audit(games: list[PlayedGame], progress=print) -> dict:
    """Solve every move of ``games``: the result counts, each kind's result-changing moves, and each drawn game's
    last change (its mover, kind and ply)."""
    agent, Board = solver()
    cache: dict[tuple, dict] = {}  # games share their first moves

    def score_all_moves(moves: tuple) -> dict:
        if moves not in cache:
            cache[moves] = agent.score_all_moves(Board.from_moves(list(moves)))
        return cache[moves]

    started, last_report = time.perf_counter(), time.perf_counter()
    moves_by_kind, changed_by_kind = Counter(), Counter()
    last_change_of_draws, last_change_ply = Counter(), Counter()
    results = {opened: Counter() for opened in (False, True)}
    for i, game in enumerate(games):
        changed = changed_moves(game, score_all_moves)
        moves_by_kind.update(MOVE_KINDS[k] for k in game.kinds)
        changed_by_kind.update(MOVE_KINDS[k] for k, c in zip(game.kinds, changed) if c)
        results[game.opened][RESULT_NAMES[game.first_player_result + 1]] += 1
        if game.first_player_result == 0:
            ply = max(p for p, c in enumerate(changed) if c)  # a draw from a won start: some move changed it
            mover = "first player's" if ply % 2 == 0 else "second player's"
            last_change_of_draws[f"{mover} {MOVE_KINDS[game.kinds[ply]]}"] += 1
            last_change_ply[ply] += 1
        if time.perf_counter() - last_report > 10:
            progress(f"self-play audit: {i + 1} of {len(games)} games solved, {time.perf_counter() - started:.0f} s")
            last_report = time.perf_counter()
    return {"games": len(games),
            "from_the_empty_board": dict(results[False]), "after_a_random_opening": dict(results[True]),
            "moves_by_kind": {k: moves_by_kind[k] for k in MOVE_KINDS if moves_by_kind[k]},
            "changed_by_kind": {k: changed_by_kind[k] for k in MOVE_KINDS if moves_by_kind[k]},
            "drawn_last_change": dict(last_change_of_draws.most_common()),
            "drawn_last_change_ply": dict(sorted(last_change_ply.items())),
            "positions_solved": len(cache), "seconds": time.perf_counter() - started}


def format_audit(result: dict) -> str:
    def drawn(counts: dict) -> str:
        return f"{counts.get('drawn', 0)} of {sum(counts.values())} drawn"

    lines = [(f"self-play audit: {result['games']} games, {result['positions_solved']} positions solved in "
              f"{result['seconds']:.0f} s; from the empty board {drawn(result['from_the_empty_board'])}, "
              f"after a random opening {drawn(result['after_a_random_opening'])}"),
             "  moves that lowered the mover's solved result (win > draw > loss), by how they were chosen:"]
    for kind, count in result["moves_by_kind"].items():
        changed = result["changed_by_kind"][kind]
        lines.append(f"    {kind:<27} {changed:>5} of {count:>6} ({100 * changed / count:.1f}%)")
    if result["drawn_last_change"]:
        lines.append("  drawn games, the move that last changed the result:")
        lines += [f"    {who:<43} {n:>5}" for who, n in result["drawn_last_change"].items()]
        lines.append("    at ply " + ", ".join(f"{p}: {n}" for p, n in result["drawn_last_change_ply"].items()))
    return "\n".join(lines)
