"""The embedded store: one SQLite file, no server.

Records live in ``docs``; each token field has an inverted index ``<field>_postings(token, doc)``,
a clustered (WITHOUT ROWID) table keyed by the token's 64-bit key (``TokenField.keys``), so an
OR-query is one index range scan per token plus a GROUP BY. ``frequencies(token, records)`` counts
the records holding each shingle, whatever fields are indexed: one row per distinct shingle
instead of one per shingle and record, which indexing the shingles field would cost. Every batch
is one transaction: a killed run leaves the store consistent, and indexing again completes it.
The store's settings are one JSON value in ``meta``.

New postings go first to ``<field>_pending``, a table like the postings that stays small (up to
PENDING_LIMIT rows): written straight into the postings, every batch would dirty pages all over a
B-tree keyed by random tokens, and each commit would write them all again (35 GB written to index
a million records, where the store is 1 GB). A full pending table becomes a run (a rename), and
RUN_FANOUT runs of one level merge into one run of the next, as Lucene merges its segments. The
runs stay after a run, as Lucene leaves its segments; a store whose postings never filled a pending
table moves them into its postings at the end of a run (``flush``). A merge reads its tables in
token order and writes a new B-tree from its first page to its last, so a posting is written once
per level. (Moving each full pending table into the postings rewrote the whole
postings every two million postings: over 100 GB for ten million records.) Queries read every
table of a field in one snapshot, so a record is found as soon as its batch is committed. For the
same reason a first run into a new store builds the MD5 index once, at its end (see
``_defer_md5_index``).
"""

from __future__ import annotations

import fcntl
import json
import os
import sqlite3
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from itertools import chain
from pathlib import Path
from typing import Any
from urllib.parse import quote

import numpy as np

from ..errors import NoStore, StoreFull, StoreUnavailable
from ..fingerprint import (
    Counted,
    Fingerprint,
    FingerprintParams,
    fingerprint_batch,
    frequency_counts,
)
from .base import (
    Buckets,
    Candidate,
    CandidateQuery,
    Document,
    Store,
    StoredRecord,
    TokenField,
    md5_halves,
    not_a_store,
)

SCHEMA_VERSION = "1"

# Values bound by one INSERT statement: every SQLite's limit. A statement per row costs about
# twice the B-tree work it does; one of 499 postings, a fifth less than one of 100.
VALUES_PER_STATEMENT = 999
# Postings a report's bucket listing reads at once (~40 bytes each as text, then 16 as numbers,
# sorted a few times over).
POSTINGS_PER_PART = 2_000_000
# Pending postings past which an upsert makes them a run. Fewer make more runs and merges; more make
# every commit write more of the pending table's pages.
PENDING_LIMIT = 2_000_000
# Runs of one level that merge into a run of the next; a field's runs stay after an index run
# (see _settle_pending). More runs a level write each posting fewer times (once per level) and
# leave more tables for every query to read (up to RUN_FANOUT - 1 a level, each a B-tree seek per
# key). A million people (25 runs of 2.56 million postings): with 8, indexed in 105-131 s against
# 124-146 s when every run merged at the end, and a lookup of a new text took 21 ms (p50) against
# 22; with 64 and no merge, 90 s and 31 ms (27 tables a field).
RUN_FANOUT = 8


def _postings_table(name: str) -> str:
    return (
        f"CREATE TABLE IF NOT EXISTS {name} (token INTEGER NOT NULL, doc INTEGER NOT NULL, "
        "PRIMARY KEY (token, doc)) WITHOUT ROWID;\n"
    )


# Records by content: exact duplicates, and the report's contents. A new store builds it once its
# first run is written (see SQLiteStore._defer_md5_index).
_MD5_INDEX = "CREATE INDEX IF NOT EXISTS docs_md5 ON docs (md5, id)"

# SQLite's page cache, in KB. A writer keeps the pages its batches dirty (the pending postings, the
# records' ends) from one commit to the next; a reader's pages are in the operating system's
# cache anyway, and a million-record report peaked at 730 MB with the writer's cache, 600 MB
# with this one, in the same time.
WRITING_CACHE_KB = 262_144
READING_CACHE_KB = 131_072
# Bytes per page of a new store. Each commit and checkpoint writes every page it dirtied: with
# 16 KB pages a batch's records and postings take a quarter of the pages (and of the write
# calls) they take with SQLite's 4 KB, and indexing 20,000 ads took 0.50 s instead of 0.58 s.
# How long a writer waits for another's lock (a batch, or the other's opening) before failing.
BUSY_SECONDS = 60
PAGE_SIZE = 16_384
# The write-ahead log is cut back to this size once checkpointed: it grows with what is written
# while a reader holds an older state (a report beside an index run), and a process that holds
# the store open (the service) otherwise keeps it at its largest for good: 122 MB after
# 100,000 people were indexed beside it.
WAL_KEPT_BYTES = 64 * 1024 * 1024

# The columns of docs that make a StoredRecord, in its fields' order.
RECORD_COLUMNS = "id, content, md5, first_word, num_words"

_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS docs (
    doc INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    content TEXT NOT NULL,
    md5 TEXT NOT NULL,
    first_word TEXT NOT NULL,
    num_words INTEGER NOT NULL
);
{_MD5_INDEX};
CREATE TABLE IF NOT EXISTS frequencies (
    token INTEGER PRIMARY KEY,
    records INTEGER NOT NULL
) WITHOUT ROWID;
""" + "".join(
    _postings_table(f"{field}_postings") + _postings_table(f"{field}_pending")
    for field in TokenField
)


def _nothing_pending(path: str) -> bool:
    """Whether the store's write-ahead log holds no transaction the file lacks."""
    wal = Path(f"{path}-wal")
    return not wal.exists() or wal.stat().st_size == 0


# Beside the store's file: every handle holds a shared lock on this one (flock) while it has the
# store open. A lock on the database file itself would be wrong: closing any descriptor of it
# drops every POSIX lock the process holds on it, SQLite's own included.
OPEN_MARK = "-open"


def _held_open(path: str) -> int | None:
    """A descriptor of the store's OPEN_MARK file holding a shared lock on it, for as long as a
    handle has the store open: a run that made the store and stored nothing removes it only
    while no other handle of any process holds one (:meth:`SQLiteStore.drop_if_alone`). Taken
    before SQLite opens the store, and taken again where the mark was removed meanwhile, so
    that no handle writes into a removed file. None for a store in memory, or where the mark
    cannot be made (a folder that is full or read-only): such a store is never removed so."""
    if path == ":memory:":
        return None
    mark = f"{path}{OPEN_MARK}"
    while True:
        try:
            held = os.open(mark, os.O_RDONLY | os.O_CREAT, 0o644)
        except OSError:
            return None
        fcntl.flock(held, fcntl.LOCK_SH)  # waits only while a remover holds it
        try:
            if os.stat(mark).st_ino == os.fstat(held).st_ino:
                return held
        except FileNotFoundError:
            pass  # removed while this waited, with the store: it is made again
        os.close(held)


def _why_read_only(path: str) -> str:
    """Why a store's file cannot be opened for writing, and what lets it take writes."""
    folder = Path(path).parent
    if os.statvfs(folder).f_flag & os.ST_RDONLY:
        return (
            "its file system is mounted read-only: copy the store to a writable disk to add to it"
        )
    if not (os.access(path, os.W_OK) and os.access(folder, os.W_OK)):
        return "this user may not write its file and folder"
    return "its disk is full: it takes writes once the disk has room"


class SQLiteStore(Store):
    local = True
    _schema_applied = True  # as each connection is opened (see _prepare)

    def __init__(self, path: str, *, create: bool = True) -> None:
        self.url = f"sqlite:///{path}"
        self.path = path
        exists = path == ":memory:" or Path(path).exists()
        if not create and not exists:
            raise NoStore(f"no store at {path}")
        if create and not exists and not Path(path).parent.is_dir():
            raise StoreUnavailable(
                f"cannot open {path} as a neardup store: its folder {Path(path).parent} does "
                "not exist"
            )
        self._held_open = _held_open(path)
        self.created = not exists
        try:
            self._open(path)
        except BaseException:
            self._release()
            raise
        self._held = False  # inside exclusive(): writes join its transaction
        self._pending = 0  # postings this connection added to the pending tables
        self._record_writes = 0  # transactions that wrote records through this handle
        self._writing = False  # whether this connection has written records
        self._md5_indexed = True  # False while a first run into a new store has no MD5 index

    def _open(self, path: str) -> None:
        """Connect, for writing where the disk allows, else read-only, and check the schema."""
        try:
            version = self._connected(path)
        except StoreUnavailable as refused:
            if self.created or path == ":memory:" or not _nothing_pending(path):
                raise
            version = self._read_only(path, refused)
        if version is None:
            self._set_meta("schema_version", SCHEMA_VERSION)
        elif version != SCHEMA_VERSION:
            self._conn.close()
            raise StoreUnavailable(
                f"{path} has store schema {version}; this neardup reads {SCHEMA_VERSION}"
            )

    def _read_only(self, path: str, refused: StoreUnavailable) -> str:
        """Open the file read-only; its schema version. A full disk (or a read-only one) cannot
        take the WAL's shared-memory file, so no connection that may write opens; with nothing
        in the WAL the file alone is the store, read as immutable: lookups and reports answer
        while the disk stays full."""
        try:
            self._conn = sqlite3.connect(
                f"file:{quote(path)}?immutable=1", uri=True, check_same_thread=False
            )
            version = self._meta("schema_version")
        except sqlite3.DatabaseError:
            raise refused from None
        if version is None:
            raise refused
        self.writable = False
        self._cannot_write = f"{str(refused).rsplit(': ', 1)[-1]}; {_why_read_only(path)}"
        return version

    def _writing_allowed(self) -> None:
        if not self.writable:
            raise StoreUnavailable(
                f"{self.path} is open read-only ({self._cannot_write}): it answers lookups and "
                "reports meanwhile"
            )

    def _connected(self, path: str) -> str | None:
        """Connect for reading and writing and make the schema; the schema version, if any."""
        # A writer holds the lock for one batch; others wait for it rather than fail. A
        # service may use the connection from its request threads, one at a time.
        try:
            self._conn = sqlite3.connect(
                path, isolation_level=None, timeout=BUSY_SECONDS, check_same_thread=False
            )
        except sqlite3.DatabaseError as exc:
            raise StoreUnavailable(f"cannot open {path} as a neardup store: {exc}") from None
        deadline = time.monotonic() + BUSY_SECONDS
        while True:
            try:
                return self._prepare()
            except sqlite3.OperationalError as exc:
                # Two processes making one new file at once: turning it to WAL does not wait
                # for the other's lock, it fails at once; so the opening waits here instead.
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    self._conn.close()
                    raise StoreUnavailable(
                        f"cannot open {path} as a neardup store: {exc}"
                    ) from None
                time.sleep(0.05)
            except sqlite3.DatabaseError as exc:
                self._conn.close()
                raise StoreUnavailable(f"cannot open {path} as a neardup store: {exc}") from None

    def _prepare(self) -> str | None:
        """Set the connection up and make the schema; the store's schema version, if any."""
        self._refuse_another_database()
        # A sort larger than the page cache (the MD5 index of a new store) spills to a
        # temporary file: held in memory, ten million records' took 1.2 GB and 37 s, in
        # files 535 MB and 24 s. The page size applies to a new file only (see PAGE_SIZE).
        self._conn.executescript(
            f"PRAGMA page_size = {PAGE_SIZE}; "
            "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;"
            f"PRAGMA journal_size_limit = {WAL_KEPT_BYTES}; "
            f"PRAGMA temp_store = FILE; PRAGMA cache_size = -{READING_CACHE_KB};"
        )
        self.apply_schema()
        return self._meta("schema_version")

    def _refuse_another_database(self) -> None:
        """Leave a SQLite database of another application as it is: a slip in --store
        (``app.db`` for ``dups.db``) added neardup's tables to it and turned on its
        write-ahead log, even for a lookup."""
        tables = [
            name
            for (name,) in self._conn.execute("SELECT name FROM sqlite_schema WHERE type = 'table'")
        ]
        if tables and "meta" not in tables:
            self._conn.close()
            raise not_a_store(self.path, "a SQLite database", "a file", "tables", tables)

    def apply_schema(self) -> None:
        self._conn.executescript(_SCHEMA)

    # --- parameters -----------------------------------------------------------------------------

    def _meta(self, key: str) -> str | None:
        row = self._conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def _set_meta(self, key: str, value: str) -> None:
        self._conn.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))

    def _stored_settings(self) -> tuple[dict[str, Any] | None, None]:
        stored = self._meta("params")
        return (json.loads(stored) if stored else None), None

    def _put_settings(self, settings: dict[str, Any], version: None) -> bool:
        self._writing_allowed()
        self._set_meta("params", json.dumps(settings, sort_keys=True))
        return True

    def _rewrite_settings(self, new: Callable[[dict[str, Any]], dict[str, Any]]) -> dict[str, Any]:
        with self._transaction():  # no other writer between the read and the write
            return super()._rewrite_settings(new)

    # --- writing --------------------------------------------------------------------------------

    counts_batches = True

    def _upsert(
        self,
        latest: Mapping[str, Document],
        params: FingerprintParams,
        counted: Counted | None = None,
    ) -> None:
        self._record_writes += 1
        with self._transaction():
            if not self._writing:
                self._writing = True
                self._conn.execute(f"PRAGMA cache_size = -{WRITING_CACHE_KB}")
                self._defer_md5_index()
            existing = {
                row[1]: (row[0], row[2], row[3])
                for row in self._conn.execute(
                    "SELECT doc, id, md5, content FROM docs WHERE id IN "
                    "(SELECT value FROM json_each(?))",
                    (json.dumps(list(latest)),),
                )
            }
            changed = {i: existing[i] for i in latest if i in existing}
            changed = {i: v for i, v in changed.items() if v[1] != latest[i].fingerprint.md5}
            self._delete_postings(
                [v[0] for v in changed.values()], [v[2] for v in changed.values()], params
            )
            (next_doc,) = self._conn.execute(
                "SELECT COALESCE(MAX(doc), 0) + 1 FROM docs"
            ).fetchone()
            keys: list[int] = []
            rows = []
            for record_id, document in latest.items():
                if record_id in existing and record_id not in changed:
                    continue  # same content: nothing to do, which makes re-indexing cheap
                doc = changed[record_id][0] if record_id in changed else next_doc
                next_doc += doc == next_doc
                fp = document.fingerprint
                rows.append((doc, record_id, fp.content, fp.md5, fp.first_word, fp.num_words))
                keys.append(doc)
            self._insert("INSERT OR REPLACE INTO docs", 6, list(chain.from_iterable(rows)))
            stored = [latest[row[1]] for row in rows]
            self._insert_postings(keys, stored)
            if counted is None or len(stored) < len(latest):  # the counts are of every record
                counted = self._counts_of([d.fingerprint for d in stored], params)
            self._count(counted, +1)
        if self._pending > PENDING_LIMIT:
            self._seal_pending()

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        """The block as one transaction holding the write lock from its start: other processes'
        writers wait for it (busy timeout), readers go on (WAL)."""
        with self._transaction():
            self._held = True
            try:
                yield
            finally:
                self._held = False

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        """One transaction: commit on success, roll back on any error (autocommit otherwise);
        inside :meth:`exclusive`, part of its transaction."""
        if self._held:
            yield
            return
        self._writing_allowed()
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            yield
            self._conn.execute("COMMIT")
        except BaseException as exc:
            if self._conn.in_transaction:  # SQLite may have rolled back already (a full disk)
                self._conn.execute("ROLLBACK")
            if getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL:
                raise StoreFull(
                    f"{self.path}: its disk is full ({exc}); the write was undone"
                ) from None
            raise

    def _insert(self, insert: str, columns: int, values: list[Any], upsert: str = "") -> None:
        """``insert`` ("INSERT ... INTO table") the rows whose ``columns`` values follow each
        other in ``values``, as many rows a statement as VALUES_PER_STATEMENT allows; ``upsert``
        is an ON CONFLICT clause."""
        row = f"({', '.join('?' * columns)})"
        rows = VALUES_PER_STATEMENT // columns
        width = rows * columns
        whole = len(values) - len(values) % width
        if whole:
            statement = f"{insert} VALUES {', '.join([row] * rows)} {upsert}"
            self._conn.executemany(
                statement, (values[i : i + width] for i in range(0, whole, width))
            )
        if whole < len(values):
            rest = (len(values) - whole) // columns
            statement = f"{insert} VALUES {', '.join([row] * rest)} {upsert}"
            self._conn.execute(statement, values[whole:])

    def _postings(
        self, docs: Sequence[int], documents: Sequence[Document]
    ) -> Iterator[tuple[TokenField, np.ndarray]]:
        """Each indexed field's (token, doc) rows for these documents, as one int64 array of
        token, doc, token, doc..., sorted by token so that the B-tree takes them in order."""
        for field in TokenField:
            chosen = [n for n, d in enumerate(documents) if d.indexed(field)]
            if not chosen:
                continue
            tokens, sizes = field.keys_of([documents[n].fingerprint for n in chosen])
            owners = np.repeat(np.asarray(docs, dtype=np.int64)[chosen], sizes)
            order = np.argsort(tokens)  # numpy's SIMD sort: a stable one is five times slower
            yield field, np.column_stack([tokens[order], owners[order]]).ravel()

    def _insert_postings(self, docs: Sequence[int], documents: Sequence[Document]) -> None:
        for field, rows in self._postings(docs, documents):
            self._insert(f"INSERT OR IGNORE INTO {field}_pending", 2, rows.tolist())
            self._pending += len(rows) // 2

    def _delete_postings(
        self, docs: Sequence[int], contents: Sequence[str], params: FingerprintParams
    ) -> None:
        """Remove these documents' postings, wherever they are, and counts: their tokens are
        those of their stored contents."""
        old = fingerprint_batch(contents, params, normalized=True) if contents else []
        stored = [Document("", fp, params.fields) for fp in old]
        for field, rows in self._postings(docs, stored):
            pairs = rows.reshape(-1, 2).tolist()
            for table in self._tables(field):
                self._conn.executemany(f"DELETE FROM {table} WHERE token = ? AND doc = ?", pairs)
        self._count(self._counts_of(old, params), -1)

    def _runs(self, field: TokenField, level: int | str = "%") -> list[str]:
        """The field's runs (of one level), tables named ``<field>_run_<level>_<number>``."""
        return [
            name
            for (name,) in self._conn.execute(
                "SELECT name FROM sqlite_schema WHERE type = 'table' AND name LIKE ? ESCAPE '!'",
                (f"{field}!_run!_{level}!_%",),
            )
        ]

    def _tables(self, field: TokenField) -> list[str]:
        """Every table holding some of the field's postings."""
        return [f"{field}_postings", f"{field}_pending", *self._runs(field)]

    def _has_rows(self, table: str) -> bool:
        return self._conn.execute(f"SELECT EXISTS (SELECT 1 FROM {table})").fetchone()[0]

    def _seal_pending(self) -> None:
        """Make each field's pending postings a run of level 0, and merge every level that
        holds RUN_FANOUT runs into one run of the next: a transaction each."""
        self._drop_retired()  # a killed run's, whose names new runs may take
        for field in TokenField:
            with self._transaction():
                if self._has_rows(f"{field}_pending"):
                    self._merge_into(field, self._new_run(field, 0), [f"{field}_pending"])
            level = 0
            while self._merge_level(field, level):
                level += 1
            self._drop_retired()
        self._pending = 0

    def _new_run(self, field: TokenField, level: int) -> str:
        number = 1 + max((int(run.rsplit("_", 1)[1]) for run in self._runs(field)), default=0)
        return f"{field}_run_{level}_{number}"

    def _merge_level(self, field: TokenField, level: int) -> bool:
        """Merge the level's runs into one of the next level if it holds RUN_FANOUT of them."""
        with self._transaction():
            runs = self._runs(field, level)
            if len(runs) < RUN_FANOUT:
                return False
            self._merge_into(field, self._new_run(field, level + 1), runs)
        return True

    def _merge_into(self, field: TokenField, target: str, sources: Sequence[str]) -> None:
        """Make a field's ``sources`` one table, ``target`` (which may be one of them), within
        the caller's transaction. Each source is read in token order and SQLite merges them as
        it reads (no sort), so the new B-tree is written in order; one source is renamed. The
        sources are retired (renamed out of every query's sight), and dropped later
        (_drop_retired)."""
        merging = f"{field}_merging"
        if len(sources) == 1:
            self._conn.execute(f"ALTER TABLE {sources[0]} RENAME TO {merging}")
        else:
            self._conn.execute(_postings_table(merging))
            merged = " UNION ALL ".join(f"SELECT token, doc FROM {table}" for table in sources)
            self._conn.execute(f"INSERT OR IGNORE INTO {merging} {merged} ORDER BY token, doc")
        for table in {*sources, target}:
            if self._conn.execute(
                "SELECT 1 FROM sqlite_schema WHERE name = ?", (table,)
            ).fetchone():
                self._conn.execute(f"ALTER TABLE {table} RENAME TO {self._retired_name(table)}")
        self._conn.execute(f"ALTER TABLE {merging} RENAME TO {target}")
        self._conn.execute(_postings_table(f"{field}_pending"))

    def _retired(self) -> list[str]:
        return [
            name
            for (name,) in self._conn.execute(
                "SELECT name FROM sqlite_schema WHERE type = 'table' AND name LIKE 'retired!_%' "
                "ESCAPE '!'"
            )
        ]

    def _retired_name(self, table: str) -> str:
        """A name for ``table`` out of every query's sight that no retired table has: a run's
        name is taken again once the run is merged, and another process writing the store
        may not have dropped the table it retired under it yet."""
        taken, number = set(self._retired()), 1
        while f"retired_{number}_{table}" in taken:
            number += 1
        return f"retired_{number}_{table}"

    def _drop_retired(self) -> None:
        """Drop the tables merges retired (or a run killed meanwhile left), each in a
        transaction of its own: dropped in the merge's transaction, freeing their pages held
        memory (~200 MB at a million records). Another process writing the store may drop
        them first."""
        for table in self._retired():
            self._conn.execute(f"DROP TABLE IF EXISTS {table}")

    def _settle_pending(self) -> None:
        """At a run's end, a field without runs takes its pending postings into its postings,
        in place (they are fewer than PENDING_LIMIT): a store that never filled a pending table
        keeps one table a field. A field's runs stay as they are, merged by level as they fill
        (RUN_FANOUT) and never all at once at the end: that wrote every posting once more (58 s
        of the 165 s a million people took to index) so that lookups read one table a field
        instead of a few."""
        self._drop_retired()  # a killed run's
        # A list, not a generator: every field settles, even after one that keeps its pending.
        if all([self._settle(field) for field in TokenField]):
            self._pending = 0

    def _settle(self, field: TokenField) -> bool:
        """Move the field's pending postings into its postings if it has no runs; whether
        nothing is left pending."""
        with self.snapshot():  # without taking the write lock where there is nothing to do
            waiting = self._has_rows(f"{field}_pending")
            if self._runs(field) or not waiting:
                return not waiting
        with self._transaction():
            postings, pending, *runs = self._tables(field)
            if runs:  # another writer made one meanwhile
                return False
            if self._has_rows(postings):
                self._conn.execute(
                    f"INSERT OR IGNORE INTO {postings} (token, doc) "
                    f"SELECT token, doc FROM {pending} ORDER BY token, doc"
                )
                self._conn.execute(f"DELETE FROM {pending}")
            else:
                self._merge_into(field, postings, [pending])
        self._drop_retired()
        return True

    def flush(self) -> None:
        self._settle_pending()
        self._index_md5()

    def publish(self) -> None:
        """Queries read the pending postings and the runs: merging them into the postings can
        wait for the run's flush. Merged at each batch of a run of checks, the pending postings
        landed all over the postings' pages, which every commit wrote again (a fifth of a
        million people's checked index run)."""
        self._index_md5()

    def _defer_md5_index(self) -> None:
        """A first run into a new store builds the MD5 index at its end (flush), sorting once:
        kept up as records come, every commit rewrote its pages all over (28 s of 142 s for a
        million records). A reader that opens the store meanwhile builds it through the schema
        (apply_schema), as does the next open after a run killed before its end."""
        if self._conn.execute("SELECT NOT EXISTS (SELECT 1 FROM docs)").fetchone()[0]:
            self._conn.execute("DROP INDEX IF EXISTS docs_md5")
            self._md5_indexed = False

    def _index_md5(self) -> None:
        """Build the MD5 index if this connection deferred it, before anything reads by MD5."""
        if not self._md5_indexed:
            self._conn.execute(_MD5_INDEX)
            self._md5_indexed = True

    def _counts_of(
        self, fingerprints: Sequence[Fingerprint], params: FingerprintParams
    ) -> Counted | None:
        """The shingle frequencies of these records, where the store keeps them; fingerprints
        made without their shingles (upsert's ``counted`` stood for them) are made again from
        their contents."""
        if not self.keeps_frequencies or not fingerprints:
            return None
        if any(fp.shingle_hashes is None for fp in fingerprints):
            contents = [fp.content for fp in fingerprints]
            fingerprints = fingerprint_batch(contents, params, normalized=True)
        return frequency_counts(fingerprints)

    def _count(self, counted: Counted | None, sign: int) -> None:
        """Add (+1) or remove (-1) some records' shingle frequencies (``counted``; None:
        nothing to count). A count that falls to 0 stays as a row: it means what a missing row
        means."""
        if counted is None or not self.keeps_frequencies:
            return
        keys, counts = counted
        self._insert(
            "INSERT INTO frequencies",
            2,
            np.column_stack([keys, sign * counts]).ravel().tolist(),
            "ON CONFLICT (token) DO UPDATE SET records = records + excluded.records",
        )

    def delete(self, ids: Sequence[str]) -> int:
        self._record_writes += 1
        with self._transaction():
            rows = self._conn.execute(
                "SELECT doc, content FROM docs WHERE id IN (SELECT value FROM json_each(?))",
                (json.dumps(list(ids)),),
            ).fetchall()
            if rows:  # records exist only in a store that has its parameters
                self._delete_postings([r[0] for r in rows], [r[1] for r in rows], self.params)
            self._conn.executemany("DELETE FROM docs WHERE doc = ?", [(r[0],) for r in rows])
        return len(rows)

    def records_version(self) -> tuple[int, int]:
        # SQLite's data_version changes with every commit of another connection, in any process.
        (changed_elsewhere,) = self._conn.execute("PRAGMA data_version").fetchone()
        return changed_elsewhere, self._record_writes

    def drop(self) -> None:
        self._conn.close()
        if self.path != ":memory:":
            for suffix in ("", "-wal", "-shm", OPEN_MARK):
                Path(self.path + suffix).unlink(missing_ok=True)
        self._release()

    def drop_if_alone(self) -> bool:
        """Remove the store, as :meth:`drop`, where no other handle of any process has it open
        (one may be writing its first records, not yet committed); whether it did. The handle
        is closed either way."""
        alone = self._alone()
        if alone:
            self.drop()
        else:
            self.close()
        return alone

    def _alone(self) -> bool:
        """Whether no other handle of any process has the store open: this one's lock on the
        OPEN_MARK made exclusive, where it has one."""
        if self._held_open is None:
            return False
        try:
            fcntl.flock(self._held_open, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True

    # --- reading --------------------------------------------------------------------------------

    def get(self, ids: Sequence[str]) -> dict[str, StoredRecord]:
        rows = self._conn.execute(
            f"SELECT {RECORD_COLUMNS} FROM docs WHERE id IN (SELECT value FROM json_each(?))",
            (json.dumps(list(ids)),),
        )
        return {row[0]: StoredRecord(*row) for row in rows}

    def ids_by_md5(self, md5s: Sequence[str]) -> dict[str, list[str]]:
        self._index_md5()
        found: dict[str, list[str]] = {md5: [] for md5 in md5s}
        rows = self._conn.execute(
            "SELECT md5, id FROM docs WHERE md5 IN (SELECT value FROM json_each(?)) ORDER BY id",
            (json.dumps(list(found)),),
        )
        for md5, record_id in rows:
            found[md5].append(record_id)
        return found

    def records_by_md5(self, md5s: Sequence[str]) -> dict[str, list[StoredRecord]]:
        self._index_md5()
        found: dict[str, list[StoredRecord]] = {md5: [] for md5 in md5s}
        rows = self._conn.execute(
            f"SELECT {RECORD_COLUMNS} FROM docs "
            "WHERE md5 IN (SELECT value FROM json_each(?)) ORDER BY id",
            (json.dumps(list(found)),),
        )
        for row in rows:
            found[row[2]].append(StoredRecord(*row))
        return found

    def candidates_many(self, queries: Sequence[CandidateQuery]) -> list[list[Candidate]]:
        # One read transaction for all, not one each; a record that is a candidate of several
        # queries (a checked batch's records share many) is read once.
        read: dict[int, StoredRecord] = {}
        with self.snapshot():
            return [self._candidates(q, read) for q in queries]

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        """One read transaction (see :meth:`Store.snapshot`); a query's own, so that the tables
        it lists are the tables it reads: a writer may make or merge runs between two
        statements."""
        if self._conn.in_transaction:
            yield
            return
        self._conn.execute("BEGIN")
        try:
            yield
        finally:
            self._conn.execute("COMMIT")

    def _union(self, field: TokenField, columns: str, where: str) -> str:
        """A SELECT of ``columns`` from every table of a field's postings, as one."""
        return " UNION ALL ".join(
            f"SELECT {columns} FROM {table} WHERE {where}" for table in self._tables(field)
        )

    def _candidates(
        self, q: CandidateQuery, read: dict[int, StoredRecord] | None = None
    ) -> list[Candidate]:
        """The query's postings are read as one list of record numbers and counted by numpy;
        the records are then read from the highest score down: the scores whose records all
        fit in ``rows`` together, else one score's records in id order, until ``rows`` pass
        the filters. SQLite's own GROUP BY, and a join of every scored record to sort them by
        id, took 69 ms (p50) at a million person records, whose band values are held by up
        to 83,250 records each; this takes 12."""
        filters, args = ["d.doc IN (SELECT value FROM json_each(?1))"], []
        if q.first_word is not None:
            filters.append(f"d.first_word = ?{len(args) + 3}")
            args.append(q.first_word)
        if q.exclude_md5:
            filters.append(f"d.md5 NOT IN (SELECT value FROM json_each(?{len(args) + 3}))")
            args.append(json.dumps(list(q.exclude_md5)))
        query = (
            f"SELECT d.doc, {RECORD_COLUMNS} FROM docs d "
            f"WHERE {' AND '.join(filters)} ORDER BY d.id LIMIT ?2"
        )
        found: list[Candidate] = []
        with self.snapshot():
            docs, scores = self._scores(q.field, q.keys)
            ends = np.flatnonzero(np.diff(scores, append=-1)) + 1  # each score's run ends
            at = 0
            while len(found) < q.rows and at < len(docs):
                need = q.rows - len(found)
                following = ends[ends > at]
                fitting = following[following - at <= need]
                end = int(fitting[-1] if len(fitting) else following[0])
                score = dict(zip(docs[at:end].tolist(), scores[at:end].tolist(), strict=True))
                if read is not None and end - at <= need:  # every record of these scores
                    found += self._whole_runs(q, score, read)
                else:
                    batch = json.dumps(docs[at:end].tolist())
                    rows = self._conn.execute(query, (batch, need, *args)).fetchall()
                    rows.sort(key=lambda row: -score[row[0]])  # stable: ids stay in order
                    found += [Candidate(StoredRecord(*row[1:]), score[row[0]]) for row in rows]
                at = end
        return found

    def _whole_runs(
        self, q: CandidateQuery, score: dict[int, int], read: dict[int, StoredRecord]
    ) -> list[Candidate]:
        """The candidates of runs of scores taken whole (``score``: each record number's),
        by score then id, as the query with its filters returns them; the records not ``read``
        yet are read and kept."""
        unread = json.dumps([doc for doc in score if doc not in read])
        for doc, *fields in self._conn.execute(
            f"SELECT doc, {RECORD_COLUMNS} FROM docs WHERE doc IN (SELECT value FROM json_each(?))",
            (unread,),
        ):
            read[doc] = StoredRecord(*fields)
        excluded = set(q.exclude_md5)
        # By score, then by id as ORDER BY orders them: SQLite compares UTF-8 bytes, which
        # order as code points. Ids are unique, so the records themselves are never compared.
        passing = sorted(
            (-held, record.id, record)
            for doc, held in score.items()
            if (record := read.get(doc)) is not None
            and record.md5 not in excluded
            and (q.first_word is None or record.first_word == q.first_word)
        )
        return [Candidate(record, -negative) for negative, _, record in passing]

    def _scores(self, field: TokenField, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(record numbers, how many of ``keys`` each holds), by that number, highest first."""
        postings = self._union(field, "doc", "token IN (SELECT value FROM json_each(?1))")
        (held,) = _numbers(
            self._conn.execute(
                f"SELECT group_concat(doc) FROM ({postings})",
                (json.dumps(np.asarray(keys).tolist()),),
            ).fetchone()
        )
        docs, scores = np.unique(held, return_counts=True)
        order = np.argsort(-scores, kind="stable")
        return docs[order], scores[order]

    def _frequencies(self, keys: np.ndarray) -> tuple[int, np.ndarray]:
        # A left join from the keys, in their order, rather than an IN list (which first
        # builds a temporary index of the keys); both columns come back as lists of numbers.
        with self.snapshot():  # for the counts and the total
            tokens, counts = _numbers(
                self._conn.execute(
                    "SELECT group_concat(k.value), group_concat(COALESCE(f.records, 0)) "
                    "FROM json_each(?) k LEFT JOIN frequencies f ON f.token = k.value",
                    (json.dumps(keys.tolist()),),
                ).fetchone()
            )
            records = self.count()
        return records, counts[np.argsort(tokens, kind="stable")]

    def _contents_holding(self, field: TokenField, keys: np.ndarray, cap: int) -> list[int]:
        postings = self._union(field, "doc", "token = ?1")
        query = (
            f"SELECT COUNT(*) FROM (SELECT DISTINCT d.md5 FROM ({postings}) p "
            "JOIN docs d ON d.doc = p.doc LIMIT ?2)"
        )
        with self.snapshot():
            return [self._conn.execute(query, (int(key), cap)).fetchone()[0] for key in keys]

    def iter_records(self, batch_size: int = 1000) -> Iterator[list[StoredRecord]]:
        # One scan in id order instead of the ids first and then each batch by its ids.
        rows = self._conn.execute(f"SELECT {RECORD_COLUMNS} FROM docs ORDER BY id")
        while batch := rows.fetchmany(batch_size):
            yield [StoredRecord(*row) for row in batch]
        # A whole read fills the page cache with record pages, which a link or a run of checks
        # then held to its end (85 MB of 640,000 people's); the system's cache keeps them too.
        self._conn.execute("PRAGMA shrink_memory")

    def iter_digests(
        self, first_word: bool = False, batch_size: int = 10_000
    ) -> Iterator[list[tuple[str, str]]]:
        column = "first_word" if first_word else "''"
        rows = self._conn.execute(f"SELECT md5, {column} FROM docs ORDER BY id")
        while batch := rows.fetchmany(batch_size):
            yield batch

    def shared_buckets(self, field: TokenField) -> Iterator[Buckets]:
        """The postings in parts of the token space, each read as two comma-separated lists
        (tokens, and their records) and grouped by numpy. A row at a time, as Python integers,
        the reading takes twice as long; SQLite's own grouping, or a window over the postings,
        two to three times."""
        md5_of = self._md5_by_doc()
        with self.snapshot():
            (postings,) = self._conn.execute(
                f"SELECT COUNT(*) FROM ({self._union(field, 'token', '1')})"
            ).fetchone()
        parts = max(1, -(-postings // POSTINGS_PER_PART))
        for part in range(parts):
            low = -(2**63) + (2**64 * part) // parts
            high = -(2**63) + (2**64 * (part + 1)) // parts - 1
            # Both lists are made in one pass over the same rows, so they pair up.
            with self.snapshot():
                part_postings = self._union(field, "token, doc", "token BETWEEN ?1 AND ?2")
                tokens, docs = _numbers(
                    self._conn.execute(
                        f"SELECT group_concat(token), group_concat(doc) FROM ({part_postings})",
                        (low, high),
                    ).fetchone()
                )
            order = np.argsort(tokens, kind="stable")
            yield Buckets.of_holders(tokens[order], md5_of[docs[order]], (part + 1) / parts)

    def _md5_by_doc(self) -> np.ndarray:
        """Every record's MD5 (md5_halves rows), indexed by its row number."""
        (last,) = self._conn.execute("SELECT COALESCE(MAX(doc), 0) FROM docs").fetchone()
        md5_of = np.zeros((last + 1, 2), dtype=np.uint64)
        rows = self._conn.execute("SELECT doc, md5 FROM docs")
        while batch := rows.fetchmany(100_000):
            docs, md5s = zip(*batch, strict=True)
            md5_of[list(docs)] = md5_halves(md5s)
        return md5_of

    def iter_ids(self) -> Iterator[str]:
        for (record_id,) in self._conn.execute("SELECT id FROM docs ORDER BY id"):
            yield record_id

    def count(self) -> int:
        return self._conn.execute("SELECT COUNT(*) FROM docs").fetchone()[0]

    def close(self) -> None:
        self._conn.close()
        self._release()

    def _release(self) -> None:
        """Let go of the OPEN_MARK's lock; the last handle out removes the mark, as SQLite
        removes its write-ahead log (one waiting to open meanwhile makes it again)."""
        if self._held_open is None:
            return
        if self._alone():
            Path(f"{self.path}{OPEN_MARK}").unlink(missing_ok=True)
        os.close(self._held_open)  # its lock with it
        self._held_open = None


def _numbers(lists: Sequence[str | None]) -> list[np.ndarray]:
    """Comma-separated integers (group_concat's lists; None when it had no rows) as int64
    arrays: much faster to read than as rows of Python integers."""
    return [np.fromstring(numbers or "", dtype=np.int64, sep=",") for numbers in lists]
