"""Every near-duplicate pair in a store, exactly once, and the groups they form.

Records with the same MD5 are one exact-duplicate group. The report visits each group once (through
its first id), emits every pair inside it, asks the searcher for the group's near-duplicates, and
emits every pair across the two groups. So 40 identical records give all 780 pairs, and their
near-duplicates are not crowded out of the candidate rows by their own copies.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from itertools import combinations, islice
from typing import IO, Literal

from .fingerprint import fingerprint_batch
from .searcher import Searcher

ReportFormat = Literal["tsv", "csv", "jsonl"]
REPORT_FORMATS: tuple[ReportFormat, ...] = ("tsv", "csv", "jsonl")


@dataclass(frozen=True, order=True)
class Pair:
    left_id: str
    right_id: str
    edit_distance: int
    similarity: float
    shared_tokens: int
    kind: Literal["exact", "near"]


def ordered_pair(a: str, b: str) -> tuple[str, str]:
    # Python orders str by code point, which is the UTF-8 byte order engines sort by.
    return (a, b) if a < b else (b, a)


def find_pairs(searcher: Searcher, batch_size: int = 256) -> list[Pair]:
    """All accepted pairs, sorted by (left id, right id)."""
    store = searcher.store
    visited_md5: set[bytes] = set()
    emitted_groups: set[tuple[str, str]] = set()
    pairs: list[Pair] = []
    ids = store.iter_ids()
    while batch := list(islice(ids, batch_size)):
        records = store.get(batch)
        leaders = []
        for record_id in batch:
            digest = bytes.fromhex(records[record_id].md5)
            if digest not in visited_md5:
                visited_md5.add(digest)
                leaders.append(records[record_id])
        fingerprints = fingerprint_batch([r.content for r in leaders], searcher.params)
        near = searcher.near_duplicates_many(fingerprints)
        for leader, fp, matches in zip(leaders, fingerprints, near, strict=True):
            group = store.ids_with_md5(leader.md5)
            score = searcher.field.size(fp)
            pairs.extend(
                Pair(*ordered_pair(a, b), 0, 1.0, score, "exact") for a, b in combinations(group, 2)
            )
            for match in matches:
                key = ordered_pair(leader.md5, match.md5)
                if key in emitted_groups:
                    continue
                emitted_groups.add(key)
                pairs.extend(
                    Pair(
                        *ordered_pair(a, b),
                        match.edit_distance,
                        match.similarity,
                        match.shared_tokens,
                        "near",
                    )
                    for a in group
                    for b in store.ids_with_md5(match.md5)
                )
    pairs.sort()
    return pairs


def clusters(pairs: Iterable[Pair]) -> list[list[str]]:
    """Connected components of the pair graph: largest first, then by first id; ids sorted."""
    parent: dict[str, str] = {}

    def root(x: str) -> str:
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for pair in pairs:
        a, b = root(pair.left_id), root(pair.right_id)
        if a != b:
            parent[max(a, b)] = min(a, b)
    groups: dict[str, list[str]] = {}
    for member in parent:
        groups.setdefault(root(member), []).append(member)
    return sorted((sorted(g) for g in groups.values()), key=lambda g: (-len(g), g[0]))


def write_pairs(pairs: Iterable[Pair], out: IO[str], format: ReportFormat = "tsv") -> int:
    fields = list(Pair.__dataclass_fields__)
    rows = (asdict(p) | {"similarity": round(p.similarity, 6)} for p in pairs)
    return _write(rows, fields, out, format)


def write_clusters(groups: Iterable[list[str]], out: IO[str], format: ReportFormat = "tsv") -> int:
    if format == "jsonl":
        rows: Iterator[dict[str, object]] = (
            {"group": n, "size": len(g), "ids": g} for n, g in enumerate(groups, start=1)
        )
        return _write(rows, ["group", "size", "ids"], out, format)
    rows = (
        {"group": n, "size": len(g), "id": member}
        for n, g in enumerate(groups, start=1)
        for member in g
    )
    return _write(rows, ["group", "size", "id"], out, format)


def _write(
    rows: Iterable[dict[str, object]], fields: list[str], out: IO[str], format: ReportFormat
) -> int:
    count = 0
    if format == "jsonl":
        for count, row in enumerate(rows, start=1):  # noqa: B007 - count is the result
            out.write(json.dumps(row, ensure_ascii=False) + "\n")
        return count
    writer = csv.DictWriter(
        out,
        fields,
        delimiter="\t" if format == "tsv" else ",",
        lineterminator="\n",
        **({"quoting": csv.QUOTE_NONE, "escapechar": "\\"} if format == "tsv" else {}),
    )
    writer.writeheader()
    for count, row in enumerate(rows, start=1):  # noqa: B007
        writer.writerow(row)
    return count
