"""Records piped into `neardup lookup --file -` one at a time, as a program that writes a
record and reads its answer does, and the same records piped in at once.

    python benchmarks/piped.py [--records 100000] [--arrivals 300] [--folder .bench]
        [--store URL]

Generates person records (`neardup generate N --kind people`, kept in --folder for the next
run) and indexes them into a new embedded store (or ``--store URL``, dropped first). Then:

- **one at a time**: one `neardup lookup --file - --format lines` process is fed ``--arrivals``
  stored texts under new ids, each written only once the answer to the one before has been
  read; each answer's latency is from writing its record to reading its first line (every
  such text has at least its stored self for a match);
- **at once**: the whole file piped in (`cat FILE | neardup lookup --file - --format csv`)
  against the same file given by name, whole processes: a pipe that keeps neardup busy is
  read in whole batches, as a file is.
"""

from __future__ import annotations

import argparse
import select
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import numpy as np
from scale import NEARDUP, emptied, generated

from neardup.readers import RecordReader

WAIT = 60  # seconds an answer may take before the run fails


def answered_one_at_a_time(url: str, texts: list[str]) -> np.ndarray:
    """Milliseconds from writing each text to reading the first line of its answer."""
    process = subprocess.Popen(
        [*NEARDUP, "lookup", "--store", url, "--file", "-", "--format", "lines"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        bufsize=0,
    )
    assert process.stdin is not None and process.stdout is not None
    lines = _lines(process.stdout)
    took = []
    for number, text in enumerate(texts):
        began = time.perf_counter()
        process.stdin.write(f"new{number} {text}\n".encode())
        while not next(lines).startswith(f"new{number}\t"):
            pass  # the header, or the rest of the answer before
        took.append(1000 * (time.perf_counter() - began))
    process.stdin.close()
    process.wait(timeout=WAIT)
    return np.array(took)


def _lines(stream: IO[bytes]) -> Iterator[str]:
    """A pipe's lines, each waited for at most WAIT seconds."""
    pending = b""
    while True:
        while b"\n" not in pending:
            ready, _, _ = select.select([stream], [], [], WAIT)
            if not ready:
                sys.exit(f"piped.py: no answer within {WAIT} s")
            if not (arrived := stream.read(65536)):
                sys.exit("piped.py: the lookup stopped")
            pending += arrived
        line, pending = pending.split(b"\n", 1)
        yield line.decode()


def timed(command: str) -> float:
    began = time.perf_counter()
    subprocess.run(command, shell=True, check=True, capture_output=True)
    return time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--arrivals", type=int, default=300)
    parser.add_argument("--folder", type=Path, default=Path(".bench"))
    parser.add_argument("--store")
    args = parser.parse_args()
    args.folder.mkdir(parents=True, exist_ok=True)
    corpus = args.folder / f"people-{args.records}.csv"
    generated(corpus, args.records, "--kind", "people")
    url = emptied(args.store, args.folder / f"piped-{args.records}.db")
    subprocess.run(
        [*NEARDUP, "index", str(corpus), "--store", url], check=True, capture_output=True
    )
    records = list(RecordReader(corpus))
    step = max(len(records) // args.arrivals, 1)
    texts = [record.text for record in records[::step][: args.arrivals]]
    latencies = answered_one_at_a_time(url, texts)
    lookup = " ".join([*NEARDUP, "lookup", "--store", url])
    piped = timed(f"cat {corpus} | {lookup} --file - --format csv > /dev/null")
    named = timed(f"{lookup} --file {corpus} > /dev/null")
    columns = ["records stored", "arrivals", "answer p50 ms", "p90", "p99", "max"]
    print(f"| {' | '.join([*columns, 'piped at once s', 'by name s'])} |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    p50, p90, p99 = np.percentile(latencies, [50, 90, 99])
    print(
        f"| {args.records:,} | {len(latencies)} | {p50:.1f} | {p90:.1f} | {p99:.1f} | "
        f"{latencies.max():.1f} | {piped:.1f} | {named:.1f} |"
    )


if __name__ == "__main__":
    main()
