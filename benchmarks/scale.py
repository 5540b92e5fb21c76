"""The embedded store at scale: `neardup index` + `neardup report` on a million generated records.

    python benchmarks/scale.py [--records 1000000] [--corpus FILE] [--lookups 1000]

Generates the corpus with `neardup generate` (unless --corpus names one), then runs the CLI as a
user would, each command in its own process, `--preset documents`: index, report. While each runs,
its resident memory is sampled from /proc (Linux), so the table shows the peak and how memory
moved while indexing (flat means streaming). Then lookups by id, spread over the store, in one
process with the store open (after 20 warm-up lookups): p50 and p99. Also the store's file size.
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

NEARDUP = [sys.executable, "-m", "neardup.cli"]


def resident_mb(pid: int, field: str) -> float:
    """VmRSS (now) or VmHWM (peak so far) of a process, in MB."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return 0.0


def run_sampled(args: list[str]) -> tuple[float, float, list[float]]:
    """Run a command; return (seconds, peak RSS MB, RSS samples MB every 0.5 s)."""
    started = time.perf_counter()
    process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    samples, peak = [], 0.0
    while process.poll() is None:
        try:
            samples.append(resident_mb(process.pid, "VmRSS"))
            peak = max(peak, resident_mb(process.pid, "VmHWM"))
        except (FileNotFoundError, ProcessLookupError):
            break
        time.sleep(0.5)
    _, errors = process.communicate()
    if process.returncode:
        sys.exit(f"{' '.join(args[2:])} failed: {errors.strip()}")
    return time.perf_counter() - started, peak, samples


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
    args = parser.parse_args()
    folder = args.folder
    folder.mkdir(parents=True, exist_ok=True)
    corpus = args.corpus or folder / f"generated-{args.records}.tsv"
    if not corpus.exists():
        print(f"generating {args.records:,} records into {corpus} ...", file=sys.stderr)
        subprocess.run([*NEARDUP, "generate", str(args.records), "-o", str(corpus)], check=True)
    store = folder / "scale.db"
    for leftover in folder.glob("scale.db*"):
        leftover.unlink()
    url = f"sqlite:///{store}"
    index_s, index_peak, samples = run_sampled(
        [*NEARDUP, "index", str(corpus), "--store", url, "--preset", "documents"]
    )
    report_file = folder / "pairs.tsv"
    report_s, report_peak, _ = run_sampled(
        [*NEARDUP, "report", "--store", url, "--preset", "documents", "-o", str(report_file)]
    )
    pairs = sum(1 for _ in report_file.open(encoding="utf-8")) - 1
    latencies = lookup_latencies(url, args.lookups)
    size_mb = sum(f.stat().st_size for f in folder.glob("scale.db*")) / 2**20
    records = api.stats(url)["documents"]
    quarters = [samples[min(len(samples) - 1, len(samples) * q // 4)] for q in (1, 2, 3, 4)]
    text_mb = corpus.stat().st_size / 2**20
    print(f"{records:,} records ({text_mb:,.0f} MB of text), --preset documents")
    print(f"{'':<36}{'value':>24}")
    rows = [
        ("index s", f"{index_s:.1f}"),
        ("index records/s", f"{records / index_s:,.0f}"),
        ("report s", f"{report_s:.1f}"),
        ("index + report s", f"{index_s + report_s:.1f}"),
        ("pairs", f"{pairs:,}"),
        ("peak RSS index MB", f"{index_peak:,.0f}"),
        ("peak RSS report MB", f"{report_peak:,.0f}"),
        ("RSS while indexing, at 1/4..4/4 MB", " / ".join(f"{q:,.0f}" for q in quarters)),
        ("store file MB", f"{size_mb:,.0f}"),
        ("lookup p50 ms", f"{np.percentile(latencies, 50):.2f}"),
        ("lookup p99 ms", f"{np.percentile(latencies, 99):.2f}"),
    ]
    for label, value in rows:
        print(f"{label:<36}{value:>24}")
    print(f"cpu count {os.cpu_count()}; files in {folder}", file=sys.stderr)


if __name__ == "__main__":
    main()
