"""Records piped in as they arrive (``tail -f new.jsonl | neardup lookup --file -``): each is
answered, or stored, as it arrives, not once a batch of thousands is full or the pipe closes."""

from __future__ import annotations

import json
import select
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from neardup import api
from neardup.indexer import batches
from neardup.readers import Record, RecordReader

WAIT = 60  # seconds: far more than a record takes, so that a failure is a wait that never ends

STORED = {
    "p1": "Amanda Ortega 8425 Johnson Vista New Whitechester LA 22719",
    "p2": "Amy Mathis 893 Smith Plains South Grossfort ND 82041",
    "p3": "Kenneth Lee 12 Harbor Street Portland ME 04101",
}


@pytest.fixture
def store(tmp_path: Path) -> str:
    people = tmp_path / "people.txt"
    people.write_text("".join(f"{i} {text}\n" for i, text in STORED.items()))
    url = f"sqlite:///{tmp_path / 'people.db'}"
    api.index([people], url)
    return url


def started(*args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "neardup.cli", *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        bufsize=0,
    )


def next_line(process: subprocess.Popen[bytes]) -> str:
    """The next line the process writes, waited for at most WAIT seconds."""
    assert process.stdout is not None
    line, deadline = b"", time.monotonic() + WAIT
    while not line.endswith(b"\n"):
        ready, _, _ = select.select([process.stdout], [], [], max(deadline - time.monotonic(), 0))
        if not ready:
            process.kill()
            pytest.fail(f"nothing written within {WAIT} s while the pipe was open: {line!r}")
        byte = process.stdout.read(1)
        assert byte, f"the output ended: {line!r}"
        line += byte
    return line.decode()


def send(process: subprocess.Popen[bytes], data: bytes) -> None:
    assert process.stdin is not None
    process.stdin.write(data)
    process.stdin.flush()


def finished(process: subprocess.Popen[bytes]) -> tuple[str, str]:
    """What the process writes once its input ends."""
    out, err = process.communicate(timeout=WAIT)
    assert process.returncode == 0, err
    return out.decode(), err.decode()


ARRIVING = [("n1", STORED["p1"].replace("Vista", "Vsta")), ("n2", STORED["p2"])]


def as_format(format: str, records: list[tuple[str, str]]) -> list[str]:
    """Each record as the lines of ``format`` give it, a header first where it has one."""
    if format == "csv":
        return ["id,text\n", *(f"{i},{text}\n" for i, text in records)]
    if format == "jsonl":
        return [json.dumps({"id": i, "text": text}) + "\n" for i, text in records]
    return [f"{i} {text}\n" for i, text in records]


@pytest.mark.parametrize(
    ("format", "encoding", "flags"),
    [
        ("lines", "utf-8", []),
        ("csv", "utf-8", ["--text-field", "text"]),
        ("jsonl", "utf-8", ["--text-field", "text"]),
        ("jsonl", "utf-16", ["--text-field", "text"]),  # a spreadsheet's "Unicode text"
    ],
)
def test_a_lookup_of_piped_records_answers_each_as_it_arrives(
    store: str, format: str, encoding: str, flags: list[str]
) -> None:
    """A lookup of standard input answered at its end, or once 10,000 records had come: a
    program that writes a record and waits for its answer waited for ever."""
    lines = as_format(format, ARRIVING)
    process = started("lookup", "--store", store, "--file", "-", "--format", format, *flags)
    data = "".join(lines[:-1]).encode(encoding)  # utf-16: its byte order mark first
    send(process, data)
    assert next_line(process).startswith("id\tstored_id")
    assert next_line(process).startswith("n1\tp1\t0\t1\t")
    send(process, lines[-1].encode(encoding).removeprefix(data[:2] if encoding != "utf-8" else b""))
    assert next_line(process).startswith("n2\tp2\t1\t0\t1.0\t")
    out, err = finished(process)
    assert out == ""
    assert err.splitlines()[-1] == (
        "of 2 records looked up, 2 have stored duplicates (2 lines); skipped none"
    )


def test_records_piped_into_index_are_stored_as_they_arrive(store: str) -> None:
    process = started("index", "-", "--format", "lines", "--store", store)
    send(process, b"n1 a record that arrives before the next\n")
    deadline = time.monotonic() + WAIT
    while stored(store) != {"n1"}:
        assert time.monotonic() < deadline, "not stored while the pipe was open"
        time.sleep(0.1)
    send(process, b"n2 and the next one\n")
    _, err = finished(process)
    assert "read 2, indexed 2, skipped none" in err
    assert stored(store) == {"n1", "n2"}


def stored(url: str) -> set[str]:
    """Which of the records piped in the store holds."""
    with api.opened(url) as store:
        return set(store.get(["n1", "n2"]))


class Arriving:
    """Records of a stream that pauses after some of them, as a program writing records one
    at a time does, and may break off."""

    streamed = True

    def __init__(self, count: int, pauses_after: set[int], error: Exception | None = None):
        self.count, self.pauses_after, self.error = count, pauses_after, error

    def __iter__(self) -> Iterator[Record]:
        for number in range(1, self.count + 1):
            yield Record(str(number), "text", number)
            if number in self.pauses_after:
                time.sleep(0.2)  # far longer than a list waits for the next record
        if self.error:
            raise self.error


def test_a_streams_lists_end_where_it_pauses() -> None:
    lists = [[int(r.id) for r in batch] for batch in batches(Arriving(40, {1, 3, 30}), 10)]
    assert [n for batch in lists for n in batch] == list(range(1, 41))
    assert max(map(len, lists)) <= 10
    ends = {batch[-1] for batch in lists}
    assert {1, 3, 30, 40} <= ends  # a pause ends a list (a busy machine may end more)


def test_a_streams_error_comes_after_the_records_before_it() -> None:
    read: list[str] = []
    with pytest.raises(ValueError, match="broken off"):
        for batch in batches(Arriving(25, {5}, ValueError("broken off")), 10):
            read += [r.id for r in batch]
    assert read == [str(n) for n in range(1, 26)]


def test_a_regular_files_batches_are_whole(tmp_path: Path) -> None:
    path = tmp_path / "records.txt"
    path.write_text("".join(f"{n} record number {n}\n" for n in range(25)))
    reader = RecordReader(path)
    assert [len(batch) for batch in batches(reader, 10)] == [10, 10, 5]
