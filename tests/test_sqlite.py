"""What only the embedded store promises: each batch is one transaction."""

from __future__ import annotations

import sqlite3
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
    tokens = database.execute("SELECT COUNT(DISTINCT doc) FROM signature_postings").fetchone()
    assert tokens == (20,)
    database.close()
    monkeypatch.setattr(SQLiteStore, "_insert_postings", insert)
    assert api.index([path], sqlite_url, batch_size=10).documents == 25
    found = api.lookup(sqlite_url, text="record number 24 of the file")
    assert (found[0].id, found[0].exact) == ("24", True)
