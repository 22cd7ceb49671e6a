"""A run's progress as a picture: Pons weak error and Elo against minutes, one SVG file.

    python -m selfplay plot --run runs/local                        # -> runs/local/progress.svg
    python -m selfplay plot --run bench/results/bench-X.json --out bench/results/progress-X.svg

The figures come from a run's stats.jsonl (its `eval` and `arena` records) or from a `make bench` result
(the 30-minute run's checkpoint curve and Elo ladder). SVG, written by hand: no plotting library to install,
and GitHub shows it in a README. alpha-zero-general's 30-minute errors (bench/REFERENCE.md) are the dashed
lines, in each set's colour.
"""

from __future__ import annotations

import json
from html import escape
from pathlib import Path

from .errors import SelfplayError
from .record_keys import EVAL_MINUTE, STATS_FILE, eval_figures
from .stats import read_records

# alpha-zero-general after 30 minutes of its own Connect Four training, MCTS-25 weak error over all 1,000 positions
# per Pons set (bench/REFERENCE.md says how it was measured; bench/run.py compares every 30-minute run with it)
AZG_30MIN_MCTS_WEAK = {"End-Easy": 0.156, "Middle-Easy": 0.164, "Middle-Medium": 0.288, "Begin-Easy": 0.134,
                       "Begin-Medium": 0.206, "Begin-Hard": 0.388}
SETS = list(AZG_30MIN_MCTS_WEAK)  # selfplay.evaluate.PONS_SETS' names and order, without importing torch
COLOURS = ["#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e", "#a6761d"]  # ColorBrewer Dark2, one per set
W, H, PAD_L, PAD_R, PAD_T, PAD_B = 440, 300, 52, 12, 30, 40  # one panel, in pixels


class PlotError(SelfplayError, ValueError):
    """Nothing to plot, or a file this verb cannot read: one line for the user."""


def from_run(run_dir: Path) -> tuple[dict[str, list[tuple[float, float]]], list[tuple[float, float]]]:
    """({set: [(minute, error)]}, [(minute, elo)]) from a run directory's stats.jsonl."""
    path = Path(run_dir) / STATS_FILE
    if not path.is_file():
        raise PlotError(f"{path} not found: pass a run directory (make plot RUN_DIR=runs/NAME) or a bench result")
    records = read_records(path)
    start = min((r["time"] for r in records if "time" in r), default=0.0)
    pons: dict[str, list[tuple[float, float]]] = {}
    elo: list[tuple[float, float]] = []
    for r in records:
        minute = r.get(EVAL_MINUTE, (r.get("time", start) - start) / 60)
        if r.get("kind") == "eval":
            for test_set, error in eval_figures(r).items():
                pons.setdefault(test_set, []).append((minute, error))
        elif r.get("kind") == "arena" and r.get("arena/elo") is not None:
            elo.append((minute, r["arena/elo"]))
    return pons, elo


def from_bench(path: Path) -> tuple[dict[str, list[tuple[float, float]]], list[tuple[float, float]]]:
    """The same from a `make bench` result: its first training run's checkpoint curve and Elo ladder."""
    runs = json.loads(Path(path).read_text()).get("training", {}).get("runs", [])
    if not runs or not runs[0].get("curve"):
        raise PlotError(f"{path} holds no training run (make bench ARGS=\"--train-minutes 30\" writes one)")
    curve = runs[0]["curve"]
    pons = {s: [(c["minutes"], c[s]["mcts_weak"]) for c in curve] for s in SETS if s in curve[0]}
    minute_of = {f"step-{c['step']}": c["minutes"] for c in curve}
    ladder = (runs[0].get("ladder") or {}).get("checkpoints", [])
    elo = [(minute_of[c["checkpoint"]], c["elo"]) for c in ladder if c["checkpoint"] in minute_of]
    return pons, elo


def _panel(x0: int, title: str, series: list[tuple[str, str, list[tuple[float, float]]]],
           references: list[tuple[str, float]], y_label: str, percent: bool) -> list[str]:
    """One chart: axes with ticks, a line per series, dashed reference lines; minutes on x from 0."""
    points = [p for _, _, s in series for p in s]
    values = [v for _, v in points] + [v for _, v in references]
    x_max = max(30.0, max((m for m, _ in points), default=0.0))
    y_max = max(values) * 1.08 if values else 1.0
    y_min = 0.0 if percent else min(values) * 0.9

    def x(minute: float) -> float:
        return x0 + PAD_L + (W - PAD_L - PAD_R) * minute / x_max

    def y(value: float) -> float:
        return PAD_T + (H - PAD_T - PAD_B) * (1 - (value - y_min) / ((y_max - y_min) or 1))

    out = [f'<text x="{x0 + W / 2}" y="18" text-anchor="middle" font-weight="bold">{escape(title)}</text>',
           f'<line x1="{x(0)}" y1="{y(y_min)}" x2="{x(x_max)}" y2="{y(y_min)}" stroke="#333"/>',
           f'<line x1="{x(0)}" y1="{y(y_min)}" x2="{x(0)}" y2="{y(y_max)}" stroke="#333"/>',
           f'<text x="{x0 + PAD_L + (W - PAD_L - PAD_R) / 2}" y="{H - 6}" text-anchor="middle">minutes</text>',
           (f'<text x="{x0 + 12}" y="{PAD_T + (H - PAD_T - PAD_B) / 2}" text-anchor="middle" '
           f'transform="rotate(-90 {x0 + 12} {PAD_T + (H - PAD_T - PAD_B) / 2})">{escape(y_label)}</text>')]
    for minute in range(0, int(x_max) + 1, 5):
        out.append(f'<text x="{x(minute):.1f}" y="{y(y_min) + 16:.1f}" text-anchor="middle">{minute}</text>')
    for i in range(5):
        value = y_min + (y_max - y_min) * i / 4
        label = f"{100 * value:.0f}%" if percent else f"{value:.0f}"
        out.append(f'<text x="{x(0) - 6:.1f}" y="{y(value) + 4:.1f}" text-anchor="end">{label}</text>')
    for colour, value in references:
        out.append(f'<line x1="{x(0):.1f}" y1="{y(value):.1f}" x2="{x(x_max):.1f}" y2="{y(value):.1f}" '
                   f'stroke="{colour}" stroke-dasharray="4 3" opacity="0.6"/>')
    for i, (name, colour, data) in enumerate(series):
        path = " ".join(f"{x(m):.1f},{y(v):.1f}" for m, v in sorted(data))
        out.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2"/>')
        if len(series) > 1:  # the legend, top right on a white box: the sets end too close together to label
            ly = PAD_T + 14 * i
            out.append(f'<rect x="{x0 + W - PAD_R - 112}" y="{ly}" width="112" height="14" fill="white" '
                       'opacity="0.85"/>')
            out.append(f'<line x1="{x0 + W - PAD_R - 108}" y1="{ly + 7}" x2="{x0 + W - PAD_R - 92}" y2="{ly + 7}" '
                       f'stroke="{colour}" stroke-width="2"/>')
            out.append(f'<text x="{x0 + W - PAD_R - 88}" y="{ly + 11}" fill="{colour}">{escape(name)}</text>')
    return out


def svg(pons: dict[str, list[tuple[float, float]]], elo: list[tuple[float, float]], title: str) -> str:
    """Pons MCTS weak error per set (left) and Elo (right, random = 0) against minutes, as an SVG document."""
    if not pons and not elo:
        raise PlotError("no evaluation and no arena record to plot yet: Pons grading runs every eval.every_minutes")
    sets = [s for s in SETS if s in pons]
    colours = dict(zip(SETS, COLOURS))
    panels = _panel(0, f"Pons MCTS weak error ({title})", [(s, colours[s], pons[s]) for s in sets],
                    [(colours[s], AZG_30MIN_MCTS_WEAK[s]) for s in sets], "weak error", percent=True)
    width = W
    if elo:
        panels += _panel(W, "Elo, random = 0", [("Elo", "#333", elo)], [], "Elo", percent=False)
        width += W
    note = "dashed: alpha-zero-general after 30 minutes (bench/REFERENCE.md)"
    return "\n".join([
        (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{H + 16}" font-family="sans-serif" '
        f'font-size="11">'), f'<rect width="{width}" height="{H + 16}" fill="white"/>', *panels,
        f'<text x="{PAD_L}" y="{H + 10}" fill="#555">{note}</text>', "</svg>", ""])


def picture_path(source: Path) -> Path:
    """Where plot draws a source's picture unless told: progress-X.svg beside bench-X.json, or progress.svg in
    the run directory."""
    source = Path(source)
    if source.suffix == ".json":
        return source.with_name(f"progress-{source.stem.removeprefix('bench-')}.svg")
    return source / "progress.svg"


def plot(source: Path, out: Path | None = None) -> Path:
    """Write the picture of a run directory or a bench result; return where."""
    source = Path(source)
    pons, elo = from_bench(source) if source.suffix == ".json" else from_run(source)
    out = Path(out) if out else picture_path(source)
    out.write_text(svg(pons, elo, source.stem if source.suffix == ".json" else source.name))
    return out
