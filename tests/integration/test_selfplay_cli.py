"""`python -m selfplay` as a user types it (#42): `plot` (and `make plot`) on a freshly trained run, --debug on every
verb, and the dispatcher's handler out of reach of the verbs' own options."""

from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from selfplay import __main__ as dispatcher
from selfplay.cli import VERBS
from suite_make import MAKE, clean_environ


def selfplay(*args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "selfplay", *args], capture_output=True, text=True, timeout=timeout,
                          check=False)


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory) -> Path:
    """A real run: a few tic-tac-toe steps, then one cheap arena, whose Elo is what `plot` draws (tic-tac-toe has
    no Pons grades)."""
    run = tmp_path_factory.mktemp("plot") / "run"
    trained = selfplay("train", "--config", "tictactoe", f"--run.dir={run}", "--run.max_steps=4", "--actors.count=1",
                       "--eval.every_minutes=0", "--learner.min_replay=256", "--learner.window_floor=256")
    assert trained.returncode == 0, trained.stdout + trained.stderr
    arena = selfplay("arena", "--checkpoint", str(run), "--games", "2", "--simulations", "2", "--baselines", "random",
                     "--previous", "0")
    assert arena.returncode == 0, arena.stdout + arena.stderr
    return run


@pytest.mark.slow  # the fixture trains for a few seconds
def test_plot_draws_a_trained_run(trained_run):
    result = selfplay("plot", "--run", str(trained_run))
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [f"wrote {trained_run / 'progress.svg'}"]
    svg = ET.fromstring((trained_run / "progress.svg").read_text())
    assert svg.findall("{http://www.w3.org/2000/svg}polyline")  # the Elo line


@pytest.mark.slow
def test_make_plot_runs_the_same_command(trained_run):
    out = trained_run / "by-make.svg"
    made = subprocess.run([*MAKE, "plot", f"RUN_DIR={trained_run}", f"ARGS=--out {out}"],
                          capture_output=True, text=True, timeout=120, check=False, env=clean_environ())
    assert made.returncode == 0, made.stdout + made.stderr
    assert made.stdout.splitlines()[-1] == f"wrote {out}" and out.is_file()


def test_plot_of_a_folder_without_a_run_is_one_line_and_debug_shows_the_traceback(tmp_path):
    result = selfplay("plot", "--run", str(tmp_path))
    assert result.returncode == 1
    said = (f"selfplay: error: {tmp_path / 'stats.jsonl'} not found: pass a run directory (make plot "
            "RUN_DIR=runs/NAME) or a bench result")
    assert result.stderr.splitlines() == [said]
    debug = selfplay("plot", "--run", str(tmp_path), "--debug")
    assert debug.returncode == 1 and "Traceback" in debug.stderr and "PlotError" in debug.stderr


def test_a_config_verb_takes_debug_too():
    result = selfplay("check", "--config", "tictactoe", "--run.seed=-1", "--debug", timeout=60)
    assert result.returncode == 1 and "Traceback" in result.stderr
    assert result.stderr.splitlines()[-1] == "selfplay.errors.ConfigError: run.seed=-1 must be in 0..4294967295"


def test_every_verb_takes_debug_and_no_option_of_a_verb_can_take_the_dispatchers_place():
    parser = dispatcher.build_parser()
    [verbs] = [a for a in parser._actions if a.choices and set(a.choices) == {v.NAME for v in VERBS}]
    for name, sub in verbs.choices.items():
        dests = {a.dest for a in sub._actions}
        assert "debug" in dests, name
        assert not {d for d in dests if d.startswith("_")}, name  # the dispatcher's own names start with _
        args = parser.parse_known_args([name, *(["--checkpoint", "x"] if name in ("eval", "arena") else []),
                                        *(["--run", "x"] if name == "plot" else [])])[0]
        assert getattr(args, dispatcher.VERB_HANDLER) is next(v.run for v in VERBS if name == v.NAME)


def test_only_the_trainers_own_errors_are_one_line(monkeypatch):
    """A RuntimeError torch raises is a bug or a failure the trainer did not foresee: its traceback is the report."""
    from selfplay.cli import check

    def torch_fails(_args, _overrides):
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    monkeypatch.setattr(check, "run", torch_fails)
    with pytest.raises(RuntimeError, match="illegal memory access"):
        dispatcher.main(["check"])
