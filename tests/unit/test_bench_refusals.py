"""The bench commands refuse what they cannot measure in one line, before anything is measured: `make bench`
(bench.run) bad seeds, a run folder that is not one, trainer flags the trainer refuses; bench.preemption a missing
checkpoint, one whose replay buffer is not full (a trial must write the full 200,000 positions), no trials. And
Ctrl-C stops `make bench` in one line too, keeping what it trained."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from checkout import REPO as ROOT
from selfplay import checkpoint
from selfplay.config import Config, LearnerConfig
from selfplay.games import make_game
from selfplay.replay import ReplayBuffer


def bench_env() -> dict[str, str]:
    paths = [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]  # bench/ from any cwd
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}


def bench(module: str, *args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", f"bench.{module}", *args], cwd=cwd, env=bench_env(),
                          capture_output=True, text=True, timeout=120, check=False)


def refused_in_one_line(result: subprocess.CompletedProcess, status: int, *words: str) -> None:
    assert result.returncode == status, result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""
    last = result.stderr.strip().splitlines()[-1]
    assert all(w in last for w in words), result.stderr


def test_a_missing_checkpoint_is_refused_in_one_line(tmp_path):
    refused_in_one_line(bench("preemption", "--checkpoint", str(tmp_path / "nothing-here")), 1, "not found",
                        "a run directory")


def test_a_checkpoint_whose_replay_buffer_is_not_full_is_refused_naming_what_fills_it(tmp_path):
    game = make_game("connect4")
    replay = ReplayBuffer(LearnerConfig().replay_capacity, game.state_words, game.num_actions)
    states = game.initial_states(3)
    replay.add(states, np.full((3, game.num_actions), 1 / game.num_actions, np.float32), np.zeros(3, np.float32),
               np.zeros(3, np.float32), np.zeros(3, np.int64))
    checkpoint.save(tmp_path, checkpoint.Checkpoint(step=7, config=Config().to_dict(), model={},
                                                    replay=replay.state_dict()))
    refused_in_one_line(bench("preemption", "--checkpoint", str(tmp_path)), 1,
                        f"holds 3 of {LearnerConfig().replay_capacity} positions", "trained longer")


def test_no_trials_is_a_usage_error(tmp_path):
    refused_in_one_line(bench("preemption", "--checkpoint", str(tmp_path), "--trials", "0"), 2, "--trials 0", "1 or more")


def test_make_bench_refuses_seeds_that_are_not_whole_numbers():
    refused_in_one_line(bench("run", "--seeds", "1337,x", "--train-minutes", "1", "--skip-throughput"), 2,
                        "--seeds", "1337,2")


def test_make_bench_refuses_a_run_folder_without_a_training_in_it(tmp_path):
    refused_in_one_line(bench("run", "--from-run", str(tmp_path), "--skip-throughput"), 2, str(tmp_path),
                        "stats.jsonl")


def test_make_bench_stops_with_the_trainers_status_when_it_refuses_the_arms_flags_and_leaves_no_empty_run(tmp_path):
    result = bench("run", "--seeds", "5", "--train-minutes", "1", "--skip-throughput",
                   "--train-args=--search.simulation=3", cwd=tmp_path)
    refused_in_one_line(result, 2, "training of seed 5 stopped (exit 2)")
    assert "unknown key search.simulation" in result.stderr  # the trainer's own line, above bench's
    assert list((tmp_path / "runs").iterdir()) == []


def test_ctrl_c_in_a_make_bench_training_stops_bench_once_the_trainer_has_checkpointed(tmp_path):
    """A terminal's Ctrl-C signals bench and the trainer alike. bench used to kill the trainer 0.25 s into its
    KeyboardInterrupt (subprocess.run), mid-checkpoint, and end in a traceback; it waits for the trainer's final
    checkpoint now, trains no further seed, writes no result and names the run to grade."""
    bench_run = subprocess.Popen([sys.executable, "-m", "bench.run", "--seeds", "5,6", "--train-minutes", "5",
                                  "--skip-throughput", "--final-simulations", "0",
                                  "--train-args=--model.channels=8 --model.blocks=1 --actors.games=8"],
                                 cwd=tmp_path, env=bench_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 120  # a guard against a hang: the trainer writes stats.jsonl in seconds
        while not list(tmp_path.glob("runs/*/stats.jsonl")) and bench_run.poll() is None:
            assert time.monotonic() < deadline, "the trainer never started its run"
            time.sleep(0.2)
        os.killpg(bench_run.pid, signal.SIGINT)  # what a terminal's Ctrl-C does: the whole foreground group
        out, err = bench_run.communicate(timeout=120)
    finally:
        if bench_run.poll() is None:
            os.killpg(bench_run.pid, signal.SIGKILL)
    assert bench_run.returncode == 130, err
    run, = (tmp_path / "runs").iterdir()
    assert run.name.endswith("seed5") and checkpoint.list_checkpoints(run), out + err  # seed 6 never started
    assert "Traceback" not in err and "wrote " not in out
    last = err.strip().splitlines()[-1]
    assert last.startswith("bench: stopped") and f"--from-run {run.relative_to(tmp_path)}" in last, err
