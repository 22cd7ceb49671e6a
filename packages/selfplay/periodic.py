"""Work beside training that the loop never waits on: Pons grading and the arena, each in a spawned process on a
copy of the learner's weights. One BackgroundJob does the timing, the hand-off and the failure handling; each job
says only what it submits and how it records the result."""

from __future__ import annotations

import time
from concurrent.futures import Future

import torch

from . import arena, checkpoint, evaluate
from .actors import background_pool, stop_background_pool
from .config import Config
from .record_keys import ARENA, EVAL, EVAL_MINUTE, EVAL_STEP
from .stats import RunLog


class BackgroundJob:
    """Every ``every_minutes`` (0: never), submit a job on a copy of the weights to one spawned worker; poll() hands
    a finished result to record() at the step whose weights it used. A failure is one warning: training goes on."""

    name = ""  # what the warning calls the job

    def __init__(self, every_minutes: float, due: bool, runlog: RunLog, first_now: bool):
        self.every_s, self.runlog = 60 * every_minutes, runlog
        self.pending: Future | None = None
        self.pending_step, self.pending_minute = 0, 0.0
        self.started = time.monotonic()  # the session's start, to a few milliseconds: the minute of each job
        self.last_t = -float("inf") if first_now else self.started
        self.pool = background_pool() if due and every_minutes > 0 else None

    def submit(self, weights: dict, step: int):
        """Start the job on these weights; return its Future."""
        raise NotImplementedError

    def record(self, result, step: int, minute: float) -> None:
        """Write a finished job's result, recorded at the step whose weights it used."""
        raise NotImplementedError

    def poll(self, step: int, model: torch.nn.Module, now: float) -> None:
        if self.pending is not None and self.pending.done():
            try:
                self.record(self.pending.result(), self.pending_step, self.pending_minute)
            except Exception as e:  # noqa: BLE001 -- a grading failure must not end the training
                self.runlog.say(f"warning: {self.name} failed: {e}")
            self.pending = None
        if self.pool and self.pending is None and now - self.last_t >= self.every_s:
            self.last_t, self.pending_step, self.pending_minute = now, step, (now - self.started) / 60
            weights = {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}
            self.pending = self.submit(weights, step)

    def close(self) -> None:
        if self.pool is not None:
            stop_background_pool(self.pool)


class PeriodicEval(BackgroundJob):
    """Pons grading at the start (the baseline, and a progress line with errors within a minute or two) and then
    every eval.every_minutes, on rank 0 of a Connect Four run."""

    name = "evaluation"

    def __init__(self, cfg: Config, game, is_main: bool, runlog: RunLog):
        self.cfg = cfg
        self.last: dict | None = None  # the newest figures, for the progress line
        due = cfg.eval.every_minutes > 0 and game.name == "connect4" and is_main
        if due:
            try:
                evaluate.find_pons_dir(cfg.eval.pons_dir)
            except evaluate.EvalError as e:  # say it once, then train without grading (e.g. in a container)
                runlog.say(f"warning: {e}; periodic evaluation is off for this run")
                due = False
        super().__init__(cfg.eval.every_minutes, due, runlog, first_now=True)

    def submit(self, weights: dict, step: int):
        cfg = self.cfg
        return self.pool.submit(evaluate.evaluate_weights, weights, cfg.to_dict()["model"], cfg.eval.pons_dir,
                                cfg.eval.positions_per_set, cfg.eval.simulations, cfg.search.c_puct,
                                cfg.actors.precision)

    def record(self, result, step: int, minute: float) -> None:
        # the figures say whose they are: the progress line repeats them for minutes after
        self.last = {**evaluate.summary(result), EVAL_STEP: step, EVAL_MINUTE: minute}
        self.runlog.record(step, self.last, kind=EVAL)
        self.runlog.say(f"evaluation at step {step} (minute {minute:.0f}):\n{evaluate.format_table(result)}")


class PeriodicArena(BackgroundJob):
    """eval.arena_every_minutes (off by default): the learner's weights against the baselines and the run's earlier
    checkpoints, on rank 0. The first runs after one interval (the starting weights are random); the games' seed is
    the run's seed plus the step, so a rerun plays the same openings."""

    name = "arena"

    def __init__(self, cfg: Config, run_dir, is_main: bool, seed: int, runlog: RunLog):
        self.cfg, self.run_dir, self.seed = cfg, run_dir, seed
        super().__init__(cfg.eval.arena_every_minutes, is_main, runlog, first_now=False)

    def submit(self, weights: dict, step: int):
        ec = self.cfg.eval
        earlier = [str(p) for p in checkpoint.list_checkpoints(self.run_dir)
                   if int(checkpoint.NAME.match(p.name)[1]) < step]
        earlier = earlier[-ec.arena_previous:] if ec.arena_previous else []
        return self.pool.submit(arena.arena_weights, weights, self.cfg.to_dict(), step, earlier, ec.arena_baselines,
                                ec.arena_games, ec.simulations, arena.DEFAULT_OPENING_PLIES, self.seed + step,
                                self.cfg.actors.precision)

    def record(self, result, step: int, minute: float) -> None:
        self.runlog.record(step, arena.summary(result), kind=ARENA)
        self.runlog.say(f"arena at step {step}:\n{arena.format_table(result)}")
