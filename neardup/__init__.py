"""neardup: find near-duplicate records and documents with MinHash signatures in a store."""

from .api import apply_schema, index, lookup, opened, report, stats
from .errors import NeardupError
from .fingerprint import Fingerprint, FingerprintParams, fingerprint, fingerprint_batch, normalize
from .indexer import IndexSummary, index_records
from .readers import Record, RecordReader
from .report import Pair, clusters, write_clusters, write_pairs
from .searcher import Match, MatchRules, Searcher
from .stores import Store, open_store

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
    "Searcher",
    "Store",
    "apply_schema",
    "clusters",
    "fingerprint",
    "fingerprint_batch",
    "index",
    "index_records",
    "lookup",
    "normalize",
    "open_store",
    "opened",
    "report",
    "stats",
    "write_clusters",
    "write_pairs",
]
