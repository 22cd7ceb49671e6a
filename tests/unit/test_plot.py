"""`make plot`: a run's Pons error and Elo against minutes as an SVG (fast: a hand-made stats.jsonl)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from checkout import REPO as ROOT
from selfplay.plot import AZG_30MIN_MCTS_WEAK, PlotError, picture_path, plot
from selfplay.record_keys import EVAL_MINUTE, EVAL_STEP, eval_key
from test_readme import BENCH_RESULT

SVG = "{http://www.w3.org/2000/svg}"


def write_run(run: Path, evals: list[tuple[int, float, float]], elos: list[tuple[float, float]]) -> None:
    run.mkdir()
    lines = [{"kind": "train", "step": 0, "time": 1000.0}]
    for step, minute, error in evals:
        lines.append({"kind": "eval", "step": step, "time": 1000 + 60 * minute, EVAL_STEP: step, EVAL_MINUTE: minute,
                      **{eval_key(s, "mcts_weak"): error for s in AZG_30MIN_MCTS_WEAK}})
    for minute, elo in elos:
        lines.append({"kind": "arena", "step": 1, "time": 1000 + 60 * minute, "arena/elo": elo})
    (run / "stats.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))


def test_a_run_becomes_one_line_per_set_and_an_elo_line(tmp_path):
    write_run(tmp_path / "run", [(0, 0.0, 0.5), (700, 5.0, 0.2), (1400, 10.0, 0.1)], [(5.0, 800.0), (10.0, 950.0)])
    out = plot(tmp_path / "run")
    assert out == tmp_path / "run" / "progress.svg"
    root = ET.fromstring(out.read_text())
    lines = root.findall(f"{SVG}polyline")
    assert len(lines) == len(AZG_30MIN_MCTS_WEAK) + 1  # six sets, then the Elo
    assert all(len(line.get("points").split()) == 3 for line in lines[:-1])
    assert len(lines[-1].get("points").split()) == 2
    texts = [t.text for t in root.iter(f"{SVG}text")]
    assert "Begin-Hard" in texts and "Elo, random = 0" in texts and "minutes" in texts


def test_a_run_without_grades_is_one_line_with_the_reason(tmp_path):
    write_run(tmp_path / "run", [], [])
    with pytest.raises(PlotError, match="no evaluation and no arena record"):
        plot(tmp_path / "run")
    with pytest.raises(PlotError, match="stats.jsonl not found"):
        plot(tmp_path / "nothing")


def test_the_readme_picture_is_what_plot_draws_from_its_bench_result(tmp_path):
    """The committed SVG is regenerated, not edited: python -m selfplay plot --run bench/results/bench-X.json."""
    drawn = plot(BENCH_RESULT, tmp_path / "progress.svg").read_text()
    assert picture_path(BENCH_RESULT).read_text() == drawn
    assert picture_path(BENCH_RESULT).name in (ROOT / "README.md").read_text()
