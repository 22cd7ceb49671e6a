"""The selfplay CLI: one module per verb, a thin layer over the trainer's modules; selfplay/__main__.py
dispatches.

Every verb module has NAME, HELP (one line for `selfplay --help`), optional DESCRIPTION and EPILOG,
``add_arguments(parser)`` and ``run(args, overrides) -> int`` (an ExitStatus, or torchrun's code from `launch`).
TAKES_OVERRIDES = True marks the verbs that take --config and --section.key=value settings (train, launch,
check); the others refuse an argument they do not know. A verb module imports torch only inside ``run``, so
that `selfplay --help` and `selfplay check` (what `gantry run` asks on the laptop) stay quick.
"""

from selfplay.cli import arena, check, eval, launch, plot, train

VERBS = [train, launch, check, eval, arena, plot]  # the order of `selfplay --help`
