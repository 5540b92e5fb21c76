"""Every content's candidates from the buckets the store lists itself, in bounded memory.

The self-join (:mod:`neardup.selfjoin`) reads every record into the client and fingerprints it
again. A store can do better: it holds the band tokens already, and lists every token held by two
or more records (a Solr JSON facet, an Elasticsearch terms aggregation, a GROUP BY in SQLite,
each with ``mincount`` 2), with the MD5s of the records holding it. This module turns those
buckets into the self-join's answer, with memory that does not grow with the candidate pairs:

1. :class:`ContentGroups`: every record's MD5 in id order (no content), so that each distinct
   content gets its number in order of first id, as in :class:`neardup.selfjoin.Contents`;
   24 bytes per content.
2. Each bucket's pairs of contents go to one of ``parts`` spill files on disk, chosen by the
   lower content of the pair.
3. A spill file holds every bucket pair of its contents: counting equal pairs gives the tokens
   each pair shares.

The client holds the content numbers, every bucket's members (4 bytes each), and one part at a
time. The pairs are counted before they are made: past the report's budget the largest buckets
are left out, as the self-join leaves them out (:func:`neardup.selfjoin.common_buckets`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from . import selfjoin
from .errors import NeardupError
from .stores import Buckets, Store
from .stores.base import md5_halves, md5_strings

# Contents per spill part: a part's candidate pairs are sorted in memory (8 bytes per pair and
# direction, a few times over).
CONTENTS_PER_PART = 250_000


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
        ):
            raise NeardupError("the store changed during the report: run it again")
        return self._numbers[where]

    def md5s(self, groups: Iterable[int]) -> list[str]:
        return md5_strings(self.md5[list(groups)])


class StoredGroups:
    """Content groups' ids, and their contents, asked of the store by their MD5s."""

    def __init__(self, store: Store, groups: ContentGroups) -> None:
        self.store, self.groups = store, groups

    def ids_of(self, numbers: np.ndarray) -> dict[int, list[str]]:
        md5s = self.groups.md5s(numbers.tolist())
        found = self.store.ids_by_md5(md5s)
        return {number: found[md5] for number, md5 in zip(numbers.tolist(), md5s, strict=True)}

    def of(self, numbers: np.ndarray) -> dict[int, tuple[list[str], str]]:
        """Each group's ids and content, in one round trip."""
        md5s = self.groups.md5s(numbers.tolist())
        found = self.store.records_by_md5(md5s)
        return {
            number: ([r.id for r in found[md5]], found[md5][0].content)
            for number, md5 in zip(numbers.tolist(), md5s, strict=True)
        }


class _Spill:
    """``parts`` files of int64 values in a temporary directory, appended to and read back
    whole, one at a time."""

    def __init__(self, directory: Path, name: str, parts: int) -> None:
        self.paths = [directory / f"{name}-{part}" for part in range(parts)]
        self.files = [path.open("ab") for path in self.paths]
        self.sizes = [0] * parts  # values appended to each part

    def append(self, codes: np.ndarray, owners: np.ndarray) -> None:
        """Each code to the part of its owner."""
        parts = len(self.files)
        if parts == 1:
            codes.tofile(self.files[0])
            self.sizes[0] += len(codes)
            return
        part_of = owners % parts
        order = np.argsort(part_of, kind="stable")
        bounds = np.searchsorted(part_of[order], np.arange(parts + 1))
        for part, file in enumerate(self.files):
            codes[order[bounds[part] : bounds[part + 1]]].tofile(file)
            self.sizes[part] += int(bounds[part + 1] - bounds[part])

    def parts(self) -> Iterator[np.ndarray]:
        for file in self.files:
            file.close()
        for path in self.paths:
            codes = np.fromfile(path, dtype=np.int64)
            path.unlink()
            yield codes


def _members(groups: ContentGroups, buckets: Buckets) -> tuple[np.ndarray, np.ndarray]:
    """A page's buckets as their contents' numbers (int32), bucket after bucket, each bucket's
    in ascending order, and each bucket's size."""
    members = groups.numbers(buckets.md5s).astype(np.int32)
    keys = np.repeat(np.arange(len(buckets), dtype=np.int64), buckets.sizes)
    return members[np.lexsort((members, keys))], buckets.sizes


def _pairs(
    groups: ContentGroups, members: np.ndarray, sizes: np.ndarray, largest: int | None
) -> np.ndarray:
    """Every pair of contents in each bucket of at most ``largest``, once per bucket, coded
    low * 2**32 + high; with first words, only pairs of the same first word."""
    keys = np.repeat(np.arange(len(sizes), dtype=np.int64), sizes)
    codes = selfjoin.bucket_pairs(keys, members, largest)
    if groups.first_words is not None:
        words = groups.first_words
        codes = codes[words[codes >> 32] == words[codes & 0xFFFFFFFF]]
    return codes


Parts = Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]


@contextmanager
def candidate_parts(
    groups: ContentGroups, pages: Iterable[Buckets], budget: int
) -> Iterator[tuple[Parts, selfjoin.LeftOut | None]]:
    """Every pair of contents that share a bucket among the store's shared buckets (``pages``),
    as parts of (low content, high content, shared tokens), each sorted by (low, high), and
    the buckets left out to keep within ``budget`` bucket pairs: together exactly what
    :func:`neardup.selfjoin.scored_pairs` gives for the same store. Every page's members are
    held (4 bytes each) until all sizes are known, as the buckets to leave out depend on them."""
    import tempfile  # here: only reports from buckets spill (with random, shutil: 2.7 ms)

    held = [_members(groups, buckets) for buckets in pages]
    sizes = np.concatenate([s for _, s in held]) if held else np.empty(0, dtype=np.int64)
    left_out = selfjoin.common_buckets(sizes, budget)
    parts = max(1, -(-len(groups) // CONTENTS_PER_PART))
    with tempfile.TemporaryDirectory(prefix="neardup-report-") as directory:
        spill = _Spill(Path(directory), "pairs", parts)
        held.reverse()
        while held:  # each page's members freed once its pairs are spilled
            codes = _pairs(groups, *held.pop(), left_out.size if left_out else None)
            spill.append(codes, codes >> 32)
        yield (selfjoin.counted_pairs(part) for part in spill.parts()), left_out
