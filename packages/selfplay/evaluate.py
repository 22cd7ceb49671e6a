"""Grade a Connect Four network on Pascal Pons's six test sets with a perfect solver.

For each position the solver (bitbully) scores every legal move; a chosen move is a
*weak* error when it changes the game-theoretic result (win -> draw/loss, draw -> loss)
and a *strong* error when it is not one of the best-scoring moves. Both the raw policy
(argmax of the network's prior) and MCTS at a fixed simulation count are graded.
Solver labels are cached under ~/.cache/gantry (keyed by the set file's hash).
"""

from __future__ import annotations

import functools
import hashlib
import os
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .errors import SelfplayError
from .games import ConnectFour
from .mcts import BatchedMCTS, masked_softmax
from .record_keys import eval_key

# (file, name) in the order the README reports them: late game first, hardest last
PONS_SETS = (
    ("Test_L3_R1", "End-Easy"),
    ("Test_L2_R1", "Middle-Easy"),
    ("Test_L2_R2", "Middle-Medium"),
    ("Test_L1_R1", "Begin-Easy"),
    ("Test_L1_R2", "Begin-Medium"),
    ("Test_L1_R3", "Begin-Hard"),
)
ILLEGAL = -1000  # solver score stored for a full column


class EvalError(SelfplayError, RuntimeError):
    """The test sets or the solver cannot be used; the message says how to fix it."""


PACKAGED_PONS_DIR = Path(__file__).parent / "data" / "pons"  # shipped with the trainer (and so the image)


def find_pons_dir(configured: str = "") -> Path:
    """eval.pons_dir, else $GANTRY_PONS_DIR, else the sets shipped in the package.

    A folder named explicitly must hold the sets: a typo is an error, not a silent fallback.
    """
    folder = Path(configured or os.environ.get("GANTRY_PONS_DIR", "") or PACKAGED_PONS_DIR)
    if (folder / PONS_SETS[0][0]).is_file():
        return folder
    raise EvalError(f"Pons test sets not found in {folder}: set eval.pons_dir or GANTRY_PONS_DIR to the folder "
                    f"holding Test_L1_R1 ..., or unset both to use the sets shipped in {PACKAGED_PONS_DIR}")


@dataclass
class PonsSet:
    name: str
    moves: list[list[int]]  # 0-indexed columns from the empty board
    labels: np.ndarray      # int16 [N, 7]: solver score of every move for the side to move, ILLEGAL if full


def _cache_dir() -> Path:
    root = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(root) / "gantry" / "pons-labels"


def solver():
    """bitbully's solver (opening book + search) and its Board class."""
    try:
        from bitbully import BitBully, Board
    except ImportError:
        raise EvalError("the bitbully solver is not installed: run `make install` (it is a base dependency)") from None
    return BitBully(), Board


def solver_labels(moves: list[list[int]]) -> np.ndarray:
    """Score every move of every position with bitbully."""
    agent, Board = solver()
    labels = np.full((len(moves), 7), ILLEGAL, dtype=np.int16)
    for i, m in enumerate(moves):
        for col, score in agent.score_all_moves(Board.from_moves(m)).items():
            labels[i, col] = score
    return labels


def load_set(pons_dir: Path, file: str, name: str, limit: int = 1000) -> PonsSet:
    """The first ``limit`` positions of one set with their solver labels (labelled once, then cached)."""
    path = pons_dir / file
    text = path.read_bytes()
    lines = [ln.split() for ln in text.decode().splitlines() if ln.strip()][:limit]
    moves = [ConnectFour.parse_pons_moves(ln[0]) for ln in lines]
    # the cache holds a labelled prefix of the set; grading more positions extends it
    cache = _cache_dir() / f"{file}-{hashlib.sha256(text).hexdigest()[:16]}.npy"
    labels = np.load(cache) if cache.is_file() else np.zeros((0, 7), dtype=np.int16)
    if len(labels) < len(moves):
        fresh = solver_labels(moves[len(labels):])
        best = fresh.max(axis=1)
        given = np.array([int(ln[1]) for ln in lines[len(labels):]])
        if not (best == given).all():  # the solver and the file must agree before we trust either
            bad = int(np.flatnonzero(best != given)[0])
            raise EvalError(f"{path}: line {len(labels) + bad + 1} scores {given[bad]} but the solver says "
                            f"{best[bad]}: the file is damaged or not a Pons set")
        labels = np.concatenate([labels, fresh])
        cache.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache.with_name(f".{cache.name}.tmp-{os.getpid()}")
        with open(tmp, "wb") as f:
            np.save(f, labels)
        os.replace(tmp, cache)
    return PonsSet(name, moves, labels[:len(moves)])


def load_sets(pons_dir: Path, limit: int = 1000) -> list[PonsSet]:
    return [load_set(pons_dir, f, n, limit) for f, n in PONS_SETS]


def grade(labels: np.ndarray, chosen: np.ndarray) -> tuple[float, float]:
    """(weak error rate, strong error rate) of one chosen column per position."""
    best = labels.max(axis=1)
    got = labels[np.arange(len(labels)), chosen]
    weak = np.sign(got) < np.sign(best)
    strong = got < best
    return float(weak.mean()), float(strong.mean())


def can_be_wrong(labels: np.ndarray) -> np.ndarray:
    """Positions where some legal move changes the result (an already-lost one, or one where every move keeps
    the result, cannot be played weakly wrong): the denominator of the decidable weak error."""
    legal = labels != ILLEGAL
    worst = np.where(legal, labels, np.iinfo(labels.dtype).max).min(axis=1)
    return np.sign(worst) < np.sign(labels.max(axis=1))


def where_mcts_errs(evaluator, game: ConnectFour, states: np.ndarray, labels: np.ndarray, mcts_move: np.ndarray,
                    policy_move: np.ndarray) -> dict:
    """Where MCTS's weak errors on one set are (`selfplay eval --breakdown`), each as [errors, positions]: by the
    position's result; by how many moves keep it (positions where some move changes it); for won positions, by
    the solver's score (1 = the win comes on the winner's last stone, when the board fills); and whose judgement
    they are: the raw policy's, and the value head's where it rates the position after the erring move above the
    position after every move that keeps the result."""
    rows = np.arange(len(labels))
    legal = labels != ILLEGAL
    best = labels.max(axis=1)
    result = np.sign(best)                                   # for the mover: 1 won, 0 drawn, -1 lost
    keeps = legal & (np.sign(labels) == result[:, None])
    erred = np.sign(labels[rows, mcts_move]) < result
    child_value = np.full(labels.shape, -np.inf, dtype=np.float32)  # each move's position, valued for the mover
    for column in range(labels.shape[1]):
        playable = np.flatnonzero(legal[:, column])
        if len(playable):
            after = game.play(states[playable], np.full(len(playable), column))
            _, value = evaluator(game.encode(after.states))  # for the player to move next: the opponent
            child_value[playable, column] = np.where(after.terminal, -after.value, -value)
    value_prefers = child_value[rows, mcts_move] > np.where(keeps, child_value, -np.inf).max(axis=1)

    def count(where: np.ndarray) -> list[int]:
        return [int((erred & where).sum()), int(where.sum())]

    kept_by, decidable, score = keeps.sum(axis=1), can_be_wrong(labels), np.where(result > 0, best, 0)
    return {"errors": int(erred.sum()), "positions": len(labels),
            "by_result": {"won": count(result > 0), "drawn": count(result == 0)},
            "by_keeping_moves": {"1": count(decidable & (kept_by == 1)), "2": count(decidable & (kept_by == 2)),
                                 "3+": count(decidable & (kept_by >= 3))},
            "won_by_score": {"1": count(score == 1), "2": count(score == 2), "3": count(score == 3),
                             "4+": count(score >= 4)},
            "raw_policy_errs_too": int((erred & (np.sign(labels[rows, policy_move]) < result)).sum()),
            "value_prefers_the_error": int((erred & value_prefers).sum())}


def format_breakdown(results: dict) -> str:
    """The --breakdown blocks: one per set, errors of positions of each kind."""
    def part(label: str, errors: int, positions: int) -> str:
        return f"{label} {errors} of {positions}" + (f" ({100 * errors / positions:.1f}%)" if positions else "")

    meta, lines = results.get("_meta", {}), []
    for name, r in results.items():
        if name.startswith("_") or "breakdown" not in r:
            continue
        b = r["breakdown"]
        lines += [f"{name}: MCTS-{meta.get('simulations')} errs on {b['errors']} of {b['positions']}",
                  "  by result         " + ", ".join(part(k, *v) for k, v in b["by_result"].items()),
                  "  by keeping moves  " + ", ".join(part(f"{k} {'move' if k == '1' else 'moves'}:", *v)
                                                     for k, v in b["by_keeping_moves"].items()),
                  "  wins by score     " + ", ".join(part(f"{k}:", *v) for k, v in b["won_by_score"].items())
                  + "  (1: the win comes as the board fills)",
                  (f"  whose judgement   the raw policy errs on {b['raw_policy_errs_too']} of the {b['errors']}; the "
                   f"value head rates the erring move's position above every keeping move's on "
                   f"{b['value_prefers_the_error']}")]
    return "\n".join(lines)


def evaluate(evaluator, sets: list[PonsSet], simulations: int, c_puct: float = 1.5, breakdown: bool = False) -> dict:
    """Weak and strong error of the raw policy and of MCTS per set, plus totals and timing; with ``breakdown``,
    also where MCTS errs (where_mcts_errs)."""
    game = ConnectFour()
    mcts = BatchedMCTS(game, evaluator, c_puct=c_puct)
    started = time.perf_counter()
    results: dict = {}
    for s in sets:
        states = game.states_from_moves(s.moves)
        logits, _ = evaluator(game.encode(states))
        policy_move = masked_softmax(logits, game.legal_mask(states)).argmax(axis=1)
        mcts_move = mcts.search(states, simulations, add_noise=False).best_moves()
        pw, ps = grade(s.labels, policy_move)
        mw, ms = grade(s.labels, mcts_move)
        decidable = can_be_wrong(s.labels)
        mwd = grade(s.labels[decidable], mcts_move[decidable])[0] if decidable.any() else 0.0
        results[s.name] = {"policy_weak": pw, "policy_strong": ps, "mcts_weak": mw, "mcts_strong": ms,
                           "mcts_weak_decidable": mwd, "positions": len(s.moves),
                           "decidable_positions": int(decidable.sum())}
        if breakdown:
            results[s.name]["breakdown"] = where_mcts_errs(evaluator, game, states, s.labels, mcts_move, policy_move)
    results["_meta"] = {"simulations": simulations, "seconds": time.perf_counter() - started}
    if hasattr(evaluator, "numbers"):  # a NetworkEvaluator: fp32, bf16 or int8 (tests pass plain functions)
        results["_meta"]["precision"] = evaluator.numbers
    return results


def format_table(results: dict) -> str:
    rows = [(f"{'set':<14} {'n':>5} {'policy weak':>12} {'policy strong':>14} {'mcts weak':>10} {'mcts strong':>12}"
             f" {'mcts weak where a move can be wrong':>36}")]
    for name, r in results.items():
        if name.startswith("_"):
            continue
        rows.append(f"{name:<14} {r['positions']:>5} {100 * r['policy_weak']:>11.1f}% {100 * r['policy_strong']:>13.1f}%"
                    f" {100 * r['mcts_weak']:>9.1f}% {100 * r['mcts_strong']:>11.1f}%"
                    f" {100 * r['mcts_weak_decidable']:>24.1f}% of {r['decidable_positions']:>5}")
    meta = results.get("_meta", {})
    numbers = f" in {meta['precision']}" if "precision" in meta else ""
    rows.append(f"(MCTS at {meta.get('simulations')} simulations{numbers}, graded by bitbully; "
                f"{meta.get('seconds', 0):.0f} s)")
    return "\n".join(rows)


def summary(results: dict) -> dict[str, float]:
    """Flat metrics for stats.jsonl / TensorBoard: eval/<set>/<kind>."""
    out = {}
    for name, r in results.items():
        if name.startswith("_"):
            continue
        for k in ("policy_weak", "policy_strong", "mcts_weak", "mcts_strong", "mcts_weak_decidable"):
            out[eval_key(name, k)] = r[k]
    return out


@functools.lru_cache(maxsize=2)
def _worker_sets(pons_dir: str, positions: int) -> list[PonsSet]:
    """The evaluation worker lives for the whole run: read and label the sets once, not every evaluation."""
    return load_sets(find_pons_dir(pons_dir), positions)


def evaluate_weights(state_dict: dict, model_cfg: dict, pons_dir: str, positions: int, simulations: int,
                     c_puct: float, precision: str = "auto") -> dict:
    """Process-pool entry: rebuild the net from a plain state dict and grade it (one thread)."""
    import torch

    from .hardware import inference_dtype
    from .inference import NetworkEvaluator
    from .model import build_model

    torch.set_num_threads(1)
    model = build_model(ConnectFour(), model_cfg["channels"], model_cfg["blocks"])
    model.load_state_dict(state_dict)
    sets = _worker_sets(pons_dir, positions)
    return evaluate(NetworkEvaluator(model.eval(), inference_dtype(precision)), sets, simulations, c_puct)


