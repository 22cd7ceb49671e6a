"""selfplay train: actors and learner in this process (one rank of many under `launch`); resumes run.dir."""

from __future__ import annotations

import os

from selfplay.cli.options import add_config_argument, load_config, settings_help
from selfplay.config_io import resolve_config
from selfplay.errors import ExitStatus

NAME = "train"
HELP = "train in this process (actors + learner); resumes run.dir's checkpoint"
DESCRIPTION = HELP
EPILOG = settings_help()
TAKES_OVERRIDES = True  # --section.key=value settings; the help lists them, unwrapped


def add_arguments(parser) -> None:
    add_config_argument(parser)


def run(args, overrides) -> int:
    cfg = load_config(args, overrides)
    if os.environ.get("RANK", "0") == "0":  # the first line: a misspelt CONFIG=/RUN_DIR= shows here, once per run
        print(f"config {resolve_config(args.config)} ({cfg.game.name}), run dir {cfg.run.dir}", flush=True)
    from selfplay.train import train  # torch and the whole trainer: not for `--help` or the other verbs
    train(cfg)
    return ExitStatus.OK
