"""selfplay plot: a run's Pons error and Elo against minutes, as an SVG."""

from __future__ import annotations

from pathlib import Path

from selfplay.errors import ExitStatus
from selfplay.plot import plot

NAME = "plot"
HELP = "draw a run's Pons error and Elo against minutes into an SVG"
EPILOG = "example: python -m selfplay plot --run runs/local  (make plot RUN_DIR=runs/local)"


def add_arguments(parser) -> None:
    parser.add_argument("--run", required=True,
                        help="a run directory (its stats.jsonl) or a bench/results/*.json result")
    parser.add_argument("--out", default="", help="the SVG to write (default: RUN/progress.svg, or progress-*.svg "
                        "beside a bench result)")


def run(args, _overrides) -> int:
    print(f"wrote {plot(Path(args.run), Path(args.out) if args.out else None)}")
    return ExitStatus.OK
