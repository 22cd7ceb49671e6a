"""Self-play actors: each process plays B games in lock-step with batched MCTS.

``SelfPlayWorker`` is the algorithm (usable in-process by tests and benchmarks);
``actor_main`` is the process around it: one torch/OMP thread, weights polled from
shared memory, finished games sent to the learner as numpy arrays stamped with the
weight version that produced each position.
"""

from __future__ import annotations

import os
import queue as queue_lib
import signal
import time
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
import torch

from .config import Config
from .config_io import from_dict
from .games import Game, make_game
from .inference import NetworkEvaluator, actor_dtype, runs_int8
from .leaf_server import LeafSlots, RemoteEvaluator
from .mcts import BatchedMCTS
from .model import build_model
from .players import random_moves
from .weights import SharedWeights

THREAD_ENV = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


@dataclass
class Samples:
    """Positions of finished games; z and q are from the point of view of the player to move."""
    states: np.ndarray
    policy: np.ndarray
    z: np.ndarray
    q: np.ndarray
    version: np.ndarray
    games: int = 0
    plies: int = 0  # moves played in these games, recorded or not (playout-cap randomisation records some)
    outcomes: dict = field(default_factory=lambda: {"first": 0, "second": 0, "draw": 0})

    @staticmethod
    def concat(parts: list[Samples]) -> Samples:
        out = Samples(*(np.concatenate([getattr(p, k) for p in parts]) for k in ("states", "policy", "z", "q", "version")))
        out.games = sum(p.games for p in parts)
        out.plies = sum(p.plies for p in parts)
        for p in parts:
            for k, v in p.outcomes.items():
                out.outcomes[k] += v
        return out


# how a self-play move was chosen (Moves.kinds): a uniformly random opening move, a move sampled in proportion to
# the visits (search.temperature_moves) or the most visited one, after a full or a fast search
OPENING, SAMPLED_FULL, SAMPLED_FAST, GREEDY_FULL, GREEDY_FAST = range(5)
MOVE_KINDS = ("random opening", "sampled, full search", "sampled, fast search", "most visited, full search",
              "most visited, fast search")


class Moves(NamedTuple):
    """One lock-step move of every game (SelfPlayWorker.choose_moves)."""
    actions: np.ndarray     # int [B]: the move each game plays
    kinds: np.ndarray       # int [B]: how it was chosen, an index into MOVE_KINDS
    policy: np.ndarray      # float32 [B, A]: the search's visit shares (the policy target)
    root_value: np.ndarray  # float32 [B]: the search's value for the player to move (the q target)
    recorded: np.ndarray    # bool [B]: searched in full, so a training position
    simulations: int        # simulations the searches spent


class SelfPlayWorker:
    def __init__(self, game: Game, evaluator, cfg: Config, rng: np.random.Generator):
        self.game, self.cfg, self.rng = game, cfg, rng
        s = cfg.search
        self.mcts = BatchedMCTS(game, evaluator, c_puct=s.c_puct, dirichlet_alpha=s.dirichlet_alpha,
                                noise_fraction=s.noise_fraction, rng=rng)
        B, T, A = cfg.actors.games, game.max_moves, game.num_actions
        self.states = game.initial_states(B)
        self.ply = np.zeros(B, dtype=np.int64)
        self.h_states = np.zeros((B, T, game.state_words), dtype=np.uint64)
        self.h_policy = np.zeros((B, T, A), dtype=np.float32)
        self.h_q = np.zeros((B, T), dtype=np.float32)
        self.h_version = np.zeros((B, T), dtype=np.int64)
        self.h_recorded = np.zeros((B, T), dtype=bool)
        self.opening = self.random_openings(B)
        self.moves = 0
        self.simulations = 0

    def random_openings(self, n: int) -> np.ndarray:
        """How many uniformly random moves each of ``n`` new games opens with (0 for most, see the config)."""
        s = self.cfg.search
        length = self.rng.integers(1, s.random_opening_moves + 1, size=n)
        return np.where(self.rng.random(n) < s.random_opening_fraction, length, 0)

    def choose_moves(self) -> Moves:
        """Search every game's position and choose its move.

        Playout-cap randomisation (KataGo): a full_search_fraction of moves get the full search, with root
        noise, and become training positions; the others get a fast search without noise and are only
        played. Games then end sooner, so the value targets come from more, less correlated games for the
        same compute, while every policy target still comes from a full search. Drawn once per move for the whole
        batch, not per game, so every network call is the batch wide: 1.4x the simulations a second of one int8
        actor; with the NHWC learner, 1.2-1.3x the learner steps in 30 minutes and a lower error on two seeds
        (bench/RESULTS.md, 2026-12-01).
        """
        game, s = self.game, self.cfg.search
        opening = self.ply < self.opening  # a random move: searched once (the batch is in lock-step), not recorded
        full = (self.rng.random() < s.full_search_fraction) & ~opening
        budgets = np.where(full, s.simulations, np.where(opening, 1, min(s.fast_simulations, s.simulations)))
        result = self.mcts.search(self.states, s.simulations, add_noise=full, budgets=budgets)
        policy = result.visits / result.visits.sum(axis=1, keepdims=True)
        actions = result.best_moves()
        sampled = (self.ply < s.temperature_moves) & ~opening
        explore = np.flatnonzero(sampled)
        if len(explore):  # temperature 1: sample in proportion to visits
            cum = policy[explore].cumsum(axis=1)
            u = self.rng.random(len(explore))[:, None] * cum[:, -1:]
            actions[explore] = np.minimum((cum < u).sum(axis=1), game.num_actions - 1)
        if opening.any():
            actions[opening] = random_moves(game, self.states[opening], self.rng)
        kinds = np.where(opening, OPENING, np.where(sampled, np.where(full, SAMPLED_FULL, SAMPLED_FAST),
                                                    np.where(full, GREEDY_FULL, GREEDY_FAST)))
        return Moves(actions, kinds, policy, result.root_value, full, int(budgets.sum()))

    def step(self, version: int) -> Samples | None:
        """Advance every game by one move (choose_moves); return the recorded positions of games that just ended."""
        game, B = self.game, len(self.states)
        moves = self.choose_moves()
        rows = np.arange(B)
        self.h_states[rows, self.ply] = self.states
        self.h_policy[rows, self.ply] = moves.policy
        self.h_q[rows, self.ply] = moves.root_value
        self.h_version[rows, self.ply] = version
        self.h_recorded[rows, self.ply] = moves.recorded
        self.ply += 1
        step = game.play(self.states, moves.actions)
        self.states = step.states
        self.moves += B
        self.simulations += moves.simulations
        done = np.flatnonzero(step.terminal)
        if not len(done):
            return None
        parts = []
        outcomes = {"first": 0, "second": 0, "draw": 0}
        for g in done:
            T = int(self.ply[g])
            last_mover_result = -float(step.value[g])  # +1: the last mover won, 0: draw
            sign = np.where((T - 1 - np.arange(T)) % 2 == 0, 1.0, -1.0).astype(np.float32)
            keep = self.h_recorded[g, :T]
            parts.append((self.h_states[g, :T][keep], self.h_policy[g, :T][keep], (last_mover_result * sign)[keep],
                          self.h_q[g, :T][keep], self.h_version[g, :T][keep]))
            key = "draw" if last_mover_result == 0 else ("first" if T % 2 == 1 else "second")
            outcomes[key] += 1
        out = Samples(*(np.concatenate(col) for col in zip(*parts)))
        out.games, out.plies, out.outcomes = len(done), int(self.ply[done].sum()), outcomes
        self.restart(done)
        return out

    def restart(self, games: np.ndarray) -> None:
        """Start new games in these slots (their old ones ended)."""
        self.states[games] = self.game.initial_states(len(games))
        self.ply[games] = 0
        self.opening[games] = self.random_openings(len(games))


class PolledEvaluator(NetworkEvaluator):
    """Local inference on this core, refreshed from the learner's weights in shared memory."""

    def __init__(self, cfg: Config, game: Game, weights_name: str, numel: int):
        self.model = build_model(game, cfg.model.channels, cfg.model.blocks, cfg.model.policy_filters,
                                 cfg.model.value_filters).eval()
        self.weights = SharedWeights(numel, name=weights_name)
        self.version = -1
        super().__init__(self.model, actor_dtype(cfg.actors.precision, cfg.actors.runtime), cfg.actors.runtime,
                         int8=runs_int8(cfg.actors.precision, cfg.actors.runtime))

    def sync(self) -> int:
        """Take newer weights if the learner published some; return the version now held (-1: none yet)."""
        fresh = self.weights.read_into(self.model, self.version)
        if fresh != self.version:
            self.refresh(self.model)
            self.version = fresh
        return self.version

    def close(self) -> None:
        self.weights.close()


def die_with_parent() -> None:
    """Ask Linux to SIGTERM this process when its parent dies, however it dies (SIGKILL, OOM killer).

    Without it, actors and the evaluation worker of a killed trainer live on, blocked on a queue for
    good, and keep the shared-memory segments they map from being reclaimed. Elsewhere a no-op."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    import multiprocessing as mp

    # The parent died before the request took effect: this process was handed to another. Compared with the
    # parent's pid, not with 1: in a container the trainer itself is often PID 1 (docker run without --init), and
    # every child of it would take its own parent for dead.
    parent = mp.parent_process()
    if parent is not None and os.getppid() != parent.pid:
        os.kill(os.getpid(), signal.SIGTERM)


def background_pool():
    """One spawned worker for grading beside training (PeriodicEval, PeriodicArena); it dies with the trainer."""
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor

    return ProcessPoolExecutor(1, mp_context=mp.get_context("spawn"), initializer=die_with_parent)


def stop_background_pool(pool) -> None:
    """End the worker now, a grading under way included: its result would come after the run, and at exit the
    interpreter joins the worker, so a SIGTERM's seconds (a Spot notice) went to a grading nobody reads (17 s of
    a 25 s grace, measured in bench/preemption.py). ProcessPoolExecutor terminates workers only from Python 3.14;
    before it, the private process table is the only handle on them."""
    if hasattr(pool, "terminate_workers"):  # Python >= 3.14
        pool.terminate_workers()
        return
    processes = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        process.terminate()


def actor_main(actor_id: int, config_dict: dict, weights_name: str, numel: int, sample_queue, stop_event,
               seed: int, leaf: tuple | None = None) -> None:
    """Entry point of one actor process (started with the spawn method).

    ``leaf`` is None for local inference (weights polled from shared memory, forward on this core)
    or ``(slots spec, pipe)`` when the learner's device answers the leaves (leaf_server.py).
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the learner's to handle: it stops us in order
    signal.signal(signal.SIGTERM, lambda *_: stop_event.set())
    die_with_parent()  # SIGTERM, handled above, when the learner is killed without a word
    torch.set_num_threads(1)
    cfg = from_dict(config_dict)
    game = make_game(cfg.game.name)
    sample_queue.cancel_join_thread()  # never block exit on undelivered data: the learner is stopping anyway
    evaluator = PolledEvaluator(cfg, game, weights_name, numel) if leaf is None else \
        RemoteEvaluator(LeafSlots(**leaf[0]), actor_id, leaf[1])
    try:
        while evaluator.sync() < 0 and not stop_event.is_set():
            time.sleep(0.05)
        worker = SelfPlayWorker(game, evaluator, cfg, np.random.default_rng(seed))
        pending: list[Samples] = []
        last_flush = time.perf_counter()
        started = time.perf_counter()
        while not stop_event.is_set():
            finished = worker.step(evaluator.sync())
            if finished is not None:
                pending.append(finished)
            now = time.perf_counter()
            if pending and now - last_flush > 1.0:
                message = {"actor": actor_id, "pid": os.getpid(), "samples": Samples.concat(pending),
                           "moves": worker.moves, "simulations": worker.simulations,
                           "evals": evaluator.positions, "calls": evaluator.calls,
                           "forward_s": evaluator.seconds, "busy_s": now - started}
                while not stop_event.is_set():
                    try:
                        sample_queue.put(message, timeout=0.5)
                        break
                    except queue_lib.Full:  # backpressure: the learner is behind
                        continue
                pending, last_flush = [], now
    except EOFError:  # the learner's leaf server closed its end: the learner is gone or stopping
        pass
    finally:
        evaluator.close()
