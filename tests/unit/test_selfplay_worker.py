"""The self-play worker: what a finished game hands the learner, with and without playout-cap randomisation."""

import numpy as np
from selfplay.actors import SelfPlayWorker
from selfplay.config_io import load
from selfplay.games import make_game
from selfplay.mcts import uniform_evaluator


def play(overrides: list[str], moves: int = 40):
    game = make_game("tictactoe")
    cfg = load(None, ["--game.name=tictactoe", "--actors.games=64", "--search.simulations=16", *overrides])
    worker = SelfPlayWorker(game, uniform_evaluator(game), cfg, np.random.default_rng(0))
    finished = [s for s in (worker.step(version=7) for _ in range(moves)) if s is not None]
    return worker, finished


def test_every_move_is_a_training_position_without_playout_cap_randomisation():
    worker, finished = play([])
    recorded = sum(len(s.z) for s in finished)
    assert recorded == sum(s.plies for s in finished) > 0
    assert all((s.version == 7).all() for s in finished)
    assert worker.simulations == worker.moves * 16


def test_playout_cap_randomisation_records_only_the_full_searches_and_spends_less():
    # drawn once per move for the whole batch: 200 moves give the fraction room to show
    worker, finished = play(["--search.full_search_fraction=0.25", "--search.fast_simulations=3"], moves=200)
    recorded, plies = sum(len(s.z) for s in finished), sum(s.plies for s in finished)
    assert 0.15 < recorded / plies < 0.35               # about a quarter of the moves played are kept
    # each full search spent 16 simulations, each fast one 3: about 0.25 * 16 + 0.75 * 3 = 6.25 a move
    assert 4.5 * worker.moves < worker.simulations < 8 * worker.moves
    for s in finished:                                   # a kept position carries a full search's policy: sixteenths, not thirds
        assert np.allclose(s.policy.sum(axis=1), 1) and (np.abs(s.z) <= 1).all()
        assert (np.round(s.policy * 16, 4) % 1 == 0).all()


def stones(game, states: np.ndarray) -> np.ndarray:
    return game.encode(states).reshape(len(states), -1).sum(axis=1)


def test_a_random_opening_is_played_but_not_recorded_and_spreads_the_games():
    game = make_game("tictactoe")
    _, finished = play(["--search.temperature_moves=0", "--search.random_opening_fraction=1",
                        "--search.random_opening_moves=1"])
    games = sum(s.games for s in finished)
    recorded, plies = sum(len(s.z) for s in finished), sum(s.plies for s in finished)
    assert recorded == plies - games                      # each game's one random move is played, not recorded
    first = np.concatenate([s.states[stones(game, s.states) == 1] for s in finished])
    assert len(first) == games and (stones(game, np.concatenate([s.states for s in finished])) >= 1).all()
    assert len(np.unique(first, axis=0)) >= 5              # uniformly random: most of the 9 cells open some game


def test_random_openings_reach_only_the_configured_share_of_games():
    game = make_game("tictactoe")
    _, finished = play(["--search.random_opening_fraction=0.5", "--search.random_opening_moves=3"], moves=80)
    games = sum(s.games for s in finished)
    empty = sum(int((stones(game, s.states) == 0).sum()) for s in finished)  # games that opened with a search
    assert 0.3 < empty / games < 0.7
