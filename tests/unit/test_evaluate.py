"""Pons grading: solver labels agree with the files, and the grader scores an oracle perfectly."""

import numpy as np
import pytest
from selfplay import evaluate
from selfplay.games import ConnectFour


@pytest.fixture(scope="module")
def sets(tmp_path_factory):
    import os
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("cache"))  # label from scratch
    try:
        return evaluate.load_sets(evaluate.find_pons_dir(), limit=8)
    finally:
        del os.environ["XDG_CACHE_HOME"]


def test_grade_weak_and_strong():
    labels = np.array([[2, 0, -1, evaluate.ILLEGAL, -3, 1, 2]] * 4, dtype=np.int16)
    # best 2 (win): col 6 is also best; col 5 still wins (strong error only); col 1 draws (weak)
    weak, strong = evaluate.grade(labels, np.array([6, 5, 1, 0]))
    assert (weak, strong) == (0.25, 0.5)


def test_every_set_loads_with_labels_that_match_the_files(sets):
    assert [s.name for s in sets] == [n for _, n in evaluate.PONS_SETS]
    for s in sets:
        assert len(s.moves) == 8 and s.labels.shape == (8, 7)
        legal = ConnectFour().legal_mask(ConnectFour().states_from_moves(s.moves))
        assert ((s.labels != evaluate.ILLEGAL) == legal).all()


def oracle(sets, sign):
    """An evaluator whose policy logits are the solver's scores (sign=+1) or their negation."""
    game = ConnectFour()
    table = {}
    for s in sets:
        planes = game.encode(game.states_from_moves(s.moves))
        for p, lab in zip(planes, s.labels):
            table[p.tobytes()] = np.where(lab == evaluate.ILLEGAL, -1e4, sign * lab.astype(np.float32))

    def evaluate_fn(planes):
        logits = np.stack([table.get(p.tobytes(), np.zeros(7, np.float32)) for p in planes]).astype(np.float32)
        return logits * 10, np.zeros(len(planes), np.float32)
    return evaluate_fn


def test_a_solver_policy_makes_no_errors_and_its_opposite_many(sets):
    perfect = evaluate.evaluate(oracle(sets, +1), sets, simulations=1)
    worst = evaluate.evaluate(oracle(sets, -1), sets, simulations=1)
    for _, name in evaluate.PONS_SETS:
        assert perfect[name]["policy_weak"] == 0 and perfect[name]["policy_strong"] == 0
        assert worst[name]["policy_strong"] > 0.5
    table = evaluate.format_table(perfect)
    assert "Begin-Hard" in table and "0.0%" in table


def test_missing_sets_say_where_to_point(tmp_path, monkeypatch):
    monkeypatch.setenv("GANTRY_PONS_DIR", str(tmp_path))
    with pytest.raises(evaluate.EvalError, match="set eval.pons_dir or GANTRY_PONS_DIR"):
        evaluate.find_pons_dir(str(tmp_path / "nope"))


def test_the_sets_ship_with_the_trainer(monkeypatch):
    """A fresh clone, the image and every cloud node evaluate with no extra step and no variable."""
    monkeypatch.delenv("GANTRY_PONS_DIR", raising=False)
    folder = evaluate.find_pons_dir()
    assert folder == evaluate.PACKAGED_PONS_DIR
    for file, _ in evaluate.PONS_SETS:
        assert len((folder / file).read_text().splitlines()) == 1000


def test_positions_where_no_move_can_be_wrong_are_left_out_of_the_decidable_error():
    il = evaluate.ILLEGAL
    labels = np.array([[-3, -5, il, -1, -2, -4, -6],   # already lost: every move loses
                       [0, 0, 0, 0, 0, 0, il],          # every move draws
                       [2, -1, 0, il, 1, -3, 0],        # a win that can be thrown away
                       [0, -2, 0, 0, 0, 0, 0]], dtype=np.int16)  # a draw that can be lost
    assert evaluate.can_be_wrong(labels).tolist() == [False, False, True, True]


def judged_by_value(sets, sign):
    """The worst policy (the solver's scores negated) with a value head that judges each move's position as the
    solver does (sign=+1) or the other way round (sign=-1): the value of the position after a move, for the
    player who then moves, is -sign(score of the move) times ``sign``."""
    game, values = ConnectFour(), {}
    for s in sets:
        states = game.states_from_moves(s.moves)
        for column in range(7):
            playable = np.flatnonzero(s.labels[:, column] != evaluate.ILLEGAL)
            after = game.play(states[playable], np.full(len(playable), column)).states
            for planes, score in zip(game.encode(after), s.labels[playable, column]):
                values[planes.tobytes()] = -sign * float(np.sign(score))
    policy = oracle(sets, -1)

    def evaluate_fn(planes):
        logits, _ = policy(planes)
        return logits, np.array([values.get(p.tobytes(), 0.0) for p in planes], np.float32)
    return evaluate_fn


def test_the_breakdown_sorts_each_mcts_error_once_and_says_whose_judgement_it_was(sets):
    game = ConnectFour()
    right = evaluate.evaluate(judged_by_value(sets, +1), sets, simulations=1, breakdown=True)
    wrong = evaluate.evaluate(judged_by_value(sets, -1), sets, simulations=1, breakdown=True)
    total = 0
    for s in sets:
        b, graded = wrong[s.name]["breakdown"], wrong[s.name]
        assert b["errors"] == round(graded["mcts_weak"] * graded["positions"]) and b["positions"] == len(s.moves)
        assert sum(e for e, _ in b["by_result"].values()) == b["errors"]   # a lost position cannot be played wrong
        assert sum(e for e, _ in b["by_keeping_moves"].values()) == b["errors"]
        assert sum(e for e, _ in b["won_by_score"].values()) == b["by_result"]["won"][0]
        assert sum(n for _, n in b["by_result"].values()) <= b["positions"]
        assert b["raw_policy_errs_too"] <= b["errors"]
        # a value head that judges as the solver never prefers an erring move; one that judges the other way
        # prefers every one, except where a keeping move wins at once (nothing is valued above a win)
        assert right[s.name]["breakdown"]["value_prefers_the_error"] == 0
        states, best = game.states_from_moves(s.moves), s.labels.max(axis=1)
        wins_at_once = np.zeros(len(states), bool)
        for column in range(7):
            keeping = np.flatnonzero((s.labels[:, column] != evaluate.ILLEGAL) & (best > 0) & (s.labels[:, column] > 0))
            step = game.play(states[keeping], np.full(len(keeping), column))
            wins_at_once[keeping[step.terminal]] = True
        chosen_erred = b["errors"]
        assert b["value_prefers_the_error"] <= chosen_erred
        assert b["value_prefers_the_error"] >= chosen_erred - int(wins_at_once.sum())
        total += chosen_erred
    assert total > 0   # the worst policy errs somewhere, or the test proves nothing
    text = evaluate.format_breakdown(wrong)
    assert text.count("by keeping moves") == len(sets) and "Begin-Hard: MCTS-1 errs on" in text
