"""Batched PUCT search: B games advance in lock-step, one leaf per game per simulation.

Each simulation walks down every game's tree at once (numpy over the B games), expands
one leaf per game, evaluates all new non-terminal leaves in ONE network call, and backs
the values up. Trees are arrays indexed [game, node, action]; edge statistics live in
the parent, so a node needs only its state, its priors and its children's indices.
Node 0 is the root; a child index of 0 therefore means "not expanded yet".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .games import Game

# evaluate(planes float32 [N, C, H, W]) -> (policy logits float32 [N, A], value float32 [N])
Evaluator = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]


@dataclass
class SearchResult:
    visits: np.ndarray      # float32 [B, A]: root visit counts
    root_value: np.ndarray  # float32 [B]: mean value of the root for the player to move (search's q)
    prior: np.ndarray       # float32 [B, A]: the network's raw policy at the root (before noise)
    net_value: np.ndarray   # float32 [B]: the network's raw value at the root
    evals: int              # positions sent to the network
    calls: int              # network calls
    q: np.ndarray           # float32 [B, A]: mean value of each root move for the player to move (-inf: unvisited)

    def best_moves(self) -> np.ndarray:
        """The most visited root move of each game; among equally visited ones, the one search values most.

        At 25 simulations over 7 moves ties are common, and argmax alone would pick the leftmost column."""
        top = self.visits == self.visits.max(axis=1, keepdims=True)
        return np.where(top, self.q, -np.inf).argmax(axis=1)


def masked_softmax(logits: np.ndarray, legal: np.ndarray) -> np.ndarray:
    z = np.where(legal, logits, -np.inf)
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z, dtype=np.float32)
    return e / e.sum(axis=1, keepdims=True)


class BatchedMCTS:
    def __init__(self, game: Game, evaluate: Evaluator, c_puct: float = 1.5, dirichlet_alpha: float = 1.0,
                 noise_fraction: float = 0.25, fpu: float = 0.0, rng: np.random.Generator | None = None,
                 encode: Callable[[np.ndarray], np.ndarray] | None = None):
        self.game = game
        self.evaluate = evaluate
        # what `evaluate` is given for a batch of states: the network's planes, or (rollouts) the states themselves
        self.encode = encode or game.encode
        self.c_puct = c_puct
        self.dirichlet_alpha = dirichlet_alpha
        self.noise_fraction = noise_fraction
        self.fpu = fpu  # value assumed for an unvisited edge, from the chooser's point of view
        self.rng = rng or np.random.default_rng()

    def search(self, roots: np.ndarray, num_simulations: int, add_noise: bool | np.ndarray,
               budgets: np.ndarray | None = None) -> SearchResult:
        """Search every root; ``add_noise`` and ``budgets`` (simulations, at most num_simulations) may be per game.

        Per-game budgets let a batch mix full and fast searches (playout-cap randomisation): a game whose
        budget is spent sits out the remaining simulations."""
        game, A = self.game, self.game.num_actions
        B = len(roots)
        M = num_simulations + 1  # each simulation adds at most one node
        games = np.arange(B)
        budgets = np.full(B, num_simulations) if budgets is None else budgets  # the loop's bound caps larger ones

        states = np.zeros((B, M, game.state_words), dtype=np.uint64)
        prior = np.zeros((B, M, A), dtype=np.float32)
        visits = np.zeros((B, M, A), dtype=np.float32)
        value_sum = np.zeros((B, M, A), dtype=np.float32)
        children = np.zeros((B, M, A), dtype=np.int32)
        terminal = np.zeros((B, M), dtype=bool)
        terminal_value = np.zeros((B, M), dtype=np.float32)
        num_nodes = np.ones(B, dtype=np.int32)

        states[:, 0] = roots
        legal = game.legal_mask(roots)
        logits, net_value = self.evaluate(self.encode(roots))
        root_prior = masked_softmax(logits, legal)
        prior[:, 0] = root_prior
        noisy = np.broadcast_to(np.asarray(add_noise, dtype=bool), (B,))
        if noisy.any():
            noise = self.rng.dirichlet(np.full(A, self.dirichlet_alpha), size=B).astype(np.float32)
            noise = np.where(legal, noise, 0.0)
            noise /= noise.sum(axis=1, keepdims=True)
            mixed = (1 - self.noise_fraction) * root_prior + self.noise_fraction * noise
            prior[:, 0] = np.where(noisy[:, None], mixed, root_prior)
        evals, calls = B, 1

        max_depth = game.max_moves + 1
        path_nodes = np.zeros((B, max_depth), dtype=np.int32)
        path_actions = np.zeros((B, max_depth), dtype=np.int32)

        for sim in range(num_simulations):
            # -- selection: walk down every game's tree until an unexpanded edge or a terminal node
            active = budgets > sim
            node = np.zeros(B, dtype=np.int32)
            depth = np.zeros(B, dtype=np.int32)
            walking = games[active]
            leaf_parent = np.zeros(B, dtype=np.int32)
            leaf_action = np.zeros(B, dtype=np.int32)
            leaf_child = np.zeros(B, dtype=np.int32)
            while len(walking):
                n = node[walking]
                p = prior[walking, n]
                v = visits[walking, n]
                q = np.where(v > 0, value_sum[walking, n] / np.maximum(v, 1), self.fpu)
                u = self.c_puct * p * (np.sqrt(v.sum(axis=1, keepdims=True) + 1e-8) / (1 + v))
                score = np.where(p > 0, q + u, -np.inf)  # illegal moves have prior 0 (noise keeps them 0)
                a = score.argmax(axis=1).astype(np.int32)
                d = depth[walking]
                path_nodes[walking, d] = n
                path_actions[walking, d] = a
                depth[walking] = d + 1
                child = children[walking, n, a]
                stop = (child == 0) | terminal[walking, child]
                stopped = walking[stop]
                leaf_parent[stopped] = n[stop]
                leaf_action[stopped] = a[stop]
                leaf_child[stopped] = child[stop]
                node[walking] = child
                walking = walking[~stop]

            # -- expansion: new nodes for games that reached an unexpanded edge
            leaf_value = np.zeros(B, dtype=np.float32)  # for the player to move at the leaf
            is_new = (leaf_child == 0) & active
            old = (leaf_child != 0) & active  # reached an existing terminal node
            leaf_value[old] = terminal_value[games[old], leaf_child[old]]
            new_games = games[is_new]
            if len(new_games):
                step = game.play(states[new_games, leaf_parent[new_games]], leaf_action[new_games])
                idx = num_nodes[new_games]
                num_nodes[new_games] += 1
                children[new_games, leaf_parent[new_games], leaf_action[new_games]] = idx
                states[new_games, idx] = step.states
                terminal[new_games, idx] = step.terminal
                terminal_value[new_games, idx] = step.value
                leaf_value[new_games] = step.value
                to_eval = ~step.terminal
                if to_eval.any():
                    eval_games, eval_idx, eval_states = new_games[to_eval], idx[to_eval], step.states[to_eval]
                    logits, values = self.evaluate(self.encode(eval_states))
                    prior[eval_games, eval_idx] = masked_softmax(logits, game.legal_mask(eval_states))
                    leaf_value[eval_games] = values
                    evals += len(eval_games)
                    calls += 1

            # -- backup: the edge into the leaf belongs to the other player, then signs alternate
            value = -leaf_value
            for d in range(int(depth.max()) - 1, -1, -1):
                on_path = depth > d
                g = games[on_path]
                # position d from the leaf end: edges further from the leaf flip sign once per ply
                sign = np.where((depth[on_path] - 1 - d) % 2 == 0, 1.0, -1.0).astype(np.float32)
                pn, pa = path_nodes[g, d], path_actions[g, d]
                visits[g, pn, pa] += 1
                value_sum[g, pn, pa] += sign * value[on_path]

        # kept for inspection (tests, debugging); overwritten by the next search
        self.last_tree = {"prior": prior, "visits": visits, "children": children, "num_nodes": num_nodes}
        root_visits = visits[:, 0]
        root_value = (value_sum[:, 0].sum(axis=1) / np.maximum(root_visits.sum(axis=1), 1)).astype(np.float32)
        root_q = np.where(root_visits > 0, value_sum[:, 0] / np.maximum(root_visits, 1), -np.inf).astype(np.float32)
        return SearchResult(root_visits.copy(), root_value, root_prior, np.asarray(net_value, dtype=np.float32),
                            evals, calls, root_q)


def uniform_evaluator(game: Game) -> Evaluator:
    """Uniform priors and value 0: pure search, used by tests and as a network-free baseline."""
    def evaluate(planes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        n = len(planes)
        return np.zeros((n, game.num_actions), dtype=np.float32), np.zeros(n, dtype=np.float32)
    return evaluate
