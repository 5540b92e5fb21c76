"""Every near-duplicate pair in a store, exactly once, and the groups they form.

Records with the same MD5 are one exact-duplicate group: the report emits every pair inside it,
and measures each pair of distinct contents once, expanding an accepted one into every pair of
records across the two groups. So 40 identical records give all 780 pairs.

A report is complete: its candidates are every pair of contents that share a token of the
method's field, whatever the size of their group, with no limit per record. They come from the
band buckets the store lists itself (:mod:`neardup.buckets`) or from a self-join of all token
buckets in memory (:mod:`neardup.selfjoin`); both give the same pairs and count them before
making them. Past their budget both leave out the largest buckets, the same ones, and the
report says how many it left out.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import copy_context
from dataclasses import dataclass, field, replace
from functools import partial
from itertools import combinations
from operator import attrgetter
from typing import Literal, TypeVar

import numpy as np

from . import selfjoin
from .buckets import ContentGroups, StoredGroups, candidate_pairs
from .errors import NeardupError, StoreChanged
from .fingerprint import (
    FingerprintParams,
    Frequencies,
    TokenField,
    distinct,
    first_word,
    jaccard_pairs,
    pair_similarities,
    shingle_numbers,
    word_edit_distances,
)
from .progress import Bar, progress_bar
from .searcher import MatchRules, Searcher, natural_key
from .selfjoin import Contents, LeftOut, read_contents, scored_pairs
from .settings import FALLBACK_THRESHOLD, LONG_TEXT
from .stores import Buckets, Store
from .tuning import (
    MIN_TAIL_PAIRS,
    EveryPair,
    ThresholdChoice,
    choose_from_every_pair,
    choose_threshold,
    similarity_histogram,
)

Grouping = Literal["center", "components"]
GROUPINGS: tuple[Grouping, ...] = ("center", "components")
Strategy = Literal["auto", "buckets", "join"]
# "auto" joins short records whose band keys fit JOIN_KEYS, on every store, long texts whose
# characters fit ONE_RUN_CHARACTERS, and every embedded store of up to JOIN_RECORDS records; it
# lists the buckets of the rest. The self-join reads and fingerprints every record again, which
# costs less than listing a store's postings when records are short and of many bands each (a
# million person records in SQLite: 10 s against 42 s; a report of 100,000 from Elasticsearch:
# 17.5 s against 222 s), and more memory than the store's own buckets when they are many long
# texts (a million documents: 600 MB of text). Generated people, join against buckets in
# SQLite: 1.1 million 48.9 s within 1.62 GB against 232.4 s within 2.25 GB; 1.5 million 81.1 s
# within 2.14 GB against 533.0 s within 2.68 GB; 2 million 105.8 s within 2.79 GB against
# 854.4 s within 2.58 GB.
JOIN_RECORDS = 250_000
JOIN_KEYS = 128_000_000  # 1 GB: 2 million records of 64 bands
# Characters of distinct contents measured at once: with their code points and shingles'
# numbers they take ~10 bytes a character. Every content of the pairs at once when they fit
# ONE_RUN_CHARACTERS (a million short records: 45 million), else a run for each pair of blocks
# of contents, each block a quarter of that (see _block_runs). Pairs in their report's order
# reach all over the store from each left side: runs of consecutive pairs shingled most of it
# again each, where a pair of blocks shingles each of its contents once. 1.5 million generated
# people (82 million characters, 34 million pairs): 105 runs of 12 million characters had not
# ended after 10 minutes; pairs of blocks measured in 68 s within 2.26 GB at its peak (49 s
# and 2.92 GB with blocks of half ONE_RUN_CHARACTERS).
ONE_RUN_CHARACTERS = 64_000_000
# Some content groups' contents, in the order asked (numbered as the join or the buckets number
# them), and each of those groups' ids, asked only for the pairs a report lists: a list of ids
# made for each of a run's contents kept the garbage collector busy for 108 of the 250 s a
# report of 2 million people took.
GroupsOf = Callable[[np.ndarray], tuple[list[str], Callable[[int], list[str]]]]
# The weight of each of some distinct shingles (their hashes, as shingle_numbers gives them).
Weigh = Callable[[np.ndarray], np.ndarray]
Batched = TypeVar("Batched")  # what a store yields in batches: records, or (MD5, first word)
# A report's passes over the store or its pairs, in the order they run.
PHASES = ("reading", "joining", "measuring", "verifying")


@dataclass(frozen=True, order=True, slots=True)  # a report holds every pair: ~80 bytes each
class Pair:
    left_id: str
    right_id: str
    edit_distance: int
    similarity: float
    shared_tokens: int
    kind: Literal["exact", "near"]


def in_order(pairs: Iterable[Pair]) -> list[Pair]:
    """Pairs as a report lists them: the two ids of each, then the pairs by left id and right
    id, in the order people read ids (:func:`natural_key`). The distinct ids are ordered once
    and the pairs sorted by their ranks: a natural key per comparison made a million pairs
    take 9 s to sort instead of 0.7 s."""
    pairs = list(pairs)
    ids = sorted({i for p in pairs for i in (p.left_id, p.right_id)}, key=natural_key)
    rank = {record_id: n for n, record_id in enumerate(ids)}
    oriented = [
        p if rank[p.left_id] < rank[p.right_id] else Pair(p.right_id, p.left_id, *_THE_REST(p))
        for p in pairs
    ]
    oriented.sort(key=lambda p: rank[p.left_id] * len(ids) + rank[p.right_id])
    return oriented


_THE_REST = attrgetter(*list(Pair.__dataclass_fields__)[2:])


# Near pairs this close above the threshold are flagged for a person to review, in every output.
REVIEW_MARGIN = 0.05


def for_review(pairs: Iterable[Pair], threshold: float | None) -> set[tuple[str, str]]:
    """The near pairs less than REVIEW_MARGIN above ``threshold``, as (left id, right id)."""
    if threshold is None:
        return set()
    limit = threshold + REVIEW_MARGIN
    return {(p.left_id, p.right_id) for p in pairs if p.kind == "near" and p.similarity < limit}


def ordered_pair(a: str, b: str) -> tuple[str, str]:
    """The two ids in the order people read them (:func:`natural_key`): ``ad9`` before ``ad10``."""
    return (a, b) if natural_key(a) <= natural_key(b) else (b, a)


def _exact_pairs(group: list[str], shared_tokens: int) -> Iterator[Pair]:
    """Every pair inside one exact-duplicate group."""
    for a, b in combinations(group, 2):
        yield Pair(a, b, 0, 1.0, shared_tokens, "exact")


def _near_pairs(
    group: list[str], other: list[str], distance: int, similarity: float, shared_tokens: int
) -> Iterator[Pair]:
    """Every pair across two groups whose contents are near-duplicates."""
    for a in group:
        for b in other:
            yield Pair(a, b, distance, similarity, shared_tokens, "near")


@dataclass
class Found:
    """A report's pairs, and what it measured on the way."""

    pairs: list[Pair]
    rules: MatchRules  # as applied: with an automatic threshold, the one it chose
    histogram: np.ndarray  # the similarities of every candidate pair of records, exact ones aside
    choice: ThresholdChoice | None  # how the threshold was chosen, when it was automatic
    # With an automatic threshold: the contents by the similarity of their nearest other one.
    nearest: np.ndarray | None
    left_out: LeftOut | None  # the buckets left out of the candidates, past the pair budget
    seconds: dict[str, float] = field(default_factory=dict)  # where the time went, by phase
    records: int = 0  # how many records the store held in the state the report read


def find_pairs(
    store: Store,
    params: FingerprintParams,
    rules: MatchRules,
    strategy: Strategy = "auto",
    pair_budget: int | None = None,
    progress: bool = False,
) -> Found:
    """All accepted pairs, sorted by (left id, right id).

    Every candidate pair is measured first; with ``rules.auto_threshold`` the threshold is then
    chosen from their similarities (:func:`neardup.tuning.choose_threshold`, falling back to
    ``rules.threshold``), and the rules are applied. ``strategy``: "buckets" takes the
    candidates from the band buckets the store lists (:mod:`neardup.buckets`), "join" computes
    them in memory from every record; "auto" takes the buckets (with the bands method) where
    they cost less than a join (:func:`_joinable`), else joins. Past ``pair_budget`` bucket
    pairs (by default :data:`neardup.selfjoin.PAIR_BUDGET`) both leave out the largest buckets
    (:func:`neardup.selfjoin.common_buckets`) and say so in ``left_out``. ``progress`` shows a
    progress bar on stderr for each pass over the store or the pairs.

    The store is read in one :meth:`~neardup.stores.base.Store.snapshot`: records another
    process writes meanwhile are in all of the report or none of it (``records`` says how many
    it read); where records it read are deleted meanwhile, Solr's raises
    :class:`~neardup.errors.StoreChanged`.
    """
    with store.snapshot():
        found = _found_pairs(store, params, rules, strategy, pair_budget, progress)
        return replace(found, records=store.count())


def _found_pairs(
    store: Store,
    params: FingerprintParams,
    rules: MatchRules,
    strategy: Strategy,
    pair_budget: int | None,
    progress: bool,
) -> Found:
    Searcher(store, params, rules)  # checks that the store indexes the method's field
    pair_budget = selfjoin.PAIR_BUDGET if pair_budget is None else pair_budget
    seconds: dict[str, float] = {}
    if _from_buckets(store, rules, strategy):
        return _bucket_report(store, params, rules, pair_budget, progress, seconds)
    total = store.count()
    with _phase("reading", total, " records", progress, seconds) as bar:
        contents = read_contents(
            _counted(_ahead_of_engine(store, store.iter_records(1000)), bar),
            params,
            TokenField(rules.method),
            rules.first_word,
            records=total,
        )
    with _timed("reading", seconds):
        weigh = held_weights(store, params, rules, contents.texts, contents.copies())
    with _timed("joining", seconds):
        candidates, left_out = scored_pairs(contents, rules.first_word, pair_budget, rules.method)
    exact = [(members, int(contents.sizes[g])) for g, members in contents.members.items()]
    return _measured_and_verified(
        weigh,
        params,
        rules,
        _joined_groups(store, contents),
        contents.copies(),
        (candidates, left_out),
        exact,
        progress,
        seconds,
    )


def _from_buckets(store: Store, rules: MatchRules, strategy: Strategy) -> bool:
    """Whether to report from the store's own buckets: when asked, or for "auto" when the
    store can list the band buckets and a join would cost more (:func:`_joinable`)."""
    if strategy == "buckets":
        if rules.method != "bands" or not store.lists_buckets(TokenField.BANDS):
            raise NeardupError(
                f"{store.url} was made before its bands had doc values, so it cannot list "
                "their buckets: report with the default strategy, or index into a new store"
                if rules.method == "bands"
                else f"a report from buckets needs the bands method, not {rules.method}"
            )
        return True
    return (
        strategy == "auto"
        and rules.method == "bands"
        and store.lists_buckets(TokenField.BANDS)
        and not _joinable(store)
    )


def _joinable(store: Store) -> bool:
    """Whether a self-join costs less than listing the store's buckets: for an embedded store
    of up to JOIN_RECORDS records, and, where the band keys fit JOIN_KEYS, for short records
    (the first thousand's mean length under LONG_TEXT) and for long texts whose characters
    fit one run of the measuring (ONE_RUN_CHARACTERS): the join holds every content then, and
    an engine's counts its shingles from them (100,000 generated documents from Solr: 13.6 s
    within 0.89 GB, against 38.6 s within 0.95 GB listing the buckets)."""
    records = store.count()
    if store.local and records <= JOIN_RECORDS:
        return True
    if records * store.params.bands > JOIN_KEYS:
        return False
    first = next(iter(store.iter_records(1000)), [])
    mean_length = sum(len(r.content) for r in first) / max(len(first), 1)
    return mean_length < LONG_TEXT or records * mean_length <= ONE_RUN_CHARACTERS


def _bucket_report(
    store: Store,
    params: FingerprintParams,
    rules: MatchRules,
    pair_budget: int,
    progress: bool,
    seconds: dict[str, float],
) -> Found:
    """The report from the store's shared band buckets (:mod:`neardup.buckets`)."""
    total = store.count() if progress else None
    with _phase("reading", total, " records", progress, seconds) as bar:
        digests = _counted(_read_ahead(store.iter_digests(rules.first_word)), bar)
        groups = ContentGroups.read(digests, rules.first_word)
    with _phase("joining", 100, "%", progress, seconds) as bar:
        pages = _covered(store.shared_buckets(TokenField.BANDS), bar)
        candidates, left_out = candidate_pairs(groups, pages, pair_budget)
    stored = StoredGroups(store, groups)
    copied = np.flatnonzero(groups.copies > 1)
    exact = [
        (members, params.bands)
        for start in range(0, len(copied), 1000)
        for members in stored.ids_of(copied[start : start + 1000]).values()
    ]
    return _measured_and_verified(
        partial(shingle_weights, store),
        params,
        rules,
        stored.of,
        groups.copies,
        (candidates, left_out),
        exact,
        progress,
        seconds,
    )


def held_weights(
    store: Store,
    params: FingerprintParams,
    rules: MatchRules,
    contents: Sequence[str] | None,
    copies: np.ndarray,
) -> Weigh:
    """How a report that read the store's records weighs shingles: by the store's
    frequencies, or, on an engine, by those counted from ``contents``, every content the
    report read (each held by ``copies`` records), when it kept them (counted at once, while
    little else is held). They are the same numbers, but an engine answers a thousand
    shingles a request (180,000 shingles of 9,206 long texts: 1.8 s from Solr, 0.1 s counted),
    where SQLite reads its counts at once."""
    # The store's own (a Jaccard report asks for none; a store that keeps no counts refuses,
    # as it does for lookups).
    uncounted = contents is None or not store.keeps_frequencies
    if store.local or rules.similarity == "jaccard" or uncounted:
        return partial(shingle_weights, store)
    return Frequencies.held(contents, copies, params).weights


def _joined_groups(store: Store, contents: Contents) -> GroupsOf:
    """The self-join's groups: their ids from memory, their content from memory too when the
    join kept the contents, else that of their first record in the store."""

    def of(groups: np.ndarray) -> tuple[list[str], Callable[[int], list[str]]]:
        if contents.texts is not None:
            return [contents.texts[g] for g in groups.tolist()], contents.ids
        heads = [contents.heads[g] for g in groups.tolist()]
        records = store.get(heads)
        if len(records) < len(set(heads)):  # deleted since the join read them (Solr)
            raise StoreChanged()
        return [records[head].content for head in heads], contents.ids

    return of


def _measured_and_verified(
    weigh: Weigh,
    params: FingerprintParams,
    rules: MatchRules,
    groups_of: GroupsOf,
    copies: np.ndarray,
    candidates: tuple[tuple[np.ndarray, np.ndarray, np.ndarray], LeftOut | None],
    exact: list[tuple[list[str], int]],
    progress: bool,
    seconds: dict[str, float],
) -> Found:
    """Measure every candidate pair of contents (``candidates``: low, high, shared tokens, and
    the buckets left out of them), choose the threshold from them when it is automatic, then
    verify the pairs that pass and expand them, with the ``exact`` groups' pairs, into record
    pairs. A given threshold is applied in the same pass: each run is verified as soon as it is
    measured."""
    (low, high, shared), left_out = candidates
    # A given threshold verifies each run's pairs as soon as they are measured, with their
    # texts in hand; an automatic one is known only once every pair is measured.
    verify = None if rules.to_choose else rules
    with progress_bar(
        progress, total=len(low), desc="measuring", unit=" pairs", unit_scale=True
    ) as bar:
        similarities, verified = _measured(
            weigh, params, rules, groups_of, (low, high, shared), verify, bar, seconds
        )
    histogram = _histogram(similarities, copies, low, high)
    automatic = rules.auto_threshold
    nearest = _nearest_histogram(similarities, copies, low, high) if automatic else None
    all_pairs = partial(_every_pair_histograms, weigh, params, rules, groups_of, copies)
    applied, choice = _applied(rules, histogram, nearest, all_pairs)
    if verify is None:
        with _phase("verifying", len(low), " pairs", progress, seconds) as bar:
            verified = _verified(applied, groups_of, (low, high, shared, similarities), bar)
    # The exact pairs last: while the measuring holds its texts, the fewer pairs held the better.
    pairs = in_order(
        verified + [pair for members, size in exact for pair in _exact_pairs(members, size)]
    )
    return Found(pairs, applied, histogram, choice, nearest, left_out, seconds)


def _histogram(
    similarities: np.ndarray, copies: np.ndarray, low: np.ndarray, high: np.ndarray
) -> np.ndarray:
    """The histogram of the similarities of every candidate pair of records: each pair of
    contents counts the pairs of records holding them. A few million pairs at a time, as
    np.histogram makes four copies of its input's size."""
    step = 4_000_000
    parts = (
        similarity_histogram(
            similarities[at : at + step], copies[low[at : at + step]] * copies[high[at : at + step]]
        )
        for at in range(0, len(low), step)
    )
    return sum(parts, similarity_histogram(similarities[:0]))


def _nearest_histogram(
    similarities: np.ndarray, copies: np.ndarray, low: np.ndarray, high: np.ndarray
) -> np.ndarray:
    """How many contents have their most similar other content in each bin: 1 for a content
    several records hold, 0 for one that no candidate pair names."""
    nearest = NearestSimilarity(copies)
    nearest.add(low, high, similarities)
    return nearest.histogram()


class NearestSimilarity:
    """Each content's similarity to its most similar other one, raised pair by pair."""

    def __init__(self, copies: np.ndarray) -> None:
        self.copies = copies
        self.values = np.zeros(len(copies))

    def add(self, low: np.ndarray, high: np.ndarray, similarities: np.ndarray) -> None:
        for side in (low, high):
            np.maximum.at(self.values, side, similarities)

    def histogram(self) -> np.ndarray:
        """Their histogram, a content several records hold counting at 1."""
        return similarity_histogram(np.where(self.copies > 1, 1.0, self.values))


def _applied(
    rules: MatchRules,
    histogram: np.ndarray,
    nearest: np.ndarray | None,
    all_pairs: Callable[[], EveryPair],
) -> tuple[MatchRules, ThresholdChoice | None]:
    """The rules with their threshold: chosen from the candidates' similarities (and each
    content's nearest, ``nearest``) when automatic and not chosen yet, or from ``all_pairs``'s
    when the candidates are too few to read it from (a small store, or records unlike one
    another)."""
    if not rules.to_choose:
        return rules, None
    choice = choose_threshold(histogram, FALLBACK_THRESHOLD, nearest)
    candidates = int(histogram.sum())
    if not choice.from_data and candidates < MIN_TAIL_PAIRS:
        choice = choose_from_every_pair(candidates, all_pairs(), FALLBACK_THRESHOLD)
    return replace(rules, threshold=choice.threshold), choice


# A store whose candidates are too few to read a threshold from (MIN_TAIL_PAIRS) reads it from
# every pair of its contents, or of this many spaced evenly through a larger store: 12.5
# million pairs, 3.2 s of 80-word documents.
EVERY_PAIR_CONTENTS = 5_000


def _every_pair_histograms(
    weigh: Weigh,
    params: FingerprintParams,
    rules: MatchRules,
    groups_of: GroupsOf,
    copies: np.ndarray,
) -> EveryPair:
    """The histograms a threshold is read from (see :func:`_histogram` and
    :func:`_nearest_histogram`), of every pair of contents the rules allow rather than of the
    candidates; past EVERY_PAIR_CONTENTS contents, of that many spaced evenly in the store's
    order (the same on every store)."""
    chosen = np.unique(
        np.linspace(0, len(copies) - 1, min(len(copies), EVERY_PAIR_CONTENTS))
        .round()
        .astype(np.int64)
    )
    texts, _ = groups_of(chosen)
    numbers, offsets, shingles = shingle_numbers(texts, params)
    weights = None if rules.similarity == "jaccard" else weigh(shingles)
    numerals = rules.numerals_of(texts)
    first_words = np.unique([first_word(text) for text in texts], return_inverse=True)[1]
    histogram = similarity_histogram(np.empty(0))
    nearest = NearestSimilarity(copies[chosen])
    for left, right in every_pair(len(texts)):
        if rules.first_word:  # the candidates the rules allow
            same = first_words[left] == first_words[right]
            left, right = left[same], right[same]
        similarities = pair_similarities(
            numbers, len(shingles), weights, offsets, left, right, numerals
        )
        histogram += _histogram(similarities, nearest.copies, left, right)
        nearest.add(left, right, similarities)
    return EveryPair(histogram, nearest.histogram(), len(chosen), len(copies))


PAIRS_PER_STEP = 2_000_000  # pairs of every_pair at once


def every_pair(count: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Every pair (a, b) with a < b < count, about PAIRS_PER_STEP at a time, rows of a at a
    time: 24,628 records' 300 million pairs are never held at once."""
    first = 0
    while first < count - 1:
        last = first + 1  # rows [first, last) hold ~PAIRS_PER_STEP pairs
        pairs = count - 1 - first
        while last < count - 1 and pairs + (count - 1 - last) <= PAIRS_PER_STEP:
            pairs += count - 1 - last
            last += 1
        rows = np.arange(first, last)
        lengths = count - 1 - rows
        a = np.repeat(rows, lengths)
        b = np.arange(len(a)) - np.repeat(np.cumsum(lengths) - lengths, lengths) + a + 1
        yield a, b
        first = last


@contextmanager
def _timed(what: str, seconds: dict[str, float]) -> Iterator[None]:
    started = time.perf_counter()
    yield
    seconds[what] = seconds.get(what, 0.0) + time.perf_counter() - started


@contextmanager
def _phase(
    what: str, total: int | None, unit: str, shown: bool, seconds: dict[str, float]
) -> Iterator[Bar]:
    """One pass of the report: timed, with a progress bar (and its estimate of the time left)
    on stderr when ``shown``."""
    with (
        _timed(what, seconds),
        progress_bar(shown, total=total, desc=what, unit=unit, unit_scale=True) as bar,
    ):
        yield bar


def _covered(pages: Iterable[Buckets], bar: Bar) -> Iterator[Buckets]:
    for page in pages:
        yield page
        bar.update(round(100 * page.covered) - bar.n)


def _read_ahead(batches: Iterable[Batched]) -> Iterator[Batched]:
    """``batches`` with the next one read on a second thread while this one is used: a store's
    reading (SQLite's steps, an engine's requests) and the report's compiled loops hold no GIL.
    Only where nothing else uses the store until the last batch is read; in this thread's
    context, so inside its snapshot (:meth:`~neardup.stores.base.Store.snapshot`)."""
    from concurrent.futures import ThreadPoolExecutor

    iterator, end, context = iter(batches), object(), copy_context()
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="neardup-reader") as reader:
        ahead = reader.submit(context.run, next, iterator, end)
        while (batch := ahead.result()) is not end:
            ahead = reader.submit(context.run, next, iterator, end)
            yield batch


def _ahead_of_engine(store: Store, batches: Iterable[Batched]) -> Iterable[Batched]:
    """``batches`` read ahead from an engine, whose requests wait on the network. The embedded
    store's reads hold the GIL for each row's objects, against the fingerprinting of the batch
    before: a report of 20,000 documents took 13 ms longer with them read ahead."""
    return batches if store.local else _read_ahead(batches)


def _counted(batches: Iterable[list[Batched]], bar: Bar) -> Iterator[list[Batched]]:
    for batch in batches:
        yield batch
        bar.update(len(batch))


def _texts(
    groups_of: GroupsOf, low: np.ndarray, high: np.ndarray
) -> tuple[list[str], np.ndarray, np.ndarray, Callable[[int], list[str]]]:
    """The contents of the groups of pairs (``low``, ``high``) in one list, where each side's
    is in it, and the groups' ids."""
    # Groups are numbers below the store's contents: a mark per number finds the distinct ones
    # and their ranks in one pass, where np.unique sorted a complete report's millions.
    held = _marks(low, high)
    if held.mean() > 0.5:  # most groups: every one up to the last, each at its own number
        held[:] = True
    needed = np.flatnonzero(held)
    texts, ids = groups_of(needed)
    if len(needed) == len(held):  # a million pairs' sides need no copy
        return texts, low, high, ids
    rank = (np.cumsum(held, dtype=np.int64) - 1).astype(np.int32)
    return texts, rank[low], rank[high], ids


def _measured(
    weigh: Weigh,
    params: FingerprintParams,
    rules: MatchRules,
    groups_of: GroupsOf,
    candidates: tuple[np.ndarray, np.ndarray, np.ndarray],
    verify: MatchRules | None,
    bar: Bar,
    seconds: dict[str, float],
) -> tuple[np.ndarray, list[Pair]]:
    """The rules' similarity of each candidate group pair (low, high, shared tokens), a run at
    a time (see :func:`_runs`), and with ``verify`` the record pairs it accepts."""
    low, high, shared = candidates
    similarities = np.empty(len(low), dtype=np.float64)
    pairs: list[Pair] = []
    for run in _runs(groups_of, low, high):
        sides = low[run], high[run]
        with _timed("measuring", seconds):
            texts, left, right, ids = _texts(groups_of, *sides)
            measured = _similarities(weigh, params, rules, texts, left, right)
        similarities[run] = measured
        if verify is not None:
            with _timed("verifying", seconds):
                found = (*sides, shared[run], measured)
                pairs += _accepted(verify, texts, left, right, ids, found)
        bar.update(len(measured))
    return similarities, pairs


def _marks(low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """A mark for each group number up to the last that a side of the pairs holds."""
    held = np.zeros(_numbers_below(low, high), dtype=bool)
    held[low] = held[high] = True
    return held


def _numbers_below(low: np.ndarray, high: np.ndarray) -> int:
    """One more than the last group number the pairs hold: at most so many groups."""
    return int(max(low.max(initial=-1), high.max(initial=-1))) + 1


def _runs(groups_of: GroupsOf, low: np.ndarray, high: np.ndarray) -> list[slice | np.ndarray]:
    """The runs the pairs are measured in: all of them at once when their contents fit
    ONE_RUN_CHARACTERS, else a run for each pair of blocks of a quarter of that
    (:func:`_block_runs`); the contents' mean length read off the first hundred."""
    sample = distinct(low[:1000])[:100]
    texts, _ = groups_of(sample)
    mean_length = max(sum(map(len, texts)) / len(texts) if texts else 1, 1)
    # Groups are numbered below the store's contents: where all of them would fit, the pairs'
    # own need not be counted (a pass over every pair, 0.24 s of 100,000 short records').
    held = _numbers_below(low, high)
    if held * mean_length > ONE_RUN_CHARACTERS:
        held = np.count_nonzero(_marks(low, high))
    if held * mean_length <= ONE_RUN_CHARACTERS:
        return [slice(0, len(low))] if len(low) else []
    return _block_runs(low, high, max(1000, int(ONE_RUN_CHARACTERS / 4 / mean_length)))


def _block_runs(low: np.ndarray, high: np.ndarray, block: int) -> list[np.ndarray]:
    """The places of the pairs (``low``, ``high``) whose sides fall in each pair of blocks of
    ``block`` consecutive group numbers, in order, for each pair of blocks that holds some:
    a run's contents are at most two blocks, and a block is shingled once for each block it
    pairs with, where runs of consecutive pairs reach all over the store from each left side."""
    blocks = _numbers_below(low, high) // block + 1
    # A small type sorts by radix: 34 million pairs' blocks in a second or so.
    kind = np.min_scalar_type(blocks * blocks)
    which = (low // block).astype(kind) * kind.type(blocks) + (high // block).astype(kind)
    order = np.argsort(which, kind="stable")  # each run's pairs stay in their order
    ends = np.cumsum(np.bincount(which, minlength=blocks * blocks))
    starts = np.r_[0, ends[:-1]]
    return [order[start:end] for start, end in zip(starts, ends, strict=True) if end > start]


def _verified(
    rules: MatchRules,
    groups_of: GroupsOf,
    measured: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    bar: Bar,
) -> list[Pair]:
    """The record pairs the rules accept among the measured group pairs, their texts fetched
    again a run at a time."""
    pairs: list[Pair] = []
    low, high, shared, similarities = measured
    keep = np.flatnonzero(_passing(rules, similarities))
    bar.update(len(low) - len(keep))
    for run in _runs(groups_of, low[keep], high[keep]):
        part = keep[run]
        texts, left, right, ids = _texts(groups_of, low[part], high[part])
        found = (low[part], high[part], shared[part], similarities[part])
        pairs += _accepted(rules, texts, left, right, ids, found)
        bar.update(len(part))
    return pairs


def _accepted(
    rules: MatchRules,
    texts: list[str],
    left: np.ndarray,
    right: np.ndarray,
    ids: Callable[[int], list[str]],
    measured: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
) -> list[Pair]:
    """The record pairs the rules accept among measured group pairs (low, high, shared
    tokens, similarity) whose texts are texts[left[i]] and texts[right[i]]: the similarity
    first, the word edit distance only for pairs that pass it."""
    pairs: list[Pair] = []
    keep = np.flatnonzero(_passing(rules, measured[3]))
    low, high, shared, similarities = (column[keep] for column in measured)
    distances = word_edit_distances(texts, left[keep].tolist(), right[keep].tolist())
    for a, b, distance, count, similarity in zip(
        low.tolist(),
        high.tolist(),
        distances,
        shared.tolist(),
        similarities.tolist(),
        strict=True,
    ):
        if rules.accepts(distance, similarity):
            pairs.extend(_near_pairs(ids(a), ids(b), distance, similarity, count))
    return pairs


def _passing(rules: MatchRules, similarities: np.ndarray) -> np.ndarray:
    if rules.threshold is None:
        return np.ones(len(similarities), dtype=bool)
    return similarities >= rules.threshold


def _similarities(
    weigh: Weigh,
    params: FingerprintParams,
    rules: MatchRules,
    texts: list[str],
    left: np.ndarray,
    right: np.ndarray,
) -> np.ndarray:
    """The rules' similarity of texts[left[i]] and texts[right[i]]: the same values as a
    lookup's (:meth:`Searcher.measure`), many pairs at once."""
    if rules.similarity == "jaccard":
        return jaccard_pairs(texts, left, right, params)
    # Each distinct shingle is looked up and weighed once: the texts share most of theirs.
    numbers, offsets, distinct = shingle_numbers(texts, params)
    weights = weigh(distinct)
    numerals = rules.numerals_of(texts)
    return pair_similarities(numbers, len(distinct), weights, offsets, left, right, numerals)


def shingle_weights(store: Store, distinct: np.ndarray) -> np.ndarray:
    """The weight of each of some distinct shingles (their hashes, as :func:`shingle_numbers`
    gives them) in ``store``: the rarity the weighted similarity weighs them by."""
    return store.frequencies(distinct.view(np.int64)).weights(distinct)


def clusters(pairs: Iterable[Pair], grouping: Grouping = "components") -> list[list[str]]:
    """Groups of records from their pairs, largest first, then by first id.

    ``components``: the connected components of the pair graph, ids in natural order
    (:func:`natural_key`); a chain of near-duplicates is one group even when its ends differ.
    ``center``: every member is a near-duplicate of its group's first id, the center. Pairs are
    taken from the most similar down: two records in no group yet start one, the first id of
    the two its center; a record in no group joins a neighbour that is a center; anything else
    is left (center clustering, as in Haveliwala, Gionis and Indyk's web-page grouping)."""
    groups = _centers(pairs) if grouping == "center" else _components(pairs)
    return sorted(groups, key=lambda g: (-len(g), natural_key(g[0])))


def _components(pairs: Iterable[Pair]) -> list[list[str]]:
    parent: dict[str, str] = {}

    def root(x: str) -> str:
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for pair in pairs:
        a, b = root(pair.left_id), root(pair.right_id)
        if a != b:
            parent[max(a, b)] = min(a, b)
    groups: dict[str, list[str]] = {}
    for member in parent:
        groups.setdefault(root(member), []).append(member)
    return [sorted(g, key=natural_key) for g in groups.values()]


def _centers(pairs: Iterable[Pair]) -> list[list[str]]:
    def strongest_first(p: Pair) -> tuple[float, int, tuple, tuple]:
        return -p.similarity, p.edit_distance, natural_key(p.left_id), natural_key(p.right_id)

    center_of: dict[str, str] = {}
    for pair in sorted(pairs, key=strongest_first):
        a, b = sorted((pair.left_id, pair.right_id), key=natural_key)
        if a not in center_of and b not in center_of:
            center_of[a] = center_of[b] = a
        elif b not in center_of and center_of[a] == a:
            center_of[b] = a
        elif a not in center_of and center_of[b] == b:
            center_of[a] = b
    members: dict[str, list[str]] = {}
    for member, center in center_of.items():
        if member != center:
            members.setdefault(center, []).append(member)
    return [[center, *sorted(rest, key=natural_key)] for center, rest in members.items()]
