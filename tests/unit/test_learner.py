"""The learning-rate schedule, and the network's head widths across checkpoints of either shape."""

import itertools
import math

import pytest
import torch
from selfplay.checkpoint import CheckpointError, check_compatible
from selfplay.config import Config, load, with_legacy_shape
from selfplay.distributed import DistInfo
from selfplay.games import make_game
from selfplay.hardware import Precision
from selfplay.learner import Learner, lr_factor
from selfplay.model import build_model


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


def test_heads_are_32_filters_wide_and_a_narrow_head_checkpoint_still_loads_for_grading():
    game = make_game("connect4")
    wide = build_model(game, 8, 1)
    assert wide.policy_head[0].out_channels == 32 and wide.value_head[0].out_channels == 32
    old = build_model(game, 8, 1, policy_filters=2, value_filters=1)
    graded = build_model(game, 8, 1)  # what evaluate.py and `selfplay eval` build: channels and blocks only
    graded.load_state_dict(old.state_dict())
    x = torch.randn(3, game.num_planes, *game.board_shape)
    old.eval(), graded.eval()
    for a, b in zip(old(x), graded(x)):
        assert torch.equal(a, b)


def test_resuming_a_checkpoint_from_before_the_wide_heads_is_refused_naming_the_setting():
    cfg = Config()
    saved = cfg.to_dict()
    del saved["model"]["policy_filters"], saved["model"]["value_filters"]  # as an old run saved it
    with pytest.raises(CheckpointError, match=r"trained with model\.policy_filters=2 but this run asks for "
                                              r"model\.policy_filters=32"):
        check_compatible(with_legacy_shape(saved), cfg.to_dict(), Config.SHAPE_FIELDS, "ckpt-000000001.pt")
    narrow = load(None, ["--model.policy_filters=2", "--model.value_filters=1"]).to_dict()
    check_compatible(with_legacy_shape(saved), narrow, Config.SHAPE_FIELDS, "ckpt-000000001.pt")  # resumable so
