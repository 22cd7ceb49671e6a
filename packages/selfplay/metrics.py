"""What the training loop records every run.log_every_seconds: the window's rates, losses and waits (the session's
clock against its budget is RunConfig.clock's; stats.py writes the record and turns it into the progress line)."""

from __future__ import annotations

import dataclasses

import numpy as np

from .actor_pool import ActorPool
from .record_keys import (
    BUFFER_SIZE_KEY,
    DRAW_RATE_KEY,
    GAME_LENGTH_KEY,
    GAMES_KEY,
    LEARNER_STEPS_PER_S_KEY,
    LOSS_KEY,
    POLICY_LOSS_KEY,
    POSITIONS_KEY,
    POSITIONS_PER_S_KEY,
    SAMPLES_PER_POSITION_KEY,
    SIMULATIONS_PER_S_KEY,
    STEP_CHART_KEY,
    VALUE_LOSS_KEY,
    WAIT_FRACTION_KEY,
    WAIT_REASON_KEY,
)
from .replay import ReplayBuffer
from .self_play import Counters


class MetricsWindow:
    """What happened since the last progress line: steps, losses, waits, and the actors' counters' deltas."""

    def __init__(self, counters: Counters):
        self.steps, self.wait_s, self.throttled, self.filling = 0, 0.0, 0, 0
        self.totals: dict | None = None
        self.games_at = dataclasses.replace(counters)  # as of the last line
        self.losses: list[dict] = []
        self.staleness: list[float] = []

    def waited(self, seconds: float, filling: bool) -> None:
        self.wait_s += seconds
        if filling:
            self.filling += 1
        else:
            self.throttled += 1

    def stepped(self, losses: dict, staleness: float) -> None:
        self.steps += 1
        self.losses.append(losses)
        self.staleness.append(staleness)

    def metrics(self, pool: ActorPool, replay: ReplayBuffer, counters: Counters, step: int, seconds: float) -> dict:
        totals = pool.totals()
        previous = self.totals or {k: 0.0 for k in totals}
        delta = {k: max(0.0, totals[k] - previous[k]) for k in totals}
        self.totals = totals
        games, plies, draws = (counters.games - self.games_at.games, counters.plies - self.games_at.plies,
                               counters.draws - self.games_at.draws)
        self.games_at = dataclasses.replace(counters)
        m = {
            STEP_CHART_KEY: step,
            POSITIONS_PER_S_KEY: delta["moves"] / seconds,
            SIMULATIONS_PER_S_KEY: delta["simulations"] / seconds,
            LEARNER_STEPS_PER_S_KEY: self.steps / seconds,
            GAMES_KEY: counters.games,
            POSITIONS_KEY: counters.positions,
            "selfplay/evals_per_call": delta["evals"] / max(1.0, delta["calls"]),
            "selfplay/forward_share": delta["forward_s"] / max(1e-9, delta["busy_s"]),
            "selfplay/actor_restarts": counters.actor_restarts,
            # of the games finished in this window: what users of self-play trainers watch for collapse
            DRAW_RATE_KEY: draws / games if games else None,
            GAME_LENGTH_KEY: plies / games if games else None,
            BUFFER_SIZE_KEY: replay.size,
            "learner/window": replay.window(),
            # samples trained per position added: the pacing target (learner.samples_per_position) when
            # the learner keeps up, below it when self-play outpaces the learner
            SAMPLES_PER_POSITION_KEY: replay.samples_per_added(),
            WAIT_FRACTION_KEY: min(1.0, self.wait_s / seconds),
            "learner/sample_staleness": float(np.mean(self.staleness)) if self.staleness else 0.0,
        }
        if self.throttled + self.filling:
            m[WAIT_REASON_KEY] = "samples/position target: self-play is behind" \
                if self.throttled >= self.filling else "filling the buffer"
        for key in (POLICY_LOSS_KEY, VALUE_LOSS_KEY, LOSS_KEY, "losses/policy_target_entropy"):
            m[key] = float(np.mean([x[key] for x in self.losses])) if self.losses else None
        self.steps, self.wait_s, self.throttled, self.filling = 0, 0.0, 0, 0
        self.losses.clear()
        self.staleness.clear()
        return m
