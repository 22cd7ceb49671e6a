"""``python -m selfplay {train,launch,check,eval,arena,plot}``: the trainer's command line (the verbs: selfplay/cli/).

    python -m selfplay train --config connect4 --run.dir=runs/c4 --search.simulations=100
    NNODES=2 NODE_RANK=0 MASTER_ADDR=10.0.0.2 python -m selfplay launch --config connect4
    python -m selfplay check --config connect4 --search.simulations=100   # what gantry run asks first
    python -m selfplay eval --checkpoint runs/c4 --positions 1000
    python -m selfplay arena --checkpoint runs/c4 --games 100 --baselines random,greedy,minimax5,mcts1000

Known failures are one line, ``selfplay: error: <what and the fix>``, on stderr and an ExitStatus (errors.py):
2 for a bad config, flag or environment variable, 1 for a checkpoint, evaluation, plot or runtime failure (eval
and arena show the traceback with --debug), 130 for Ctrl-C.
"""

from __future__ import annotations

import argparse
import logging
import sys

from selfplay.cli import VERBS
from selfplay.cli.options import FORMATTER
from selfplay.errors import CheckpointError, ConfigError, ExitStatus
from selfplay.evaluate import EvalError
from selfplay.plot import PlotError

FAILURES = (CheckpointError, EvalError, PlotError, RuntimeError)  # said in one line, exit 1


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="selfplay", description="AlphaZero-style self-play trainer.",
                                     epilog="Config overrides: --section.key=value, e.g. --search.simulations=100")
    sub = parser.add_subparsers(dest="command", required=True)
    for verb in VERBS:
        overrides = getattr(verb, "TAKES_OVERRIDES", False)
        p = sub.add_parser(verb.NAME, help=verb.HELP, description=getattr(verb, "DESCRIPTION", None),
                           epilog=getattr(verb, "EPILOG", None),
                           formatter_class=FORMATTER if overrides else argparse.HelpFormatter)
        verb.add_arguments(p)
        p.set_defaults(run=verb.run, takes_overrides=overrides)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, overrides = parser.parse_known_args(argv)
    if not args.takes_overrides and overrides:
        parser.error(f"unrecognized arguments: {' '.join(overrides)}")
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        return args.run(args, overrides)
    except ConfigError as e:
        print(f"selfplay: error: {e}", file=sys.stderr)
        return ExitStatus.CONFIG
    except FAILURES as e:
        if getattr(args, "debug", False):
            raise
        print(f"selfplay: error: {e}", file=sys.stderr)
        return ExitStatus.ERROR
    except KeyboardInterrupt:
        return ExitStatus.INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
