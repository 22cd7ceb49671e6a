"""Perfect first-player play: the walk counts every best-defence line, and names the line a weak player lost (and
stops there)."""

import numpy as np
import pytest
from bitbully import BitBully, Board
from selfplay import perfect_play
from selfplay.evaluate import PACKAGED_PONS_DIR, EvalError
from selfplay.games import ConnectFour

SOLVER = BitBully()
GAME = ConnectFour()


def scores_after(line: list[int]) -> dict[int, int]:
    return SOLVER.score_all_moves(Board.from_moves(line))


def best_move(line: list[int]) -> int:
    scores = scores_after(line)
    return min(c for c, s in scores.items() if s == max(scores.values()))


def won_position() -> list[int]:
    """The first End-Easy position whose mover wins, but not with the next stone (the walk has replies to count)."""
    for text in (PACKAGED_PONS_DIR / "Test_L3_R1").read_text().splitlines():
        moves, score = text.split()
        line = ConnectFour.parse_pons_moves(moves)
        if int(score) > 0 and not GAME.play(GAME.states_from_moves([line]), np.array([best_move(line)])).terminal[0]:
            return line
    raise AssertionError("no End-Easy position is won in more than one move")


def branching_position() -> list[int]:
    """Middle-Easy's 11th position: a win whose best defences branch into 168 lines that meet in 139 positions."""
    moves, score = (PACKAGED_PONS_DIR / "Test_L2_R1").read_text().splitlines()[10].split()
    assert int(score) > 0
    return ConnectFour.parse_pons_moves(moves)


def oracle(states: np.ndarray, lines: list[list[int]]) -> np.ndarray:
    return np.array([best_move(line) for line in lines])


def lines_one_by_one(line: list[int]) -> tuple[int, int, int]:
    """(lines, wins, the oracle's moves) against every best defence, each line walked on its own (no transpositions)."""
    col = best_move(line)
    after = GAME.play(GAME.states_from_moves([line]), np.array([col]))
    if after.terminal[0]:
        return 1, int(after.value[0] < 0), 1
    replies = scores_after([*line, col])
    if max(replies.values()) >= 0:
        return 1, 0, 1
    counted = [lines_one_by_one([*line, col, c]) for c, s in replies.items() if s == max(replies.values())]
    return sum(n for n, _, _ in counted), sum(w for _, w, _ in counted), 1 + sum(m for _, _, m in counted)


def test_the_solvers_own_moves_win_every_line_and_the_walk_counts_each_once():
    start = branching_position()
    result = perfect_play.check_first_player(oracle, start, progress=lambda _: None)
    lines, wins, moves = lines_one_by_one(start)
    assert (result["lines"], result["wins"]) == (lines, wins) == (lines, lines) and lines >= 100
    assert result["perfect"] and result["first_loss"] is None
    assert 2 <= result["positions_searched"] < moves  # a transposition is searched once, however many lines meet it


def test_a_move_that_gives_up_the_win_ends_its_line_and_is_named():
    start = won_position()
    scores = scores_after(start)
    worst = min(scores, key=lambda c: (scores[c], c))
    assert scores[worst] <= 0  # an End-Easy win is lost by some move (else pick another position)
    result = perfect_play.check_first_player(lambda states, lines: np.full(len(lines), worst), start,
                                             progress=lambda _: None)
    assert result == {**result, "lines": 1, "wins": 0, "perfect": False, "first_loss": [*start, worst]}
    assert "gave up the win; first in" in perfect_play.format_result(result, 25)


def test_the_walk_stops_at_the_ply_where_the_net_first_gives_up_the_win():
    start = branching_position()
    whole = perfect_play.check_first_player(oracle, start, progress=lambda _: None)

    def blunders_once(states: np.ndarray, lines: list[list[int]]) -> np.ndarray:
        """The solver's moves, but the worst one in the first (lowest-columns) line of its second move."""
        moves = [best_move(line) for line in lines]
        if len(lines[0]) == len(start) + 2:
            scores = scores_after(lines[0])
            moves[0] = min(scores, key=lambda c: (scores[c], c))
        return np.array(moves)

    result = perfect_play.check_first_player(blunders_once, start, progress=lambda _: None)
    assert not result["perfect"] and result["stopped_at_ply"] == len(result["first_loss"]) == len(start) + 3
    # the start and the second move's positions were searched, and nothing deeper: the other lines were not walked on
    first = best_move(start)
    defences = scores_after([*start, first])
    assert result["positions_searched"] == 1 + sum(s == max(defences.values()) for s in defences.values())
    assert result["positions_searched"] < whole["positions_searched"] and whole["stopped_at_ply"] is None


def test_a_start_without_a_forced_win_is_refused():
    with pytest.raises(EvalError, match="no forced win"):
        perfect_play.check_first_player(oracle, [3], progress=lambda _: None)  # after the centre the mover loses


def test_a_tree_past_its_guard_ends_the_walk_without_a_verdict_and_keeps_what_it_counted():
    said = []
    result = perfect_play.check_first_player(oracle, [], max_positions=1, progress=said.append)
    # the empty board was searched; the defences after the net's first stone would pass the guard of 1
    assert result == {**result, "positions_searched": 1, "perfect": None, "stopped_at_ply": 2, "first_loss": None}
    assert "passed 1 positions at ply 2" in said[-1]
    assert "no verdict" in perfect_play.format_result(result, 25)
