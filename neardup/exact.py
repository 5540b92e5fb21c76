"""The exact report: every pair at or above a threshold of the report's own similarity, found
without sketches, so that a report's pairs can be held against all of them.

Blocking that cannot miss (prefix filtering: Bayardo et al., "Scaling up all pairs similarity
search", 2007). The shingles are ordered from rarest to most common, one order for all sets. A
set's prefix is its first shingles in that order, up to where what is left of the set (its
suffix) could no longer reach the threshold alone: for Jaccard, fewer than t|x| shingles
(similarity <= shared / |x|); for the weighted cosine, a suffix whose share of the set's norm is
below t (Cauchy-Schwarz: the shared part of the cosine is at most that share), or whose
shingles' largest possible part of any cosine sums below t (AllPairs' maximum weights). Two sets
at or above t share a shingle in both prefixes: were every shared shingle past the end of one
prefix (the one that ends first in the order), all of them would lie in that set's suffix. Every
pair of contents sharing a prefix shingle whose sizes (or norms) allow t is then measured as a
report measures it, the same floats. Memory holds every content's shingles and the pairs of each
chunk, and the pairs of a common shingle grow with the square of the records: for up to a few
hundred thousand short records, or tens of thousands of long ones.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from itertools import combinations

import numpy as np

from . import _kernels
from .fingerprint import (
    FingerprintParams,
    Numerals,
    TokenField,
    pair_similarities,
    shared_counts,
    shingle_numbers,
    token_keys,
    word_edit_distances,
)
from .ordering import lexsort
from .progress import Bar, progress_bar
from .report import Pair, in_order
from .searcher import MatchRules
from .stores import StoredRecord

PAIRS_PER_STEP = 4_000_000  # pairs sharing a prefix shingle, measured at once (32 MB a side)
# Prefixes are made a little longer than the bound needs, so that rounding can never cut one
# short of a pair whose similarity equals the threshold.
_SLACK = 1e-9

# The weight of each of a store's distinct shingles (their hashes): how the weighted
# similarity is weighed (the store's document frequencies, as a report weighs them).
Weigh = Callable[[np.ndarray], np.ndarray]


def exact_pairs(
    records: Sequence[StoredRecord],
    params: FingerprintParams,
    rules: MatchRules,
    weigh: Weigh | None = None,
    progress: bool = False,
) -> list[Pair]:
    """Every pair of ``records`` whose similarity (``rules.similarity``: Jaccard of the shingle
    sets, or the weighted cosine with ``weigh``'s weights) is at or above ``rules.threshold``
    and that passes ``rules``: records of one content as exact pairs, the others as near ones,
    with the tokens of the rules' method they share, as a report counts them. Sorted as a
    report sorts its pairs. ``progress`` shows a progress bar of the contents joined on stderr."""
    threshold = rules.threshold
    if not threshold:
        raise ValueError("the exact report needs a threshold above 0")
    groups: dict[str, list[int]] = defaultdict(list)  # MD5: the records holding that content
    for n, record in enumerate(records):
        groups[record.md5].append(n)
    heads = [members[0] for members in groups.values()]
    contents = [records[n].content for n in heads]
    numbers, offsets, distinct = shingle_numbers(contents, params)
    weights = None
    if rules.similarity != "jaccard":
        if weigh is None:
            raise ValueError("the weighted similarity needs the store's weights")
        weights = weigh(distinct)
    first_words = None
    if rules.first_word:
        first_words = np.unique([records[n].first_word for n in heads], return_inverse=True)[1]
    with progress_bar(progress, total=len(contents), desc="joining", unit=" contents") as bar:
        low, high, similarities = _passing_pairs(
            numbers, offsets, len(distinct), weights, threshold, first_words, bar,
            rules.numerals_of(contents),
        )  # fmt: skip
    shared, held = _shared_tokens(contents, params, TokenField(rules.method), low, high)
    distances = word_edit_distances(contents, low.tolist(), high.tolist())
    members = list(groups.values())
    pairs = [
        Pair(records[a].id, records[b].id, distance, similarity, count, "near")
        for x, y, similarity, count, distance in zip(
            low.tolist(), high.tolist(), similarities.tolist(), shared.tolist(), distances,
            strict=True,
        )
        if rules.accepts(distance, similarity)
        for a in members[x]
        for b in members[y]
    ]  # fmt: skip
    pairs += [
        Pair(records[a].id, records[b].id, 0, 1.0, int(held[g]), "exact")
        for g, group in enumerate(members)
        if rules.accepts(0, 1.0)
        for a, b in combinations(group, 2)
    ]
    return in_order(pairs)


def _passing_pairs(
    numbers: np.ndarray,
    offsets: np.ndarray,
    distinct: int,
    weights: np.ndarray | None,
    threshold: float,
    first_words: np.ndarray | None,
    bar: Bar,
    numerals: Numerals | None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(low, high, similarity) of every pair of sets at or above ``threshold`` (with equal
    ``first_words``, when given), low < high; ``bar`` counts the sets whose pairs are
    measured. With ``numerals`` the weighted similarity is multiplied by their agreement, at
    most 1, so the prefixes of the shingles' weights alone find every pair that reaches it."""
    prefixes, totals = _prefixes(numbers, offsets, distinct, weights, threshold)
    share = threshold if weights is None else threshold * threshold
    found_low, found_high, found = [], [], []
    for low, high, sets in _prefix_pairs(*prefixes, len(offsets) - 1):
        # Similarity is at most (lighter / heavier) ** (1 or 1/2): the length filter.
        lighter = np.minimum(totals[low], totals[high])
        kept = lighter >= share * np.maximum(totals[low], totals[high]) * (1 - _SLACK)
        if first_words is not None:
            kept &= first_words[low] == first_words[high]
        low, high = low[kept], high[kept]
        similarities = pair_similarities(numbers, distinct, weights, offsets, low, high, numerals)
        passing = similarities >= threshold
        found_low.append(low[passing])
        found_high.append(high[passing])
        found.append(similarities[passing])
        bar.update(sets)
    low, high, similarities = (
        np.concatenate(parts) if parts else np.empty(0, dtype)
        for parts, dtype in ((found_low, np.int64), (found_high, np.int64), (found, np.float64))
    )
    return low, high, similarities


def _prefixes(
    numbers: np.ndarray,
    offsets: np.ndarray,
    distinct: int,
    weights: np.ndarray | None,
    threshold: float,
) -> tuple[tuple[np.ndarray, np.ndarray], np.ndarray]:
    """((shingle rank, set) of every shingle in a set's prefix, by set, then rarest first;
    each set's mass: its size for Jaccard, its squared norm for the cosine)."""
    sizes = np.diff(offsets)
    owner = np.repeat(np.arange(len(sizes)), sizes)
    mass = np.ones(len(numbers)) if weights is None else weights[numbers] ** 2
    totals = np.bincount(owner, mass, len(sizes))
    # Jaccard: shared / |x| bounds it, so a suffix needs t|x| shingles; the cosine:
    # Cauchy-Schwarz bounds it by the suffix's share of the norm, so it needs t^2 |x|^2.
    limits = [(mass, (threshold if weights is None else threshold * threshold) * totals)]
    if weights is not None:
        # And by the sum of w^2 / (|x| |y|) over the suffix, |y| the least norm of a set
        # holding the shingle: tighter for long sets, whose every shingle is a small part of
        # the norm (AllPairs' maximum weights).
        norms = np.sqrt(totals)
        least = np.full(distinct, np.inf)
        np.minimum.at(least, numbers, norms[owner])
        limits.append((mass / least[numbers], threshold * norms))
    rarity = np.bincount(numbers, minlength=distinct)  # the sets holding each shingle
    rank = np.empty(distinct, dtype=np.int64)
    rank[np.argsort(rarity, kind="stable")] = np.arange(distinct)  # of equals, the first
    ranked = rank[numbers]
    order = lexsort((ranked, owner))  # each set's shingles, rarest first
    in_prefix = np.ones(len(numbers), dtype=bool)
    for values, needed in limits:
        running = np.concatenate([[0.0], np.cumsum(values[order])])
        suffix = running[offsets[1:]][owner] - running[:-1]  # from each shingle on
        in_prefix &= suffix >= needed[owner] * (1 - _SLACK)
    return (ranked[order][in_prefix], owner[in_prefix]), totals


def _prefix_pairs(
    shingle: np.ndarray, member: np.ndarray, sets: int
) -> Iterator[tuple[np.ndarray, np.ndarray, int]]:
    """Every pair of sets (low, high) that holds one of the same ``shingle`` (prefix entries,
    each of its ``member`` set, by set), once, the pairs of a range of high sets at a time (at
    most PAIRS_PER_STEP, or one set's), with how many sets the range holds."""
    by_shingle = lexsort((member, shingle))  # the buckets: each shingle's sets, ascending
    new_bucket = np.diff(shingle[by_shingle], prepend=-1) != 0
    starts = np.flatnonzero(new_bucket)
    bucket = np.empty(len(by_shingle), dtype=np.int64)
    bucket[by_shingle] = np.cumsum(new_bucket) - 1
    at = np.empty(len(by_shingle), dtype=np.int64)  # each entry's place in its bucket
    at[by_shingle] = np.arange(len(by_shingle)) - starts[bucket[by_shingle]]
    members = member[by_shingle].astype(np.int32)
    starts = np.append(starts, len(members)).astype(np.int64)
    entry_offsets = np.concatenate([[0], np.cumsum(np.bincount(member, minlength=sets))])
    # A set pairs with at most the sets before it in its buckets.
    bound = np.concatenate([[0], np.cumsum(np.bincount(member, at, sets))]).astype(np.int64)
    marks = np.zeros(sets, dtype=np.int32)
    first = 0
    while first < sets:
        last = int(np.searchsorted(bound, bound[first] + PAIRS_PER_STEP, side="right")) - 1
        last = min(max(last, first + 1), sets)
        out = np.empty(int(bound[last] - bound[first]), dtype=np.int64)
        written = _kernels.prefix_pairs(
            members, starts, bucket, at, entry_offsets, first, last, marks, out
        )
        yield out[:written] >> 32, out[:written] & 0xFFFFFFFF, last - first
        first = last


def _shared_tokens(
    contents: list[str],
    params: FingerprintParams,
    field: TokenField,
    low: np.ndarray,
    high: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """(the ``field`` tokens each pair of contents shares, as a report counts them: 0 for a
    pair no candidate query could find; the tokens each content holds)."""
    keys, held = token_keys(contents, params, field)
    distinct, numbers = np.unique(keys, return_inverse=True)
    offsets = np.concatenate([[0], np.cumsum(held)])
    return shared_counts(numbers, len(distinct), offsets, low, high), held
