"""Batch indexing: read records, fingerprint them a batch at a time, upsert each batch."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from itertools import islice

from .fingerprint import fingerprint_batch
from .readers import Record, SkipLog
from .stores import Document, Store
from .stores.base import ParamsRequest

# Records per transaction. Larger transactions write each touched index page once for more
# records (a commit writes every page it dirtied): 10,000 index twice as fast as 1,000.
DEFAULT_BATCH_SIZE = 10_000


@dataclass
class IndexSummary:
    read: int = 0
    indexed: int = 0
    skipped: SkipLog = field(default_factory=SkipLog)
    seconds: float = 0.0
    documents: int = 0  # records in the store afterwards
    params: ParamsRequest = None

    def describe(self) -> str:
        rate = self.indexed / self.seconds if self.seconds else 0.0
        return (
            f"read {self.read}, indexed {self.indexed}, skipped {self.skipped.summary()}; "
            f"{self.seconds:.1f} s ({rate:,.0f} records/s); store holds {self.documents}"
        )


def _batches(records: Iterable[Record], size: int) -> Iterator[list[Record]]:
    iterator = iter(records)
    while batch := list(islice(iterator, size)):
        yield batch


def index_records(
    store: Store,
    records: Iterable[Record],
    params: ParamsRequest = None,
    *,
    batch_size: int = DEFAULT_BATCH_SIZE,
    summary: IndexSummary | None = None,
    on_batch: Callable[[], None] | None = None,
) -> IndexSummary:
    """Fingerprint and upsert records; each batch is stored all or nothing."""
    summary = summary or IndexSummary()
    started = time.perf_counter()
    summary.params = store.ensure_params(params)
    for batch in _batches(records, batch_size):
        fingerprints = fingerprint_batch([r.text for r in batch], summary.params)
        documents = []
        for record, fp in zip(batch, fingerprints, strict=True):
            if fp.num_words:
                documents.append(Document(record.id, fp, summary.params.fields))
            else:
                summary.skipped.add(record.line, "no words after normalisation")
        store.upsert(documents)
        summary.read += len(batch)
        summary.indexed += len(documents)
        if on_batch:
            on_batch()
    store.flush()
    summary.documents = store.count()
    summary.seconds += time.perf_counter() - started
    return summary
