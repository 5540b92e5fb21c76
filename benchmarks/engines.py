"""Indexing rate, lookup latency and report time of each store, on the same records, in one run.

    python benchmarks/engines.py ADS.tsv sqlite:///bench.db solr://127.0.0.1:8983/solr/bench \\
        elasticsearch://127.0.0.1:9200/bench [--lookups 300] [--runs 3]

ADS.tsv is the Kijiji file (../shared/data/kijiji_rent_rome.tsv); its Title and Short Description
are the text. Each store is emptied first. Lookups are by id, for ids spread over the store,
after one warm-up pass; latencies are per lookup, including fingerprinting and verification.
Start the servers with `make solr` and `make elasticsearch`.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import numpy as np

from neardup import api
from neardup.fingerprint import FingerprintParams
from neardup.indexer import index_records
from neardup.readers import RecordReader
from neardup.searcher import MatchRules
from neardup.stores import open_store

PARAMS = FingerprintParams("char", 5, 128, 32)


def fresh_store(url: str):
    if url.startswith("sqlite:///"):
        Path(url[len("sqlite:///") :]).unlink(missing_ok=True)
    store = open_store(url)
    ids = list(store.iter_ids()) if store.read_params() else []
    if ids:
        store.delete(ids)
        store.flush()
    return store


def measure(url: str, records: list, lookups: int, rules: MatchRules) -> dict[str, float]:
    store = fresh_store(url)
    started = time.perf_counter()
    index_records(store, records, PARAMS if store.read_params() is None else None)
    index_seconds = time.perf_counter() - started
    searcher = api.searcher_for(store, rules)
    ids = [r.id for r in records][:: max(1, len(records) // lookups)][:lookups]
    for record_id in ids[:20]:
        searcher.lookup_id(record_id)
    latencies = []
    for record_id in ids:
        started = time.perf_counter()
        searcher.lookup_id(record_id)
        latencies.append(time.perf_counter() - started)
    started = time.perf_counter()
    pairs = api.report(store, rules=rules)
    report_seconds = time.perf_counter() - started
    store.close()
    return {
        "records/s": len(records) / index_seconds,
        "p50 ms": float(np.percentile(latencies, 50)) * 1000,
        "p99 ms": float(np.percentile(latencies, 99)) * 1000,
        "report s": report_seconds,
        "pairs": len(pairs),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("ads", type=Path)
    parser.add_argument("stores", nargs="+")
    parser.add_argument("--lookups", type=int, default=300)
    parser.add_argument("--runs", type=int, default=3, help="medians over this many runs")
    parser.add_argument("--method", default="minhash", choices=["minhash", "lsh", "shingles"])
    args = parser.parse_args()
    records = list(RecordReader(args.ads, "tsv", text_fields=["Title", "Short Description"]))
    rules = MatchRules(method=args.method, threshold=0.8)
    columns = ["records/s", "p50 ms", "p99 ms", "report s", "pairs"]
    print(
        f"{len(records)} records, {PARAMS.describe()}, --method {args.method}, "
        f"threshold 0.8; medians of {args.runs} runs"
    )
    print(f"{'store':<48}" + "".join(f"{c:>12}" for c in columns))
    for url in args.stores:
        runs = [measure(url, records, args.lookups, rules) for _ in range(args.runs)]
        medians = {c: statistics.median(r[c] for r in runs) for c in columns}
        print(f"{url:<48}" + "".join(f"{medians[c]:>12,.1f}" for c in columns))


if __name__ == "__main__":
    main()
