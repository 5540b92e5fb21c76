"""A threshold from pairs a person judged: which pairs to show them, and what their answers say.

Where the similarities show no clear boundary between duplicates and the rest, a hundred
judged pairs place the threshold. The pairs are drawn from every similarity and, as
many again, from around the threshold read from the data, where a judgement moves it most.
Their answers give the chance that a pair of a given similarity is a duplicate (an isotonic
fit: it never falls as the similarity rises), and the histogram of every candidate pair turns
that chance into the precision, recall and F1 to expect at each threshold; the threshold is the
one whose expected F1 is highest, unless the threshold read from the data is expected to give
nearly as much (MIN_GAIN). Nothing here reads or writes a store.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import pairwise

import numpy as np

# The judged pairs move the threshold read from the data only where they expect more F1 than
# this from another: a hundred pairs place it to within about that, and where the data's
# threshold was right they would move it by their noise alone (Amazon-Google's median loss
# 0.018 -> 0.006 over 40 samples of a hundred; see benchmarks/README.md).
MIN_GAIN = 0.01
# The sample spreads half its pairs over this many strata of equal width from its floor to 1,
# and the other half over NEAR_STRATA strata within NEAR of the threshold read from the data.
STRATA = 10
NEAR_STRATA = 6
NEAR = 0.15


def pairs_to_judge(
    similarities: np.ndarray, count: int, threshold: float, floor: float, seed: int
) -> np.ndarray:
    """The positions of ``count`` of the pairs whose ``similarities`` are given (all of them
    where they are fewer), to show a person, in a random order: half from STRATA strata of
    [``floor``, 1], half from NEAR_STRATA strata within NEAR of ``threshold``, each stratum's
    pairs drawn at random, and a stratum's shortfall drawn from the rest of its span. The
    same ``seed`` draws the same pairs."""
    rng = np.random.default_rng(seed)
    free = np.ones(len(similarities), dtype=bool)
    near = (max(floor, threshold - NEAR), min(1.0, threshold + NEAR))
    for span, strata, share in [((floor, 1.0), STRATA, count // 2), (near, NEAR_STRATA, None)]:
        wanted = count - int((~free).sum()) if share is None else share
        _draw(similarities, free, wanted, span, strata, rng)
    return rng.permutation(np.flatnonzero(~free))


def _draw(
    similarities: np.ndarray,
    free: np.ndarray,
    count: int,
    span: tuple[float, float],
    strata: int,
    rng: np.random.Generator,
) -> None:
    """Draw ``count`` of the ``free`` pairs within ``span``, as evenly as they allow over
    ``strata`` strata of it, marking each drawn one as no longer free."""
    edges = np.linspace(span[0], span[1], strata + 1)
    edges[-1] = np.nextafter(edges[-1], np.inf)  # a pair at the top edge belongs to the last
    quotas = np.full(strata, count // strata) + (np.arange(strata) < count % strata)
    drawn = sum(
        _take(free, (similarities >= low) & (similarities < high), quota, rng)
        for quota, (low, high) in zip(quotas.tolist(), pairwise(edges), strict=True)
    )
    _take(free, (similarities >= edges[0]) & (similarities < edges[-1]), count - drawn, rng)


def _take(free: np.ndarray, within: np.ndarray, count: int, rng: np.random.Generator) -> int:
    """Draw ``count`` of the free pairs ``within`` (all where fewer); returns how many."""
    held = np.flatnonzero(free & within)
    drawn = rng.choice(held, min(count, len(held)), replace=False)
    free[drawn] = False
    return len(drawn)


def increasing_fit(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The least-squares fit of ``y`` over ``x`` that never decreases (pool adjacent
    violators): the distinct values of ``x``, ascending, and the fit at each."""
    values, inverse = np.unique(np.asarray(x, dtype=np.float64), return_inverse=True)
    sums = np.bincount(inverse, weights=np.asarray(y, dtype=np.float64))
    counts = np.bincount(inverse).astype(np.float64)
    blocks: list[list[float]] = []  # [sum, count, values pooled]
    for total, weight in zip(sums.tolist(), counts.tolist(), strict=True):
        blocks.append([total, weight, 1])
        while len(blocks) > 1 and blocks[-2][0] / blocks[-2][1] > blocks[-1][0] / blocks[-1][1]:
            total, weight, pooled = blocks.pop()
            blocks[-1] = [blocks[-1][0] + total, blocks[-1][1] + weight, blocks[-1][2] + pooled]
    fit = np.repeat([total / weight for total, weight, _ in blocks], [b[2] for b in blocks])
    return values, fit


@dataclass(frozen=True)
class Expected:
    """What a threshold should give, by the judged pairs: its precision, recall and F1 over
    the store's candidate pairs (exact copies aside)."""

    threshold: float
    precision: float
    recall: float
    f1: float


def expected_at(histogram: np.ndarray, chance: np.ndarray, threshold: float) -> Expected:
    """The precision, recall and F1 to expect at ``threshold`` of the candidate pairs
    counted in ``histogram``, of which a pair in bin b is a duplicate with ``chance[b]``: the
    bins from the first that lies wholly at or above it are listed."""
    counts = np.asarray(histogram, dtype=np.float64)
    first = min(math.ceil(threshold * len(counts) - 1e-9), len(counts))
    listed, right = counts[first:].sum(), (counts * chance)[first:].sum()
    true = (counts * chance).sum()
    precision = right / listed if listed else 1.0
    recall = right / true if true else 1.0
    f1 = 2 * right / (listed + true) if listed + true else 0.0
    return Expected(threshold, float(precision), float(recall), float(f1))


def chance_by_bin(similarities: np.ndarray, same: np.ndarray, bins: int) -> np.ndarray:
    """The chance that a pair in each of ``bins`` equal bins of [0, 1] is a duplicate, by the
    judged pairs' ``similarities`` and answers (``same``): the increasing fit at each bin's
    middle, held at its nearest judged value beyond them."""
    values, fit = increasing_fit(similarities, same)
    middles = (np.arange(bins) + 0.5) / bins
    return np.interp(middles, values, fit)


def best_threshold(histogram: np.ndarray, chance: np.ndarray) -> Expected:
    """The threshold (a bin's lower edge) whose expected F1 is highest; of equal ones, the
    highest, which lists the fewest pairs."""
    bins = len(histogram)
    expected = [expected_at(histogram, chance, edge / bins) for edge in range(1, bins)]
    return max(reversed(expected), key=lambda e: e.f1)


def judged_threshold(
    histogram: np.ndarray, chance: np.ndarray, read: float | None
) -> tuple[Expected, Expected | None]:
    """The threshold the judged pairs choose: :func:`best_threshold`, unless the threshold
    ``read`` from the data is expected to give within MIN_GAIN of its F1; and what ``read``
    is expected to give (None without it)."""
    best = best_threshold(histogram, chance)
    if read is None:
        return best, None
    kept = expected_at(histogram, chance, read)
    return (kept if best.f1 - kept.f1 <= MIN_GAIN else best), kept
