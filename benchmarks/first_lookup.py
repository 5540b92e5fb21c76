"""The first lookup after `neardup serve` starts on a store whose threshold no command has read,
and after an index run into the store it serves.

    python benchmarks/first_lookup.py [--records 100000] [--added 10000] [--wait 0 15 60]
        [--folder DIR]

Generated people (`neardup generate N --kind people`, kept in --folder) are indexed with no
flags into a new embedded store, which is copied aside. For each --wait: the copy is put back
(so that no threshold is remembered), `neardup serve` starts as a user starts it, and after
the service answers /health and --wait seconds more, one POST /lookup of a new text is timed,
then a second. Then `neardup index` adds --added more people to the store it serves, and
--wait seconds after that run ends, one more lookup is timed. A lookup whose threshold is
automatic needs it read from every candidate pair, a report's work, the first time after the
records change; the lines `neardup serve` printed are shown with the times.
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
    parser.add_argument("--added", type=int, default=10_000)
    parser.add_argument("--wait", type=float, nargs="+", default=[0, 15, 60])
    parser.add_argument("--folder", type=Path, default=Path(".bench"))
    args = parser.parse_args()
    args.folder.mkdir(parents=True, exist_ok=True)
    every = args.folder / f"generated-people-{args.records + args.added}.tsv"
    if not every.exists():
        subprocess.run([*NEARDUP, "generate", str(args.records + args.added), "--kind", "people",
                        "--seed", "1", "-o", str(every)], check=True)  # fmt: skip
    header, *rows = every.read_text(encoding="utf-8").splitlines(keepends=True)
    records = args.folder / "first-lookup-records.tsv"
    added = args.folder / "first-lookup-added.tsv"
    records.write_text(header + "".join(rows[: args.records]), encoding="utf-8")
    added.write_text(header + "".join(rows[args.records :]), encoding="utf-8")
    kept, store = args.folder / "first-lookup-kept.db", args.folder / "first-lookup.db"
    kept.unlink(missing_ok=True)
    subprocess.run([*NEARDUP, "index", str(records), "--store", f"sqlite:///{kept}"], check=True)
    print(f"{args.records:,} people, then {args.added:,} more (no flags); a new text looked up")
    print(f"{'wait s':>7} {'first s':>8} {'second s':>9} {'after index s':>14}  neardup serve said")
    for wait in args.wait:
        for leftover in store.parent.glob(f"{store.name}*"):  # the store and its WAL
            leftover.unlink()
        shutil.copy(kept, store)
        process, base = serving(f"sqlite:///{store}", subprocess.PIPE)
        time.sleep(wait)
        first, second = timed_lookup(base), timed_lookup(base)
        subprocess.run([*NEARDUP, "index", str(added), "--store", f"sqlite:///{store}"],
                       check=True, capture_output=True)  # fmt: skip
        time.sleep(wait)
        after = timed_lookup(base)
        process.terminate()
        said = " | ".join(line.strip() for line in process.communicate(timeout=60)[1].splitlines())
        print(f"{wait:7.0f} {first:8.3f} {second:9.3f} {after:14.3f}  {said}", flush=True)


if __name__ == "__main__":
    main()
