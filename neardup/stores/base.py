"""The one small interface every store implements.

A store holds, per record: the id, the normalised content, its MD5, the first word, the number of
words, and up to three multi-valued token fields (shingles, signature, bands). It also keeps one
JSON object of its own settings (the fingerprint parameters and the layout of its fields). The
indexer, the searcher and the report talk to nothing else, so every engine gives the same answers.

What a write guarantees: every store replaces records by id, so writing the same records again
changes nothing, and a run that failed part-way is completed by running it again. The embedded
store writes each batch in one transaction; Solr and Elasticsearch have no transactions across
documents, so a failed batch can leave part of itself written until the run is repeated.
"""

from __future__ import annotations

import os
import random
import time
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import copy_context
from dataclasses import dataclass, replace
from itertools import islice
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from ..errors import NeardupError, ParameterMismatch, StoreFull, StoreUnavailable
from ..fingerprint import (
    Counted,
    Fingerprint,
    FingerprintParams,
    Frequencies,
    TokenField,
    holds_surrogates,
)

if TYPE_CHECKING:
    from concurrent.futures import Future

ParamsRequest = FingerprintParams | Mapping[str, object] | None
T = TypeVar("T")
R = TypeVar("R")

# An engine's check-then-add holds a lease (see Store.exclusive): a writer that died frees the
# store after LEASE_SECONDS, and another waits up to LOCK_WAIT_SECONDS for a live one.
LEASE_SECONDS = 600
LOCK_WAIT_SECONDS = 120
# Times a settings write is tried while other processes write them (see _rewrite_settings).
SETTINGS_ATTEMPTS = 20

# The longest id every store holds, in UTF-8 bytes (Elasticsearch's limit; Solr's is 32 KB).
MAX_ID_BYTES = 512


def id_problem(record_id: str) -> str | None:
    """Why no store can hold this id, if none can."""
    if not record_id.strip():
        return "empty id"
    if holds_surrogates(record_id):
        return "id holds half of a surrogate pair"
    if "\0" in record_id:  # SQLite's text functions end a string there: lost from the id on
        return "id holds a NUL character"
    if len(record_id.encode("utf-8")) > MAX_ID_BYTES:
        return f"id longer than {MAX_ID_BYTES} bytes"
    return None


# What a store's settings say about how it was written: stores from before the token fields had
# one name everywhere lack "layout" (the engines then use the old field names, see
# neardup.stores.schema); from layout 3 on, every store keeps its shingles' document frequencies.
LAYOUT = 3
NAMED_FIELDS_LAYOUT = 2
FREQUENCIES_LAYOUT = 3
# The settings commands measure and write again often (a check-then-add counts its pairs each
# time), apart from the configuration the store was indexed with: an engine may keep them
# elsewhere (Elasticsearch does, see neardup.stores.elasticsearch).
MEASURED_SETTINGS = frozenset({"threshold_choice", "last_report", "checked_pairs"})


@dataclass(slots=True)  # one per record indexed: see StoredRecord
class Document:
    """One record ready to store: its id, its fingerprint and the token fields to index
    (the store's ``FingerprintParams.fields``)."""

    id: str
    fingerprint: Fingerprint
    fields: tuple[str, ...] = tuple(TokenField)

    def indexed(self, field: TokenField) -> bool:
        # A StrEnum member equals its value; reading .value is a descriptor call per record.
        return field in self.fields


# Not frozen: a report makes millions of these, and a frozen dataclass takes five times as long
# to make (each field is set through object.__setattr__).
@dataclass(slots=True)
class StoredRecord:
    id: str
    content: str
    md5: str
    first_word: str
    num_words: int


def not_a_store(
    url: str, what: str, unit: str, parts: str, names: Sequence[str]
) -> StoreUnavailable:
    """The error of ``what`` (a database, index or core) of another application given as a
    store, by a slip in --store, and left as it is: a store is ``unit`` of its own (a file, an
    index, a core), and its ``parts`` (tables, fields) are not ``names``."""
    listed = ", ".join(names[:5]) + (", …" if len(names) > 5 else "")
    return StoreUnavailable(
        f"{url} is {what} that is no neardup store (its {parts}: {listed}): a store is {unit} "
        f"of its own; give another {unit.split()[-1]}'s name"
    )


def md5_halves(md5s: Sequence[str]) -> np.ndarray:
    """MD5s (32 hex digits) as rows of two uint64: the first 8 bytes, then the last 8."""
    raw = bytes.fromhex("".join(md5s))
    return np.frombuffer(raw, dtype=">u8").astype(np.uint64).reshape(-1, 2)


# MD5s an engine is asked for in one terms query: Elasticsearch refuses more than 65,536 terms
# (index.max_terms_count), and Solr runs a page's query again for every page of its answer.
MD5S_PER_QUERY = 10_000


def md5_queries(md5s: Sequence[str]) -> Iterator[list[str]]:
    """``md5s`` a query's worth at a time."""
    for start in range(0, len(md5s), MD5S_PER_QUERY):
        yield list(md5s[start : start + MD5S_PER_QUERY])


def md5_strings(halves: np.ndarray) -> list[str]:
    """:func:`md5_halves` rows back as 32 hex digits."""
    return [f"{high:016x}{low:016x}" for high, low in halves.tolist()]


@dataclass(frozen=True)
class Buckets:
    """A page of buckets: the records holding one token each, as the MD5s of their distinct
    contents (:func:`md5_halves` rows), bucket after bucket."""

    md5s: np.ndarray
    sizes: np.ndarray  # how many contents each bucket has, 2 or more
    covered: float  # the share of the field's tokens listed once this page is read: progress

    @classmethod
    def of(cls, buckets: Sequence[Sequence[str]], covered: float) -> Buckets:
        """From buckets of MD5 strings, each MD5 once in its bucket; buckets of fewer than
        two contents are left out."""
        distinct = (list(dict.fromkeys(bucket)) for bucket in buckets)
        kept = [b for b in distinct if len(b) > 1]
        flat = [md5 for bucket in kept for md5 in bucket]
        return cls(md5_halves(flat), np.array([len(b) for b in kept], dtype=np.int64), covered)

    @classmethod
    def of_holders(cls, tokens: np.ndarray, md5s: np.ndarray, covered: float) -> Buckets:
        """From one (token, MD5) row per record holding a token, sorted by token."""
        shared = np.zeros(len(tokens), dtype=bool)
        shared[1:] = tokens[1:] == tokens[:-1]
        shared[:-1] |= shared[1:]
        tokens, md5s = tokens[shared], md5s[shared]
        order = np.lexsort((md5s[:, 1], md5s[:, 0], tokens))
        tokens, md5s = tokens[order], md5s[order]
        new_token = np.ones(len(tokens), dtype=bool)
        new_token[1:] = tokens[1:] != tokens[:-1]
        distinct = new_token.copy()
        distinct[1:] |= np.any(md5s[1:] != md5s[:-1], axis=1)  # copies of one content: once
        new_token, md5s = new_token[distinct], md5s[distinct]
        starts = np.flatnonzero(new_token)
        sizes = np.diff(np.r_[starts, len(md5s)])
        return cls(md5s[np.repeat(sizes > 1, sizes)], sizes[sizes > 1], covered)

    def __len__(self) -> int:
        return len(self.sizes)

    def hex(self) -> list[list[str]]:
        """Each bucket's MD5s as strings."""
        strings = md5_strings(self.md5s)
        ends = np.cumsum(self.sizes).tolist()
        return [
            strings[end - size : end] for end, size in zip(ends, self.sizes.tolist(), strict=True)
        ]


# Not frozen, as StoredRecord: a checked batch of 10,000 person records makes millions.
@dataclass(slots=True)
class Candidate:
    """A record that shares tokens with a query, returned whole so that verifying it needs no
    second round trip."""

    record: StoredRecord
    score: int  # how many of the query's tokens the record shares

    @property
    def id(self) -> str:
        return self.record.id

    @property
    def md5(self) -> str:
        return self.record.md5


@dataclass(frozen=True)
class CandidateQuery:
    """One OR-query over a token field (see :meth:`Store.candidates_many`); ``keys`` are the
    query's :meth:`TokenField.keys`, in their order."""

    field: TokenField
    keys: np.ndarray
    rows: int
    first_word: str | None = None
    exclude_md5: Sequence[str] = ()


def retried(
    ask: Callable[[], T],
    transient: Callable[[Exception], bool],
    seconds: float,
    delays: tuple[float, float],
) -> T:
    """``ask()``, asked again while it fails with an error ``transient`` says will pass (a
    cluster taking a lost node's shards over), with exponential backoff from ``delays[0]`` up to
    ``delays[1]`` seconds between tries, for up to ``seconds``. Any other error, and the last
    failure, are raised as they are."""
    deadline, delay = time.monotonic() + seconds, delays[0]
    while True:
        try:
            return ask()
        except Exception as exc:
            if not transient(exc) or time.monotonic() + delay > deadline:
                raise
        time.sleep(delay)
        delay = min(2 * delay, delays[1])


def in_batches(items: Iterable[T], size: int) -> Iterator[list[T]]:
    """``items`` in lists of ``size``, the last one shorter."""
    iterator = iter(items)
    while batch := list(islice(iterator, size)):
        yield batch


def ordered_map(function: Callable[[T], R], items: Sequence[T], workers: int) -> Iterator[R]:
    """``function`` of each item, in order, computed by ``workers`` threads with at most twice
    as many results waiting: for requests an engine answers in parallel. Each runs in the
    caller's context: inside its :meth:`Store.snapshot`."""
    from concurrent.futures import ThreadPoolExecutor  # engines only: the embedded store has no use

    with ThreadPoolExecutor(max_workers=workers) as pool:
        waiting: deque[Future[R]] = deque()
        for item in items:
            waiting.append(pool.submit(copy_context().run, function, item))
            if len(waiting) > 2 * workers:
                yield waiting.popleft().result()
        while waiting:
            yield waiting.popleft().result()


def sort_candidates(candidates: list[Candidate]) -> list[Candidate]:
    """The order every store returns: score descending, then id ascending (UTF-8 byte order)."""
    return sorted(candidates, key=lambda c: (-c.score, c.id.encode("utf-8")))


class Store(ABC):
    """A place that keeps fingerprinted records and answers token queries over them."""

    url: str  # the store's URL, without credentials
    local = False  # in this process: reading every record costs no round trips
    # Whether opening it made it (a new file): an index run that stores nothing removes it, so
    # that a failed or empty first run leaves no store fixed at settings no data chose.
    created = False
    writable = True  # False: open read-only (an embedded store on a full disk)
    _settings: dict[str, Any] | None = None
    _settings_read_at = 0.0  # time.monotonic() when they were read
    _schema_applied = False  # by this handle, before its first settings write

    # --- settings ---------------------------------------------------------------------------------

    @property
    def settings(self) -> dict[str, Any] | None:
        """The store's settings object, read once (None: a store with no schema yet)."""
        settings = self._settings  # once: another thread may have it read again meanwhile
        if settings is None:
            settings = self._settings = self.read_settings()
            self._settings_read_at = time.monotonic()
        return settings

    def reload_settings(self, older_than: float = 0.0) -> None:
        """Read the settings again at their next use, if they were read ``older_than`` seconds
        ago or more: a store held open for long (the service's) sees what other processes
        wrote since, an automatic threshold an index run forgot among it. What a read-only
        store remembers for its connection alone stays."""
        if self.writable and time.monotonic() - self._settings_read_at >= older_than:
            self._settings = None

    def read_params(self) -> FingerprintParams | None:
        settings = self.settings
        return FingerprintParams.from_dict(settings) if settings else None

    @property
    def params(self) -> FingerprintParams:
        params = self.read_params()
        if params is None:
            raise NeardupError(f"{self.url} has no fingerprint parameters yet: index into it first")
        return params

    def ensure_params(self, params: ParamsRequest = None) -> FingerprintParams:
        """Create the schema if needed and return the store's fingerprint parameters.

        ``params`` is complete parameters, or a mapping of the settings a user gave, applied over
        the store's own (or the defaults, for a new store). A new store takes the result; an
        existing one refuses anything that differs from what it holds, naming both.
        """
        stored = self.read_params()
        if isinstance(params, Mapping):
            params = replace(stored or FingerprintParams(), **params)
        if stored is None:
            chosen = params or FingerprintParams()
            # Only where no other run set them since they were read: two runs making one store
            # at once each fingerprinted with its own, and the last to write named the store's.
            new = chosen.to_dict() | {"layout": LAYOUT}
            self._hold_written(lambda now: now or new)
            stored = self.params
            if stored == chosen:
                return chosen
        if params is not None and params != stored:
            raise ParameterMismatch(
                f"{self.url} was indexed with {stored.describe()}; "
                f"this run asks for {params.describe()}: leave those settings out to use the "
                "store's, or index into a new store (--store) to use these"
            )
        return stored

    def update_settings(self, changes: Mapping[str, Any]) -> None:
        """Merge ``changes`` into the settings object as it is stored now, not as this handle
        read it (another process may have written it since: merged into a stale copy, its
        change was lost, and a threshold it had forgotten came back), and write it (creating
        the schema)."""
        self._hold_written(lambda stored: stored | dict(changes))

    def _hold_written(self, new: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
        """Write ``new(the stored settings)`` (:meth:`_rewrite_settings`) and hold what was
        written as this handle's copy, read now."""
        self._settings = self._rewrite_settings(new)
        self._settings_read_at = time.monotonic()

    def _rewrite_settings(self, new: Callable[[dict[str, Any]], dict[str, Any]]) -> dict[str, Any]:
        """Write ``new(the stored settings)`` over exactly the settings read: where another
        process wrote them in between, the write is refused (a transaction holds them, or the
        engine checks their version) and they are read and merged again. Written over a stale
        copy, a service's checked adds and another process's report undid each other's."""
        if not self._schema_applied:  # once a handle: what a store made earlier lacks
            self.apply_schema()
            self._schema_applied = True
        for attempt in range(SETTINGS_ATTEMPTS):
            stored, version = self._stored_settings()
            settings = new(stored or {})
            if self._put_settings(settings, version):
                return settings
            # Another writer landed first: wait a random while, longer each time, so that two
            # writers in step do not keep refusing each other (two threads writing 25 times
            # each on Solr: one was refused 20 times in a row).
            time.sleep(random.uniform(0, min(0.5, 0.005 * 2**attempt)))
        raise StoreUnavailable(
            f"{self.url}: its settings changed {SETTINGS_ATTEMPTS} times while being written"
        )

    def remember(self, changes: Mapping[str, Any]) -> None:
        """Merge what a command measured (a threshold read from the records, a report's
        histogram) into the settings: written where the store can be, else kept for this
        connection only, since a store open read-only (or on a full disk) still answers."""
        if self.writable:
            try:
                self.update_settings(changes)
                return
            except StoreFull:
                pass  # what was measured is measured again by the next command
        self._settings = (self.settings or {}) | dict(changes)

    def read_settings(self) -> dict[str, Any] | None:
        """The stored settings object, or None for a store with no schema yet."""
        return self._stored_settings()[0]

    def write_settings(self, settings: dict[str, Any]) -> None:
        """Create the schema if needed and store the settings object in place of the stored,
        held as this handle's copy too."""
        self._hold_written(lambda _: dict(settings))

    @abstractmethod
    def _stored_settings(self) -> tuple[dict[str, Any] | None, Any]:
        """The stored settings (None for a store with no settings or no schema yet) and the
        version :meth:`_put_settings` writes over (None: no schema)."""

    @abstractmethod
    def _put_settings(self, settings: dict[str, Any], version: Any) -> bool:
        """Store ``settings`` in place of those of ``version``; False, writing nothing, where
        they changed since ``version`` was read (or the schema was gone: it is made again)."""

    @abstractmethod
    def apply_schema(self) -> None:
        """Create the store's schema (tables, core, collection or index), or add what it lacks."""

    # --- writing ----------------------------------------------------------------------------------

    def upsert(self, documents: Sequence[Document], counted: Counted | None = None) -> None:
        """Insert or replace records by id (the last of repeated ids wins). The store must have
        its parameters (:meth:`ensure_params`); see the module's note on what a write guarantees.
        ``counted``: the documents' shingle frequencies (:func:`frequency_counts`), made as
        they were fingerprinted, for a store that ``counts_batches``: their fingerprints then
        need not keep their shingles."""
        latest = {d.id: d for d in documents}
        self._upsert(latest, self.params, counted if len(latest) == len(documents) else None)

    # Whether the store counts a batch's shingles from upsert's ``counted`` (the embedded store
    # keeps the counts in a table) rather than from each record's (an engine indexes them).
    counts_batches = False

    @abstractmethod
    def _upsert(
        self,
        documents: Mapping[str, Document],
        params: FingerprintParams,
        counted: Counted | None = None,
    ) -> None:
        """Write ``documents``; ``counted`` is their shingle frequencies, if made (and no id
        repeated among them)."""

    @abstractmethod
    def delete(self, ids: Sequence[str]) -> int:
        """Delete these ids; returns how many existed."""

    def records_version(self) -> object | None:
        """A value that changes whenever the store's records change, through this handle or
        another: what was read of them at one value holds at the same. None where the store
        cannot tell (the engines): read them again each time."""
        return None

    def flush(self) -> None:  # noqa: B027 - most stores write through; engines override to commit
        """Make everything written so far visible to queries."""

    def publish(self) -> None:
        """Make everything written so far visible to queries at least cost, where more writes
        follow at once (a run of checks, each batch's records visible to the next): as
        :meth:`flush`, unless the store's writes are visible already."""
        self.flush()

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        """Reads that see one state of the store, whatever other processes write meanwhile:
        a report reads the store many times, and its records, their shingles' counts and its
        threshold must come from the same records. The embedded store reads in one
        transaction, Elasticsearch in one point in time, Solr the versions written until it
        began. Reads it cannot keep to one state raise :class:`~neardup.errors.StoreChanged`."""
        yield

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        """Reads and writes that no other writer comes between: a check-then-add. The embedded
        store holds its write lock for the block. An engine has no lock of its own, so the
        block holds a lease: a lock document that only one writer can create (the engines'
        create-only writes), which names its holder and expires after LEASE_SECONDS, so that a
        writer that died frees the store. Another writer waits for it up to LOCK_WAIT_SECONDS,
        then stops with one line naming the holder."""
        import socket  # (2 ms with uuid) for the writers that check before they add
        import uuid

        holder = f"{socket.gethostname()} pid {os.getpid()} ({uuid.uuid4().hex[:8]})"
        deadline = time.monotonic() + LOCK_WAIT_SECONDS
        while not self._take_lease(holder, time.time() + LEASE_SECONDS):
            held = self._lease()
            if held and held["until"] < time.time():  # its writer died: free it
                self._end_lease(held)
                continue
            if time.monotonic() > deadline:
                name = held["holder"] if held else "another writer"
                raise StoreUnavailable(
                    f"{name} is checking and adding records to {self.url}; try again when it "
                    f"is done (waited {LOCK_WAIT_SECONDS} s)"
                )
            time.sleep(0.2)
        try:
            yield
        finally:
            self._end_lease({"holder": holder})

    def _take_lease(self, holder: str, until: float) -> bool:
        """Create the lock document naming ``holder`` until ``until`` (seconds since the
        epoch), unless one exists; whether it was created."""
        raise NotImplementedError(f"{type(self).__name__} has no lease")

    def _lease(self) -> dict[str, Any] | None:
        """The lock document ({"holder", "until", and what the engine needs to remove exactly
        that one}), or None."""
        raise NotImplementedError(f"{type(self).__name__} has no lease")

    def _end_lease(self, lease: Mapping[str, Any]) -> None:
        """Remove the lock document if it is still ``lease`` (the same holder)."""
        raise NotImplementedError(f"{type(self).__name__} has no lease")

    @abstractmethod
    def drop(self) -> None:
        """Remove the store: its file, core, collection or index, records and settings."""

    def drop_if_alone(self) -> bool:
        """Remove the store, as :meth:`drop`, where no other handle has it open (another run
        may be writing its first records into it); whether it did. A store that cannot tell
        (an engine's) is never removed so."""
        return False

    # --- reading ----------------------------------------------------------------------------------

    @abstractmethod
    def get(self, ids: Sequence[str]) -> dict[str, StoredRecord]:
        """The stored records among ``ids`` (any number); missing ids are absent."""

    @abstractmethod
    def ids_by_md5(self, md5s: Sequence[str]) -> dict[str, list[str]]:
        """For each MD5, every id whose content has it, in id order: the complete
        exact-duplicate groups, in one round trip ([] for an MD5 no record has)."""

    @abstractmethod
    def records_by_md5(self, md5s: Sequence[str]) -> dict[str, list[StoredRecord]]:
        """For each MD5, every record whose content has it, in id order, in one round trip
        per page ([] for an MD5 no record has): :meth:`ids_by_md5` with the contents."""

    @abstractmethod
    def candidates_many(self, queries: Sequence[CandidateQuery]) -> list[list[Candidate]]:
        """The answer to each candidate query, together (engines batch them): the top
        ``rows`` records sharing at least one of its tokens, by :func:`sort_candidates` order.

        Only records whose first word is the query's ``first_word`` (when given) and whose MD5
        is not in its ``exclude_md5`` count.
        """

    @property
    def keeps_frequencies(self) -> bool:
        """Whether the store counts its shingles: not when it was made before layout 3, nor
        when it was made for the Jaccard similarity (an engine indexes every shingle of every
        record to count them, several times the work of its band tokens)."""
        settings = self.settings or {}
        made_after = int(settings.get("layout", 1)) >= FREQUENCIES_LAYOUT
        return made_after and bool(settings.get("frequencies", True))

    @property
    def writes_shingles(self) -> bool:
        """Whether writing a record uses its shingles: to index them or to count them."""
        return self.keeps_frequencies or TokenField.SHINGLES in self.params.fields

    def frequencies(self, keys: np.ndarray) -> Frequencies:
        """How many stored records hold each shingle of ``keys`` (int64, as
        :meth:`TokenField.keys`), counting live records only, and how many records there are:
        what the weighted similarity weighs shingles by."""
        if not self.keeps_frequencies:
            raise NeardupError(
                f"{self.url} does not count its shingles (it was made for the Jaccard "
                "similarity, or before neardup counted them), so it cannot weigh them: use "
                "--similarity jaccard, or index into a new store"
            )
        unique = np.unique(np.asarray(keys, dtype=np.int64))
        records, counts = self._frequencies(unique)
        return Frequencies(records, unique, counts)

    @abstractmethod
    def _frequencies(self, keys: np.ndarray) -> tuple[int, np.ndarray]:
        """(records in the store, how many hold each of the sorted unique ``keys``)."""

    def contents_holding(self, field: TokenField, keys: np.ndarray, most: int) -> np.ndarray:
        """How many distinct contents (MD5s) hold each of ``field``'s tokens ``keys`` (as
        :meth:`TokenField.keys` gives them, in their order), counted to ``most`` + 1 at most:
        whether each token's bucket is larger than a report that left out buckets of more than
        ``most`` contents joined. Counting stops there: a band value may be held by a
        hundred thousand records."""
        if not len(keys):
            return np.empty(0, dtype=np.int64)
        return np.array(self._contents_holding(field, np.asarray(keys), most + 1), dtype=np.int64)

    @abstractmethod
    def _contents_holding(self, field: TokenField, keys: np.ndarray, cap: int) -> list[int]:
        """:meth:`contents_holding` for keys given, counting to ``cap``."""

    def candidates(self, query: CandidateQuery) -> list[Candidate]:
        """One candidate query (see :meth:`candidates_many`)."""
        return self.candidates_many([query])[0]

    @abstractmethod
    def iter_ids(self) -> Iterator[str]:
        """Every id, in id order (UTF-8 byte order)."""

    @abstractmethod
    def iter_records(self, batch_size: int = 1000) -> Iterator[list[StoredRecord]]:
        """Every record, in id order, ``batch_size`` at a time."""

    @abstractmethod
    def iter_digests(
        self, first_word: bool = False, batch_size: int = 10_000
    ) -> Iterator[list[tuple[str, str]]]:
        """Every record's (MD5, first word), in id order, ``batch_size`` at a time; the first
        word is "" unless asked for. No contents: what a report needs to number them."""

    @abstractmethod
    def shared_buckets(self, field: TokenField) -> Iterator[Buckets]:
        """Every token of ``field`` held by records of two or more distinct contents, as the
        MD5s of those contents (a bucket), a page of buckets at a time: each such token once, in
        any order, the last page covering 1.0. The store counts and groups; the client's memory
        holds one page."""

    def lists_buckets(self, field: TokenField) -> bool:
        """Whether :meth:`shared_buckets` works on this store's ``field`` (an engine needs the
        field's doc values)."""
        return True

    @abstractmethod
    def count(self) -> int: ...

    @abstractmethod
    def close(self) -> None: ...

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
