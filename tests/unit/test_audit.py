"""The self-play audit: the games it plays say how each move was chosen, and the solver says which moves lowered
the mover's result and which last changed each drawn game."""

import numpy as np
from bitbully import BitBully, Board
from selfplay import audit
from selfplay.actors import (
    GREEDY_FAST,
    GREEDY_FULL,
    MOVE_KINDS,
    OPENING,
    SAMPLED_FAST,
    SAMPLED_FULL,
    SelfPlayWorker,
)
from selfplay.config_io import load
from selfplay.games import make_game
from selfplay.mcts import uniform_evaluator

SOLVER = BitBully()


def scores_after(moves) -> dict[int, int]:
    return SOLVER.score_all_moves(Board.from_moves(list(moves)))


def test_each_game_is_played_to_its_end_and_says_how_each_move_was_chosen():
    game = make_game("tictactoe")
    cfg = load(None, ["--game.name=tictactoe", "--actors.games=48", "--search.simulations=16",
                      "--search.temperature_moves=3", "--search.full_search_fraction=0.5",
                      "--search.fast_simulations=4", "--search.random_opening_fraction=0.5",
                      "--search.random_opening_moves=1"])
    # full searches are drawn once per move for the whole batch: seed 1 draws both kinds in and after the 3 plies
    games = audit.play_games(SelfPlayWorker(game, uniform_evaluator(game), cfg, np.random.default_rng(1)), 48)
    assert len(games) == 48 and 10 < sum(g.opened for g in games) < 38
    for g in games:
        last = game.play(game.states_from_moves([g.moves[:-1]]), np.array(g.moves[-1:]))
        assert last.terminal[0]
        last_mover_won = last.value[0] < 0
        first_moved_last = len(g.moves) % 2 == 1
        assert g.first_player_result == (0 if last.value[0] == 0 else 1 if last_mover_won == first_moved_last else -1)
        opening = 1 if g.opened else 0
        assert set(g.kinds[:opening]) <= {OPENING} and OPENING not in g.kinds[opening:]
        assert set(g.kinds[opening:3]) <= {SAMPLED_FULL, SAMPLED_FAST}  # search.temperature_moves=3
        assert set(g.kinds[3:]) <= {GREEDY_FULL, GREEDY_FAST}
    assert {k for g in games for k in g.kinds} == set(range(len(MOVE_KINDS)))


def test_the_solver_names_the_moves_that_gave_the_win_away_and_the_last_one_of_each_draw():
    # from the empty board only the centre column wins (Allis, 1988); its neighbours draw, the outer ones lose
    first = scores_after(())
    assert first[3] > 0 and first[2] == 0 and first[0] < 0
    holds_the_draw = next(c for c, s in scores_after([2]).items() if s == 0)
    games = [audit.PlayedGame([3], [GREEDY_FULL], 1),
             audit.PlayedGame([2], [SAMPLED_FULL], 0),
             audit.PlayedGame([2, holds_the_draw], [SAMPLED_FAST, GREEDY_FAST], 0),
             audit.PlayedGame([0], [OPENING], -1)]
    assert audit.changed_moves(games[2], scores_after) == [True, False]
    result = audit.audit(games, progress=lambda _: None)
    assert result["from_the_empty_board"] == {"first player won": 1, "drawn": 2}
    assert result["after_a_random_opening"] == {"second player won": 1}
    assert result["moves_by_kind"] == dict.fromkeys(MOVE_KINDS, 1)
    assert result["changed_by_kind"] == {**dict.fromkeys(MOVE_KINDS, 0), MOVE_KINDS[OPENING]: 1,
                                         MOVE_KINDS[SAMPLED_FULL]: 1, MOVE_KINDS[SAMPLED_FAST]: 1}
    assert result["drawn_last_change"] == {"first player's sampled, full search": 1,
                                           "first player's sampled, fast search": 1}
    assert result["drawn_last_change_ply"] == {0: 2}
    text = audit.format_audit(result)
    assert "from the empty board 2 of 3 drawn, after a random opening 0 of 1 drawn" in text
    assert "    sampled, full search            1 of      1 (100.0%)" in text
