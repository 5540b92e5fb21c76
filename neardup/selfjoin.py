"""Every record's candidates at once: a self-join of the token buckets, in memory.

A report's candidates are every pair of distinct contents that share at least one token of the
method's field: the pairs an OR-query over a content's tokens would return with no limit on its
rows. Asking the store once per content costs a round trip and a query each; when the tokens are
selective, as LSH band tokens are, it is much cheaper to compute the same answer for every
content at once: read every record once, sort all (token, content) keys, and count for each pair
of contents the tokens they share (one count per bucket they both fall in). This is the banding
technique of *Mining of Massive Datasets* (ch. 3) run over the whole store.

A bucket of m contents makes m(m-1)/2 pairs, which a common token (a signature position, a
frequent shingle, a band of short records that share a city) makes quadratic: at a million
person records, 64 bands of 2 rows make 47 billion bucket pairs. The join counts them before it
makes them, and when they are more than the pair budget it leaves out the largest buckets, as a
search engine leaves out stop words, until the rest fit (:func:`common_buckets`): near-duplicates
share many bands, so they stay candidates through their smaller buckets (at a million generated
person records, buckets of more than 12 contents left out, 0.998 of the true pairs are still
candidates). The report says how many buckets it left out.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from . import _kernels
from .errors import TooManyPairs
from .fingerprint import FingerprintParams, TokenField, token_keys
from .stores import StoredRecord

# Most bucket pairs a report makes (8 bytes each while sorting, a few times over); past it, it
# leaves out the largest buckets (see common_buckets).
PAIR_BUDGET = 40_000_000
# Most characters of contents the join keeps for measuring its pairs; past it, the report
# fetches them from the store again, a run of pairs at a time.
KEPT_CHARACTERS = 64_000_000


@dataclass
class Contents:
    """The store's distinct contents (exact-duplicate groups), numbered in order of first id.

    Compact, as it holds the whole store: ids, and every group's token keys in one array.
    """

    heads: list[str]  # each group's first id
    members: dict[int, list[str]]  # groups of 2 or more: all their ids
    first_words: list[str]  # each group's first word, when the rules filter by it
    keys: np.ndarray  # every group's token keys, group after group
    sizes: np.ndarray  # how many keys each group has
    texts: list[str] | None  # every group's content, or None past KEPT_CHARACTERS

    def ids(self, group: int) -> list[str]:
        return self.members.get(group, [self.heads[group]])

    def copies(self) -> np.ndarray:
        """How many records hold each group's content."""
        copies = np.ones(len(self.heads), dtype=np.int64)
        copies[list(self.members)] = [len(ids) for ids in self.members.values()]
        return copies


def read_contents(
    batches: Iterable[list[StoredRecord]],
    params: FingerprintParams,
    token_field: TokenField,
    first_word: bool,
    kept_characters: int = KEPT_CHARACTERS,
) -> Contents:
    """Read the store's records (``batches``, in id order) once; fingerprint each distinct
    content once and keep its ``token_field`` keys (and first word, when the rules filter by
    it), and the contents themselves while they fit ``kept_characters``."""
    heads: list[str] = []
    texts: list[str] | None = []
    characters = 0
    members: dict[int, list[str]] = {}
    first_words: list[str] = []
    key_batches: list[np.ndarray] = []
    sizes: list[int] = []
    group_of: dict[str, int] = {}
    for batch in batches:
        fresh = []
        for record in batch:
            group = group_of.setdefault(record.md5, len(group_of))
            if group == len(heads):
                heads.append(record.id)
                fresh.append(record.content)
                if first_word:
                    first_words.append(record.first_word)
            else:
                members.setdefault(group, [heads[group]]).append(record.id)
        characters += sum(map(len, fresh))
        if characters > kept_characters:
            texts = None
        elif texts is not None:
            texts.extend(fresh)
        keys, counts = token_keys(fresh, params, token_field)
        key_batches.append(keys)  # one array per batch, not per group: a few bytes per record
        sizes.extend(counts.tolist())
    return Contents(
        heads,
        members,
        first_words,
        np.concatenate(key_batches) if key_batches else np.empty(0, np.int64),
        np.array(sizes, dtype=np.int64),
        texts,
    )


@dataclass(frozen=True)
class LeftOut:
    """The buckets a report left out of its candidates: each shared by more than ``size``
    contents, ``buckets`` of them, which would have made ``pairs`` bucket pairs more than the
    report's ``budget``."""

    size: int
    buckets: int
    pairs: int
    budget: int
    field: str = "bands"  # the token field of the buckets

    def describe(self) -> str:
        return (
            f"left out {self.buckets:,} {self.field} buckets shared by more than {self.size:,} "
            f"contents each: their {self.pairs:,} bucket pairs are past the report's budget of "
            f"{self.budget:,}, and a pair that shares only such buckets is not a candidate"
        )


def common_buckets(sizes: np.ndarray, budget: int, field: str = "bands") -> LeftOut | None:
    """Which buckets (of ``sizes`` contents each) to leave out so that the rest make at most
    ``budget`` pairs: the largest, down to the size at which the rest fit; None when all fit.
    Buckets of one size are all kept or all left out, so the answer depends on the buckets
    alone, not on the order they are read in. :class:`TooManyPairs` when buckets of two
    contents alone are more than the budget."""
    sizes = sizes[sizes > 1]  # a token one content holds makes no pair
    pairs = sizes * (sizes - 1) // 2
    total = int(pairs.sum())
    if total <= budget:
        return None
    by_size, where = np.unique(sizes, return_inverse=True)
    kept = np.cumsum(np.bincount(where, weights=pairs, minlength=len(by_size)))
    fitting = int(np.searchsorted(kept, budget, side="right"))
    if fitting == 0:
        raise TooManyPairs(total, field)
    size = int(by_size[fitting - 1])
    left_out = total - int(kept[fitting - 1])
    return LeftOut(size, int(np.count_nonzero(sizes > size)), left_out, budget, field)


def runs(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Where each run of equal ``values`` (sorted) starts, and how long it is."""
    heads = np.ones(len(values), dtype=bool)
    np.not_equal(values[1:], values[:-1], out=heads[1:])
    starts = np.flatnonzero(heads)
    del heads
    lengths = np.empty(len(starts), dtype=np.int64)
    np.subtract(starts[1:], starts[:-1], out=lengths[:-1])
    lengths[-1:] = len(values) - starts[-1:]
    return starts, lengths


def bucket_pairs(keys: np.ndarray, groups: np.ndarray, largest: int | None = None) -> np.ndarray:
    """Given (key, group) sorted by key then group, every pair of groups in each bucket of at
    most ``largest`` groups (all buckets with None), once per bucket, coded as
    low * 2**32 + high."""
    largest = len(keys) if largest is None else largest
    pairs = np.empty(_kernels.bucket_pairs(keys, groups, largest, None), dtype=np.int64)
    _kernels.bucket_pairs(keys, groups, largest, pairs)
    return pairs


def _distinct_keys(contents: Contents) -> tuple[np.ndarray, np.ndarray]:
    """All (key, group) pairs sorted by key then group, each once (a store counts a record's
    token once however often its fingerprint lists it)."""
    # numpy's default sorts of integers are SIMD sorts, several times faster than its stable
    # sort: the keys are sorted first, then each bucket's groups by one sort, in place, of
    # (the key's rank among the distinct keys, group), which fits 64 bits where (key, group)
    # does not. int32 groups halve their memory.
    order = np.argsort(contents.keys)
    keys = contents.keys[order]
    groups = np.repeat(np.arange(len(contents.sizes), dtype=np.int32), contents.sizes)[order]
    del order
    ranked = np.zeros(len(keys), dtype=np.int64)
    np.cumsum(keys[1:] != keys[:-1], out=ranked[1:])
    ranked <<= 32
    ranked |= groups
    ranked.sort()
    groups = (ranked & 0xFFFFFFFF).astype(np.int32)
    del ranked
    keep = np.ones(len(keys), dtype=bool)
    keep[1:] = (keys[1:] != keys[:-1]) | (groups[1:] != groups[:-1])
    return keys[keep], groups[keep]


def counted_pairs(codes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(low, high, shared) of bucket pair codes, int32: each pair once, sorted, with the
    buckets it came in. ``codes`` is sorted in place: a report's 40 million take 320 MB, and
    np.unique would sort a copy."""
    codes.sort()
    starts, shared = runs(codes)
    halves = codes[starts].view(np.uint32).reshape(-1, 2)  # (high, low) on a little-endian CPU
    high, low = (halves[:, n].astype(np.int32) for n in _HALVES)
    return low, high, shared.astype(np.int32)


# Which 32-bit half of a pair's code holds its high content and which its low one.
_HALVES = (0, 1) if np.little_endian else (1, 0)


def scored_pairs(
    contents: Contents, first_word: bool, budget: int = PAIR_BUDGET, field: str = "bands"
) -> tuple[tuple[np.ndarray, np.ndarray, np.ndarray], LeftOut | None]:
    """(low group, high group, shared tokens) of every pair sharing a ``field`` token, sorted,
    and the buckets left out to keep within ``budget`` bucket pairs (:func:`common_buckets`)."""
    keys, groups = _distinct_keys(contents)
    left_out = common_buckets(runs(keys)[1], budget, field)
    codes = bucket_pairs(keys, groups, left_out.size if left_out else None)
    del keys, groups
    low, high, shared = counted_pairs(codes)
    if first_word:
        words = np.unique(np.array(contents.first_words, dtype=object), return_inverse=True)[1]
        same = words[low] == words[high]
        low, high, shared = low[same], high[same], shared[same]
    return (low, high, shared), left_out
