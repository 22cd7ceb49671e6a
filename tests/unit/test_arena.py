"""Arena: baselines that use only the game protocol, paired games, Wilson intervals, the Elo ladder, the record."""

import io
import json
import math

import numpy as np
import pytest
from selfplay import arena, elo
from selfplay.games import ConnectFour, TicTacToe
from selfplay.players import MinimaxPlayer, RandomPlayer, baseline
from selfplay.record_keys import arena_figures, arena_key
from selfplay.stats import RunLog


@pytest.mark.parametrize("game", [TicTacToe(), ConnectFour()])
def test_random_plays_only_legal_moves(game):
    rng = np.random.default_rng(0)
    states = game.states_from_moves([list(rng.permutation(game.num_actions)[:k] % game.num_actions)
                                     for k in range(4)])
    player = RandomPlayer(game)
    for _ in range(50):
        moves = player.choose(states, rng)
        assert game.legal_mask(states)[np.arange(len(states)), moves].all()
    full_but_one = game.states_from_moves([[0, 1, 2, 4, 3, 5, 7, 6]]) if game.name == "tictactoe" else None
    if full_but_one is not None:  # one empty cell left: random must take it
        assert player.choose(full_but_one, rng).tolist() == [8]


def test_greedy_takes_a_win_and_blocks_a_loss_in_connect_four():
    game, greedy = ConnectFour(), baseline(ConnectFour(), "greedy")
    # X holds columns 1-3 on the bottom row, O threatens to win in column 7: X must win, not block
    win = game.states_from_moves([[0, 6, 1, 6, 2, 6]])
    # X holds columns 1-3; O to move must block column 4 (any other move loses at once)
    block = game.states_from_moves([[0, 0, 1, 1, 2]])
    for seed in range(20):  # ties are broken at random: the choice must not depend on the draw
        rng = np.random.default_rng(seed)
        assert greedy.choose(win, rng).tolist() == [3]
        assert greedy.choose(block, rng).tolist() == [3]


@pytest.mark.parametrize("depth", [6, 9])
def test_minimax_never_loses_to_random_at_tictactoe(depth):
    game = TicTacToe()
    wins, draws, losses = arena.play_match(game, MinimaxPlayer(game, depth), RandomPlayer(game), 60, 0,
                                           np.random.default_rng(depth))
    assert losses == 0 and wins + draws == 60 and wins >= 40


def test_pure_mcts_beats_random_and_games_alternate_the_first_move():
    game = TicTacToe()
    first_moves = []

    class Spy(RandomPlayer):
        def choose(self, states, rng):
            first_moves.extend((np.bitwise_count(states[:, 1]) == 0).tolist())
            return super().choose(states, rng)

    w, d, losses = arena.play_match(game, baseline(game, "mcts100"), Spy(game), 20, 0, np.random.default_rng(1))
    assert w + d + losses == 20 and elo.score(w, d, losses) >= 0.8
    assert sum(first_moves) == 10  # the spy moved first in half the games
    assert arena.play_match(game, RandomPlayer(game), RandomPlayer(game), 7, 2, np.random.default_rng(0)) \
        == arena.play_match(game, RandomPlayer(game), RandomPlayer(game), 7, 2, np.random.default_rng(0))


@pytest.mark.parametrize("name", ["minimax", "mcts0", "alphabeta3", "Random", ""])
def test_an_unknown_baseline_names_the_choices(name):
    with pytest.raises(ValueError, match="choose from random, greedy, minimax<depth>"):
        baseline(TicTacToe(), name)


def test_wilson_interval():
    low, high = elo.wilson(0, 0, 10)
    assert low == 0 and high == pytest.approx(0.2775, abs=1e-3)
    low, high = elo.wilson(3, 4, 3)
    assert low == pytest.approx(1 - high) and low < 0.5 < high
    assert elo.wilson(10, 0, 0)[1] == 1.0 and elo.score(2, 2, 0) == 0.75


def test_elo_recovers_known_ratings_with_random_at_zero():
    truth = {"random": 0.0, "a": 150.0, "b": 400.0, "c": 700.0}
    results = {}
    for x in truth:
        for y in truth:
            if x < y:
                p = 1 / (1 + 10 ** ((truth[y] - truth[x]) / 400))
                n = 4000
                draws = round(0.2 * n)
                wins = round(p * n - draws / 2)
                results[(x, y)] = (wins, draws, n - wins - draws)
    fitted = elo.fit_elo(results, anchor="random", prior_draws=0)
    assert fitted["random"] == (0.0, 0.0)
    for name, rating in truth.items():
        assert fitted[name][0] == pytest.approx(rating, abs=10), name
    with_prior = elo.fit_elo(results)  # one virtual draw per pairing barely moves 4,000 games
    assert all(abs(with_prior[n][0] - fitted[n][0]) < 5 for n in truth)


def test_elo_keeps_a_perfect_score_finite_and_refuses_an_unlinked_ladder():
    fitted = elo.fit_elo({("agent", "random"): (100, 0, 0), ("agent", "greedy"): (50, 0, 50)})
    rating = fitted["agent"][0]
    assert math.isfinite(rating) and rating == pytest.approx(400 * math.log10(100.5 / 0.5), abs=1)
    assert fitted["greedy"][0] == pytest.approx(rating, abs=1)
    with pytest.raises(ValueError, match="not linked to the anchor"):
        elo.fit_elo({("a", "random"): (5, 0, 5), ("b", "c"): (5, 0, 5)})
    with pytest.raises(ValueError, match="played no game"):
        elo.fit_elo({("a", "b"): (5, 0, 5)})


def test_the_arena_record_has_its_documented_shape(tmp_path):
    game = TicTacToe()
    newest = MinimaxPlayer(game, 9, name="step-7")
    result = arena.run_arena(game, newest, 7, arena.parse_baselines(game, "greedy,minimax1"), [], 8, 0, 1, 3)
    assert set(result.results) == {("step-7", "random"), ("step-7", "greedy"), ("step-7", "minimax1"),
                                   ("random", "greedy"), ("random", "minimax1"), ("greedy", "minimax1")}
    assert result.ratings["random"] == (0.0, 0.0) and result.games == 24
    table = arena.format_table(result)
    assert table.splitlines()[0].split()[:3] == ["player", "W-D-L", "of"] and "(anchor)" in table
    log = RunLog(tmp_path, stream=io.StringIO())  # the trainer's own writer
    log.record(7, arena.summary(result), kind="arena")
    log.close()
    [record] = [json.loads(line) for line in (tmp_path / "stats.jsonl").read_text().splitlines()]
    assert record["kind"] == "arena"
    assert record["step"] == 7 and record["arena/elo"] == pytest.approx(result.ratings["step-7"][0])
    figures = arena_figures(record)
    assert set(figures) == {"random", "greedy", "minimax1"}
    assert set(figures["greedy"]) == {"elo", "wins", "draws", "losses", "score", "score_low", "score_high"}
    w, d, losses = result.versus("random")
    assert record[arena_key("random", "wins")] == w and figures["random"]["elo"] == 0
    assert figures["random"]["score_low"] <= figures["random"]["score"] <= figures["random"]["score_high"]


def test_a_ladder_puts_a_runs_checkpoints_on_one_scale_against_fixed_baselines():
    # stand-ins for three checkpoints of rising strength: real players the ladder cannot tell from networks
    game = TicTacToe()
    weak, middling, strong = RandomPlayer(game, "step-1"), MinimaxPlayer(game, 2, "step-2"), MinimaxPlayer(game, 9,
                                                                                                         "step-3")
    baselines = [baseline(game, "greedy"), baseline(game, "mcts16")]
    ladder = arena.run_ladder(game, [weak, middling, strong], baselines, 20, 0, 1, seed=3)
    assert ladder.baselines[0] == "random"  # the anchor joins when not named
    # every checkpoint met every baseline and its two predecessors (the default), the baselines each other
    against_baselines = {(c, b) for c in ladder.checkpoints for b in ladder.baselines}
    among_baselines = {("random", "greedy"), ("random", "mcts16"), ("greedy", "mcts16")}
    assert set(ladder.results) == (against_baselines | among_baselines
                                   | {("step-2", "step-1"), ("step-3", "step-1"), ("step-3", "step-2")})
    chain = arena.run_ladder(game, [weak, middling, strong], baselines, 2, 0, 1, seed=3, previous=1)
    assert set(chain.results) == against_baselines | among_baselines | {("step-2", "step-1"), ("step-3", "step-2")}
    assert ladder.ratings["random"][0] == 0 and ladder.rises_monotonically()
    assert ladder.elo()[2] - ladder.elo()[0] > 200
    summary = arena.ladder_summary(ladder)
    assert summary["rises_monotonically"] and [c["checkpoint"] for c in summary["checkpoints"]] == ladder.checkpoints
    assert [sorted(c["wdl_vs_earlier"]) for c in summary["checkpoints"]] == [[], ["step-1"], ["step-1", "step-2"]]
    assert "rises at every checkpoint" in arena.format_ladder(ladder)
    backwards = arena.run_ladder(game, [strong, middling, weak], baselines, 20, 0, 1, seed=3)
    assert not backwards.rises_monotonically() and "does NOT rise" in arena.format_ladder(backwards)


def test_each_pair_of_a_match_opens_differently_while_the_game_has_openings_enough():
    # deterministic players replay a repeated opening move for move: a repeat would count the same games twice
    c4, rng = ConnectFour(), np.random.default_rng(0)
    four = arena.distinct_openings(c4, 50, 4, rng)
    assert len({s.tobytes() for s in four}) == 50
    two = arena.distinct_openings(c4, 50, 2, rng)  # Connect Four has 49 two-ply positions: one must repeat
    assert len({s.tobytes() for s in two}) == 49
    with pytest.raises(ValueError, match="every 9-ply opening of tictactoe ends the game"):
        arena.distinct_openings(TicTacToe(), 4, 9, rng)
