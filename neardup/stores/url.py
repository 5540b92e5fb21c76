"""Engine store URLs: ``SCHEME[+https]://[user:password@]host[:port]/PATH[?shards=N&replicas=M]``.

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

    @property
    def endpoint(self) -> str:
        """The server's HTTP address."""
        http = "https" if self.scheme.endswith("+https") else "http"
        return f"{http}://{self.host}:{self.port}"

    @property
    def public(self) -> str:
        """The store's URL without credentials or options, for messages."""
        return f"{self.scheme}://{self.host}:{self.port}{self.path}"

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
    try:
        port = parts.port or default_port
    except ValueError:
        port = 0
    if not parts.hostname or not port:
        raise NeardupError(f"a store URL looks like {example}, not {url!r}")
    options = parse_qs(parts.query)
    if parts.username:
        user, password = unquote(parts.username), unquote(parts.password or "")
    else:
        user = os.environ.get(f"NEARDUP_{environment}_USER")
        password = os.environ.get(f"NEARDUP_{environment}_PASSWORD")
    return EngineURL(
        parts.scheme,
        parts.hostname,
        port,
        parts.path.rstrip("/"),
        _count(options, "shards", url),
        _count(options, "replicas", url),
        user,
        password,
    )
