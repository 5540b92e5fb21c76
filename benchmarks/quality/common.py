"""What the quality scripts share: run a fresh index + report on records, as a user runs them,
and time it."""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

from neardup import api
from neardup.fingerprint import FingerprintParams
from neardup.readers import Record
from neardup.report import Pair
from neardup.searcher import MatchRules


def write_records(
    records: list[Record], folder: Path, sources: Mapping[str, str] | None = None
) -> list[Path]:
    """The records as JSON lines files in ``folder``: one, or one per source when ``sources``
    names each record's (two files linked are given to `neardup index` together, as a user
    linking them does)."""
    files: dict[str, list[Record]] = {}
    for record in records:
        files.setdefault(sources[record.id] if sources else "records", []).append(record)
    paths = []
    for name, held in files.items():
        path = folder / f"{name}.jsonl"
        with path.open("w", encoding="utf-8") as out:
            for record in held:
                out.write(json.dumps({"id": record.id, "text": record.text}) + "\n")
        paths.append(path)
    return paths


def report(
    records: list[Record],
    params: FingerprintParams | None = None,
    rules: MatchRules | Mapping[str, object] | None = None,
    url: str | None = None,
    sources: Mapping[str, str] | None = None,
    **index_options: object,
) -> tuple[list[Pair], float]:
    """Index the records into a new store and report; returns (pairs, seconds). Whatever is not
    given is what `neardup index` and `neardup report` choose by themselves: the records go
    through JSON lines files (:func:`write_records`), as a user's files would. The store is
    ``url``, kept for the caller to read, else an embedded one that is removed."""
    with tempfile.TemporaryDirectory() as folder:
        files = write_records(records, Path(folder), sources)
        url = url or f"sqlite:///{Path(folder) / 'eval.db'}"
        started = time.perf_counter()
        api.index(files, url, id_field="id", text_fields=["text"], params=params, **index_options)
        pairs = api.report(url, rules=rules)
        seconds = time.perf_counter() - started
    return pairs, seconds


def reported_pairs(
    records: list[Record],
    params: FingerprintParams | None = None,
    rules: MatchRules | Mapping[str, object] | None = None,
    sources: Mapping[str, str] | None = None,
    **index_options: object,
) -> tuple[set[tuple[str, str]], float]:
    """:func:`report`'s pairs as id pairs, each in code point order, as the truth files hold
    them (a report lists ``ad9`` before ``ad10``)."""
    pairs, seconds = report(records, params, rules, sources=sources, **index_options)
    return {(min(p.left_id, p.right_id), max(p.left_id, p.right_id)) for p in pairs}, seconds


def linked_pairs(
    records: list[Record], sources: Mapping[str, str]
) -> tuple[set[tuple[str, str]], float]:
    """`neardup link` of two sources with no flags, as a user links two files: the first file
    indexed into a new embedded store, the second linked to it; the links as id pairs, each in
    code point order, and the seconds it took."""
    with tempfile.TemporaryDirectory() as folder:
        files = write_records(records, Path(folder), sources)
        started = time.perf_counter()
        found = api.link(files, f"sqlite:///{Path(folder) / 'eval.db'}", id_field="id",
                         text_fields=["text"])  # fmt: skip
        seconds = time.perf_counter() - started
    return {(min(i, m.id), max(i, m.id)) for i, m in found.links}, seconds
