"""`make bench` end to end on tiny budgets: it measures and writes the JSON the README's table comes from."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from checkout import REPO as ROOT
from selfplay import checkpoint
from selfplay.config_io import load, resolve_config
from selfplay.record_keys import ACTOR_NET_KEY

from bench.compare import pace_summary
from bench.grading import window_summary

pytestmark = pytest.mark.slow


def test_quick_bench_writes_throughput_json():
    before = set((ROOT / "bench/results").glob("bench-*.json"))
    result = subprocess.run([sys.executable, "-m", "bench.run", "--quick"], cwd=ROOT, capture_output=True,
                            text=True, timeout=600, check=False)
    assert result.returncode == 0, result.stderr
    new = set((ROOT / "bench/results").glob("bench-*.json")) - before
    assert len(new) == 1
    path = new.pop()
    try:
        report = json.loads(path.read_text())
        sp = report["selfplay"][0]
        assert sp["simulations_per_s"] > 0 and 0 <= sp["outside_forward_share"] <= 1
        assert sp["mean_batch"] > 1  # leaves of many games share one forward pass
        assert report["learner"][0]["samples_per_s_auto"] > 0
        # fp32 self-play natively in torch and ONNX Runtime, int8 in ONNX Runtime, and torch held to AVX2: the env
        # really reaches torch in the child process, and each child ran the runtime and precision it was asked for
        isa = report["fp32_isa"]
        assert [(r["isa"], r["runtime"], r["precision"]) for r in isa] == [
            ("native", "torch", "fp32"), ("native", "onnxruntime", "fp32"), ("native", "onnxruntime", "int8"),
            ("avx2", "torch", "fp32")]
        assert isa[3]["cpu_capability"] == "AVX2"
        assert all(r["simulations_per_s"] > 0 and r["vs_azg_default_512ch"] > 0 for r in isa)
        assert [r["ranks"] for r in report["scaling"]] == [1, 2] and report["scaling"][1]["positions_per_s"] > 0
        # this machine's pace priced as the C4 of as many vCPUs, beside the recorded paces of the other shapes
        priced = report["per_dollar"]
        assert [r["shape"] for r in priced] == [f"c4-highcpu-{os.cpu_count()}", "c4-highcpu-8", "c4-highcpu-16",
                                                "n1-standard-8"]
        assert priced[0]["positions_per_s"] == report["default_pace"]["positions_per_s"] > 0
        assert all(0 < r["spot_per_million_positions"] < r["on_demand_per_million_positions"] for r in priced)
        placement = report["inference_placement"]
        assert [r["inference"] for r in placement] == ["local", "learner"]
        assert all(r["positions_per_s"] > 0 and r["learner_steps"] > 0 for r in placement)
    finally:
        path.unlink()


def test_bench_grades_each_seeds_run_with_intervals_and_at_the_final_simulations(tmp_path):
    """`--from-run a,b`: one table row per set with each run's error and Wilson interval, the mean, the target;
    the last checkpoint of each run graded again at --final-simulations; the JSON holds both tables."""
    runs, printed = [], {}  # each run's trainer output, its first line naming what runs the actors
    for seed in (1, 2):
        run = tmp_path / f"seed{seed}"
        for steps in (3, 6):  # trained, then resumed: two checkpoints, the ladder's two rungs, whatever the load
            trained = subprocess.run(
                [sys.executable, "-m", "selfplay", "train", "--config", "connect4", f"--run.dir={run}",
                 f"--run.seed={seed}", "--model.channels=8", "--model.blocks=1", "--actors.games=16",
                 "--search.simulations=8", "--learner.batch_size=32", "--learner.min_replay=64",
                 f"--run.max_steps={steps}", "--actors.count=1", "--eval.every_minutes=0", "--run.log_every_seconds=1"],
                cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
            assert trained.returncode == 0, trained.stderr
        runs.append(str(run))
        printed[str(run)] = trained.stdout
    before = set((ROOT / "bench/results").glob("bench-*.json"))
    result = subprocess.run([sys.executable, "-m", "bench.run", "--skip-throughput", "--from-run", ",".join(runs),
                             "--positions", "12", "--final-simulations", "30", "--arena-games", "4",
                             "--arena-baselines", "greedy"],
                            cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)
    assert result.returncode == 0, result.stderr
    path = (set((ROOT / "bench/results").glob("bench-*.json")) - before).pop()
    picture = path.with_name(path.name.replace("bench-", "progress-")).with_suffix(".svg")
    try:
        training = json.loads(path.read_text())["training"]
        # make plot's picture of the first run, beside the JSON: error against minutes with the reference lines
        assert f"drew {picture}" in result.stdout and "<polyline" in picture.read_text()
    finally:
        path.unlink()
        picture.unlink(missing_ok=True)
    rows = training["mcts25_table"]
    assert [r["set"] for r in rows] == ["End-Easy", "Middle-Easy", "Middle-Medium", "Begin-Easy", "Begin-Medium",
                                        "Begin-Hard"]
    for run, column in zip(training["runs"], ("run1", "run2")):
        last = run["curve"][-1]
        assert last["checkpoint"] == sorted(p.name for p in Path(run["run"]).glob("ckpt-*.pt"))[-1]
        assert run["final_graded_at"]["checkpoint"] == last["checkpoint"]
        assert run["final_graded_at"]["simulations"] == 30
        # the first-player walk of the last checkpoint: a few steps' net gives up the win somewhere, and says where
        walk = run["perfect_play"]
        assert walk["checkpoint"] == last["checkpoint"] and walk["simulations"] == 30
        assert 0 <= walk["wins"] <= walk["lines"] and walk["perfect"] == (walk["first_loss"] is None)
        assert walk["stopped_at_ply"] == (None if walk["perfect"] else len(walk["first_loss"]))
        assert run["hourly_graded_at"] == []  # minutes old, so no whole hour to grade
        for row in rows:
            error = last[row["set"]]["mcts_weak"]
            shown, interval = row[column].split(" ", 1)
            low, high = (float(x) for x in interval.strip("[]").split(", "))
            assert float(shown) == round(100 * error, 1) and low <= 100 * error <= high
        assert run["final_window"]["selfplay/games"] > 0
        # what ran the actors' net, in the words of the trainer's first line (int8, bf16 or fp32: the CPU's choice)
        assert f"actors {run['final_window'][ACTOR_NET_KEY]}, learner" in printed[run["run"]]
        # who held whom back: the learner waited at least while the buffer filled, and never passed its pacing cap
        assert 0 < run["learner_wait_fraction"] <= 1
        assert 0 < run["samples_per_position"] <= load(resolve_config("connect4")).learner.samples_per_position
        assert f"run{column[-1]}: {pace_summary(run)}" in result.stdout
        # the Elo ladder: every checkpoint the run kept, each against the baselines (random joins as the anchor)
        ladder = run["ladder"]
        assert [c["checkpoint"] for c in ladder["checkpoints"]] == [f"step-{r['step']}" for r in run["curve"]]
        assert all(set(c["wdl"]) == {"random", "greedy"} for c in ladder["checkpoints"])
        assert ladder["baseline_elo"]["random"] == 0 and "Elo ladder of" in result.stdout
    assert len(training["mcts30_table"]) == 6
    assert "run1" in result.stdout and "at 30 simulations" in result.stdout
    assert "run2: perfect first-player play at 30 simulations:" in result.stdout
    assert f"run1: {window_summary(training['runs'][0]['final_window'])}" in result.stdout  # games, not 1234.0 games
    assert "rm -r" not in result.stdout  # the user's own runs: bench did not train them, so says nothing of them


def test_avx2_only_training_runs_fp32_on_avx2_kernels(tmp_path):
    """`--avx2-only`: the training run's torch is held to AVX2 and both learner and actors run fp32, as on an
    AVX2-only CPU; the JSON says the figures are that emulation."""
    before = set((ROOT / "bench/results").iterdir())
    runs_before = set((ROOT / "runs").glob("bench-*"))
    result = subprocess.run(
        [sys.executable, "-m", "bench.run", "--skip-throughput", "--avx2-only", "--train-minutes", "0.3",
         "--seeds", "5", "--positions", "4", "--final-simulations", "4",
         ("--train-args=--model.channels=8 --model.blocks=1 --actors.games=16 --search.simulations=8 "
          "--learner.batch_size=32 --learner.min_replay=64 --run.max_steps=3 --actors.count=1 "
          "--eval.every_minutes=0")],
        cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)
    try:
        assert result.returncode == 0, result.stderr
        out = result.stdout + result.stderr
        assert "learner cpu/fp32 (cpu kernels AVX2)" in out, out[-3000:]
        assert "training held to AVX2 and fp32 (--avx2-only)" in out
        path = next(p for p in set((ROOT / "bench/results").iterdir()) - before if p.suffix == ".json")
        training = json.loads(path.read_text())["training"]
        assert training["held_to_avx2_fp32"] is True and len(training["runs"]) == 1
        run, = set((ROOT / "runs").glob("bench-*")) - runs_before  # where the checkpoints stay, and how to free them
        kept = len(checkpoint.list_checkpoints(run))
        assert f"runs/{run.name} keeps its {kept} checkpoint" in result.stdout
        assert f"--from-run; rm -r runs/{run.name} when done" in result.stdout
    finally:
        for written in set((ROOT / "bench/results").iterdir()) - before:  # the JSON and its picture
            written.unlink()
        for run in set((ROOT / "runs").glob("bench-*")) - runs_before:
            shutil.rmtree(run)
