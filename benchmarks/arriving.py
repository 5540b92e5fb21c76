"""Records as they arrive: `neardup index --skip-duplicates` of generated people into a new store.

    python benchmarks/arriving.py [--records 5000 30000 100000] [--folder .bench] [--arrive-by N]
        [--store URL] [--kind people|documents]

For each size, generates person records with their truth (`neardup generate N --kind people`,
kept in --folder for the next run), then runs `neardup index FILE --skip-duplicates` into a new
embedded store as a user would, in its own process, its memory sampled as in scale.py. The
table: time, peak memory, the threshold the run checked at, the records joined with the
store by their rarer tokens (past searcher.JOIN_ENTRIES), and how well the store it leaves
holds one record of each person: the records kept, the duplicates left (a true pair both of
whose records were kept), and the records removed that have no duplicate among those kept (a
person lost, or different people taken for one). With ``--arrive-by N`` the records arrive N
at a time instead, each lot checked and added by the library's ``add(if_unique=True)``, as
the service's ``POST /records`` with ``if_unique`` does, in a process of their own, and the
table gives the median and 90th percentile of a lot's check-then-add. ``--store URL`` checks
into that store (dropped first: a Solr core or an Elasticsearch index) instead of a new
embedded one. ``--kind documents`` generates documents instead (paragraphs of words, 30% of
them edited copies: a document and its copies stand for a person).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from scale import NEARDUP, emptied, generated, run_sampled

from neardup import api
from neardup.evaluate import read_pairs
from neardup.readers import RecordReader
from neardup.report import Pair


def families(truth: Path) -> list[set[str]]:
    """The generator's families (an original and its copies): the groups its true pairs form."""
    pairs = [Pair(left, right, 0, 1.0, 0, "near") for left, right in read_pairs(truth)]
    return [set(group) for group in api.clusters(pairs)]


# How the run's summary names the records joined by their rarer tokens (after their count).
NARROWED = "checked against the stored records that share their rarer tokens alone"


def feed(corpus: str, url: str, lot: int) -> None:
    """Check and add the records of ``corpus`` ``lot`` at a time; say the last check's line,
    how long a lot took and how many records were joined by their rarer tokens."""
    records = list(RecordReader(Path(corpus)))
    took = []
    narrowed = 0
    with api.opened(url, create=True) as store:
        for start in range(0, len(records), lot):
            began = time.perf_counter()
            added = api.add(records[start : start + lot], store, if_unique=True)
            took.append(1000 * (time.perf_counter() - began))
            narrowed += added.narrowed
    print(added.checked, file=sys.stderr)
    print(f"a lot: {np.median(took):.1f} / {np.percentile(took, 90):.1f} ms", file=sys.stderr)
    print(f"{narrowed:,} {NARROWED}", file=sys.stderr)


def measure(records: int, folder: Path, lot: int | None, url: str | None, kind: str) -> str:
    """One size's row: generate if needed, index with the check, judge what was kept."""
    corpus = folder / f"arriving-{kind}-{records}.tsv"
    truth = generated(corpus, records, "--kind", kind)
    url = emptied(url, folder / f"arriving-{records}.db")
    command = [*NEARDUP, "index", str(corpus), "--store", url, "--skip-duplicates"]
    if lot:
        here = str(Path(__file__).parent)
        feeding = f"import sys; sys.path.insert(0, {here!r}); import arriving; arriving.feed"
        command = [sys.executable, "-c", f"{feeding}(*sys.argv[1:3], {lot})", str(corpus), url]
    seconds, peak, _, errors = run_sampled(command)
    checked = next(line for line in errors.splitlines() if line.startswith("near-duplicates"))
    with api.opened(url) as opened:
        kept = set(opened.iter_ids())
    groups = families(truth)
    left = sum(max(0, len(group & kept) - 1) for group in groups)
    in_groups = sum(len(group) for group in groups)
    wanted = len(groups) + records - in_groups  # one record of each person
    removed = wanted - (len(kept) - left)
    threshold = checked.split("threshold ")[1].split(" ")[0]
    arriving = f"{lot:,} at a time" if lot else "one file"
    a_lot = next((line[len("a lot: ") :] for line in errors.splitlines() if "a lot:" in line), "")
    narrowed = next((line.split(" ")[0] for line in errors.splitlines() if NARROWED in line), "0")
    return (
        f"| {records:,} | {arriving} | {seconds:.1f} | {a_lot} | {peak:,.0f} | {threshold} | "
        f"{narrowed} | {len(kept):,} of {wanted:,} | {left:,} | {removed:,} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, nargs="+", default=[5_000, 30_000, 100_000])
    parser.add_argument("--folder", type=Path, default=Path(".bench"))
    parser.add_argument(
        "--arrive-by", type=int, metavar="N", help="records checked and added N at a time"
    )
    parser.add_argument("--store", metavar="URL", help="check into this store, dropped first")
    parser.add_argument("--kind", choices=["people", "documents"], default="people")
    args = parser.parse_args()
    args.folder.mkdir(parents=True, exist_ok=True)
    print(
        "| records | arriving | checked and added s | a lot p50 / p90 | peak RSS MB | threshold "
        "| joined by their rarer tokens | kept (of one per person) | duplicates left "
        "| removed with no duplicate kept |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for records in args.records:
        print(measure(records, args.folder, args.arrive_by, args.store, args.kind), flush=True)
    print(f"files in {args.folder}", file=sys.stderr)


if __name__ == "__main__":
    main()
