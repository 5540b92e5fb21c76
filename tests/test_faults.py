"""Faults around a run: the client killed or interrupted, the disk full. Nothing is lost, nothing
hangs, nothing prints a traceback; running the same command again completes the store."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from neardup import api
from neardup.fingerprint import FingerprintParams
from neardup.service import create_app
from neardup.stores import open_store
from tests.corpora import corpus
from tests.runner import assert_user_error, neardup

RECORDS = 60_000
# Band tokens alone keep a run of 60,000 records to a few seconds.
FAST = ["--batch-size", "1000", "--fields", "bands"]


def _records(path: Path, count: int = RECORDS) -> Path:
    path.write_text(
        "".join(
            f"r{i} listing number {i} on street {i % 101} in town {i % 37}\n" for i in range(count)
        )
    )
    return path


def _start_index(path: Path, url: str) -> subprocess.Popen[str]:
    """The index run as a user's terminal starts it: with Ctrl-C's default action, which a
    test runner started in the background (SIGINT ignored, as a shell's `&` leaves it) would
    otherwise pass on, and Python then leaves ignored."""
    command = [sys.executable, "-m", "neardup.cli", "index", str(path), "--store", url, *FAST]
    return subprocess.Popen(
        command,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


def _after_some_batches(process: subprocess.Popen[str], url: str) -> None:
    """Wait until the run is past its first batch, but not at its end: on SQLite until a batch
    is committed, on the engines (which show nothing before their commit) for a while."""
    deadline = time.monotonic() + 60
    if url.startswith("sqlite:///"):
        path = Path(url[len("sqlite:///") :])
        while time.monotonic() < deadline and process.poll() is None:
            if path.exists() and _committed(path):
                break
            time.sleep(0.05)
    else:
        time.sleep(2.0)
    assert process.poll() is None, "the run ended before it could be interrupted"


def _committed(path: Path) -> int:
    database = sqlite3.connect(path, timeout=1)
    try:
        return database.execute("SELECT COUNT(*) FROM docs").fetchone()[0]
    except sqlite3.OperationalError:  # no table yet
        return 0
    finally:
        database.close()


def test_a_killed_index_is_completed_by_running_it_again(tmp_path: Path, store_url_factory) -> None:
    url, path = store_url_factory(), _records(tmp_path / "records.txt")
    process = _start_index(path, url)
    _after_some_batches(process, url)
    process.kill()
    process.wait(timeout=60)
    if url.startswith("sqlite:///"):
        database = sqlite3.connect(url[len("sqlite:///") :])
        assert database.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        written = database.execute("SELECT COUNT(*) FROM docs").fetchone()[0]
        assert 0 < written < RECORDS and written % 1000 == 0  # whole batches only
        database.close()
    again = neardup("index", str(path), "--store", url, *FAST)
    assert again.returncode == 0, again.stderr
    assert api.stats(url)["documents"] == RECORDS
    # The records share a template at about half their weight: a lookup at 0.5 finds others.
    found = api.lookup(url, id="r39999", rules={"threshold": 0.5})
    assert found and all(m.id != "r39999" for m in found)


def test_an_interrupted_index_says_one_line_and_exits_130(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    process = _start_index(_records(tmp_path / "records.txt"), url)
    _after_some_batches(process, url)
    process.send_signal(signal.SIGINT)
    _, errors = process.communicate(timeout=60)
    assert process.returncode == 130, errors
    assert errors.strip().splitlines() == [
        "neardup: interrupted; run the same command again to complete it"
    ]


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 3 MB file system of its own, to fill."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small file system needs root")
    small = tmp_path / "small"
    small.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(small)], check=True)
    try:
        yield small
    finally:
        subprocess.run(["umount", "-l", str(small)], check=False)


def _fill(path: Path) -> None:
    """Write ``path`` until its disk is full."""
    with path.open("wb", buffering=0) as filler, pytest.raises(OSError):
        while True:
            filler.write(b"\0" * 4096)


def test_a_full_disk_is_one_line_and_the_store_keeps_its_batches(
    small_disk: Path, tmp_path: Path
) -> None:
    """The disk fills during a run: the error says what the store holds and how to complete
    it, and the same command run once there is room completes it."""
    url = f"sqlite:///{small_disk / 'store.db'}"
    path = _records(tmp_path / "records.txt", 20_000)
    command = ("index", str(path), "--store", url, "--batch-size", "500")
    result = neardup(*command)
    assert result.returncode == 2
    database = sqlite3.connect(small_disk / "store.db")
    assert database.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    kept = database.execute("SELECT COUNT(*) FROM docs").fetchone()[0]
    database.close()
    assert 0 < kept < 20_000 and kept % 500 == 0
    assert result.stderr.strip().splitlines() == [
        f"neardup: error: {small_disk / 'store.db'}: its disk is full (database or disk is "
        f"full); the write was undone, and the store holds {kept:,} records: free some space "
        "and run the same command again to complete it"
    ]
    assert api.stats(url)["documents"] == kept
    found = api.lookup(url, text="listing number 0 on street 0 in town 0")
    assert [(m.id, m.exact) for m in found[:1]] == [("r0", True)]
    subprocess.run(["mount", "-o", "remount,size=64m", str(small_disk)], check=True)
    completed = neardup(*command)
    assert completed.returncode == 0, completed.stderr
    assert f"{kept:,} stored records given again unchanged" in completed.stderr
    assert api.stats(url)["documents"] == 20_000


def test_a_run_that_filled_the_disk_leaves_a_store_that_answers(
    small_disk: Path, tmp_path: Path
) -> None:
    """A run that fits fills the disk: the store's last writes stay in its write-ahead log,
    which has no room to be folded into the file, so the store opens for writing. Lookups and
    reports failed with "database or disk is full" where they would remember the threshold
    they read; they answer, and read it again next time."""
    url = f"sqlite:///{small_disk / 'store.db'}"
    records, _ = tmp_path / "people.csv", api.generate(1000, tmp_path / "people.csv", kind="people")
    assert neardup("index", str(records), "--store", url).returncode == 0
    assert (small_disk / "store.db-wal").exists()
    looked_up = neardup("lookup", "--store", url, "--id", "p00000000")
    assert looked_up.returncode == 0 and "p00000032" in looked_up.stdout, looked_up.stderr
    reported = neardup("report", "--store", url, "-o", str(tmp_path / "pairs.tsv"))
    assert reported.returncode == 0 and "pairs written" in reported.stderr, reported.stderr
    with TestClient(create_app(url)) as client:  # a service adding to it: 507, not 503
        assert client.post("/lookup", json={"id": "p00000000"}).status_code == 200
        records = [
            {"id": f"new{n}", "text": f"a record that is new number {n}"} for n in range(3000)
        ]
        refused = client.post("/records", json={"records": records})
        assert refused.status_code == 507 and "its disk is full" in refused.json()["error"]


def test_a_store_on_a_full_disk_answers_read_only(small_disk: Path, tmp_path: Path) -> None:
    """Something else filled the disk after a run ended: the store has no room for the files a
    writer needs, so it opens read-only: lookups and reports answer, an index says why not."""
    url = f"sqlite:///{small_disk / 'store.db'}"
    path = _records(tmp_path / "records.txt", 300)
    assert neardup("index", str(path), "--store", url).returncode == 0
    before = neardup("report", "--store", url, "--threshold", "0.7")
    _fill(small_disk / "filler")
    shown = neardup("stats", "--store", url)
    assert shown.stdout.startswith(f"store: {url}\ndocuments: 300"), shown.stderr
    found = neardup("lookup", "--store", url, "--text", "listing number 7 on street 7 in town 7")
    assert found.returncode == 0 and found.stdout.splitlines()[1].split()[:2] == ["r7", "exact"]
    reported = neardup("report", "--store", url, "--threshold", "0.7")
    assert (reported.returncode, reported.stdout, reported.stderr) == (
        0,
        before.stdout,
        before.stderr,
    )
    unchanged = neardup("index", str(path), "--store", url)  # nothing to write
    assert unchanged.returncode == 0 and "300 stored records given again unchanged" in (
        unchanged.stderr
    )
    refused = neardup("index", str(_records(tmp_path / "more.txt", 310)), "--store", url)
    assert refused.returncode == 2
    assert refused.stderr.startswith(f"neardup: error: {small_disk / 'store.db'} is open read-only")
    assert "its disk is full: it takes writes once the disk has room" in refused.stderr


def test_a_store_on_a_read_only_disk_answers_and_says_why_it_takes_no_writes(
    small_disk: Path, tmp_path: Path
) -> None:
    """A store shared on a disk mounted read-only was said to take writes "once its disk has
    room", which no deleting would make."""
    url = f"sqlite:///{small_disk / 'store.db'}"
    path = _records(tmp_path / "records.txt", 300)
    assert neardup("index", str(path), "--store", url).returncode == 0
    subprocess.run(["mount", "-o", "remount,ro", str(small_disk)], check=True)
    found = neardup("lookup", "--store", url, "--text", "listing number 7 on street 7 in town 7")
    assert found.returncode == 0 and found.stdout.splitlines()[1].split()[:2] == ["r7", "exact"]
    refused = neardup("index", str(_records(tmp_path / "more.txt", 310)), "--store", url)
    assert_user_error(refused, "its file system is mounted read-only: copy the store to a")
    assert "has room" not in refused.stderr


@pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("setpriv"), reason="running as another user needs root"
)
def test_another_user_without_a_home_runs_it_and_is_told_what_it_cannot_read() -> None:
    # A service account: no writable home, neardup installed where it cannot write, and a file
    # it may not read.
    folder = Path(tempfile.mkdtemp())
    try:
        folder.chmod(0o777)
        (folder / "records.txt").write_text("1 hello world\n2 hello world again\n")
        (folder / "secret.txt").write_text("1 x\n")
        (folder / "secret.txt").chmod(0)
        as_nobody = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--init-groups"]
        environment = {**os.environ, "HOME": "/nonexistent"}

        def run(name: str) -> subprocess.CompletedProcess[str]:
            command = [*as_nobody, sys.executable, "-m", "neardup.cli", "index", name]
            return subprocess.run(
                [*command, "--store", f"sqlite:///{folder / 'x.db'}"],
                capture_output=True,
                text=True,
                cwd=folder,
                env=environment,
                timeout=300,
            )

        refused = run("secret.txt")
        assert refused.returncode == 2
        assert refused.stderr.strip() == "neardup: error: cannot read secret.txt: Permission denied"
        indexed = run("records.txt")
        assert indexed.returncode == 0, indexed.stderr
        assert "store holds 2" in indexed.stderr
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_two_skip_duplicates_runs_at_once_store_each_text_once(
    tmp_path: Path, store_url_factory
) -> None:
    """Two processes index the same texts under other ids, at once, with --skip-duplicates:
    each batch's check and add hold the store's lock (the embedded store's write lock, an
    engine's lease), so the other process's check sees what this one added, and no text is
    stored twice."""
    texts = [line.split(" ", 1)[1] for line in corpus(tmp_path / "c.txt", size=300).read_text()
             .splitlines()]  # fmt: skip
    for name in ("x", "y"):
        (tmp_path / f"{name}.tsv").write_text(
            "id\ttext\n" + "".join(f"{name}{n}\t{t}\n" for n, t in enumerate(texts))
        )
    url = store_url_factory()
    runs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "neardup.cli",
                "index",
                str(tmp_path / f"{name}.tsv"),
                "--store",
                url,
                "--skip-duplicates",
                "--batch-size",
                "20",
                "--json",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in ("x", "y")
    ]
    outputs = [run.communicate(timeout=300) for run in runs]
    assert [run.returncode for run in runs] == [0, 0], [err for _, err in outputs]
    summaries = [json.loads(out) for out, _ in outputs]
    with api.opened(url) as store:
        stored = [r for batch in store.iter_records(1000) for r in batch]
    assert len({r.md5 for r in stored}) == len(stored)  # no text twice
    assert sum(s["indexed"] for s in summaries) == len(stored)


@pytest.mark.parametrize("kind", ["solr", "elasticsearch"])
def test_an_engine_store_dropped_by_another_process_has_no_settings_to_read(
    request, kind: str
) -> None:
    """What another process dropped reads as a store with no schema yet, not as an error (a
    Solr core is asked for its settings document alone: a core that is not there answers
    404). An embedded store's other handle reads the file it opened, unlinked or not."""
    server = request.getfixturevalue(f"{kind}_server")
    url = server.new_store_url()
    with open_store(url) as writer, open_store(url) as reader:
        writer.ensure_params(FingerprintParams())
        assert reader.read_settings() is not None
        writer.drop()
        assert reader.read_settings() is None


@pytest.mark.parametrize("kind", ["solr", "elasticsearch"])
def test_a_lease_whose_writer_died_is_taken_over(request, kind: str) -> None:
    """An engine's check-then-add lease outlives a writer that was killed; the next writer
    takes it over once it has expired, and cannot take one that has not."""
    server = request.getfixturevalue(f"{kind}_server")
    try:
        with api.opened(server.new_store_url(), create=True) as store:
            store.apply_schema()
            _lease_taken_over(store)
    finally:
        server.drop_made()


def _lease_taken_over(store) -> None:
    assert store._take_lease("a writer that died", time.time() - 1)
    with store.exclusive():
        assert store._lease()["holder"] != "a writer that died"
    assert store._lease() is None
    assert store._take_lease("a live writer", time.time() + 60)
    assert not store._take_lease("another", time.time() + 60)
    store._end_lease({"holder": "someone else"})  # only its holder ends a lease
    assert store._lease()["holder"] == "a live writer"
    store._end_lease({"holder": "a live writer"})
    assert store._lease() is None
