"""Batched PUCT: tactics with a uniform prior, visit accounting, noise at the root only."""

import numpy as np
from selfplay.games import ConnectFour, TicTacToe
from selfplay.mcts import BatchedMCTS, uniform_evaluator


def search(game, move_lists, sims=200, noise=False, **kw):
    mcts = BatchedMCTS(game, uniform_evaluator(game), rng=np.random.default_rng(0), **kw)
    return mcts, mcts.search(game.states_from_moves(move_lists), sims, add_noise=noise)


def test_finds_a_win_in_one_and_blocks_a_loss_in_one_in_every_game_of_the_batch():
    game = ConnectFour()
    win = [0, 6, 0, 6, 0, 5]          # first player to move, three in column 0: play 0
    block = [0, 6, 0, 6, 0]           # second player to move: must block column 0
    win_h = [1, 1, 2, 2, 3, 3]        # first player: 0 or 4 completes the bottom row
    _, r = search(game, [win, block, win_h], sims=300)
    best = r.visits.argmax(axis=1)
    assert best[0] == 0 and best[1] == 0 and best[2] in (0, 4)
    assert r.root_value[0] > 0.5  # a forced win is seen as winning


def test_tictactoe_blocks_the_fork_threat():
    game = TicTacToe()
    _, r = search(game, [[0, 4, 1]], sims=400)   # X threatens 0-1-2: O must take 2
    assert r.visits.argmax(axis=1)[0] == 2


def test_visit_counts_sum_to_the_simulations_and_skip_illegal_moves():
    game = ConnectFour()
    full_col = [3] * 6
    _, r = search(game, [[], full_col], sims=64)
    assert r.visits.sum(axis=1).tolist() == [64, 64]
    assert r.visits[1, 3] == 0
    assert r.evals <= 2 * 64 + 2 and r.calls <= 65


def test_dirichlet_noise_touches_the_root_prior_only():
    game = ConnectFour()
    mcts, _ = search(game, [[]] * 4, sims=50, noise=False)
    clean = mcts.last_tree["prior"].copy()
    mcts, r = search(game, [[]] * 4, sims=50, noise=True, noise_fraction=0.5)
    noisy = mcts.last_tree["prior"]
    assert not np.allclose(noisy[:, 0], clean[:, 0])          # root changed
    np.testing.assert_allclose(noisy[:, 0].sum(axis=1), 1.0, rtol=1e-5)
    expanded = mcts.last_tree["num_nodes"]
    for g in range(4):                                        # every other node is the plain uniform prior
        np.testing.assert_allclose(noisy[g, 1:expanded[g]], 1 / 7, rtol=1e-5)
    np.testing.assert_allclose(r.prior, 1 / 7, rtol=1e-5)     # the reported prior is the network's, before noise


def test_per_game_budgets_stop_a_game_early_and_noise_can_be_per_game():
    game = ConnectFour()
    mcts = BatchedMCTS(game, uniform_evaluator(game), rng=np.random.default_rng(0), noise_fraction=0.5)
    r = mcts.search(game.initial_states(3), 40, add_noise=np.array([True, False, False]),
                    budgets=np.array([40, 8, 1]))
    assert r.visits.sum(axis=1).tolist() == [40, 8, 1]
    assert mcts.last_tree["num_nodes"].tolist() == [41, 9, 2]  # a game that sat out expanded nothing more
    root_prior = mcts.last_tree["prior"][:, 0]
    assert not np.allclose(root_prior[0], 1 / 7)               # noise only where asked
    np.testing.assert_allclose(root_prior[1:], 1 / 7, rtol=1e-5)


def test_equally_visited_moves_are_told_apart_by_their_value_not_their_column():
    game = TicTacToe()
    # X (6, 7) to move wins at 8; with 5 simulations over the 5 free squares each is tried once
    mcts = BatchedMCTS(game, uniform_evaluator(game), rng=np.random.default_rng(0))
    r = mcts.search(game.states_from_moves([[6, 0, 7, 1]]), 5, add_noise=False)
    assert r.visits[0].tolist() == [0, 0, 1, 1, 1, 1, 0, 0, 1]  # a five-way tie
    assert r.visits.argmax(axis=1)[0] == 2                      # index order alone picks square 2 and loses the win
    assert r.best_moves()[0] == 8 and r.q[0, 8] == 1.0          # the win's value decides
    assert np.isneginf(r.q[0, 0])                                # occupied squares have no value

