"""selfplay check: the config and flags as `train` would take them, then exit (what `gantry run` asks first)."""

from __future__ import annotations

from selfplay.cli.options import add_config_argument, load_config, settings_help
from selfplay.errors import ExitStatus

NAME = "check"
HELP = "check the config and flags as train would, then exit (0: fine, 2: refused)"
DESCRIPTION = HELP
EPILOG = settings_help()
TAKES_OVERRIDES = True  # --section.key=value settings; the help lists them, unwrapped


def add_arguments(parser) -> None:
    add_config_argument(parser)


def run(args, overrides) -> int:
    """Refused the same way as train, with nothing written or imported beyond the config (no torch: quick)."""
    cfg = load_config(args, overrides)
    print(f"config ok: {args.config} ({cfg.game.name})", flush=True)
    return ExitStatus.OK
