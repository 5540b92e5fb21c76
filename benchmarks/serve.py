"""`neardup serve` under load: lookups per second and latency over HTTP on loopback.

    python benchmarks/serve.py RECORDS.tsv STORE_URL... [--clients 4] [--lookups 4000]

For each store: a fresh store gets RECORDS with --preset documents, `neardup serve` starts on a
free loopback port as a user starts it, and --clients threads, each with its own keep-alive
connection (http.client: the client's own cost stays small next to the service's on shared
cores), send --lookups POST /lookup requests by id in all (ids drawn at random, one seed), as
fast as the service answers. Before that, warm-up rounds of 1,000 lookups run until the rate
settles (two rounds within 5%, at most 20 rounds): after a bulk index an engine goes on
merging segments, and its JVM compiling, for a while. Latency is each request's round trip as
the client sees it. Then the same records' texts, under new ids, are sent from one client as
POST /lookup/batch requests of --batch records each: records looked up per second.
"""

from __future__ import annotations

import argparse
import http.client
import json
import random
import socket
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import requests

from neardup import api
from neardup.readers import RecordReader
from neardup.stores import open_store

NEARDUP = [sys.executable, "-m", "neardup.cli"]
WARM_UP, WARM_UP_ROUNDS = 1000, 20


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def serving(url: str, stderr: int | None = None) -> tuple[subprocess.Popen[str], str]:
    """`neardup serve` on ``url`` and a free loopback port, once it answers /health; its
    ``stderr`` piped where asked (subprocess.PIPE)."""
    port = free_port()
    process = subprocess.Popen(
        [*NEARDUP, "serve", "--store", url, "--port", str(port)], stderr=stderr, text=True
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if requests.get(f"{base}/health", timeout=2).status_code == 200:
                return process, base
        except requests.ConnectionError:
            time.sleep(0.2)
    process.kill()
    sys.exit(f"neardup serve on {url} did not answer")


def load(base: str, ids: list[str], clients: int) -> tuple[np.ndarray, float]:
    """Send one lookup per id from ``clients`` threads; (latencies in ms, seconds in all)."""
    shares = [ids[n::clients] for n in range(clients)]

    host, port = base.removeprefix("http://").split(":")
    headers = {"Content-Type": "application/json"}

    def client(share: list[str]) -> list[float]:
        connection, took = http.client.HTTPConnection(host, int(port), timeout=60), []
        for record_id in share:
            started = time.perf_counter()
            connection.request("POST", "/lookup", json.dumps({"id": record_id}), headers)
            answer = connection.getresponse()
            body = answer.read()
            took.append((time.perf_counter() - started) * 1000)
            assert answer.status == 200, body
        connection.close()
        return took

    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=clients) as pool:
        latencies = [ms for part in pool.map(client, shares) for ms in part]
    return np.array(latencies), time.perf_counter() - started


def batch_load(base: str, texts: list[str], size: int) -> float:
    """Look ``texts`` up in POST /lookup/batch requests of ``size`` records from one client;
    seconds in all."""
    session, started = requests.Session(), time.perf_counter()
    for start in range(0, len(texts), size):
        records = [{"id": f"q{n}", "text": t} for n, t in enumerate(texts[start : start + size])]
        answer = session.post(f"{base}/lookup/batch", json={"records": records}, timeout=300)
        assert answer.status_code == 200, answer.text
        assert len(answer.json()["results"]) == len(records)
    return time.perf_counter() - started


def warm_up(base: str, ids: list[str], clients: int) -> int:
    """Warm-up rounds until the rate settles; how many it took."""
    previous = 0.0
    for n in range(WARM_UP_ROUNDS):
        latencies, seconds = load(base, ids[n * WARM_UP :][:WARM_UP], clients)
        rate = len(latencies) / seconds
        if previous and abs(rate - previous) <= 0.05 * previous:
            return n + 1
        previous = rate
    return WARM_UP_ROUNDS


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("records", type=Path)
    parser.add_argument("stores", nargs="+")
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--lookups", type=int, default=4000)
    parser.add_argument("--batch", type=int, default=500)
    args = parser.parse_args()
    texts = {r.id: r.text for r in RecordReader(args.records)}
    ids = list(texts)
    chosen = random.Random(1).choices(ids, k=args.lookups)
    warming = random.Random(2).choices(ids, k=WARM_UP * WARM_UP_ROUNDS)
    print(f"{len(ids):,} records, {args.lookups:,} lookups by id from {args.clients} clients")
    print(
        "| store | lookups/s | p50 ms | p99 ms | mean ms | warm-up rounds | batches: records/s |\n"
        "| --- | --- | --- | --- | --- | --- | --- |"
    )
    for url in args.stores:
        with open_store(url) as old:
            old.drop()
        api.index([args.records], url, preset="documents")
        process, base = serving(url)
        try:
            rounds = warm_up(base, warming, args.clients)
            latencies, seconds = load(base, chosen, args.clients)
            batched = batch_load(base, [texts[i] for i in chosen], args.batch)
        finally:
            process.terminate()
            process.wait(timeout=30)
        p50, p99 = np.percentile(latencies, [50, 99])
        print(
            f"| {url.split(':')[0]} | {len(latencies) / seconds:,.0f} | {p50:.1f} | {p99:.1f} | "
            f"{statistics.fmean(latencies):.1f} | {rounds} | {len(chosen) / batched:,.0f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
