"""Every record's candidates at once: a self-join of the token buckets, in memory.

A report's candidates are every pair of distinct contents that share at least one token of the
method's field: the pairs an OR-query over a content's tokens would return with no limit on its
rows. Asking the store once per content costs a round trip and a query each; when the tokens are
selective, as LSH band tokens are, it is much cheaper to compute the same answer for every
content at once: read every record once, sort all (token, content) keys, and count for each pair
of contents the tokens they share (one count per bucket they both fall in). This is the banding
technique of *Mining of Massive Datasets* (ch. 3) run over the whole store.

A bucket of m contents makes m(m-1)/2 pairs, which a common token (a signature position, a
frequent shingle) makes quadratic. The join counts them before it makes them, and past the pair
budget the report stops with one line saying so (:class:`neardup.errors.TooManyPairs`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from . import _kernels
from .errors import TooManyPairs
from .fingerprint import FingerprintParams, TokenField, token_keys
from .stores import StoredRecord

# Most pairs the join may count: 8 bytes each while sorting, a few times over.
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


def bucket_pairs(
    keys: np.ndarray, groups: np.ndarray, budget: int = PAIR_BUDGET, field: str = "bands"
) -> np.ndarray:
    """Given (key, group) sorted by key then group, every pair of groups in each bucket, once per
    bucket, coded as low * 2**32 + high. The pairs are counted before they are made: past
    ``budget``, :class:`TooManyPairs` (which names the token ``field``)."""
    total = _kernels.bucket_pairs(keys, groups, None)
    if total > budget:
        raise TooManyPairs(total, field)
    pairs = np.empty(total, dtype=np.int64)
    _kernels.bucket_pairs(keys, groups, pairs)
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


def scored_pairs(
    contents: Contents, first_word: bool, budget: int = PAIR_BUDGET, field: str = "bands"
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(low group, high group, shared tokens) of every pair sharing a ``field`` token, sorted;
    past ``budget`` bucket pairs, :class:`TooManyPairs`."""
    keys, groups = _distinct_keys(contents)
    codes, shared = np.unique(bucket_pairs(keys, groups, budget, field), return_counts=True)
    low, high = codes >> 32, codes & 0xFFFFFFFF
    if first_word:
        words = np.unique(np.array(contents.first_words, dtype=object), return_inverse=True)[1]
        same = words[low] == words[high]
        low, high, shared = low[same], high[same], shared[same]
    return low, high, shared
