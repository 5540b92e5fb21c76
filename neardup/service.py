"""The HTTP service: ``neardup serve``, a JSON API over :mod:`neardup.api` (FastAPI + uvicorn).

Like the CLI, it is a skin over the API: it imports the API, and the API knows nothing of it.

One process holds one open store, and the fingerprint kernels stay loaded between requests.
Every request's work on the store runs in FastAPI's thread pool, never on the event loop, and
the embedded store has one connection per thread. Adds with ``if_unique``
are serialised, so that two requests with the same new text cannot both pass the check before
either is stored: the check and the add are one atomic step within a process (run one service
per store).

Errors are JSON, ``{"error": "..."}``, never a stack trace: 400 bad input, 401 a wrong or
missing API key, 404 an unknown id, 409 parameters that differ from the store's, 413 a body
over the size limit, 503 a store that cannot be reached.
"""

from __future__ import annotations

import hmac
import os
import socket
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import asdict
from http import HTTPStatus
from typing import Annotated, Any, Literal, TypeVar

from fastapi import Depends, FastAPI, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse
from fastapi.security import APIKeyHeader
from fastapi.staticfiles import StaticFiles
from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from swagger_ui_bundle import swagger_ui_path

from . import api
from .errors import (
    InvalidParameter,
    NeardupError,
    ParameterMismatch,
    StoreChanged,
    StoreFull,
    StoreUnavailable,
    UnknownRecord,
)
from .fingerprint import holds_surrogates
from .readers import Record
from .stores import Store, default_store_url, is_embedded, open_store

T = TypeVar("T")

MAX_BODY_BYTES = 10 * 2**20
DOCS_ASSETS = "/docs/assets"
MAX_RECORDS = 10_000  # per request

STATUS = {  # the first that the error is an instance of
    UnknownRecord: 404,
    ParameterMismatch: 409,
    StoreChanged: 409,  # other writers meanwhile: the same request may succeed later
    StoreFull: 507,
    StoreUnavailable: 503,
    InvalidParameter: 400,
    NeardupError: 400,
}


def _unicode(text: str) -> str:
    # JSON can escape half of a surrogate pair; no answer could name such an id in UTF-8.
    if holds_surrogates(text):
        raise ValueError("holds half of a surrogate pair: not Unicode text")
    return text


UnicodeText = Annotated[str, AfterValidator(_unicode)]


def _integer_as_text(value: object) -> object:
    # A database's key sent from JavaScript is a number: the id it names is its digits, as
    # the record files' readers take a JSON number for an id.
    return str(value) if type(value) is int else value


RecordId = Annotated[UnicodeText, BeforeValidator(_integer_as_text)]


class Rules(BaseModel):
    """The match rules a request may give; what it leaves out, the store's own settings fill.
    A name it does not know is an error, so that a misspelt rule is not silently ignored."""

    model_config = ConfigDict(extra="forbid")

    preset: str | None = None
    method: str | None = None
    candidates: int | None = None
    first_word: bool | None = None
    threshold: float | Literal["auto"] | None = Field(
        None, description='0 turns it off; "auto": the threshold the last report chose'
    )
    similarity: str | None = Field(None, description="weighted, numerals or jaccard")
    max_edit_distance: int | None = None

    def request(self) -> dict[str, Any]:
        given = self.model_dump(include=set(Rules.model_fields), exclude_none=True)
        return {"preset": given.pop("preset", None), "rules": given}


CollapseCopies = Annotated[
    bool, Field(description="each matched content once, its other ids in copies")
]


class LookupRequest(Rules):
    id: RecordId | None = Field(None, description="a stored record's id")
    text: UnicodeText | None = Field(None, description="a new text")
    collapse_copies: CollapseCopies = False


class ExplainQuery(Rules):
    id: list[RecordId] = Field([], description="a stored record's id")
    text: list[UnicodeText] = Field([], description="a new text")


def _not_json(request: Request) -> str | None:
    """What to say of a body sent as something other than JSON, which the service reads as
    bytes (``curl -d`` sends a form unless told), else None."""
    media = request.headers.get("content-type", "").split(";")[0].strip()
    if not media or media.lower().endswith(("/json", "+json")):
        return None
    return (
        f"the body was sent as {media}, and the service reads JSON: send it "
        "with Content-Type: application/json (curl: --json, or -H 'Content-Type: "
        "application/json')"
    )


class RecordIn(BaseModel):
    model_config = ConfigDict(extra="forbid")  # as the request's own fields

    id: RecordId
    text: UnicodeText


def _each_id_once(records: list[RecordIn]) -> list[RecordIn]:
    # The answer is keyed by id: an id given twice would have two answers under one key.
    seen: set[str] = set()
    for record in records:
        if record.id in seen:
            raise ValueError(f"the id {record.id!r} is given twice: name each record once")
        seen.add(record.id)
    return records


# A request's records: each id once, at most MAX_RECORDS of them.
RecordsIn = Annotated[list[RecordIn], Field(max_length=MAX_RECORDS), AfterValidator(_each_id_once)]


class AddRequest(Rules):
    records: RecordsIn
    if_unique: bool = Field(
        False, description="store only records with no near-duplicate in the store or before them"
    )


class LookupBatchRequest(Rules):
    records: RecordsIn
    collapse_copies: CollapseCopies = False


class LinkRequest(Rules):
    records: RecordsIn
    threshold: float | Literal["auto"] | None = Field(
        None, description='0 keeps every mutual best match; "auto": where the links dip'
    )


def serve(
    store: str | None = None,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    api_key: str | None = None,
    listening: Callable[[], None] | None = None,
    threshold_read: Callable[[str], None] | None = None,
) -> None:
    """Serve the HTTP API over ``store`` until interrupted; its OpenAPI documentation is at
    /docs. The port is taken first, and ``listening`` called once it is: a port in use is a
    NeardupError, before anything says the service runs. The store's threshold is read as the
    service starts and whenever its records have changed (:func:`_keep_threshold_read`), and
    ``threshold_read`` told each time in a line."""
    import uvicorn  # here: only a running service needs the server

    taken = _listen(host, port)
    if listening:
        listening()
    app = create_app(store, api_key=api_key, threshold_read=threshold_read or (lambda _line: None))
    uvicorn.Server(uvicorn.Config(app, log_level="warning")).run(sockets=[taken])


def _listen(host: str, port: int) -> socket.socket:
    """A socket bound to ``host``:``port`` (an IPv4 or IPv6 address or a name) and listening."""
    if not 0 <= port <= 65535:  # the socket module raises OverflowError past them
        raise NeardupError(f"cannot listen on port {port}: a port is from 0 to 65535")
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
        return socket.create_server((host, port), family=family)
    except OSError as exc:
        reason = os.strerror(exc.errno) if exc.errno else str(exc)
        raise NeardupError(f"cannot listen on {host}:{port}: {reason}") from None


# How often the service looks whether its store's records changed since its threshold was
# read, and how long they must stay as they are before it reads the threshold again.
THRESHOLD_POLL = 2.0


def _keep_threshold_read(
    held: _HeldStore, said: Callable[[str], None], ready: threading.Event, stop: threading.Event
) -> None:
    """Keep the store's automatic threshold read, on a thread of its own, until ``stop``. One
    that no command has read from the records as they are now is read by the first lookup that
    needs it, from every candidate pair as a report reads it (6 s at 100,000 generated people,
    25 s at a million), while that lookup's client waits, or gives up: after `neardup index`
    into a new store, or into one the service is serving (the run forgets the threshold it
    changed). So it is read as the service starts, and again once the records have stayed as
    they are for THRESHOLD_POLL seconds (not between an index run's batches), where the store
    can tell (:meth:`Store.records_version`: the embedded store; an engine's is read at the
    start alone). Lookups that come meanwhile wait for this read (:func:`neardup.api.rules_for`
    reads once a store) instead of making their own, and ``ready`` is clear while it lasts.
    ``said`` is told what was read and how long it took; a store that cannot answer yet is
    said by `neardup serve` and the requests, and looked at again."""
    unseen = object()
    seen: object = unseen
    while True:
        try:
            with held.use() as source:
                now = source.records_version()
                if seen in (unseen, now) and api.threshold_to_read(source):
                    ready.clear()
                    said(_threshold_line(source))
                    now = source.records_version()
                seen = now
        except NeardupError:
            pass  # said by the requests; looked at again
        except Exception as exc:  # said in a line, not as a thread's traceback
            said(f"warning: its threshold is no longer read ahead ({exc!r}); lookups read it")
            return
        finally:
            ready.set()
        if (seen is None) or stop.wait(THRESHOLD_POLL):
            return


def _threshold_line(source: Store) -> str:
    """Read the store's threshold (:func:`neardup.api.rules_for`); what was read, in a line."""
    started = time.perf_counter()
    threshold = api.rules_for(source).threshold
    how = (api.stats(source)["rules_from"] or {}).get("threshold")
    value = "none" if threshold is None else f"{threshold:g}"
    return f"threshold {value} ({how}), read in {time.perf_counter() - started:.1f} s"


def create_app(
    store: str | None = None,
    *,
    api_key: str | None = None,
    max_body: int = MAX_BODY_BYTES,
    threshold_read: Callable[[str], None] | None = None,
) -> FastAPI:
    """The service over the store at ``store`` (opened on first use, then kept). With
    ``threshold_read``, it keeps the store's threshold read while it runs, and tells that
    callback each time (:func:`_keep_threshold_read`); /health says it is not ready meanwhile."""
    api.check_api_key(api_key)
    held = _HeldStore(store)
    ready = threading.Event()
    if threshold_read is None:
        ready.set()

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        stop = threading.Event()
        if threshold_read is not None:
            watch = (held, threshold_read, ready, stop)
            threading.Thread(
                target=_keep_threshold_read, args=watch, name="neardup-threshold", daemon=True
            ).start()
        try:
            yield
        finally:
            stop.set()

    app = FastAPI(
        lifespan=lifespan,
        title="neardup",
        version=api.__version__,
        description="Near-duplicate lookup over a store of MinHash fingerprints.",
        docs_url=None,  # both served below, behind the key, with no CDN
        redoc_url=None,
        openapi_url=None,
    )
    unique_adds = threading.Lock()
    key_header = APIKeyHeader(name="X-API-Key", auto_error=False)

    async def authorised(key: str | None = Depends(key_header)) -> None:
        if api_key and not (key and hmac.compare_digest(key.encode(), api_key.encode())):
            raise _Refused(401, "a valid X-API-Key header is required")

    app.add_middleware(_BodyLimit, max_body=max_body)

    @app.exception_handler(_Refused)
    def refused(_request: Request, exc: _Refused) -> JSONResponse:
        return _error(exc.status, exc.message)

    @app.exception_handler(NeardupError)
    def user_error(_request: Request, exc: NeardupError) -> JSONResponse:
        status = next(code for kind, code in STATUS.items() if isinstance(exc, kind))
        return _error(status, str(exc))

    @app.exception_handler(HTTPException)
    def refused_by_the_framework(request: Request, exc: HTTPException) -> JSONResponse:
        """What Starlette refuses before any route runs (no such path, a method the path does
        not take, a body it cannot parse), in the one shape of every error."""
        said = {
            404: f"no such path: {request.method} {request.url.path} (the API is at /docs)",
            405: f"{request.url.path} does not take {request.method}",
        }
        default = exc.detail == HTTPStatus(exc.status_code).phrase
        message = said.get(exc.status_code) if default else None
        return _error(exc.status_code, message or str(exc.detail), headers=exc.headers)

    @app.exception_handler(RequestValidationError)
    def bad_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = jsonable_encoder(exc.errors(), exclude={"input", "ctx", "url"})
        first = problems[0] if problems else {}
        where = ".".join(str(p) for p in first.get("loc", ()))
        if where == "body" and (sent := _not_json(request)):
            return _error(400, sent, problems)
        return _error(400, f"{where}: {first.get('msg', 'invalid request')}", problems)

    guarded = [Depends(authorised)]

    @app.get("/health")
    async def health() -> dict[str, Any]:
        """Whether the service can reach its store (503 when it cannot), and whether it is
        ready: not while it reads the store's threshold as it starts, which lookups wait for. It
        needs no key, so it says nothing of the store but that it answers."""
        is_ready = ready.is_set()
        return await held.read(
            lambda source: {"status": "ok", "documents": source.count(), "ready": is_ready}
        )

    @app.get("/", include_in_schema=False)
    async def home() -> RedirectResponse:
        """A browser pointed at the service lands on its documentation (which needs the key)."""
        return RedirectResponse("/docs")

    @app.get("/openapi.json", dependencies=guarded, include_in_schema=False)
    async def openapi() -> dict[str, Any]:
        return app.openapi()

    @app.get("/docs", dependencies=guarded, include_in_schema=False)
    async def docs() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url="/openapi.json",
            title="neardup API",
            swagger_js_url=f"{DOCS_ASSETS}/swagger-ui-bundle.js",
            swagger_css_url=f"{DOCS_ASSETS}/swagger-ui.css",
            swagger_favicon_url=f"{DOCS_ASSETS}/favicon-32x32.png",
        )

    # Swagger UI's own script, style and icon, from the installed package: public code.
    app.mount(DOCS_ASSETS, StaticFiles(directory=str(swagger_ui_path)), name="docs-assets")

    @app.get("/stats", dependencies=guarded)
    async def stats() -> dict[str, Any]:
        """What the store holds and the settings it was indexed with."""
        return await held.read(api.stats)

    @app.post("/lookup", dependencies=guarded)
    async def lookup(body: LookupRequest) -> dict[str, Any]:
        """The stored duplicates of a record (``id``) or of a new ``text``: exact ones first."""
        matches = await held.read(
            lambda source: api.lookup(
                source, id=body.id, text=body.text, collapse=body.collapse_copies, **body.request()
            )
        )
        return {"matches": [asdict(m) for m in matches]}

    @app.post("/lookup/batch", dependencies=guarded)
    async def lookup_batch(body: LookupBatchRequest) -> dict[str, Any]:
        """The stored duplicates of each of many new records, none of them added: one answer a
        record, in order, in a few round trips to the store. A record's own stored version
        (the same id) is no duplicate of it."""
        records = [Record(r.id, r.text, n) for n, r in enumerate(body.records, start=1)]
        found = await held.read(
            lambda source: api.lookup_records(
                records, source, collapse=body.collapse_copies, **body.request()
            )
        )
        return {
            "results": [
                {"id": record_id, "matches": [asdict(m) for m in matches]}
                for record_id, matches in found.results
            ],
            "narrowed": found.narrowed,
        }

    @app.get("/explain", dependencies=guarded)
    async def explain(query: Annotated[ExplainQuery, Query()]) -> dict[str, Any]:
        """Why two records (two ``id``, two ``text``, or one of each) are or are not
        near-duplicates: the word diff, the similarities, the shared tokens, the deciding rule."""
        found = await held.read(
            lambda source: api.explain(source, ids=query.id, texts=query.text, **query.request())
        )
        return found.as_dict()

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
            "replaced": result.replaced,
            "unchanged": result.unchanged,
            "narrowed": result.narrowed,
        }

    @app.post("/link", dependencies=guarded)
    async def link(body: LinkRequest) -> dict[str, Any]:
        """Link records one to one with the stored ones: each with the stored record most like
        it, when that record is most like it too of all the request's records."""
        records = [Record(r.id, r.text, n) for n, r in enumerate(body.records, start=1)]
        linked = await held.read(lambda source: api.link_records(records, source, **body.request()))
        return {
            "links": [
                {
                    "id": record_id,
                    "stored_id": m.id,
                    "exact": m.exact,
                    "edit_distance": m.edit_distance,
                    "similarity": m.similarity,
                    "shared_tokens": m.shared_tokens,
                    "copies": list(m.copies),
                }
                for record_id, m in linked.links
            ],
            "threshold": linked.threshold,
            "how": linked.how,
            "records": linked.records,
            "stored": linked.stored,
            "skipped": dict(linked.skipped.reasons),
            "narrowed": linked.narrowed,
            "bands_reach": linked.bands_reach,
        }

    @app.get("/records/{record_id:path}", dependencies=guarded)
    async def get_record(record_id: str) -> dict[str, Any]:
        """One stored record: its normalised content, MD5, first word and number of words."""
        found = await held.read(lambda source: source.get([record_id]).get(record_id))
        if found is None:
            raise _Refused(404, f"no record with id {record_id!r}")
        return asdict(found)

    @app.delete("/records/{record_id:path}", dependencies=guarded)
    def delete_record(record_id: str) -> dict[str, Any]:
        """Remove a record; later lookups and reports no longer see it."""
        with held.use() as source:
            if not api.delete([record_id], source, few=True).removed:
                raise _Refused(404, f"no record with id {record_id!r}")
        return {"deleted": record_id}

    return app


class _BodyLimit:
    """Refuses bodies over ``max_body`` bytes with 413: at once when Content-Length says so;
    a streamed body (no Content-Length) is read here first, up to the limit. Plain ASGI,
    because FastAPI's ``@app.middleware`` wrapper costs more per request than a lookup on the
    embedded store."""

    def __init__(self, app: ASGIApp, max_body: int) -> None:
        self.app, self.max_body = app, max_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        length = dict(scope["headers"]).get(b"content-length")
        if length is not None:
            if length.isdigit() and int(length) > self.max_body:
                return await self.too_large(scope, receive, send)
            return await self.app(scope, receive, send)
        chunks: list[bytes] = []
        size, more = 0, True
        while more:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                return None
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            if size > self.max_body:
                return await self.too_large(scope, receive, send)
            more = message.get("more_body", False)
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": b"".join(chunks), "more_body": False}

        await self.app(scope, replay, send)

    async def too_large(self, scope: Scope, receive: Receive, send: Send) -> None:
        await _error(413, f"the body is over {self.max_body} bytes")(scope, receive, send)


class _Refused(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


def _error(
    status: int, message: str, details: Any = None, headers: dict[str, str] | None = None
) -> JSONResponse:
    body: dict[str, Any] = {"error": message}
    if details is not None:
        body["details"] = details
    return JSONResponse(status_code=status, content=body, headers=headers)


@contextmanager
def _no_lock() -> Iterator[None]:
    yield


# How long the service answers by the store's settings as it read them (its threshold among
# them) before it reads them again: reading them costs an engine two round trips.
SETTINGS_MAX_AGE = 1.0


class _HeldStore:
    """The service's store, opened on first use and kept. An engine's client serves every
    request thread at once; the embedded store gets one connection per thread (WAL lets
    readers run side by side, and writers wait for each other's transaction)."""

    def __init__(self, url: str | None) -> None:
        self.url = url or default_store_url()
        self.store: Store | None = None
        self.opening = threading.Lock()
        self.per_thread = threading.local() if is_embedded(self.url) else None

    @contextmanager
    def use(self, create: bool = False) -> Iterator[Store]:
        if self.per_thread is not None:
            if not hasattr(self.per_thread, "store"):
                self.per_thread.store = open_store(self.url, create=create)
            store = self.per_thread.store
        else:
            with self.opening:
                if self.store is None:
                    self.store = open_store(self.url, create=create)
            store = self.store
        # What another process (an index run, another thread's connection) wrote since.
        store.reload_settings(older_than=SETTINGS_MAX_AGE)
        yield store

    async def read(self, work: Callable[[Store], T]) -> T:
        """``work`` on the store, in the thread pool: a lookup asking for thousands of rows
        takes a second, and on the event loop it held up every other request, /health too."""
        return await run_in_threadpool(self._run, work)

    def _run(self, work: Callable[[Store], T]) -> T:
        with self.use() as source:
            return work(source)
