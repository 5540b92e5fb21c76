"""Engine requests are retried on 502, 503 and 504, and a server that stays down is one line.

A loopback listener answers like the engine would, after failing a set number of times."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from neardup.errors import NeardupError
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
