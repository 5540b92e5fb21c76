"""The automatic threshold on records with no near-duplicates, or only a few.

    python benchmarks/quality/few_duplicates.py [--data DIR] [--put-back 0 5 15]

Each dataset keeps one record of each true group (its duplicates taken out), then gets the
second record of ``k`` random groups back, for each ``k`` of --put-back. It is indexed and
reported with no flags, as a user does, and the table shows the threshold `auto` chose, why,
the pairs the report lists and how many of them are true. Such records make no hump of
near-duplicates, so no valley: a store of a clean catalogue, or of a file with a handful of
copies. Febrl 1, 3, 4 and 10,000 generated people always; the public sets as public.py reads
them.
"""

from __future__ import annotations

import argparse
import random
import tempfile
from collections.abc import Callable
from pathlib import Path

import public
from common import report
from febrl import load as load_febrl
from public import Dataset

from neardup import api
from neardup.generate import write_corpus
from neardup.readers import Record, RecordReader


def true_groups(records: list[Record], truth: set[tuple[str, str]]) -> list[list[Record]]:
    """The records in groups of the truth's connected components, in file order."""
    parent: dict[str, str] = {}

    def root(record_id: str) -> str:
        while parent.get(record_id, record_id) != record_id:
            record_id = parent[record_id]
        return record_id

    for a, b in truth:
        if (ra := root(a)) != (rb := root(b)):
            parent[ra] = rb
    groups: dict[str, list[Record]] = {}
    for record in records:
        groups.setdefault(root(record.id), []).append(record)
    return list(groups.values())


def people(count: int = 10_000) -> Dataset:
    with tempfile.TemporaryDirectory() as folder:
        corpus, truth_file = Path(folder) / "people.tsv", Path(folder) / "truth.tsv"
        write_corpus(corpus, truth_file, count, kind="people", seed=1)
        records = list(RecordReader(corpus))
        lines = truth_file.read_text().splitlines()[1:]
    return Dataset(records, {tuple(sorted(line.split("\t")[:2])) for line in lines})


def with_copies_put_back(dataset: Dataset, copies: int, seed: int = 1) -> Dataset:
    groups = true_groups(dataset.records, dataset.truth)
    several = [g for g in groups if len(g) > 1]
    back = random.Random(seed).sample(several, min(copies, len(several)))
    records = [g[0] for g in groups] + [g[1] for g in back]
    held = {r.id for r in records}
    truth = {(a, b) for a, b in dataset.truth if a in held and b in held}
    return Dataset(records, truth, dataset.sources)


def row(name: str, dataset: Dataset) -> str:
    with tempfile.TemporaryDirectory() as folder:
        url = f"sqlite:///{Path(folder) / 'store.db'}"
        pairs, _ = report(dataset.records, url=url, sources=dataset.sources)
        chosen = api.last_report(url)
    listed = dataset.scored({tuple(sorted((p.left_id, p.right_id))) for p in pairs})
    right = len(listed & dataset.truth)
    return (
        f"| {name} | {len(dataset.records):,} | {len(dataset.truth)} | {chosen.threshold:g} | "
        f"{chosen.how} | {len(listed):,} | {right} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    public.add_arguments(parser)
    parser.add_argument("--put-back", type=int, nargs="+", default=[0, 5, 15], metavar="K")
    args = parser.parse_args()
    parts: list[tuple[str, Callable[[], Dataset]]] = [
        (f"Febrl {n}", lambda n=n: Dataset(*load_febrl(n))) for n in (1, 3, 4)
    ]
    parts += [*public.datasets(args), ("10,000 generated people", people)]
    print("| data | records | true pairs | threshold | how | pairs listed | of them true |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for name, load in parts:
        dataset = load()
        for copies in args.put_back:
            print(row(f"{name}, {copies} put back", with_copies_put_back(dataset, copies)))


if __name__ == "__main__":
    main()
