"""The rules of each game, pinned on positions whose outcome is known."""

import numpy as np
import pytest
from selfplay.games import ConnectFour, TicTacToe, make_game
from selfplay.games.connect4 import _CELL_BITS, four_in_a_row


def play_moves(game, moves):
    """Play 0-indexed moves one at a time; return the last StepResult."""
    states = game.initial_states(1)
    result = None
    for m in moves:
        result = game.play(states, np.array([m]))
        states = result.states
    return result


@pytest.mark.parametrize("moves", [
    [0, 1, 0, 1, 0, 1, 0],                 # vertical in column 1
    [0, 0, 1, 1, 2, 2, 3],                 # horizontal on the bottom row
    [0, 1, 1, 2, 2, 3, 2, 3, 3, 6, 3],     # diagonal up-right
    [6, 5, 5, 4, 4, 3, 4, 3, 3, 0, 3],     # diagonal up-left
])
def test_connect4_four_in_a_row_ends_the_game_as_a_loss_for_the_side_to_move(moves):
    game = ConnectFour()
    before = play_moves(game, moves[:-1])
    assert not before.terminal[0]
    last = play_moves(game, moves)
    assert last.terminal[0] and last.value[0] == -1.0


def test_connect4_full_column_is_illegal_and_full_board_is_a_draw():
    game = ConnectFour()
    states = game.states_from_moves([[3] * 6])
    assert game.legal_mask(states)[0].tolist() == [True, True, True, False, True, True, True]
    # a known drawn fill order: columns in pairs, shifted so no four line up
    order = [0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2, 3, 4, 5, 4, 5, 4, 5,
             1, 0, 1, 0, 1, 0, 3, 2, 3, 2, 3, 2, 5, 4, 5, 4, 5, 4, 6, 6, 6, 6, 6, 6]
    for n in range(1, len(order)):  # nobody wins on the way
        assert not play_moves(game, order[:n]).terminal[0], f"game ended at move {n}"
    result = play_moves(game, order)
    assert result.terminal[0] and result.value[0] == 0.0
    assert not game.legal_mask(result.states).any()


def test_connect4_play_hands_the_move_over_and_leaves_input_untouched():
    game = ConnectFour()
    states = game.initial_states(2)
    copy = states.copy()
    out = game.play(states, np.array([3, 0])).states
    assert (states == copy).all()
    planes = game.encode(out)
    # after one move the stone belongs to the opponent of the side to move (plane 1), bottom row
    assert planes[0, 1, 5, 3] == 1 and planes[0, 0].sum() == 0
    assert planes[1, 1, 5, 0] == 1


def test_connect4_flip_matches_mirrored_moves():
    game = ConnectFour()
    moves = [0, 1, 1, 5, 2]
    mirrored = [6 - m for m in moves]
    a, b = game.states_from_moves([moves, mirrored])
    assert (game.flip_planes(game.encode(a[None])) == game.encode(b[None])).all()
    policy = np.arange(7, dtype=np.float32)[None]
    assert game.flip_policy(policy)[0].tolist() == list(range(6, -1, -1))


def test_connect4_threat_planes_are_the_cells_that_would_make_four():
    """Planes 2 and 3 against brute force: an empty cell is a threat of a side when a stone of its there (gravity
    aside) makes four; on random positions of every length, for the side to move and its opponent."""
    game = ConnectFour()
    rng = np.random.default_rng(0)
    games = []
    for _ in range(200):
        moves, state = [], game.initial_states(1)
        for _ in range(rng.integers(0, 35)):
            move = int(rng.choice(np.flatnonzero(game.legal_mask(state)[0])))
            step = game.play(state, np.array([move]))
            if step.terminal[0]:
                break
            state, moves = step.states, moves + [move]
        games.append(moves)
    states = game.states_from_moves(games)
    planes = game.encode(states).reshape(len(states), game.num_planes, -1)
    for plane, stones in ((2, states[:, 0]), (3, states[:, 0] ^ states[:, 1])):
        for cell, bit in enumerate(_CELL_BITS):
            stone = np.uint64(1) << bit
            empty = (states[:, 1] & stone) == 0
            assert (planes[:, plane, cell] == (empty & four_in_a_row(stones | stone))).all(), (plane, cell)
    assert planes[:, 2:].sum() > 100  # the positions hold threats to find
    # a row of three on the bottom: the side that made it (the opponent of the mover) threatens both ends
    three = game.encode(game.states_from_moves([[1, 1, 2, 2, 3]]))[0]
    assert three[3, 5].tolist() == [1, 0, 0, 0, 1, 0, 0] and three[2].sum() == 0


def test_states_from_moves_rejects_illegal_sequences():
    with pytest.raises(ValueError, match="illegal move"):
        ConnectFour().states_from_moves([[0] * 7])


def test_pons_notation_is_one_indexed():
    assert ConnectFour.parse_pons_moves("4453") == [3, 3, 4, 2]


@pytest.mark.parametrize("moves,terminal,value", [
    ([0, 3, 1, 4, 2], True, -1.0),                 # top row
    ([0, 1, 4, 2, 8], True, -1.0),                 # diagonal
    ([0, 1, 2, 4, 3, 5, 7, 6, 8], True, 0.0),      # full board, nobody wins
    ([4, 0], False, 0.0),
])
def test_tictactoe_outcomes(moves, terminal, value):
    result = play_moves(TicTacToe(), moves)
    assert result.terminal[0] == terminal and result.value[0] == value


def test_tictactoe_occupied_cells_are_illegal():
    game = TicTacToe()
    states = game.states_from_moves([[4, 0]])
    assert game.legal_mask(states)[0].tolist() == [False, True, True, True, False, True, True, True, True]


def test_unknown_game_names_the_choices():
    with pytest.raises(ValueError, match="connect4, tictactoe"):
        make_game("chess")


def test_connect4_mover_rows_plane_marks_odd_rows_for_the_first_player_and_even_rows_for_the_second():
    game = ConnectFour()
    first, second = game.encode(game.states_from_moves([[3, 3], [3]]))[:, 4]  # rows top first: index 5 = row 1
    assert first[:, 0].tolist() == [0, 1, 0, 1, 0, 1] and (first == first[:, :1]).all()
    assert (second == 1 - first).all()
