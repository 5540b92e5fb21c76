"""Recall and precision of neardup reports on the Kijiji rental ads against the brute-force pairs.

Text = Title + " " + Short Description. The truth file lists every pair with character 5-shingle
Jaccard >= 0.5 (see shared/data/README.md).

    python benchmarks/quality/kijiji.py ADS.tsv PAIRS.tsv
    (the files are ../shared/data/kijiji_rent_rome.tsv and kijiji_pairs_jaccard50.tsv)
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

from common import reported_pairs

from neardup.fingerprint import FingerprintParams
from neardup.readers import Record
from neardup.searcher import MatchRules


def load(ads: Path, pairs: Path) -> tuple[list[Record], dict[tuple[str, str], float]]:
    with ads.open(encoding="utf-8", newline="") as f:
        rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))[1:]
    records = [Record(str(n), f"{row[0]} {row[1]}") for n, row in enumerate(rows, start=1)]
    with pairs.open(encoding="utf-8") as f:
        truth = {}
        for row in list(csv.reader(f, delimiter="\t"))[1:]:
            a, b = sorted((row[0], row[1]))
            truth[(a, b)] = float(row[2])
    return records, truth


def evaluate(records, truth, params, rules, recall_at=0.85, right_at=0.7) -> dict[str, float]:
    found, seconds = reported_pairs(records, params, rules)
    wanted = {p for p, j in truth.items() if j >= recall_at}
    right = {p for p in found if truth.get(p, 0.0) >= right_at}
    return {
        "recall": len(wanted & found) / len(wanted),
        "precision": len(right) / len(found) if found else 1.0,
        "pairs": len(found),
        "seconds": seconds,
    }


SETTINGS: dict[str, tuple[FingerprintParams | None, MatchRules | None]] = {
    "defaults": (None, None),
    "char:5, 128 hashes, J>=0.8": (
        FingerprintParams("char", 5, 128, 32),
        MatchRules(threshold=0.8, similarity="jaccard"),
    ),
}


def load_from_arguments(description: str) -> tuple[list[Record], dict[tuple[str, str], float]]:
    """The ads and the brute-force pairs named on the command line (ADS.tsv PAIRS.tsv)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("ads", type=Path)
    parser.add_argument("pairs", type=Path)
    args = parser.parse_args()
    return load(args.ads, args.pairs)


def main() -> None:
    records, truth = load_from_arguments(__doc__.splitlines()[0])
    print(f"{'setting':<40} {'recall@.85':>10} {'prec@.7':>8} {'pairs':>6} {'s':>5}")
    for name, (params, rules) in SETTINGS.items():
        r = evaluate(records, truth, params, rules)
        print(
            f"{name:<40} {r['recall']:>10.3f} {r['precision']:>8.3f} "
            f"{r['pairs']:>6} {r['seconds']:>5.1f}"
        )


if __name__ == "__main__":
    main()
