"""Stores at scale: `neardup index` + `neardup report` on a million generated records.

    python benchmarks/scale.py [--records 1000000] [--kind documents|people] [--corpus FILE]
        [--lookups 1000] [--store URL ...]

Generates the corpus with `neardup generate` (unless --corpus names one), then, for each store
(default: a SQLite file in --folder; Solr and Elasticsearch URLs are emptied first), runs the CLI
as a user would, each command in its own process: index, report. Documents are indexed and
reported with `--preset documents`; person records (`--kind people`) with no flags, and their
report is scored against the generator's true pairs. While each command runs, its resident
memory is sampled from /proc (Linux), so the table shows the peak and how memory moved while
indexing (flat means streaming). Then lookups by id, spread over the store, in one process with
the store open (after 20 warm-up lookups): p50 and p99. Every store's report is compared with
the first one's, pair for pair.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from timing import lookup_latencies_ms

from neardup import api
from neardup.searcher import Searcher
from neardup.settings import PRESETS
from neardup.stores import open_store

NEARDUP = [sys.executable, "-m", "neardup.cli"]
# What each kind of generated records is indexed and reported with.
KINDS = {"documents": ["--preset", "documents"], "people": []}


def resident_mb(pid: int, field: str) -> float | None:
    """VmRSS (now) or VmHWM (peak so far) of a process, in MB; None once it has exited (its
    status no longer shows memory)."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return None


def run_sampled(args: list[str]) -> tuple[float, float, list[float], str]:
    """Run a command; return (seconds, peak RSS MB, RSS samples MB every 0.5 s, what it wrote
    to stderr)."""
    started = time.perf_counter()
    process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    samples, peak = [], 0.0
    while process.poll() is None:
        try:
            now, most = resident_mb(process.pid, "VmRSS"), resident_mb(process.pid, "VmHWM")
        except (FileNotFoundError, ProcessLookupError):
            break
        if now is None or most is None:
            break
        samples.append(now)
        peak = max(peak, most)
        time.sleep(0.5)
    _, errors = process.communicate()
    if process.returncode:
        sys.exit(f"{' '.join(args[2:])} failed: {errors.strip()}")
    return time.perf_counter() - started, peak, samples, errors


def generated(corpus: Path, records: int, *options: str) -> Path:
    """``corpus``: ``records`` made by `neardup generate` with ``options``, unless it exists
    (kept for the next run); returns the truth file beside it."""
    truth = corpus.with_suffix(".truth.tsv")
    if not corpus.exists():
        generate = [*NEARDUP, "generate", str(records), *options, "-o", str(corpus)]
        subprocess.run([*generate, "--truth", str(truth)], check=True, capture_output=True)
    return truth


def emptied(url: str | None, file: Path) -> str:
    """The store a run measures: ``url`` dropped first (a Solr core, an Elasticsearch index),
    else a new embedded store at ``file``."""
    if url is None:
        file.unlink(missing_ok=True)
        return f"sqlite:///{file.resolve()}"
    with api.opened(url, create=True) as dropped:
        dropped.drop()
    return url


def lookup_latencies(url: str, count: int) -> np.ndarray:
    with api.opened(url) as store:
        searcher = Searcher(store, store.params, PRESETS["documents"].rules)
        return lookup_latencies_ms(searcher, list(store.iter_ids()), count)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--corpus", type=Path, help="a `neardup generate` file to use")
    parser.add_argument("--lookups", type=int, default=1000)
    parser.add_argument(
        "--folder",
        type=Path,
        default=Path(".bench"),
        help="where the generated corpus (kept for the next run) and the store go "
        "(default: .bench, which `make clean` removes; 1.7 GB at a million records)",
    )
    parser.add_argument("--store", action="append", dest="stores", help="default: SQLite")
    parser.add_argument(
        "--kind",
        choices=KINDS,
        default="documents",
        help="documents, indexed and reported with --preset documents; or person records, "
        "with no flags, and scored against the generator's truth (default: documents)",
    )
    args = parser.parse_args()
    folder = args.folder
    folder.mkdir(parents=True, exist_ok=True)
    corpus = args.corpus or folder / f"generated-{args.kind}-{args.records}.tsv"
    truth = corpus.with_suffix(".truth.tsv")
    if not corpus.exists():
        print(f"generating {args.records:,} records into {corpus} ...", file=sys.stderr)
        generate = [*NEARDUP, "generate", str(args.records), "-o", str(corpus)]
        subprocess.run([*generate, "--kind", args.kind, "--truth", str(truth)], check=True)
    stores = args.stores or [f"sqlite:///{folder.resolve() / 'scale.db'}"]
    flags = KINDS[args.kind]
    results = [
        measure(url, corpus, folder / f"pairs-{n}.tsv", args.lookups, flags, truth)
        for n, url in enumerate(stores)
    ]
    text_mb = corpus.stat().st_size / 2**20
    shown = " ".join(flags) or "no flags"
    print(f"{results[0]['records']:,} {args.kind} ({text_mb:,.0f} MB of text), {shown}")
    labels = [label for label in results[0] if label != "records"]
    print(f"{'':<36}" + "".join(f"{url.split(':')[0]:>16}" for url in stores))
    for label in labels:
        print(f"{label:<36}" + "".join(f"{r[label]:>16}" for r in results))
    print(f"cpu count {os.cpu_count()}; files in {folder}", file=sys.stderr)


def measure(
    url: str, corpus: Path, report_file: Path, lookups: int, flags: list[str], truth: Path
) -> dict[str, object]:
    """Index the corpus into an emptied store, report, look up; the table's cells."""
    open_store(url).drop()
    index_s, index_peak, samples, _ = run_sampled(
        [*NEARDUP, "index", str(corpus), "--store", url, *flags]
    )
    report_s, report_peak, _, _ = run_sampled(
        [*NEARDUP, "report", "--store", url, *flags, "-o", str(report_file)]
    )
    pairs = report_file.read_bytes()
    first = report_file.with_name("pairs-0.tsv")
    latencies = lookup_latencies(url, lookups)
    records = api.stats(url)["documents"]
    quarters = [samples[min(len(samples) - 1, len(samples) * q // 4)] for q in (1, 2, 3, 4)]
    return {
        "records": records,
        "index s": f"{index_s:.1f}",
        "index records/s": f"{records / index_s:,.0f}",
        "report s": f"{report_s:.1f}",
        "index + report s": f"{index_s + report_s:.1f}",
        "pairs": f"{len(pairs.splitlines()) - 1:,}",
        "same pairs as the first": "yes" if pairs == first.read_bytes() else "NO",
        "F1 against the truth": f1_against(report_file, truth),
        "peak RSS index MB": f"{index_peak:,.0f}",
        "peak RSS report MB": f"{report_peak:,.0f}",
        "RSS indexing 1/4..4/4 MB": "/".join(f"{q:,.0f}" for q in quarters),
        "store MB": store_mb(url),
        "lookup p50 ms": f"{np.percentile(latencies, 50):.2f}",
        "lookup p99 ms": f"{np.percentile(latencies, 99):.2f}",
    }


def f1_against(report_file: Path, truth: Path) -> str:
    """The report's F1 against the generator's true pairs (each pair in either order)."""
    if not truth.exists():
        return "-"
    return f"{api.evaluate(truth, report_file=report_file).overall.f1:.3f}"


def store_mb(url: str) -> str:
    """The SQLite file's size (an engine's index size is the engine's to tell)."""
    if not url.startswith("sqlite:///"):
        return "-"
    path = Path(url.removeprefix("sqlite:///"))
    return f"{sum(f.stat().st_size for f in path.parent.glob(path.name + '*')) / 2**20:,.0f}"


if __name__ == "__main__":
    main()
