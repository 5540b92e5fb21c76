"""Elasticsearch 8 behind ``elasticsearch://host:port/INDEX``, with the client of the same major.

The index uses ``schema/elasticsearch/mapping.json``; the store's configuration (fingerprint
parameters, layout, rules) is kept in the mapping's ``_meta.neardup_params`` and checked on every
use, and what commands measured (a threshold read, a report's histogram, the pairs checks
counted) in a document of the ``neardup-settings`` index: those are written again as often as
each check-then-add, and a change of mapping is a change of the cluster's state. A candidate
query is a ``bool`` ``should`` of ``constant_score`` term clauses, so a hit's score is exactly the
number of tokens it shares, whatever the shard statistics; hits are sorted by score, then id. Many
candidate queries go out as one ``_msearch``. Records are written with ``streaming_bulk`` and
refreshed at :meth:`flush` (Elasticsearch also refreshes by itself every second); walks over
all ids use a point in time with ``search_after``, and a report's reads one point in time
(:meth:`ElasticsearchStore.snapshot`).
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, TypeVar

import elastic_transport
import numpy as np
from elasticsearch import (
    ApiError,
    BadRequestError,
    ConflictError,
    Elasticsearch,
    NotFoundError,
    helpers,
)

from ..errors import NeardupError, NoStore, StoreChanged, StoreFull, StoreUnavailable
from ..fingerprint import Counted, FingerprintParams, TokenField
from ..phrases import counted
from .base import (
    MEASURED_SETTINGS,
    Buckets,
    Candidate,
    CandidateQuery,
    Document,
    Store,
    StoredRecord,
    in_batches,
    md5_queries,
    not_a_store,
    ordered_map,
    retried,
)
from .schema import (
    LEGACY_FIELD_NAMES,
    RECORD_PAGE,
    band_prefixes,
    elasticsearch_mapping,
    engine_document,
    engine_frequencies,
    field_names,
    hex_tails,
)
from .url import RETRY_STATUSES, parse_engine_url

RECORD_FIELDS = ["id", "content", "md5_hash", "first_word", "num_words"]
# The fields of a store's index, of either layout: an index that has others is not a store.
_OWN_FIELDS = {*elasticsearch_mapping()["properties"], *LEGACY_FIELD_NAMES.values()}
PAGE = 1000
KEEP_ALIVE = "5m"
# What sums up the state a point in time shows: its records, and the sum and the largest of
# their sequence numbers, which every write raises on its shard (exact: a double holds integer
# sums up to 2**53, in any order).
STATE_REQUEST = {
    "size": 0,
    "track_total_hits": True,
    "aggs": {"seq_no": {"stats": {"field": "_seq_no"}}},
}
# Records per page of a walk for MD5s only (doc values, no _source): the most a page may hold.
DIGEST_PAGE = 10_000
# Buckets per terms aggregation, sub-buckets included: the default search.max_buckets. A
# partition that holds more is split by one more hex digit.
MAX_BUCKETS = 65_536
# Most rows an _msearch asks for, summed over its queries: its answer is built whole in the
# node's heap (see candidates_many).
MSEARCH_HITS = 100_000
# Contents listed per bucket by its sub-aggregation; a larger bucket is walked.
BUCKET_CONTENTS = 100
# Token prefixes listed at once.
CONCURRENT_PREFIXES = 2
# Where the leases of check-then-adds live, one document per store index (see Store.exclusive).
LOCKS_INDEX = "neardup-locks"
# Where what commands measured of each store index lives, one document per index.
SETTINGS_INDEX = "neardup-settings"
# How long a read waits for a lost node's shards to answer from their other copies.
FAILOVER_SECONDS = 60
# What Elasticsearch says of a write it refuses because its disk passed the flood-stage
# watermark (it makes every index on the node read-only, deletes allowed).
FLOOD_STAGE = "flood-stage watermark"

T = TypeVar("T")


def _candidate_search(query: CandidateQuery, name: str) -> dict[str, Any]:
    should = [
        {"constant_score": {"filter": {"term": {name: t}}}}
        for t in dict.fromkeys(query.field.strings(query.keys))
    ]
    boolean: dict[str, Any] = {"should": should, "minimum_should_match": 1}
    if query.first_word is not None:
        boolean["filter"] = [{"term": {"first_word": query.first_word}}]
    if query.exclude_md5:
        boolean["must_not"] = [{"terms": {"md5_hash": list(query.exclude_md5)}}]
    return {
        "query": {"bool": boolean},
        "sort": [{"_score": "desc"}, {"id": "asc"}],
        "size": query.rows,
        "_source": RECORD_FIELDS,
        "track_total_hits": False,
    }


# What Elasticsearch refuses in an index name (it names a folder on every node).
_NOT_IN_INDEX_NAMES = set('\\/*?"<>| ,#:')


def index_name_problem(name: str) -> str | None:
    """Why Elasticsearch would refuse ``name`` for an index, before any request is made."""
    problems = []
    if name != name.lower():
        problems.append("is lowercase")
    if refused := sorted(set(name) & _NOT_IN_INDEX_NAMES):
        problems.append("holds no " + ", ".join("spaces" if c == " " else repr(c) for c in refused))
    if name[0] in "-_+" or name in (".", ".."):
        problems.append("does not start with -, _ or + and is not . or ..")
    if len(name.encode()) > 255:
        problems.append("is 255 bytes at most")
    return f"an index name {' and '.join(problems)}" if problems else None


class _PointInTime:
    """A point in time that searches read (a :meth:`ElasticsearchStore.snapshot`'s, or a
    walk's own), opened at the first; one that a lost node took, or whose reader is done, is
    closed, and the next search opens another. Shared by the threads of a snapshot's work.

    A snapshot's (``held``) must show one state throughout, and the one opened after a loss
    shows the index as it is then: the first is summed up when opened (:func:`_state_of`),
    and one opened again that sums up otherwise raises StoreChanged."""

    def __init__(self, held: bool = False) -> None:
        self.id: str | None = None
        self._held = held
        self._state: tuple[int, float, float] | None = None
        self._lock = threading.Lock()

    def where(self, store: ElasticsearchStore) -> str:
        """The id a search names."""
        with self._lock:
            if self.id is None:
                opened = store._open_point_in_time()
                try:
                    self.id = self._checked(store, opened) if self._held else opened
                except BaseException:
                    store._close_point_in_time(opened)
                    raise
            return self.id

    def _checked(self, store: ElasticsearchStore, pit: str) -> str:
        """``pit`` (as its answer names it), if it shows the state the first one showed."""
        answer = store._search_once(pit, **STATE_REQUEST)
        state = _state_of(answer)
        if self._state is None:
            self._state = state
        elif state != self._state:
            raise StoreChanged(
                "the point in time it read was lost with a node, and records were written or "
                "deleted before another was opened"
            )
        return answer.get("pit_id", pit)

    def answered(self, answer: Mapping[str, Any]) -> None:
        """The id an answer gives, which the next search names (it may change)."""
        with self._lock:
            self.id = answer.get("pit_id", self.id)

    def lost(self, store: ElasticsearchStore) -> None:
        with self._lock:
            store._close_point_in_time(self.id)
            self.id = None


class ElasticsearchStore(Store):
    def __init__(self, url: str, *, create: bool = True, timeout: float = 60, retries: int = 3):
        parsed = parse_engine_url(url, "elasticsearch://host:port/INDEX", 9200, "ES")
        self.index = parsed.path.strip("/")
        if not self.index or "/" in self.index:
            example = "elasticsearch://host:port/INDEX"
            raise NeardupError(f"an Elasticsearch store URL looks like {example}, not {url!r}")
        if problem := index_name_problem(self.index):
            raise NeardupError(f"{self.index!r} cannot name an Elasticsearch index: {problem}")
        self.url, self.endpoint = parsed.public, parsed.endpoint
        self.nodes = len(parsed.endpoints)
        self.shards, self.replicas = parsed.shards, parsed.replicas
        auth: dict[str, Any] = {}
        if parsed.auth:
            auth["basic_auth"] = parsed.auth
        elif os.environ.get("NEARDUP_ES_API_KEY"):
            auth["api_key"] = os.environ["NEARDUP_ES_API_KEY"]
        self.secure = parsed.scheme.endswith("+https")
        ca = os.environ.get("NEARDUP_ES_CA_CERTS")  # a cluster's own CA, as ES 8 makes one
        if ca and self.secure:  # plain HTTP has no certificate to check
            if not os.path.isfile(ca):
                raise NeardupError(f"NEARDUP_ES_CA_CERTS names no file: {ca}")
            auth["ca_certs"] = ca
        # The point in time of the snapshot this thread's work reads in, if in one.
        self._snapshot: ContextVar[_PointInTime | None] = ContextVar("snapshot", default=None)
        self.es = Elasticsearch(
            parsed.endpoints,  # the client's node pool fails over between them
            request_timeout=timeout,
            max_retries=retries,
            retry_on_timeout=True,
            retry_on_status=RETRY_STATUSES,
            **auth,
        )
        if not create and not self._exists():
            raise NoStore(f"no Elasticsearch index {self.index!r} at {self.endpoint}")

    @contextmanager
    def _errors(self) -> Iterator[None]:
        """Turn transport and API errors into one-line user errors."""
        try:
            yield
        except elastic_transport.TlsError:
            raise StoreUnavailable(
                f"Elasticsearch at {self.endpoint}: its TLS certificate is not trusted here; name "
                "the CA that signed it in NEARDUP_ES_CA_CERTS (Elasticsearch 8 writes it to "
                "config/certs/http_ca.crt)"
            ) from None
        except elastic_transport.ConnectionTimeout:
            raise StoreUnavailable(f"Elasticsearch at {self.endpoint} timed out") from None
        except elastic_transport.ConnectionError as exc:
            # A node that serves HTTPS hangs up on plain HTTP without a word.
            hung_up = not self.secure and "RemoteDisconnected" in repr(exc.__context__)
            hint = " (it hung up: if it serves HTTPS, the URL is elasticsearch+https://…)"
            raise StoreUnavailable(
                f"Elasticsearch at {self.endpoint} is not reachable{hint if hung_up else ''}"
            ) from None
        except _ShardsMissing as exc:
            raise StoreUnavailable(
                f"Elasticsearch at {self.endpoint}: {exc} for {FAILOVER_SECONDS} s"
            ) from None
        except ApiError as exc:
            if exc.meta.status == 401:
                raise NeardupError(
                    f"Elasticsearch at {self.endpoint} refused the credentials (HTTP 401)"
                ) from None
            reason = _reason(exc.body) or exc.message
            raise NeardupError(
                f"Elasticsearch at {self.endpoint}: {exc.meta.status}: {reason}"
            ) from None

    def _failover(self, ask: Callable[[], T]) -> T:
        """``ask`` (a read), asked again while a lost node's shards move to their other copies:
        every search asks for all shards or none (no partial results), and one that meets a
        missing shard, a lost point in time or no node fails and is retried, with backoff, for
        up to FAILOVER_SECONDS. Other errors and the last failure are raised as they are."""
        return retried(ask, lambda exc: _transient(exc, self.nodes), FAILOVER_SECONDS, (0.25, 2.0))

    def _search(self, **request: Any) -> dict[str, Any]:
        """One search of every shard (see :meth:`_failover`), of the index or, inside a
        :meth:`snapshot`, of its point in time."""
        return self._search_over(self._snapshot.get(), **request)

    def _search_over(self, point: _PointInTime | None, **request: Any) -> dict[str, Any]:
        """One search of every shard (see :meth:`_failover`), of ``point`` (None: the index).
        A failure a lost node causes may have taken the point in time: the next try opens
        another."""

        def ask() -> dict[str, Any]:
            pit = None if point is None else point.where(self)
            try:
                answer = self._search_once(pit, **request)
            except (ApiError, elastic_transport.TransportError, _ShardsMissing) as exc:
                if point is not None and _transient(exc, self.nodes):
                    point.lost(self)
                raise
            if point is not None:
                point.answered(answer)
            return answer

        return self._failover(ask)

    def _search_once(self, pit: str | None, **request: Any) -> dict[str, Any]:
        """One search of every shard, of the index or of point in time ``pit``."""
        where = (
            {"index": self.index} if pit is None else {"pit": {"id": pit, "keep_alive": KEEP_ALIVE}}
        )
        return _whole(self.es.search(allow_partial_search_results=False, **where, **request))

    # --- one state for a report's reads (Store.snapshot) ------------------------------------------

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        """Every search inside reads one point in time (see :meth:`Store.snapshot`): the index
        shows what was written at each refresh, every second while a run writes, and a report
        read the records of several states. For this thread and the threads its work starts
        (:func:`~neardup.stores.base.ordered_map`), not the service's other requests. A lost
        node takes the point in time with it: the searches after it read a new one, and raise
        StoreChanged if records were written meanwhile (:class:`_PointInTime`)."""
        if self._snapshot.get() is not None:
            yield
            return
        point = _PointInTime(held=True)
        token = self._snapshot.set(point)
        try:
            yield
        finally:
            self._snapshot.reset(token)
            point.lost(self)

    def _open_point_in_time(self) -> str:
        # Within a search's failover: a lost node's errors are retried, not made one line.
        return self.es.open_point_in_time(
            index=self.index, keep_alive=KEEP_ALIVE, allow_partial_search_results=False
        )["id"]

    # --- the lease of a check-then-add (Store.exclusive) ------------------------------------------
    # Read and written by id only (a get is real-time, a create conflicts by id): never
    # refreshed, which cost each checked add 25 ms.

    def _take_lease(self, holder: str, until: float) -> bool:
        with self._errors():
            try:
                self.es.create(
                    index=LOCKS_INDEX,
                    id=self.index,
                    document={"holder": holder, "until": until},
                )
            except ConflictError:  # a document of that id exists
                return False
        return True

    def _lease(self) -> dict[str, Any] | None:
        with self._errors():
            try:
                found = self.es.get(index=LOCKS_INDEX, id=self.index)
            except NotFoundError:
                return None
        return {**found["_source"], "seq_no": found["_seq_no"], "term": found["_primary_term"]}

    def _end_lease(self, lease: Mapping[str, Any]) -> None:
        current = self._lease()
        if current and current["holder"] == lease["holder"]:
            with self._errors(), contextlib.suppress(ConflictError, NotFoundError):
                self.es.delete(
                    index=LOCKS_INDEX,
                    id=self.index,
                    if_seq_no=current["seq_no"],
                    if_primary_term=current["term"],
                )

    def _exists(self) -> bool:
        with self._errors():
            return bool(self.es.indices.exists(index=self.index))

    # --- schema and parameters --------------------------------------------------------------------

    def apply_schema(self) -> None:
        mapping = elasticsearch_mapping()
        if not self._exists():
            # number_of_replicas counts the extra copies of a shard
            copies = {"number_of_shards": self.shards, "number_of_replicas": self.replicas - 1}
            self._create_index(self.index, mapping, copies)
            return
        # only what the index lacks: a field's doc values cannot change in place
        have = self._own_mappings()["properties"]
        missing = {k: v for k, v in mapping["properties"].items() if k not in have}
        if missing:
            with self._errors():
                self.es.indices.put_mapping(index=self.index, properties=missing)

    def _create_index(self, name: str, mappings: dict[str, Any], settings: dict[str, Any]) -> None:
        """Make index ``name``, or use the one another process made first."""
        with self._errors():
            try:
                self.es.indices.create(
                    index=name, mappings=mappings, settings=settings, wait_for_active_shards="all"
                )
            except BadRequestError as exc:
                if "resource_already_exists_exception" not in str(exc.body):
                    raise

    def _mappings(self) -> dict[str, Any]:
        with self._errors():
            return self.es.indices.get_mapping(index=self.index)[self.index]["mappings"]

    def _own_mappings(self) -> dict[str, Any]:
        """The mappings of an index that is a store's (or empty), before anything is written
        to it: an index of another application, given as --store by a slip, was given
        neardup's fields and documents."""
        mappings = self._mappings()
        if other := sorted(set(mappings.get("properties", {})) - _OWN_FIELDS):
            raise not_a_store(self.url, "an index", "an index", "fields", other)
        return {"properties": {}, **mappings}

    def _stored_settings(self) -> tuple[dict[str, Any] | None, _StoredSettings | None]:
        """The index's settings as stored, in two requests."""
        with self._errors():
            try:
                answer = self.es.indices.get(
                    index=self.index, filter_path=["*.mappings._meta", "*.settings.index.uuid"]
                )
            except NotFoundError:
                return None, None
            found = self._failover(self._settings_document)
        index = next(iter(answer.values()))
        meta = index.get("mappings", {}).get("_meta", {})
        uuid = index["settings"]["index"]["uuid"]
        # Measured settings too, in a store written before they had a document of their own.
        configuration, measured = _apart(meta.get("neardup_params") or {})
        version, documented = None, False
        if found is not None:
            version = {"if_seq_no": found["_seq_no"], "if_primary_term": found["_primary_term"]}
            documented = found["_source"]["index_uuid"] == uuid  # else of an index dropped since
            if documented:
                measured = found["_source"]["settings"]
        return configuration | measured or None, _StoredSettings(
            meta, uuid, configuration, measured, documented, version
        )

    def _settings_document(self) -> Any:
        try:
            return self.es.get(index=SETTINGS_INDEX, id=self.index)
        except NotFoundError:
            return None

    def _put_settings(self, settings: dict[str, Any], stored: _StoredSettings | None) -> bool:
        """Only what changed: the mapping's _meta where the configuration did (last writer
        wins: it changes when a store is made or its rules set), the document over the version
        read where the measured settings did."""
        if stored is None:
            self.apply_schema()
            return False
        configuration, measured = _apart(settings)
        if not stored.configuration:  # an index neardup did not make: is it a store's?
            self._own_mappings()
        if configuration != stored.configuration:
            with self._errors():
                self.es.indices.put_mapping(
                    index=self.index, meta=stored.meta | {"neardup_params": configuration}
                )
        if measured == stored.measured and (stored.documented or not measured):
            return True
        document = {"index_uuid": stored.uuid, "settings": measured}
        if stored.version is None:
            # Kept, not indexed (a mapping of their keys would grow), a copy on every node.
            copies = {"number_of_shards": 1, "auto_expand_replicas": "0-all"}
            self._create_index(SETTINGS_INDEX, {"enabled": False}, copies)
        with self._errors():
            try:
                if stored.version is None:
                    self.es.create(index=SETTINGS_INDEX, id=self.index, document=document)
                else:
                    self.es.index(
                        index=SETTINGS_INDEX, id=self.index, document=document, **stored.version
                    )
            except ConflictError:
                return False
        return True

    def drop(self) -> None:
        with self._errors():
            self.es.indices.delete(index=self.index, ignore_unavailable=True)
            with contextlib.suppress(NotFoundError):
                self.es.delete(index=SETTINGS_INDEX, id=self.index)
        self._settings = None

    # --- writing ----------------------------------------------------------------------------------

    def _upsert(
        self,
        documents: Mapping[str, Document],
        params: FingerprintParams,
        counted: Counted | None = None,  # the engine counts the shingles it indexes
    ) -> None:
        names, counting = field_names(self.settings), self.keeps_frequencies
        actions = (
            {"_index": self.index, "_id": d.id, "_source": engine_document(d, names, counting)}
            for d in documents.values()
        )
        self._bulk(actions)

    def _bulk(self, actions: Any) -> None:
        """Send bulk actions; rejected items are reported with their record ids, not swallowed:
        each reason once, with the first record it was given for."""
        failures: dict[str, list[str]] = {}  # reason: the ids rejected for it
        with self._errors():
            for ok, item in helpers.streaming_bulk(
                self.es, actions, chunk_size=500, raise_on_error=False, max_retries=3
            ):
                if not ok:
                    result = next(iter(item.values()))
                    reason = str(_reason(result) or result.get("status"))[:300]
                    failures.setdefault(reason, []).append(str(result.get("_id")))
        if not failures:
            return
        rejected = sum(map(len, failures.values()))
        if any(FLOOD_STAGE in reason for reason in failures):
            raise StoreFull(
                f"Elasticsearch at {self.endpoint}: its disk passed the flood-stage watermark, "
                "and the index takes no writes until the node has room (Elasticsearch then "
                f"lifts the block itself); {counted(rejected, 'record')} not written"
            )
        raise NeardupError(
            f"Elasticsearch rejected {counted(rejected, 'record')}: "
            + "; ".join(
                f"{ids[0]!r}{f' and {len(ids) - 1:,} more' if len(ids) > 1 else ''}: {reason}"
                for reason, ids in list(failures.items())[:3]
            )
        )

    def delete(self, ids: Sequence[str]) -> int:
        existing = list(self.get(ids))
        self._bulk({"_op_type": "delete", "_index": self.index, "_id": i} for i in existing)
        return len(existing)

    def flush(self) -> None:
        with self._errors():
            self.es.indices.refresh(index=self.index)

    # --- reading ----------------------------------------------------------------------------------

    def get(self, ids: Sequence[str]) -> dict[str, StoredRecord]:
        """By id, as written (real time), or as the :meth:`snapshot` reads them inside one."""
        if self._snapshot.get() is not None:
            return self._get_in_snapshot(list(ids))
        found: dict[str, StoredRecord] = {}
        ids = list(ids)
        for start in range(0, len(ids), PAGE):
            chunk = ids[start : start + PAGE]
            with self._errors():
                response = self._failover(
                    lambda chunk=chunk: _every_doc(
                        self.es.mget(index=self.index, ids=chunk, source=RECORD_FIELDS)
                    )
                )
            for doc in response["docs"]:
                if doc.get("found"):
                    found[doc["_id"]] = _record(doc["_source"])
        return found

    def _get_in_snapshot(self, ids: list[str]) -> dict[str, StoredRecord]:
        found: dict[str, StoredRecord] = {}
        for start in range(0, len(ids), PAGE):
            chunk = ids[start : start + PAGE]
            with self._errors():
                body = self._search(
                    query={"ids": {"values": chunk}},
                    size=len(chunk),
                    source=RECORD_FIELDS,
                    track_total_hits=False,
                )
            for hit in body["hits"]["hits"]:
                found[hit["_id"]] = _record(hit["_source"])
        return found

    def _walk(
        self,
        query: dict[str, Any],
        point_in_time: bool,
        source: bool | list[str] = False,
        page: int = PAGE,
        **request: Any,
    ) -> Iterator[dict[str, Any]]:
        """Hits in id order with search_after; over a point in time for a whole-index walk,
        or the :meth:`snapshot`'s inside one. A hit's id is its ``sort`` value."""
        shared = self._snapshot.get()
        # Ids sort the walk, so a new point in time, where a lost node took one, goes on after
        # the last id seen.
        point = shared or (_PointInTime() if point_in_time else None)
        after = None
        try:
            while True:
                with self._errors():
                    response = self._search_over(
                        point,
                        query=query,
                        sort=[{"id": "asc"}],
                        size=page,
                        source=source,
                        search_after=after,
                        track_total_hits=False,
                        **request,
                    )
                hits = response["hits"]["hits"]
                yield from hits
                if len(hits) < page:
                    return
                after = hits[-1]["sort"]
        finally:
            if point is not None and point is not shared:
                point.lost(self)

    def _close_point_in_time(self, pit: str | None) -> None:
        """Best effort: a point in time expires by itself after KEEP_ALIVE, and the walk may be
        ending because the server went away."""
        if pit:
            with contextlib.suppress(ApiError, elastic_transport.TransportError):
                self.es.close_point_in_time(id=pit)

    def ids_by_md5(self, md5s: Sequence[str]) -> dict[str, list[str]]:
        found: dict[str, list[str]] = {md5: [] for md5 in md5s}
        for asked in md5_queries(list(found)):
            query = {"terms": {"md5_hash": asked}}
            hits = self._walk(query, point_in_time=False, source=["md5_hash"], page=DIGEST_PAGE)
            for hit in hits:
                found[hit["_source"]["md5_hash"]].append(hit["sort"][0])
        return found

    def records_by_md5(self, md5s: Sequence[str]) -> dict[str, list[StoredRecord]]:
        found: dict[str, list[StoredRecord]] = {md5: [] for md5 in md5s}
        for asked in md5_queries(list(found)):
            query = {"terms": {"md5_hash": asked}}
            for hit in self._walk(query, False, source=RECORD_FIELDS, page=DIGEST_PAGE):
                found[hit["_source"]["md5_hash"]].append(_record(hit["_source"]))
        return found

    def iter_ids(self) -> Iterator[str]:
        return (hit["sort"][0] for hit in self._walk({"match_all": {}}, point_in_time=True))

    def iter_records(self, batch_size: int = 1000) -> Iterator[list[StoredRecord]]:
        """Every record as the walk reads it (fields from _source), over a point in time (the
        snapshot's inside one)."""
        hits = self._walk(
            {"match_all": {}}, point_in_time=True, source=RECORD_FIELDS, page=RECORD_PAGE
        )
        return in_batches((_record(hit["_source"]) for hit in hits), batch_size)

    def iter_digests(
        self, first_word: bool = False, batch_size: int = DIGEST_PAGE
    ) -> Iterator[list[tuple[str, str]]]:
        # The MD5 from doc values: no stored _source (with the content) to read, unless the
        # first word is asked for.
        hits = self._walk(
            {"match_all": {}},
            point_in_time=True,
            source=["first_word"] if first_word else False,
            page=batch_size,
            docvalue_fields=["md5_hash"],
        )
        digests = (
            (hit["fields"]["md5_hash"][0], hit["_source"]["first_word"] if first_word else "")
            for hit in hits
        )
        return in_batches(digests, batch_size)

    def lists_buckets(self, field: TokenField) -> bool:
        """Stores made before the bands had doc values cannot aggregate them."""
        name = field_names(self.settings)[field]
        return bool(self._mappings()["properties"].get(name, {}).get("doc_values", True))

    def shared_buckets(self, field: TokenField) -> Iterator[Buckets]:
        """Per token prefix, two terms aggregations, ``min_doc_count`` 2: the first lists the
        shared tokens, held to the records with a token of that prefix; the second, held to
        the records of those tokens, lists each one's MD5s with a sub-aggregation. A
        sub-aggregation costs every bucket of its parent, and most tokens of a prefix are
        held once: in one request, 2.8 s a prefix at a million records, in two 0.9 s.
        Composite aggregations cannot skip the tokens held once, and hash partitions make
        every request hash every token of the field. Prefixes go ``CONCURRENT_PREFIXES`` at a
        time: the engine works while the client waits."""
        name = field_names(self.settings)[field]
        prefixes = band_prefixes(self.params.bands, self.count())
        with self._errors():
            settings = self.es.indices.get_settings(index=self.index)
        single = all(s["settings"]["index"]["number_of_shards"] == "1" for s in settings.values())

        def listed(prefix: str) -> list[list[str]]:
            return self._prefix_buckets(name, prefix, single)

        for done, buckets in enumerate(ordered_map(listed, prefixes, CONCURRENT_PREFIXES), 1):
            yield Buckets.of(buckets, done / len(prefixes))

    def _prefix_buckets(self, name: str, prefix: str, single_shard: bool) -> list[list[str]]:
        """The shared tokens starting with ``prefix`` as buckets of MD5s; a prefix whose tokens
        do not fit one answer is split by one more hex digit."""
        shared = self._shared_tokens(name, prefix, single_shard)
        if shared is None:
            return [
                bucket
                for tail in hex_tails(1)
                for bucket in self._prefix_buckets(name, prefix + tail, single_shard)
            ]
        buckets: list[list[str]] = []
        chunk: list[str] = []
        held = 0  # the chunk's sub-buckets: at most one a record
        for token, count in shared:
            if chunk and held + count > MAX_BUCKETS // 2:
                buckets += self._token_md5s(name, prefix, chunk, single_shard)
                chunk, held = [], 0
            chunk.append(token)
            held += count
        if chunk:
            buckets += self._token_md5s(name, prefix, chunk, single_shard)
        return buckets

    def _terms(self, name: str, include: str, single_shard: bool) -> dict[str, Any]:
        return {
            "field": name,
            "include": include,  # tokens are digits, "_" and hex: nothing to escape
            "min_doc_count": 2,
            # Each shard sends every token of the prefix (held once there, it may be held again
            # on another shard), unless there is one shard; an answer that hit the limit is
            # split.
            "shard_min_doc_count": 2 if single_shard else 1,
            "size": MAX_BUCKETS,
            "shard_size": MAX_BUCKETS,
        }

    def _shared_tokens(
        self, name: str, prefix: str, single_shard: bool
    ) -> list[tuple[str, int]] | None:
        """(token, records holding it) of the shared tokens starting with ``prefix``; None when
        they do not fit one answer."""
        with self._errors():  # one-line errors, the server's unreachability among them
            try:
                body = self._search(
                    size=0,
                    track_total_hits=False,
                    query={"prefix": {name: prefix}},
                    aggs={"tokens": {"terms": self._terms(name, f"{prefix}.*", single_shard)}},
                )
            except ApiError as exc:
                if "too_many_buckets" in str(exc.body):
                    return None
                raise
        tokens = body["aggregations"]["tokens"]
        if len(tokens["buckets"]) >= MAX_BUCKETS or tokens["doc_count_error_upper_bound"]:
            return None
        return [(bucket["key"], bucket["doc_count"]) for bucket in tokens["buckets"]]

    def _token_md5s(
        self, name: str, prefix: str, tokens: list[str], single_shard: bool
    ) -> list[list[str]]:
        """The MD5s of the records holding each of ``tokens`` (all starting with ``prefix``)."""
        terms = self._terms(name, f"{prefix}.*", single_shard)
        contents = {"terms": {"field": "md5_hash", "size": BUCKET_CONTENTS}}
        with self._errors():
            body = self._search(
                size=0,
                track_total_hits=False,
                query={"terms": {name: tokens}},
                aggs={"tokens": {"terms": terms, "aggs": {"contents": contents}}},
            )
        buckets = []
        for bucket in body["aggregations"]["tokens"]["buckets"]:
            md5s = [content["key"] for content in bucket["contents"]["buckets"]]
            if bucket["contents"]["sum_other_doc_count"]:
                md5s = self._bucket_md5s(name, bucket["key"])
            buckets.append(md5s)
        return buckets

    def _bucket_md5s(self, name: str, token: str) -> list[str]:
        """The distinct MD5s of the records holding ``token``."""
        hits = self._walk({"term": {name: token}}, False, docvalue_fields=["md5_hash"])
        return list(dict.fromkeys(hit["fields"]["md5_hash"][0] for hit in hits))

    def count(self) -> int:
        with self._errors():
            if self._snapshot.get() is not None:
                return int(self._search(size=0, track_total_hits=True)["hits"]["total"]["value"])
            return int(self._failover(lambda: _whole(self.es.count(index=self.index)))["count"])

    def _frequencies(self, keys: np.ndarray) -> tuple[int, np.ndarray]:
        """A filters aggregation, one term filter per shingle: counts of live documents (the
        terms' own statistics still count deleted ones until their segments merge)."""

        def count(name: str, tokens: list[str]) -> tuple[int, list[int]]:
            filters = {f"s{n}": {"term": {name: t}} for n, t in enumerate(tokens)}
            with self._errors():
                body = self._search(
                    size=0,
                    track_total_hits=True,
                    aggs={"held": {"filters": {"filters": filters}}} if filters else None,
                )
            buckets = body.get("aggregations", {}).get("held", {}).get("buckets", {})
            held = [int(buckets[f"s{n}"]["doc_count"]) for n in range(len(tokens))]
            return int(body["hits"]["total"]["value"]), held

        return engine_frequencies(self.settings, keys, count)

    def _contents_holding(self, field: TokenField, keys: np.ndarray, cap: int) -> list[int]:
        """A filters aggregation, one term filter per token, each with a terms aggregation of
        at most ``cap`` MD5s: the buckets it lists are the contents counted (a cardinality
        aggregation would estimate them)."""
        name = field_names(self.settings)[field]
        filters = {f"t{n}": {"term": {name: t}} for n, t in enumerate(field.strings(keys))}
        md5s = {"terms": {"field": "md5_hash", "size": cap}}
        with self._errors():
            body = self._search(
                size=0,
                aggs={"held": {"filters": {"filters": filters}, "aggs": {"md5s": md5s}}},
            )
        buckets = body["aggregations"]["held"]["buckets"]
        return [len(buckets[f"t{n}"]["md5s"]["buckets"]) for n in range(len(keys))]

    def candidates_many(self, queries: Sequence[CandidateQuery]) -> list[list[Candidate]]:
        """The queries in as few _msearch round trips as hold at most MSEARCH_HITS rows each:
        Elasticsearch builds a whole answer in its heap, and a check's 500 queries of 10,000
        rows each tripped a 512 MB node's circuit breaker (429, data too large)."""
        asked = [q for q in queries if len(q.keys)]
        names = field_names(self.settings) if asked else {}
        answers: list[dict[str, Any]] = []
        for run in _runs_of_rows(asked, MSEARCH_HITS):
            searches: list[dict[str, Any]] = []
            for query in run:
                header = {"index": self.index, "allow_partial_search_results": False}
                searches += [header, _candidate_search(query, names[query.field])]
            with self._errors():
                answered = self._failover(
                    lambda s=searches: _every_answer(self.es.msearch(searches=s))
                )
            answers += answered["responses"]
        return self._candidates_of(queries, iter(answers))

    def _candidates_of(
        self, queries: Sequence[CandidateQuery], answers: Iterator[dict[str, Any]]
    ) -> list[list[Candidate]]:
        """Each query's candidates from the _msearch ``answers`` of those with keys, in order."""
        results = []
        for query in queries:
            if not len(query.keys):
                results.append([])
                continue
            answer = next(answers)
            if "error" in answer:
                raise NeardupError(f"Elasticsearch at {self.endpoint}: {_reason(answer)}")
            results.append(
                [
                    Candidate(_record(hit["_source"]), round(hit["_score"]))
                    for hit in answer["hits"]["hits"]
                ]
            )
        return results

    def close(self) -> None:
        self.es.close()


def _runs_of_rows(queries: Sequence[CandidateQuery], most: int) -> Iterator[list[CandidateQuery]]:
    """``queries`` in runs whose rows add up to at most ``most`` (or one query's, past it)."""
    run: list[CandidateQuery] = []
    rows = 0
    for query in queries:
        if run and rows + query.rows > most:
            yield run
            run, rows = [], 0
        run.append(query)
        rows += query.rows
    if run:
        yield run


def _apart(settings: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``settings`` as (the configuration, kept in _meta; what commands measured)."""
    configuration = {k: v for k, v in settings.items() if k not in MEASURED_SETTINGS}
    return configuration, {k: v for k, v in settings.items() if k in MEASURED_SETTINGS}


@dataclass(frozen=True)
class _StoredSettings:
    meta: dict[str, Any]  # the mapping's _meta
    uuid: str  # the index's: a settings document names it
    configuration: dict[str, Any]
    measured: dict[str, Any]  # MEASURED_SETTINGS
    documented: bool  # whether the measured settings are the document's (else _meta's, or none)
    version: dict[str, int] | None  # of the settings document, None without one


class _ShardsMissing(Exception):
    """An answer that left out some shards: a node holding them was lost."""


# Errors a lost node causes while its shards move to their other copies.
_FAILOVER_ERRORS = (
    "search_phase_execution_exception",
    "search_context_missing_exception",
    "no_shard_available_action_exception",
    "node_disconnected_exception",
    "node_not_connected_exception",
    "unavailable_shards_exception",
)


def _transient(error: Exception, nodes: int) -> bool:
    """Whether ``error`` is one a lost node causes, gone once its shards have moved; with one
    node in the URL, no answer at all is final (there is no other node to ask)."""
    if isinstance(error, _ShardsMissing):
        return True
    if isinstance(error, elastic_transport.ConnectionError):
        return nodes > 1
    if isinstance(error, ApiError):
        return error.meta.status in RETRY_STATUSES or any(
            kind in str(error.body) for kind in _FAILOVER_ERRORS
        )
    return False


def _whole(answer: Any) -> Any:
    """``answer``, unless some of the shards it should cover failed."""
    shards = answer.get("_shards") or {}
    if shards.get("failed"):
        raise _ShardsMissing(f"{shards['failed']} of {shards.get('total')} shards did not answer")
    return answer


def _every_answer(answer: Any) -> Any:
    """An _msearch answer, unless one of its searches failed as a lost node makes them fail."""
    for one in answer["responses"]:
        if "error" in one and any(kind in str(one) for kind in _FAILOVER_ERRORS):
            raise _ShardsMissing(_reason(one) or "a search failed")
        if "error" not in one:
            _whole(one)
    return answer


def _every_doc(answer: Any) -> Any:
    """An _mget answer, unless a document could not be read (its shard's copies moving)."""
    failed = [doc for doc in answer["docs"] if "error" in doc]
    if failed:
        raise _ShardsMissing(_reason(failed[0]) or "a document could not be read")
    return answer


def _record(source: dict[str, Any]) -> StoredRecord:
    return StoredRecord(*(source[f] for f in RECORD_FIELDS))


def _reason(body: Any) -> str | None:
    """The most specific reason in an Elasticsearch error body."""
    if not isinstance(body, dict):
        return None
    error = body.get("error", body)
    if isinstance(error, dict):
        causes = error.get("root_cause") or []
        cause = causes[0] if causes else error
        return cause.get("reason") or error.get("reason") or error.get("type")
    return str(error)


def _state_of(answer: Mapping[str, Any]) -> tuple[int, float, float]:
    """What a STATE_REQUEST's answer says of the state searched."""
    stats = answer["aggregations"]["seq_no"]
    return answer["hits"]["total"]["value"], stats["sum"], stats["max"] or 0.0
