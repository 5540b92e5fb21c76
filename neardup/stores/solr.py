"""Apache Solr behind ``solr://host:port/solr/NAME`` (standalone core or SolrCloud collection).

Records are Solr documents with the fields of ``schema/solr/conf/managed-schema.xml``; the
fingerprint parameters live in one extra document, ``_neardup_parameters``. A candidate query is
an OR of constant-score term clauses (``content_sg:"17_2837461"^=1 …``), so a hit's score is
exactly the number of tokens it shares with the query, on every shard; results are sorted by score,
then id. Filters are term queries; ids are fetched with real-time get; walks over all ids use
``cursorMark``. Documents are added in batches and committed once, at :meth:`flush`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import pysolr
import requests
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry

from ..errors import NeardupError, StoreUnavailable
from ..fingerprint import FingerprintParams
from .base import Candidate, CandidateQuery, Document, Store, StoredRecord
from .schema import TOKEN_FIELD_NAMES, engine_document, solr_schema

PARAMS_ID = "_neardup_parameters"
CONFIGSET_NAME = "neardup"
# Documents per update request: keeps a request a few MB even with every token field.
REQUEST_DOCUMENTS = 1000
RECORDS = "md5_hash:[* TO *]"  # every record, and not the parameters document
PAGE = 1000
CONCURRENT_QUERIES = 4


def _session(auth: tuple[str, str] | None, retries: int) -> requests.Session:
    """A session that retries connection errors and 5xx answers with exponential backoff."""
    session = requests.Session()
    retry = Retry(
        total=retries,
        backoff_factor=0.5,
        status_forcelist=(500, 502, 503, 504),
        allowed_methods=None,  # every update is idempotent by id, so POSTs may be retried too
        raise_on_status=False,
    )
    session.mount("http://", HTTPAdapter(max_retries=retry, pool_maxsize=16))
    session.mount("https://", HTTPAdapter(max_retries=retry, pool_maxsize=16))
    session.auth = auth
    return session


def _quote(value: str) -> str:
    """A Lucene phrase for one exact term: every character of the value is data."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


class SolrStore(Store):
    def __init__(self, url: str, *, create: bool = True, timeout: float = 60, retries: int = 3):
        parts = urlsplit(url)
        path = parts.path.rstrip("/")
        if "/solr/" not in path + "/" or not path.rsplit("/", 1)[-1] or path.endswith("/solr"):
            raise NeardupError(
                f"a Solr store URL looks like solr://host:port/solr/NAME, not {url!r}"
            )
        scheme = "https" if parts.scheme == "solr+https" else "http"
        self.name = path.rsplit("/", 1)[-1]
        host = parts.hostname or "127.0.0.1"
        self.base = f"{scheme}://{host}:{parts.port or 8983}{path.rsplit('/', 1)[0]}"
        self.url = f"{parts.scheme}://{host}:{parts.port or 8983}{path}"
        options = parse_qs(parts.query)
        self.shards = int(options.get("shards", ["1"])[0])
        self.replicas = int(options.get("replicas", ["1"])[0])
        user = unquote(parts.username) if parts.username else os.environ.get("NEARDUP_SOLR_USER")
        password = (
            unquote(parts.password) if parts.password else os.environ.get("NEARDUP_SOLR_PASSWORD")
        )
        auth = (user, password or "") if user else None
        self.timeout = timeout
        self.session = _session(auth, retries)
        self.solr = pysolr.Solr(
            f"{self.base}/{self.name}", timeout=timeout, session=self.session, auth=auth
        )
        self._cloud: bool | None = None
        if not create and not self._exists():
            raise StoreUnavailable(f"no Solr core or collection {self.name!r} at {self.base}")

    # --- HTTP -------------------------------------------------------------------------------------

    @contextmanager
    def _errors(self) -> Iterator[None]:
        """Turn transport and Solr errors into one-line user errors."""
        try:
            yield
        except pysolr.SolrError as exc:
            first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc)
            if "Failed to connect" in first_line or "timed out" in first_line:
                raise StoreUnavailable(f"Solr at {self.base} is not reachable") from None
            raise NeardupError(f"Solr at {self.base}: {first_line[:300]}") from None
        except requests.RequestException as exc:
            raise StoreUnavailable(
                f"Solr at {self.base} is not reachable ({type(exc).__name__})"
            ) from None

    def _call(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        with self._errors():
            response = self.session.request(
                method, f"{self.base}/{path}", timeout=self.timeout, **kwargs
            )
        if response.status_code == 401:
            raise NeardupError(f"Solr at {self.base} refused the credentials (HTTP 401)")
        try:
            body = response.json()
        except ValueError:
            body = {}
        if response.status_code != 200:
            message = body.get("error", {}).get("msg") or response.text[:200]
            raise NeardupError(f"Solr at {self.base}: HTTP {response.status_code}: {message}")
        return body

    # --- schema -----------------------------------------------------------------------------------

    @property
    def cloud(self) -> bool:
        if self._cloud is None:
            info = self._call("GET", "admin/info/system", params={"wt": "json"})
            self._cloud = info.get("mode") == "solrcloud"
        return self._cloud

    def _exists(self) -> bool:
        if self.cloud:
            listing = self._call("GET", "admin/collections", params={"action": "LIST"})
            return self.name in listing.get("collections", [])
        status = self._call("GET", "admin/cores", params={"action": "STATUS", "core": self.name})
        return bool(status.get("status", {}).get(self.name))

    def apply_schema(self) -> None:
        """Create the core or collection from the configset if missing; add any missing fields."""
        if not self._exists():
            if self.cloud:
                self._call(
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
                self._call(
                    "GET",
                    "admin/cores",
                    params={"action": "CREATE", "name": self.name, "configSet": CONFIGSET_NAME},
                )
        self._add_missing_fields()

    def _add_missing_fields(self) -> None:
        types, fields = solr_schema()
        have_types = {
            t["name"] for t in self._call("GET", f"{self.name}/schema/fieldtypes")["fieldTypes"]
        }
        have_fields = {f["name"] for f in self._call("GET", f"{self.name}/schema/fields")["fields"]}
        commands: dict[str, list[dict[str, object]]] = {
            "add-field-type": [t for t in types if t["name"] not in have_types],
            "add-field": [f for f in fields if f["name"] not in have_fields],
        }
        commands = {k: v for k, v in commands.items() if v}
        if commands:
            self._call("POST", f"{self.name}/schema", json=commands)

    # --- parameters -------------------------------------------------------------------------------

    def read_params(self) -> FingerprintParams | None:
        if not self._exists():
            return None
        stored = self._real_time_get([PARAMS_ID]).get(PARAMS_ID)
        if not stored:
            return None
        return FingerprintParams.from_dict(json.loads(stored["neardup_params"]))

    def write_params(self, params: FingerprintParams) -> None:
        self.apply_schema()
        with self._errors():
            self.solr.add(
                [{"id": PARAMS_ID, "neardup_params": json.dumps(params.to_dict(), sort_keys=True)}],
                commit=True,
            )

    # --- writing ----------------------------------------------------------------------------------

    def upsert(self, documents: Sequence[Document]) -> None:
        latest = {d.id: d for d in documents}
        if PARAMS_ID in latest:
            raise NeardupError(f"the id {PARAMS_ID!r} is reserved by the Solr store")
        docs = [engine_document(d) for d in latest.values()]
        with self._errors():
            for start in range(0, len(docs), REQUEST_DOCUMENTS):
                self.solr.add(docs[start : start + REQUEST_DOCUMENTS], commit=False)

    def delete(self, ids: Sequence[str]) -> int:
        existing = [i for i in self.get(ids) if i != PARAMS_ID]
        if existing:
            with self._errors():
                self.solr.delete(id=existing, commit=False)
        return len(existing)

    def flush(self) -> None:
        with self._errors():
            self.solr.commit(waitSearcher=True)

    # --- reading ----------------------------------------------------------------------------------

    def _real_time_get(self, ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """Documents by id, committed or not; real-time get takes ids as repeated parameters."""
        found: dict[str, dict[str, Any]] = {}
        for start in range(0, len(ids), PAGE):
            body = self._call(
                "POST",
                f"{self.name}/get",
                data=[("id", i) for i in ids[start : start + PAGE]] + [("wt", "json")],
            )
            # One id comes back as {"doc": …}, several as {"response": {"docs": […]}}.
            docs = [body["doc"]] if "doc" in body else body["response"]["docs"]
            found.update({doc["id"]: doc for doc in docs if doc})
        return found

    def get(self, ids: Sequence[str]) -> dict[str, StoredRecord]:
        return {
            i: StoredRecord(i, doc["content"], doc["md5_hash"], doc["first_word"], doc["num_words"])
            for i, doc in self._real_time_get(list(ids)).items()
            if "md5_hash" in doc
        }

    def _walk(self, query: str, fields: str = "id") -> Iterator[dict[str, Any]]:
        """Every matching document in id order, by cursorMark (no deep paging)."""
        cursor = "*"
        while True:
            with self._errors():
                page = self.solr.search(
                    query, fl=fields, sort="id asc", rows=PAGE, cursorMark=cursor
                )
            yield from page.docs
            # A short page is the last: no request just to learn that the cursor stopped.
            if len(page.docs) < PAGE or page.nextCursorMark == cursor:
                return
            cursor = page.nextCursorMark

    def ids_by_md5(self, md5s: Sequence[str]) -> dict[str, list[str]]:
        found: dict[str, list[str]] = {md5: [] for md5 in md5s}
        if found:  # MD5s are hex: no commas to escape in the terms list
            for doc in self._walk("{!terms f=md5_hash}" + ",".join(found), "id,md5_hash"):
                found[doc["md5_hash"]].append(doc["id"])
        return found

    def iter_ids(self) -> Iterator[str]:
        return (doc["id"] for doc in self._walk(RECORDS))

    def count(self) -> int:
        with self._errors():
            return self.solr.search(RECORDS, rows=0).hits

    def _candidates(self, q: CandidateQuery) -> list[Candidate]:
        if not q.tokens:
            return []
        name = TOKEN_FIELD_NAMES[q.field]
        query = " ".join(f"{name}:{_quote(t)}^=1" for t in dict.fromkeys(q.tokens))
        filters = []
        if q.first_word is not None:
            filters.append(f"{{!term f=first_word}}{q.first_word}")
        if q.exclude_md5:
            filters.append("-md5_hash:(" + " ".join(_quote(m) for m in q.exclude_md5) + ")")
        with self._errors():
            results = self.solr.search(
                query,
                **{"q.op": "OR"},
                fq=filters,
                fl="id,md5_hash,score",
                sort="score desc,id asc",
                rows=q.rows,
            )
        return [Candidate(d["id"], round(d["score"]), d["md5_hash"]) for d in results.docs]

    def candidates_many(self, queries: Sequence[CandidateQuery]) -> list[list[Candidate]]:
        """Several queries at once, over a few connections (Solr answers them in parallel)."""
        if len(queries) == 1:  # a lookup's query: a thread pool would only add latency
            return [self._candidates(queries[0])]
        with ThreadPoolExecutor(max_workers=CONCURRENT_QUERIES) as pool:
            return list(pool.map(self._candidates, queries))

    def close(self) -> None:
        self.session.close()
