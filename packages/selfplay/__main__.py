"""``python -m selfplay {train,launch,check,eval,arena,plot}``: the trainer's command line (the verbs: selfplay/cli/).

    python -m selfplay train --config connect4 --run.dir=runs/c4 --search.simulations=100
    NNODES=2 NODE_RANK=0 MASTER_ADDR=10.0.0.2 python -m selfplay launch --config connect4
    python -m selfplay check --config connect4 --search.simulations=100   # what gantry run asks first
    python -m selfplay eval --checkpoint runs/c4 --positions 1000
    python -m selfplay arena --checkpoint runs/c4 --games 100 --baselines random,greedy,minimax5,mcts1000

Known failures (selfplay.errors.SelfplayError and its kinds) are one line, ``selfplay: error: <what and the
fix>``, on stderr and an ExitStatus (errors.py): 2 for a bad config, flag or environment variable, 1 for a
checkpoint, evaluation, plot or run that cannot go on, 130 for Ctrl-C. Every verb takes --debug, which shows the
traceback instead; anything else (a bug, an error torch raises) keeps its traceback.
"""

from __future__ import annotations

import sys  # loaded with the interpreter: nothing to wait for here


def stopped_by_ctrl_c(argv: list[str] | None) -> None:
    """The one line of a Ctrl-C before a verb's own handler is in place."""
    verb = next((word for word in (sys.argv[1:] if argv is None else argv) if not word.startswith("-")), "")
    print(f"selfplay: {verb} stopped by Ctrl-C" + (" during start-up, before its first checkpoint: nothing of "
          "this session was written; run it again to start (or resume)" if verb in ("train", "launch") else ""),
          file=sys.stderr, flush=True)


try:  # a Ctrl-C while this module's own imports run is the same one line (seen once in CI at 0.1 s)
    import argparse
    import logging

    from selfplay.errors import (  # stdlib only: the verbs (numpy, torch) come in main()
        ExitStatus,
        SelfplayError,
    )
except KeyboardInterrupt:
    stopped_by_ctrl_c(None)
    sys.exit(130)  # ExitStatus.INTERRUPTED, whose module may be the one that was interrupted

# Where the dispatcher keeps each verb's handler and kind in the parsed arguments: names no option can take
# (argparse makes --run into `run`, and none starts with an underscore), so a verb's own option, such as plot's
# --run, cannot overwrite the handler.
VERB_HANDLER, VERB_TAKES_OVERRIDES = "_verb_handler", "_verb_takes_overrides"


def build_parser() -> argparse.ArgumentParser:
    from selfplay.cli import VERBS
    from selfplay.cli.options import FORMATTER

    parser = argparse.ArgumentParser(prog="selfplay", description="AlphaZero-style self-play trainer.",
                                     epilog="Config overrides: --section.key=value, e.g. --search.simulations=100")
    sub = parser.add_subparsers(dest="_verb_name", metavar="VERB", required=True)
    for verb in VERBS:
        overrides = getattr(verb, "TAKES_OVERRIDES", False)
        p = sub.add_parser(verb.NAME, help=verb.HELP, description=getattr(verb, "DESCRIPTION", None),
                           epilog=getattr(verb, "EPILOG", None),
                           formatter_class=FORMATTER if overrides else argparse.HelpFormatter)
        verb.add_arguments(p)
        p.add_argument("--debug", action="store_true", help="show the traceback of an error instead of its one line")
        p.set_defaults(**{VERB_HANDLER: verb.run, VERB_TAKES_OVERRIDES: overrides})
    return parser


def main(argv: list[str] | None = None) -> int:
    """The verb's exit status; Ctrl-C at any moment before a verb's own handler is in place (the verbs' imports
    included: numpy and torch take seconds) is one line and 130."""
    try:
        return dispatch(argv)
    except Exception as error:  # noqa: BLE001 (re-raised unless Ctrl-C is its cause)
        if not caused_by_ctrl_c(error):
            raise
        return ctrl_c_during_start_up(argv)
    except KeyboardInterrupt:
        return ctrl_c_during_start_up(argv)


def caused_by_ctrl_c(error: BaseException) -> bool:
    """An error Ctrl-C caused: Python turns a KeyboardInterrupt that lands in a class body's __set_name__ (a dataclass
    field, while a module imports) into RuntimeError("Error calling __set_name__ ..."), its cause the interrupt."""
    seen = error
    while seen is not None:
        if isinstance(seen, KeyboardInterrupt):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def ctrl_c_during_start_up(argv: list[str] | None) -> int:
    # train checkpoints at SIGINT once its handler is in place; before it, torch half imported may log its caches
    # at exit through the INFO root logger dispatch sets, so only warnings go out from here on
    logging.getLogger().setLevel(logging.WARNING)
    stopped_by_ctrl_c(argv)
    return ExitStatus.INTERRUPTED


def dispatch(argv: list[str] | None) -> int:
    parser = build_parser()
    args, overrides = parser.parse_known_args(argv)
    if not getattr(args, VERB_TAKES_OVERRIDES) and overrides:
        parser.error(f"unrecognized arguments: {' '.join(overrides)}")
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        return getattr(args, VERB_HANDLER)(args, overrides)
    except SelfplayError as e:
        if args.debug:
            raise
        print(f"selfplay: error: {e}", file=sys.stderr)
        return e.status


if __name__ == "__main__":
    sys.exit(main())
