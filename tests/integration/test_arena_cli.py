"""`python -m selfplay arena` as a user runs it: a freshly trained tic-tac-toe run, then the one-line errors."""

import json
import subprocess
import sys

import pytest
from selfplay import checkpoint
from selfplay.__main__ import main
from selfplay.config_io import load, resolve_config
from selfplay.games import TicTacToe
from selfplay.model import build_model
from train_helpers import records

CHEAP = ["--games", "8", "--simulations", "4", "--baselines", "greedy,minimax2,mcts8"]


def selfplay(*args, timeout=240):
    return subprocess.run([sys.executable, "-m", "selfplay", *args], capture_output=True, text=True, timeout=timeout,
                          check=False)


@pytest.mark.slow
def test_arena_on_a_freshly_trained_run_prints_the_ladder_and_writes_the_record(tmp_path):
    run = tmp_path / "run"
    trained = selfplay("train", "--config", "tictactoe", f"--run.dir={run}", "--run.max_steps=12", "--actors.count=1",
                       "--eval.every_minutes=0", "--run.checkpoint_every_minutes=0.01")
    assert trained.returncode == 0, trained.stdout + trained.stderr
    newest = checkpoint.latest(run)
    step = int(checkpoint.NAME.match(newest.name)[1])
    result = selfplay("arena", "--checkpoint", str(run), "--previous", "1", "--seed", "5", *CHEAP)
    assert result.returncode == 0, result.stdout + result.stderr
    rows = {line.split()[0] for line in result.stdout.splitlines() if line.strip()}
    assert {f"step-{step}", "random", "greedy", "minimax2", "mcts8"} <= rows
    [record] = records(run, kind="arena")
    assert record["step"] == step and record["arena/random/elo"] == 0
    assert record["arena/games"] == 8 * (4 + 1)  # four baselines (random always) and one earlier checkpoint
    played = [k for k in record if k.startswith("arena/step-") and k.endswith("/wins")]
    assert len(played) == 1
    again = selfplay("arena", "--checkpoint", str(newest), "--previous", "0", "--seed", "5", *CHEAP)
    assert again.returncode == 0, again.stderr
    first, second = records(run, kind="arena")
    assert first["arena/greedy/wins"] == second["arena/greedy/wins"]  # the seed makes it reproducible
    kept = [f"step-{int(checkpoint.NAME.match(p.name)[1])}" for p in checkpoint.list_checkpoints(run)]
    ladder = selfplay("arena", "--checkpoint", str(run), "--every-checkpoint", "--json", str(tmp_path / "l.json"),
                      *CHEAP)
    assert ladder.returncode == 0, ladder.stdout + ladder.stderr
    assert [line.split(" | ")[0].strip("| ") for line in ladder.stdout.splitlines() if "| step-" in line] == kept
    summary = json.loads((tmp_path / "l.json").read_text())
    assert [c["checkpoint"] for c in summary["checkpoints"]] == kept and len(kept) >= 2
    assert all(sum(c["wdl"]["mcts8"]) == 8 for c in summary["checkpoints"]) and summary["baseline_elo"]["random"] == 0
    assert len(records(run, kind="arena")) == 2  # the ladder reports; it adds nothing to the run


@pytest.fixture
def untrained(tmp_path):
    """A real checkpoint of an untrained tic-tac-toe net: enough for the refusals."""
    cfg = load(resolve_config("tictactoe"))
    m = cfg.model
    model = build_model(TicTacToe(), m.channels, m.blocks, m.policy_filters, m.value_filters)
    checkpoint.save(tmp_path / "run", checkpoint.Checkpoint(step=3, config=cfg.to_dict(), model=model.state_dict()))
    return tmp_path / "run"


def errors(capsys) -> list[str]:
    return capsys.readouterr().err.strip().splitlines()


def test_an_unknown_baseline_is_one_line_naming_the_choices(untrained, capsys):
    assert main(["arena", "--checkpoint", str(untrained), "--baselines", "random,alphabeta3"]) == 2
    assert errors(capsys) == [("selfplay: error: --baselines: unknown baseline 'alphabeta3': choose from random, "
                              "greedy, minimax<depth> (e.g. minimax5), mcts<simulations> (e.g. mcts1000)")]
    assert not (untrained / "stats.jsonl").exists()


def test_a_missing_or_corrupt_checkpoint_is_one_line(tmp_path, capsys):
    assert main(["arena", "--checkpoint", str(tmp_path / "nowhere")]) == 1
    assert errors(capsys) == [(f"selfplay: error: checkpoint {tmp_path / 'nowhere'} not found: pass a ckpt-*.pt "
                              f"file or a run directory that holds one")]
    assert main(["arena", "--checkpoint", str(tmp_path)]) == 1
    assert errors(capsys) == [(f"selfplay: error: no checkpoint (ckpt-*.pt) in {tmp_path}: train first "
                              f"(make train-local) or pass a file")]
    (tmp_path / "ckpt-000000010.pt").write_bytes(b"not a checkpoint")
    assert main(["arena", "--checkpoint", str(tmp_path)]) == 1
    [line] = errors(capsys)
    assert line.startswith(f"selfplay: error: checkpoint {tmp_path}/ckpt-000000010.pt is corrupt")


def test_a_ladder_of_one_checkpoint_is_refused_in_one_line(untrained, capsys):
    assert main(["arena", "--checkpoint", str(untrained), "--every-checkpoint"]) == 2
    assert errors(capsys) == [(f"selfplay: error: {untrained} holds 1 checkpoint(s): a ladder needs two or more "
                              f"(train longer, or keep more with --run.keep_checkpoints)")]


def test_bad_counts_are_refused(untrained, capsys):
    assert main(["arena", "--checkpoint", str(untrained), "--games", "1"]) == 2
    [line] = errors(capsys)
    assert line.startswith("selfplay: error: --games must be >= 2")


@pytest.mark.slow
def test_periodic_arena_during_training_records_the_learners_weights(tmp_path):
    run = tmp_path / "run"
    result = selfplay("train", "--config", "tictactoe", f"--run.dir={run}", "--run.max_minutes=0.5",
                      "--actors.count=1", "--eval.arena_every_minutes=0.05", "--eval.arena_games=4",
                      "--eval.arena_baselines=greedy,minimax2", "--eval.simulations=4", "--run.log_every_seconds=2")
    assert result.returncode == 0, result.stdout + result.stderr
    ladders = records(run, kind="arena")
    assert ladders and "arena at step" in result.stdout
    assert all(r["arena/random/elo"] == 0 and r["arena/games"] >= 12 for r in ladders)
