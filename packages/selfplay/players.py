"""Arena players: baselines that need only the game protocol, and a checkpoint's network with MCTS.

Every player chooses one move for each of a batch of states (``choose(states, rng)``), so an
arena plays its games in lock-step like self-play does. The baselines know nothing about a game
beyond ``legal_mask``, ``play`` and the terminal value ``play`` returns, so they work for every
game, with or without a solver:

- ``random``: a uniformly random legal move.
- ``greedy``: one ply with a look at the reply: takes a win, else avoids moves that let the
  opponent win at once (which blocks a threat), else random. It is ``minimax2`` by another name.
- ``minimax<k>``: full-width negamax to depth ``k`` plies, positions reached by different move
  orders searched once per ply; non-terminal leaves score 0 (no game-specific heuristic, unlike
  AlphaZero.jl's MinMax baseline), earlier wins and later losses preferred, ties broken at random.
- ``mcts<n>``: PUCT over ``n`` simulations with uniform priors and one random rollout per leaf
  (AlphaZero.jl's "MCTS with random rollouts" baseline; its Connect Four benchmark uses 1000).
"""

from __future__ import annotations

import numpy as np

from .config import BASELINE, BASELINE_HELP
from .config_io import from_dict, with_legacy_shape
from .games import Game
from .mcts import BatchedMCTS

WIN_DECAY = 0.01  # a win k plies ahead is worth 1 - 0.01 k: take the quickest win, put off a loss


def random_moves(game: Game, states: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One uniformly random legal action per state."""
    legal = game.legal_mask(states)
    return np.where(legal, rng.random(legal.shape), -1.0).argmax(axis=1)


class RandomPlayer:
    def __init__(self, game: Game, name: str = "random"):
        self.game, self.name = game, name

    def choose(self, states: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return random_moves(self.game, states, rng)


class MinimaxPlayer:
    """Depth-limited negamax over the whole batch at once, with random tie-breaks among the best moves."""

    def __init__(self, game: Game, depth: int, name: str = ""):
        self.game, self.depth, self.name = game, depth, name or f"minimax{depth}"

    def choose(self, states: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        q = self.action_values(states, self.depth, 1)
        best = q >= q.max(axis=1, keepdims=True) - 1e-6
        return np.where(best, rng.random(q.shape), -1.0).argmax(axis=1)

    def action_values(self, states: np.ndarray, depth: int, ply: int) -> np.ndarray:
        """float32 [N, A]: each move's negamax value for the player to move (-inf where illegal)."""
        game = self.game
        q = np.full((len(states), game.num_actions), -np.inf, dtype=np.float32)
        rows, actions = np.nonzero(game.legal_mask(states))
        step = game.play(states[rows], actions)
        # a terminal child's value is for its player to move (-1: the mover here won), so negate it
        values = np.where(step.terminal, -step.value * (1 - WIN_DECAY * ply), 0.0).astype(np.float32)
        open_ = ~step.terminal
        if depth > 1 and open_.any():
            values[open_] = -self.values(step.states[open_], depth - 1, ply + 1)
        q[rows, actions] = values
        return q

    def values(self, states: np.ndarray, depth: int, ply: int) -> np.ndarray:
        """Negamax value of each state for its player to move; duplicates (transpositions) searched once."""
        unique, inverse = np.unique(states, axis=0, return_inverse=True)
        return self.action_values(unique, depth, ply).max(axis=1)[inverse.reshape(-1)]


def rollout_evaluator(game: Game, rng: np.random.Generator):
    """Uniform priors and the result of one random playout, for the player to move; takes states, not planes."""
    def evaluate(states: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        n = len(states)
        value = np.zeros(n, dtype=np.float32)
        sign = np.ones(n, dtype=np.float32)  # +1 while the player to move is the one the value is for
        current, alive = states.copy(), np.arange(n)
        while len(alive):
            step = game.play(current[alive], random_moves(game, current[alive], rng))
            sign[alive] *= -1
            done = step.terminal
            value[alive[done]] = sign[alive[done]] * step.value[done]
            current[alive] = step.states
            alive = alive[~done]
        return np.zeros((n, game.num_actions), dtype=np.float32), value
    return evaluate


class RolloutMCTSPlayer:
    def __init__(self, game: Game, simulations: int, name: str = "", c_puct: float = 1.0):
        self.game, self.simulations, self.c_puct = game, simulations, c_puct
        self.name = name or f"mcts{simulations}"

    def choose(self, states: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        mcts = BatchedMCTS(self.game, rollout_evaluator(self.game, rng), c_puct=self.c_puct, rng=rng,
                           encode=lambda s: s)
        return mcts.search(states, self.simulations, add_noise=False).best_moves()


class NetworkPlayer:
    """A checkpoint's network searching ``simulations`` per move, no noise, the most visited move."""

    def __init__(self, game: Game, evaluator, simulations: int, c_puct: float, name: str):
        self.game, self.simulations, self.name = game, simulations, name
        self.mcts = BatchedMCTS(game, evaluator, c_puct=c_puct)

    def choose(self, states: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return self.mcts.search(states, self.simulations, add_noise=False).best_moves()


def baseline(game: Game, name: str):
    """The baseline a name stands for; ValueError naming the choices for anything else."""
    m = BASELINE.match(name.strip())
    if not m or (m[2] and int(m[2]) < 1) or (m[3] and int(m[3]) < 1):
        raise ValueError(f"unknown baseline {name!r}: choose from {BASELINE_HELP}")
    if m[1] == "random":
        return RandomPlayer(game)
    if m[1] == "greedy":
        return MinimaxPlayer(game, 2, name="greedy")
    if m[2]:
        return MinimaxPlayer(game, int(m[2]))
    return RolloutMCTSPlayer(game, int(m[3]))


def network_player(game: Game, config: dict, weights: dict, simulations: int, name: str, precision: str = "auto"):
    """A NetworkPlayer from a run's config (its model shape and search.c_puct) and weights (a state_dict)."""
    from .hardware import inference_dtype  # torch: this module is imported by `selfplay --help` (arena)
    from .inference import NetworkEvaluator
    from .model import build_model

    cfg = from_dict(with_legacy_shape(config))
    m = cfg.model
    model = build_model(game, m.channels, m.blocks, m.policy_filters, m.value_filters)
    model.load_state_dict(weights)
    evaluator = NetworkEvaluator(model.eval(), inference_dtype(precision))
    return NetworkPlayer(game, evaluator, simulations, cfg.search.c_puct, name)
