"""Rank agreement of two figure lists: Spearman's rho and Kendall's tau-b, without scipy.

Used to compare ``score_cycles`` with PyPTO SIM times (:mod:`opdesign.workflows.sim_rank`) and to fit the
cost-model parameters to them (:mod:`opdesign.tuning.model.calibration`).
"""

from __future__ import annotations


def average_ranks(values: list[float]) -> list[float]:
    """1-based ranks, ties get the mean of the ranks they span."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def spearman(x: list[float], y: list[float]) -> float | None:
    """Spearman's rho: the Pearson correlation of the average ranks (None below 2 pairs or a constant side)."""
    if len(x) != len(y):
        raise ValueError("spearman: x and y differ in length")
    if len(x) < 2:
        return None
    rx, ry = average_ranks(x), average_ranks(y)
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    sxy = sum((a - mx) * (b - my) for a, b in zip(rx, ry, strict=True))
    sxx = sum((a - mx) ** 2 for a in rx)
    syy = sum((b - my) ** 2 for b in ry)
    return None if sxx == 0 or syy == 0 else sxy / (sxx * syy) ** 0.5


def kendall(x: list[float], y: list[float]) -> float | None:
    """Kendall's tau-b: (concordant - discordant) / sqrt((n0 - ties_x)(n0 - ties_y))."""
    if len(x) != len(y):
        raise ValueError("kendall: x and y differ in length")
    n = len(x)
    if n < 2:
        return None
    conc = disc = tx = ty = 0
    for i in range(n):
        for j in range(i + 1, n):
            dx, dy = x[i] - x[j], y[i] - y[j]
            if dx == 0 and dy == 0:
                continue
            if dx == 0:
                tx += 1
            elif dy == 0:
                ty += 1
            elif (dx > 0) == (dy > 0):
                conc += 1
            else:
                disc += 1
    den = ((conc + disc + tx) * (conc + disc + ty)) ** 0.5
    return None if den == 0 else (conc - disc) / den
