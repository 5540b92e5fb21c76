"""Choosing LSH bands for a similarity threshold (Mining of Massive Datasets, ch. 3.4).

With B bands of r rows, a pair of true Jaccard similarity s shares at least one band token with
probability P(s) = 1 - (1 - s^r)^B: the S-curve. For a threshold t, the false-negative mass is the
area between P and 1 above t (pairs that should be found and may not be), and the false-positive
mass is the area under P below t (pairs that become candidates for nothing). Pure functions.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import NamedTuple

import numpy as np

from .phrases import counted

_GRID = 2001  # integration points over [0, 1]


def candidate_probability(s: float | np.ndarray, bands: int, rows: int) -> float | np.ndarray:
    """P(a pair of Jaccard similarity s becomes a candidate) with ``bands`` bands of ``rows``."""
    return 1.0 - (1.0 - np.power(s, rows)) ** bands


def even_odds(bands: int, rows: int) -> float:
    """The Jaccard similarity of a pair that ``bands`` bands of ``rows`` make a candidate half
    the time: less alike pairs mostly are not."""
    return float((1.0 - 0.5 ** (1 / bands)) ** (1 / rows))


def estimated_candidate_recall(jaccards: np.ndarray, bands: int, rows: int) -> float | None:
    """The share of the pairs at or above a threshold that the bands make candidates, estimated
    from the candidates alone (Horvitz-Thompson): a candidate whose shingle sets have Jaccard s
    stands for 1 / P(s) such pairs, the others being those its bands missed. A weighted
    similarity reaches a threshold with a plain Jaccard far below it where rare shingles are
    shared, so P at the threshold says little; each pair's own Jaccard does. None without
    pairs."""
    if not len(jaccards):
        return None
    return float(len(jaccards) / (1.0 / candidate_probability(jaccards, bands, rows)).sum())


def bucket_pairs_per_pair(band_keys: np.ndarray) -> float | None:
    """The pairs of records that one bucket holds, summed over the bands (what a report joins),
    per pair of records, of a records x bands array of band keys; None for fewer than two
    records."""
    records = len(band_keys)
    if records < 2:
        return None
    shared = 0
    for column in np.asarray(band_keys).T:
        _, sizes = np.unique(column, return_counts=True)
        shared += int((sizes * (sizes - 1) // 2).sum())
    return shared / (records * (records - 1) / 2)


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


# --- a threshold read from the data -----------------------------------------------------------

HISTOGRAM_BINS = 50  # bins of 0.02 over [0, 1]
MIN_CANDIDATES = 20  # fewer candidate pairs than this make no histogram to read
# Where the tail of one hump ends is read from at least this many pairs: a few dozen, as ten
# records make, hold less than a pair a bin right beside their peak.
MIN_TAIL_PAIRS = 1_000
# A hump above a valley holds this many times the pairs of the valley's floor bin, and at least
# MIN_CANDIDATES: a share of all the pairs would not do, as a complete report's candidates grow
# with the square of the records and its near-duplicates with the records.
MIN_UPPER_MASS = 10
# A valley dips to at most this share of the lower of the highest bins on either side of it.
# Every dataset measured (benchmarks/README.md) gets the same threshold for any share from 0.55
# to 0.7 but a million generated person records, whose valley between the steep tail of
# records that share a city and the flat hump of their near-duplicates dips to 0.53: 0.5 took
# it for no valley (F1 0.499 at the fallback, 0.949 at the valley).
VALLEY_DEPTH = 0.6
# The least similarity of the median pair above a valley: two records whose shared shingles
# are less than half their weight are not copies of one another. Records with no duplicates
# can still fall in two humps, both low (10,000 generated people with their copies taken out:
# pairs of different people in one city peak at 0.22, above a valley at 0.15), and the valley
# below such a hump would report most pairs of a city.
MIN_HUMP = 0.5


def similarity_histogram(
    similarities: np.ndarray, weights: np.ndarray | None = None, bins: int = HISTOGRAM_BINS
) -> np.ndarray:
    """How many candidate pairs fall in each of ``bins`` equal bins of [0, 1]; a pair of
    contents counts ``weights`` times (the pairs of records holding them)."""
    counts, _ = np.histogram(
        np.asarray(similarities, dtype=np.float64), bins=bins, range=(0, 1), weights=weights
    )
    return counts.astype(np.int64)


@dataclass(frozen=True)
class ThresholdChoice:
    """The threshold ``auto`` chose from a histogram of candidate similarities, and why."""

    threshold: float
    from_data: bool  # False: the fallback
    reason: str


# How a threshold read where no valley parts the pairs is described (see choose_threshold): every
# such reason starts with NO_VALLEY.
NO_VALLEY = "no valley"
NEAREST_SPLIT = f"{NO_VALLEY}; Otsu's split of each content's nearest similarity"
NEAREST_VALLEY = f"{NO_VALLEY}; the valley of each content's nearest similarity"
TAIL_END = f"{NO_VALLEY}; where the tail of the pairs ends"
KNEE = f"{NO_VALLEY}; where the falling tail bends into a plateau"
PLATEAU_SPLIT = f"{NO_VALLEY}; Otsu's split of a plateau above a falling tail"


def choose_threshold(
    histogram: np.ndarray,
    fallback: float,
    nearest: np.ndarray | None = None,
    least: int = MIN_CANDIDATES,
) -> ThresholdChoice:
    """The threshold in the valley between two humps of candidate similarities: near-duplicates
    high up, and records that merely share common shingles (a street, a template) lower down.

    On the histogram smoothed over 3 bins, every local minimum is a possible valley. It counts
    when it dips to at most VALLEY_DEPTH of the height of the highest bins on either side, at
    least MIN_UPPER_MASS times the pairs of its floor lie above it, and MIN_CANDIDATES (a dip in
    the tail of one hump, with a handful of pairs beyond it, is no valley), and the median of
    those pairs and the peak of the hump above it are at MIN_HUMP or more (different models
    titled alike make a hump of their own at 0.39, with copies spread over the rest up to 1:
    a valley below it is no boundary of copies). Of those, the valley below the hump highest
    up wins, since the near-duplicates are the hump nearest 1; then the deepest (its height
    against the lower of the two peaks), then the one with the widest floor, then the one with
    more pairs on its lighter side. The winner's middle is the threshold.

    With no valley, ``nearest`` (below) may dip between the contents that have a copy and
    those that have none: Otsu's split of it is then the threshold, when it passes the tests
    of a hump above a valley.

    Else near-duplicates may still stand out as a plateau above a falling tail (Cora's
    references, in groups of up to 240, spread evenly from 0.3 to 1 when weighed by whole
    document frequencies; Abt-Buy's products): Otsu's split, the one threshold that leaves the
    least variance within the pairs on either side, is the threshold when the pairs above it
    pass a valley's tests of an upper hump. Where a tail far heavier than the plateau holds
    Otsu's split down in itself, the plateau shows in the log of the pairs: they fall from
    their peak and bend into it (:func:`_knee`: people in groups of ten, each record's copies
    far apart; Abt-Buy's products), and the bend is the threshold.

    Pairs may also fall steadily with near-duplicates spread through them (listings of two
    shops: Amazon-Google, Walmart-Amazon), where no split of the pairs stands out. ``nearest``
    counts the contents by the similarity of the most similar other one (1 for a content held
    by several records): the contents that have a near-duplicate against those that have none,
    one count per content rather than a square of them. Otsu's split of it is the threshold
    when the contents above it pass the same tests.

    Otherwise there are not two kinds of records: the pairs fall from one hump, and the
    threshold is where its tail thins out (:func:`_tail_end`). Those are records with no
    near-duplicates, or too few to make a hump: no two records held are as similar as that, so
    a record that is is unlike the rest, and a report lists the few above it. A fixed 0.5
    listed 93 pairs of 10,000 generated people with their copies taken out, where the tail's
    end lists 1, and 5 copies put back are 5 of 98 pairs at 0.5 against 5 of 6. The tail is
    read from MIN_TAIL_PAIRS pairs or more (a report of a small store reads every pair of it
    then). Pairs that never thin out on their way to 1, or fewer than ``least``, give
    ``fallback``.
    Measured on Febrl 1, 3, 4, the Kijiji ads, generated documents, 13 public benchmarks and
    the same with their duplicates taken out (benchmarks/README.md).
    """
    counts = np.asarray(histogram, dtype=np.float64)
    bins, total = len(counts), counts.sum()
    too_few = ThresholdChoice(
        fallback, False, f"{counted(int(total), 'candidate pair')}, too few to read"
    )
    if total < least:
        return too_few
    smooth = _smoothed(counts)
    below = int(MIN_HUMP * bins)
    best: tuple[tuple[int, float, float], int, int] | None = None  # rank, valley bin, peak bin
    low_hump = 0  # the peak of the highest hump of pairs too unlike to be near-duplicates
    for start, end in _minimum_runs(smooth):
        right = end + int(smooth[end:].argmax())
        lower_peak = _lower_peak(smooth, start, end)
        floor = smooth[start]
        if floor > VALLEY_DEPTH * lower_peak or not _heavy_above(counts, end, floor):
            continue
        if _median_above(counts, end) < MIN_HUMP or right < below:
            if end < below:  # its peak under MIN_HUMP: copies above it are no part of it
                low_hump = max(low_hump, end + int(smooth[end:below].argmax()))
            continue
        # The hump highest up first, then the deepest valley below it, then the widest floor
        # (of two empty gaps, the wider one parts the humps), then the heavier split.
        lighter = min(counts[:start].sum(), counts[end:].sum())
        rank = (right, -smooth[start] / lower_peak, end - start, lighter)
        if best is None or rank > best[0]:
            best = (rank, (start + end - 1) // 2, right)
    if best is None:
        if nearest is not None and (split := _split_where_it_dips(nearest)):
            return ThresholdChoice(split / bins, True, NEAREST_VALLEY)
        if split := _upper_split(counts):
            return ThresholdChoice(split / bins, True, PLATEAU_SPLIT)
        if knee := _knee(counts):
            return ThresholdChoice(round((knee + 0.5) / bins, 2), True, KNEE)
        if nearest is not None and (split := _upper_split(nearest)):
            return ThresholdChoice(split / bins, True, NEAREST_SPLIT)
        if total < MIN_TAIL_PAIRS:
            return too_few
        if end := _tail_end(counts, low_hump):
            return ThresholdChoice(end / bins, True, TAIL_END)
        return ThresholdChoice(fallback, False, f"{NO_VALLEY} between two humps")
    _, valley, peak = best
    peaks = f"below the hump at {(peak + 0.5) / bins:.2f}"
    return ThresholdChoice(round((valley + 0.5) / bins, 2), True, f"the valley {peaks}")


LINKS_SPLIT = "Otsu's split of the links' similarities, where they dip"


def choose_link_threshold(histogram: np.ndarray) -> ThresholdChoice:
    """The least similarity of a link between two sources (:mod:`neardup.linkage`), read from
    the histogram of their mutual best matches. Where records of the linked file have no
    counterpart, they link to the stored record most like them that has no closer record, and
    those links lie below the links of records that have one: the histogram dips between
    the two kinds, and Otsu's split of it is the threshold when it passes the tests of a hump
    above a valley and dips there, as each content's nearest similarity is read
    (:func:`choose_threshold`). With no dip, every mutual best match is a link (0), and with
    fewer than MIN_CANDIDATES links (a few records linked at a time) there is none to read:
    the reason says so, so that a caller of a single record knows to give a threshold."""
    links = int(np.sum(histogram))
    if links < MIN_CANDIDATES:
        few = f"{counted(links, 'link')}, too few to read a threshold from: every one kept"
        return ThresholdChoice(0.0, False, few)
    if split := _split_where_it_dips(histogram):
        return ThresholdChoice(split / len(histogram), True, LINKS_SPLIT)
    return ThresholdChoice(0.0, False, "no dip in the links' similarities: every one kept")


class EveryPair(NamedTuple):
    """The histograms of every pair of a store's contents (or of a sample of them), as a
    report counts its candidates: each pair weighs the pairs of records holding it."""

    histogram: np.ndarray
    nearest: np.ndarray  # each content's most similar other one, among these
    contents: int  # the contents whose pairs these are
    of: int  # the store's contents: more where these are an evenly spaced sample


def choose_from_every_pair(candidates: int, every: EveryPair, fallback: float) -> ThresholdChoice:
    """The threshold read as :func:`choose_threshold` reads it, from the histograms of every
    pair of a store's contents, or of an evenly spaced sample of them, when its ``candidates``
    pairs were too few to read it from (a small store, or one of records all unlike one
    another); ``fallback`` for fewer than MIN_TAIL_PAIRS pairs in all (a few dozen records).
    From a sample, the tail ends where its pairs thin out: no more than a pair or so of the
    sample's millions is as similar as that."""
    pairs = int(np.sum(every.histogram))
    if pairs < MIN_TAIL_PAIRS:
        few = (
            f"{counted(candidates, 'candidate pair')}, {counted(pairs, 'pair')} of records in "
            "all: too few to read"
        )
        return ThresholdChoice(fallback, False, few)
    read = choose_threshold(every.histogram, fallback, every.nearest)
    if every.contents < every.of:
        pairs_read = (
            f"{counted(pairs, 'pair')} of records in a sample of {every.contents:,} of the store's "
            f"{every.of:,} contents"
        )
    else:
        pairs_read = f"all {counted(pairs, 'pair')} of records"
    return replace(
        read,
        reason=f"{counted(candidates, 'candidate pair')}, too few; {pairs_read}: {read.reason}",
    )


def _upper_split(histogram: np.ndarray) -> int:
    """Otsu's split of ``histogram`` when what lies above it passes the tests of a hump of
    near-duplicates (:func:`_hump_above`), else 0."""
    counts = np.asarray(histogram, dtype=np.float64)
    split = _otsu_split(counts)
    return split if split and _hump_above(counts, split, _smoothed(counts)[split]) else 0


def _split_where_it_dips(histogram: np.ndarray) -> int:
    """:func:`_upper_split` of ``histogram`` where the histogram dips there (:func:`_dips`):
    two kinds of contents or links, not one spread; else 0."""
    split = _upper_split(histogram)
    return split if split and _dips(histogram, split) else 0


# A plateau of near-duplicates above a falling tail: the line fitted to the log of the pairs
# above a knee falls at most this share as fast as the line below it. Groups of ten records
# with every record's copies far apart (historical people: 0.1 to 1) bend at 0.24 of the
# tail's fall; two shops' listings, which fall steadily, fall faster above any break.
# MIN_PLATEAU_BINS is also the width of a shoulder read where the pairs fall again before 1.
KNEE_FLATTENING = 0.5
MIN_PLATEAU_BINS = 8  # the least width of a plateau, in bins


def _knee(counts: np.ndarray) -> int:
    """The bin where the log of the pairs, falling from their peak, bends into a plateau: the
    break of the two lines that fit it best (least squares), the upper running to the last
    pair (a plateau up to 1: historical people, Abt-Buy); else the first bin whose next
    MIN_PLATEAU_BINS bins bend so (a shoulder, the pairs falling again before 1: payments
    linked between two ledgers). It bends when the upper line falls at most KNEE_FLATTENING as
    fast as the lower (their slopes by Theil-Sen, the median of the slopes of every two bins,
    which a few bins at either end do not sway), and counts when the pairs from it are
    MIN_UPPER_MASS or more a bin with their median at MIN_HUMP or above; 0 where none does."""
    smooth = _smoothed(counts)
    peak, last = int(smooth.argmax()), int(np.flatnonzero(counts)[-1])
    x = np.arange(peak, last + 1, dtype=np.float64)
    y = np.log1p(smooth[peak : last + 1])
    breaks = range(peak + 3, last - MIN_PLATEAU_BINS + 1)
    if not breaks:
        return 0
    whole = min(breaks, key=lambda b: _two_lines_error(x, y, b))
    for knee, upper_end in [(whole, last), *((b, b + MIN_PLATEAU_BINS) for b in breaks)]:
        below = _theil_sen(x[x <= knee], y[x <= knee])
        upper = (x >= knee) & (x <= upper_end)
        bends = below < 0 and _theil_sen(x[upper], y[upper]) > KNEE_FLATTENING * below
        # A log read from a pair or two a bin bends with noise: a plateau holds some pairs.
        heavy = counts[knee:].sum() >= MIN_UPPER_MASS * (len(counts) - knee)
        if bends and heavy and _median_above(counts, knee) >= MIN_HUMP:
            return knee
    return 0


def _two_lines_error(x: np.ndarray, y: np.ndarray, knee: float) -> float:
    """The squared error of a line fitted to the points up to ``knee`` and one from it on."""
    return sum(
        float(np.sum((np.polyval(np.polyfit(x[side], y[side], 1), x[side]) - y[side]) ** 2))
        for side in (x <= knee, x >= knee)
    )


def _theil_sen(x: np.ndarray, y: np.ndarray) -> float:
    """The median slope of every two points (Theil-Sen): a few outlying points do not sway it."""
    left, right = np.triu_indices(len(x), 1)
    return float(np.median((y[right] - y[left]) / (x[right] - x[left])))


def _tail_end(counts: np.ndarray, low_hump: int) -> int:
    """The bin where the pairs of unrelated records thin out: the first above the highest bin
    under MIN_HUMP, or the peak of a hump of them higher up (``low_hump``: every pair of fifty
    people peaks at 0, pairs of one town at 0.3), where the histogram smoothed over 3 bins
    holds less than a pair a bin; 0 when none lies under MIN_HUMP or the pairs never thin out."""
    below = int(MIN_HUMP * len(counts))
    if not counts[:below].any():
        return 0
    peak = max(int(counts[:below].argmax()), low_hump)
    # A smoothed bin b averages bins b-1..b+1: the tail ends at the first of those three.
    sparse = np.flatnonzero(_smoothed(counts)[peak + 1 : len(counts) - 1] < 1)
    return peak + int(sparse[0]) if len(sparse) else 0


def _dips(counts: np.ndarray, split: int) -> bool:
    """Whether the histogram smoothed over 3 bins dips at ``split`` to at most VALLEY_DEPTH of
    the lower of its highest bins on either side: two kinds, not one spread."""
    smooth = _smoothed(counts)
    return bool(smooth[split] <= VALLEY_DEPTH * _lower_peak(smooth, split, split))


def _lower_peak(smooth: np.ndarray, start: int, end: int) -> float:
    """The lower of the highest bins of ``smooth`` below ``start`` and from ``end`` on: what
    a floor between them is measured against."""
    return float(min(smooth[:start].max(), smooth[end:].max()))


def _smoothed(counts: np.ndarray) -> np.ndarray:
    """The histogram averaged over 3 bins: a valley or a split is read from it, not from the
    noise of single bins."""
    return np.convolve(counts, np.ones(3) / 3, mode="same")


def _hump_above(counts: np.ndarray, start: int, floor: float) -> bool:
    """Whether the pairs from bin ``start`` up are a hump of near-duplicates: at least
    MIN_UPPER_MASS times a ``floor`` bin's pairs, and MIN_CANDIDATES (more than the tail of the
    pairs below), with their median at MIN_HUMP or above."""
    return _heavy_above(counts, start, floor) and _median_above(counts, start) >= MIN_HUMP


def _heavy_above(counts: np.ndarray, start: int, floor: float) -> bool:
    """Whether the pairs from bin ``start`` up are at least MIN_UPPER_MASS times a ``floor``
    bin's pairs, and MIN_CANDIDATES."""
    return counts[start:].sum() >= max(MIN_CANDIDATES, MIN_UPPER_MASS * floor)


def _median_above(counts: np.ndarray, start: int) -> float:
    """The similarity of the median pair from bin ``start`` up (the middle of its bin)."""
    above = np.cumsum(counts[start:])
    return (start + int(np.searchsorted(above, above[-1] / 2)) + 0.5) / len(counts)


def _otsu_split(counts: np.ndarray) -> int:
    """The bin that starts the upper of the two classes with the most variance between them
    (Otsu, 1979), over the histogram's bin middles; 0 when the pairs fill one bin."""
    middles = (np.arange(len(counts)) + 0.5) / len(counts)
    below, mass_below = np.cumsum(counts)[:-1], np.cumsum(counts * middles)[:-1]
    above, mass_above = counts.sum() - below, (counts * middles).sum() - mass_below
    with np.errstate(divide="ignore", invalid="ignore"):
        between = below * above * (mass_below / below - mass_above / above) ** 2
    between = np.where((below > 0) & (above > 0), between, -1.0)
    return int(between.argmax()) + 1 if between.max() >= 0 else 0


def _minimum_runs(values: np.ndarray) -> list[tuple[int, int]]:
    """The local minima of ``values`` away from its ends, as [start, end) runs of equal values
    (a flat valley floor is one minimum)."""
    runs = []
    start = 1
    while start < len(values) - 1:
        end = start + 1
        while end < len(values) - 1 and values[end] == values[start]:
            end += 1
        if values[start - 1] > values[start] < values[end]:
            runs.append((start, end))
        start = end
    return runs
