"""What the quality scripts share: run a fresh index + report on records and time it."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from neardup import api
from neardup.fingerprint import FingerprintParams
from neardup.indexer import index_records
from neardup.readers import Record
from neardup.report import Pair
from neardup.searcher import MatchRules
from neardup.stores import open_store


def report(
    records: list[Record], params: FingerprintParams, rules: MatchRules
) -> tuple[list[Pair], float]:
    """Index the records into a new embedded store and report; returns (pairs, seconds)."""
    with tempfile.TemporaryDirectory() as folder:
        store = open_store(f"sqlite:///{Path(folder) / 'eval.db'}")
        started = time.perf_counter()
        index_records(store, records, params)
        pairs = api.report(store, rules=rules)
        seconds = time.perf_counter() - started
        store.close()
    return pairs, seconds


def reported_pairs(
    records: list[Record], params: FingerprintParams, rules: MatchRules
) -> tuple[set[tuple[str, str]], float]:
    """:func:`report`'s pairs as id pairs."""
    pairs, seconds = report(records, params, rules)
    return {(p.left_id, p.right_id) for p in pairs}, seconds
