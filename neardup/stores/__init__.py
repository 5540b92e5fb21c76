"""Stores behind one interface, chosen by URL."""

from __future__ import annotations

import importlib
import os
from types import ModuleType
from urllib.parse import urlsplit

from ..errors import NeardupError
from .base import (
    MAX_ID_BYTES,
    Buckets,
    Candidate,
    CandidateQuery,
    Document,
    Store,
    StoredRecord,
    TokenField,
    id_problem,
    sort_candidates,
)

DEFAULT_STORE_URL = "sqlite:///neardup.db"

__all__ = [
    "DEFAULT_STORE_URL",
    "MAX_ID_BYTES",
    "Buckets",
    "Candidate",
    "CandidateQuery",
    "Document",
    "Store",
    "StoredRecord",
    "TokenField",
    "default_store_url",
    "id_problem",
    "is_embedded",
    "open_store",
    "sort_candidates",
]


def default_store_url() -> str:
    return os.environ.get("NEARDUP_STORE") or DEFAULT_STORE_URL


_SOLR_SCHEMES = ("solr", "solr+https", "solr+zk")
_ELASTICSEARCH_SCHEMES = ("elasticsearch", "elasticsearch+https")
_SCHEMES = ("sqlite", *_SOLR_SCHEMES, *_ELASTICSEARCH_SCHEMES)


def store_url(url: str) -> str:
    """``url`` as a store URL: a bare file path (no ``scheme://``) names an embedded store.

    A store's scheme without its slashes (``sqlite:dups.db``) is an error rather than a file
    of that name, which a later run given the URL it meant would not find."""
    if "://" in url:
        return url
    scheme, colon, rest = url.partition(":")
    if colon and scheme.lower() in _SCHEMES:
        meant = f"sqlite:///{rest}" if scheme.lower() == "sqlite" else f"{scheme}://{rest}"
        raise NeardupError(f"a store URL has :// after its scheme: did you mean {meant}?")
    return f"sqlite:///{url}"


def is_embedded(url: str) -> bool:
    """Whether ``url`` names an embedded store (a file on this machine, not a server)."""
    return urlsplit(store_url(url)).scheme == "sqlite"


def embedded_file(url: str | None = None) -> str | None:
    """The file of the embedded store ``url`` names (the default store's, without one); None
    for a server's store."""
    url = store_url(url or default_store_url())
    if not is_embedded(url):
        return None
    path = url[len("sqlite://") :]
    if not path.startswith("/") or len(path) == 1:
        raise NeardupError(f"a SQLite store URL looks like sqlite:///path/to/file.db, not {url!r}")
    return path[1:]


def _engine(name: str) -> ModuleType:
    """The store module of one engine, imported on first use (its client takes time to load)."""
    try:
        return importlib.import_module(f".{name}", __package__)
    except ImportError as exc:
        raise NeardupError(
            f"{name} stores need {exc.name}, which is not installed: pip install neardup again"
        ) from None


def open_store(url: str | None = None, *, create: bool = True) -> Store:
    """Open the store a URL names.

    ``sqlite:///relative/path.db``, ``sqlite:////absolute/path.db`` (or the path alone),
    ``solr://host:port/solr/NAME``, ``solr+zk://zk:2181[/chroot]/NAME``,
    ``elasticsearch://host:port/INDEX``. With ``create=False`` a
    missing embedded store is an error instead of a new empty file (for lookups and reports).
    """
    url = store_url(url or default_store_url())
    scheme = urlsplit(url).scheme
    if path := embedded_file(url):
        from .sqlite import SQLiteStore

        return SQLiteStore(path, create=create)
    if scheme in _SOLR_SCHEMES:
        return _engine("solr").SolrStore(url, create=create)
    if scheme in _ELASTICSEARCH_SCHEMES:
        return _engine("elasticsearch").ElasticsearchStore(url, create=create)
    meant = _engine_meant(url)
    hint = f" {meant}?" if meant else ""
    tls = " (solr+https://, elasticsearch+https:// over TLS)" if meant else ""
    raise NeardupError(
        f"unknown store URL {url!r}:{hint} use sqlite:///FILE.db, solr://HOST:PORT/solr/NAME, "
        f"solr+zk://ZK:2181/NAME or elasticsearch://HOST:PORT/INDEX{tls}"
    )


def _engine_meant(url: str) -> str | None:
    """The store URL an engine's own http(s) address stands for, as a user copies it from a
    browser: Solr's by its /solr/ path, else Elasticsearch's; None for another URL."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        return None
    tls = "+https" if parts.scheme == "https" else ""
    engine = "solr" if parts.path.startswith("/solr/") else "elasticsearch"
    return f"did you mean {engine}{tls}://{parts.netloc}{parts.path.rstrip('/')}"
