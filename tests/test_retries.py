"""Engine requests are retried on 502, 503 and 504, and a server that stays down is one line.

A loopback listener answers like the engine would, after failing a set number of times."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from neardup.errors import NeardupError, StoreFull
from neardup.stores import open_store


class Flaky(BaseHTTPRequestHandler):
    """Fails the first ``failures`` requests with ``status``, then answers like the engine."""

    failures = 0
    status = 503
    seen: list[str]

    def _answer(self) -> None:
        type(self).seen.append(self.path)
        if len(self.seen) <= self.failures:
            self.send_response(self.status)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = b""
        if self.path.startswith("/solr/admin/info/system"):
            body = json.dumps({"mode": "std"}).encode()
        elif self.path.startswith("/solr/admin/cores"):
            body = json.dumps({"status": {"x": {"name": "x"}}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("X-Elastic-Product", "Elasticsearch")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_HEAD = do_POST = _answer

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def flaky() -> Iterator[type[Flaky]]:
    handler = type("Handler", (Flaky,), {"seen": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    handler.port = server.server_port
    yield handler
    server.shutdown()
    server.server_close()


URLS = {
    "solr": "solr://127.0.0.1:{port}/solr/x",
    "elasticsearch": "elasticsearch://127.0.0.1:{port}/x",
}


@pytest.mark.parametrize("status", [502, 503, 504])
@pytest.mark.parametrize("engine", list(URLS))
def test_passing_failures_are_retried(flaky, engine: str, status: int) -> None:
    flaky.failures, flaky.status = 2, status
    store = open_store(URLS[engine].format(port=flaky.port), create=False)
    store.close()
    assert flaky.seen[0] == flaky.seen[1] == flaky.seen[2]  # the same request, three times


@pytest.mark.parametrize("engine", list(URLS))
def test_a_server_that_stays_down_is_one_error(flaky, engine: str) -> None:
    flaky.failures = 1000
    with pytest.raises(NeardupError, match="503"):
        open_store(URLS[engine].format(port=flaky.port), create=False)
    assert 2 <= len(flaky.seen) <= 10  # retried a few times, not forever


class DiskFull(Flaky):
    """Answers as a Solr node whose disk filled does: every request refused with the JVM's
    IOException (the update log that real-time reads use is on that disk too)."""

    def _answer(self) -> None:
        type(self).seen.append(self.path)
        body = json.dumps(
            {"error": {"msg": "java.io.IOException: No space left on device", "code": 500}}
        ).encode()
        self.send_response(500)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_HEAD = do_POST = _answer


def test_a_solr_node_whose_disk_is_full_is_said_so() -> None:
    """It was 'HTTP 500: java.io.IOException: No space left on device', where SQLite and
    Elasticsearch say their disk is full (and the service answers 507)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), type("Handler", (DiskFull,), {"seen": []}))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with pytest.raises(StoreFull) as full:
            open_store(f"solr://127.0.0.1:{server.server_port}/solr/x", create=False)
        assert str(full.value) == (
            f"Solr at http://127.0.0.1:{server.server_port}/solr: its disk is full "
            "(java.io.IOException: No space left on device)"
        )
    finally:
        server.shutdown()
        server.server_close()
