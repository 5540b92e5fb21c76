"""Every record's candidates at once: a self-join of the token buckets, in memory.

A report's candidates are every pair of distinct contents that share at least one token of the
method's field: the pairs an OR-query over a content's tokens would return with no limit on its
rows. Asking the store once per content costs a round trip and a query each; when the tokens are
selective, as LSH band tokens are, it is much cheaper to compute the same answer for every
content at once: read every record once, group the (token, content) keys by token in a hash
table, a range of tokens at a time, and count for each pair of contents the tokens they share
(one count per bucket they both fall in). This is the banding
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

import dataclasses
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np

from . import _kernels
from .errors import TooManyPairs
from .fingerprint import FingerprintParams, TokenField, token_keys
from .ordering import lexsort
from .phrases import counted
from .stores import StoredRecord

# Most bucket pairs a report makes (8 bytes each while sorting, a few times over); past it, it
# leaves out the largest buckets (see common_buckets).
PAIR_BUDGET = 40_000_000
# Most characters of contents the join keeps for measuring its pairs (a list of strings: ~50
# bytes a content more); past it, the report fetches them from the store again, a run of pairs
# at a time. 1.5 million people's 82 million characters kept took 94 s to report within 2.92
# GB; fetched again for each run, 132 s within 3.34 GB (pairs of blocks of 32 million).
KEPT_CHARACTERS = 128_000_000


# Most keys a run of SortedKeys grows to by merging (12 bytes each, twice while merged).
RUN_KEYS = 4_000_000
# Batches joined with the keys read from the store by scanning them before they are sorted:
# about as many as sorting costs (ski rental). 900,000 people's 57.6 million keys: a scan 0.7 s
# (twice a batch), sorted into runs 10 s, the runs searched 0.5 s a batch.
SCANS_BEFORE_SORTING = 10


class SortedKeys:
    """Which contents hold each key, for contents added a batch at a time: runs of (key,
    content) pairs sorted by key then content, each run's contents after the run's before. A
    batch's keys make a run, which merges with the one before while that one is no larger, up
    to RUN_KEYS keys: a key is merged a few times and searched for in a few runs. Scanning
    every stored key for each batch made a checked index grow with the square of its records
    (a quarter of a million people's run), and sorting them all again for each batch costs
    more."""

    def __init__(self) -> None:
        self.runs: list[tuple[np.ndarray, np.ndarray]] = []  # (keys, contents)

    def add(self, keys: np.ndarray, contents: np.ndarray, *, in_place: bool = False) -> None:
        """The keys of contents numbered after every content added so far (``contents``, one
        per key, in ascending order); ``in_place``, sorted in the array that holds them."""
        order = np.argsort(keys, kind="stable")
        if in_place:
            keys[:] = keys[order]
        else:
            keys = keys[order]
        self.runs.append((keys, contents[order].astype(np.int32, copy=False)))
        while len(self.runs) > 1:
            size, last = len(self.runs[-2][0]), len(self.runs[-1][0])
            if size > last or size + last > RUN_KEYS:
                break
            later = self.runs.pop()
            self.runs.append(_merged(self.runs.pop(), later))

    def find(self, wanted: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
        """Where each of the sorted ``wanted`` keys is in each run: (first, how many)."""
        found = []
        for keys, _ in self.runs:
            first, end = _searched(keys, wanted, right=False), _searched(keys, wanted, right=True)
            found.append((first, end - first))
        return found


def _searched(keys: np.ndarray, values: np.ndarray, right: bool) -> np.ndarray:
    """np.searchsorted(keys, values) of ``values`` in ascending order (a gallop each)."""
    places = np.empty(len(values), dtype=np.int64)
    _kernels.sorted_search(keys, values, right, places)
    return places


def _merged(
    earlier: tuple[np.ndarray, np.ndarray], later: tuple[np.ndarray, np.ndarray]
) -> tuple[np.ndarray, np.ndarray]:
    """Two runs as one, the ``later`` run's contents after the ``earlier``'s of the same key."""
    places = _searched(earlier[0], later[0], right=True) + np.arange(len(later[0]))
    rest = np.ones(len(earlier[0]) + len(later[0]), dtype=bool)
    rest[places] = False
    merged = []
    for before, after in zip(earlier, later, strict=True):
        both = np.empty(len(rest), dtype=before.dtype)
        both[places], both[rest] = after, before
        merged.append(both)
    return merged[0], merged[1]


def ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The positions of ranges (``lengths`` from ``starts``), range after range."""
    return np.repeat(starts - np.cumsum(lengths) + lengths, lengths) + np.arange(lengths.sum())


class KeyHolders:
    """Which of a store's contents (:class:`Contents`) hold each of the distinct ``wanted``
    keys: how many (``counts``), then the contents themselves for the keys a join uses."""

    def __init__(self, contents: Contents, wanted: np.ndarray) -> None:
        self.contents, self.wanted = contents, wanted
        self.counts = np.zeros(len(wanted), dtype=np.int64)
        # The scan builds a table of the wanted keys first (60 ms for a batch of 10,000
        # people): none once the keys read are sorted, or where none were read.
        if len(contents.keys):
            _kernels.key_holders(contents.keys, contents.sizes, wanted, self.counts, None)
        self.in_runs = contents.sorted_keys.find(wanted)
        for _, count in self.in_runs:
            self.counts += count

    def listed(self, used: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Where each wanted key's holders start (and the last end) and the holders of the
        ``used`` keys, key after key: those scanned, then those of each sorted run."""
        starts = np.r_[0, np.cumsum(np.where(used, self.counts, 0))]
        holders = np.empty(starts[-1], dtype=np.int64)
        places = np.where(used, starts[:-1], -1)
        contents = self.contents
        if len(contents.keys):
            _kernels.key_holders(contents.keys, contents.sizes, self.wanted, places, holders)
        asked = np.flatnonzero(used)
        places = places[asked]
        for (_, run), (at, count) in zip(contents.sorted_keys.runs, self.in_runs, strict=True):
            each = count[asked]
            holders[ranges(places, each)] = run[ranges(at[asked], each)]
            places += each
        return starts, holders


@dataclass
class Contents:
    """The store's distinct contents (exact-duplicate groups), numbered in order of first id.

    Compact, as it holds the whole store: ids, and every group's token keys in one array.
    """

    heads: list[str]  # each group's first id
    members: dict[int, list[str]]  # groups of 2 or more: all their ids
    first_words: list[str]  # each group's first word, when the rules filter by it
    keys: np.ndarray  # the token keys of the groups read from the store, group after group
    sizes: np.ndarray  # how many keys each group read has
    texts: list[str] | None  # every group's content, or None past KEPT_CHARACTERS
    characters: int = 0  # of every group's content, kept in ``texts`` or not
    # The keys of the groups added since (see extend), and of those read once sorted.
    sorted_keys: SortedKeys = dataclasses.field(default_factory=SortedKeys)
    scans: int = 0  # batches joined with ``keys`` by scanning them

    def extend(
        self,
        heads: list[str],
        texts: list[str],
        first_words: list[str],
        keys: np.ndarray,
        sizes: np.ndarray,
    ) -> None:
        """Add contents that no group holds, a record each, numbered after the others: those of
        records stored since they were read. Their keys are kept sorted (:class:`SortedKeys`),
        in place of being read again."""
        numbers = np.arange(len(self.heads), len(self.heads) + len(heads), dtype=np.int32)
        self.heads += heads
        self.first_words += first_words
        self.texts = _kept_texts(self.texts, texts, self.characters)
        self.characters += sum(map(len, texts))
        self.sorted_keys.add(keys, np.repeat(numbers, sizes))

    def holders(self, wanted: np.ndarray) -> KeyHolders:
        """Which groups hold each of the distinct ``wanted`` keys (a batch's). The keys read
        from the store are scanned, twice a batch, until they have been for as many batches as
        sorting them costs (SCANS_BEFORE_SORTING); then sorted into runs."""
        if self.scans == SCANS_BEFORE_SORTING:
            self._sort_read()
        if len(self.keys):
            self.scans += 1
        return KeyHolders(self, wanted)

    def _sort_read(self) -> None:
        """Sort the keys read from the store into runs of about RUN_KEYS, before the runs of
        the groups added since: a million people's 64 million keys sorted at once would take
        1.5 GB more while sorted (their order, the keys and their contents). Each run is sorted
        in place, in the array that holds the keys read: copied into runs, the 82 million
        signature keys of 640,000 people linked were held twice, 0.65 GB more."""
        read = SortedKeys()
        bounds = np.r_[0, np.cumsum(self.sizes)]
        edges = np.unique(
            np.r_[np.searchsorted(bounds, np.arange(0, bounds[-1], RUN_KEYS)), len(self.sizes)]
        )
        for first, end in zip(edges[:-1].tolist(), edges[1:].tolist(), strict=True):
            numbers = np.arange(first, end, dtype=np.int32)
            read.add(
                self.keys[bounds[first] : bounds[end]],
                np.repeat(numbers, self.sizes[first:end]),
                in_place=True,
            )
        read.runs += self.sorted_keys.runs
        self.sorted_keys = read
        self.keys, self.sizes = np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)

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
    records: int = 0,
) -> Contents:
    """Read the store's records (``batches``, in id order) once; fingerprint each distinct
    content once and keep its ``token_field`` keys (and first word, when the rules filter by
    it), and the contents themselves while they fit ``kept_characters``. ``records``, the
    store's count, sizes the keys' array at once where each content has as many keys."""
    heads: list[str] = []
    texts: list[str] | None = []
    characters = 0
    members: dict[int, list[str]] = {}
    first_words: list[str] = []
    fixed = {TokenField.BANDS: params.bands, TokenField.SIGNATURE: params.num_hashes}
    keys = _Keys(records * fixed.get(token_field, 0))
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
        texts = _kept_texts(texts, fresh, characters, kept_characters)
        characters += sum(map(len, fresh))
        fresh_keys, counts = token_keys(fresh, params, token_field)
        keys.extend(fresh_keys)
        sizes.extend(counts.tolist())
    return Contents(
        heads, members, first_words, keys.all(), np.array(sizes, np.int64), texts, characters
    )


def _kept_texts(
    texts: list[str] | None, more: list[str], characters: int, most: int = KEPT_CHARACTERS
) -> list[str] | None:
    """``texts`` (of ``characters`` in all) with ``more`` after them, or None past ``most``
    characters: the contents are then fetched from the store when measured."""
    if texts is None or characters + sum(map(len, more)) > most:
        return None
    texts += more
    return texts


class _Keys:
    """Every content's keys in one array, grown by doubling. A million records' 64 band keys
    take 512 MB: kept as an array per batch and joined at the end, they took three times that
    (the batches' freed memory stays in the process's heap)."""

    def __init__(self, capacity: int) -> None:
        self.values = np.empty(capacity, dtype=np.int64)
        self.size = 0

    def extend(self, more: np.ndarray) -> None:
        if self.size + len(more) > len(self.values):
            grown = np.empty(max(2 * len(self.values), self.size + len(more)), dtype=np.int64)
            grown[: self.size] = self.values[: self.size]
            self.values = grown
        self.values[self.size : self.size + len(more)] = more
        self.size += len(more)

    def all(self) -> np.ndarray:
        return self.values[: self.size]  # a view: the room never written takes no memory


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
            f"left out {counted(self.buckets, 'bucket')} of {self.field} shared by more than "
            f"{self.size:,} contents each: their {self.pairs:,} bucket pairs are past the "
            f"report's budget of {self.budget:,}, and a pair that shares only such buckets is "
            "not a candidate"
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


# Buckets as the join and a store's listing both hold them: every member of each bucket of two
# or more contents (int32 content numbers), bucket after bucket, each bucket's in ascending
# order; and each bucket's size (int64).
Held = tuple[np.ndarray, np.ndarray]
# Keys the join groups at once: a store's keys are grouped a range of them at a time, so that
# the join's hash table stays a few hundred MB whatever the store's size.
PARTITION_KEYS = 8_000_000


def _shared_buckets(contents: Contents) -> Iterator[Held]:
    """The buckets of the contents' keys that two or more contents share, a range of keys at a
    time; a content's key counts once however often it lists it (as a store counts a record's
    token once)."""
    keys = contents.keys
    bits = _range_bits(len(keys), PARTITION_KEYS)
    if not bits:  # one range: every key in order, each content's after the one before
        numbers = np.arange(len(contents.sizes), dtype=np.int32)
        yield from _cached_buckets(keys, np.repeat(numbers, contents.sizes))
        return
    offsets = np.r_[0, np.cumsum(contents.sizes)]
    part_of = _key_bits(keys, 64 - bits, bits)  # the top bits: keys are hashes
    for part in range(2**bits):
        at = np.flatnonzero(part_of == part)
        groups = (np.searchsorted(offsets, at, side="right") - 1).astype(np.int32)
        yield from _cached_buckets(keys[at], groups)


def _key_bits(keys: np.ndarray, shift: int, bits: int) -> np.ndarray:
    """Bits ``shift`` to ``shift + bits`` (at most 8) of each key, a byte each. Made a million
    keys at a time: one expression over all the keys would make a uint64 copy of them (512 MB
    at a million people, 64 MB for one of their partitions)."""
    taken = np.empty(len(keys), dtype=np.uint8)
    mask, step = np.uint64(2**bits - 1), 1 << 20
    for at in range(0, len(keys), step):
        taken[at : at + step] = (keys[at : at + step].view(np.uint64) >> np.uint64(shift)) & mask
    return taken


def _range_bits(keys: int, per_range: int) -> int:
    """How many bits of a key choose its range, for ranges of about ``per_range`` keys."""
    return min(8, max(0, int(np.ceil(np.log2(max(1.0, keys / per_range))))))


# Keys one hash table of the join takes at once: a table that fits the CPU's cache takes each
# key several times faster. A million people's report (64 million keys, partitions of 8
# million) spent 9.3-10.4 s of samples in the join's buckets with it, 16.8 s without.
CACHED_KEYS = 500_000


def _cached_buckets(keys: np.ndarray, groups: np.ndarray) -> Iterator[Held]:
    """:func:`_distinct_buckets` of the keys in ranges of about CACHED_KEYS, chosen by bits
    32 and up: the partitions' are the top bits, and the hash table's slots the low bits, which
    the keys of one range must not share. Equal keys share a range."""
    bits = _range_bits(len(keys), CACHED_KEYS)
    if not bits:
        yield _distinct_buckets(keys, groups)
        return
    range_of = _key_bits(keys, 32, bits)
    by_range = np.argsort(range_of, kind="stable")  # a radix sort; groups stay ascending
    ends = np.cumsum(np.bincount(range_of, minlength=2**bits))
    keys, groups = keys[by_range], groups[by_range]
    for start, end in zip(np.r_[0, ends[:-1]], ends, strict=True):
        yield _distinct_buckets(keys[start:end], groups[start:end])


def _distinct_buckets(keys: np.ndarray, groups: np.ndarray) -> Held:
    """The buckets of (key, group) pairs (groups in ascending order) that two or more groups
    share, each group once."""
    members = np.empty(len(keys), dtype=np.int32)
    sizes = np.empty(len(keys), dtype=np.int64)
    held, buckets = _kernels.shared_buckets(keys, groups, members, sizes)
    return members[:held].copy(), sizes[:buckets].copy()


def candidate_pairs(
    held: list[Held], budget: int, field: str = "bands", words: np.ndarray | None = None
) -> tuple[tuple[np.ndarray, np.ndarray, np.ndarray], LeftOut | None]:
    """(low, high, shared buckets) of every pair of contents that share one of the ``held``
    buckets (emptied as their pairs are made), each pair once, sorted; past ``budget`` bucket
    pairs, without the largest buckets (:func:`common_buckets`), and which were left out. With
    ``words`` (a number per content), only pairs of contents with the same first word."""
    sizes = np.concatenate([s for _, s in held]) if held else np.empty(0, dtype=np.int64)
    left_out = common_buckets(sizes, budget, field)
    largest = left_out.size if left_out else int(sizes.max(initial=0))
    del sizes
    counts = [_kernels.bucket_pairs(members, lengths, largest, None) for members, lengths in held]
    codes = np.empty(sum(counts), dtype=np.int64)
    at = 0
    held.reverse()
    for count in counts:
        members, lengths = held.pop()
        _kernels.bucket_pairs(members, lengths, largest, codes[at : at + count])
        at += count
    if words is not None:
        codes = codes[words[codes >> 32] == words[codes & 0xFFFFFFFF]]
    return counted_pairs(codes), left_out


def pairs_sharing_keys(
    keys: np.ndarray, sizes: np.ndarray, words: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(low, high, shared keys) of every pair of key sets (``sizes`` keys each, set after
    set) that share a key, each pair once, sorted, nothing left out: a batch's own pairs. With
    ``words``, only pairs of sets with the same first word."""
    groups = np.repeat(np.arange(len(sizes), dtype=np.int32), sizes)
    everything = np.iinfo(np.int64).max
    pairs, _ = candidate_pairs([_distinct_buckets(keys, groups)], everything, words=words)
    return pairs


def counted_pairs(codes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(low, high, shared) of bucket pair codes, int32: each pair once, sorted, with the
    buckets it came in. ``codes`` is sorted in place: a report's 40 million take 320 MB, and
    np.unique would sort a copy."""
    _kernels.sort_pair_codes(codes)
    pairs = _kernels.counted_pairs(codes, None, None, None)
    low, high, shared = (np.empty(pairs, dtype=np.int32) for _ in range(3))
    _kernels.counted_pairs(codes, low, high, shared)
    return low, high, shared


def scored_pairs(
    contents: Contents, first_word: bool, budget: int = PAIR_BUDGET, field: str = "bands"
) -> tuple[tuple[np.ndarray, np.ndarray, np.ndarray], LeftOut | None]:
    """(low group, high group, shared tokens) of every pair sharing a ``field`` token, sorted,
    and the buckets left out to keep within ``budget`` bucket pairs (:func:`common_buckets`).
    Lets go of the contents' keys once their buckets are known: 512 MB at a million records
    of 64 bands, that the pairs need."""
    words = None
    if first_word:
        words = np.unique(np.array(contents.first_words, dtype=object), return_inverse=True)[1]
    held = list(_shared_buckets(contents))
    contents.keys = np.empty(0, dtype=np.int64)
    return candidate_pairs(held, budget, field, words)


# Most (record, content) entries a join of a batch with the store expands at once, one per key
# they share (8 bytes each, a few times over while counted): a chunk of the batch at a time.
ACROSS_ENTRIES = 2_000_000


@dataclass(frozen=True)
class Across:
    """A chunk of :func:`pairs_across`: its records ``start`` to ``end``, each (record,
    content) pair that shares a key with how many (``record`` numbered from ``start``'s 0,
    sorted by record then content, int32), and which of its records had keys left out (whose
    counts are of the keys they joined by)."""

    start: int
    end: int
    record: np.ndarray
    content: np.ndarray
    shared: np.ndarray
    narrowed: np.ndarray


def pairs_across(
    keys: np.ndarray, sizes: np.ndarray, contents: Contents, most: int
) -> Iterator[Across]:
    """Every (record, content) pair of a batch's key sets (``sizes`` keys each, set after set)
    and the store's ``contents`` that share a key, with how many: the candidates an OR-query
    of each record's keys finds, with their scores, for the whole batch at once, in chunks of
    consecutive records that expand at most ACROSS_ENTRIES entries (or one record's). A record
    joins by its keys the fewest contents hold, as many as hold ``most`` entries in all
    (:func:`rarest_keys`)."""
    wanted, which = np.unique(keys, return_inverse=True)
    holding = contents.holders(wanted)
    held = holding.counts
    record_of = np.repeat(np.arange(len(sizes)), sizes)
    joined = rarest_keys(held[which], record_of, most)
    used = np.zeros(len(wanted), dtype=bool)
    used[which[joined]] = True
    starts, holders = holding.listed(used)
    del holding  # its places in each run, 16 bytes a wanted key a run, while the chunks go
    low, counts = starts[which], np.where(joined, held[which], 0)
    narrowed = np.zeros(len(sizes), dtype=bool)
    narrowed[record_of[~joined]] = True
    bounds = np.r_[0, np.cumsum(sizes)]  # each record's keys
    reach = np.r_[0, np.cumsum(np.bincount(record_of, weights=counts, minlength=len(sizes)))]
    start = 0
    while start < len(sizes):
        wanted_entries = reach[start] + ACROSS_ENTRIES
        end = max(start + 1, int(np.searchsorted(reach, wanted_entries, "right")) - 1)
        first, last = bounds[start], bounds[end]
        taken = counts[first:last]
        entries = holders[ranges(low[first:last], taken)]
        codes = np.repeat(record_of[first:last] - start, taken) << 32 | entries
        pairs = counted_pairs(codes)
        yield Across(start, end, *pairs, narrowed[start:end])
        start = end


def rarest_keys(counts: np.ndarray, record_of: np.ndarray, most: int) -> np.ndarray:
    """Which keys (``counts`` entries each, of the records ``record_of``, grouped by record)
    each record joins by: its keys the fewest contents hold, up to ``most`` entries in all; the
    keys held by as many as the first that would pass it are left out with it, so that the
    answer does not depend on the keys' order. As a report leaves out its largest buckets
    past its budget: near-duplicates share many keys, so they stay candidates through their
    rarer ones."""
    if not len(counts):
        return np.zeros(0, dtype=bool)
    order = lexsort((counts, record_of))
    held, record = counts[order], record_of[order]
    total = np.cumsum(held)
    starts = np.r_[0, np.flatnonzero(np.diff(record)) + 1]
    before = np.repeat(total[starts] - held[starts], np.diff(np.r_[starts, len(record)]))
    # The entries of a record's keys up to each, counting every key held by as many.
    last_of_size = np.r_[(held[1:] != held[:-1]) | (record[1:] != record[:-1]), True]
    size_run = np.cumsum(np.r_[True, last_of_size[:-1]]) - 1
    through = (total - before)[last_of_size][size_run]
    joined = np.empty(len(counts), dtype=bool)
    joined[order] = through <= most
    return joined
