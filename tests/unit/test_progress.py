"""The progress line says how long the run has run and has left, and whose grades it repeats (fast: no training)."""

from __future__ import annotations

import pytest
from selfplay.config import Config
from selfplay.record_keys import ELAPSED_MINUTES_KEY, EVAL_MINUTE, EVAL_STEP, REMAINING_MINUTES_KEY, eval_key
from selfplay.stats import clock, progress_line

WINDOW = {"charts/step": 1650, "selfplay/games": 12500, "charts/positions_per_s": 518.0,
          "charts/simulations_per_s": 17300.0, "learner/buffer_size": 71900, "learner/mean_reuse": 6.0,
          "charts/elapsed_minutes": 12.07, "charts/remaining_minutes": None}


@pytest.mark.parametrize("minutes, shown", [(0, "0:00:00"), (0.5, "0:00:30"), (12.07, "0:12:04"),
                                            (61.5, "1:01:30"), (-1, "0:00:00")])
def test_clock_is_hours_minutes_seconds(minutes, shown):
    assert clock(minutes) == shown


def test_without_a_budget_the_line_says_the_elapsed_time_only():
    line = progress_line(WINDOW, None)
    assert line.startswith("step 1650 | 0:12:04 elapsed | games 12.5k")
    assert "left" not in line


def test_with_a_budget_it_says_what_is_left():
    line = progress_line({**WINDOW, "charts/remaining_minutes": 17.93}, None)
    assert "| 0:12:04 elapsed, 0:17:56 left |" in line


def test_the_grades_name_the_step_and_minute_they_are_of():
    grades = {eval_key("Middle-Medium", "mcts_weak"): 0.115, eval_key("Begin-Hard", "mcts_weak"): 0.184,
              EVAL_STEP: 1372, EVAL_MINUTE: 9.9}
    assert progress_line(WINDOW, grades).endswith(
        "| eval weak err of step 1372 (minute 10): mid-med 11.5% begin-hard 18.4%")


def config(**run) -> Config:
    cfg = Config()
    for key, value in run.items():
        setattr(cfg.run, key, value)
    return cfg


@pytest.mark.parametrize("run, step, elapsed_s, steps_per_s, left", [
    ({}, 100, 600, 2.0, None),                                 # no budget: nothing is left to count down
    ({"max_minutes": 30}, 100, 600, 2.0, 20.0),
    ({"max_minutes": 30}, 100, 2400, 2.0, 0.0),                # past the budget, ending: never negative
    ({"max_steps": 400}, 100, 600, 2.0, 2.5),                   # 300 steps at 2/s
    ({"max_steps": 400}, 100, 600, 0.0, None),                  # no rate yet (the buffer still fills)
    ({"max_minutes": 30, "max_steps": 400}, 100, 600, 2.0, 2.5),  # whichever ends the run first
])
def test_the_minutes_left_come_from_the_budget_that_ends_the_run_first(run, step, elapsed_s, steps_per_s, left):
    figures = config(**run).run.clock(step, elapsed_s, steps_per_s)
    assert figures[ELAPSED_MINUTES_KEY] == pytest.approx(elapsed_s / 60)
    assert figures[REMAINING_MINUTES_KEY] == (None if left is None else pytest.approx(left))
