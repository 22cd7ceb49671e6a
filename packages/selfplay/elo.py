"""Score intervals and an Elo ladder fitted to every pairing played.

The score of a player is (wins + draws / 2) / games. Its interval is Wilson's 95% score
interval on that proportion (draws count as half a success), which stays inside [0, 1] and is
sensible at 0% and 100%, where the normal approximation collapses to a point.

The ladder is a Bradley-Terry model on the Elo scale, P(i beats j) = 1 / (1 + 10^((r_j - r_i) / 400)),
fitted by maximum likelihood (Newton's method) over all pairings at once, draws as half a win for
each side, with one player (``random``) held at 0. A 100% score has no finite maximum, so every
pairing played also counts one virtual draw (PRIOR_DRAWS): a 100-0 result then reads as a gap of
about 920 Elo, a 10-0 one as about 520, rather than infinity.
"""

from __future__ import annotations

import math

import numpy as np

ELO_PER_NAT = 400 / math.log(10)
PRIOR_DRAWS = 1.0  # virtual draws per pairing played: keeps a 100% score finite


def score(wins: int, draws: int, losses: int) -> float:
    games = wins + draws + losses
    return (wins + draws / 2) / games if games else float("nan")


def wilson(wins: int, draws: int, losses: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval (95% by default) on the score, draws as half a win."""
    n = wins + draws + losses
    if n == 0:
        return 0.0, 1.0
    p = (wins + draws / 2) / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def fit_elo(results: dict[tuple[str, str], tuple[int, int, int]], anchor: str = "random",
            prior_draws: float = PRIOR_DRAWS) -> dict[str, tuple[float, float]]:
    """{player: (Elo, standard error)} from {(a, b): (a's wins, draws, a's losses)}, ``anchor`` at 0 (error 0).

    ValueError when the anchor played no game or some player is not linked to it by games played.
    """
    names = sorted({p for pair in results for p in pair})
    if anchor not in names:
        raise ValueError(f"the anchor {anchor!r} played no game: the ladder has no zero")
    index = {name: i for i, name in enumerate(names)}
    m = len(names)
    points = np.zeros((m, m))  # points[i, j]: what i scored against j, virtual draws included
    for (a, b), (w, d, losses) in results.items():
        i, j = index[a], index[b]
        points[i, j] += w + d / 2 + prior_draws / 2
        points[j, i] += losses + d / 2 + prior_draws / 2
    games = points + points.T
    free = np.array([name != anchor for name in names])
    theta = np.zeros(m)  # natural-log strengths
    for _ in range(200):
        p = 1 / (1 + np.exp(theta[None, :] - theta[:, None]))  # p[i, j] = P(i beats j)
        gradient = (points - games * p).sum(axis=1)
        curvature = games * p * (1 - p)
        information = np.diag(curvature.sum(axis=1)) - curvature  # minus the Hessian
        reduced = information[np.ix_(free, free)]
        if np.linalg.matrix_rank(reduced) < free.sum():
            raise ValueError("some players are not linked to the anchor by any game: the ladder is undefined")
        step = np.linalg.solve(reduced, gradient[free])
        step = np.clip(step, -2.0, 2.0)  # Newton from 0 can overshoot on lopsided scores
        theta[free] += step
        if np.abs(step).max() < 1e-9:
            break
    covariance = np.linalg.inv(reduced)
    sd = np.zeros(m)
    sd[free] = np.sqrt(np.diag(covariance))
    return {name: (float(theta[i] * ELO_PER_NAT), float(sd[i] * ELO_PER_NAT)) for i, name in enumerate(names)}
