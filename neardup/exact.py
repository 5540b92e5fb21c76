"""The exact baseline: every pair whose shingle sets have Jaccard similarity >= t, no sketches.

Blocking that cannot miss (Bayardo et al., "Scaling up all pairs similarity search", 2007):
order the shingles from rarest to most common; a set x can only reach Jaccard t with a set y
if they share one of x's first |x| - ceil(t|x|) + 1 shingles (its prefix), and if
t|x| <= |y| <= |x|/t (the length filter). Every candidate is then verified exactly. Memory holds
every record's shingle set, so this is for corpora up to tens of thousands of records: it tells
users what the sketches miss.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

import numpy as np

from .fingerprint import FingerprintParams, shingle_sets, word_edit_distances
from .report import Pair, in_order
from .searcher import MatchRules
from .stores import StoredRecord


def _prefix_length(size: int, threshold: float) -> int:
    return size - math.ceil(threshold * size - 1e-9) + 1


def exact_pairs(
    records: Sequence[StoredRecord], params: FingerprintParams, rules: MatchRules
) -> list[Pair]:
    """All pairs with exact shingle-set Jaccard >= ``rules.threshold`` that pass ``rules``."""
    threshold = rules.threshold
    if not threshold:
        raise ValueError("the exact baseline needs a threshold above 0")
    sets = shingle_sets([r.content for r in records], params)
    frequency = Counter(int(h) for s in sets for h in s)
    rank = {
        h: i for i, (h, _) in enumerate(sorted(frequency.items(), key=lambda kv: (kv[1], kv[0])))
    }
    ranked = [np.sort(np.fromiter((rank[int(h)] for h in s), np.int64, len(s))) for s in sets]
    order = sorted(range(len(records)), key=lambda i: (len(ranked[i]), records[i].id))
    index: dict[int, list[int]] = {}
    passing: list[tuple[int, int, float, int]] = []  # (x, y, similarity, shared) at the threshold
    for x in order:
        size = len(ranked[x])
        candidates: set[int] = set()
        for token in ranked[x][: _prefix_length(size, threshold)].tolist():
            bucket = index.setdefault(token, [])
            candidates.update(y for y in bucket if len(ranked[y]) >= threshold * size)
            bucket.append(x)
        for y in candidates:
            shared = len(np.intersect1d(ranked[x], ranked[y], assume_unique=True))
            similarity = shared / (size + len(ranked[y]) - shared)
            if similarity >= threshold:
                passing.append((x, y, similarity, shared))
    distances = word_edit_distances(  # in one call: a call per pair costs more than its distance
        [r.content for r in records], [p[0] for p in passing], [p[1] for p in passing]
    )
    return in_order(
        Pair(
            records[x].id,
            records[y].id,
            distance,
            similarity,
            shared,
            "exact" if records[x].md5 == records[y].md5 else "near",
        )
        for (x, y, similarity, shared), distance in zip(passing, distances, strict=True)
        if rules.accepts(distance, similarity)
    )
