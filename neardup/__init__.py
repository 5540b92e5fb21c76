"""neardup: find near-duplicate records and documents with MinHash signatures in a store."""

from .api import (
    Report,
    add,
    apply_schema,
    dedup,
    delete,
    demo,
    evaluate,
    explain,
    export,
    generate,
    index,
    label_sample,
    last_report,
    link,
    link_records,
    lookup,
    lookup_file,
    lookup_records,
    opened,
    record_texts,
    report,
    report_page,
    stats,
    tune,
    tune_store,
    tune_with_labels,
)
from .errors import NeardupError
from .fingerprint import Fingerprint, FingerprintParams, fingerprint, fingerprint_batch, normalize
from .indexer import IndexSummary, index_records
from .readers import Record, RecordReader
from .report import Pair, clusters
from .searcher import Match, MatchRules, Searcher
from .stores import Store, open_store


def __getattr__(name: str) -> object:
    # The service is a skin over the API: FastAPI loads only for those who serve.
    if name == "serve":
        from .service import serve

        return serve
    raise AttributeError(f"module 'neardup' has no attribute {name!r}")


__all__ = [
    "Fingerprint",
    "FingerprintParams",
    "IndexSummary",
    "Match",
    "MatchRules",
    "NeardupError",
    "Pair",
    "Record",
    "RecordReader",
    "Report",
    "Searcher",
    "Store",
    "add",
    "apply_schema",
    "clusters",
    "dedup",
    "delete",
    "demo",
    "evaluate",
    "explain",
    "export",
    "fingerprint",
    "fingerprint_batch",
    "generate",
    "index",
    "index_records",
    "label_sample",
    "last_report",
    "link",
    "link_records",
    "lookup",
    "lookup_file",
    "lookup_records",
    "normalize",
    "open_store",
    "opened",
    "record_texts",
    "report",
    "report_page",
    "serve",
    "stats",
    "tune",
    "tune_store",
    "tune_with_labels",
]
