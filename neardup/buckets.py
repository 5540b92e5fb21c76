"""Every content's candidates from the buckets the store lists itself, in bounded memory.

The self-join (:mod:`neardup.selfjoin`) reads every record into the client and fingerprints it
again. A store can do without: it holds the band tokens already, and lists every token held by
two or more records (a Solr JSON facet, an Elasticsearch terms aggregation, a GROUP BY in
SQLite, each with ``mincount`` 2), with the MD5s of the records holding it. This module turns
those buckets into the self-join's answer:

1. :class:`ContentGroups`: every record's MD5 in id order (no content), so that each distinct
   content gets its number in order of first id, as in :class:`neardup.selfjoin.Contents`;
   24 bytes per content.
2. Each bucket as its contents' numbers (4 bytes a member), page after page.
3. The pairs are made as the self-join makes them (:func:`neardup.selfjoin.candidate_pairs`):
   counted first, past the report's budget without the largest buckets, and at most the budget
   of them in memory.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

from . import selfjoin
from .errors import NeardupError, StoreChanged
from .ordering import lexsort
from .stores import Buckets, Store
from .stores.base import md5_halves, md5_strings

T = TypeVar("T")


@dataclass
class ContentGroups:
    """The store's distinct contents (exact-duplicate groups), numbered in order of first id,
    known by their MD5s: what a report needs of them besides the buckets."""

    md5: np.ndarray  # each content's MD5, as md5_halves
    copies: np.ndarray  # how many records hold it
    first_words: np.ndarray | None  # a number per distinct first word, when the rules filter by it
    _prefixes: np.ndarray  # the MD5s' first halves, sorted
    _numbers: np.ndarray  # the content number of each of _prefixes

    @classmethod
    def read(cls, batches: Iterable[list[tuple[str, str]]], first_word: bool) -> ContentGroups:
        """From every record's (MD5, first word), in id order."""
        halves, words = [], []
        vocabulary: dict[str, int] = {}
        for batch in batches:
            if batch:
                halves.append(md5_halves([md5 for md5, _ in batch]))
            if first_word:
                words += [vocabulary.setdefault(word, len(vocabulary)) for _, word in batch]
        every = np.concatenate(halves) if halves else np.empty((0, 2), np.uint64)
        # Sorted by MD5, records of one content in id order: each run's head is its first record.
        order = np.argsort(every[:, 0], kind="stable")
        prefixes, low_halves = every[order, 0], every[order, 1]
        starts = np.flatnonzero(np.r_[True, prefixes[1:] != prefixes[:-1]])[: len(order)]
        if len(order) and np.any(
            np.maximum.reduceat(low_halves, starts) != np.minimum.reduceat(low_halves, starts)
        ):
            raise NeardupError(
                "two contents share the first half of their MD5: report with --strategy join"
            )
        first = order[starts]
        copies = np.diff(np.r_[starts, len(order)])
        # Numbered in order of first record: the rank of each content's first index.
        by_first = np.argsort(first)
        numbers = np.empty(len(first), dtype=np.int64)
        numbers[by_first] = np.arange(len(first))
        return cls(
            md5=every[first[by_first]],
            copies=copies[by_first],
            first_words=np.array(words, dtype=np.int64)[first[by_first]] if first_word else None,
            _prefixes=prefixes[starts],
            _numbers=numbers,
        )

    def __len__(self) -> int:
        return len(self.copies)

    def numbers(self, md5s: np.ndarray) -> np.ndarray:
        """The content number of each MD5 (md5_halves rows; every one a stored record's)."""
        prefixes = md5s[:, 0]
        where = np.searchsorted(self._prefixes, prefixes)
        if len(prefixes) and (
            where.max() >= len(self._prefixes) or np.any(self._prefixes[where] != prefixes)
        ):  # a bucket holds a content the report did not read
            raise StoreChanged()
        return self._numbers[where]

    def md5s(self, groups: Iterable[int]) -> list[str]:
        return md5_strings(self.md5[list(groups)])


class StoredGroups:
    """Content groups' ids, and their contents, asked of the store by their MD5s."""

    def __init__(self, store: Store, groups: ContentGroups) -> None:
        self.store, self.groups = store, groups

    def ids_of(self, numbers: np.ndarray) -> dict[int, list[str]]:
        md5s = self.groups.md5s(numbers.tolist())
        found = _every_held(self.store.ids_by_md5(md5s))
        return {number: found[md5] for number, md5 in zip(numbers.tolist(), md5s, strict=True)}

    def of(self, numbers: np.ndarray) -> tuple[list[str], Callable[[int], list[str]]]:
        """The groups' contents, in order, and each one's ids, in one round trip."""
        md5s = self.groups.md5s(numbers.tolist())
        found = _every_held(self.store.records_by_md5(md5s))
        md5_of = dict(zip(numbers.tolist(), md5s, strict=True))

        def ids(number: int) -> list[str]:
            return [record.id for record in found[md5_of[number]]]

        return [found[md5][0].content for md5 in md5s], ids


def _every_held(found: dict[str, list[T]]) -> dict[str, list[T]]:
    """``found`` (records or ids by MD5), unless a content the report read is held no more."""
    if not all(found.values()):
        raise StoreChanged()
    return found


def _members(groups: ContentGroups, buckets: Buckets) -> tuple[np.ndarray, np.ndarray]:
    """A page's buckets as their contents' numbers (int32), bucket after bucket, each bucket's
    in ascending order, and each bucket's size."""
    members = groups.numbers(buckets.md5s).astype(np.int32)
    keys = np.repeat(np.arange(len(buckets), dtype=np.int64), buckets.sizes)
    return members[lexsort((members, keys))], buckets.sizes


def candidate_pairs(
    groups: ContentGroups, pages: Iterable[Buckets], budget: int
) -> tuple[tuple[np.ndarray, np.ndarray, np.ndarray], selfjoin.LeftOut | None]:
    """Every pair of contents that share a bucket among the store's shared buckets (``pages``),
    as (low content, high content, shared tokens), sorted, and the buckets left out to keep
    within ``budget`` bucket pairs: exactly what :func:`neardup.selfjoin.scored_pairs` gives for
    the same store. Every page's members are held (4 bytes each) until all sizes are known, as
    the buckets to leave out depend on them."""
    held = [_members(groups, buckets) for buckets in pages]
    return selfjoin.candidate_pairs(held, budget, "bands", groups.first_words)
