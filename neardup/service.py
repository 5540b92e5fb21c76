"""The HTTP service: ``neardup serve``, a JSON API over :mod:`neardup.api` (FastAPI + uvicorn).

One process holds one open store, and the fingerprint kernels stay loaded between requests.
Requests run in FastAPI's thread pool: the engines' clients serve them concurrently, and the
embedded store has one connection per request thread. Adds with ``if_unique``
are serialised, so that two requests with the same new text cannot both pass the check before
either is stored: the check and the add are one atomic step within a process (run one service
per store).

Errors are JSON, ``{"error": "..."}``, never a stack trace: 400 bad input, 401 a wrong or
missing API key, 404 an unknown id, 409 parameters that differ from the store's, 413 a body
over the size limit, 503 a store that cannot be reached.
"""

from __future__ import annotations

import hmac
import threading
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict
from typing import Any

from fastapi import Depends, FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.security import APIKeyHeader
from pydantic import BaseModel, Field

from . import api
from .errors import (
    InvalidParameter,
    NeardupError,
    ParameterMismatch,
    StoreUnavailable,
    UnknownRecord,
)
from .readers import Record
from .stores import Store, open_store
from .stores.sqlite import SQLiteStore

MAX_BODY_BYTES = 10 * 2**20
MAX_RECORDS = 10_000  # per request

STATUS = {
    UnknownRecord: 404,
    ParameterMismatch: 409,
    StoreUnavailable: 503,
    InvalidParameter: 400,
    NeardupError: 400,
}


class Rules(BaseModel):
    """The match rules a request may give; what it leaves out, the store's own settings fill."""

    preset: str | None = None
    method: str | None = None
    rows: int | None = None
    first_word: bool | None = None
    threshold: float | None = Field(None, description="0 turns it off")
    max_edit_distance: int | None = None

    def request(self) -> dict[str, Any]:
        given = self.model_dump(include=set(Rules.model_fields), exclude_none=True)
        return {"preset": given.pop("preset", None), "rules": given}


class LookupRequest(Rules):
    id: str | None = Field(None, description="a stored record's id")
    text: str | None = Field(None, description="a new text")
    collapse_copies: bool = Field(
        False, description="each matched content once, its other ids in copies"
    )


class RecordIn(BaseModel):
    id: str
    text: str


class AddRequest(Rules):
    records: list[RecordIn] = Field(..., max_length=MAX_RECORDS)
    if_unique: bool = Field(
        False, description="store only records with no near-duplicate in the store or before them"
    )


def create_app(
    store: str | None = None, *, api_key: str | None = None, max_body: int = MAX_BODY_BYTES
) -> FastAPI:
    """The service over the store at ``store`` (opened on first use, then kept)."""
    app = FastAPI(
        title="neardup",
        version=api.__version__,
        description="Near-duplicate lookup over a store of MinHash fingerprints.",
    )
    held = _HeldStore(store)
    unique_adds = threading.Lock()
    key_header = APIKeyHeader(name="X-API-Key", auto_error=False)

    def authorised(key: str | None = Depends(key_header)) -> None:
        if api_key and not (key and hmac.compare_digest(key.encode(), api_key.encode())):
            raise _Refused(401, "a valid X-API-Key header is required")

    @app.middleware("http")
    async def body_limit(request: Request, call_next: Callable[[Request], Awaitable[Any]]) -> Any:
        length = request.headers.get("content-length")
        if length and length.isdigit() and int(length) > max_body:
            return _error(413, f"the body is over {max_body} bytes")
        return await call_next(request)

    @app.exception_handler(_Refused)
    def refused(_request: Request, exc: _Refused) -> JSONResponse:
        return _error(exc.status, exc.message)

    @app.exception_handler(NeardupError)
    def user_error(_request: Request, exc: NeardupError) -> JSONResponse:
        status = next(code for kind, code in STATUS.items() if isinstance(exc, kind))
        return _error(status, str(exc))

    @app.exception_handler(RequestValidationError)
    def bad_request(_request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = jsonable_encoder(exc.errors(), exclude={"input", "ctx", "url"})
        first = problems[0] if problems else {}
        where = ".".join(str(p) for p in first.get("loc", ()))
        return _error(400, f"{where}: {first.get('msg', 'invalid request')}", problems)

    guarded = [Depends(authorised)]

    @app.get("/health")
    def health() -> dict[str, Any]:
        """Whether the service can reach its store (503 when it cannot)."""
        with held.use() as source:
            return {"status": "ok", "store": source.url, "documents": source.count()}

    @app.get("/stats", dependencies=guarded)
    def stats() -> dict[str, Any]:
        """What the store holds and the settings it was indexed with."""
        with held.use() as source:
            return api.stats(source)

    @app.post("/lookup", dependencies=guarded)
    def lookup(body: LookupRequest) -> dict[str, Any]:
        """The stored duplicates of a record (``id``) or of a new ``text``: exact ones first."""
        with held.use() as source:
            matches = api.lookup(
                source, id=body.id, text=body.text, collapse=body.collapse_copies, **body.request()
            )
        return {"matches": [asdict(m) for m in matches]}

    @app.post("/records", dependencies=guarded)
    def add(body: AddRequest) -> dict[str, Any]:
        """Add or replace records; with ``if_unique``, only those with no near-duplicate."""
        records = [Record(r.id, r.text, n) for n, r in enumerate(body.records, start=1)]
        with unique_adds if body.if_unique else _no_lock(), held.use(create=True) as source:
            result = api.add(records, source, if_unique=body.if_unique, **body.request())
        return {
            "added": result.added,
            "duplicates": {i: [asdict(m) for m in found] for i, found in result.duplicates.items()},
            "skipped": result.skipped,
        }

    @app.get("/records/{record_id:path}", dependencies=guarded)
    def get_record(record_id: str) -> dict[str, Any]:
        """One stored record: its normalised content, MD5, first word and number of words."""
        with held.use() as source:
            found = source.get([record_id]).get(record_id)
        if found is None:
            raise _Refused(404, f"no record with id {record_id!r}")
        return asdict(found)

    @app.delete("/records/{record_id:path}", dependencies=guarded)
    def delete_record(record_id: str) -> dict[str, Any]:
        """Remove a record; later lookups and reports no longer see it."""
        with held.use() as source:
            if not api.delete([record_id], source):
                raise _Refused(404, f"no record with id {record_id!r}")
        return {"deleted": record_id}

    return app


class _Refused(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


def _error(status: int, message: str, details: Any = None) -> JSONResponse:
    body: dict[str, Any] = {"error": message}
    if details is not None:
        body["details"] = details
    return JSONResponse(status_code=status, content=body)


@contextmanager
def _no_lock() -> Iterator[None]:
    yield


class _HeldStore:
    """The service's store, opened on first use and kept. An engine's client serves every
    request thread at once; the embedded store gets one connection per request thread (WAL lets
    readers run side by side, and writers wait for each other's transaction)."""

    def __init__(self, url: str | None) -> None:
        self.url = url
        self.store: Store | None = None
        self.opening = threading.Lock()
        self.per_thread: threading.local | None = None

    @contextmanager
    def use(self, create: bool = False) -> Iterator[Store]:
        with self.opening:
            if self.store is None:
                self.store = open_store(self.url, create=create)
                if isinstance(self.store, SQLiteStore):
                    self.per_thread = threading.local()
        if self.per_thread is None:
            yield self.store
            return
        if not hasattr(self.per_thread, "store"):
            self.per_thread.store = open_store(self.url, create=create)
        yield self.per_thread.store
