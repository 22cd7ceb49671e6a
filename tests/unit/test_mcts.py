"""Batched PUCT: tactics with a uniform prior, visit accounting, noise at the root only; the Gumbel root's
schedule, budgets, tactics and noise."""

import numpy as np
from selfplay.games import ConnectFour, TicTacToe
from selfplay.mcts import BatchedMCTS, considered_visits, uniform_evaluator


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



def test_sequential_halving_gives_the_papers_schedule():
    # the schedules of Danihelka et al.'s sequential halving as mctx's seq_halving tests state them
    assert considered_visits(8, 24).tolist() == [0] * 8 + [1] * 4 + [2] * 4 + [3, 3, 4, 4, 5, 5, 6, 6]
    assert considered_visits(7, 24).tolist() == [0] * 7 + [1, 1, 1, 2, 2, 2] + [3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8]
    assert considered_visits(8, 13).tolist() == [0] * 8 + [1] * 4 + [2]
    assert considered_visits(8, 2).tolist() == [0, 0]
    assert considered_visits(1, 16).tolist() == list(range(16))


def gumbel_search(game, move_lists, sims, noise=False, budgets=None):
    mcts = BatchedMCTS(game, uniform_evaluator(game), rng=np.random.default_rng(0), root="gumbel")
    return mcts.search(game.states_from_moves(move_lists), sims, add_noise=noise, budgets=budgets)


def test_a_gumbel_root_plays_and_teaches_the_win_and_the_block():
    game = ConnectFour()
    r = gumbel_search(game, [[0, 6, 0, 6, 0, 5], [0, 6, 0, 6, 0]], sims=64)  # win at 0; block at 0
    assert r.best_moves().tolist() == [0, 0]
    assert (r.policy.argmax(axis=1) == 0).all() and r.policy[:, 0].min() > 0.5
    np.testing.assert_allclose(r.policy.sum(axis=1), 1, rtol=1e-5)
    assert r.root_value[0] > 0.5 > r.root_value[1]


def test_a_gumbel_root_spends_each_budget_by_sequential_halving_and_never_on_an_illegal_move():
    game = ConnectFour()
    r = gumbel_search(game, [[], [3] * 6, []], sims=64, noise=True, budgets=np.array([64, 64, 16]))
    assert r.visits.sum(axis=1).tolist() == [64, 64, 16]
    # 7 moves and 64 simulations: 3 visits each, the best 3 to 10, the best 2 to 20, the 2 left over to them
    assert sorted(r.visits[0].tolist(), reverse=True) == [21, 21, 10, 3, 3, 3, 3]
    assert sorted(r.visits[2].tolist(), reverse=True) == [5, 5, 2, 1, 1, 1, 1]
    assert r.visits[1, 3] == 0 and r.policy[1, 3] == 0 and r.best_moves()[1] != 3  # column 3 is full
    assert (r.visits[1] > 0).sum() == 6


def test_gumbel_noise_makes_the_move_a_sample_and_without_it_the_search_is_deterministic():
    game = ConnectFour()
    quiet = gumbel_search(game, [[]] * 64, sims=16)
    assert len(set(quiet.best_moves().tolist())) == 1
    noisy = gumbel_search(game, [[]] * 64, sims=16, noise=True)
    assert len(set(noisy.best_moves().tolist())) >= 5  # a uniform prior: Gumbel noise alone picks among 7
