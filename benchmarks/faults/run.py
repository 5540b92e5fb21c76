"""What happens when things go wrong around a run: the client or the server killed mid-run, and
concurrent writers. Every case runs on loopback, bounded in time, and prints one table row.

    python benchmarks/faults/run.py [--records 60000]

Needs Java and Maven (it starts and kills its own Solr and Elasticsearch, one at a time, on free
ports under .servers/faults-*).
"""

from __future__ import annotations

import argparse
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from neardup import api
from servers import launch

NEARDUP = [sys.executable, "-m", "neardup.cli"]
# Bands of 8 rows: the default 2-row bands of these short records put most pairs of a large
# store in a shared bucket, and a report from buckets refuses them (too many candidate pairs).
FAST = ["--batch-size", "1000", "--fields", "bands", "--bands", "16"]
KILL_AFTER = 1.5  # seconds into a run: past its start (~1 s), before its end (~2.2 s on SQLite)


def neardup(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*NEARDUP, *args], capture_output=True, text=True, timeout=timeout)


def started(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([*NEARDUP, *args], stderr=subprocess.PIPE, text=True)


def one_line(errors: str) -> str:
    lines = errors.strip().splitlines()
    return lines[0] if len(lines) == 1 and "Traceback" not in errors else f"{len(lines)} lines"


Row = tuple[str, str, str, bool]


def kill_client(records: Path, folder: Path) -> Row:
    url = f"sqlite:///{folder / 'killed.db'}"
    run = started("index", str(records), "--store", url, *FAST)
    time.sleep(KILL_AFTER)
    run.kill()
    run.wait(timeout=60)
    with sqlite3.connect(folder / "killed.db") as database:
        check = database.execute("PRAGMA integrity_check").fetchone()[0]
        kept = database.execute("SELECT COUNT(*) FROM docs").fetchone()[0]
    neardup("index", str(records), "--store", url, *FAST)
    total = api.stats(url)["documents"]
    observed = f"integrity {check}, {kept} kept (whole batches); re-run: {total}"
    return (
        "SQLite: SIGKILL the client mid-index",
        "consistent; re-run exact",
        observed,
        check == "ok" and kept % 1000 == 0 and total == expected_count(records),
    )


def concurrent_writers(records: Path, folder: Path) -> Row:
    url = f"sqlite:///{folder / 'shared.db'}"
    halves = [folder / "a.tsv", folder / "b.tsv"]
    lines = records.read_text().splitlines()
    halves[0].write_text("\n".join([lines[0], *lines[1::2]]) + "\n")
    halves[1].write_text("\n".join([lines[0], *lines[2::2]]) + "\n")
    writers = [started("index", str(h), "--store", url, *FAST) for h in halves]
    reads = 0
    deadline = time.monotonic() + 300
    while any(w.poll() is None for w in writers) and time.monotonic() < deadline:
        if (folder / "shared.db").exists():
            neardup("report", "--store", url, "-o", str(folder / "during.tsv"))
            reads += 1
    errors = [w.communicate(timeout=300)[1] for w in writers]
    total = api.stats(url)["documents"]
    locked = sum("locked" in e or "Traceback" in e for e in errors)
    observed = f"exit {[w.returncode for w in writers]}, {reads} reports during, {total} stored"
    return (
        "SQLite: two index runs and reports at once",
        "no 'locked'; nothing lost",
        observed,
        locked == 0 and total == expected_count(records),
    )


def expected_count(records: Path) -> int:
    return sum(1 for _ in records.open()) - 1


def kill_server(
    engine: str, phase: str, records: Path, start: Callable[[bool], tuple[object, str]]
) -> Row:
    """Kill -9 the server during `index` or `report`; the client must stop within its retry
    budget with one line; after a restart on the same data a re-run completes exactly."""
    server, url = start(False)
    try:
        if phase == "report":
            neardup("index", str(records), "--store", url, *FAST)
            first = neardup("report", "--store", url)
            expected = first.stdout if first.returncode == 0 else None
        command = (
            ["index", str(records), "--store", url, *FAST]
            if phase == "index"
            else ["report", "--store", url, "-o", os.devnull]
        )
        run = started(*command)
        time.sleep(KILL_AFTER if phase == "index" else 1.5)
        killed_at = time.monotonic()
        for node in server:
            os.killpg(node.process.pid, signal.SIGKILL)
        _, errors = run.communicate(timeout=180)
        waited = time.monotonic() - killed_at
    finally:
        for node in server:
            node.stop(grace=0)
    server, url = start(True)
    try:
        if phase == "index":
            neardup("index", str(records), "--store", url, *FAST)
            complete = api.stats(url)["documents"] == expected_count(records)
        else:
            complete = expected is not None and neardup("report", "--store", url).stdout == expected
    finally:
        for node in server:
            node.stop(grace=0)
    observed = f"exit {run.returncode} after {waited:.1f} s: {one_line(errors)[:70]}; re-run " + (
        "exact" if complete else "NOT exact"
    )
    ok = run.returncode != 0 and waited < 120 and one_line(errors).startswith("neardup: error")
    return (
        f"{engine}: kill -9 the server mid-{phase}",
        "one line, then re-run exact",
        observed,
        ok and complete,
    )


def solr(keep: bool) -> tuple[list, str]:
    port = 18983
    node = launch.start_solr(port=port, work=launch.STATE / "faults-solr", keep=keep)
    return [node], f"solr://127.0.0.1:{port}/solr/faults"


def elasticsearch(keep: bool) -> tuple[list, str]:
    port = 19200
    nodes = launch.start_elasticsearch(
        port=port, work=launch.STATE / "faults-elasticsearch", keep=keep
    )
    return nodes, f"elasticsearch://127.0.0.1:{port}/faults"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=60_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        records = folder / "records.tsv"
        neardup("generate", str(args.records), "-o", str(records), "--words", "20")
        cases: list[Callable[[], Row]] = [
            lambda: kill_client(records, folder),
            lambda: concurrent_writers(records, folder),
            lambda: kill_server("Solr", "index", records, solr),
            lambda: kill_server("Solr", "report", records, solr),
            lambda: kill_server("Elasticsearch", "index", records, elasticsearch),
            lambda: kill_server("Elasticsearch", "report", records, elasticsearch),
        ]
        print("| case | expected | observed | ok |\n| --- | --- | --- | --- |")
        for case in cases:
            name, expected, observed, ok = case()
            print(f"| {name} | {expected} | {observed} | {'yes' if ok else 'NO'} |", flush=True)


if __name__ == "__main__":
    main()
