"""Benchmarks: self-play and learner throughput per core, and Pons error against wall-clock time.

    make bench                                   # throughput (~3 min) -> bench/results/throughput-*.json
    make bench ARGS="--train-minutes 30"         # plus fixed-budget training runs (seeds 1337 and 2) graded on Pons
    make bench ARGS="--train-minutes 30 --seeds 7 --train-args='--search.full_search_fraction=1'"  # an A/B arm
    make bench ARGS="--from-run runs/a,runs/b"   # grade existing runs' checkpoints instead of training
    make bench ARGS="--from-run runs/a --arena-games 100 --skip-throughput"  # plus the run's Elo ladder
    python -m bench.compare bench/results/bench-ARM.json bench/results/bench-CONTROL.json  # an arm beside its control

Ctrl-C stops it: a training checkpoints first, and the line bench ends with names the runs to grade with --from-run.

Throughput is measured in this process on one core (torch and numpy single-threaded), with
the exact evaluator the actors use. Ratios against alpha-zero-general use its figures measured
on a 2-core machine like ours: 97 simulations/s per core with its default 512-channel net and
1,274/s with a 64-channel one (batch-1 network calls). The whole-machine pace is priced per million positions
as the C4 of as many vCPUs, beside the paces recorded for other shapes (per_dollar.py).

measure() calls each case top to bottom, as the JSON lists them: the cases are bench/cases.py's, the grading and the
tables bench/grading.py's.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch
from gantry.errors import GantryError
from selfplay import arena, checkpoint, perfect_play, plot
from selfplay.config import EvalConfig
from selfplay.errors import ExitStatus
from selfplay.plot import AZG_30MIN_MCTS_WEAK
from selfplay.record_keys import STATS_FILE

from bench import per_dollar
from bench.cases import (
    AVX2_ONLY_ENV,
    fp32_isa,
    inference_placement,
    learner_throughput,
    machine,
    rank_scaling,
    selfplay_throughput,
    shipped_case,
    timed_training,
)
from bench.compare import pace_summary
from bench.grading import (
    AZG_30MIN_MCTS_WEAK_AMX_XEON,
    TARGET_30MIN_MCTS_WEAK,
    error_table,
    grade_run,
    table,
    window_summary,
)

RESULTS = Path(__file__).parent / "results"
ARENA_BASELINES = EvalConfig.arena_baselines  # the periodic arena's: fast enough to meet every checkpoint


def claim_new(path: Path, claim) -> Path:
    """path, or path-2 and on where a bench that started the same second claimed it first: ``claim(p)`` takes p
    in one step or raises FileExistsError, so nothing is overwritten, and no run resumes another bench's run."""
    candidate, n = path, 1
    while True:
        try:
            claim(candidate)
            return candidate
        except FileExistsError:
            n += 1
            candidate = path.with_name(f"{path.stem}-{n}{path.suffix}")


def write_new_result(name: str, text: str) -> Path:
    """RESULTS/name.json, or name-2.json and on: a result is never overwritten."""
    def write(p: Path) -> None:
        with p.open("x") as f:  # exclusive: the check and the claim are one step
            f.write(text)
    return claim_new(RESULTS / f"{name}.json", write)


def new_run_dir(name: str) -> Path:
    """runs/name, created empty now: the trainer resumes a run directory that holds a checkpoint, so two benches
    started the same second with the same seed would otherwise train one run between them."""
    return claim_new(Path("runs") / name, lambda p: p.mkdir(parents=True))


def seed_list(text: str) -> list[int]:
    """--seeds: whole numbers, comma-separated."""
    try:
        return [int(x) for x in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: pass whole numbers separated by commas, e.g. 1337,2") from None


def train_seed(cmd: list[str], env: dict[str, str]) -> tuple[int, bool]:
    """One seed's training; its exit status and whether the user stopped it. Ctrl-C (or SIGTERM) is passed to the
    trainer, which checkpoints and exits 0, and bench waits for that checkpoint: subprocess.run would kill the
    trainer 0.25 s into the KeyboardInterrupt, mid-write, and bench would go on as if the run had finished."""
    stopped: list[int] = []
    with subprocess.Popen(cmd, env=env) as trainer:
        def forward(signum, _frame):  # a terminal's Ctrl-C reaches the trainer too: twice is the same stop
            stopped.append(signum)
            trainer.send_signal(signum)

        previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            code = trainer.wait()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
    return code, bool(stopped)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=20, help="measuring time per throughput case")
    ap.add_argument("--train-minutes", type=float, default=0, help="also train Connect Four this long, then grade")
    ap.add_argument("--seeds", type=seed_list, default="1337,2", help="one training run per seed (--train-minutes), one after the other")
    ap.add_argument("--train-args", default="", help="extra trainer flags for the training runs (an A/B arm); write --train-args='--a=1 --b=2'")
    ap.add_argument("--from-run", default="", help="grade these runs' checkpoints (comma-separated) instead of training")
    ap.add_argument("--positions", type=int, default=1000, help="Pons positions per set when grading")
    ap.add_argument("--final-simulations", type=int, default=600,
                    help="also grade each run's last checkpoint and the one nearest each whole hour at this many "
                         "simulations (AlphaZero.jl's), and walk the last one's first-player play against every best "
                         "defence; 0 skips")
    ap.add_argument("--skip-throughput", action="store_true", help="only the training runs and their grading")
    ap.add_argument("--scaling-seconds", type=float, default=60, help="per case of the 1-vs-2-rank run; 0 skips")
    ap.add_argument("--placement-seconds", type=float, default=60,
                    help="per case of the local-vs-learner inference run; 0 skips")
    ap.add_argument("--arena-games", type=int, default=0,
                    help="also play each run's checkpoints against --arena-baselines and each other, this many games "
                         "a pairing, and fit one Elo ladder (0 = skip)")
    ap.add_argument("--arena-baselines", default=ARENA_BASELINES, help=f"the ladder's baselines ({ARENA_BASELINES})")
    ap.add_argument("--quick", action="store_true", help="tiny budgets (tests)")
    ap.add_argument("--avx2-only", action="store_true",
                    help="train as an AVX2-only CPU would: fp32 learner and actors, torch held to AVX2 (an emulation "
                         "on a CPU with AVX-512 or bf16; the JSON says so)")
    ap.add_argument("--fp32-case", type=float, default=0, help=argparse.SUPPRESS)  # fp32_isa's child process
    ap.add_argument("--fp32-runtime", default="torch", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.train_minutes < 0:
        ap.error(f"--train-minutes {args.train_minutes:g}: pass 0 (no training) or more")
    run_dirs = [Path(r) for r in args.from_run.split(",") if r]
    for d in run_dirs:  # refused now, not after the throughput cases
        if not (d / STATS_FILE).is_file():
            ap.error(f"--from-run {d}: no {STATS_FILE} there; pass the run folders a training left (runs/bench-*)")
    if args.fp32_case:  # fp32_isa's child: one case, its line of JSON
        torch.set_num_threads(1)
        ch, bl, games = (8, 1, 16) if args.quick else shipped_case()[:3]
        r = selfplay_throughput(ch, bl, games, 8 if args.quick else 64, args.fp32_case, 1.0, None, args.fp32_runtime)
        print(json.dumps({**r, "cpu_capability": torch.backends.cpu.get_cpu_capability()}))
        return 0
    try:
        return measure(args, run_dirs)
    except KeyboardInterrupt:  # Ctrl-C anywhere; in a training, once the trainer has checkpointed (train_seed)
        kept = ",".join(str(d) for d in run_dirs)
        print("bench: stopped; no result written"
              + (f"; grade the runs with --from-run {kept}" if kept else ""), file=sys.stderr)
        return ExitStatus.INTERRUPTED


def measure(args: argparse.Namespace, run_dirs: list[Path]) -> int:
    """Each case the flags ask for, top to bottom; ``run_dirs`` grows with each training (main names them on Ctrl-C)."""
    torch.set_num_threads(1)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    RESULTS.mkdir(parents=True, exist_ok=True)
    report: dict = {"machine": machine(), "when": stamp}
    measure_throughput(args, report)
    measure_timed_runs(args, report)
    if args.train_minutes and not run_dirs:
        code = train_seeds(args, stamp, run_dirs)
        if code:
            return code
    if run_dirs:
        report["training"] = grade_runs(args, run_dirs, report["machine"])
    out = write_new_result(f"bench-{stamp}", json.dumps(report, indent=2))
    if report.get("training", {}).get("runs", [{}])[0].get("curve"):  # make plot's picture of the first run's curve
        print(f"drew {plot.plot(out)}", flush=True)
    print_tables(report)
    print(f"\nwrote {out}")
    if args.train_minutes and not args.from_run:  # the checkpoints of a 2-hour run are ~300 MB: say where they are
        for d in run_dirs:
            kept = len(checkpoint.list_checkpoints(d))
            size = sum(f.stat().st_size for f in d.rglob("*") if f.is_file())
            print(f"{d} keeps its {kept} checkpoint{'s' * (kept != 1)} ({size / 1e6:.0f} MB) to grade again with "
                  f"--from-run; rm -r {d} when done")
    return 0


def measure_throughput(args: argparse.Namespace, report: dict) -> None:
    """Self-play, its fp32 ISA variants and the learner, each alone for a few seconds: report's selfplay, fp32_isa,
    learner."""
    shipped = shipped_case()
    # make train-local's own case first, then the widths and batches it was chosen against
    cases = [shipped, *(c for c in [(32, 4, 128, 64, 1.0), (32, 4, 128, 64, 0.25), (32, 4, 64, 64, 1.0),
                                    (64, 4, 128, 64, 1.0), (64, 4, 64, 64, 1.0)] if c != shipped)]
    if args.quick:
        cases = [(8, 1, 16, 8, 0.25)]
    if args.skip_throughput:
        cases, args.scaling_seconds, args.placement_seconds = [], 0, 0
    report["selfplay"] = []
    for ch, bl, games, sims, full in cases:
        r = selfplay_throughput(ch, bl, games, sims, 2 if args.quick else args.seconds, full)
        report["selfplay"].append(r)
        print(f"self-play {r['net']} x{games} games, full searches {full:.0%}: {r['simulations_per_s']:.0f} sims/s "
              f"({r['vs_azg_default_512ch']:.1f}x azg-512ch, {r['vs_azg_64ch']:.1f}x azg-64ch), "
              f"{100 * r['outside_forward_share']:.0f}% outside forward", flush=True)
    report["fp32_isa"] = [] if args.skip_throughput else fp32_isa(2 if args.quick else args.seconds / 2, args.quick)
    for r in report["fp32_isa"]:
        print(f"{r['precision']} self-play {r['net']}, {r['isa']} ({r['cpu_capability']}), {r['runtime']}: "
              f"{r['simulations_per_s']:.0f} sims/s "
              f"({r['vs_azg_default_512ch']:.1f}x azg-512ch)", flush=True)
    report["learner"] = [] if args.skip_throughput else [
        learner_throughput(ch, bl, 256 if not args.quick else 32, 2 if args.quick else 10)
        for ch, bl in ([(8, 1)] if args.quick else [shipped[:2], *(n for n in [(32, 4), (64, 4)] if n != shipped[:2])])]
    for r in report["learner"]:
        print(f"learner {r['net']}: {r['samples_per_s_auto']:.0f} samples/s ({r['precision_auto']}), "
              f"{r['samples_per_s_fp32']:.0f} fp32", flush=True)


def measure_timed_runs(args: argparse.Namespace, report: dict) -> None:
    """Short trainings: rank scaling, the default pace (priced per million positions), inference placement."""
    # --quick is a smoke run of every path on a machine busy with make test's other workers: each timed run ends
    # at its third learner step, so it has played positions whatever the load, with 120 s as a bound. A window of
    # 10 s played none twice in CI (2026-11-27) when the actors' start took all of it: 0 positions/s, then a
    # division by zero.
    timed_config = "tictactoe" if args.quick else "connect4"
    quick_run = ("--run.max_steps=3", "--learner.min_replay=64", "--learner.batch_size=32") if args.quick else ()
    scaling_s, placement_s = (120, 120) if args.quick else (args.scaling_seconds, args.placement_seconds)
    if args.scaling_seconds:
        report["scaling"] = rank_scaling(timed_config, scaling_s, quick_run)
        # make train-local's own config (actors.count=0), priced per million positions
        report["default_pace"] = timed_training(timed_config, scaling_s, list(quick_run))
        try:
            report["per_dollar"] = per_dollar.table_rows(per_dollar.this_machine(
                report["default_pace"]["positions_per_s"], os.cpu_count() or 1, report["machine"]["cpu"]))
        except (ImportError, GantryError) as exc:  # prices need infra/'s settings, read through Terraform
            print(f"no $ per million positions: {exc} (make install-dev installs what reading infra/ needs)")
    if args.placement_seconds:
        report["inference_placement"] = inference_placement(timed_config, placement_s, quick_run)


def train_seeds(args: argparse.Namespace, stamp: str, run_dirs: list[Path]) -> int:
    """The timed trainings, one a seed, each in a new run folder appended to ``run_dirs``; the exit code of the
    first that failed (its own line said why), else 0. Ctrl-C: KeyboardInterrupt once the trainer has checkpointed."""
    # what the training runs' CPU is: this one, or this one held to an AVX2-only CPU's instructions and fp32
    isa_env, isa_args = (AVX2_ONLY_ENV, ["--actors.precision=fp32", "--learner.precision=fp32"]) \
        if args.avx2_only else ({}, [])
    for seed in args.seeds:
        run_dirs.append(new_run_dir(f"bench-{stamp}-seed{seed}"))
        code, stopped = train_seed([sys.executable, "-m", "selfplay", "train", "--config", "connect4",
                                    f"--run.dir={run_dirs[-1]}", f"--run.seed={seed}",
                                    f"--run.max_minutes={args.train_minutes}", "--run.checkpoint_every_minutes=5",
                                    "--run.keep_checkpoints=100",  # the ladder's rungs
                                    *isa_args, *args.train_args.split()], {**os.environ, **isa_env})
        wrote = any(run_dirs[-1].iterdir())
        if (stopped or code) and not wrote:
            run_dirs.pop().rmdir()  # stopped or refused before it wrote anything
        if stopped:  # checkpointed as it stopped: gradable like the finished runs, which main names
            raise KeyboardInterrupt
        if code:  # the trainer said why in its own line above; nothing it wrote is removed
            failed_run = run_dirs.pop() if wrote else None
            done = ",".join(str(d) for d in run_dirs)
            print(f"bench: the training of seed {seed} stopped (exit {code})"
                  + (f"; {failed_run} keeps what it wrote" if failed_run else "")
                  + (f"; grade the finished runs with --from-run {done}" if done else ""), file=sys.stderr)
            return code
    return 0


def grade_runs(args: argparse.Namespace, run_dirs: list[Path], machine_info: dict) -> dict:
    """Each run graded on the Pons sets (its curve, the last checkpoint at --final-simulations, its Elo ladder),
    the tables printed: the report's training section."""
    runs = [grade_run(d, args.positions, 25, args.final_simulations) for d in run_dirs]
    if args.arena_games:  # each run's progress in Elo against fixed baselines (#17: it should rise throughout)
        for r, d in zip(runs, run_dirs):
            ladder = arena.ladder_of_run(d, args.arena_baselines, args.arena_games, 25,
                                         arena.DEFAULT_OPENING_PLIES, seed=0)
            r["ladder"] = arena.ladder_summary(ladder)
            print(f"\nElo ladder of {d}:\n{arena.format_ladder(ladder)}", flush=True)
    training = {"runs": runs, "train_args": args.train_args,
                "held_to_avx2_fp32": args.avx2_only and not args.from_run, "azg_30min_mcts_weak": AZG_30MIN_MCTS_WEAK,
                "azg_30min_mcts_weak_amx_xeon": AZG_30MIN_MCTS_WEAK_AMX_XEON,
                "target_30min_mcts_weak": TARGET_30MIN_MCTS_WEAK}
    if not all(r["curve"] for r in runs):
        return training
    rows = error_table([r["curve"][-1] for r in runs])
    training["mcts25_table"] = rows
    cols = ["set", *(f"run{i + 1}" for i in range(len(runs))), "mean", "azg", "ratio", "target", "met"]
    print("\nPons MCTS-25 weak error (%, Wilson 95% over the positions) of each run's last checkpoint: "
          + "; ".join(f"run{i + 1} {r['run']} step {r['curve'][-1]['step']}" for i, r in enumerate(runs))
          + f". CPU flags: {' '.join(machine_info['cpu_flags'])}"
          + (", training held to AVX2 and fp32 (--avx2-only)" if training["held_to_avx2_fp32"] else ""))
    print(table(rows, cols))
    if all("final_graded_at" in r for r in runs):
        rows = error_table([r["final_graded_at"] for r in runs])
        training[f"mcts{args.final_simulations}_table"] = rows
        print(f"\nThe same checkpoints at {args.final_simulations} simulations (AlphaZero.jl grades at 600):")
        print(table(rows, ["set", *(f"run{i + 1}" for i in range(len(runs))), "mean"]))
    for i, r in enumerate(runs):
        print(f"run{i + 1}: {window_summary(r['final_window'])}")
        if pace := pace_summary(r):
            print(f"run{i + 1}: {pace}")
        if "perfect_play" in r:
            print(f"run{i + 1}: {perfect_play.format_result(r['perfect_play'], args.final_simulations)}")
    return training


def print_tables(report: dict) -> None:
    """The throughput, scaling, placement and price tables of the report, each where it was measured."""
    if report["selfplay"]:
        print("\n" + table(report["selfplay"], ["net", "runtime", "games_per_actor", "full_search_fraction",
                                                "simulations_per_s",
                                                "network_evals_per_s",
                                                "positions_per_s", "mean_batch", "outside_forward_share",
                                                "forward_only_evals_per_s", "vs_azg_default_512ch", "vs_azg_64ch"]))
    if report["fp32_isa"]:
        print("\n" + table(report["fp32_isa"], ["isa", "runtime", "precision", "cpu_capability", "net",
                                                 "simulations_per_s",
                                                 "forward_only_evals_per_s", "vs_azg_default_512ch", "vs_azg_64ch"]))
    if report["learner"]:
        print("\n" + table(report["learner"], ["net", "batch", "samples_per_s_auto", "precision_auto",
                                               "samples_per_s_fp32"]))
    if "scaling" in report:
        print("\n" + table(report["scaling"], ["ranks", "positions_per_s", "learner_steps", "speedup_vs_1_rank"]))
    if "inference_placement" in report:
        print("\n" + table(report["inference_placement"], ["inference", "device", "actor_precision", "positions_per_s",
                                                             "learner_steps", "vs_local"]))
    if "per_dollar" in report:
        print("\nWhat a million self-play positions cost (list prices; `make status` measures it on your node):")
        print(table(report["per_dollar"], ["shape", "gpu", "positions_per_s", "on_demand_per_million_positions",
                                           "spot_per_million_positions", "basis"]))

if __name__ == "__main__":
    sys.exit(main())
