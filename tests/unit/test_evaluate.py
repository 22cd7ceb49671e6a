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
