"""The arena: a checkpoint against solver-free baselines and earlier checkpoints, scored and put on an Elo ladder.

    python -m selfplay arena --checkpoint runs/c4 --games 100 --baselines random,greedy,minimax5,mcts1000

Who plays whom: the newest checkpoint plays every other player (the baselines and its ``previous``
predecessors in the run), and the baselines play each other, so the ladder's scale is anchored at
``random`` = 0 by more than one path. Every pairing plays an even number of games in pairs: both
games of a pair start from the same random opening (``opening_plies`` uniformly random moves,
played for both sides; every pair of a match its own) and swap who moves first, so colour and opening luck cancel
out. After the opening every player plays its own way (the networks deterministically: the most visited move).
One seed makes the whole arena reproducible.

The result is written as one stats.jsonl record of kind "arena" (and the same keys to
TensorBoard) through RunLog; its shape is documented in selfplay.record_keys.arena_key.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from . import elo
from .games import Game, make_game
from .players import RandomPlayer, baseline, network_player, random_moves
from .record_keys import arena_key

# How many earlier checkpoints each checkpoint plays (the arena's newest, and every rung of a ladder). One is the
# least that links a run's checkpoints; two halves the noise of a ladder's late rungs, which beat every fixed
# baseline and are placed almost only by the games between checkpoints.
DEFAULT_PREVIOUS = 2
# Random plies opening each pair of games. The networks play deterministically, so two pairs from the same opening
# are the same two games counted twice: a match's openings are distinct, and 4 plies give Connect Four 1,120 distinct
# positions (2 plies: 49, fewer than the 50 pairs of a 100-game match) and tic-tac-toe 756.
DEFAULT_OPENING_PLIES = 4


def distinct_openings(game: Game, pairs: int, plies: int, rng: np.random.Generator, tries: int = 64) -> np.ndarray:
    """``pairs`` positions, each reached by ``plies`` uniformly random moves and none terminal, all different while
    the game has that many (rejection sampling; past ``tries`` rounds the rest repeat openings already drawn)."""
    chosen, seen = [], set()
    for _ in range(tries):
        need = pairs - len(chosen)
        if need == 0:
            break
        states, ended = game.initial_states(need), np.zeros(need, dtype=bool)
        for _ply in range(plies):
            going = ~ended
            step = game.play(states[going], random_moves(game, states[going], rng))
            states[going] = step.states
            ended[going] = step.terminal
        for state in states[~ended]:
            key = state.tobytes()
            if key not in seen and len(chosen) < pairs:
                seen.add(key)
                chosen.append(state)
    if not chosen:
        raise ValueError(f"every {plies}-ply opening of {game.name} ends the game: use fewer opening plies")
    while len(chosen) < pairs:  # the game has fewer openings of this length than pairs: repeat them in turn
        chosen.append(chosen[len(chosen) - len(seen)])
    return np.stack(chosen)


def play_match(game: Game, a, b, games: int, opening_plies: int, rng: np.random.Generator) -> tuple[int, int, int]:
    """(a's wins, draws, a's losses) over ``games`` (rounded up to even) in lock-step: each pair of games starts from
    its own opening (distinct_openings) and swaps who moves first."""
    n = games + games % 2
    states = np.repeat(distinct_openings(game, n // 2, opening_plies, rng), 2, axis=0)
    a_first = np.arange(n) % 2 == 0  # games 2i and 2i+1 share an opening and swap sides
    outcome = np.zeros(n, dtype=np.int64)  # +1 a won, -1 a lost, 0 drawn
    alive = np.arange(n)
    ply = opening_plies  # the player to move is the opening's: a moves at even plies in its "first" games
    while len(alive):
        a_turn = a_first[alive] == (ply % 2 == 0)
        moves = np.zeros(len(alive), dtype=np.int64)
        if a_turn.any():
            moves[a_turn] = a.choose(states[alive[a_turn]], rng)
        if (~a_turn).any():
            moves[~a_turn] = b.choose(states[alive[~a_turn]], rng)
        step = game.play(states[alive], moves)
        states[alive] = step.states
        done = step.terminal
        won = step.value[done] < 0  # the player to move after a winning move has lost
        outcome[alive[done]] = np.where(won, np.where(a_turn[done], 1, -1), 0)
        alive = alive[~done]
        ply += 1
    return int((outcome > 0).sum()), int((outcome == 0).sum()), int((outcome < 0).sum())


@dataclass
class ArenaResult:
    newest: str                      # the newest checkpoint's name, step-<N>
    step: int
    results: dict = field(default_factory=dict)  # {(a, b): (a's wins, draws, a's losses)}
    ratings: dict = field(default_factory=dict)  # {player: (Elo, standard error)}
    games: int = 0
    simulations: int = 0
    seconds: float = 0.0

    def versus(self, opponent: str) -> tuple[int, int, int]:
        """The newest checkpoint's (wins, draws, losses) against ``opponent``."""
        return self.results[(self.newest, opponent)]

    def opponents(self) -> list[str]:
        """Everyone the newest played, strongest first."""
        return sorted((b for a, b in self.results if a == self.newest), key=lambda p: -self.ratings[p][0])


def with_anchor(game: Game, baselines: list) -> list:
    """The baselines with ``random`` among them: it anchors the ladder at 0, so it always plays."""
    return baselines if any(isinstance(p, RandomPlayer) for p in baselines) else [RandomPlayer(game), *baselines]


def play_pairings(game: Game, pairings: list, games: int, opening_plies: int, seed: int,
                  say=None) -> dict[tuple[str, str], tuple[int, int, int]]:
    """{(a, b): (a's wins, draws, a's losses)} for each pairing; pairing i plays from the seed [seed, i]."""
    results = {}
    for index, (a, b) in enumerate(pairings):
        t = time.perf_counter()
        wdl = play_match(game, a, b, games, opening_plies, np.random.default_rng([seed, index]))
        results[(a.name, b.name)] = wdl
        if say:
            say(f"  {a.name} vs {b.name}: {wdl[0]}-{wdl[1]}-{wdl[2]} ({time.perf_counter() - t:.0f} s)")
    return results


def run_arena(game: Game, newest, step: int, baselines: list, previous: list, games: int, simulations: int,
              opening_plies: int, seed: int, say=None) -> ArenaResult:
    """Play every pairing (newest vs everyone, baselines among themselves) and fit the ladder."""
    started = time.perf_counter()
    baselines = with_anchor(game, baselines)
    pairings = [(newest, other) for other in [*baselines, *previous]]
    pairings += [(x, y) for i, x in enumerate(baselines) for y in baselines[i + 1:]]
    out = ArenaResult(newest.name, step, simulations=simulations)
    out.results = play_pairings(game, pairings, games, opening_plies, seed, say)
    out.games = sum(sum(wdl) for (a, _), wdl in out.results.items() if a == newest.name)
    out.ratings = elo.fit_elo(out.results, anchor="random")
    out.seconds = time.perf_counter() - started
    return out


@dataclass
class LadderResult:
    checkpoints: list[str]           # the run's checkpoints, oldest first
    baselines: list[str]
    results: dict = field(default_factory=dict)  # {(a, b): (a's wins, draws, a's losses)}
    ratings: dict = field(default_factory=dict)  # {player: (Elo, standard error)}
    simulations: int = 0
    previous: int = DEFAULT_PREVIOUS  # earlier checkpoints each checkpoint played
    seconds: float = 0.0

    def elo(self) -> list[float]:
        return [self.ratings[c][0] for c in self.checkpoints]

    def rises_monotonically(self) -> bool:
        return all(b > a for a, b in zip(self.elo(), self.elo()[1:]))


def run_ladder(game: Game, checkpoints: list, baselines: list, games: int, simulations: int, opening_plies: int,
               seed: int, previous: int = DEFAULT_PREVIOUS, say=None) -> LadderResult:
    """A run's progress on one Elo scale: every checkpoint (oldest first) plays every baseline and its ``previous``
    predecessors, the baselines play each other, and one ladder is fitted over all of it (random = 0)."""
    started = time.perf_counter()
    baselines = with_anchor(game, baselines)
    pairings = [(c, b) for c in checkpoints for b in baselines]
    pairings += [(later, earlier) for i, later in enumerate(checkpoints) for earlier in checkpoints[max(0, i - previous):i]]
    pairings += [(x, y) for i, x in enumerate(baselines) for y in baselines[i + 1:]]
    out = LadderResult([c.name for c in checkpoints], [b.name for b in baselines], simulations=simulations,
                       previous=previous)
    out.results = play_pairings(game, pairings, games, opening_plies, seed, say)
    out.ratings = elo.fit_elo(out.results, anchor="random")
    out.seconds = time.perf_counter() - started
    return out


def format_ladder(r: LadderResult) -> str:
    """One row per checkpoint: its Elo and its score against each baseline; the baselines' own Elo below."""
    others = [b for b in r.baselines if b != "random"] + ["random"]
    rows = ["| checkpoint | Elo (95%) | " + " | ".join(f"vs {b} (Elo {r.ratings[b][0]:.0f})" for b in others) + " |",
            "|---|---|" + "---|" * len(others)]
    for c in r.checkpoints:
        rating, sd = r.ratings[c]
        scores = [elo.score(*r.results[(c, b)]) for b in others]
        rows.append(f"| {c} | {rating:.0f} ± {1.96 * sd:.0f} | " + " | ".join(f"{s:.0%}" for s in scores) + " |")
    verdict = "rises at every checkpoint" if r.rises_monotonically() else "does NOT rise at every checkpoint"
    games = sum(r.results[(r.checkpoints[0], r.baselines[0])])
    rows.append(f"\n(Elo {verdict}; {games} games a pairing at {r.simulations} simulations/move, each checkpoint "
                f"against every baseline and its {r.previous} predecessor(s), the baselines against each other; one fit, "
                f"random = 0,"
                f" ± is 95%; {r.seconds:.0f} s)")
    return "\n".join(rows)


def ladder_summary(r: LadderResult) -> dict:
    """The ladder as JSON: each checkpoint's Elo, interval half-width, W-D-L against each baseline and against the
    earlier checkpoints it played."""
    return {"simulations": r.simulations, "previous": r.previous, "rises_monotonically": r.rises_monotonically(),
            "seconds": r.seconds,
            "baseline_elo": {b: r.ratings[b][0] for b in r.baselines},
            "checkpoints": [{"checkpoint": c, "elo": r.ratings[c][0], "elo_95": 1.96 * r.ratings[c][1],
                             "wdl": {b: list(r.results[(c, b)]) for b in r.baselines},
                             "wdl_vs_earlier": {b: list(r.results[(c, b)]) for b in r.checkpoints if (c, b) in r.results}}
                            for c in r.checkpoints]}


def format_table(r: ArenaResult) -> str:
    rows = [f"{'player':<14} {'W-D-L of ' + r.newest:>22} {'score':>7} {'95% interval':>14} {'Elo':>12}"]
    rating, sd = r.ratings[r.newest]
    rows.append(f"{r.newest:<14} {'':>22} {'':>7} {'':>14} {rating:>6.0f} ± {1.96 * sd:>3.0f}")
    for p in r.opponents():
        w, d, losses = r.versus(p)
        low, high = elo.wilson(w, d, losses)
        rating, sd = r.ratings[p]
        spread = f"± {1.96 * sd:>3.0f}" if sd else "(anchor)"
        rows.append(f"{p:<14} {f'{w}-{d}-{losses}':>22} {elo.score(w, d, losses):>7.1%} "
                    f"{f'{low:.1%}-{high:.1%}':>14} {rating:>6.0f} {spread}")
    rows.append(f"({r.games} games for {r.newest} at {r.simulations} simulations/move, baselines also play each "
                f"other; Elo fitted over all pairings, random = 0, ± is 95%; {r.seconds:.0f} s)")
    return "\n".join(rows)


def summary(r: ArenaResult) -> dict[str, float]:
    """The stats.jsonl / TensorBoard figures of one arena (shape: selfplay.record_keys.arena_key)."""
    rating, sd = r.ratings[r.newest]
    out = {"arena/elo": rating, "arena/elo_sd": sd, "arena/games": r.games, "arena/simulations": r.simulations}
    for p in r.opponents():
        w, d, losses = r.versus(p)
        low, high = elo.wilson(w, d, losses)
        figures = {"elo": r.ratings[p][0], "wins": w, "draws": d, "losses": losses,
                   "score": elo.score(w, d, losses), "score_low": low, "score_high": high}
        out.update({arena_key(p, k): v for k, v in figures.items()})
    return out


def parse_baselines(game: Game, names: str) -> list:
    """Baselines from a comma-separated list; ValueError naming the choices on a bad name."""
    chosen = [n.strip() for n in names.split(",") if n.strip()]
    if not chosen:
        raise ValueError("no baseline named: list some of random, greedy, minimax<k>, mcts<n>")
    if len(set(chosen)) != len(chosen):
        raise ValueError(f"a baseline is named twice in {names!r}: name each once")
    return [baseline(game, n) for n in chosen]


def step_name(step: int) -> str:
    return f"step-{step}"


def arena_weights(state_dict: dict, config: dict, step: int, earlier: list[str], baselines: str, games: int,
                  simulations: int, opening_plies: int, seed: int, precision: str = "auto") -> ArenaResult:
    """Process-pool entry (periodic arena during training): the learner's weights against the baselines and
    the run's earlier checkpoints (files that vanished since, pruned by the learner, are skipped)."""
    import torch  # torch and the checkpoints: this module is imported by `selfplay --help`

    from . import checkpoint

    torch.set_num_threads(1)
    game = make_game(config["game"]["name"])
    newest = network_player(game, config, state_dict, simulations, step_name(step), precision)
    previous = []
    for path in earlier:
        try:
            saved = checkpoint.load(path)
        except checkpoint.CheckpointError:
            continue
        previous.append(network_player(game, saved.config, saved.playing_weights(), simulations,
                                       step_name(saved.step), precision))
    return run_arena(game, newest, step, parse_baselines(game, baselines), previous, games, simulations,
                     opening_plies, seed)


def ladder_of_run(run_dir, baselines: str, games: int, simulations: int, opening_plies: int, seed: int,
                  precision: str = "auto", previous: int = DEFAULT_PREVIOUS, say=None) -> LadderResult:
    """run_ladder over every checkpoint kept in ``run_dir``, the networks at ``simulations`` (0: the run's
    eval.simulations); ValueError on a bad baseline name or a run with fewer than two checkpoints."""
    from . import checkpoint

    paths = checkpoint.list_checkpoints(run_dir)
    if len(paths) < 2:
        raise ValueError(f"{run_dir} holds {len(paths)} checkpoint(s): a ladder needs two or more (train longer, "
                         f"or keep more with --run.keep_checkpoints)")
    saved = [checkpoint.load(p) for p in paths]
    config = saved[-1].config
    game = make_game(config["game"]["name"])
    sims = simulations or config.get("eval", {}).get("simulations", 25)
    players = [network_player(game, s.config, s.playing_weights(), sims, step_name(s.step), precision) for s in saved]
    return run_ladder(game, players, parse_baselines(game, baselines), games, sims, opening_plies, seed, previous, say)
