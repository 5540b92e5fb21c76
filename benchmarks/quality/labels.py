"""The threshold a hundred judged pairs choose, against the one read from the data.

    python benchmarks/quality/labels.py [--data DIR] [--pairs 100] [--seeds 5] [--only NAME...]
        [--kijiji ADS.tsv PAIRS.tsv] [--people 10000] [--best-from 0.1]

Each dataset is indexed into a new embedded store with no flags, as a user does. Then, for each
seed, `neardup tune --label-sample` draws ``--pairs`` pairs (`api.label_sample`), a person
judges them (here the truth: a pair is the same record when the truth holds it), `neardup tune
--labels` chooses the threshold from them (`api.tune_with_labels`), and the report that
follows is scored. The table gives F1 with no flags (the threshold read from the data), the
median, worst and best of the judged thresholds' F1 over the seeds, and the best F1 of any
threshold (to the hundredth, picked with the truth, over the candidates of `report
--threshold 0.1`). Linked sets are scored on the pairs between their two sources, as their
truth is: ten times the pairs are drawn, and the first ``--pairs`` between the sources are
judged, the rest left blank, as a person leaves those they cannot tell. Febrl 1, 3, 4 and
``--people`` generated people (10,000) always; the public sets as public.py reads them
(``--only`` keeps those whose names hold one of the words). The Kijiji ads with ``--kijiji``:
a pair of ads is the same at character 5-gram Jaccard 0.85 or more, as their recall counts it,
and a pair from 0.7 to 0.85 is left blank and scored neither way, as their precision counts it
right. ``--best-from`` is the least threshold tried for the best F1 (a report at 0.1 of a
hundred thousand people lists millions of pairs).
"""

from __future__ import annotations

import argparse
import csv
import tempfile
from pathlib import Path

import numpy as np
import public
from common import write_records
from febrl import load as load_febrl
from few_duplicates import people
from kijiji import load as load_kijiji
from public import Dataset

from neardup import api

Unsure = set[tuple[str, str]]  # pairs a person leaves blank, scored neither way


def febrl(number: int) -> Dataset:
    return Dataset(*load_febrl(number))


def kijiji(ads: Path, pairs: Path) -> tuple[Dataset, Unsure]:
    records, jaccard = load_kijiji(ads, pairs)
    same = {pair for pair, j in jaccard.items() if j >= 0.85}
    return Dataset(records, same), {pair for pair, j in jaccard.items() if 0.7 <= j < 0.85}


def f1(pairs: api.Report, data: Dataset, unsure: Unsure, least: float = 0.0) -> float:
    found = data.scored({tuple(sorted((p.left_id, p.right_id))) for p in pairs
                         if p.similarity >= least - 1e-9}) - unsure  # fmt: skip
    return 2 * len(found & data.truth) / (len(found) + len(data.truth))


def judge(sample: api.LabelSample, data: Dataset, unsure: Unsure, count: int, path: Path) -> None:
    """The sample with the ``same`` column of its first ``count`` pairs that the truth judges
    filled in as the truth says; the rest left blank, as a person leaves those they cannot
    tell (a pair within one source of a linked set, which its truth does not judge, or an
    ``unsure`` one)."""
    with path.open("w", encoding="utf-8", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(["same", "left_id", "right_id", "similarity"])
        for p in sample.pairs:
            pair = tuple(sorted((p.left_id, p.right_id)))
            same = ""
            if count and data.scored({pair}) and pair not in unsure:
                same, count = ("yes" if pair in data.truth else "no"), count - 1
            writer.writerow([same, p.left_id, p.right_id, p.similarity])


def row(name: str, data: Dataset, unsure: Unsure, args: argparse.Namespace) -> str:
    pairs, seeds = args.pairs, args.seeds
    with tempfile.TemporaryDirectory() as folder:
        url = f"sqlite:///{Path(folder) / 'store.db'}"
        api.index(write_records(data.records, Path(folder), data.sources), url,
                  id_field="id", text_fields=["text"])  # fmt: skip
        low = api.report(url, rules={"threshold": args.best_from})
        best = max(f1(low, data, unsure, t) for t in np.arange(args.best_from, 1.0001, 0.01))
        auto = api.report(url, rules={"threshold": "auto"})
        judged = []
        for seed in range(1, seeds + 1):
            # Of a linked set, ten times the pairs, of which those between the sources are judged.
            drawn = pairs * (10 if data.sources else 1)
            sample = api.label_sample(url, count=drawn, seed=seed)
            labels = Path(folder) / f"judged-{seed}.csv"
            judge(sample, data, unsure, pairs, labels)
            tuned = api.tune_with_labels(labels, url)
            judged.append((f1(api.report(url), data, unsure), tuned.threshold))
    scores = sorted(score for score, _ in judged)
    thresholds = ", ".join(f"{t:g}" for _, t in judged)
    return (
        f"| {name} | {auto.threshold:g} | {f1(auto, data, unsure):.3f} | {np.median(scores):.3f} | "
        f"{scores[0]:.3f} | {scores[-1]:.3f} | {thresholds} | {best:.3f} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    public.add_arguments(parser)
    parser.add_argument("--pairs", type=int, default=100, help="pairs judged each time")
    parser.add_argument("--seeds", type=int, default=5, help="samples judged per dataset")
    parser.add_argument("--only", nargs="+", help="the datasets whose names hold these words")
    parser.add_argument("--kijiji", type=Path, nargs=2, metavar=("ADS", "PAIRS"))
    parser.add_argument("--people", type=int, default=10_000, help="generated people")
    parser.add_argument("--best-from", type=float, default=0.1, help="least threshold tried")
    args = parser.parse_args()
    sets = [(f"Febrl {n}", lambda n=n: (febrl(n), set())) for n in (1, 3, 4)]
    sets += [(name, lambda load=load: (load(), set())) for name, load in public.datasets(args)]
    sets.append((f"{args.people:,} generated people", lambda: (people(args.people), set())))
    if args.kijiji:
        sets.append(("Kijiji", lambda: kijiji(*args.kijiji)))
    print(
        "| data | auto threshold | no flags F1 | judged: median F1 | worst | best | "
        "thresholds judged | best F1 of any threshold |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, load in sets:
        if not args.only or any(word in name for word in args.only):
            print(row(name, *load(), args), flush=True)


if __name__ == "__main__":
    main()
