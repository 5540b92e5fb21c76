"""The first lookup after `neardup serve` starts, on a store whose threshold no command has read.

    python benchmarks/first_lookup.py [--records 100000] [--wait 0 15 60] [--folder DIR]

Generated people (`neardup generate N --kind people`, kept in --folder) are indexed with no
flags into a new embedded store, which is copied aside. For each --wait: the copy is put back
(so that no threshold is remembered), `neardup serve` starts as a user starts it, and after
the service answers /health and --wait seconds more, one POST /lookup of a new text is timed,
then a second. A lookup whose threshold is automatic needs it read from every candidate pair,
a report's work, the first time; the lines `neardup serve` printed are shown with the times.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import time
from pathlib import Path

import requests
from serve import NEARDUP, serving

TEXT = "Kenneth Robles 564 Williams Road Mccallstad OK 82666"


def timed_lookup(base: str) -> float:
    started = time.perf_counter()
    answer = requests.post(f"{base}/lookup", json={"text": TEXT}, timeout=600)
    answer.raise_for_status()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--wait", type=float, nargs="+", default=[0, 15, 60])
    parser.add_argument("--folder", type=Path, default=Path(".bench"))
    args = parser.parse_args()
    args.folder.mkdir(parents=True, exist_ok=True)
    records = args.folder / f"generated-people-{args.records}.tsv"
    if not records.exists():
        subprocess.run([*NEARDUP, "generate", str(args.records), "--kind", "people",
                        "--seed", "1", "-o", str(records)], check=True)  # fmt: skip
    kept, store = args.folder / "first-lookup-kept.db", args.folder / "first-lookup.db"
    kept.unlink(missing_ok=True)
    subprocess.run([*NEARDUP, "index", str(records), "--store", f"sqlite:///{kept}"], check=True)
    print(f"{args.records:,} people, no flags; POST /lookup of a new text")
    print(f"{'wait s':>7} {'first s':>8} {'second s':>9}  neardup serve said")
    for wait in args.wait:
        for leftover in store.parent.glob(f"{store.name}*"):  # the store and its WAL
            leftover.unlink()
        shutil.copy(kept, store)
        process, base = serving(f"sqlite:///{store}", subprocess.PIPE)
        time.sleep(wait)
        first, second = timed_lookup(base), timed_lookup(base)
        process.terminate()
        said = " | ".join(line.strip() for line in process.communicate(timeout=60)[1].splitlines())
        print(f"{wait:7.0f} {first:8.2f} {second:9.3f}  {said}", flush=True)


if __name__ == "__main__":
    main()
