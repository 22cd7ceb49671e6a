"""What the training loop records every run.log_every_seconds: the window's rates, losses and waits, and the
session's clock against its budget (stats.py writes them and turns them into the progress line)."""

from __future__ import annotations

import numpy as np

from .actor_pool import ActorPool
from .config import Config
from .record_keys import LOSS_KEY, POSITIONS_PER_S_KEY
from .replay import ReplayBuffer
from .stats import SAMPLES_PER_POSITION_KEY, WAIT_FRACTION_KEY


def budget_clock(cfg: Config, step: int, elapsed_s: float, steps_per_s: float) -> dict:
    """This session's minutes so far and, with a budget, the minutes left: by run.max_minutes, or by run.max_steps
    at the last window's step rate, whichever ends the run first (None while a steps-only run has no rate)."""
    left = []
    if cfg.run.max_minutes:
        left.append(cfg.run.max_minutes - elapsed_s / 60)
    if cfg.run.max_steps and steps_per_s > 0:
        left.append(max(0, cfg.run.max_steps - step) / steps_per_s / 60)
    return {"charts/elapsed_minutes": elapsed_s / 60, "charts/remaining_minutes": max(0.0, min(left)) if left else None}


class MetricsWindow:
    """What happened since the last progress line: steps, losses, waits, and the actors' counters' deltas."""

    def __init__(self, counters: dict):
        self.steps, self.wait_s, self.throttled, self.filling = 0, 0.0, 0, 0
        self.totals: dict | None = None
        self.games_at = {k: counters[k] for k in ("games", "plies", "draws")}  # as of the last line
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

    def metrics(self, pool: ActorPool, replay: ReplayBuffer, counters: dict, step: int, seconds: float) -> dict:
        totals = pool.totals()
        previous = self.totals or {k: 0.0 for k in totals}
        delta = {k: max(0.0, totals[k] - previous[k]) for k in totals}
        self.totals = totals
        games_delta = {k: counters[k] - self.games_at[k] for k in self.games_at}
        self.games_at = {k: counters[k] for k in self.games_at}
        m = {
            "charts/step": step,
            POSITIONS_PER_S_KEY: delta["moves"] / seconds,
            "charts/simulations_per_s": delta["simulations"] / seconds,
            "charts/learner_steps_per_s": self.steps / seconds,
            "selfplay/games": counters["games"],
            "selfplay/positions": counters["positions"],
            "selfplay/evals_per_call": delta["evals"] / max(1.0, delta["calls"]),
            "selfplay/forward_share": delta["forward_s"] / max(1e-9, delta["busy_s"]),
            "selfplay/actor_restarts": counters["actor_restarts"],
            # of the games finished in this window: what users of self-play trainers watch for collapse
            "selfplay/draw_rate": games_delta["draws"] / games_delta["games"] if games_delta["games"] else None,
            "selfplay/game_length": games_delta["plies"] / games_delta["games"] if games_delta["games"] else None,
            "learner/buffer_size": replay.size,
            "learner/window": replay.window(),
            # samples trained per position added: the pacing target (learner.samples_per_position) when
            # the learner keeps up, below it when self-play outpaces the learner
            SAMPLES_PER_POSITION_KEY: replay.samples_per_added(),
            WAIT_FRACTION_KEY: min(1.0, self.wait_s / seconds),
            "learner/sample_staleness": float(np.mean(self.staleness)) if self.staleness else 0.0,
        }
        if self.throttled + self.filling:
            m["learner/wait_reason"] = "samples/position target: self-play is behind" \
                if self.throttled >= self.filling else "filling the buffer"
        for key in ("losses/policy", "losses/value", LOSS_KEY, "losses/policy_target_entropy"):
            m[key] = float(np.mean([x[key] for x in self.losses])) if self.losses else None
        self.steps, self.wait_s, self.throttled, self.filling = 0, 0.0, 0, 0
        self.losses.clear()
        self.staleness.clear()
        return m
