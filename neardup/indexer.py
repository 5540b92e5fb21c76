"""Batch indexing: read records, fingerprint them a batch at a time, upsert each batch (on a
second thread, while the next batch is fingerprinted)."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import numpy as np

from .errors import NeardupError
from .fingerprint import (
    Counted,
    Fingerprint,
    FingerprintParams,
    TokenField,
    fingerprint_batch,
    frequency_counts,
    md5_digests,
)
from .phrases import counted, leading_lines
from .readers import Record, SkipLog
from .stores import Document, Store, id_problem
from .stores.base import ParamsRequest, StoredRecord, in_batches

if TYPE_CHECKING:
    from concurrent.futures import Future

T = TypeVar("T")

# Records per transaction. Larger transactions write each touched index page once for more
# records (a commit writes every page it dirtied): 10,000 index twice as fast as 1,000.
DEFAULT_BATCH_SIZE = 10_000

# Batches this large are fingerprinted on two threads while the writer is idle (see
# _fingerprints); a smaller one is over before a second thread would be worth its hand-off.
SHARED_BATCH = 2_000

# What a record whose id came earlier in the same run does: replace the earlier record (and be
# counted), be skipped (and counted), be kept under its id numbered (and counted), or stop the
# run. Keeping is for files whose ids are not unique (freeDB's disc ids name different discs).
OnDuplicateId = Literal["replace", "skip", "keep", "error"]
ON_DUPLICATE_ID: tuple[OnDuplicateId, ...] = ("replace", "skip", "keep", "error")
# A kept repeat's id: its own, this, and its number among the records of the run holding it.
KEPT_ID_MARK = "#"
KEEP_HINT = "; --on-duplicate-id keep keeps every one"


class SeenIds:
    """The ids of a run so far, known by their MD5s (as contents are) in sorted arrays that
    merge as they grow: 16 bytes an id. A set of the id strings took ~100 bytes an id, 1 GB of
    a ten-million-record run."""

    def __init__(self) -> None:
        self._runs: list[np.ndarray] = []  # sorted, disjoint; each at most half the one before

    def first_seen(self, ids: Sequence[str]) -> np.ndarray:
        """Whether each id is new to the run (and not earlier in ``ids``); all are then seen."""
        digests = md5_digests(ids)
        distinct, first = np.unique(digests, return_index=True)
        new = np.zeros(len(ids), dtype=bool)
        new[first] = True
        unseen = np.ones(len(distinct), dtype=bool)
        for run in self._runs:
            where = np.minimum(np.searchsorted(run, distinct), len(run) - 1)
            unseen &= run[where] != distinct
        new[first[~unseen]] = False
        if unseen.any():
            self._runs.append(distinct[unseen])
        while len(self._runs) > 1 and len(self._runs[-2]) < 2 * len(self._runs[-1]):
            merged = np.concatenate([self._runs.pop(), self._runs.pop()])
            merged.sort()
            self._runs.append(merged)
        return new


@dataclass
class Admitted:
    """What a run does with a batch of records (:meth:`IndexSummary.admit`)."""

    records: list[Record | None]  # each record as it is to be indexed, or None: not indexed
    first: list[Record]  # those whose id is new to the run (a kept repeat's numbered one too)
    replacing: list[Record]  # repeats of an id to be stored in place of the earlier record


# Why a run skips records it read whole, as it was asked to: a check's duplicates, a repeat.
STORED_ALREADY = "stored already with the same text"
DUPLICATE_STORED = "a near-duplicate is stored"
REPEATED_ID = "repeated id"


@dataclass
class IndexSummary:
    read: int = 0
    indexed: int = 0
    skipped: SkipLog = field(default_factory=SkipLog)
    replaced: SkipLog = field(default_factory=lambda: SkipLog(keep=3))  # replaced earlier ones
    kept: SkipLog = field(default_factory=lambda: SkipLog(keep=3))  # repeats kept, numbered
    # stored records, from before this run, that a record of the run replaced (same id)
    replaced_stored: SkipLog = field(default_factory=lambda: SkipLog(keep=3))
    unchanged: int = 0  # stored records, from before this run, given again with the same text
    seconds: float = 0.0
    documents: int = 0  # records in the store afterwards
    params: ParamsRequest = None
    ids: SeenIds = field(default_factory=SeenIds, repr=False)  # every id indexed in this run
    # the last number given to each id kept more than once (see KEPT_ID_MARK)
    numbered: dict[str, int] = field(default_factory=dict, repr=False)
    text: list[str] = field(default_factory=list)  # each file's text fields, where neardup chose
    damaged: list[str] = field(default_factory=list)  # files whose rest could not be read
    # with skip_duplicates: (record not stored, the stored duplicate, similarity)
    duplicates: list[tuple[str, str, float]] = field(default_factory=list)
    checked: str = ""  # with skip_duplicates: the threshold records were checked at, and why
    narrowed: int = 0  # with skip_duplicates: records checked by their rarer tokens alone
    removed: str = ""  # the store the run made and removed, as it stored nothing

    @property
    def unread(self) -> int:
        """The records skipped for what they hold or lack (no text, invalid JSON), not as the
        run was asked to (a duplicate checked, a repeated id)."""
        asked = (STORED_ALREADY, DUPLICATE_STORED, REPEATED_ID)
        return self.skipped.total - sum(self.skipped.reasons[reason] for reason in asked)

    def describe(self) -> str:
        rate = self.indexed / self.seconds if self.seconds else 0.0
        repeats = [  # each count, what it counts, and what else there is to do
            (self.replaced, "replaced {} with a repeated id", "earlier record", KEEP_HINT),
            (self.kept, "kept {} with a repeated id under a numbered id", "record", ""),
            (self.replaced_stored, "replaced {} with the same id and another text",
             "stored record", ""),
        ]  # fmt: skip
        repeated = "".join(
            f"; {text.format(counted(log.total, noun))} "
            f"(first: {', '.join(reason for _, reason in log.examples)}{hint})"
            for log, text, noun, hint in repeats
            if log.total
        )
        if self.unchanged:
            repeated += f"; {counted(self.unchanged, 'stored record')} given again unchanged"
        lines = [*self.text, self.checked, narrowed_note(self.narrowed, "checked")]
        return leading_lines(lines) + (
            f"read {self.read:,}, indexed {self.indexed:,}, skipped {self.skipped.summary()}"
            f"{repeated}; {self.seconds:.1f} s ({rate:,.0f} records/s); "
            + (
                f"nothing stored, so no store was made at {self.removed}"
                if self.removed
                else f"store holds {self.documents:,}"
            )
        )

    def as_dict(self) -> dict[str, object]:
        return {
            "read": self.read,
            "indexed": self.indexed,
            "skipped": self.skipped.total,
            "skipped_by_reason": dict(self.skipped.reasons),
            "replaced": self.replaced.total,
            "kept": self.kept.total,
            "replaced_stored": self.replaced_stored.total,
            "replaced_stored_first": [reason for _, reason in self.replaced_stored.examples],
            "unchanged": self.unchanged,
            "documents": self.documents,
            "store_made": not self.removed,
            "seconds": round(self.seconds, 3),
            "text": self.text,
            "damaged": self.damaged,
            "checked": self.checked,
            "narrowed": self.narrowed,
            "duplicates": [
                {"id": i, "duplicate_of": d, "similarity": round(s, 6)}
                for i, d, s in self.duplicates
            ],
        }

    def admit(self, records: Sequence[Record], on_duplicate_id: OnDuplicateId) -> Admitted:
        """Which records to index, by their ids and the run so far: see :class:`Admitted`.
        Skipped and kept repeats are counted here; replacing ones by the caller, who knows
        whether they were stored."""
        problems = [id_problem(r.id) for r in records]
        new = iter(
            self.ids.first_seen([r.id for r, p in zip(records, problems, strict=True) if not p])
        )
        admitted = Admitted([], [], [])
        for record, problem in zip(records, problems, strict=True):
            if problem:
                self.skipped.add(record.line, problem, record.source)
                record = None
            elif next(new):
                admitted.first.append(record)
            elif on_duplicate_id == "keep":
                if record := self._numbered(record):
                    admitted.first.append(record)
            elif self._repeated(record, on_duplicate_id):
                admitted.replacing.append(record)
            else:
                record = None
            admitted.records.append(record)
        return admitted

    def count_replacing(self, records: Sequence[Record]) -> None:
        """Count and name ``records`` stored in place of an earlier record of the run."""
        for record in records:
            self.replaced.add(record.line, f"{record.id!r} at {record.where}")

    def _numbered(self, record: Record) -> Record | None:
        """A repeat of an id, under the id with the next number no record of the run has
        (``a1#2``, ``a1#3``), counted; None, counted as skipped, where that id is too long."""
        number = self.numbered.get(record.id, 1)
        while True:
            number += 1
            kept_id = f"{record.id}{KEPT_ID_MARK}{number}"
            if problem := id_problem(kept_id):
                self.skipped.add(record.line, f"repeated id, numbered: {problem}", record.source)
                return None
            if self.ids.first_seen([kept_id])[0]:
                break
        self.numbered[record.id] = number
        self.kept.add(record.line, f"{record.id!r} at {record.where} as {kept_id!r}")
        return replace(record, id=kept_id)

    def count_stored(
        self,
        records: Sequence[Record],
        held: Mapping[str, StoredRecord],
        contents: Mapping[str, str],
    ) -> None:
        """Of the ``records`` whose id the store ``held`` before the run, count those stored
        again with the same content as unchanged, and name the others as replaced (their
        ``contents`` as indexed)."""
        changed = {i for i, stored in held.items() if stored.content != contents.get(i)}
        self.unchanged += len(held) - len(changed)
        self.count_replaced(records, changed)

    def count_replaced(self, records: Sequence[Record], held: Collection[str]) -> None:
        """Count and name the ``records`` whose id the store ``held`` before the run with
        another content."""
        for record in records:
            if record.id in held:
                self.replaced_stored.add(record.line, f"{record.id!r} at {record.where}")

    def _repeated(self, record: Record, on_duplicate_id: OnDuplicateId) -> bool:
        """Whether to index a record whose id came earlier in the run."""
        if on_duplicate_id == "error":
            raise NeardupError(
                f"{record.where}: the id {record.id!r} came earlier in this run "
                "(--on-duplicate-id replace, skip or keep goes on)"
            )
        if on_duplicate_id == "skip":
            self.skipped.add(record.line, REPEATED_ID, record.source)
            return False
        return True


class BackgroundWriter:
    """Upserts batches on a second thread, one batch behind its caller: the store writes a
    batch (SQLite's steps and commits, an engine's requests: none holds the GIL) while the
    caller reads and fingerprints the next (whose compiled loops release the GIL too). While
    it has no batch to write (before the first), the thread takes other work (:meth:`lend`)."""

    def __init__(self, store: Store) -> None:
        from concurrent.futures import ThreadPoolExecutor  # (3 ms) for the commands that write

        self.store = store
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="neardup-writer")
        self._writing: Future[None] | None = None

    def write(self, documents: Sequence[Document], counted: Counted | None = None) -> None:
        """Once the batch before is written (its error, if any, is raised here), start this
        (``counted``: its shingle frequencies, see :meth:`Store.upsert`)."""
        self._start(self.store.upsert, documents, counted)

    def write_changed(
        self, documents: Sequence[Document], held: Future[dict[str, StoredRecord]]
    ) -> None:
        """:meth:`write` of the ``documents`` that are not ``held`` with the same content (the
        look-up queued before, done when this starts): a record given again unchanged stays
        as it was written, so a file indexed again writes only what changed, and a Solr
        report that reads meanwhile keeps the records it read (see SolrStore.snapshot)."""

        def upsert_changed() -> None:
            stored = held.result()
            changed = [
                d
                for d in documents
                if (before := stored.get(d.id)) is None or before.content != d.fingerprint.content
            ]
            if changed:
                self.store.upsert(changed, _counted(self.store, changed))

        self._start(upsert_changed)

    def _start(self, writing: Callable[..., None], *args: Any) -> None:
        self.wait()
        self._writing = self._thread.submit(writing, *args)

    @property
    def idle(self) -> bool:
        """Whether no batch is being written."""
        return self._writing is None or self._writing.done()

    def lend(self, work: Callable[..., T], *args: Any, **kwargs: Any) -> Future[T]:
        """Run ``work`` on the writer's thread (queued behind the batch being written, if any)."""
        return self._thread.submit(work, *args, **kwargs)

    def wait(self) -> None:
        """Until the batch being written is written; raises its error."""
        writing, self._writing = self._writing, None
        if writing is not None:
            writing.result()

    def __enter__(self) -> BackgroundWriter:
        return self

    def __exit__(self, kind: type[BaseException] | None, *exc: object) -> None:
        # A batch being written is finished (or fails) whatever stops the caller, so that
        # the store is never left mid-transaction; the caller's own error wins.
        try:
            self.wait()
        except Exception:
            if kind is None:
                raise
        finally:
            self._thread.shutdown()


def batches(records: Iterable[Record], size: int) -> Iterator[list[Record]]:
    """``records`` in lists of ``size``; the records of a stream (a reader, or
    :class:`~neardup.readers.Records`, whose ``streamed`` is true) as they arrive
    (:func:`_as_they_arrive`)."""
    if getattr(records, "streamed", False):
        yield from _as_they_arrive(records, size)
        return
    yield from in_batches(records, size)


# How long a list of a stream's records waits for the next before it is handled: reading a
# record that has arrived takes microseconds, so a reader still without one waits for input.
ARRIVAL_WAIT = 0.001  # seconds


def _as_they_arrive(records: Iterable[Record], size: int) -> Iterator[list[Record]]:
    """The records of a stream in lists of up to ``size``, read on a thread of their own: a
    list ends where the reader waits for input (no record within ARRIVAL_WAIT), so records
    piped in one at a time are each handled as they arrive, where a list waited to be full
    or the stream to end. Whatever buffers them (a pipe, a decoder, a CSV reader), records
    that have arrived are read at once, so a burst is one list. The reader holds at most two
    lists ahead; its error, if any, is raised after the records before it."""
    arrived: deque[Record] = deque()
    changed = threading.Condition()
    wanted = 1  # how many records the caller waits for: the reader wakes it once they came
    ended: list[BaseException | None] = []  # [None] at the end, [error] where reading failed
    stopped = False  # the caller took no more

    def read() -> None:
        end: BaseException | None = None
        try:
            for record in records:
                arrived.append(record)  # one step: the lock only to wake, or wait for room
                if len(arrived) >= wanted:
                    with changed:
                        changed.notify()
                        while len(arrived) >= 2 * size and not stopped:
                            changed.wait()
                if stopped:
                    return
        except BaseException as exc:  # raised in the caller's thread, after the records before
            end = exc
        with changed:
            ended.append(end)
            changed.notify()

    threading.Thread(target=read, name="neardup-arrivals", daemon=True).start()
    batch: list[Record] = []
    try:
        while True:
            with changed:
                wanted = size - len(batch) if batch else 1
                if len(arrived) < wanted and not ended:
                    changed.wait(ARRIVAL_WAIT if batch else None)
                came = bool(arrived)
                while arrived and len(batch) < size:
                    batch.append(arrived.popleft())
                changed.notify()  # room for the reader
                done = not arrived and bool(ended)
            if batch and (len(batch) == size or done or not came):
                yield batch
                batch = []
            if done:
                if ended[0] is not None:
                    raise ended[0]
                return
    finally:
        with changed:
            stopped = True
            changed.notify()


def index_records(
    store: Store,
    records: Iterable[Record],
    params: ParamsRequest = None,
    *,
    batch_size: int = DEFAULT_BATCH_SIZE,
    summary: IndexSummary | None = None,
    on_batch: Callable[[], None] | None = None,
    on_duplicate_id: OnDuplicateId = "replace",
    more_follow: bool = False,
) -> IndexSummary:
    """Fingerprint and upsert records a batch at a time (see the Store's write guarantee);
    ``more_follow``: the caller writes again at once, and flushes at its end (Store.publish)."""
    summary = summary or IndexSummary()
    started = time.perf_counter()
    summary.params = store.ensure_params(params)
    shingles = store.writes_shingles
    # Only a store that held records can have one replaced: a new one costs no look-up.
    held = store.count() > 0
    with BackgroundWriter(store) as writer:
        checking: Callable[[], None] | None = None
        for batch in batches(records, batch_size):
            checked = _index_batch(batch, writer, shingles, summary, on_duplicate_id, held)
            if checking:  # the batch before's look-up: done, as its batch has been written
                checking()
            checking = checked
            if on_batch:
                on_batch()
        writer.wait()
        if checking:
            checking()
    if more_follow:
        store.publish()
    else:
        store.flush()
    summary.documents = store.count()
    summary.seconds += time.perf_counter() - started
    return summary


def narrowed_note(narrowed: int, done: str) -> str:
    """What a summary says of the records ``done`` (checked, looked up, linked) against the
    stored records that share their rarer tokens alone (see Searcher.lookup_batch); nothing
    when there were none."""
    if not narrowed:
        return ""
    return (
        f"{counted(narrowed, 'record')} {done} against the stored records that share their "
        "rarer tokens alone: tokens that very many stored records share were left out, as a "
        "report leaves out its largest buckets"
    )


def with_words(
    batch: Sequence[Record], fingerprints: Sequence[Fingerprint], skipped: SkipLog
) -> list[tuple[Record, Fingerprint]]:
    """The records of a batch that have words, each with its fingerprint; the others counted
    in ``skipped``."""
    worded = []
    for record, fp in zip(batch, fingerprints, strict=True):
        if fp.num_words:
            worded.append((record, fp))
        else:
            skipped.add(record.line, "no words after normalisation", record.source)
    return worded


def _index_batch(
    batch: list[Record],
    writer: BackgroundWriter,
    shingles: bool,
    summary: IndexSummary,
    on_duplicate_id: OnDuplicateId,
    held: bool,
) -> Callable[[], None] | None:
    """Fingerprint a batch, count what is skipped, and hand the rest to the writer. When the
    store ``held`` records before the run, the writer's thread first asks which of the batch's
    ids new to the run it holds (it takes its work in order), writes only the records it does
    not hold as they are, and the returned call counts them."""
    texts = [r.text for r in batch]
    fingerprints = _fingerprints(texts, summary.params, shingles, writer)
    worded = with_words(batch, fingerprints, summary.skipped)
    admitted = summary.admit([record for record, _ in worded], on_duplicate_id)
    summary.count_replacing(admitted.replacing)
    first = admitted.first
    documents = [
        Document(record.id, fp, summary.params.fields)
        for record, (_, fp) in zip(admitted.records, worded, strict=True)
        if record
    ]
    looked_up = writer.lend(writer.store.get, [r.id for r in first]) if held and first else None
    if looked_up is None:
        writer.write(documents, _counted(writer.store, documents))
    else:
        writer.write_changed(documents, looked_up)
    summary.read += len(batch)
    summary.indexed += len(documents)
    if looked_up is None:
        return None
    contents = {d.id: d.fingerprint.content for d in documents}
    return lambda: summary.count_stored(first, looked_up.result(), contents)


def _counted(store: Store, documents: Sequence[Document]) -> Counted | None:
    """The batch's shingle frequencies, for a store that counts them by batch and indexes no
    shingles, and the batch's shingles let go: they are most of its memory (77 MB of two
    batches of 10,000 ads in flight), and written memory costs its first touch too. The
    fingerprints are this run's own, made for this batch."""
    if not (store.counts_batches and store.keeps_frequencies) or not documents:
        return None
    if TokenField.SHINGLES in documents[0].fields:
        return None
    counted = frequency_counts([d.fingerprint for d in documents])
    for document in documents:
        document.fingerprint.shingle_hashes = None
    return counted


def _fingerprints(
    texts: list[str], params: FingerprintParams, shingles: bool, writer: BackgroundWriter
) -> list[Fingerprint]:
    """The batch's fingerprints; while the writer is idle (the first batch, or a store that
    writes faster than the batches come), its thread fingerprints half of them: the first
    batch of 10,000 documents took 66 ms on one thread, ~50 ms on two."""
    if not writer.idle or len(texts) < SHARED_BATCH:
        return fingerprint_batch(texts, params, shingles=shingles)
    half = len(texts) // 2
    later = writer.lend(fingerprint_batch, texts[half:], params, shingles=shingles)
    return fingerprint_batch(texts[:half], params, shingles=shingles) + later.result()
