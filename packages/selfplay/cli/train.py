"""selfplay train: actors and learner in this process (one rank of many under `launch`); resumes run.dir."""

from __future__ import annotations

import dataclasses
import os
import time

from launch_contract import DEADLINE_ENV

from selfplay.cli.options import add_config_argument, load_config, settings_help
from selfplay.config_io import resolve_config
from selfplay.errors import ExitStatus

NAME = "train"
HELP = "train in this process (actors + learner); resumes run.dir's checkpoint"
DESCRIPTION = HELP
EPILOG = settings_help()
TAKES_OVERRIDES = True  # --section.key=value settings; the help lists them, unwrapped
# What the session leaves itself before the launch's deadline: stopping the actors, the final checkpoint and its copy
# to the bucket, so it ends on its own (its end record, its last evaluation) before the agent's SIGTERM would. The
# budget counts from the training loop's start, so what comes before it (the process group, the resume, the actors'
# start: 20 s for four ranks on a loaded 2-core machine) is spent from this margin too; a short launch keeps half.
DEADLINE_MARGIN_S = 60.0


def add_arguments(parser) -> None:
    add_config_argument(parser)


def within_deadline(cfg, environ, now: float | None = None):
    """The config with this session's budget (run.max_minutes) ending before the launch's deadline (DEADLINE_ENV, set
    on a node by the agent, which stops the program then), less DEADLINE_MARGIN_S (half of what is left at most);
    a budget of its own that ends sooner is kept. The same config without a deadline."""
    if not environ.get(DEADLINE_ENV):
        return cfg
    left = float(environ[DEADLINE_ENV]) - (time.time() if now is None else now)
    minutes = max(0.01, (left - min(DEADLINE_MARGIN_S, left / 2)) / 60)  # 0 would mean no budget at all
    if cfg.run.max_minutes and cfg.run.max_minutes <= minutes:
        return cfg
    return dataclasses.replace(cfg, run=dataclasses.replace(cfg.run, max_minutes=round(minutes, 2)))


def run(args, overrides) -> int:
    cfg = within_deadline(load_config(args, overrides), os.environ)
    if os.environ.get("RANK", "0") == "0":  # the first line: a misspelt CONFIG=/RUN_DIR= shows here, once per run
        print(f"config {resolve_config(args.config)} ({cfg.game.name}), run dir {cfg.run.dir}", flush=True)
        if os.environ.get(DEADLINE_ENV):
            ends = time.strftime("%H:%M:%S UTC", time.gmtime(float(os.environ[DEADLINE_ENV])))
            print(f"time limit: the launch ends at {ends} ({DEADLINE_ENV}); this session trains "
                  f"{cfg.run.max_minutes:g} min", flush=True)
    from selfplay.train import train  # torch and the whole trainer: not for `--help` or the other verbs
    train(cfg)
    return ExitStatus.OK
