"""Candidate recall against brute force: of all pairs at or above a report's threshold, the share
the report's candidates (pairs sharing an LSH band) hold.

    python benchmarks/quality/candidates.py [--restaurant DIR --cora DIR --magellan DIR]
        [--kijiji ADS.tsv PAIRS.tsv] [--bands N]

Each dataset is indexed with no flags and reported with the automatic threshold, as a user
does. Brute force then measures the same similarity (the store's, with its shingle counts)
for every pair of distinct contents, and counts the pairs at or above that threshold that were
not candidates; the threshold `auto` reads from the histogram of every pair instead of the
candidates'; the candidate recall `neardup tune --store` estimates from the pairs reported;
and whether `report --exact` (every pair at or above the threshold, without the
candidates) lists exactly those pairs, and how long it takes. Febrl 1, 3 and 4 always; the
others as public.py and run.py read them. ``--bands`` indexes with that many bands instead of
the ones `neardup index` chooses.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import numpy as np
import public
from common import write_records
from febrl import load as load_febrl
from kijiji import load as load_kijiji
from public import Dataset

from neardup import api
from neardup.fingerprint import Numerals, pair_similarities, shingle_numbers
from neardup.report import NearestSimilarity, Pair, every_pair, shingle_weights
from neardup.settings import FALLBACK_THRESHOLD
from neardup.tuning import choose_threshold, similarity_histogram


class Measured(NamedTuple):
    threshold: float
    above: int  # pairs at or above it by brute force
    missed: int  # of them not candidates
    candidates: int  # candidate pairs
    estimated_recall: float | None  # as `neardup tune --store` reads it from the pairs reported
    every_pair_threshold: float  # what `auto` reads from the histogram of every pair
    exact_seconds: float
    exact_agrees: bool  # `report --exact` lists the brute force's pairs

    @property
    def recall(self) -> float:
        return (self.above - self.missed) / self.above if self.above else 1.0


def candidate_recall(data: Dataset, bands: int | None = None) -> Measured:
    with tempfile.TemporaryDirectory() as folder:
        files = write_records(data.records, Path(folder), data.sources)
        url = f"sqlite:///{Path(folder) / 's.db'}"
        params = {"bands": bands} if bands else None
        api.index(files, url, id_field="id", text_fields=["text"], params=params)
        tuned = api.tune_store(url)  # a report, as `neardup tune --store` runs it
        threshold = tuned.threshold
        candidates = api.report(url, rules={"threshold": 0.0})
        started = time.perf_counter()
        exact = api.report(url, exact=True)
        exact_seconds = time.perf_counter() - started
        with api.opened(url) as store:
            stored = [r for batch in store.iter_records(10_000) for r in batch]
            contents = sorted({r.content for r in stored})
            numbers, offsets, distinct = shingle_numbers(contents, store.params)
            weights = shingle_weights(store, distinct)
            # The store's own similarity: the numerals' agreement only where it weighs them.
            weighs_numerals = api.rules_for(store).similarity == "numerals"
            numerals = Numerals(contents) if weighs_numerals else None
    content_of = {r.id: r.content for r in stored}
    index = {c: n for n, c in enumerate(contents)}
    copies = np.bincount([index[r.content] for r in stored], minlength=len(contents))

    def of_contents(pairs: list[Pair]) -> set[tuple[int, int]]:
        return {
            tuple(sorted((index[content_of[p.left_id]], index[content_of[p.right_id]])))
            for p in pairs
        }

    found = of_contents(candidates)
    above: set[tuple[int, int]] = set()
    # As the report counts its candidates: a pair of contents weighs the pairs of records
    # holding them, and a content held twice is its own nearest.
    histogram = similarity_histogram(np.empty(0))
    nearest = NearestSimilarity(copies)
    for a, b in every_pair(len(contents)):
        similarities = pair_similarities(numbers, len(distinct), weights, offsets, a, b, numerals)
        similar = similarities >= threshold
        above.update(zip(a[similar].tolist(), b[similar].tolist(), strict=True))
        histogram += similarity_histogram(similarities, copies[a] * copies[b])
        nearest.add(a, b, similarities)
    every_pair_choice = choose_threshold(histogram, FALLBACK_THRESHOLD, nearest.histogram())
    return Measured(
        threshold,
        len(above),
        len(above - found),
        len(found),
        tuned.estimated_candidate_recall,
        every_pair_choice.threshold,
        exact_seconds,
        {(a, b) for a, b in of_contents(exact) if a != b} == above,  # copies aside
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The datasets' arguments: public.py's, and the Kijiji ads."""
    public.add_arguments(parser)
    parser.add_argument("--kijiji", nargs=2, type=Path, metavar=("ADS", "PAIRS"))


def datasets(args: argparse.Namespace) -> list[tuple[str, Callable[[], Dataset]]]:
    """Febrl 1, 3 and 4, the Kijiji ads with ``--kijiji``, then public.py's sets."""
    parts: list[tuple[str, Callable[[], Dataset]]] = [
        (f"Febrl {n}", lambda n=n: Dataset(*load_febrl(n))) for n in (1, 3, 4)
    ]
    if args.kijiji:
        parts.append(("Kijiji", lambda: Dataset(load_kijiji(*args.kijiji)[0], set())))
    return parts + public.datasets(args)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(parser)
    parser.add_argument("--bands", type=int, help="index with this many bands")
    args = parser.parse_args()
    parts = datasets(args)
    print(
        "| data | threshold | pairs >= threshold (brute force) | not candidates | candidate "
        "recall | tune --store's estimate | candidate pairs | threshold from every pair | "
        "report --exact s | exact = brute force |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, load in parts:
        m = candidate_recall(load(), args.bands)
        print(
            f"| {name} | {m.threshold:g} | {m.above:,} | {m.missed:,} | {m.recall:.4f} | "
            f"{'-' if m.estimated_recall is None else f'{m.estimated_recall:.4f}'} | "
            f"{m.candidates:,} | {m.every_pair_threshold:g} | {m.exact_seconds:.1f} | "
            f"{'yes' if m.exact_agrees else '**no**'} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
