"""The learning-rate schedule."""

import itertools
import math

import pytest
import torch
from selfplay.config import load
from selfplay.distributed import DistInfo
from selfplay.games import make_game
from selfplay.hardware import Precision
from selfplay.learner import Learner, lr_factor


def test_cosine_decays_from_the_base_rate_to_the_final_fraction_and_constant_stays():
    assert lr_factor(0.0, "cosine", 0.1) == 1.0
    assert lr_factor(0.5, "cosine", 0.1) == pytest.approx(0.55)
    assert lr_factor(1.0, "cosine", 0.1) == pytest.approx(0.1)
    assert lr_factor(3.0, "cosine", 0.1) == pytest.approx(0.1)  # past the budget (the final steps): the floor
    factors = [lr_factor(p / 10, "cosine", 0.1) for p in range(11)]
    assert all(a > b for a, b in itertools.pairwise(factors))
    assert lr_factor(0.7, "constant", 0.1) == 1.0


def test_the_learner_applies_the_schedule_only_when_the_run_has_a_budget():
    cfg = load(None, ["--model.channels=8", "--model.blocks=1", "--learner.lr=0.01"])
    learner = Learner(cfg, make_game("connect4"), Precision(torch.device("cpu"), None, False), DistInfo(), 0)
    assert learner.set_progress(None) == 0.01
    assert learner.set_progress(1.0) == pytest.approx(0.001)
    assert learner.optimizer.param_groups[0]["lr"] == pytest.approx(0.001)
    assert math.isclose(learner.set_progress(0.25), 0.01 * lr_factor(0.25, "cosine", 0.1))

