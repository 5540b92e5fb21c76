"""Choosing LSH bands for a similarity threshold (Mining of Massive Datasets, ch. 3.4).

With B bands of r rows, a pair of true Jaccard similarity s shares at least one band token with
probability P(s) = 1 - (1 - s^r)^B: the S-curve. For a threshold t, the false-negative mass is the
area between P and 1 above t (pairs that should be found and may not be), and the false-positive
mass is the area under P below t (pairs that become candidates for nothing). Pure functions.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

_GRID = 2001  # integration points over [0, 1]


def candidate_probability(s: float | np.ndarray, bands: int, rows: int) -> float | np.ndarray:
    """P(a pair of Jaccard similarity s becomes a candidate) with ``bands`` bands of ``rows``."""
    return 1.0 - (1.0 - np.power(s, rows)) ** bands


@dataclass(frozen=True)
class BandChoice:
    bands: int
    rows: int
    false_negative_mass: float
    false_positive_mass: float

    @property
    def midpoint(self) -> float:
        """Where the S-curve is steepest, about (1/B)^(1/r)."""
        return (1.0 / self.bands) ** (1.0 / self.rows)

    def cost(self, false_negative_weight: float) -> float:
        return (
            false_negative_weight * self.false_negative_mass
            + (1 - false_negative_weight) * self.false_positive_mass
        )


def band_choices(threshold: float, num_hashes: int) -> list[BandChoice]:
    """Every bands x rows split of ``num_hashes``, with its error masses around ``threshold``."""
    s = np.linspace(0.0, 1.0, _GRID)
    below, above = s <= threshold, s >= threshold
    choices = []
    for bands in range(1, num_hashes + 1):
        if num_hashes % bands:
            continue
        rows = num_hashes // bands
        p = candidate_probability(s, bands, rows)
        choices.append(
            BandChoice(
                bands,
                rows,
                false_negative_mass=float(np.trapezoid(1.0 - p[above], s[above])),
                false_positive_mass=float(np.trapezoid(p[below], s[below])),
            )
        )
    return choices


def recommend_bands(
    threshold: float, num_hashes: int, false_negative_weight: float = 0.9
) -> BandChoice:
    """The split with the least weighted error mass. Missing a true pair is worse than checking
    a false candidate (the verification step removes those), so false negatives weigh 0.9."""
    return min(band_choices(threshold, num_hashes), key=lambda c: c.cost(false_negative_weight))


# The similarities at which the tuning table shows each split's S-curve.
TUNE_POINTS = (0.2, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95)


@dataclass(frozen=True)
class Tuning:
    """Every split of ``num_hashes`` for ``threshold``, and the recommended one."""

    threshold: float
    num_hashes: int
    choices: list[BandChoice]
    recommended: BandChoice


def tune(threshold: float, num_hashes: int) -> Tuning:
    choices = band_choices(threshold, num_hashes)
    return Tuning(threshold, num_hashes, choices, recommend_bands(threshold, num_hashes))
