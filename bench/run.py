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

One file of ~550 lines on purpose: measure() calls each case top to bottom, as the JSON lists them.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np
import torch
from gantry.errors import GantryError
from selfplay import arena, checkpoint, evaluate, perfect_play, players, plot
from selfplay.actors import SelfPlayWorker
from selfplay.config import EvalConfig
from selfplay.config_io import load, resolve_config
from selfplay.distributed import DistInfo
from selfplay.elo import wilson
from selfplay.errors import ExitStatus
from selfplay.games import make_game
from selfplay.hardware import Precision, cpu_has_native_bf16, inference_dtype, pick_precision
from selfplay.inference import NetworkEvaluator, actor_dtype, runs_int8
from selfplay.learner import Learner
from selfplay.model import build_model, count_parameters
from selfplay.plot import AZG_30MIN_MCTS_WEAK
from selfplay.record_keys import STATS_FILE, TRAIN_KIND
from selfplay.stats import ACTOR_NET_KEY, SAMPLES_PER_POSITION_KEY, WAIT_FRACTION_KEY, read_records

from bench import per_dollar
from bench.compare import pace_summary

AZG_SIMS_PER_S = {"default-512ch": 97.0, "64ch": 1274.0}
# alpha-zero-general after 30 minutes of its own Connect Four training, MCTS-25 weak error over all 1,000 positions
# per Pons set (bench/REFERENCE.md says how each was measured), on the two CPU kinds: AZG_30MIN_MCTS_WEAK (selfplay.plot,
# whose progress pictures draw it too), side by side with Gantry on a 2-core AVX2-only EPYC (fp32), and this, side
# by side on a 2-core Intel Xeon with AMX (2026-11-26). The target (#37) is a quarter of the lower of the two.
AZG_30MIN_MCTS_WEAK_AMX_XEON = {
    "End-Easy": 0.156, "Middle-Easy": 0.180, "Middle-Medium": 0.281, "Begin-Easy": 0.132, "Begin-Medium": 0.172,
    "Begin-Hard": 0.346}
TARGET_30MIN_MCTS_WEAK = {k: min(v, AZG_30MIN_MCTS_WEAK_AMX_XEON[k]) / 4 for k, v in AZG_30MIN_MCTS_WEAK.items()}
RESULTS = Path(__file__).parent / "results"
ARENA_BASELINES = EvalConfig.arena_baselines  # the periodic arena's: fast enough to meet every checkpoint


def machine() -> dict:
    model = next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                  if ln.startswith("model name")), platform.processor())
    flags = next((ln.split(":", 1)[1].split() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                  if ln.startswith("flags")), [])
    # what decides the network's speed: fp32 on AVX2/AVX-512, bf16 only with avx512_bf16 or AMX
    vector = [f for f in flags if f in ("avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "amx_bf16", "amx_tile")]
    return {"cpu": model, "cores": os.cpu_count(), "cpu_flags": vector, "torch": torch.__version__,
            "python": platform.python_version(), "inference_dtype": str(inference_dtype()).replace("torch.", ""),
            "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None}


def selfplay_throughput(channels: int, blocks: int, games: int, sims: int, seconds: float,
                        full_fraction: float = 1.0, dtype: torch.dtype | None | str = "auto",
                        runtime: str = "auto") -> dict:
    """One actor's loop (search + play + sample bookkeeping) on one core, against its forward-only limit.

    ``full_fraction`` < 1 is playout-cap randomisation as the connect4 config sets it (fast searches at
    search.fast_simulations): fewer simulations a move, smaller batches once the fast searches are done."""
    game = make_game("connect4")
    cfg = load(None, [f"--model.channels={channels}", f"--model.blocks={blocks}", f"--actors.games={games}",
                      f"--search.simulations={sims}", f"--search.full_search_fraction={full_fraction}",
                      f"--search.fast_simulations={load(resolve_config('connect4')).search.fast_simulations}"])
    model = build_model(game, channels, blocks).eval()
    # what an actor runs: "auto" is the CPU's own choice (int8 on VNNI without AMX), explicit cases are themselves
    int8 = runtime == "int8" or (dtype == "auto" and runs_int8("auto", runtime))
    dtype = actor_dtype("auto", runtime) if dtype == "auto" else dtype
    ev = NetworkEvaluator(model, dtype, "onnxruntime" if int8 else runtime, int8=int8)
    worker = SelfPlayWorker(game, ev, cfg, np.random.default_rng(0))
    for _ in range(3):  # warm up past the first moves and oneDNN's first-call setup
        worker.step(0)
    ev.refresh(model)  # as an actor does when weights arrive: int8 quantizes here, on the positions just evaluated
    ev.seconds, ev.positions, ev.calls = 0.0, 0, 0
    moves0, sims0 = worker.moves, worker.simulations
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        worker.step(0)
    wall = time.perf_counter() - start
    # the same network and batch, forward passes only: the ceiling for simulations/s
    planes = game.encode(worker.states)
    ev_only = NetworkEvaluator(model, dtype, "onnxruntime" if int8 else runtime, int8=int8)
    for _ in range(3):
        ev_only(planes)
    ev_only.refresh(model)
    n = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < min(5.0, seconds / 2):
        ev_only(planes)
        n += 1
    forward_limit = n * len(planes) / (time.perf_counter() - t0)
    sims_per_s = (worker.simulations - sims0) / wall
    return {
        "net": f"{channels}x{blocks}", "parameters": count_parameters(model), "games_per_actor": games,
        "precision": "int8" if int8 else str(dtype or "fp32").replace("torch.", ""), "runtime": ev.runtime,
        "simulations_per_move": sims, "full_search_fraction": full_fraction, "seconds": round(wall, 1),
        "positions_per_s": (worker.moves - moves0) / wall,
        "simulations_per_s": sims_per_s,
        "network_evals_per_s": ev.positions / wall,
        "mean_batch": ev.positions / max(1, ev.calls),
        "outside_forward_share": 1 - ev.seconds / wall,
        "forward_only_evals_per_s": forward_limit,
        "sims_vs_forward_limit": sims_per_s / forward_limit,
        "vs_azg_default_512ch": sims_per_s / AZG_SIMS_PER_S["default-512ch"],
        "vs_azg_64ch": sims_per_s / AZG_SIMS_PER_S["64ch"],
    }


# What an AVX2-only CPU (no AVX-512, no bf16) runs, on this one: ATen's kernels, oneDNN's convolutions and
# MKL's GEMMs held to AVX2. An emulation (same caches, clocks and core), not a measurement on such a CPU.
AVX2_ONLY_ENV = {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2", "MKL_ENABLE_INSTRUCTIONS": "AVX2"}


# Self-play cases of a CPU without bf16: (kernels, runtime); "int8" is ONNX Runtime's int8 graph (actors.precision=int8).
# ONNX Runtime picks its kernels from CPUID and ignores AVX2_ONLY_ENV, so it is measured natively only: on an
# AVX2-only CPU those are the AVX2 rows.
FP32_CASES = (("native", "torch"), ("native", "onnxruntime"), ("native", "int8"), ("avx2", "torch"))


def fp32_isa(seconds: float, quick: bool) -> list[dict]:
    """Self-play without bf16 on one core, with this CPU's own instructions and held to AVX2, in eager torch and in
    ONNX Runtime (fp32 and int8): what an AVX2-only CPU's actors run. Each case in a fresh process (the ISA is fixed
    when torch loads), twice, interleaved; once under --quick, a smoke run of the path."""
    runs = []
    for isa, runtime in FP32_CASES * (1 if quick else 2):
        out = subprocess.run([sys.executable, "-m", "bench.run", "--fp32-case", str(seconds), "--fp32-runtime", runtime,
                              *(["--quick"] if quick else [])],
                             env={**os.environ, **(AVX2_ONLY_ENV if isa == "avx2" else {})},
                             capture_output=True, text=True, check=True)
        runs.append({"isa": isa, "case": runtime, **json.loads(out.stdout.splitlines()[-1])})
    rows = []
    for isa, runtime in FP32_CASES:
        mine = [r for r in runs if r["isa"] == isa and r["case"] == runtime]
        # the child's own figures (what it ran, ratios to alpha-zero-general included), averaged over its runs
        rows.append({"isa": isa, "runtime": mine[0]["runtime"], "precision": mine[0]["precision"],
                     "cpu_capability": mine[0]["cpu_capability"], "net": mine[0]["net"],
                     **{k: float(np.mean([r[k] for r in mine])) for k in
                        ("simulations_per_s", "forward_only_evals_per_s", "vs_azg_default_512ch", "vs_azg_64ch")}})
    return rows


def shipped_case() -> tuple[int, int, int, int, float]:
    """make train-local's self-play as connect4.yaml ships it: (channels, blocks, games, simulations, full share)."""
    cfg = load(resolve_config("connect4"))
    return (cfg.model.channels, cfg.model.blocks, cfg.actors.games, cfg.search.simulations,
            cfg.search.full_search_fraction)


def learner_throughput(channels: int, blocks: int, batch: int, seconds: float) -> dict:
    game = make_game("connect4")
    cfg = load(None, [f"--model.channels={channels}", f"--model.blocks={blocks}", f"--learner.batch_size={batch}",
                      f"--learner.min_replay={batch}"])
    precision = pick_precision(torch.device("cpu"))
    out = {"net": f"{channels}x{blocks}", "batch": batch}
    for name, p in (("auto", precision), ("fp32", Precision(torch.device("cpu"), None, False))):
        learner = Learner(cfg, game, p, DistInfo(), 0)
        rng = np.random.default_rng(0)
        states = game.initial_states(batch)  # a step costs the same whatever the positions hold
        policy = rng.dirichlet(np.ones(7), size=batch).astype(np.float32)
        b = {"states": states, "policy": policy, "z": np.zeros(batch, np.float32), "q": np.zeros(batch, np.float32)}
        learner.step(b)
        steps, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            learner.step(b)
            steps += 1
        out[f"samples_per_s_{name}"] = steps * batch / (time.perf_counter() - t0)
        out[f"precision_{name}"] = p.describe()
    return out


def timed_training(config: str, seconds: float, extra: list[str], ranks: int = 1) -> dict:
    """Train for ``seconds`` under `selfplay launch` with ``ranks`` local ranks; self-play positions/s of the whole run."""
    import re
    import socket
    import tempfile
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with tempfile.TemporaryDirectory() as run_dir:
        env = {**os.environ, "NNODES": "1", "NPROC_PER_NODE": str(ranks), "MASTER_PORT": str(port)}
        out = subprocess.run([sys.executable, "-m", "selfplay", "launch", "--config", config, f"--run.dir={run_dir}",
                              f"--run.max_minutes={seconds / 60}", "--eval.every_minutes=0", *extra], env=env,
                             capture_output=True, text=True, check=True).stdout
    done = re.findall(r"rank (\d+) finished at step (\d+).*?, (\d+) positions played here in ([\d.]+) s", out)
    wall = max(float(d[3]) for d in done)
    return {"positions_per_s": sum(int(d[2]) for d in done) / wall, "learner_steps": int(done[0][1]), "seconds": wall}


def rank_scaling(config: str, seconds: float, extra: tuple[str, ...] = ()) -> list[dict]:
    """Self-play positions/s of the whole machine with 1 and 2 local ranks (each: 1 actor + 1 learner)."""
    rows = []
    for ranks in (1, 2):
        rows.append({"ranks": ranks, **timed_training(config, seconds, ["--actors.count=1", *extra], ranks)})
        rows[-1]["speedup_vs_1_rank"] = rows[-1]["positions_per_s"] / rows[0]["positions_per_s"]
        print(f"scaling: {ranks} rank(s): {rows[-1]['positions_per_s']:.0f} positions/s, "
              f"{rows[-1]['learner_steps']} learner steps", flush=True)
    return rows


def inference_placement(config: str, seconds: float, extra: tuple[str, ...] = ()) -> list[dict]:
    """Whole-run positions/s with each actor running the net itself vs. the learner's device answering all leaves.

    On a GPU node the second is the point of leaf_server.py, for fp32 actors: where the CPU has bf16 both
    actor precisions are measured, since auto serves leaves only to fp32 ones (hardware.leaves_served_by_learner).
    On a CPU-only machine it shows what the round trips cost, since the learner's core then does every actor's
    forward passes.
    """
    device = "cuda" if torch.cuda.is_available() else "cpu"
    precisions = ["bf16", "fp32"] if device == "cuda" and cpu_has_native_bf16() else ["auto"]
    rows = []
    for precision in precisions:
        for mode in ("local", "learner"):
            rows.append({"inference": mode, "device": device, "actor_precision": precision,
                         **timed_training(config, seconds, [f"--actors.inference={mode}", f"--run.device={device}",
                                                            f"--actors.precision={precision}", *extra])})
            rows[-1]["vs_local"] = rows[-1]["positions_per_s"] / rows[-2 if mode == "learner" else -1]["positions_per_s"]
            print(f"inference {mode} ({device}, actors {precision}): {rows[-1]['positions_per_s']:.0f} positions/s, "
                  f"{rows[-1]['learner_steps']} learner steps", flush=True)
    return rows


def grade_checkpoint(path: Path, positions: int, sims: int) -> dict:
    """Pons errors of one checkpoint's playing weights, MCTS at ``sims`` (plain PUCT, visit ties broken by Q)."""
    saved = checkpoint.load(path)
    cfg = saved.config
    # the periodic evaluation's entry point: the sets are read and labelled once per process, not per checkpoint
    result = evaluate.evaluate_weights(saved.playing_weights(), cfg["model"], "", positions, sims,
                                       cfg["search"]["c_puct"])
    print(f"{path.name}: step {saved.step}\n{evaluate.format_table(result)}", flush=True)
    return {"checkpoint": path.name, "step": saved.step, "simulations": sims,
            **{k: v for k, v in result.items() if not k.startswith("_")}}


def grade_run(run_dir: Path, positions: int, sims: int, final_sims: int) -> dict:
    """Pons error of each checkpoint of a run against the minutes it had trained; the last also at ``final_sims``."""
    stats = read_records(run_dir / STATS_FILE)
    t0 = stats[0]["time"] if stats else 0
    curve = []
    paths = checkpoint.list_checkpoints(run_dir)
    for path in paths:
        row = grade_checkpoint(path, positions, sims)
        row["minutes"] = round((path.stat().st_mtime - t0) / 60, 1) if t0 else None
        curve.append(row)
    # the newest progress window in which games finished (draw rate and game length are empty in the others)
    last = next((r for r in reversed(stats) if r["kind"] == TRAIN_KIND and r.get("selfplay/game_length")), {})
    out = {"run": str(run_dir), "mcts_simulations": sims, "curve": curve,
           "periodic_eval": [r for r in stats if r["kind"] == "eval"],
           # what users of self-play trainers watch, from the run's last progress window
           "final_window": {k: last.get(k) for k in ("selfplay/games", "selfplay/positions", "selfplay/draw_rate",
                                                      "selfplay/game_length", "charts/simulations_per_s",
                                                      "charts/step", ACTOR_NET_KEY)},
           **learner_pace(stats)}
    if curve and final_sims:
        out["final_graded_at"] = grade_checkpoint(paths[-1], positions, final_sims)
        # the checkpoint nearest each whole hour before the last, at the same count (#43: AlphaZero.jl's figures in 1)
        hours = range(1, int((curve[-1]["minutes"] or 0) // 60) + 1)
        nearest = {min(range(len(curve)), key=lambda i: abs((curve[i]["minutes"] or 0) - 60 * h)) for h in hours}
        out["hourly_graded_at"] = [{**grade_checkpoint(paths[i], positions, final_sims), "minutes": curve[i]["minutes"]}
                                   for i in sorted(nearest) if i != len(curve) - 1]
        out["perfect_play"] = first_player_check(paths[-1], final_sims)
    return out


def learner_pace(stats: list[dict]) -> dict:
    """Which side held the other back over the whole run: the mean share of time the learner waited for self-play
    (one progress record every run.log_every_seconds) and the samples it trained per recorded position by the end
    (learner.samples_per_position when self-play was the one behind). An arm that buys positions or learner steps
    is read against these (bench/RESULTS.md)."""
    records = [r for r in stats if r["kind"] == TRAIN_KIND and r.get(WAIT_FRACTION_KEY) is not None]
    if not records:
        return {}
    return {"learner_wait_fraction": float(np.mean([r[WAIT_FRACTION_KEY] for r in records])),
            "samples_per_position": records[-1][SAMPLES_PER_POSITION_KEY]}


def first_player_check(path: Path, sims: int) -> dict:
    """Moving first from the empty board at ``sims`` simulations, does the last checkpoint keep the forced win
    against every best defence of the solver? (#43's perfect first-player play)"""
    saved = checkpoint.load(path)
    net = players.network_player(make_game("connect4"), saved.config, saved.playing_weights(), sims, path.name)
    result = perfect_play.check_first_player(lambda states, lines: net.choose(states, None))
    print(f"{path.name}: {perfect_play.format_result(result, sims)}", flush=True)
    return {"checkpoint": path.name, "step": saved.step, "simulations": sims, **result}


def error_table(graded_runs: list[dict]) -> list[dict]:
    """Per set: each run's MCTS weak error (one graded checkpoint a run) with its Wilson 95% interval, their mean,
    the reference and the target."""
    rows = []
    for name, azg in AZG_30MIN_MCTS_WEAK.items():
        row = {"set": name}
        errors = []
        for i, graded in enumerate(graded_runs):
            e, n = graded[name]["mcts_weak"], graded[name]["positions"]
            lo, hi = wilson(round(e * n), 0, n - round(e * n))
            row[f"run{i + 1}"] = f"{100 * e:.1f} [{100 * lo:.1f}, {100 * hi:.1f}]"
            errors.append(e)
        row["mean"] = float(np.mean(errors))
        row["azg"], row["ratio"], row["target"] = azg, row["mean"] / azg, TARGET_30MIN_MCTS_WEAK[name]
        row["met"] = max(errors) <= TARGET_30MIN_MCTS_WEAK[name]  # by every seed, not on average
        rows.append(row)
    return rows


def window_summary(window: dict) -> str:
    """A run's last progress window (grade_run's final_window) in words."""
    if window.get("selfplay/games") is None:
        return "no finished game in its progress records"
    return (f"{window['selfplay/games']:,.0f} games, {window['selfplay/positions']:,.0f} positions recorded, last "
            f"window {window['selfplay/game_length']:.1f} plies a game, {window['selfplay/draw_rate']:.1%} drawn"
            + (f", actors {window[ACTOR_NET_KEY]}" if window.get(ACTOR_NET_KEY) else ""))


def table(rows: list[dict], keys: list[str]) -> str:
    head = "| " + " | ".join(keys) + " |\n|" + "---|" * len(keys)
    body = ["| " + " | ".join(f"{r[k]:.3g}" if isinstance(r[k], float) else str(r[k]) for k in keys) + " |"
            for r in rows]
    return "\n".join([head, *body])


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

    # what the training runs' CPU is: this one, or this one held to an AVX2-only CPU's instructions and fp32
    isa_env, isa_args = (AVX2_ONLY_ENV, ["--actors.precision=fp32", "--learner.precision=fp32"]) \
        if args.avx2_only else ({}, [])
    if args.train_minutes and not run_dirs:
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
    if run_dirs:
        runs = [grade_run(d, args.positions, 25, args.final_simulations) for d in run_dirs]
        if args.arena_games:  # each run's progress in Elo against fixed baselines (#17: it should rise throughout)
            for r, d in zip(runs, run_dirs):
                ladder = arena.ladder_of_run(d, args.arena_baselines, args.arena_games, 25,
                                             arena.DEFAULT_OPENING_PLIES, seed=0)
                r["ladder"] = arena.ladder_summary(ladder)
                print(f"\nElo ladder of {d}:\n{arena.format_ladder(ladder)}", flush=True)
        report["training"] = {"runs": runs, "train_args": args.train_args,
                              "held_to_avx2_fp32": args.avx2_only and not args.from_run, "azg_30min_mcts_weak": AZG_30MIN_MCTS_WEAK,
                              "azg_30min_mcts_weak_amx_xeon": AZG_30MIN_MCTS_WEAK_AMX_XEON,
                              "target_30min_mcts_weak": TARGET_30MIN_MCTS_WEAK}
        if all(r["curve"] for r in runs):
            rows = error_table([r["curve"][-1] for r in runs])
            report["training"]["mcts25_table"] = rows
            cols = ["set", *(f"run{i + 1}" for i in range(len(runs))), "mean", "azg", "ratio", "target", "met"]
            print("\nPons MCTS-25 weak error (%, Wilson 95% over the positions) of each run's last checkpoint: "
                  + "; ".join(f"run{i + 1} {r['run']} step {r['curve'][-1]['step']}" for i, r in enumerate(runs))
                  + f". CPU flags: {' '.join(report['machine']['cpu_flags'])}"
                  + (", training held to AVX2 and fp32 (--avx2-only)" if report["training"]["held_to_avx2_fp32"] else ""))
            print(table(rows, cols))
            if all("final_graded_at" in r for r in runs):
                rows = error_table([r["final_graded_at"] for r in runs])
                report["training"][f"mcts{args.final_simulations}_table"] = rows
                print(f"\nThe same checkpoints at {args.final_simulations} simulations (AlphaZero.jl grades at 600):")
                print(table(rows, ["set", *(f"run{i + 1}" for i in range(len(runs))), "mean"]))
            for i, r in enumerate(runs):
                print(f"run{i + 1}: {window_summary(r['final_window'])}")
                if pace := pace_summary(r):
                    print(f"run{i + 1}: {pace}")
                if "perfect_play" in r:
                    print(f"run{i + 1}: {perfect_play.format_result(r['perfect_play'], args.final_simulations)}")

    out = write_new_result(f"bench-{stamp}", json.dumps(report, indent=2))
    if report.get("training", {}).get("runs", [{}])[0].get("curve"):  # make plot's picture of the first run's curve
        print(f"drew {plot.plot(out)}", flush=True)
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
    print(f"\nwrote {out}")
    if args.train_minutes and not args.from_run:  # the checkpoints of a 2-hour run are ~300 MB: say where they are
        for d in run_dirs:
            kept = len(checkpoint.list_checkpoints(d))
            size = sum(f.stat().st_size for f in d.rglob("*") if f.is_file())
            print(f"{d} keeps its {kept} checkpoint{'s' * (kept != 1)} ({size / 1e6:.0f} MB) to grade again with "
                  f"--from-run; rm -r {d} when done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
