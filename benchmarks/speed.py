"""neardup against datasketch, side by side in one run, on documents grown from the Kijiji ads.

    python benchmarks/speed.py ../shared/data/kijiji_rent_rome.tsv [--documents 20000] [--runs 3]

The corpus: each document splices the words of two random ads (about 77 words); about 30% are
perturbed copies of an earlier document (words dropped, two swapped, an agency footer appended).
Both sides use character 5-shingles of the normalised text and 128 hashes.

- fingerprinting: neardup's fingerprint_batch (normalise, shingle, hash, sign) against
  datasketch's MinHash.update_batch on the same shingles (given already made), single core;
- whole process: `neardup index` + `neardup report` on the embedded store, threshold 0.8, against
  datasketch MinHash + MinHashLSH(threshold 0.8): insert every document, then query every one.

Medians over --runs; the ratio is datasketch's time over neardup's.
"""

from __future__ import annotations

import argparse
import csv
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from datasketch import MinHash, MinHashLSH

from neardup import api
from neardup.fingerprint import FingerprintParams, fingerprint_batch, normalize_batch
from neardup.indexer import index_records
from neardup.presets import PRESETS
from neardup.readers import Record
from neardup.searcher import MatchRules
from neardup.stores import open_store

FOOTER = "Per informazioni e visite contattare la nostra agenzia immobiliare senza impegno"
PARAMS = FingerprintParams("char", 5, 128, 32)


def corpus(ads: Path, count: int, seed: int = 1) -> list[str]:
    with ads.open(encoding="utf-8", newline="") as f:
        rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))[1:]
    words = [f"{r[0]} {r[1]}".split() for r in rows]
    rng = random.Random(seed)
    documents: list[str] = []
    for _ in range(count):
        if documents and rng.random() < 0.3:
            copy = rng.choice(documents).split()
            for _ in range(rng.randint(1, 3)):
                copy.pop(rng.randrange(len(copy)))
            i = rng.randrange(len(copy) - 1)
            copy[i], copy[i + 1] = copy[i + 1], copy[i]
            if rng.random() < 0.5:
                copy += FOOTER.split()
            documents.append(" ".join(copy))
        else:
            a, b = rng.sample(words, 2)
            half = 77 // 2
            start_a = rng.randrange(max(1, len(a) - half))
            start_b = rng.randrange(max(1, len(b) - half))
            documents.append(" ".join(a[start_a : start_a + half] + b[start_b : start_b + half]))
    return documents


def shingles(contents: list[str]) -> list[list[bytes]]:
    return [[c[i : i + 5].encode() for i in range(max(1, len(c) - 4))] for c in contents]


def datasketch_fingerprints(shingled: list[list[bytes]]) -> None:
    for s in shingled:
        MinHash(num_perm=128).update_batch(s)


def datasketch_whole(contents: list[str]) -> int:
    lsh = MinHashLSH(threshold=0.8, num_perm=128)
    sketches = []
    for n, s in enumerate(shingles(contents)):
        m = MinHash(num_perm=128)
        m.update_batch(s)
        lsh.insert(str(n), m)
        sketches.append(m)
    return sum(len(lsh.query(m)) - 1 for m in sketches) // 2


def neardup_whole(texts: list[str], preset: str | None) -> int:
    with tempfile.TemporaryDirectory() as folder:
        url = f"sqlite:///{Path(folder) / 'speed.db'}"
        store = open_store(url)
        chosen = PRESETS[preset] if preset else None
        index_records(
            store,
            [Record(str(n), t) for n, t in enumerate(texts)],
            chosen.params if chosen else PARAMS,
        )
        rules = chosen.rules if chosen else MatchRules(threshold=0.8)
        pairs = api.report(store, rules=rules)
        store.close()
    return len(pairs)


def median_seconds(work: Callable[[], object], runs: int) -> tuple[float, object]:
    times, result = [], None
    for _ in range(runs):
        started = time.perf_counter()
        result = work()
        times.append(time.perf_counter() - started)
    return statistics.median(times), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("ads", type=Path)
    parser.add_argument("--documents", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--with-minhash", action="store_true", help="also the default method")
    args = parser.parse_args()
    texts = corpus(args.ads, args.documents)
    shingled = shingles(normalize_batch(texts))
    rows = []
    ours, _ = median_seconds(lambda: fingerprint_batch(texts, PARAMS), args.runs)
    theirs, _ = median_seconds(lambda: datasketch_fingerprints(shingled), args.runs)
    rows.append(("fingerprinting", ours, theirs, "", ""))
    theirs, their_pairs = median_seconds(
        lambda: datasketch_whole(normalize_batch(texts)), args.runs
    )
    whole = [("index + report, --preset documents", "documents")]
    if args.with_minhash:  # slow: tens of minutes at 20,000 documents
        whole.append(("index + report, minhash", None))
    for label, preset in whole:
        ours, our_pairs = median_seconds(
            lambda preset=preset: neardup_whole(texts, preset), args.runs
        )
        rows.append((label, ours, theirs, our_pairs, their_pairs))
    print(f"{args.documents:,} documents, char 5-shingles, 128 hashes; medians of {args.runs} runs")
    print(f"{'':<38}{'neardup s':>10}{'datasketch s':>14}{'ratio':>8}{'pairs':>9}{'ds pairs':>10}")
    for label, ours, theirs, pairs, their_pairs in rows:
        ratio = f"{theirs / ours:>7.1f}x"
        print(f"{label:<38}{ours:>10.2f}{theirs:>14.2f}{ratio}{pairs!s:>9}{their_pairs!s:>10}")


if __name__ == "__main__":
    main()
