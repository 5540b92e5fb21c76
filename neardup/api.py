"""The Python API: everything the CLI does, as functions.

Each function takes a store URL (or an open :class:`~neardup.stores.Store`); with a URL it opens
the store and closes it afterwards.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from tqdm import tqdm

from .errors import NeardupError
from .exact import exact_pairs
from .indexer import DEFAULT_BATCH_SIZE, IndexSummary, index_records
from .readers import Format, RecordReader
from .report import Pair, Strategy, find_pairs
from .searcher import Match, MatchRules, Searcher
from .stores import Store, open_store
from .stores.base import ParamsRequest

StoreRef = Store | str | None


@contextmanager
def opened(store: StoreRef, *, create: bool = False) -> Iterator[Store]:
    """Use an open store as it is, or open one from a URL (None: the default) and close it."""
    if isinstance(store, Store):
        yield store
        return
    with open_store(store, create=create) as fresh:
        yield fresh


def index(
    paths: Sequence[str | Path],
    store: StoreRef = None,
    *,
    format: Format | None = None,
    id_field: str | None = None,
    text_fields: Sequence[str] = (),
    params: ParamsRequest = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
    progress: bool = False,
) -> IndexSummary:
    """Index record files. Every file is opened and checked before anything is written."""
    readers = [
        RecordReader(
            path,
            format,
            id_field=id_field,
            text_fields=text_fields,
            number_prefix=f"{Path(path).name}:" if len(paths) > 1 else "",
        )
        for path in paths
    ]
    summary = IndexSummary()
    with opened(store, create=True) as target:
        total = sum(r.size for r in readers)
        with tqdm(total=total, unit="B", unit_scale=True, disable=not progress, leave=False) as bar:
            for reader in readers:
                done = bar.n

                def advance(reader: RecordReader = reader, done: int = done) -> None:
                    bar.update(done + reader.bytes_read - bar.n)

                index_records(
                    target,
                    reader,
                    params,
                    batch_size=batch_size,
                    summary=summary,
                    on_batch=advance,
                )
                summary.skipped.merge(reader.skipped, str(reader.path))
                params = summary.params
    return summary


def searcher_for(store: Store, rules: MatchRules, params: ParamsRequest = None) -> Searcher:
    return Searcher(store, store.ensure_params(params), rules)


def lookup(
    store: StoreRef = None,
    *,
    id: str | None = None,
    text: str | None = None,
    rules: MatchRules | None = None,
    params: ParamsRequest = None,
) -> list[Match]:
    """The stored duplicates of one record (by id) or of a new text: exact ones first."""
    if (id is None) == (text is None):
        raise ValueError("give exactly one of id and text")
    with opened(store) as source:
        searcher = searcher_for(source, rules or MatchRules(), params)
        return searcher.lookup_id(id) if id is not None else searcher.lookup_text(text or "")


def report(
    store: StoreRef = None,
    *,
    rules: MatchRules | None = None,
    exact: bool = False,
    strategy: Strategy = "auto",
) -> list[Pair]:
    """Every near-duplicate pair in the store, once each, sorted by ids.

    With ``exact``, pairs come from exact Jaccard similarity over all pairs (see
    :mod:`neardup.exact`) instead of the sketches: slower, for measuring what they miss.
    ``strategy`` chooses how candidates are found (see :func:`neardup.report.find_pairs`); the
    pairs are the same either way.
    """
    rules = rules or MatchRules()
    with opened(store) as source:
        searcher = searcher_for(source, rules)
        if exact:
            if not rules.threshold:
                raise NeardupError("the exact report needs a --threshold above 0")
            records = [r for batch in source.iter_records() for r in batch]
            return exact_pairs(records, searcher.params, rules)
        return find_pairs(searcher, strategy)


def apply_schema(store: StoreRef = None) -> str:
    """Create the store's schema, or add the fields an existing one lacks; returns the store URL."""
    with opened(store, create=True) as target:
        target.apply_schema()
        return target.url


def stats(store: StoreRef = None) -> dict[str, object]:
    with opened(store) as source:
        params = source.read_params()
        return {
            "store": source.url,
            "documents": source.count(),
            "parameters": params.to_dict() if params else None,
        }
