"""The learning-rate schedule, and the network's head widths and input planes across checkpoints of either shape."""

import itertools
import math

import numpy as np
import pytest
import torch
from selfplay.checkpoint import Checkpoint, CheckpointError, check_compatible
from selfplay.config import Config
from selfplay.config_io import load, with_legacy_shape
from selfplay.distributed import DistInfo
from selfplay.games import make_game
from selfplay.hardware import Precision
from selfplay.learner import Learner, lr_factor, warmup_factor
from selfplay.model import PolicyValueNet, build_model, value_units_firing


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
    after_warmup = cfg.learner.warmup_steps
    assert learner.set_progress(None, after_warmup) == 0.01
    assert learner.set_progress(1.0, after_warmup) == pytest.approx(0.001)
    assert learner.optimizer.param_groups[0]["lr"] == pytest.approx(0.001)
    assert math.isclose(learner.set_progress(0.25, after_warmup), 0.01 * lr_factor(0.25, "cosine", 0.1))


def test_the_rate_ramps_up_linearly_over_the_warmup_steps_with_or_without_a_budget():
    cfg = load(None, ["--model.channels=8", "--model.blocks=1", "--learner.lr=0.01", "--learner.warmup_steps=100"])
    learner = Learner(cfg, make_game("connect4"), Precision(torch.device("cpu"), None, False), DistInfo(), 0)
    assert learner.set_progress(None, 0) == pytest.approx(0.0001)
    assert learner.set_progress(None, 49) == pytest.approx(0.005)
    assert learner.set_progress(None, 99) == pytest.approx(0.01)
    assert learner.set_progress(0.5, 49) == pytest.approx(0.01 * 0.5 * lr_factor(0.5, "cosine", 0.1))
    assert [warmup_factor(step, 0) for step in (0, 5)] == [1.0, 1.0]  # 0: no warm-up
    with pytest.raises(ValueError, match=r"learner\.warmup_steps=-1 must be in 0\.\.1000000"):
        load(None, ["--learner.warmup_steps=-1"])


def test_heads_are_32_filters_wide_and_a_narrow_head_checkpoint_still_loads_for_grading():
    game = make_game("connect4")
    wide = build_model(game, 8, 1)
    assert wide.policy_head[0].out_channels == 32 and wide.value_head[0].out_channels == 32
    old = build_model(game, 8, 1, policy_filters=2, value_filters=1)
    graded = build_model(game, 8, 1).eval()  # what evaluate.py and `selfplay eval` build: channels and blocks only
    graded.load_state_dict(old.state_dict())
    assert not graded.policy_head.training and not graded.value_head.training  # rebuilt heads keep the net's mode
    x = torch.randn(3, game.num_planes, *game.board_shape)
    old.eval()
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


def _batch(game, n=32, seed=0):
    rng = np.random.default_rng(seed)
    states = game.initial_states(n)
    for _ in range(6):  # a few random plies so the batch is not one position
        legal = game.legal_mask(states)
        states = game.play(states, np.where(legal, rng.random(legal.shape), -1).argmax(axis=1)).states
    return {"states": states, "policy": rng.dirichlet(np.ones(7), n).astype(np.float32),
            "z": rng.choice([-1.0, 1.0], n).astype(np.float32), "q": np.zeros(n, np.float32)}


def test_a_checkpoint_from_before_the_threat_planes_plays_the_same_and_trains_on():
    game = make_game("connect4")
    cfg = load(None, ["--model.channels=8", "--model.blocks=1"])
    h, w = game.board_shape
    old = PolicyValueNet(2, h, w, game.num_actions, 8, 1)  # the stone planes alone, as saved before
    optimizer = torch.optim.AdamW(old.parameters())
    x = torch.from_numpy(game.encode(_batch(game)["states"]))
    old(x[:, :2])[1].sum().backward()
    optimizer.step()
    old.eval()

    graded = build_model(game, 8, 1).eval()  # what grading builds, now with every input plane
    graded.load_state_dict(old.state_dict())
    with torch.no_grad():
        for a, b in zip(old(x[:, :2]), graded(x)):
            assert torch.allclose(a, b, atol=1e-6)  # the added planes start with zero weight: the same function

    learner = Learner(cfg, game, Precision(torch.device("cpu"), None, False), DistInfo(), 0)
    learner.load_state_dict({"model": old.state_dict(), "optimizer": optimizer.state_dict()})
    learner.step(_batch(game, seed=1))  # Adam's moments were widened with the weight, so the step runs
    stem = learner.model.stem[0].weight
    assert stem.shape[1] == game.num_planes and stem[:, 2:].abs().sum() > 0  # and the new planes now learn


def test_the_moving_average_lags_the_weights_and_is_what_a_checkpoint_plays():
    game = make_game("connect4")
    cfg = load(None, ["--model.channels=8", "--model.blocks=1", "--learner.ema_half_life_steps=4"])
    learner = Learner(cfg, game, Precision(torch.device("cpu"), None, False), DistInfo(), 0)
    start = {k: v.clone() for k, v in learner.model.state_dict().items()}
    for step in range(12):
        learner.step(_batch(game, seed=step))
    raw, avg = learner.model.state_dict(), learner.playing_model().state_dict()
    w = "stem.0.weight"
    moved, lagged = (raw[w] - start[w]).norm(), (avg[w] - start[w]).norm()
    assert 0 < lagged < moved                         # between the start and the newest weights
    assert not torch.equal(avg["stem.1.running_mean"], raw["stem.1.running_mean"])  # BatchNorm averaged too
    saved = Checkpoint(step=12, config=cfg.to_dict(), **learner.state_dict())
    assert saved.playing_weights() is saved.ema
    assert Checkpoint(step=12, config=cfg.to_dict(), model=saved.model).playing_weights() is saved.model

    resumed = Learner(cfg, game, Precision(torch.device("cpu"), None, False), DistInfo(), 0)
    resumed.load_state_dict(saved.learner_state())
    assert all(torch.equal(a, b) for a, b in zip(resumed.playing_model().state_dict().values(), avg.values()))
    resumed.step(_batch(game, seed=99))               # averages on from the saved average, not a fresh copy
    after = resumed.playing_model().state_dict()[w]
    assert 0 < (after - avg[w]).norm() < (resumed.model.state_dict()[w] - avg[w]).norm()


def test_a_resumed_run_decays_its_weights_as_its_own_config_says_and_keeps_the_saved_moments():
    # connect4.yaml's decay went 1e-4 -> 0.02: a run saved before must not go on at 1e-4 under the new config
    game = make_game("connect4")
    small = ["--model.channels=8", "--model.blocks=1"]
    saved_run = Learner(load(None, [*small, "--learner.weight_decay=0.0001"]), game,
                        Precision(torch.device("cpu"), None, False), DistInfo(), 0)
    saved_run.step(_batch(game))
    resumed = Learner(load(None, [*small, "--learner.weight_decay=0.02"]), game,
                      Precision(torch.device("cpu"), None, False), DistInfo(), 0)
    resumed.load_state_dict(saved_run.state_dict())
    assert [g["weight_decay"] for g in resumed.optimizer.param_groups] == [0.02]
    stem = resumed.model.stem[0].weight
    assert torch.equal(resumed.optimizer.state[stem]["exp_avg"],
                       saved_run.optimizer.state[saved_run.model.stem[0].weight]["exp_avg"])


def test_no_average_plays_the_raw_weights():
    cfg = load(None, ["--model.channels=8", "--model.blocks=1", "--learner.ema_half_life_steps=0"])
    learner = Learner(cfg, make_game("connect4"), Precision(torch.device("cpu"), None, False), DistInfo(), 0)
    assert learner.playing_model() is learner.model and "ema" not in learner.state_dict()


def test_a_dead_value_head_is_measured_as_no_unit_firing_and_then_values_every_position_alike():
    game = make_game("connect4")
    model = build_model(game, 8, 1).eval()
    positions = torch.from_numpy(game.encode(game.states_from_moves([[], [3], [3, 3], [0, 1, 2, 3, 4]])))
    assert value_units_firing(model, positions) > 0.5  # a fresh net: most hidden units fire somewhere
    with torch.no_grad():
        model.value_head[4].bias.fill_(-1e3)  # every hidden unit pushed negative, as Adam's first steps did
    assert value_units_firing(model, positions) == 0
    with torch.no_grad():
        _, value = model(positions)
    assert torch.all(value == value[0])  # the value no longer depends on the position


def test_the_learner_reports_its_value_units_on_the_last_batch_and_leaves_batchnorm_alone():
    cfg = load(None, ["--model.channels=8", "--model.blocks=1"])
    game = make_game("connect4")
    learner = Learner(cfg, game, Precision(torch.device("cpu"), None, False), DistInfo(), 0)
    assert learner.value_units_firing() is None  # no batch yet
    rng = np.random.default_rng(0)
    states = game.states_from_moves([list(rng.integers(0, 7, size=5)) for _ in range(32)])
    batch = {"states": states, "policy": np.full((32, 7), 1 / 7, dtype=np.float32),
             "z": rng.choice([-1.0, 1.0], 32).astype(np.float32), "q": np.zeros(32, dtype=np.float32)}
    learner.step(batch)
    before = {k: v.clone() for k, v in learner.model.state_dict().items() if "running" in k}
    assert 0 < learner.value_units_firing() <= 1
    after = {k: v for k, v in learner.model.state_dict().items() if "running" in k}
    assert all(torch.equal(before[k], after[k]) for k in before)  # measured as the net plays, statistics untouched
