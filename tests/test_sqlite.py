"""What only the embedded store promises: each batch is one transaction."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from neardup import api
from neardup.errors import InvalidText
from neardup.fingerprint import fingerprint_batch, frequency_counts
from neardup.readers import Record
from neardup.stores import sqlite as sqlite_store
from neardup.stores.sqlite import SQLiteStore

from .corpora import corpus


def test_a_failing_batch_rolls_back_and_a_rerun_completes(
    tmp_path: Path, sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "records.txt"
    path.write_text("".join(f"{i} record number {i} of the file\n" for i in range(25)))
    calls = {"n": 0}
    insert = SQLiteStore._insert_postings

    def failing_third_batch(self, docs, documents):
        calls["n"] += 1
        if calls["n"] == 3:
            raise sqlite3.OperationalError("disk I/O error")
        insert(self, docs, documents)

    monkeypatch.setattr(SQLiteStore, "_insert_postings", failing_third_batch)
    with pytest.raises(sqlite3.OperationalError):
        api.index([path], sqlite_url, batch_size=10)
    database = sqlite3.connect(path.parent / "store.db")
    assert database.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    # Two whole batches, none of the third: its records and their postings are rolled back.
    assert database.execute("SELECT COUNT(*) FROM docs").fetchone() == (20,)
    tokens = database.execute(
        "SELECT COUNT(DISTINCT doc) FROM "
        "(SELECT doc FROM bands_postings UNION ALL SELECT doc FROM bands_pending)"
    ).fetchone()
    assert tokens == (20,)
    database.close()
    monkeypatch.setattr(SQLiteStore, "_insert_postings", insert)
    assert api.index([path], sqlite_url, batch_size=10).documents == 25
    found = api.lookup(sqlite_url, text="record number 24 of the file")
    assert (found[0].id, found[0].exact) == ("24", True)


def test_concurrent_writers_and_readers_wait_for_each_other(tmp_path: Path) -> None:
    """Two `neardup index` processes into one file and lookups during both: nothing is lost and
    nobody fails with "database is locked" (WAL, and a writer waits for the other's batch)."""
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    files = []
    for prefix in ("a", "b"):
        path = tmp_path / f"{prefix}.txt"
        path.write_text(
            "".join(
                f"{prefix}{i} listing {i} of {prefix} on street {i % 97}\n" for i in range(3000)
            )
        )
        files.append(path)
    api.index([files[0]], url, batch_size=100_000)  # the store exists; its first rows too
    writers = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "neardup.cli",
                "index",
                str(f),
                "--store",
                url,
                "--batch-size",
                "200",
            ],
            stderr=subprocess.PIPE,
            text=True,
        )
        for f in files
    ]
    lookups = 0
    while any(w.poll() is None for w in writers) and lookups < 2000:
        api.lookup(url, id="a7")  # a reader is served throughout, never refused
        lookups += 1
    errors = [w.communicate(timeout=120)[1] for w in writers]
    assert [w.returncode for w in writers] == [0, 0], errors
    assert not any("locked" in e or "Traceback" in e for e in errors)
    assert lookups > 0
    assert api.stats(url)["documents"] == 6000


def test_a_run_that_stores_nothing_leaves_a_store_another_run_is_filling(tmp_path: Path) -> None:
    """An index run that made a store and stored nothing (an empty file, or refused for its
    settings) removes the store, unless another run has it open: that run may be writing its
    first records, not committed yet, and they went into a removed file with exit status 0."""
    path = tmp_path / "new.db"
    made = SQLiteStore(str(path))  # the first run made the file
    assert made.created
    filling = SQLiteStore(str(path))  # another run opened it before its first batch
    assert not made.drop_if_alone()
    assert path.exists()
    records = tmp_path / "records.txt"
    records.write_text("".join(f"{n} listing {n} on street {n % 7}\n" for n in range(50)))
    api.index([records], filling)
    filling.close()
    assert api.stats(f"sqlite:///{path}")["documents"] == 50
    alone = SQLiteStore(str(tmp_path / "alone.db"))  # made, and nobody else has it open
    assert alone.drop_if_alone()
    assert not (tmp_path / "alone.db").exists()


def test_shingles_counted_by_batch_are_the_stored_records(tmp_path: Path) -> None:
    """The indexer counts a batch's shingles as it fingerprints it and lets the records' own
    shingles go: the counts are still those of exactly the records stored, after a run that
    replaces some, leaves some as they were, repeats an id and adds more."""
    url = f"sqlite:///{tmp_path / 'counted.db'}"
    first = tmp_path / "first.txt"
    first.write_text(
        "".join(f"{n} listing {n} on street {n % 7} of town {n % 3}\n" for n in range(60))
    )
    api.index([first], url)
    again = tmp_path / "again.txt"
    again.write_text(
        "".join(f"{n} listing {n} on street {n % 7} of town {n % 3}\n" for n in range(10))
        + "".join(f"{n} a changed listing {n} by the river\n" for n in range(10, 20))
        + "".join(f"{n} a new listing {n} near the park\n" for n in range(60, 70))
        + "65 the new listing 65 again, replaced within the run\n"
    )
    api.index([again], url, batch_size=16)  # batches that are all new, mixed, and repeated
    with api.opened(url) as store:
        contents = [r.content for batch in store.iter_records() for r in batch]
        expected_keys, expected_counts = frequency_counts(
            fingerprint_batch(contents, store.params, normalized=True)
        )
        found = store.frequencies(expected_keys)
    assert found.records == len(contents) == 70
    assert found.counts.tolist() == expected_counts.tolist()


def _band_tables(path: Path) -> dict[str, int]:
    """The store's tables of band postings (and the retired ones), with their rows."""
    database = sqlite3.connect(path)
    names = database.execute(
        "SELECT name FROM sqlite_schema WHERE type = 'table' AND name LIKE '%bands%'"
    ).fetchall()
    rows = {
        name: database.execute(f"SELECT COUNT(*) FROM {name}").fetchone()[0] for (name,) in names
    }
    database.close()
    return rows


def test_full_pending_postings_become_runs_that_merge_by_level_with_the_same_answers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = corpus(tmp_path / "records.txt", 600)
    direct, tiered, killed = (tmp_path / f"{name}.db" for name in ("direct", "tiered", "killed"))
    api.index([path], f"sqlite:///{direct}", batch_size=50)  # one pending table, renamed
    monkeypatch.setattr(sqlite_store, "PENDING_LIMIT", 500)  # a run every batch
    monkeypatch.setattr(sqlite_store, "RUN_FANOUT", 2)
    api.index([path], f"sqlite:///{tiered}", batch_size=50)
    with monkeypatch.context() as patched:  # a run killed before its flush
        patched.setattr(SQLiteStore, "flush", lambda self: None)
        api.index([path], f"sqlite:///{killed}", batch_size=50)
    postings = _band_tables(direct)["bands_postings"]
    assert postings > 0
    assert _band_tables(direct) == {"bands_postings": postings, "bands_pending": 0}
    # The runs stay after the run: no posting is written again to make one table of them.
    runs = {name: rows for name, rows in _band_tables(tiered).items() if "_run_" in name}
    assert len({name.split("_")[2] for name in runs}) > 1  # runs of several levels
    assert sum(runs.values()) == sum(_band_tables(tiered).values()) == postings
    assert _band_tables(killed) == _band_tables(tiered)
    stores = [f"sqlite:///{path}" for path in (direct, tiered, killed)]
    expected = api.report(stores[0])
    assert expected
    for url in stores[1:]:
        for strategy in ("join", "buckets"):
            assert api.report(url, strategy=strategy) == expected
        assert api.lookup(url, id="g0007") == api.lookup(stores[0], id="g0007")
    # Updates and deletes reach the postings in runs.
    for url in (stores[0], stores[2]):
        api.delete(["g0003", "g0010"], url)
        api.add([Record("g0011", "a new text for record g0011")], url)
    assert api.report(stores[2]) == api.report(stores[0])
    database = sqlite3.connect(killed)  # as a run killed after a merge, before its drops
    database.execute("CREATE TABLE retired_bands_run_0_1 AS SELECT * FROM bands_pending")
    database.commit()
    database.close()
    for url in (stores[0], stores[2]):  # the next run drops what the killed one retired
        api.index([path], url, batch_size=50)
    assert not any(name.startswith("retired_") for name in _band_tables(killed))
    assert api.report(stores[2]) == api.report(stores[0])


# Where another run's writes once broke a run: between listing the retired tables and dropping
# them, and between listing a field's tables and looking into them.
_BETWEEN = ("DROP TABLE", "SELECT EXISTS (SELECT 1 FROM bands")


def test_other_runs_between_the_statements_of_a_run_leave_every_run_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two `neardup index` runs into one store at once: one failed with "no such table:
    retired_bands_run_0_2", a table that it had listed and that the other run had dropped
    (or merged) before it read it. Here other runs index a file each between such statements
    of the first run."""
    monkeypatch.setattr(sqlite_store, "PENDING_LIMIT", 500)  # runs made and merged throughout
    # Few enough runs a level that these few records merge levels while other runs write.
    monkeypatch.setattr(sqlite_store, "RUN_FANOUT", 4)
    files = [tmp_path / f"{part}.txt" for part in "abcdefgh"]
    for path in files:
        lines = (f"{path.stem}{i} listing {i} on street {i % 97}\n" for i in range(300))
        path.write_text("".join(lines))
    path = tmp_path / "shared.db"
    first, other = SQLiteStore(str(path)), SQLiteStore(str(path))
    waiting = files[1:]
    writing = [False]  # whether the first run holds the store's write lock: the others wait
    met: set[str] = set()

    def other_run(statement: str) -> None:
        if statement.startswith(("BEGIN IMMEDIATE", "COMMIT", "ROLLBACK")):
            writing[0] = statement.startswith("BEGIN IMMEDIATE")
        elif waiting and not writing[0] and statement.startswith(_BETWEEN):
            met.add(next(place for place in _BETWEEN if statement.startswith(place)))
            api.index([waiting.pop(0)], other, batch_size=50)

    first._conn.set_trace_callback(other_run)
    api.index([files[0]], first, batch_size=50)
    assert met == set(_BETWEEN)
    for rest in waiting:
        api.index([rest], other)
    serial = tmp_path / "serial.db"
    api.index(files, f"sqlite:///{serial}")
    assert api.report(f"sqlite:///{path}") == api.report(f"sqlite:///{serial}") != []
    tables = _band_tables(path)
    assert not any(name.startswith("retired_") for name in tables)
    assert sum(tables.values()) == sum(_band_tables(serial).values())


def test_a_report_reads_the_records_as_they_were_when_it_began(tmp_path: Path) -> None:
    """A report made while `neardup index` of more records ran into the store listed pairs
    of neither the store before the run nor after it: its records came from one state and
    their shingles' weights from another. And it remembered the threshold read from the
    records before the run, which the run had already forgotten. Here the other run indexes
    its records between the report's reading of the records and of their weights."""
    first = corpus(tmp_path / "first.txt", 300)
    second = tmp_path / "second.txt"
    lines = corpus(tmp_path / "more.txt", 300, seed=12).read_text().splitlines()
    second.write_text("".join(f"h{line[1:]}\n" for line in lines if line.startswith("g")))
    url, before, after = (f"sqlite:///{tmp_path / name}" for name in ("a.db", "b.db", "c.db"))
    api.index([first], url)
    api.index([first], before)
    api.index([first, second], after)
    reporting = SQLiteStore(str(tmp_path / "a.db"))
    waiting = [second]

    def other_run(statement: str) -> None:
        if waiting and "JOIN frequencies" in statement:
            api.index([waiting.pop()], url)

    reporting._conn.set_trace_callback(other_run)
    pairs = api.report(reporting)
    assert not waiting  # the place met
    assert pairs == api.report(before) != api.report(after)
    reporting.reload_settings()
    assert reporting.settings.get("threshold_choice") is None  # read again from all records
    assert api.report(url) == api.report(after)


def test_the_log_is_cut_back_while_another_process_holds_the_store_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The write-ahead log stayed at its largest for as long as another connection held the
    store open (the service): 122 MB after 100,000 people were indexed beside it. It is cut
    back once checkpointed, at the next write (SQLite checkpoints a log past 1,000 pages)."""
    monkeypatch.setattr(sqlite_store, "WAL_KEPT_BYTES", 64 * 1024)
    url = f"sqlite:///{tmp_path / 'store.db'}"
    api.index([corpus(tmp_path / "first.txt", 50)], url)
    held = SQLiteStore(str(tmp_path / "store.db"))  # as the service holds it
    api.index([corpus(tmp_path / "more.txt", 3000, seed=5)], url)
    log = tmp_path / "store.db-wal"
    largest, stored = log.stat().st_size, held.count()
    held._conn.execute("PRAGMA wal_checkpoint(PASSIVE)")  # as SQLite's past 1,000 pages of log
    api.delete(["1"], url)  # a small write after the checkpoint
    assert largest > 1024 * 1024 and log.stat().st_size < 1024 * 1024
    assert held.count() == stored - 1  # and the store holds what was written
    held.close()


def test_a_run_forgets_the_threshold_a_report_read_while_it_ran(tmp_path: Path) -> None:
    """A report made while an index run wrote remembered the threshold it read, and the run,
    which had read the store's settings before, found none to forget at its end."""
    first = corpus(tmp_path / "first.txt", 300)
    second = tmp_path / "second.txt"
    second.write_text("".join(f"h{n} a new listing on street {n}\n" for n in range(200)))
    api.index([first], f"sqlite:///{tmp_path / 'a.db'}")
    running = SQLiteStore(str(tmp_path / "a.db"))
    written, reported = [False], []

    def report_meanwhile(statement: str) -> None:
        written[0] = written[0] or statement.startswith("INSERT OR REPLACE INTO docs")
        if written[0] and not reported and statement.startswith("BEGIN IMMEDIATE"):
            reported.append(api.report(f"sqlite:///{tmp_path / 'a.db'}"))

    running._conn.set_trace_callback(report_meanwhile)
    api.index([second], running, batch_size=50)
    running._conn.set_trace_callback(None)
    assert reported  # the place met
    with SQLiteStore(str(tmp_path / "a.db")) as store:
        assert store.settings.get("threshold_choice") is None


def test_a_merge_retires_its_runs_beside_those_another_run_has_yet_to_drop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A merged run's name is taken again by the next run of its level; another process
    that retired a run of that name may not have dropped it yet when this one retires its
    own."""
    monkeypatch.setattr(sqlite_store, "PENDING_LIMIT", 500)
    path = tmp_path / "shared.db"
    records = tmp_path / "a.txt"
    records.write_text("".join(f"a{i} listing {i} on street {i % 97}\n" for i in range(300)))
    first, other = SQLiteStore(str(path)), sqlite3.connect(path, isolation_level=None)

    def others_retired(statement: str) -> None:
        if statement.startswith("BEGIN IMMEDIATE"):  # before this run takes the write lock
            for number in range(1, 9):
                other.execute(f"CREATE TABLE IF NOT EXISTS retired_bands_run_0_{number} (x)")

    first._conn.set_trace_callback(others_retired)
    assert api.index([records], first, batch_size=50).documents == 300
    first._conn.set_trace_callback(None)
    serial = f"sqlite:///{tmp_path / 'serial.db'}"
    api.index([records], serial)
    assert api.report(f"sqlite:///{path}") == api.report(serial) != []


def test_ids_and_texts_that_are_not_unicode_are_skipped_by_name(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    records = [
        Record("1", "a fine text"),
        Record("half\ud800", "an id that is not Unicode"),
        Record("2", "a text \udfff that is not Unicode"),
        Record("a\0b", "an id SQLite would not find again"),
    ]
    added = api.add(records, url)
    assert added.added == ["1"]
    assert added.skipped == {
        "half\ud800": "id holds half of a surrogate pair",
        "2": "text holds half of a surrogate pair",
        "a\0b": "id holds a NUL character",
    }
    with pytest.raises(InvalidText, match=r"'a text \\udfff' is not Unicode text"):
        api.lookup(url, text="a text \udfff")


def test_a_reader_finds_what_is_still_pending(tmp_path: Path) -> None:
    path = corpus(tmp_path / "records.txt", 200)
    moved, pending = (f"sqlite:///{tmp_path / name}" for name in ("moved.db", "pending.db"))
    for url in (moved, pending):
        api.index([path], url)
    database = sqlite3.connect(tmp_path / "pending.db")  # as a run killed before its move
    database.execute("INSERT INTO bands_pending SELECT * FROM bands_postings WHERE doc % 2 = 0")
    database.execute("DELETE FROM bands_postings WHERE doc % 2 = 0")
    database.commit()
    database.close()
    expected = api.report(moved)
    assert expected
    for strategy in ("join", "buckets"):
        assert api.report(pending, strategy=strategy) == expected
    found = api.lookup(moved, id="8")
    assert found and api.lookup(pending, id="8") == found


def _rows(path: Path, query: str) -> list[tuple]:
    """A query's rows from a store file, read outside neardup."""
    database = sqlite3.connect(path)
    try:
        return database.execute(query).fetchall()
    finally:
        database.close()


def _md5_indexed(path: Path) -> bool:
    plan = _rows(path, "EXPLAIN QUERY PLAN SELECT id FROM docs WHERE md5 = 'x'")
    return any("docs_md5" in str(step) for step in plan)


def test_a_new_store_builds_its_md5_index_at_the_end_of_its_first_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = corpus(tmp_path / "records.txt", 300)
    built, killed = tmp_path / "built.db", tmp_path / "killed.db"
    api.index([path], f"sqlite:///{built}", batch_size=50)
    assert _md5_indexed(built)
    with monkeypatch.context() as patched:  # a first run killed before its end
        patched.setattr(SQLiteStore, "flush", lambda self: None)
        api.index([path], f"sqlite:///{killed}", batch_size=50)
    assert not _md5_indexed(killed)
    assert api.report(f"sqlite:///{killed}") == api.report(f"sqlite:///{built}")
    assert _md5_indexed(killed)  # opening the store built it
    assert api.lookup(f"sqlite:///{killed}", id="7") == api.lookup(f"sqlite:///{built}", id="7")


def test_a_store_with_records_keeps_its_md5_index_while_more_come(tmp_path: Path) -> None:
    path = corpus(tmp_path / "records.txt", 200)
    url = f"sqlite:///{tmp_path / 'store.db'}"
    api.index([path], url, batch_size=150)
    store = SQLiteStore(str(tmp_path / "store.db"))
    store.upsert([])  # an upsert into a store that holds records keeps the index
    assert store._md5_indexed
    store.close()
    assert _md5_indexed(tmp_path / "store.db")


def test_a_new_store_takes_the_larger_pages_and_an_older_store_keeps_its_own(
    tmp_path: Path,
) -> None:
    path = corpus(tmp_path / "records.txt", 200)
    new, older = tmp_path / "new.db", tmp_path / "older.db"
    api.index([path], f"sqlite:///{new}")
    database = sqlite3.connect(older)  # a store file made with SQLite's default pages
    database.executescript("PRAGMA page_size = 4096; PRAGMA journal_mode = WAL;")
    database.close()
    api.index([path], f"sqlite:///{older}")
    page_sizes = [_rows(store, "PRAGMA page_size")[0][0] for store in (new, older)]
    assert page_sizes == [sqlite_store.PAGE_SIZE, 4096]
    assert api.report(f"sqlite:///{older}") == api.report(f"sqlite:///{new}")
