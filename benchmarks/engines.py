"""Indexing rate, lookup latency and report time of each store, on the same records, in one run;
and, for Solr and Elasticsearch, the engine's own bulk rate for the very same documents.

    python benchmarks/engines.py RECORDS STORE_URL... [--limit N] [--preset documents]
        [--method signature|bands|shingles] [--lookups 300] [--runs 3] [--strategy auto|lookups]
        [--text-field NAME ...]

RECORDS is a record file, e.g. from `neardup generate 100000` (id, text), or the Kijiji ads with
`--text-field Title --text-field "Short Description"`. Each store is emptied first. Lookups are by
id, for ids spread over the store, after 20 warm-up lookups; a lookup's latency includes
fingerprinting, the candidate query, fetching and verifying the candidates. The raw bulk rate
sends the documents neardup would send (built and serialised before the clock starts) straight to
the engine's bulk endpoint, one request per 1,000 documents, then commits: the most any client
can get from that engine on this machine, one connection. Start servers with `make solr` and
`make elasticsearch`.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time
from itertools import islice
from pathlib import Path

import numpy as np
from timing import lookup_latencies_ms

from neardup import api
from neardup.fingerprint import TOKEN_FIELDS, FingerprintParams, fingerprint_batch
from neardup.indexer import index_records
from neardup.readers import Record, RecordReader
from neardup.searcher import MatchRules, Searcher
from neardup.settings import PRESETS
from neardup.stores import Document, Store, open_store
from neardup.stores.elasticsearch import ElasticsearchStore
from neardup.stores.schema import engine_document, field_names
from neardup.stores.solr import SolrStore

PARAMS = FingerprintParams("char", 5, 128, 32)
BATCH = 1000


def fresh_store(url: str) -> Store:
    """A new, empty store at ``url``: the SQLite file, Solr core or Elasticsearch index is
    dropped first, whatever parameters it had."""
    open_store(url).drop()
    return open_store(url)


def raw_bulk_rate(url: str, records: list[Record], params: FingerprintParams) -> float | None:
    """Records/s of the engine's own bulk endpoint for neardup's documents; None for SQLite."""
    store = fresh_store(url.replace("/bench", "/bench_raw") if "/bench" in url else url + "_raw")
    if not isinstance(store, SolrStore | ElasticsearchStore):
        store.close()
        return None
    chosen = store.ensure_params(params)
    names = field_names(store.settings)
    bodies = []
    for start in range(0, len(records), BATCH):
        batch = records[start : start + BATCH]
        fps = fingerprint_batch([r.text for r in batch], chosen)
        docs = [
            engine_document(Document(r.id, fp, chosen.fields), names)
            for r, fp in zip(batch, fps, strict=True)
        ]
        if isinstance(store, SolrStore):
            bodies.append(json.dumps(docs).encode())
        else:
            lines = []
            for doc in docs:
                lines.append(json.dumps({"index": {"_index": store.index, "_id": doc["id"]}}))
                lines.append(json.dumps(doc))
            bodies.append(("\n".join(lines) + "\n").encode())
    started = time.perf_counter()
    for body in bodies:
        if isinstance(store, SolrStore):  # through the store's own session (errors raise)
            store.session.post(
                f"{store.base}/{store.name}/update",
                data=body,
                headers={"Content-Type": "application/json"},
                timeout=120,
            )
        else:
            answer = store.es.bulk(operations=body)
            assert not answer["errors"], "the raw bulk load was refused"
    store.flush()
    seconds = time.perf_counter() - started
    store.close()
    return len(records) / seconds


def measure(
    url: str,
    records: list[Record],
    params: FingerprintParams,
    rules: MatchRules,
    lookups: int,
    strategy: str,
) -> dict[str, float]:
    store = fresh_store(url)
    started = time.perf_counter()
    index_records(store, records, params, batch_size=BATCH)
    index_seconds = time.perf_counter() - started
    latencies = lookup_latencies_ms(
        Searcher(store, store.params, rules), [r.id for r in records], lookups
    )
    started = time.perf_counter()
    pairs = api.report(store, rules=rules, strategy=strategy)  # type: ignore[arg-type]
    report_seconds = time.perf_counter() - started
    store.close()
    return {
        "records/s": len(records) / index_seconds,
        "p50 ms": float(np.percentile(latencies, 50)),
        "p99 ms": float(np.percentile(latencies, 99)),
        "report s": report_seconds,
        "pairs": len(pairs),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("records", type=Path)
    parser.add_argument("stores", nargs="+")
    parser.add_argument("--limit", type=int, help="the first N records only")
    parser.add_argument("--text-field", action="append", default=[], dest="text_fields")
    parser.add_argument("--preset", choices=sorted(PRESETS))
    parser.add_argument("--method", default="signature", choices=list(TOKEN_FIELDS))
    parser.add_argument("--lookups", type=int, default=300)
    parser.add_argument("--runs", type=int, default=3, help="medians over this many runs")
    parser.add_argument("--strategy", default="auto", choices=["auto", "join", "buckets"])
    args = parser.parse_args()
    reader = RecordReader(args.records, text_fields=args.text_fields)
    records = list(islice(reader, args.limit))
    if args.preset:
        params, rules = PRESETS[args.preset].params, PRESETS[args.preset].rules
        setting = f"--preset {args.preset}"
    else:
        params, rules = PARAMS, MatchRules(method=args.method, threshold=0.8)
        setting = f"{PARAMS.describe()}, --method {args.method}, threshold 0.8"
    columns = ["records/s", "raw bulk/s", "p50 ms", "p99 ms", "report s", "pairs"]
    print(
        f"{len(records):,} records, {setting}, report strategy {args.strategy}; "
        f"medians of {args.runs} runs"
    )
    print(f"{'store':<48}" + "".join(f"{c:>12}" for c in columns))
    for url in args.stores:
        runs = []
        for _ in range(args.runs):
            result = measure(url, records, params, rules, args.lookups, args.strategy)
            result["raw bulk/s"] = raw_bulk_rate(url, records, params) or float("nan")
            runs.append(result)
        medians = {c: statistics.median(r[c] for r in runs) for c in columns}
        cells = ("-" if math.isnan(medians[c]) else f"{medians[c]:,.1f}" for c in columns)
        print(f"{url:<48}" + "".join(f"{cell:>12}" for cell in cells))


if __name__ == "__main__":
    main()
