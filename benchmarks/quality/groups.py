"""Groups that chain and groups that don't: pairwise precision and recall of report groups.

    python benchmarks/quality/groups.py --kijiji ADS.tsv PAIRS.tsv

Each dataset is indexed into a new embedded store and reported with the settings its rows of the
quality table use (the defaults for Febrl 1, 3 and 4; the defaults and --preset documents for
the Kijiji ads).
The pairs are grouped both ways (`--grouping components`, `--grouping center`), and every pair of
records inside one group counts as reported: that is what keeping one record per group acts on.
Febrl's true pairs are its known duplicates; on Kijiji a pair is wanted when its brute-force
Jaccard is >= 0.85 and right when it is >= 0.7, as in the quality table.
"""

from __future__ import annotations

import argparse
from itertools import combinations
from pathlib import Path

from common import report
from febrl import load as load_febrl
from kijiji import load as load_kijiji

from neardup.report import GROUPINGS, clusters


def grouped_pairs(groups: list[list[str]]) -> set[tuple[str, str]]:
    return {tuple(sorted(p)) for g in groups for p in combinations(g, 2)}


def scores(found: set, wanted: set, right: set) -> tuple[float, float, float]:
    precision = len(found & right) / len(found) if found else 1.0
    recall = len(found & wanted) / len(wanted)
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kijiji", nargs=2, type=Path, metavar=("ADS", "PAIRS"))
    parser.add_argument("--febrl", nargs="*", type=int, default=[1, 3, 4])
    args = parser.parse_args()
    datasets = []
    for number in args.febrl:
        records, truth = load_febrl(number)
        datasets.append((f"Febrl {number}", records, truth, truth, {}))
    if args.kijiji:
        records, similarities = load_kijiji(*args.kijiji)
        wanted = {p for p, j in similarities.items() if j >= 0.85}
        right = {p for p, j in similarities.items() if j >= 0.7}
        datasets.append(("Kijiji, defaults", records, wanted, right, {}))
        documents = {"preset": "documents"}
        datasets.append(("Kijiji, --preset documents", records, wanted, right, documents))
    print("| dataset | grouping | groups | largest | precision | recall | F1 |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for name, records, wanted, right, options in datasets:
        pairs, _ = report(records, **options)
        for grouping in GROUPINGS:
            groups = clusters(pairs, grouping)
            precision, recall, f1 = scores(grouped_pairs(groups), wanted, right)
            print(
                f"| {name} | {grouping} | {len(groups):,} | {len(groups[0]) if groups else 0} | "
                f"{precision:.3f} | {recall:.3f} | {f1:.3f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
