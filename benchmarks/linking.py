"""Two sources linked: `neardup link` of generated people, many of them with no counterpart.

    python benchmarks/linking.py [--records 20000 100000] [--folder .bench] [--store URL]

For each size, generates person records with their truth (`neardup generate N --kind people
--duplicates 0.2`, kept in --folder for the next run) and makes two sources of them
(:func:`two_sources`): the first holds four fifths of the people, one record each; the second
an edited copy of each of those that has one, and the other fifth, who have no counterpart in
the first. Then runs `neardup link FIRST SECOND` into a new embedded store (or ``--store URL``,
dropped first) as a user would, in its own process, its memory sampled as in scale.py, and
scores the links against the copies' originals. The table: the sources' sizes, the time, the
peak memory, the threshold the links were read at, and precision, recall and F1.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from scale import NEARDUP, emptied, generated, run_sampled


def two_sources(corpus: Path, truth: Path, folder: Path) -> tuple[Path, Path, set[tuple[str, str]]]:
    """``corpus``'s people as two TSV files in ``folder``: the first four fifths of the
    originals (records no true pair names as a copy) in the first, one edited copy of each
    that has one and the last fifth of the originals in the second; and the true links, (copy,
    original)."""
    copy_of: dict[str, str] = {}
    copies = set()
    for row in truth.read_text(encoding="utf-8").splitlines()[1:]:
        original, copy = row.split("\t")[:2]  # the generator names the original first
        copies.add(copy)
        copy_of.setdefault(original, copy)
    header, *rows = corpus.read_text(encoding="utf-8").splitlines()
    lines = {row.split("\t", 1)[0]: row for row in rows}
    originals = [i for i in lines if i not in copies]
    held = len(originals) * 4 // 5
    links = {(copy_of[i], i) for i in originals[:held] if i in copy_of}
    first, second = folder / f"{corpus.stem}.first.tsv", folder / f"{corpus.stem}.second.tsv"
    second_ids = [*sorted(copy for copy, _ in links), *originals[held:]]
    for path, ids in [(first, originals[:held]), (second, second_ids)]:
        path.write_text("\n".join([header, *(lines[i] for i in ids)]) + "\n", encoding="utf-8")
    return first, second, links


def measure(records: int, folder: Path, url: str | None) -> str:
    """One size's row: generate if needed, link the two sources, score the links."""
    corpus = folder / f"linking-people-{records}.tsv"
    options = ["--kind", "people", "--seed", "5", "--duplicates", "0.2"]
    first, second, truth_links = two_sources(corpus, generated(corpus, records, *options), folder)
    url = emptied(url, folder / f"linking-{records}.db")
    links = folder / f"linking-{records}.links.tsv"
    command = [*NEARDUP, "link", str(first), str(second), "--store", url, "-o", str(links)]
    seconds, peak, _, errors = run_sampled(command)
    said = next(line for line in errors.splitlines() if "mutual best match" in line)
    threshold = said.split("at similarity ")[1].split(" ")[0] if "at similarity" in said else "0"
    rows = [line.split("\t") for line in links.read_text(encoding="utf-8").splitlines()[1:]]
    found = {(row[0], row[1]) for row in rows}
    right = len(found & truth_links)
    precision, recall = right / max(len(found), 1), right / len(truth_links)
    f1 = 2 * right / (len(found) + len(truth_links))
    first_records, second_records = (len(p.read_text().splitlines()) - 1 for p in (first, second))
    return (
        f"| {records:,} | {first_records:,} | {second_records:,} | {len(truth_links):,} | "
        f"{seconds:.1f} | {peak:,.0f} | {threshold} | {len(found):,} | {precision:.3f} | "
        f"{recall:.3f} | {f1:.3f} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, nargs="+", default=[20_000, 100_000])
    parser.add_argument("--folder", type=Path, default=Path(".bench"))
    parser.add_argument("--store", metavar="URL", help="link into this store, dropped first")
    args = parser.parse_args()
    args.folder.mkdir(parents=True, exist_ok=True)
    print(
        "| people | first source | second source | with a counterpart | linked s | peak RSS MB "
        "| threshold | links | precision | recall | F1 |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for records in args.records:
        print(measure(records, args.folder, args.store), flush=True)
    print(f"files in {args.folder}", file=sys.stderr)


if __name__ == "__main__":
    main()
