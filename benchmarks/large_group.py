"""A group of near-copies too large for a report's pair budget: does it stay one group?

    python benchmarks/large_group.py [--copies 3000 20000] [--people 20000]

For each count: generated person records (`neardup generate --kind people`) and that many
near-copies of one address line (a typo or two each, as a feed that repeats one listing) go
into a new embedded store, reported with no flags. Every band of the copies is shared by most
of the group, so its buckets make far more pairs than the report's budget (40 million bucket
pairs): the report leaves the largest buckets out and says so. The table shows how many pairs
of copies the report still lists, and whether `--clusters` (components) puts every copy in one
group.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from neardup import api
from neardup.generate import near_copies


def run(copies: int, people: int, folder: Path) -> list[str]:
    records = folder / f"records-{copies}.tsv"
    api.generate(people, records, kind="people")
    with records.open("a", encoding="utf-8") as out:
        for n, text in enumerate(near_copies(copies)):
            out.write(f"copy{n}\t{text}\t\t\t\t\n")
    store = f"sqlite:///{folder / f'store-{copies}.db'}"
    api.index([records], store)
    started = time.perf_counter()
    pairs = api.report(store)
    seconds = time.perf_counter() - started
    measured = api.last_report(store)
    of_copies = sum(p.left_id.startswith("copy") and p.right_id.startswith("copy") for p in pairs)
    grouped = max(
        (sum(i.startswith("copy") for i in group) for group in api.clusters(pairs)), default=0
    )
    return [
        f"{copies:,}",
        f"{copies * (copies - 1) // 2:,}",
        f"{of_copies:,}",
        f"{grouped:,} of {copies:,}",
        f"{measured.threshold:g}",
        f"{seconds:.1f}",
        measured.left_out_text() or "nothing",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", type=int, nargs="+", default=[3000, 20000])
    parser.add_argument("--people", type=int, default=20000)
    args = parser.parse_args()
    print(
        "| copies | their pairs | pairs of copies reported | copies in the largest group "
        "| threshold | report s | the report says |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- |")
    with tempfile.TemporaryDirectory() as folder:
        for copies in args.copies:
            print("| " + " | ".join(run(copies, args.people, Path(folder))) + " |", flush=True)


if __name__ == "__main__":
    main()
