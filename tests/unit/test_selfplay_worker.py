"""The self-play worker: what a finished game hands the learner, with and without playout-cap randomisation."""

import numpy as np
from selfplay.actors import SelfPlayWorker, frequency_weights
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


def test_surprise_is_how_far_the_search_moved_from_the_prior():
    game = make_game("tictactoe")
    cfg = load(None, ["--game.name=tictactoe", "--actors.games=8", "--search.noise_fraction=0",
                      "--search.simulations=9"])
    worker = SelfPlayWorker(game, uniform_evaluator(game), cfg, np.random.default_rng(0))
    moves = worker.choose_moves()          # nine simulations visit each of the empty board's nine moves once:
    assert np.allclose(moves.policy, 1 / 9) and np.allclose(moves.surprise, 0, atol=1e-6)  # the uniform prior
    cfg = load(None, ["--game.name=tictactoe", "--actors.games=8", "--search.noise_fraction=0",
                      "--search.simulations=16"])
    moves = SelfPlayWorker(game, uniform_evaluator(game), cfg, np.random.default_rng(0)).choose_moves()
    shares = moves.policy[0][moves.policy[0] > 0]   # sixteen cannot spread evenly over nine: some moves got two
    assert np.allclose(moves.surprise, (shares * np.log(shares * 9)).sum()) and (moves.surprise > 0).all()


def test_frequency_weights_keep_a_games_total_and_follow_the_surprise():
    surprise = np.array([0.0, 0.1, 0.3, 0.0])
    assert np.array_equal(frequency_weights(surprise, 0.0), np.ones(4))
    assert np.array_equal(frequency_weights(np.zeros(4), 0.5), np.ones(4))  # nothing surprised: one each
    half = frequency_weights(surprise, 0.5)
    assert np.isclose(half.sum(), 4) and np.allclose(half, [0.5, 1.0, 2.0, 0.5])
    assert np.allclose(frequency_weights(surprise, 1.0), [0, 1, 3, 0])  # all by surprise: foreseen ones dropped


def test_surprise_weighting_records_as_many_positions_in_expectation():
    _, plain = play([], moves=120)
    _, weighted = play(["--search.policy_surprise_weight=1"], moves=120)
    rows = [sum(len(s.z) for s in finished) for finished in (plain, weighted)]
    plies = [sum(s.plies for s in finished) for finished in (plain, weighted)]
    assert rows[0] == plies[0] and 0.85 < rows[1] / plies[1] < 1.15
    # a game's rows are consecutive plies, so two equal neighbours are a position written more than once
    copies = [sum(int((s.states[1:] == s.states[:-1]).all(axis=1).sum()) for s in finished)
              for finished in (plain, weighted)]
    assert copies[0] == 0 < copies[1]
