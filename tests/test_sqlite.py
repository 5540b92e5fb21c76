"""What only the embedded store promises: each batch is one transaction."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from neardup import api
from neardup.stores.sqlite import SQLiteStore


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
    tokens = database.execute("SELECT COUNT(DISTINCT doc) FROM bands_postings").fetchone()
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
