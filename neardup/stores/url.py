"""Engine store URLs: ``SCHEME[+https]://[user:password@]host[:port][,host[:port]...]/PATH[?shards=N&replicas=M]``.

Several hosts name the nodes of one cluster: a client that can fail over between them does
(Elasticsearch's node pool), or the servers of a SolrCloud cluster's ZooKeeper
(``solr+zk://``); the first is the one named in messages.

Both engines read their URLs here, so the options mean the same on each: ``shards`` is how many
shards a new collection or index gets, ``replicas`` how many copies of each shard (1: no extra
copy), and credentials come from the URL, else from ``NEARDUP_<ENGINE>_USER`` and
``NEARDUP_<ENGINE>_PASSWORD``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from urllib.parse import parse_qs, unquote, urlsplit

from ..errors import NeardupError

# Answers that mean "try again shortly" (a proxy or a node restarting): every engine request is
# retried on them, and on connection errors, with exponential backoff.
RETRY_STATUSES = (502, 503, 504)


@dataclass(frozen=True)
class EngineURL:
    scheme: str  # as written: solr, solr+https, elasticsearch, elasticsearch+https
    host: str
    port: int
    path: str  # without a trailing slash
    shards: int = 1
    replicas: int = 1
    user: str | None = None
    password: str | None = None
    others: tuple[tuple[str, int], ...] = ()  # the cluster's other nodes, after the first

    @property
    def endpoint(self) -> str:
        """The first server's HTTP address."""
        return self.endpoints[0]

    @property
    def endpoints(self) -> list[str]:
        """Every node's HTTP address, the first first."""
        http = "https" if self.scheme.endswith("+https") else "http"
        return [f"{http}://{host}:{port}" for host, port in ((self.host, self.port), *self.others)]

    @property
    def public(self) -> str:
        """The store's URL without credentials or options, for messages."""
        hosts = ",".join(f"{host}:{port}" for host, port in ((self.host, self.port), *self.others))
        return f"{self.scheme}://{hosts}{self.path}"

    @property
    def auth(self) -> tuple[str, str] | None:
        return (self.user, self.password or "") if self.user else None


def _count(options: dict[str, list[str]], name: str, url: str) -> int:
    value = options.get(name, ["1"])[-1]
    if not value.isdigit() or int(value) < 1:
        raise NeardupError(f"{name} must be a whole number of 1 or more in {url!r}, not {value!r}")
    return int(value)


def parse_engine_url(url: str, example: str, default_port: int, environment: str) -> EngineURL:
    """Parse an engine store URL; ``example`` is quoted when it is malformed, and
    ``environment`` names the credential variables (``SOLR``: NEARDUP_SOLR_USER, …)."""
    parts = urlsplit(url)
    credentials, _, hosts = parts.netloc.rpartition("@")
    shown = url.replace(f"{credentials}@", "…@") if credentials else url  # no password in errors
    nodes = [_node(h, default_port) for h in hosts.split(",")]
    if not parts.scheme or not all(nodes):
        raise NeardupError(f"a store URL looks like {example}, not {shown!r}")
    (host, port), *others = nodes
    options = parse_qs(parts.query)
    if credentials:
        name, _, secret = credentials.partition(":")
        user, password = unquote(name), unquote(secret)
    else:
        user = os.environ.get(f"NEARDUP_{environment}_USER")
        password = os.environ.get(f"NEARDUP_{environment}_PASSWORD")
    return EngineURL(
        parts.scheme,
        host,
        port,
        parts.path.rstrip("/"),
        _count(options, "shards", shown),
        _count(options, "replicas", shown),
        user,
        password,
        tuple(others),
    )


def _node(netloc: str, default_port: int) -> tuple[str, int] | None:
    """(host, port) of one ``host[:port]``, or None when it is not one."""
    parts = urlsplit(f"//{netloc}")
    try:
        port = parts.port or default_port
    except ValueError:
        return None
    return (parts.hostname, port) if parts.hostname and port else None
