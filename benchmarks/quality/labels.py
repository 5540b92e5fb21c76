"""The threshold a hundred judged pairs choose, against the one read from the data.

    python benchmarks/quality/labels.py [--data DIR] [--pairs 100] [--seeds 5] [--only NAME...]

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
10,000 generated people always; the public sets as public.py reads them (``--only`` keeps
those whose names hold one of the words).
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
from public import Dataset

from neardup import api


def febrl(number: int) -> Dataset:
    return Dataset(*load_febrl(number))


def f1(pairs: api.Report, data: Dataset, least: float = 0.0) -> float:
    found = data.scored({tuple(sorted((p.left_id, p.right_id))) for p in pairs
                         if p.similarity >= least - 1e-9})  # fmt: skip
    return 2 * len(found & data.truth) / (len(found) + len(data.truth))


def judge(sample: api.LabelSample, data: Dataset, count: int, path: Path) -> None:
    """The sample with the ``same`` column of its first ``count`` pairs that the truth judges
    filled in as the truth says; the rest left blank, as a person leaves those they cannot
    tell (a pair within one source of a linked set, which its truth does not judge)."""
    with path.open("w", encoding="utf-8", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(["same", "left_id", "right_id", "similarity"])
        for p in sample.pairs:
            pair = tuple(sorted((p.left_id, p.right_id)))
            same = ""
            if count and data.scored({pair}):
                same, count = ("yes" if pair in data.truth else "no"), count - 1
            writer.writerow([same, p.left_id, p.right_id, p.similarity])


def row(name: str, data: Dataset, pairs: int, seeds: int) -> str:
    with tempfile.TemporaryDirectory() as folder:
        url = f"sqlite:///{Path(folder) / 'store.db'}"
        api.index(write_records(data.records, Path(folder), data.sources), url,
                  id_field="id", text_fields=["text"])  # fmt: skip
        low = api.report(url, rules={"threshold": 0.1})
        best = max(f1(low, data, t) for t in np.arange(0.1, 1.0001, 0.01))
        auto = api.report(url, rules={"threshold": "auto"})
        judged = []
        for seed in range(1, seeds + 1):
            # Of a linked set, ten times the pairs, of which those between the sources are judged.
            drawn = pairs * (10 if data.sources else 1)
            sample = api.label_sample(url, count=drawn, seed=seed)
            labels = Path(folder) / f"judged-{seed}.csv"
            judge(sample, data, pairs, labels)
            tuned = api.tune_with_labels(labels, url)
            judged.append((f1(api.report(url), data), tuned.threshold))
    scores = sorted(score for score, _ in judged)
    thresholds = ", ".join(f"{t:g}" for _, t in judged)
    return (
        f"| {name} | {auto.threshold:g} | {f1(auto, data):.3f} | {np.median(scores):.3f} | "
        f"{scores[0]:.3f} | {scores[-1]:.3f} | {thresholds} | {best:.3f} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    public.add_arguments(parser)
    parser.add_argument("--pairs", type=int, default=100, help="pairs judged each time")
    parser.add_argument("--seeds", type=int, default=5, help="samples judged per dataset")
    parser.add_argument("--only", nargs="+", help="the datasets whose names hold these words")
    args = parser.parse_args()
    sets = [(f"Febrl {n}", lambda n=n: febrl(n)) for n in (1, 3, 4)]
    sets += [*public.datasets(args), ("10,000 generated people", people)]
    print(
        "| data | auto threshold | no flags F1 | judged: median F1 | worst | best | "
        "thresholds judged | best F1 of any threshold |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, load in sets:
        if not args.only or any(word in name for word in args.only):
            print(row(name, load(), args.pairs, args.seeds), flush=True)


if __name__ == "__main__":
    main()
