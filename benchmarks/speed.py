"""neardup against datasketch and rensa, side by side in one run, on documents grown from the
Kijiji ads.

    python benchmarks/speed.py ../shared/data/kijiji_rent_rome.tsv [--documents 20000] [--runs 3]

The corpus: each document splices the words of two random ads (about 77 words); about 30% are
perturbed copies of an earlier document (words dropped, two swapped, an agency footer appended).
Every side uses character 5-shingles of the normalised text and 128 hashes, on one core.

- fingerprinting: neardup's fingerprint_batch (normalise, shingle, hash, sign: everything from
  the raw text) against the peers' MinHash on the shingles, given already made: datasketch's
  MinHash.update_batch (bytes), rensa's RMinHash.update (str; rensa is MinHash in Rust);
- index + report: `neardup index` + `neardup report` (--preset documents) on the embedded store,
  through the API, against each peer's MinHash + its LSH index at threshold 0.8 (rensa: 16
  bands, as neardup), shingling included: insert every document, then query every one, in
  memory, each peer as a process of its own (benchmarks/peers.py) from the normalised texts;
- the CLI rows: the same as two `neardup` processes, as a user runs them, from a TSV file:
  with no flags at all (character 4-grams, the bands and the threshold read from the records);
  `index --shingle char:5 --num-hashes 128` and `report --threshold 0.8` (no preset: the
  defaults choose the bands and the method); then `--preset documents`.

Medians over --runs rounds, each running every side once in turn (this machine's speed drifts
within minutes); x is the median over the rounds of the peer's time over neardup's.
"""

from __future__ import annotations

import argparse
import compileall
import csv
import gc
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from datasketch import MinHash
from rensa import RMinHash
from timing import interleaved_seconds

import neardup
from neardup import api
from neardup.fingerprint import fingerprint_batch, normalize_batch
from neardup.indexer import DEFAULT_BATCH_SIZE, index_records
from neardup.readers import Record
from neardup.settings import PRESETS
from neardup.stores import open_store

FOOTER = "Per informazioni e visite contattare la nostra agenzia immobiliare senza impegno"
PRESET = PRESETS["documents"]  # char:5, 128 hashes, 16 bands of 8, lsh, Jaccard >= 0.8


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


def shingles(contents: list[str]) -> list[list[str]]:
    return [[c[i : i + 5] for i in range(max(1, len(c) - 4))] for c in contents]


# --- the peers: datasketch (pure Python + numpy) and rensa (Rust) -------------------------------


def datasketch_fingerprints(shingled: list[list[bytes]]) -> None:
    for s in shingled:
        MinHash(num_perm=128).update_batch(s)


def rensa_fingerprints(shingled: list[list[str]]) -> None:
    for s in shingled:
        RMinHash(num_perm=128, seed=1).update(s)


PEERS_SCRIPT = Path(__file__).with_name("peers.py")


def peer_process(peer: str, contents: Path) -> int:
    """The peer's whole run as a process (see peers.py); returns its candidate pairs."""
    ran = subprocess.run(
        [sys.executable, str(PEERS_SCRIPT), peer, str(contents)],
        check=True,
        capture_output=True,
        text=True,
    )
    return int(ran.stdout)


# --- neardup ------------------------------------------------------------------------------------


def neardup_fingerprints(texts: list[str]) -> None:
    for start in range(0, len(texts), DEFAULT_BATCH_SIZE):
        fingerprint_batch(texts[start : start + DEFAULT_BATCH_SIZE], PRESET.params)


def neardup_whole(texts: list[str], timings: dict[str, list[float]]) -> int:
    """`neardup index` + `neardup report` on a new embedded store, as the API runs them."""
    with tempfile.TemporaryDirectory() as folder:
        store = open_store(f"sqlite:///{Path(folder) / 'speed.db'}")
        started = time.perf_counter()
        index_records(store, [Record(str(n), t) for n, t in enumerate(texts)], PRESET.params)
        indexed = time.perf_counter()
        pairs = api.report(store, rules=PRESET.rules)
        timings["index"].append(indexed - started)
        timings["report"].append(time.perf_counter() - indexed)
        store.close()
    return len(pairs)


NEARDUP = Path(sys.executable).with_name("neardup")
# The two commands of each CLI row: index flags, then report flags.
CLI_ROWS = {
    "CLI, no flags": ([], []),
    "CLI, no preset": (["--shingle", "char:5", "--num-hashes", "128"], ["--threshold", "0.8"]),
    "CLI, documents": (["--preset", "documents"], []),
}


def neardup_cli(documents: Path, index_flags: list[str], report_flags: list[str]) -> int:
    """`neardup index` then `neardup report` as two processes on a new embedded store; returns
    the pairs written."""
    with tempfile.TemporaryDirectory() as folder:
        store = ["--store", f"sqlite:///{Path(folder) / 'cli.db'}"]
        pairs = Path(folder) / "pairs.tsv"
        for command in (
            ["index", str(documents), *store, *index_flags],
            ["report", *store, *report_flags, "-o", str(pairs)],
        ):
            subprocess.run([NEARDUP, *command], check=True, capture_output=True)
        return sum(1 for _ in pairs.open()) - 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("ads", type=Path)
    parser.add_argument("--documents", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    # An installed neardup has its modules compiled, as pip does for the peers; an editable one
    # compiles them again in every process where Python is told not to write them.
    compileall.compile_dir(Path(neardup.__file__).parent, quiet=1)
    texts = corpus(args.ads, args.documents)
    contents = normalize_batch(texts)
    neardup_fingerprints(texts[:10])  # load the compiled kernels before the clock starts
    timings: dict[str, list[float]] = {"index": [], "report": []}
    folder = tempfile.TemporaryDirectory()
    documents = Path(folder.name) / "documents.tsv"
    documents.write_text(
        "id\ttext\n" + "".join(f"{n}\t{' '.join(t.split())}\n" for n, t in enumerate(texts))
    )
    normalized = Path(folder.name) / "contents.txt"
    normalized.write_text("".join(f"{c}\n" for c in contents), encoding="utf-8")
    # The whole processes first, while this one is still small: on this machine, processes
    # started just after this one has made and freed gigabytes of objects run up to 40% slower.
    processes = interleaved_seconds(
        {
            "datasketch": lambda: peer_process("datasketch", normalized),
            "rensa": lambda: peer_process("rensa", normalized),
            **{
                label: lambda f=flags: neardup_cli(documents, *f)
                for label, flags in CLI_ROWS.items()
            },
        },
        args.runs,
    )
    peers = (processes["datasketch"], processes["rensa"])
    shingled = shingles(contents)
    as_bytes = [[x.encode() for x in s] for s in shingled]
    gc.freeze()  # ten million inputs the collector need not walk again in every row below
    fingerprinting = interleaved_seconds(
        {
            "neardup": lambda: neardup_fingerprints(texts),
            "datasketch": lambda: datasketch_fingerprints(as_bytes),
            "rensa": lambda: rensa_fingerprints(shingled),
        },
        args.runs,
    )
    whole = interleaved_seconds({"neardup": lambda: neardup_whole(texts, timings)}, args.runs)
    rows = [
        ("fingerprinting", *fingerprinting.values()),
        ("index + report", whole["neardup"], *peers),
        *((label, processes[label], *peers) for label in CLI_ROWS),
    ]
    print(
        f"{args.documents:,} documents, char 5-shingles, 128 hashes, threshold 0.8; medians of "
        f"{args.runs} rounds, each running every side once in turn; x = the median over the "
        "rounds of the peer's time / neardup's (the API row: its rounds against the peers')"
    )
    header = ["neardup s", "datasketch s", "x", "rensa s", "x", "pairs", "ds pairs", "rensa pairs"]
    print(f"{'':<16}" + "".join(f"{h:>13}" for h in header))
    for label, (ours, our_pairs), (ds, ds_pairs), (rs, rs_pairs) in rows:
        cells = [f"{statistics.median(ours):.2f}"]
        for theirs in (ds, rs):
            ratio = statistics.median(t / o for t, o in zip(theirs, ours, strict=True))
            cells += [f"{statistics.median(theirs):.2f}", f"{ratio:.1f}"]
        cells += [str(p or "") for p in (our_pairs, ds_pairs, rs_pairs)]
        print(f"{label:<16}" + "".join(f"{c:>13}" for c in cells))
    index_s, report_s = (statistics.median(timings[k]) for k in ("index", "report"))
    print(f"neardup index {index_s:.2f} s + report {report_s:.2f} s (medians)")
    folder.cleanup()


if __name__ == "__main__":
    main()
