"""Records as they arrive: `neardup index --skip-duplicates` of generated people into a new store.

    python benchmarks/arriving.py [--records 5000 30000 100000] [--folder .bench]

For each size, generates person records with their truth (`neardup generate N --kind people`,
kept in --folder for the next run), then runs `neardup index FILE --skip-duplicates` into a new
embedded store as a user would, in its own process, its memory sampled as in scale.py. The
table: time, peak memory, the threshold the run checked at, and how well the store it leaves
holds one record of each person: the records kept, the duplicates left (a true pair both of
whose records were kept), and the records removed that have no duplicate among those kept (a
person lost, or different people taken for one).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from scale import NEARDUP, run_sampled

from neardup import api
from neardup.evaluate import read_pairs
from neardup.report import Pair


def families(truth: Path) -> list[set[str]]:
    """The generator's families (an original and its copies): the groups its true pairs form."""
    pairs = [Pair(left, right, 0, 1.0, 0, "near") for left, right in read_pairs(truth)]
    return [set(group) for group in api.clusters(pairs)]


def measure(records: int, folder: Path) -> str:
    """One size's row: generate if needed, index with the check, judge what was kept."""
    corpus = folder / f"arriving-people-{records}.tsv"
    truth = corpus.with_suffix(".truth.tsv")
    if not corpus.exists():
        generate = [*NEARDUP, "generate", str(records), "--kind", "people", "-o", str(corpus)]
        subprocess.run([*generate, "--truth", str(truth)], check=True, capture_output=True)
    store = folder / f"arriving-{records}.db"
    store.unlink(missing_ok=True)
    url = f"sqlite:///{store.resolve()}"
    seconds, peak, _, errors = run_sampled(
        [*NEARDUP, "index", str(corpus), "--store", url, "--skip-duplicates"]
    )
    checked = next(line for line in errors.splitlines() if line.startswith("near-duplicates"))
    with api.opened(url) as opened:
        kept = set(opened.iter_ids())
    groups = families(truth)
    left = sum(max(0, len(group & kept) - 1) for group in groups)
    in_groups = sum(len(group) for group in groups)
    wanted = len(groups) + records - in_groups  # one record of each person
    removed = wanted - (len(kept) - left)
    threshold = checked.split("threshold ")[1].split(" ")[0]
    return (
        f"| {records:,} | {seconds:.1f} | {peak:,.0f} | {threshold} | {len(kept):,} of "
        f"{wanted:,} | {left:,} | {removed:,} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, nargs="+", default=[5_000, 30_000, 100_000])
    parser.add_argument("--folder", type=Path, default=Path(".bench"))
    args = parser.parse_args()
    args.folder.mkdir(parents=True, exist_ok=True)
    print(
        "| records | index --skip-duplicates s | peak RSS MB | threshold | kept (of one per "
        "person) | duplicates left | removed with no duplicate kept |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for records in args.records:
        print(measure(records, args.folder), flush=True)
    print(f"files in {args.folder}", file=sys.stderr)


if __name__ == "__main__":
    main()
