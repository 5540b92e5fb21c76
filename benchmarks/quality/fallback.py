"""The fixed threshold of a store too small to read one from: the one that loses least on its
worst dataset.

    python benchmarks/quality/fallback.py [--data DIR] [--kijiji ADS PAIRS] [--records 40]
        [--stores 30]

A store of fewer than 46 records holds fewer than 1,000 pairs, too few to read an automatic
threshold from (`tuning.MIN_TAIL_PAIRS`), and a store checked as records arrive has measured
too few until its checks hold as many; both use `settings.FALLBACK_THRESHOLD`. That value is
measured here, in stores of that size: for each dataset, ``--stores`` small stores of
``--records`` records are drawn, half of them records of true groups (two of a group, a
linkage set's two from its two sources) and half records of other groups (one each), each
indexed into a new embedded store as a user does and reported with every candidate pair and
its similarity (``--threshold 0``). Each threshold's F1 is counted over the pairs of all the
dataset's stores; the table gives each dataset's best threshold, its F1, and how far behind it
each fixed threshold falls, and the last row the threshold whose largest shortfall over every
dataset is the smallest.

Febrl 1, 3, 4 and 10,000 generated people always; the public sets as public.py reads them; the
Kijiji ads with --kijiji (a pair of ads is true at character 5-gram Jaccard >= 0.85, and a
listed pair is right at >= 0.7, as in run.py).
"""

from __future__ import annotations

import argparse
import random
from collections.abc import Callable
from pathlib import Path

import numpy as np
import public
from common import report
from febrl import load as load_febrl
from few_duplicates import people, true_groups
from kijiji import load as load_kijiji
from public import Dataset

from neardup.readers import Record
from neardup.settings import FALLBACK_THRESHOLD

# The thresholds compared: a report's similarities are read to the hundredth.
THRESHOLDS = np.round(np.arange(0.20, 0.96, 0.01), 2)


class Judged:
    """The pairs of a dataset's small stores, each with its similarity, whether the truth
    holds it (counted for recall) and whether it is right (counted for precision)."""

    def __init__(self) -> None:
        self.similarity: list[float] = []
        self.true: list[bool] = []
        self.right: list[bool] = []
        self.wanted = 0  # true pairs in all the stores

    def f1(self) -> np.ndarray:
        """F1 at each of THRESHOLDS: a pair is listed when its similarity is at or above it."""
        similarity = np.array(self.similarity)
        listed = similarity[None, :] >= THRESHOLDS[:, None] - 1e-9
        found = (listed & np.array(self.true)[None, :]).sum(axis=1)
        right = (listed & np.array(self.right)[None, :]).sum(axis=1)
        reported = listed.sum(axis=1)
        precision = np.divide(right, reported, out=np.ones(len(THRESHOLDS)), where=reported > 0)
        recall = found / max(self.wanted, 1)
        total = precision + recall
        return np.divide(2 * precision * recall, total, out=np.zeros_like(total), where=total > 0)


def small_store(
    dataset: Dataset, groups: list[list[Record]], size: int, share: float, draw: random.Random
) -> list[Record]:
    """``size`` records: ``share`` of them two of a true group each (of two sources, for a linkage
    set), the rest one of other groups each."""
    several = [g for g in groups if len(g) > 1]
    if dataset.sources:
        several = [g for g in several if len({dataset.sources[r.id] for r in g}) > 1]
    chosen = draw.sample(several, min(round(size * share / 2), len(several)))
    records = []
    for group in chosen:
        first = draw.choice(group)
        others = [r for r in group if r is not first]
        if dataset.sources:
            others = [r for r in others if dataset.sources[r.id] != dataset.sources[first.id]]
        records += [first, draw.choice(others)]
    taken = {id(g) for g in chosen}
    rest = [g for g in groups if id(g) not in taken]
    records += [draw.choice(g) for g in draw.sample(rest, min(size - len(records), len(rest)))]
    return records


def judge(
    dataset: Dataset,
    size: int,
    share: float,
    stores: int,
    seed: int,
    is_right: Callable[[tuple[str, str]], bool],
) -> Judged:
    groups = true_groups(dataset.records, dataset.truth)
    draw = random.Random(seed)
    judged = Judged()
    for _ in range(stores):
        records = small_store(dataset, groups, size, share, draw)
        held = {r.id for r in records}
        wanted = dataset.scored({(a, b) for a, b in dataset.truth if a in held and b in held})
        judged.wanted += len(wanted)
        pairs, _ = report(records, rules={"threshold": 0.0}, sources=dataset.sources)
        for pair in pairs:
            key = (min(pair.left_id, pair.right_id), max(pair.left_id, pair.right_id))
            if not dataset.scored({key}):
                continue
            judged.similarity.append(round(pair.similarity, 2))
            judged.true.append(key in wanted)
            judged.right.append(is_right(key))
    return judged


SHOWN = (0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6)


def at(values: np.ndarray, threshold: float) -> float:
    """The value of ``values`` (one per THRESHOLDS) at ``threshold``."""
    return float(values[int(np.flatnonzero(np.isclose(THRESHOLDS, threshold))[0])])


def at_shown(values: np.ndarray) -> list[float]:
    return [at(values, t) for t in SHOWN]


def judged_sets(args: argparse.Namespace) -> list[tuple[str, Dataset, Callable[..., bool]]]:
    """Each dataset, with what makes a listed pair right."""
    parts: list[tuple[str, Callable[[], Dataset]]] = [
        (f"Febrl {n}", lambda n=n: Dataset(*load_febrl(n))) for n in (1, 3, 4)
    ]
    parts += [*public.datasets(args), ("10,000 generated people", people)]
    sets: list[tuple[str, Dataset, Callable[..., bool]]] = []
    for name, load in parts:
        dataset = load()
        sets.append((name, dataset, lambda key, t=dataset.truth: key in t))
    if args.kijiji:
        records, jaccard = load_kijiji(*args.kijiji)
        ads = Dataset(records, {pair for pair, j in jaccard.items() if j >= 0.85})
        sets.append(("Kijiji", ads, lambda key: jaccard.get(key, 0) >= 0.7))
    return sets


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    public.add_arguments(parser)
    parser.add_argument("--kijiji", type=Path, nargs=2, metavar=("ADS", "PAIRS"))
    parser.add_argument("--records", type=int, default=40)
    parser.add_argument("--stores", type=int, default=30)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--share", type=float, nargs="+", default=[0.5, 0.25, 0.1])
    args = parser.parse_args()
    sets = judged_sets(args)
    print("| data, share of records in true pairs | best threshold | best F1 | ", end="")
    print(" | ".join(f"behind at {t:g}" for t in SHOWN) + " |")
    print("| --- | --- | --- | " + " | ".join("---" for _ in SHOWN) + " |")
    every = []
    for share in args.share:
        shortfalls = []
        for name, dataset, is_right in sets:
            f1 = judge(dataset, args.records, share, args.stores, args.seed, is_right).f1()
            shortfalls.append(f1.max() - f1)
            behind = " | ".join(f"{b:.3f}" for b in at_shown(shortfalls[-1]))
            best = THRESHOLDS[int(f1.argmax())]
            print(f"| {name}, {share:g} | {best:.2f} | {f1.max():.3f} | {behind} |", flush=True)
        worst = np.max(shortfalls, axis=0)
        every.append(worst)
        behind = " | ".join(f"**{b:.3f}**" for b in at_shown(worst))
        print(f"| **the worst dataset, {share:g}** | | | {behind} |", flush=True)
    worst = np.max(every, axis=0)
    best = int(worst.argmin())
    print(
        f"\nThe threshold that loses least on its worst dataset: {THRESHOLDS[best]:.2f} "
        f"(at most {worst[best]:.3f} behind a dataset's best; the fallback, "
        f"{FALLBACK_THRESHOLD:g}: {at(worst, FALLBACK_THRESHOLD):.3f})"
    )


if __name__ == "__main__":
    main()
