"""`make bench` results side by side: an A/B arm against its control, checkpoint by checkpoint.

    python -m bench.compare bench/results/bench-ARM.json bench/results/bench-CONTROL.json

For each checkpoint of the first run, up to the shortest run's end, every run's Pons MCTS-25 weak error per set and
its six-set mean at the nearest minute (learner steps beside them), then the 600-simulation grades, the first-player
walk, how long the learner waited for self-play, and at how many checkpoints from minute 30 the first run's mean and
Begin-Hard are below each other run's. A markdown table, as bench/RESULTS.md quotes them. Minutes are not steps:
results from different CPUs, torch builds or precisions are compared all the same, after a first line that says so
(a faster CPU buys steps in the same minutes); so are runs whose actors computed in other numbers (int8 and bf16,
where bench recorded them) and runs of other lengths or checkpoint intervals, each with its line.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from selfplay.errors import ExitStatus
from selfplay.perfect_play import format_result
from selfplay.plot import SETS
from selfplay.record_keys import ACTOR_NET_KEY

FROM_MINUTE = 30  # where the counts start: before it every arm is still learning the rules
SAME_MACHINE_KEYS = ("cpu", "cpu_flags", "torch", "inference_dtype")  # bench.run.machine()'s that set the pace
SAME_MINUTE = 1.0  # two runs' checkpoints at one interval land within 0.2 minutes of each other


class CompareError(ValueError):
    """A file that is not a `make bench` result with a graded training run: one line for the user."""


def training_runs(path: Path) -> list[dict]:
    """The graded training runs of one result, each labelled with its file and seed."""
    try:
        report = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise CompareError(f"{path}: cannot read it as JSON ({exc}); pass bench/results/bench-*.json files") from None
    training = report.get("training", {}) if isinstance(report, dict) else {}
    runs = [r for r in training.get("runs", []) if r.get("curve")]
    if not runs:
        raise CompareError(f"{path}: no graded training run in it; pass a result of "
                           f'`make bench ARGS="--train-minutes N"` or of --from-run')
    if any(c["minutes"] is None for r in runs for c in r["curve"]):  # grade_run: a stats.jsonl without times
        raise CompareError(f"{path}: its checkpoints have no training minutes to line up; grade the runs again with "
                           f'`make bench ARGS="--from-run RUN"` once their stats.jsonl holds the training\'s records')
    args = training.get("train_args") or "default"
    held = ", held to AVX2/fp32" if training.get("held_to_avx2_fp32") else ""
    return [{**r, "label": f"{path.stem} {Path(r['run']).name.rsplit('-', 1)[-1]} ({args}{held}"
                           + (f", actors {actors(r)}" if actors(r) else "") + ")",
             "machine": report.get("machine", {})} for r in runs]


def actors(run: dict) -> str | None:
    """What ran the run's actors' net ("onnxruntime/int8", "torch/bf16", ...); None where bench did not record it."""
    return run.get("final_window", {}).get(ACTOR_NET_KEY)


def mean(graded: dict) -> float:
    return sum(graded[s]["mcts_weak"] for s in SETS) / len(SETS)


def nearest(run: dict, minutes: float) -> dict:
    return min(run["curve"], key=lambda c: abs(c["minutes"] - minutes))


def final_grades(run: dict) -> list[dict]:
    """The checkpoints graded at the final simulations (bench.run.grade_run): one near each whole hour, the last."""
    return [*run.get("hourly_graded_at", []), {**run["final_graded_at"], "minutes": run["curve"][-1]["minutes"]}]


def row(label: str, graded: list[dict]) -> str:
    cells = [" / ".join(f"{100 * g[s]['mcts_weak']:.1f}" for g in graded) for s in SETS]
    return f"| {label} | " + " | ".join(cells) + " | " + " / ".join(f"{100 * mean(g):.2f}" for g in graded) + " |"


def caveats(runs: list[dict], aligned: list[list[dict]]) -> list[str]:
    """What the reader must know before the rows: other CPUs, other lengths, checkpoints at other minutes."""
    notes = []
    if len({json.dumps({k: r["machine"].get(k) for k in SAME_MACHINE_KEYS}) for r in runs}) > 1:
        notes.append("note: these ran on different machines ("
                     + "; ".join(f"run {i + 1}: {r['machine'].get('cpu')} {' '.join(r['machine'].get('cpu_flags', []))}"
                                 f" torch {r['machine'].get('torch')} {r['machine'].get('inference_dtype')}"
                                 for i, r in enumerate(runs))
                     + "): minutes are not steps, compare the steps beside them")
    if len({actors(r) for r in runs if actors(r)}) > 1:  # an int8 arm against a bf16 control buys steps, as a CPU does
        notes.append("note: these runs' actors computed in different numbers (" + ", ".join(
            f"run {i + 1}: {actors(r) or 'not recorded'}" for i, r in enumerate(runs))
            + "): minutes are not steps, compare the steps beside them")
    last = aligned[-1][0]["minutes"]
    if any(r["curve"][-1]["minutes"] > last + SAME_MINUTE for r in runs):
        notes.append("note: these trained for different times (" + ", ".join(
            f"run {i + 1}: {r['curve'][-1]['minutes']} minutes" for i, r in enumerate(runs))
            + f"): rows and counts stop at minute {last}")
    for k in range(2, len(runs) + 1):
        apart = max(abs(graded[k - 1]["minutes"] - graded[0]["minutes"]) for graded in aligned)
        if apart > SAME_MINUTE:
            notes.append(f"note: run {k}'s checkpoints are not at run 1's minutes (up to {apart:.1f} minutes apart): "
                         "its cells are its nearest checkpoint")
    return notes


def pace_summary(run: dict) -> str:
    """bench.run.learner_pace's figures in words; empty for a result written before bench recorded them."""
    if "learner_wait_fraction" not in run:
        return ""
    return (f"the learner waited {run['learner_wait_fraction']:.0%} of the run for self-play and trained "
            f"{run['samples_per_position']:.1f} samples per recorded position")


def compare(runs: list[dict]) -> str:
    end = min(r["curve"][-1]["minutes"] for r in runs)  # past the shortest run, its last checkpoint is no peer
    shared = [c for c in runs[0]["curve"] if c["minutes"] <= end + SAME_MINUTE] or runs[0]["curve"][:1]
    aligned = [[nearest(r, c["minutes"]) for r in runs] for c in shared]  # each row: every run's nearest checkpoint
    lines = caveats(runs, aligned) + [f"run {i + 1}: {r['label']}" for i, r in enumerate(runs)]
    lines += ["", "MCTS-25 weak error (%), run 1 / run 2 / ...; steps in brackets", "",
              "| minute (steps) | " + " | ".join(SETS) + " | mean |", "|---" * (len(SETS) + 2) + "|"]
    for graded in aligned:
        steps = " / ".join(f"{g['step']:,}" for g in graded)
        lines.append(row(f"{graded[0]['minutes']} ({steps})", graded))
    if all("final_graded_at" in r for r in runs):
        finals = [final_grades(r) for r in runs]
        for g in finals[0]:
            graded = [min(f, key=lambda o: abs(o["minutes"] - g["minutes"])) for f in finals]
            if any(abs(o["minutes"] - g["minutes"]) > SAME_MINUTE for o in graded):
                continue  # a 30-minute run's final grade is no peer of another's hour
            steps = " / ".join(f"{o['step']:,}" for o in graded)
            lines.append(row(f"{g['minutes']} at {g['simulations']} simulations ({steps})", graded))
    lines.append("")
    for i, r in enumerate(runs):
        if "perfect_play" in r:
            lines.append(f"run {i + 1}: {format_result(r['perfect_play'], r['perfect_play']['simulations'])}")
        if pace := pace_summary(r):
            lines.append(f"run {i + 1}: {pace}")
    later = [g for g in aligned if g[0]["minutes"] >= FROM_MINUTE - SAME_MINUTE]  # the 30-minute checkpoint: 29.9
    for k in range(2, len(runs) + 1):
        if not later:
            lines.append(f"run 1 below run {k} from minute {FROM_MINUTE}: no checkpoint that late in both")
            continue
        below = sum(mean(g[0]) < mean(g[k - 1]) for g in later)
        bh = sum(g[0]["Begin-Hard"]["mcts_weak"] < g[k - 1]["Begin-Hard"]["mcts_weak"] for g in later)
        lines.append(f"run 1 below run {k} from minute {FROM_MINUTE}: six-set mean at {below} of {len(later)} "
                     f"checkpoints, Begin-Hard at {bh}")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.compare", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", nargs="+", type=Path, help="bench/results/bench-*.json, the arm first")
    args = ap.parse_args()
    try:
        runs = [r for path in args.results for r in training_runs(path)]
    except CompareError as exc:
        print(f"bench.compare: error: {exc}", file=sys.stderr)
        return ExitStatus.CONFIG
    print(compare(runs))
    return ExitStatus.OK


if __name__ == "__main__":
    sys.exit(main())
