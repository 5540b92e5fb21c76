"""What happens when things go wrong around a run: the client or the server killed mid-run, and
concurrent writers. Every case runs on loopback, bounded in time, and prints one table row.

    python benchmarks/faults/run.py [--records 60000]

Needs Java and Maven (it starts and kills its own Solr and Elasticsearch, one at a time, on free
ports under .servers/faults-*).
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from neardup import api
from neardup.errors import NeardupError
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


def concurrent_unique_writers(records: Path, folder: Path) -> Row:
    """Two `index --skip-duplicates` runs at once, of the same texts under other ids."""
    url = f"sqlite:///{folder / 'unique.db'}"
    lines = records.read_text().splitlines()[1:5001]
    for name in ("x", "y"):
        (folder / f"{name}.tsv").write_text(
            "id\ttext\n" + "".join(f"{name}{line}\n" for line in lines)
        )
    runs = [
        started("index", str(folder / f"{n}.tsv"), "--store", url, "--skip-duplicates", *FAST)
        for n in ("x", "y")
    ]
    errors = [run.communicate(timeout=600)[1] for run in runs]
    with api.opened(url) as store:
        stored = [r for batch in store.iter_records(10_000) for r in batch]
    twice = len(stored) - len({r.md5 for r in stored})
    return (
        "SQLite: two `index --skip-duplicates` runs of the same texts at once",
        "no text stored twice",
        f"exit {[r.returncode for r in runs]}, {len(stored)} stored, {twice} texts twice"
        + ("" if all(r.returncode == 0 for r in runs) else f": {one_line(errors[0])[:60]}"),
        twice == 0 and all(r.returncode == 0 for r in runs),
    )


def truncated_file(records: Path, folder: Path) -> Row:
    """A gzip file cut in half in transit."""
    whole = gzip.compress(records.read_bytes())
    cut = folder / "cut.tsv.gz"
    cut.write_bytes(whole[: len(whole) // 2])
    url = f"sqlite:///{folder / 'cut.db'}"
    run = neardup("index", str(cut), "--store", url, *FAST)
    readable = 0
    with gzip.open(cut, "rt") as text, contextlib.suppress(EOFError):
        for line in text:
            readable += line.endswith("\n")
    stored = api.stats(url)["documents"] if (folder / "cut.db").exists() else 0
    return (
        "SQLite: index a .gz cut in half",
        "exit 2, one line; every whole record before the cut",
        f"exit {run.returncode}: {one_line(run.stderr.splitlines()[-1])[:60]}; "
        f"{stored} stored of {readable - 1} whole",
        run.returncode == 2 and stored == readable - 1,
    )


def full_disk(records: Path, folder: Path) -> Row:
    """A store whose disk something else filled: it must still answer, read-only."""
    small = folder / "small"
    small.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(small)], capture_output=True
    )
    if mounted.returncode:
        return ("SQLite: the disk fills after a run", "answers read-only", "cannot mount", False)
    try:
        url = f"sqlite:///{small / 'store.db'}"
        part = folder / "part.tsv"
        part.write_text("\n".join(records.read_text().splitlines()[:2001]) + "\n")
        neardup("index", str(part), "--store", url, *FAST)
        with (small / "filler").open("wb") as filler, contextlib.suppress(OSError):
            while True:
                filler.write(b"\0" * 65536)
                filler.flush()
        answers = [
            neardup("stats", "--store", url),
            neardup("lookup", "--store", url, "--text", part.read_text().splitlines()[5]),
            neardup("report", "--store", url, "-o", str(folder / "full.tsv")),
        ]
        refused = neardup("index", str(part), "--store", url, *FAST)
    finally:
        subprocess.run(["umount", "-l", str(small)], check=False)
    codes = [a.returncode for a in answers]
    return (
        "SQLite: the disk fills after a run",
        "stats, lookup, report answer; index refuses in one line",
        f"exit {codes}; index: exit {refused.returncode}, {one_line(refused.stderr)[:50]}",
        codes == [0, 0, 0] and refused.returncode == 2 and "read-only" in refused.stderr,
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


# --- a cluster that loses a node ------------------------------------------------------------------

CLUSTER_PORT = 19300
CLIENTS = 4  # concurrent clients of `neardup serve`
SERVE_SECONDS = 12  # how long they ask; the node dies a third of the way in


@dataclass
class Cluster:
    """Three nodes, every shard with one replica, and the store URL that names the cluster."""

    engine: str
    url: str
    nodes: list[launch.Server]  # each may be killed and started again
    healthy: Callable[[], bool]  # every node back, every shard copy active
    servers: list[launch.Server]  # everything to stop at the end


def elasticsearch_cluster() -> Cluster:
    nodes = launch.start_elasticsearch(
        port=CLUSTER_PORT, nodes=3, work=launch.STATE / "faults-cluster"
    )
    hosts = ",".join(f"127.0.0.1:{CLUSTER_PORT + n}" for n in range(3))

    def healthy() -> bool:
        asked = "_cluster/health?wait_for_status=green&wait_for_nodes=3&timeout=1s"
        return all(_answer(f"{n.urls[0]}/{asked}").get("timed_out") is False for n in nodes)

    url = f"elasticsearch://{hosts}/failover?shards=2&replicas=2"
    return Cluster("Elasticsearch", url, nodes, healthy, nodes)


def solr_cluster() -> Cluster:
    keeper, *nodes = launch.start_solr_cluster(nodes=3, port=CLUSTER_PORT + 10)

    def healthy() -> bool:
        """Every node answers, and every replica is active (ZooKeeper lists a killed node as
        live until its session expires, so the answers count, not the list)."""
        asked = "admin/collections?action=CLUSTERSTATUS&wt=json"
        statuses = [_answer(f"{node.urls[0]}/{asked}") for node in nodes]
        if not all(statuses):
            return False
        shards = statuses[0]["cluster"]["collections"]["failover"]["shards"].values()
        return all(r["state"] == "active" for shard in shards for r in shard["replicas"].values())

    url = f"solr+zk://{keeper.zookeeper}/failover?shards=2&replicas=2"
    return Cluster("Solr", url, nodes, healthy, [keeper, *nodes])


def _answer(url: str) -> dict:
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            return json.load(answer)
    except (OSError, ValueError):
        return {}


def lose_a_node(start: Callable[[], Cluster], records: Path) -> list[Row]:
    """kill -9 one node of a 3-node cluster mid-index, mid-report, and while `neardup serve`
    answers 4 clients; each time, start it again and check that the cluster catches up (every
    shard copy active again) with every record."""
    cluster = start()
    url, name = cluster.url, f"{cluster.engine}, 3 nodes"
    expected = expected_count(records)
    rows = []
    try:
        # The collection or index first, so that the node dies while records go in.
        neardup("schema", "apply", "--store", url)
        run = started("index", str(records), "--store", url, *FAST)
        took, errors = _with_a_node_killed(run, cluster.nodes[1], after=KILL_AFTER * 2)
        stored = _stored(url)
        rows.append(
            (
                f"{name}: kill -9 one mid-index",
                "completes; every record",
                f"exit {run.returncode} in {took:.1f} s ({one_line(errors)[:40]}); {stored} stored",
                run.returncode == 0 and stored == expected,
            )
        )
        rows.append(_catches_up(cluster, cluster.nodes[1], expected, "the index"))
        before = neardup("report", "--store", url).stdout
        run = started("report", "--store", url, "-o", str(records.parent / "during.tsv"))
        took, errors = _with_a_node_killed(run, cluster.nodes[2], after=1.0)
        same = run.returncode == 0 and (records.parent / "during.tsv").read_text() == before
        rows.append(
            (
                f"{name}: kill -9 one mid-report",
                "completes; the same pairs",
                f"exit {run.returncode} in {took:.1f} s ({one_line(errors)[:40]}); "
                + ("the same pairs" if same else "NOT the same pairs"),
                same,
            )
        )
        rows.append(_catches_up(cluster, cluster.nodes[2], expected, "the report"))
        rows.append(_serve_through(name, url, cluster.nodes[0], records))
        rows.append(_catches_up(cluster, cluster.nodes[0], expected, "serve"))
    finally:
        for server in cluster.servers:
            server.stop(grace=0)
    return rows


def _with_a_node_killed(
    run: subprocess.Popen[str], node: launch.Server, after: float
) -> tuple[float, str]:
    """Kill ``node`` ``after`` seconds into ``run``; (the run's seconds, its stderr)."""
    started_at = time.monotonic()
    time.sleep(after)
    if run.poll() is not None:
        raise RuntimeError("the run ended before the node was killed: give it more records")
    node.kill()
    _, errors = run.communicate(timeout=600)
    return time.monotonic() - started_at, errors


def _stored(url: str) -> int | str:
    """How many records the store holds, or why it cannot say."""
    try:
        return int(api.stats(url)["documents"])  # type: ignore[call-overload]
    except NeardupError as exc:
        return f"({exc})"


def _catches_up(cluster: Cluster, node: launch.Server, expected: int, after: str) -> Row:
    """Start ``node`` again; how long until the cluster is whole with every record."""
    started_at = time.monotonic()
    node.restart()
    while not (whole := cluster.healthy()) and time.monotonic() - started_at < 240:
        time.sleep(0.5)
    took = time.monotonic() - started_at
    stored = _stored(cluster.url)
    return (
        f"{cluster.engine}, 3 nodes: the node killed during {after} starts again",
        "every shard copy active; every record",
        f"whole after {took:.0f} s; {stored} stored" if whole else "not whole in 240 s",
        whole and stored == expected,
    )


def _serve_through(name: str, url: str, victim: launch.Server, records: Path) -> Row:
    """`neardup serve` on the cluster, CLIENTS clients looking up records by id for
    SERVE_SECONDS; ``victim`` dies a third of the way in."""
    port = launch.free_port()
    service = subprocess.Popen(
        [*NEARDUP, "serve", "--store", url, "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    ids = [line.split("\t", 1)[0] for line in records.read_text().splitlines()[1:]]
    address = f"http://127.0.0.1:{port}/lookup"
    try:
        _wait_for(f"http://127.0.0.1:{port}/health")
        answers: list[tuple[float, float, bool]] = []  # (when, seconds, ok)
        started_at = time.monotonic()

        def client(seed: int) -> None:
            chooser = random.Random(seed)
            while (now := time.monotonic()) - started_at < SERVE_SECONDS:
                body = json.dumps({"id": chooser.choice(ids)}).encode()
                request = urllib.request.Request(
                    address, body, {"Content-Type": "application/json"}
                )
                try:
                    with urllib.request.urlopen(request, timeout=60) as answer:
                        ok = answer.status == 200
                except OSError:
                    ok = False
                answers.append((now - started_at, time.monotonic() - now, ok))

        threads = [threading.Thread(target=client, args=(n,)) for n in range(CLIENTS)]
        for thread in threads:
            thread.start()
        time.sleep(SERVE_SECONDS / 3)
        victim.kill()
        killed = time.monotonic() - started_at
        for thread in threads:
            thread.join()
    finally:
        service.terminate()
        service.wait(timeout=30)
    failed = sum(not ok for _, _, ok in answers)
    before = sorted(s for when, s, _ in answers if when < killed)
    after = sorted(s for when, s, _ in answers if when >= killed)
    return (
        f"{name}: kill -9 one while serve answers {CLIENTS} clients",
        "no failed request",
        f"{len(answers):,} lookups, {failed} failed; p50/p99 {_ms(before, 0.5):.0f}/"
        f"{_ms(before, 0.99):.0f} ms before the kill, {_ms(after, 0.5):.0f}/{_ms(after, 0.99):.0f}"
        f" ms after (slowest {after[-1] * 1000:.0f} ms)",
        failed == 0,
    )


def _ms(seconds: list[float], quantile: float) -> float:
    """The ``quantile`` of sorted ``seconds``, in milliseconds."""
    return 1000 * seconds[min(len(seconds) - 1, int(len(seconds) * quantile))] if seconds else 0.0


def _wait_for(url: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=5):
                return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"{url} did not answer within {timeout:.0f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=60_000)
    parser.add_argument(
        "--only", choices=["node-loss"], help="run only the cases of a cluster that loses a node"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        records = folder / "records.tsv"
        neardup("generate", str(args.records), "-o", str(records), "--words", "20")
        cases: list[Callable[[], list[Row]]] = [
            lambda: [kill_client(records, folder)],
            lambda: [concurrent_writers(records, folder)],
            lambda: [concurrent_unique_writers(records, folder)],
            lambda: [truncated_file(records, folder)],
            lambda: [full_disk(records, folder)],
            lambda: [kill_server("Solr", "index", records, solr)],
            lambda: [kill_server("Solr", "report", records, solr)],
            lambda: [kill_server("Elasticsearch", "index", records, elasticsearch)],
            lambda: [kill_server("Elasticsearch", "report", records, elasticsearch)],
        ]
        if args.only == "node-loss":
            cases = []
        cases.append(lambda: lose_a_node(solr_cluster, records))
        cases.append(lambda: lose_a_node(elasticsearch_cluster, records))
        print("| case | expected | observed | ok |\n| --- | --- | --- | --- |")
        for case in cases:
            for name, expected, observed, ok in case():
                print(f"| {name} | {expected} | {observed} | {'yes' if ok else 'NO'} |", flush=True)


if __name__ == "__main__":
    main()
