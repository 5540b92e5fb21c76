"""Apache Solr behind ``solr://host:port/solr/NAME`` (standalone core or SolrCloud collection) or
``solr+zk://zk1:2181,zk2:2181[/chroot]/NAME`` (a SolrCloud collection found through ZooKeeper).

Records are Solr documents with the fields of ``schema/solr/conf/managed-schema.xml``; the store's
settings live in one extra document, ``_neardup_parameters``. A candidate query is an OR of
constant-score term clauses (``signature:"17_2837461"^=1 …``), so a hit's score is exactly the
number of tokens it shares with the query, on every shard; results are sorted by score, then id.
Filters are term queries; ids are fetched with real-time get; walks over all ids use
``cursorMark``. Documents are added in batches and committed once, at :meth:`flush`. A report's
searches are held to the versions written before it began (:meth:`SolrStore.snapshot`).

Documents go in and out through pysolr: ``pysolr.Solr`` for one node, ``pysolr.SolrCloud`` for
a ZooKeeper URL, which sends each request to a live replica (updates to a shard leader) as
ZooKeeper's watches see nodes come and go, and tries another when one does not answer. pysolr has
no calls for the CoreAdmin, Collections and Schema APIs, the system info or the JSON facets'
answers: those go as plain requests through the same ``requests`` session pysolr holds. So there
is one connection pool, one retry policy (connection errors and 502/503/504, with backoff), and
one place that turns an answer into an error (:class:`_Answers`, before pysolr reads it: pysolr
would turn it into text), and one that turns a server that does not answer into one line
(:meth:`SolrStore._call`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import netrc
import os
import random
import re
import time
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from functools import partial
from typing import Any, TypeVar
from urllib.parse import urlsplit

import numpy as np
import pysolr
import requests
from kazoo.client import KazooClient
from kazoo.exceptions import KazooException
from kazoo.handlers.threading import KazooTimeoutError
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry

from ..errors import NeardupError, NoStore, StoreChanged, StoreFull, StoreUnavailable
from ..fingerprint import Counted, FingerprintParams, TokenField
from ..phrases import counted
from .base import (
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
    engine_document,
    engine_frequencies,
    field_names,
    solr_schema,
)
from .url import RETRY_STATUSES, parse_engine_url

RECORD_FIELDS = "id,content,md5_hash,first_word,num_words"
# The fields of a store's core, of either layout, and those every Solr core has: a core that
# has others is not a store.
_OWN_FIELDS = {
    *(field["name"] for field in solr_schema()[1]),
    *LEGACY_FIELD_NAMES.values(),
    *("_version_", "_root_", "_text_", "_nest_path_", "_nest_parent_"),
}

PARAMS_ID = "_neardup_parameters"
LOCK_ID = "_neardup_lock"  # the lease of a check-then-add; no MD5, so never a record
CONFIGSET_NAME = "neardup"
# What the JVM says of a write its disk has no room for.
DISK_FULL = "No space left on device"
# Documents per update request: keeps a request a few MB even with every token field.
REQUEST_DOCUMENTS = 1000
# Written through a handle since its last hard commit, past which a flush is one: Solr that
# restarts after a crash replays its transaction log since then, answering errors meanwhile
# (9.5 s for 60,000 records), so a run of records ends with its segments written.
HARD_COMMIT_DOCUMENTS = 1000
RECORDS = "md5_hash:[* TO *]"  # every record, and not the settings document
PAGE = 1000
# Records per page of a walk for MD5s only.
DIGEST_PAGE = 10_000
CONCURRENT_QUERIES = 4
ZOOKEEPER_SECONDS = 10  # to connect to ZooKeeper, and to see a new collection in it
# How long a request through ZooKeeper waits for a lost node's shards to get new leaders: a
# node's ZooKeeper session outlives it by its timeout (zkClientTimeout, 30 s by default).
FAILOVER_SECONDS = 90
_QUIET = logging.getLogger("neardup.zookeeper")
_QUIET.addHandler(logging.NullHandler())
_QUIET.propagate = False

T = TypeVar("T")


class _Answers(HTTPAdapter):
    """The session's transport: urllib3's pool and retries, and every answer but 200 turned
    into one line here, for pysolr's requests and the admin calls alike."""

    def send(self, request: requests.PreparedRequest, *args: Any, **kwargs: Any) -> Any:
        response = super().send(request, *args, **kwargs)
        if response.status_code == 200:
            return response
        where = str(request.url).split("/solr/")[0] + "/solr"
        if response.status_code == 401:
            raise NeardupError(f"Solr at {where} refused the credentials (HTTP 401)")
        try:
            error = response.json().get("error", {})
        except (ValueError, AttributeError):
            error = {}
        message = (error.get("msg") if isinstance(error, dict) else None) or response.text[:200]
        first = (message.strip().splitlines() or [""])[0][:300]
        if DISK_FULL in first:  # its update log too: even the real-time reads of it fail
            raise StoreFull(f"Solr at {where}: its disk is full ({first})")
        raise _Refused(
            response.status_code, f"Solr at {where}: HTTP {response.status_code}: {first}"
        )


class _LiveZooKeeper(pysolr.ZooKeeper):
    """pysolr's watch of the cluster in ZooKeeper, drawing only replicas whose node is live.

    A node killed leaves its replicas "active" in the collection's state: Solr counts a replica
    active only while its node is in ``/live_nodes`` too. pysolr reads the state alone, so it
    drew the lost node for as long as it was down, each draw a refused connection and its
    retries: a report of 60,000 records that lost a node took 219 s, and takes 28 s now (13
    s with every node up)."""

    def getHosts(
        self, collname: str, only_leader: bool = False, seen_aliases: Any = None
    ) -> list[str]:
        live = {node.partition("_")[0] for node in self.liveNodes}
        hosts = super().getHosts(collname, only_leader, seen_aliases)
        return [host for host in hosts if urlsplit(host).netloc in live]


class _Refused(NeardupError):
    """An answer that is an error, with its HTTP status."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status

    @property
    def transient(self) -> bool:
        """Whether a cluster that lost a node answers so until its shards have new leaders."""
        text = str(self).lower()
        return self.status in RETRY_STATUSES or (
            self.status == 500 and any(sign in text for sign in _FAILOVER_SIGNS)
        )


# What a SolrCloud node says while a lost node's shards elect new leaders.
_FAILOVER_SIGNS = (
    "no servers hosting shard",
    "leader",
    "zookeeper",
    "refused connection",
    "during distributed update",
)


def http_session(
    endpoint: str, auth: tuple[str, str] | None, retries: int, *, to_one_node: bool = True
) -> requests.Session:
    """One session for every request to a Solr cluster: connections that retry connection
    errors and 502/503/504 answers with exponential backoff, the login, the CA bundle of
    REQUESTS_CA_BUNDLE or CURL_CA_BUNDLE, and the environment's proxy for ``endpoint``. Not
    ``to_one_node`` (through ZooKeeper), a refused connection is not tried again on the same
    node: another node is drawn instead, where the node drawn may be one just lost.

    The environment is read once, here: a session that trusts it reads proxies and ~/.netrc
    again on every request, which cost more than Solr's own answer to a lookup."""
    session = requests.Session()
    session.trust_env = False
    retry = Retry(
        total=retries,
        connect=None if to_one_node else 0,
        backoff_factor=0.5,
        status_forcelist=RETRY_STATUSES,
        allowed_methods=None,  # every update is idempotent by id, so POSTs may be retried too
        raise_on_status=False,
    )
    transport = _Answers(max_retries=retry, pool_maxsize=16)
    session.mount("http://", transport)
    session.mount("https://", transport)
    session.auth = auth or netrc_auth(endpoint)
    session.verify = _ca_bundle()
    parts = urlsplit(endpoint)
    proxy = urllib.request.getproxies().get(parts.scheme)
    if proxy and not urllib.request.proxy_bypass(parts.hostname or ""):
        session.proxies = {parts.scheme: proxy}
    return session


def _ca_bundle() -> str | bool:
    """The CA file that signed the cluster's certificate: NEARDUP_SOLR_CA_CERTS, else the
    bundle requests and curl would read, else the system's (True)."""
    own = os.environ.get("NEARDUP_SOLR_CA_CERTS")
    if own and not os.path.isfile(own):
        raise NeardupError(f"NEARDUP_SOLR_CA_CERTS names no file: {own}")
    return own or os.environ.get("REQUESTS_CA_BUNDLE") or os.environ.get("CURL_CA_BUNDLE") or True


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


def _url_scheme(client: KazooClient) -> str:
    """The scheme a SolrCloud cluster's nodes serve, as its cluster properties say."""
    data = client.exists("/clusterprops.json") and client.get("/clusterprops.json")[0]
    return "https" if data and json.loads(data).get("urlScheme") == "https" else "http"


def _unreachable_reason(error: BaseException) -> str:
    """What kept a server from answering, named by its exception (ConnectionRefusedError, …),
    from the requests error pysolr raised its own from."""
    seen: BaseException | None = error
    while seen is not None and not isinstance(seen, requests.RequestException):
        seen = seen.__cause__ or seen.__context__
    if seen is None:
        return type(error).__name__
    inner = seen.args[0] if seen.args else seen
    return type(getattr(inner, "reason", None) or inner).__name__


# A core's or collection's name, as Solr takes it: letters, digits, '.', '_' and '-', not first.
_SOLR_NAME = re.compile(r"[A-Za-z0-9._][A-Za-z0-9._-]*")


def _check_name(name: str) -> None:
    """Refuse a core or collection name Solr would refuse, before any request is made."""
    if not _SOLR_NAME.fullmatch(name):
        raise NeardupError(
            f"{name!r} cannot name a Solr core or collection: names hold letters, digits, '.', "
            "'_' and '-', and do not start with '-'"
        )


class SolrStore(Store):
    def __init__(self, url: str, *, create: bool = True, timeout: float = 60, retries: int = 3):
        self.timeout = timeout
        self._cloud: bool | None = None
        self._unsaved = 0  # documents written or deleted since this handle's last hard commit
        # The newest version the reads of this thread's snapshot see, if in one.
        self._as_of: ContextVar[int | None] = ContextVar("as_of", default=None)
        self.zookeeper: pysolr.ZooKeeper | None = None
        if url.startswith("solr+zk://"):
            self._through_zookeeper(url, retries)
        else:
            self._one_node(url, retries)
        self.solr = self._client()
        if not create and not self._exists():
            raise NoStore(f"no Solr core or collection {self.name!r} at {self.where}")

    def _one_node(self, url: str, retries: int) -> None:
        example = "solr://host:port/solr/NAME"
        parsed = parse_engine_url(url, example, 8983, "SOLR")
        root, _, self.name = parsed.path.rpartition("/")
        if not root.endswith("/solr") or not self.name:
            raise NeardupError(f"a Solr store URL looks like {example}, not {parsed.public!r}")
        _check_name(self.name)
        if parsed.others:  # pysolr's failover between nodes follows ZooKeeper
            raise NeardupError(
                f"a Solr store URL names one node, not {len(parsed.others) + 1}: "
                f"{parsed.public!r}; name the cluster's ZooKeeper to follow its live nodes "
                "(solr+zk://zk1:2181,zk2:2181/NAME)"
            )
        self.base = parsed.endpoint + root
        self.where = self.base
        self.url = parsed.public
        self.shards, self.replicas = parsed.shards, parsed.replicas
        self.session = http_session(parsed.endpoint, parsed.auth, retries)

    def _through_zookeeper(self, url: str, retries: int) -> None:
        example = "solr+zk://zk1:2181,zk2:2181[/chroot]/NAME"
        parsed = parse_engine_url(url, example, 2181, "SOLR")
        chroot, _, self.name = parsed.path.rpartition("/")
        if not self.name:
            raise NeardupError(f"a Solr store URL looks like {example}, not {parsed.public!r}")
        _check_name(self.name)
        hosts = ",".join(f"{h}:{p}" for h, p in ((parsed.host, parsed.port), *parsed.others))
        self.where = f"ZooKeeper {hosts}{chroot}"
        self.url = parsed.public
        self.shards, self.replicas = parsed.shards, parsed.replicas
        client = KazooClient(
            hosts + chroot,
            read_only=True,
            timeout=ZOOKEEPER_SECONDS,
            connection_retry={"max_tries": retries, "delay": 0.5, "max_delay": 2},
            command_retry={"max_tries": retries},
            logger=_QUIET,  # its connection attempts are not the user's messages
        )
        try:
            client.start(timeout=ZOOKEEPER_SECONDS)
        except (KazooException, KazooTimeoutError) as exc:
            client.stop()
            client.close()
            raise StoreUnavailable(
                f"Solr's ZooKeeper at {hosts}{chroot} is not reachable ({type(exc).__name__})"
            ) from None
        self.zookeeper = _LiveZooKeeper(hosts + chroot, kazoo_client=client)
        if not self.zookeeper.liveNodes:
            client.stop()
            client.close()
            raise StoreUnavailable(f"no live Solr node in {self.where}")
        self._node_scheme = _url_scheme(client)  # the cluster's, for as long as it runs
        self.session = http_session(self._live_node(), parsed.auth, retries, to_one_node=False)
        self._cloud = True

    def _live_node(self) -> str:
        """A live node's base URL (http://host:port/solr), from ZooKeeper's list of them."""
        assert self.zookeeper is not None
        nodes = list(self.zookeeper.liveNodes)
        if not nodes:
            raise StoreUnavailable(f"no live Solr node in {self.where}")
        host, _, context = random.choice(nodes).partition("_")
        return f"{self._node_scheme}://{host}/{context.replace('%2F', '/')}"

    def _client(self) -> pysolr.Solr | None:
        """pysolr's client for the core or collection; through ZooKeeper, None until the
        collection exists with an active replica (pysolr's SolrCloud looks its replicas up as it
        starts, and refuses a collection whose replicas its ZooKeeper watch has not yet seen
        become active, as happens just after the collection is made)."""
        if self.zookeeper is None:
            return pysolr.Solr(
                f"{self.base}/{self.name}", timeout=self.timeout, session=self.session
            )
        if self.name not in self.zookeeper.collections or not self.zookeeper.getHosts(self.name):
            return None
        return pysolr.SolrCloud(
            self.zookeeper,
            self.name,
            timeout=self.timeout,
            session=self.session,
            retry_count=5,
            retry_timeout=0.5,
        )

    # --- HTTP -------------------------------------------------------------------------------------

    def _call(self, request: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """One request, through pysolr or the session: a server that does not answer becomes
        one line (answers that are errors became one line in the session's transport).

        Through ZooKeeper, a request that meets a lost node (it does not answer, or its shards
        have no leader yet) is asked again, with backoff, for up to FAILOVER_SECONDS: the
        cluster's other nodes take its shards over once ZooKeeper sees it gone. Every request
        may be repeated: writes replace documents by id."""
        return self._retried(partial(self._once, request, *args, **kwargs))

    def _retried(self, ask: Callable[[], T]) -> T:
        return retried(ask, self._lost_node, FAILOVER_SECONDS, (0.5, 4.0))

    def _lost_node(self, error: Exception) -> bool:
        """Whether ``error`` is one a lost node causes and the cluster recovers from: only
        through ZooKeeper, where other nodes can take its shards over."""
        if self.zookeeper is None:
            return False
        return isinstance(error, StoreUnavailable) or (
            isinstance(error, _Refused) and error.transient
        )

    def _once(self, request: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        try:
            return request(*args, **kwargs)
        except (pysolr.SolrError, requests.RequestException) as exc:
            reason = _unreachable_reason(exc)
            if reason == "SSLError":  # settings to change, not a node to wait for
                raise NeardupError(
                    f"Solr at {self.where}: its TLS certificate is not trusted here; name the CA "
                    "that signed it in NEARDUP_SOLR_CA_CERTS"
                ) from None
            if reason == "ProtocolError" and self.where.startswith("http:"):
                raise NeardupError(
                    f"Solr at {self.where} is not reachable (it hung up: if it serves HTTPS, "
                    "the URL is solr+https://…)"
                ) from None
            raise StoreUnavailable(f"Solr at {self.where} is not reachable ({reason})") from None

    def _request(
        self, method: str, path: str, *, params: Mapping[str, Any] | None = None, **body: Any
    ) -> dict[str, Any]:
        """An admin, Schema or Collections API request (``path`` below /solr), on a live node;
        ``body`` is requests' ``json`` or ``data``. Through ZooKeeper each try asks a node
        chosen again: one killed stays in ZooKeeper's list until its session expires (30 s),
        and asked again and again, it held the request (and the service's settings read) for
        as long as the backoff lasted."""

        def on_a_node() -> requests.Response:
            base = self.base if self.zookeeper is None else self._live_node()
            return self._once(
                self.session.request,
                method,
                f"{base}/{path}",
                params={**(params or {}), "wt": "json"},
                timeout=self.timeout,
                **body,
            )

        return self._retried(on_a_node).json()

    def _core(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        """A request to this core or collection that pysolr has no call for."""
        return self._request(method, f"{self.name}/{path}", **kwargs)

    @property
    def _pysolr(self) -> pysolr.Solr:
        deadline = time.monotonic() + ZOOKEEPER_SECONDS
        while self.solr is None:  # a collection made since: ZooKeeper's watch tells shortly
            self.solr = self._client()
            if self.solr is None and time.monotonic() > deadline:
                raise StoreUnavailable(
                    f"no Solr collection {self.name!r} with an active replica in {self.where}"
                )
            time.sleep(0.05)
        return self.solr

    def _search(self, **params: Any) -> dict[str, Any]:
        """A search, as Solr answers it (pysolr POSTs a long one as a form); inside a
        :meth:`snapshot`, of the records it sees."""
        query = params.pop("q")
        if (as_of := self._as_of.get()) is not None:
            params["fq"] = [*params.get("fq", []), f"_version_:[* TO {as_of}]"]
        return self._call(self._pysolr.search, query, **params).raw_response

    def _add(self, documents: list[dict[str, Any]]) -> None:
        self._call(self._pysolr.add, documents, commit=False)

    # --- schema -----------------------------------------------------------------------------------

    @property
    def cloud(self) -> bool:
        if self._cloud is None:
            info = self._request("GET", "admin/info/system")
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
            try:
                self._create()
            except _Refused as refused:
                self._made_by_another(refused)
        self._add_missing_fields()

    def _made_by_another(self, refused: _Refused) -> None:
        """After a refused create: wait for the core or collection another process is making
        at the same moment (Solr refuses the second), or raise what Solr said."""
        deadline = time.monotonic() + ZOOKEEPER_SECONDS
        while not self._exists():
            if time.monotonic() > deadline:
                raise refused
            time.sleep(0.2)

    def _create(self) -> None:
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

    def _add_missing_fields(self) -> None:
        types, fields = solr_schema()
        have_types = {t["name"] for t in self._core("GET", "schema/fieldtypes")["fieldTypes"]}
        have_fields = self._own_fields()
        commands: dict[str, list[dict[str, object]]] = {
            "add-field-type": [t for t in types if t["name"] not in have_types],
            "add-field": [f for f in fields if f["name"] not in have_fields],
        }
        commands = {k: v for k, v in commands.items() if v}
        if commands:
            self._core("POST", "schema", json=commands)

    def _own_fields(self) -> set[str]:
        """The fields of a core that is a store's, before anything is written to it: a core of
        another application, given as --store by a slip, was given neardup's fields and
        documents."""
        have = {f["name"] for f in self._core("GET", "schema/fields")["fields"]}
        if other := sorted(have - _OWN_FIELDS):
            raise not_a_store(self.url, "a core", "a core", "fields", other)
        return have

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
        if self.zookeeper is not None:
            self.solr = None

    # --- settings ---------------------------------------------------------------------------------

    def _stored_settings(self) -> tuple[dict[str, Any] | None, int | None]:
        """The settings document and its version; -1 where there is none, as Solr writes a
        document of version -1 only where none is. A core that is not there answers the read
        404, which spares every read a request of its own to ask (a check-then-add reads the
        settings twice); a collection is looked up in ZooKeeper's list first."""
        if self.cloud and not self._exists():
            return None, None
        try:
            stored = self._real_time_get([PARAMS_ID]).get(PARAMS_ID)
        except _Refused as error:
            if error.status == 404 and not self.cloud:
                return None, None
            raise
        if not stored:
            return None, -1
        return json.loads(stored["neardup_params"]), stored["_version_"]

    def _put_settings(self, settings: dict[str, Any], version: int | None) -> bool:
        if version is None:
            self.apply_schema()
            return False
        if version == -1:  # a core with no settings yet: is it a store's?
            self._own_fields()
        document = {"id": PARAMS_ID, "neardup_params": json.dumps(settings, sort_keys=True)}
        # Read by real-time get, which sees it at once, and kept by the update log: a commit
        # here cost each checked add 15 ms more, where its records' commit follows anyway.
        return self._added_over(document, version)

    def _added_over(self, document: dict[str, Any], version: int) -> bool:
        """Add ``document`` only over the stored one of ``version`` (-1: none): False, adding
        nothing, where Solr holds another (optimistic concurrency, HTTP 409)."""
        try:
            self._add([{**document, "_version_": version}])
        except _Refused as refused:
            if refused.status == 409:
                return False
            raise
        return True

    # --- writing ----------------------------------------------------------------------------------

    def _upsert(
        self,
        documents: Mapping[str, Document],
        params: FingerprintParams,
        counted: Counted | None = None,  # the engine counts the shingles it indexes
    ) -> None:
        if PARAMS_ID in documents:
            raise NeardupError(f"the id {PARAMS_ID!r} is reserved by the Solr store")
        names = field_names(self.settings)
        docs = [engine_document(d, names, self.keeps_frequencies) for d in documents.values()]
        for start in range(0, len(docs), REQUEST_DOCUMENTS):
            self._add(docs[start : start + REQUEST_DOCUMENTS])
        self._unsaved += len(docs)

    def delete(self, ids: Sequence[str]) -> int:
        existing = [i for i in self.get(ids) if i != PARAMS_ID]
        if existing:
            self._call(self._pysolr.delete, id=existing)
        self._unsaved += len(existing)
        return len(existing)

    def flush(self) -> None:
        """A soft commit, which makes what was written visible without writing segments to disk
        (a hard commit cost a check-then-add 17 ms of 43); the transaction log keeps every
        update through a kill -9, and the configset's autoCommit writes segments within a
        minute. A hard commit once HARD_COMMIT_DOCUMENTS were written since the last one."""
        hard = self._unsaved >= HARD_COMMIT_DOCUMENTS
        self._call(self._pysolr.commit, softCommit=not hard, waitSearcher=True)
        if hard:
            self._unsaved = 0

    # --- one state for a report's reads (Store.snapshot) ------------------------------------------

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        """Reads of the records as the last commit before it showed them (see
        :meth:`Store.snapshot`). Solr has no view to hold across requests: a commit, a run's or
        a service's add, shows its writes to a report's next search. But each record holds the
        version of its last write, which only grows, so the searches inside are held to the
        versions up to the newest then: records written since are left out. A record deleted
        or written again since cannot be read as it was, so the count of those versions is
        taken again at the end: if it changed, the reads were not of one state."""
        if self._as_of.get() is not None:
            yield
            return
        newest = self._search(q=RECORDS, rows=1, sort="_version_ desc", fl="_version_")
        held, docs = newest["response"]["numFound"], newest["response"]["docs"]
        token = self._as_of.set(docs[0]["_version_"] if docs else 0)
        try:
            yield
            if (now := self.count()) < held:
                gone = counted(held - now, "record")
                raise StoreChanged(f"{gone} of the {held:,} it read deleted or written again")
            if now > held:  # written meanwhile, by a shard leader whose clock is behind
                raise StoreChanged()
        finally:
            self._as_of.reset(token)

    # --- the lease of a check-then-add (Store.exclusive) ------------------------------------------

    def _take_lease(self, holder: str, until: float) -> bool:
        lease = {"holder": holder, "until": until}
        return self._added_over({"id": LOCK_ID, "neardup_params": json.dumps(lease)}, -1)

    def _lease(self) -> dict[str, Any] | None:
        found = self._real_time_get([LOCK_ID]).get(LOCK_ID)
        if not found:
            return None
        return {**json.loads(found["neardup_params"]), "version": found["_version_"]}

    def _end_lease(self, lease: Mapping[str, Any]) -> None:
        current = self._lease()
        if current and current["holder"] == lease["holder"]:
            exactly = {"delete": {"id": LOCK_ID, "_version_": current["version"]}}
            with contextlib.suppress(_Refused):  # another writer took an expired one over
                self._core("POST", "update", json=exactly)

    # --- reading ----------------------------------------------------------------------------------

    def _real_time_get(self, ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """Documents by id, committed or not; real-time get takes ids as repeated parameters."""
        found: dict[str, dict[str, Any]] = {}
        for start in range(0, len(ids), PAGE):
            chunk = list(ids[start : start + PAGE])
            body = self._call(self._pysolr.search, "", search_handler="get", id=chunk).raw_response
            # One id comes back as {"doc": …}, several as {"response": {"docs": […]}}.
            docs = [body["doc"]] if "doc" in body else body["response"]["docs"]
            found.update({doc["id"]: doc for doc in docs if doc})
        return found

    def get(self, ids: Sequence[str]) -> dict[str, StoredRecord]:
        """By id, as written (real time), or as the :meth:`snapshot` sees them inside one."""
        as_of = self._as_of.get()
        return {
            i: _record(doc)
            for i, doc in self._real_time_get(list(ids)).items()
            if "md5_hash" in doc and (as_of is None or doc["_version_"] <= as_of)
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
        for asked in md5_queries(list(found)):  # MD5s are hex: no commas to escape
            query = "{!terms f=md5_hash}" + ",".join(asked)
            for doc in self._walk(query, "id,md5_hash", DIGEST_PAGE):
                found[doc["md5_hash"]].append(doc["id"])
        return found

    def records_by_md5(self, md5s: Sequence[str]) -> dict[str, list[StoredRecord]]:
        found: dict[str, list[StoredRecord]] = {md5: [] for md5 in md5s}
        for asked in md5_queries(list(found)):  # large pages: each runs the query again
            query = "{!terms f=md5_hash}" + ",".join(asked)
            for doc in self._walk(query, RECORD_FIELDS, DIGEST_PAGE):
                found[doc["md5_hash"]].append(_record(doc))
        return found

    def iter_ids(self) -> Iterator[str]:
        return (doc["id"] for doc in self._walk(RECORDS))

    def iter_records(self, batch_size: int = 1000) -> Iterator[list[StoredRecord]]:
        """Every record as the walk reads it (held to the snapshot's versions inside one)."""
        docs = self._walk(RECORDS, RECORD_FIELDS, RECORD_PAGE)
        return in_batches(map(_record, docs), batch_size)

    def iter_digests(
        self, first_word: bool = False, batch_size: int = DIGEST_PAGE
    ) -> Iterator[list[tuple[str, str]]]:
        fields = "md5_hash,first_word" if first_word else "md5_hash"
        docs = self._walk(RECORDS, fields, batch_size)
        digests = ((doc["md5_hash"], doc["first_word"] if first_word else "") for doc in docs)
        return in_batches(digests, batch_size)

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

    def _contents_holding(self, field: TokenField, keys: np.ndarray, cap: int) -> list[int]:
        """A query facet per token with a terms sub-facet of at most ``cap`` MD5s: the
        buckets it lists are the contents counted, exact to ``cap`` on any number of shards."""
        name = field_names(self.settings)[field]
        md5s = {"type": "terms", "field": "md5_hash", "limit": cap}
        facets = {
            f"t{n}": {"type": "query", "q": f"{{!term f={name}}}{token}", "facet": {"md5s": md5s}}
            for n, token in enumerate(field.strings(keys))
        }
        body = self._search(q=RECORDS, rows=0, **{"json.facet": json.dumps(facets)})
        found = body.get("facets", {})
        held = [found.get(f"t{n}", {}).get("md5s", {}) for n in range(len(keys))]
        return [len(md5s.get("buckets", [])) for md5s in held]

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
        return list(ordered_map(self._candidates, queries, CONCURRENT_QUERIES))

    def close(self) -> None:
        self.session.close()
        if self.zookeeper is not None:
            self.zookeeper.zk.stop()
            self.zookeeper.zk.close()


def _record(doc: dict[str, Any]) -> StoredRecord:
    return StoredRecord(
        doc["id"], doc["content"], doc["md5_hash"], doc["first_word"], doc["num_words"]
    )
