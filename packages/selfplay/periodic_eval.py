"""Pons grading while training runs, in a spawned process that the training loop never waits on."""

from __future__ import annotations

import time
from concurrent.futures import Future

import torch

from . import evaluate
from .actors import background_pool, stop_background_pool
from .config import Config
from .distributed import DistInfo
from .stats import EVAL_MINUTE, EVAL_STEP, RunLog


class PeriodicEval:
    """Pons grading at the start (the baseline, and a progress line with errors within a minute or two) and then
    every eval.every_minutes, in a spawned process on a copy of the weights; never waited on. Each result is
    recorded at the step whose weights were graded."""

    def __init__(self, cfg: Config, game, info: DistInfo, runlog: RunLog):
        self.cfg, self.runlog = cfg, runlog
        self.last: dict | None = None
        self.pending: Future | None = None
        self.pending_step, self.pending_minute = 0, 0.0
        self.started = time.monotonic()  # the session's start, to a few milliseconds: the minute of each grading
        self.last_t = -float("inf")  # due at once
        due = cfg.eval.every_minutes > 0 and game.name == "connect4" and info.is_main
        if due:
            try:
                evaluate.find_pons_dir(cfg.eval.pons_dir)
            except evaluate.EvalError as e:  # say it once, then train without grading (e.g. in a container)
                runlog.say(f"warning: {e}; periodic evaluation is off for this run")
                due = False
        self.pool = background_pool() if due else None

    def poll(self, step: int, model: torch.nn.Module, now: float) -> None:
        cfg = self.cfg
        if self.pending is not None and self.pending.done():
            try:
                result = self.pending.result()
                # the figures say whose they are: the progress line repeats them for minutes after
                self.last = {**evaluate.summary(result), EVAL_STEP: self.pending_step, EVAL_MINUTE: self.pending_minute}
                self.runlog.record(self.pending_step, self.last, kind="eval")
                self.runlog.say(f"evaluation at step {self.pending_step} (minute {self.pending_minute:.0f}):\n"
                                f"{evaluate.format_table(result)}")
            except Exception as e:  # noqa: BLE001 -- an evaluation failure must not end the training
                self.runlog.say(f"warning: evaluation failed: {e}")
            self.pending = None
        if self.pool and self.pending is None and now - self.last_t >= 60 * cfg.eval.every_minutes:
            self.last_t, self.pending_step, self.pending_minute = now, step, (now - self.started) / 60
            state = {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}
            self.pending = self.pool.submit(
                evaluate.evaluate_weights, state, cfg.to_dict()["model"], cfg.eval.pons_dir,
                cfg.eval.positions_per_set, cfg.eval.simulations, cfg.search.c_puct, cfg.actors.precision)

    def close(self) -> None:
        if self.pool is not None:
            stop_background_pool(self.pool)
