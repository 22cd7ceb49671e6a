"""bench.preemption refuses what it cannot measure in one line, before it asks the Docker engine for anything: a
missing checkpoint, one whose replay buffer is not full (a trial must write the full 200,000 positions), no trials."""

import subprocess
import sys
from pathlib import Path

import numpy as np
from selfplay import checkpoint
from selfplay.config import Config, LearnerConfig
from selfplay.games import make_game
from selfplay.replay import ReplayBuffer

ROOT = Path(__file__).resolve().parents[2]


def preemption(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bench.preemption", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, check=False)


def refused_in_one_line(result: subprocess.CompletedProcess, status: int, *words: str) -> None:
    assert result.returncode == status, result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""
    last = result.stderr.strip().splitlines()[-1]
    assert all(w in last for w in words), result.stderr


def test_a_missing_checkpoint_is_refused_in_one_line(tmp_path):
    refused_in_one_line(preemption("--checkpoint", str(tmp_path / "nothing-here")), 1, "not found",
                        "a run directory")


def test_a_checkpoint_whose_replay_buffer_is_not_full_is_refused_naming_what_fills_it(tmp_path):
    game = make_game("connect4")
    replay = ReplayBuffer(LearnerConfig().replay_capacity, game.state_words, game.num_actions)
    states = game.initial_states(3)
    replay.add(states, np.full((3, game.num_actions), 1 / game.num_actions, np.float32), np.zeros(3, np.float32),
               np.zeros(3, np.float32), np.zeros(3, np.int64))
    checkpoint.save(tmp_path, checkpoint.Checkpoint(step=7, config=Config().to_dict(), model={},
                                                    replay=replay.state_dict()))
    refused_in_one_line(preemption("--checkpoint", str(tmp_path)), 1,
                        f"holds 3 of {LearnerConfig().replay_capacity} positions", "trained longer")


def test_no_trials_is_a_usage_error(tmp_path):
    refused_in_one_line(preemption("--checkpoint", str(tmp_path), "--trials", "0"), 2, "--trials 0", "1 or more")
