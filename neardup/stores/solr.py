"""Apache Solr behind ``solr://host:port/solr/NAME`` (standalone core or SolrCloud collection).

Records are Solr documents with the fields of ``schema/solr/conf/managed-schema.xml``; the store's
settings live in one extra document, ``_neardup_parameters``. A candidate query is an OR of
constant-score term clauses (``signature:"17_2837461"^=1 …``), so a hit's score is exactly the
number of tokens it shares with the query, on every shard; results are sorted by score, then id.
Filters are term queries; ids are fetched with real-time get; walks over all ids use
``cursorMark``. Documents are added in batches and committed once, at :meth:`flush`.

Every request goes through :meth:`SolrStore._request`, over one urllib3 connection pool that
retries connection errors and 502/503/504 answers. (pysolr covers search and update but not the
admin, Schema API, real-time get and Collections API calls a store needs, and it turns connection
errors into text, so a store built on it had two HTTP paths and matched error messages.)
"""

from __future__ import annotations

import json
import netrc
import os
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import urlencode, urlsplit

import numpy as np
import urllib3
from urllib3.util.retry import Retry

from ..errors import NeardupError, StoreUnavailable
from ..fingerprint import FingerprintParams, TokenField
from .base import (
    Buckets,
    Candidate,
    CandidateQuery,
    Document,
    Store,
    StoredRecord,
    ordered_map,
)
from .schema import (
    band_prefixes,
    engine_document,
    engine_frequencies,
    field_names,
    solr_schema,
)
from .url import RETRY_STATUSES, parse_engine_url

RECORD_FIELDS = "id,content,md5_hash,first_word,num_words"

PARAMS_ID = "_neardup_parameters"
CONFIGSET_NAME = "neardup"
# Documents per update request: keeps a request a few MB even with every token field.
REQUEST_DOCUMENTS = 1000
RECORDS = "md5_hash:[* TO *]"  # every record, and not the settings document
PAGE = 1000
# Records per page of a walk for MD5s only.
DIGEST_PAGE = 10_000
CONCURRENT_QUERIES = 4


def connection_pool(endpoint: str, retries: int) -> urllib3.PoolManager:
    """Connections to one server that retry connection errors and 502/503/504 answers with
    exponential backoff, through the environment's proxy for ``endpoint`` if it names one.

    urllib3 directly: requests re-reads proxies and ~/.netrc from the environment and prepares
    each request in Python, which cost more than Solr's own answer to a lookup (2 of 3 ms
    a lookup); the environment is read once, here."""
    retry = Retry(
        total=retries,
        backoff_factor=0.5,
        status_forcelist=RETRY_STATUSES,
        allowed_methods=None,  # every update is idempotent by id, so POSTs may be retried too
        raise_on_status=False,
    )
    ca_bundle = os.environ.get("REQUESTS_CA_BUNDLE") or os.environ.get("CURL_CA_BUNDLE")
    options: dict[str, Any] = {"maxsize": 16, "retries": retry, "ca_certs": ca_bundle}
    parts = urlsplit(endpoint)
    proxy = urllib.request.getproxies().get(parts.scheme)
    if proxy and not urllib.request.proxy_bypass(parts.hostname or ""):
        return urllib3.ProxyManager(proxy, **options)
    return urllib3.PoolManager(**options)


def netrc_auth(endpoint: str) -> tuple[str, str] | None:
    """The login for ``endpoint``'s host in ~/.netrc (or $NETRC), as curl and requests read it."""
    try:
        found = netrc.netrc(os.environ.get("NETRC")).authenticators(
            urlsplit(endpoint).hostname or ""
        )
    except (OSError, netrc.NetrcParseError):
        return None
    return (found[0], found[2]) if found else None


def _quote(value: str) -> str:
    """A Lucene phrase for one exact term: every character of the value is data."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


class SolrStore(Store):
    def __init__(self, url: str, *, create: bool = True, timeout: float = 60, retries: int = 3):
        example = "solr://host:port/solr/NAME"
        parsed = parse_engine_url(url, example, 8983, "SOLR")
        root, _, self.name = parsed.path.rpartition("/")
        if not root.endswith("/solr") or not self.name:
            raise NeardupError(f"a Solr store URL looks like {example}, not {parsed.public!r}")
        if parsed.others:  # one connection pool to one base URL: no failover between nodes
            raise NeardupError(
                f"a Solr store URL names one node, not {len(parsed.others) + 1}: "
                f"{parsed.public!r} (Elasticsearch URLs may name several)"
            )
        self.base = parsed.endpoint + root
        self.url = parsed.public
        self.shards, self.replicas = parsed.shards, parsed.replicas
        self.timeout = timeout
        self.http = connection_pool(parsed.endpoint, retries)
        auth = parsed.auth or netrc_auth(parsed.endpoint)
        self.headers = urllib3.make_headers(basic_auth=":".join(auth)) if auth else {}
        self._cloud: bool | None = None
        if not create and not self._exists():
            raise StoreUnavailable(f"no Solr core or collection {self.name!r} at {self.base}")

    # --- HTTP -------------------------------------------------------------------------------------

    def _request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        form: Mapping[str, Any] | Sequence[tuple[str, str]] | None = None,
        json_body: Any = None,
    ) -> dict[str, Any]:
        """One request to the server (``path`` below /solr), answered as JSON; transport and
        server errors become one-line user errors. ``form`` is sent form-encoded, ``json_body``
        as JSON; list values repeat their parameter."""
        url = f"{self.base}/{path}" + (f"?{urlencode(params, doseq=True)}" if params else "")
        headers, body = dict(self.headers), None
        if form is not None:
            headers["Content-Type"] = "application/x-www-form-urlencoded"
            body = urlencode(form, doseq=True)
        elif json_body is not None:
            headers["Content-Type"] = "application/json"
            body = json.dumps(json_body)
        try:
            response = self.http.request(
                method, url, body=body, headers=headers, timeout=self.timeout
            )
        except urllib3.exceptions.HTTPError as exc:
            reason = type(getattr(exc, "reason", None) or exc).__name__
            raise StoreUnavailable(f"Solr at {self.base} is not reachable ({reason})") from None
        if response.status == 401:
            raise NeardupError(f"Solr at {self.base} refused the credentials (HTTP 401)")
        try:
            answer = json.loads(response.data)
        except ValueError:
            answer = {}
        if response.status != 200:
            error = answer.get("error", {}) if isinstance(answer, dict) else {}
            text = response.data[:200].decode("utf-8", "replace")
            message = (error.get("msg") or text).strip().splitlines()
            raise NeardupError(
                f"Solr at {self.base}: HTTP {response.status}: {(message or [''])[0][:300]}"
            )
        return answer

    def _core(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        """A request to this core or collection."""
        return self._request(method, f"{self.name}/{path}", **kwargs)

    def _search(self, **params: Any) -> dict[str, Any]:
        # POSTed as a form: a query with thousands of clauses would not fit in a URL.
        return self._core("POST", "select", form={**params, "wt": "json"})

    def _update(self, body: Any, **params: Any) -> None:
        self._core("POST", "update", params={**params, "wt": "json"}, json_body=body)

    # --- schema -----------------------------------------------------------------------------------

    @property
    def cloud(self) -> bool:
        if self._cloud is None:
            info = self._request("GET", "admin/info/system", params={"wt": "json"})
            self._cloud = info.get("mode") == "solrcloud"
        return self._cloud

    def _exists(self) -> bool:
        if self.cloud:
            listing = self._request("GET", "admin/collections", params={"action": "LIST"})
            return self.name in listing.get("collections", [])
        status = self._request("GET", "admin/cores", params={"action": "STATUS", "core": self.name})
        return bool(status.get("status", {}).get(self.name))

    def apply_schema(self) -> None:
        """Create the core or collection from the configset if missing; add any missing fields."""
        if not self._exists():
            if self.cloud:
                self._request(
                    "GET",
                    "admin/collections",
                    params={
                        "action": "CREATE",
                        "name": self.name,
                        "numShards": self.shards,
                        "replicationFactor": self.replicas,
                        "collection.configName": CONFIGSET_NAME,
                        "waitForFinalState": "true",
                    },
                )
            else:
                self._request(
                    "GET",
                    "admin/cores",
                    params={"action": "CREATE", "name": self.name, "configSet": CONFIGSET_NAME},
                )
        self._add_missing_fields()

    def _add_missing_fields(self) -> None:
        types, fields = solr_schema()
        have_types = {t["name"] for t in self._core("GET", "schema/fieldtypes")["fieldTypes"]}
        have_fields = {f["name"] for f in self._core("GET", "schema/fields")["fields"]}
        commands: dict[str, list[dict[str, object]]] = {
            "add-field-type": [t for t in types if t["name"] not in have_types],
            "add-field": [f for f in fields if f["name"] not in have_fields],
        }
        commands = {k: v for k, v in commands.items() if v}
        if commands:
            self._core("POST", "schema", json_body=commands)

    def drop(self) -> None:
        if not self._exists():
            return
        if self.cloud:
            self._request(
                "GET", "admin/collections", params={"action": "DELETE", "name": self.name}
            )
        else:
            params = {"action": "UNLOAD", "core": self.name, "deleteInstanceDir": "true"}
            self._request("GET", "admin/cores", params=params)
        self._settings = None

    # --- settings ---------------------------------------------------------------------------------

    def read_settings(self) -> dict[str, Any] | None:
        if not self._exists():
            return None
        stored = self._real_time_get([PARAMS_ID]).get(PARAMS_ID)
        return json.loads(stored["neardup_params"]) if stored else None

    def write_settings(self, settings: dict[str, Any]) -> None:
        self.apply_schema()
        document = {"id": PARAMS_ID, "neardup_params": json.dumps(settings, sort_keys=True)}
        self._update([document], commit="true")

    # --- writing ----------------------------------------------------------------------------------

    def _upsert(self, documents: Mapping[str, Document], params: FingerprintParams) -> None:
        if PARAMS_ID in documents:
            raise NeardupError(f"the id {PARAMS_ID!r} is reserved by the Solr store")
        names = field_names(self.settings)
        docs = [engine_document(d, names, self.keeps_frequencies) for d in documents.values()]
        for start in range(0, len(docs), REQUEST_DOCUMENTS):
            self._update(docs[start : start + REQUEST_DOCUMENTS])

    def delete(self, ids: Sequence[str]) -> int:
        existing = [i for i in self.get(ids) if i != PARAMS_ID]
        if existing:
            self._update({"delete": existing})
        return len(existing)

    def flush(self) -> None:
        self._update({"commit": {"waitSearcher": True}})

    # --- reading ----------------------------------------------------------------------------------

    def _real_time_get(self, ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """Documents by id, committed or not; real-time get takes ids as repeated parameters."""
        found: dict[str, dict[str, Any]] = {}
        for start in range(0, len(ids), PAGE):
            body = self._core(
                "POST",
                "get",
                form=[("id", i) for i in ids[start : start + PAGE]] + [("wt", "json")],
            )
            # One id comes back as {"doc": …}, several as {"response": {"docs": […]}}.
            docs = [body["doc"]] if "doc" in body else body["response"]["docs"]
            found.update({doc["id"]: doc for doc in docs if doc})
        return found

    def get(self, ids: Sequence[str]) -> dict[str, StoredRecord]:
        return {
            i: _record(doc)
            for i, doc in self._real_time_get(list(ids)).items()
            if "md5_hash" in doc
        }

    def _walk(self, query: str, fields: str = "id", rows: int = PAGE) -> Iterator[dict[str, Any]]:
        """Every matching document in id order, by cursorMark (no deep paging)."""
        cursor = "*"
        while True:
            page = self._search(q=query, fl=fields, sort="id asc", rows=rows, cursorMark=cursor)
            docs = page["response"]["docs"]
            yield from docs
            # A short page is the last: no request just to learn that the cursor stopped.
            if len(docs) < rows or page["nextCursorMark"] == cursor:
                return
            cursor = page["nextCursorMark"]

    def ids_by_md5(self, md5s: Sequence[str]) -> dict[str, list[str]]:
        found: dict[str, list[str]] = {md5: [] for md5 in md5s}
        if found:  # MD5s are hex: no commas to escape in the terms list
            query = "{!terms f=md5_hash}" + ",".join(found)
            for doc in self._walk(query, "id,md5_hash", DIGEST_PAGE):
                found[doc["md5_hash"]].append(doc["id"])
        return found

    def records_by_md5(self, md5s: Sequence[str]) -> dict[str, list[StoredRecord]]:
        found: dict[str, list[StoredRecord]] = {md5: [] for md5 in md5s}
        if found:  # large pages: each page runs the terms query again
            query = "{!terms f=md5_hash}" + ",".join(found)
            for doc in self._walk(query, RECORD_FIELDS, DIGEST_PAGE):
                found[doc["md5_hash"]].append(_record(doc))
        return found

    def iter_ids(self) -> Iterator[str]:
        return (doc["id"] for doc in self._walk(RECORDS))

    def iter_digests(
        self, first_word: bool = False, batch_size: int = DIGEST_PAGE
    ) -> Iterator[list[tuple[str, str]]]:
        fields = "md5_hash,first_word" if first_word else "md5_hash"
        batch: list[tuple[str, str]] = []
        for doc in self._walk(RECORDS, fields, batch_size):
            batch.append((doc["md5_hash"], doc["first_word"] if first_word else ""))
            if len(batch) == batch_size:
                yield batch
                batch = []
        if batch:
            yield batch

    def shared_buckets(self, field: TokenField) -> Iterator[Buckets]:
        """A JSON terms facet per token prefix, ``mincount`` 2, held to the records with a
        token of that prefix. Most shared tokens are held by two records, whose MD5s are the
        bucket's ``min`` and ``max``: aggregations computed in the facet's one pass over the
        records. Only the tokens held by more are listed again with an MD5 sub-facet, which
        Solr computes bucket by bucket (a facet of a million records' tokens takes a minute
        with the sub-facet, 0.2 s without). The export handler cannot sort by a multi-valued
        field, so streaming expressions would group every posting in the client. Prefixes go
        ``CONCURRENT_QUERIES`` at a time: the engine works while the client waits."""
        name = field_names(self.settings)[field]
        prefixes = band_prefixes(self.params.bands, self.count())

        def listed(prefix: str) -> list[list[str]]:
            ends = {"low": "min(md5_hash)", "high": "max(md5_hash)"}
            found = self._token_facet(f"{{!prefix f={name}}}{prefix}", name, prefix, ends)
            buckets = [[b["low"], b["high"]] for b in found if b["count"] == 2]
            larger = [b["val"] for b in found if b["count"] > 2]
            if larger:  # tokens are digits, "_" and hex: no commas to escape
                contents = {"type": "terms", "field": "md5_hash", "limit": -1}
                contents["method"] = "dvhash"  # a hash per bucket, not an array of every MD5
                wanted = set(larger)
                query = f"{{!terms f={name}}}" + ",".join(larger)
                found = self._token_facet(query, name, prefix, {"contents": contents})
                buckets += [
                    [c["val"] for c in b["contents"]["buckets"]]
                    for b in found
                    if b["val"] in wanted
                ]
            return buckets

        for done, buckets in enumerate(ordered_map(listed, prefixes, CONCURRENT_QUERIES), 1):
            yield Buckets.of(buckets, done / len(prefixes))

    def _token_facet(
        self, query: str, name: str, prefix: str, facet: dict[str, Any]
    ) -> list[dict[str, Any]]:
        """The tokens of ``prefix`` held by two or more of the records ``query`` matches, with
        the ``facet`` of each."""
        tokens = {
            "type": "terms",
            "field": name,
            "prefix": prefix,
            "mincount": 2,
            "limit": -1,
            "facet": facet,
        }
        body = self._search(q=query, rows=0, **{"json.facet": json.dumps({"tokens": tokens})})
        return body.get("facets", {}).get("tokens", {}).get("buckets", [])

    def count(self) -> int:
        return int(self._search(q=RECORDS, rows=0)["response"]["numFound"])

    def _frequencies(self, keys: np.ndarray) -> tuple[int, np.ndarray]:
        """One query facet per shingle (JSON Facet API): facets count live documents only,
        where the terms component's document frequencies still count deleted ones until their
        segments merge."""

        def count(name: str, tokens: list[str]) -> tuple[int, list[int]]:
            facets = {f"s{n}": {"type": "query", "q": f"{name}:{t}"} for n, t in enumerate(tokens)}
            body = self._search(q=RECORDS, rows=0, **{"json.facet": json.dumps(facets)})
            found = body.get("facets", {})
            held = [int(found.get(f"s{n}", {}).get("count", 0)) for n in range(len(tokens))]
            return int(body["response"]["numFound"]), held

        return engine_frequencies(self.settings, keys, count)

    def _candidates(self, q: CandidateQuery) -> list[Candidate]:
        if not len(q.keys):
            return []
        name = field_names(self.settings)[q.field]
        tokens = dict.fromkeys(q.field.strings(q.keys))
        filters = []
        if q.first_word is not None:
            filters.append(f"{{!term f=first_word}}{q.first_word}")
        if q.exclude_md5:
            filters.append("-md5_hash:(" + " ".join(_quote(m) for m in q.exclude_md5) + ")")
        results = self._search(
            q=" ".join(f"{name}:{_quote(t)}^=1" for t in tokens),
            **{"q.op": "OR"},
            fq=filters,
            fl=f"{RECORD_FIELDS},score",
            sort="score desc,id asc",
            rows=q.rows,
        )
        return [Candidate(_record(d), round(d["score"])) for d in results["response"]["docs"]]

    def candidates_many(self, queries: Sequence[CandidateQuery]) -> list[list[Candidate]]:
        """Several queries at once, over a few connections (Solr answers them in parallel)."""
        if len(queries) == 1:  # a lookup's query: a thread pool would only add latency
            return [self._candidates(queries[0])]
        with ThreadPoolExecutor(max_workers=CONCURRENT_QUERIES) as pool:
            return list(pool.map(self._candidates, queries))

    def close(self) -> None:
        self.http.clear()


def _record(doc: dict[str, Any]) -> StoredRecord:
    return StoredRecord(
        doc["id"], doc["content"], doc["md5_hash"], doc["first_word"], doc["num_words"]
    )
