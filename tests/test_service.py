"""The HTTP service, in-process on every store kind, and as a `neardup serve` subprocess on a free
loopback port for what needs a real server: concurrent adds and the process itself."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import requests
from fastapi.testclient import TestClient

from neardup import api, service
from neardup.errors import InvalidParameter
from neardup.generate import write_corpus
from neardup.readers import Record
from neardup.service import create_app

RECORDS = {
    "1": "Bella Napoli Trattoria 418 Harbor Street Portland ME 04101",
    "2": "Bella Napoli Trattoria 418 Harbor St. Portland, ME 04101",
    "3": "Golden Lotus Dim Sum 1209 Grant Ave San Francisco CA 94133",
    "4": "Thai Orchid Kitchen 58 Elm Street Northampton MA 01060",
    "a/b c": "an id with a slash and a space: Golden Lotus Dim Sum 1209 Grant Avenue",
}


@pytest.fixture
def indexed_url(store_url_factory, tmp_path: Path) -> str:
    url = store_url_factory()
    path = tmp_path / "records.jsonl"
    path.write_text("".join(f'{{"id": "{i}", "text": "{t}"}}\n' for i, t in RECORDS.items()))
    api.index([path], url)
    return url


@pytest.fixture
def client(indexed_url: str) -> Iterator[TestClient]:
    with TestClient(create_app(indexed_url)) as test_client:
        yield test_client


def test_health_and_stats(client: TestClient) -> None:
    health = client.get("/health").json()
    assert health == {"status": "ok", "documents": len(RECORDS), "ready": True}
    assert client.get("/stats").json()["documents"] == len(RECORDS)


def test_the_service_answers_by_what_another_process_wrote(
    store_url_factory, tmp_path: Path, monkeypatch
) -> None:
    """The service holds its store open; an index run elsewhere that stores records makes the
    store forget its automatic threshold, and the service's answers follow (read again once
    its copy of the settings is SETTINGS_MAX_AGE old; 0 here)."""
    monkeypatch.setattr(service, "SETTINGS_MAX_AGE", 0.0)
    url, people, more = store_url_factory(), tmp_path / "people.tsv", tmp_path / "more.tsv"
    write_corpus(people, None, 300, kind="people", seed=5)
    write_corpus(more, None, 300, kind="people", seed=6)
    more.write_text(more.read_text().replace("\np", "\nq"))  # ids of their own
    api.index([people], url)
    with TestClient(create_app(url)) as client:
        client.post("/lookup", json={"id": "p00000000"})  # reads the threshold: remembered
        chosen = client.get("/stats").json()["rules_from"]["threshold"]
        assert chosen.startswith("auto: ") and "next command" not in chosen
        api.index([more], url)  # another handle: 300 records more
        forgotten = client.get("/stats").json()["rules_from"]["threshold"]
        assert forgotten == "auto: read from the records by the next command that needs it"
        client.post("/lookup", json={"id": "p00000000"})
        with api.opened(url) as store:  # read again from all 600, as any process reads it
            assert client.get("/stats").json()["rules_in_effect"]["threshold"] == (
                api.rules_for(store).threshold
            )


def test_lookup_by_id_and_by_text_with_rules(client: TestClient, indexed_url: str) -> None:
    found = client.post("/lookup", json={"id": "1"}).json()["matches"]
    assert [m["id"] for m in found] == ["2"]
    assert found[0]["similarity"] == api.lookup(indexed_url, id="1")[0].similarity
    text = {"text": "Golden Lotus Dim Sum, 1209 Grant Ave., San Francisco CA 94133"}
    assert client.post("/lookup", json=text).json()["matches"][0]["id"] == "3"
    strict = client.post("/lookup", json={"id": "1", "max_edit_distance": 0}).json()
    assert strict == {"matches": []}


def test_a_batch_of_lookups_answers_each_record_as_one_lookup_would(
    client: TestClient, indexed_url: str
) -> None:
    """Records arriving many at a time are checked in one request, none of them added: the
    same answers as a lookup each, a record with none included, its own stored version left
    out."""
    batch = [
        {"id": "new1", "text": "Bella Napoli Trattoria, 418 Harbor St, Portland ME 04101"},
        {"id": "new2", "text": "a text like nothing stored"},
        {"id": "2", "text": RECORDS["2"] + " (edited)"},
        {"id": "new3", "text": "!!!"},  # no words
    ]
    answer = client.post("/lookup/batch", json={"records": batch})
    assert answer.status_code == 200, answer.text
    results = answer.json()["results"]
    assert [r["id"] for r in results] == ["new1", "new2", "2", "new3"]
    one_each = [
        client.post("/lookup", json={"text": r["text"]}).json()["matches"] for r in batch[:2]
    ]
    assert [r["matches"] for r in results[:2]] == one_each
    assert [m["id"] for m in results[2]["matches"]] == ["1"] and results[3]["matches"] == []
    assert api.stats(indexed_url)["documents"] == len(RECORDS)
    twice = client.post("/lookup/batch", json={"records": batch[:1] * 2})
    assert twice.status_code == 400 and "given twice" in twice.text


def test_lookup_can_collapse_copies(client: TestClient) -> None:
    copies = {"records": [{"id": f"c{i}", "text": RECORDS["4"]} for i in range(3)]}
    assert client.post("/records", json=copies).json()["added"] == ["c0", "c1", "c2"]
    every = client.post("/lookup", json={"id": "4"}).json()["matches"]
    assert [m["id"] for m in every] == ["c0", "c1", "c2"]
    one = client.post("/lookup", json={"id": "4", "collapse_copies": True}).json()["matches"]
    assert [(m["id"], m["copies"]) for m in one] == [("c0", ["c1", "c2"])]


def test_records_link_one_to_one_with_the_stored_ones(client: TestClient, indexed_url: str) -> None:
    """The answer of ``POST /link`` is the API's links, with the threshold and how it came."""
    given = [
        ("x", "Bella Napoli Trattoria, 418 Harbor St Portland ME 04101"),
        ("y", "Thai Orchid Kitchen 58 Elm St Northampton MA 01060"),
        ("z", "..."),
    ]
    body = {"records": [{"id": i, "text": t} for i, t in given], "threshold": 0}
    answer = client.post("/link", json=body).json()
    expected = api.link_records(
        [Record(i, t, n) for n, (i, t) in enumerate(given, start=1)],
        indexed_url,
        rules={"threshold": 0},
    )
    assert [(link["id"], link["stored_id"], link["similarity"]) for link in answer["links"]] == [
        (i, m.id, m.similarity) for i, m in expected.links
    ]
    assert {link["id"]: link["stored_id"] for link in answer["links"]}["y"] == "4"
    assert answer["records"] == 2 and answer["stored"] == len(RECORDS)
    assert answer["skipped"] == {"no words after normalisation": 1}
    assert answer["narrowed"] == expected.narrowed == 0
    assert answer["bands_reach"] == expected.bands_reach > 0  # a store of bands alone
    assert answer["how"] == "no threshold" and answer["threshold"] == 0
    refused = client.post("/link", json={"records": [], "threshold": 2})
    assert refused.status_code == 400 and "threshold" in refused.text


def test_records_get_add_and_delete(client: TestClient) -> None:
    assert client.get("/records/a/b c").json()["content"].startswith("an id with a slash")
    added = client.post("/records", json={"records": [{"id": "9", "text": "Brand new place"}]})
    assert added.json() == {
        "added": ["9"], "duplicates": {}, "skipped": {}, "replaced": [], "unchanged": [],
        "narrowed": 0,
    }  # fmt: skip
    assert (
        client.post("/lookup", json={"text": "brand new place"}).json()["matches"][0]["id"] == "9"
    )
    assert client.delete("/records/9").json() == {"deleted": "9"}
    assert client.get("/records/9").status_code == 404
    assert client.delete("/records/9").status_code == 404


def test_ids_sent_as_numbers_and_bodies_sent_as_forms(client: TestClient) -> None:
    """A JavaScript client sends a database's key as a number, and was refused ("Input should
    be a valid string"); ``curl -d`` sends JSON as a form, and was told the body should be "a
    valid dictionary"."""
    added = client.post("/records", json={"records": [{"id": 90, "text": "Brand new place"}]})
    assert added.json()["added"] == ["90"]
    by_number = client.post("/lookup", json={"id": 90}).json()
    assert by_number == client.post("/lookup", json={"id": "90"}).json()
    assert client.get("/records/90").status_code == 200
    flag = client.post("/records", json={"records": [{"id": True, "text": "x"}]})
    assert flag.status_code == 400 and flag.json()["error"].startswith("body.records.0.id: ")
    form = client.post(
        "/lookup",
        content=json.dumps({"text": "brand new place"}),
        headers={"content-type": "application/x-www-form-urlencoded"},
    )
    assert form.status_code == 400
    assert form.json()["error"].startswith(
        "the body was sent as application/x-www-form-urlencoded, and the service reads JSON: "
        "send it with Content-Type: application/json"
    )


def test_texts_that_are_not_unicode_are_refused_by_name(client: TestClient) -> None:
    records = [{"id": "14", "text": "fine"}, {"id": "half\ud800", "text": "not Unicode"}]
    for path, body, where in [
        ("/records", {"records": records}, "records.1.id"),
        ("/lookup", {"text": "a text \udfff"}, "text"),
    ]:
        answer = _post_escaped(client, path, body)  # as JSON escapes: UTF-8 has no such text
        assert answer.status_code == 400, answer.text
        assert answer.json()["error"] == f"body.{where}: Value error, holds half of a " + (
            "surrogate pair: not Unicode text"
        )
    assert client.get("/records/14").status_code == 404  # nothing of a refused request


def _post_escaped(client: TestClient, path: str, body: dict) -> Any:
    """POST a body that holds lone surrogates: JSON escapes them, UTF-8 cannot."""
    return client.post(path, content=json.dumps(body), headers={"content-type": "application/json"})


def test_add_if_unique_names_the_duplicates_it_refused(client: TestClient) -> None:
    body = {
        "if_unique": True,
        "records": [
            {"id": "10", "text": "Thai Orchid Kitchen 58 Elm St Northampton MA 01060"},
            {"id": "11", "text": "Casa Oaxaca Cocina 2210 Mission St San Francisco"},
            {"id": "12", "text": "Casa Oaxaca Cocina 2210 Mission Street San Francisco"},
            {"id": "13", "text": "?!"},
        ],
    }
    answer = client.post("/records", json=body).json()
    assert answer["added"] == ["11"]
    assert [m["id"] for m in answer["duplicates"]["10"]] == ["4"]
    assert [m["id"] for m in answer["duplicates"]["12"]] == ["11"]  # earlier in the same request
    assert answer["skipped"] == {"13": "no words after normalisation"}
    assert client.get("/stats").json()["documents"] == len(RECORDS) + 1
    again = client.post("/records", json={"if_unique": True, "records": body["records"][1:2]})
    assert again.json() == {
        "added": [], "duplicates": {}, "skipped": {}, "replaced": [], "unchanged": ["11"],
        "narrowed": 0,
    }  # fmt: skip


@pytest.mark.parametrize(
    ("method", "path", "kwargs", "status", "message"),
    [
        (
            "post",
            "/lookup",
            {"content": b"{not json", "headers": {"content-type": "application/json"}},
            400,
            "JSON",
        ),
        ("post", "/lookup", {"json": {"id": "1", "candidates": "many"}}, 400, "candidates"),
        ("post", "/lookup", {"json": {"id": "1", "text": "x"}}, 400, "exactly one of id and text"),
        (
            "post",
            "/lookup",
            {"json": {"id": "1", "threshold": 3}},
            400,
            "threshold must be between",
        ),
        ("post", "/lookup", {"json": {"id": "nope"}}, 404, "no record with id 'nope'"),
        ("post", "/lookup", {"json": {"id": "1", "method": "bands"}}, 200, ""),
        ("post", "/lookup", {"json": {"id": "1", "method": "shingles"}}, 400, "indexes only bands"),
        ("post", "/lookup", {"json": {"id": "1", "similarity": "cosine"}}, 400, "similarity"),
        ("post", "/lookup", {"json": {"id": "1", "treshold": 0.9}}, 400, "treshold"),
        ("get", "/explain?id=1&id=2&treshold=0.9", {}, 400, "treshold"),
        ("get", "/explain?id=1&id=2&similarity=jaccard", {}, 200, ""),
        ("post", "/records", {"json": {"records": "x"}}, 400, "records"),
        ("get", "/records/nope", {}, 404, "no record with id 'nope'"),
        ("get", "/lookups", {}, 404, "no such path: GET /lookups (the API is at /docs)"),
        ("delete", "/lookup", {}, 405, "/lookup does not take DELETE"),
        (
            "post",
            "/lookup",
            {"content": b'{"text": "\xff"}', "headers": {"content-type": "application/json"}},
            400,
            "error parsing the body",
        ),
    ],
)
def test_errors_are_json_with_the_right_status(
    client: TestClient, method: str, path: str, kwargs: dict, status: int, message: str
) -> None:
    response = getattr(client, method)(path, **kwargs)
    assert response.status_code == status, response.text
    if status != 200:
        assert message in response.json()["error"]
        assert "Traceback" not in response.text
    if status == 405:
        assert response.headers["allow"] == "POST"


def test_explain_a_pair(client: TestClient, indexed_url: str) -> None:
    answer = client.get("/explain", params={"id": ["1", "2"]})
    assert answer.status_code == 200, answer.text
    expected = api.explain(indexed_url, ids=["1", "2"]).as_dict()
    assert answer.json() == json.loads(json.dumps(expected)) and expected["accepted"]
    mixed = client.get("/explain", params={"id": "3", "text": RECORDS["4"], "method": "bands"})
    assert mixed.json()["candidate"] is False and mixed.json()["b_id"] is None
    assert client.get("/explain", params={"id": "1"}).status_code == 400
    assert client.get("/explain", params={"id": ["1", "nine"]}).status_code == 404


def test_a_body_over_the_limit_is_refused(indexed_url: str) -> None:
    with TestClient(create_app(indexed_url, max_body=1000)) as small:
        big = {"records": [{"id": str(i), "text": "words " * 50} for i in range(10)]}
        response = small.post("/records", json=big)
        assert response.status_code == 413 and "over 1000 bytes" in response.json()["error"]
        # A streamed body has no Content-Length: it is counted as it arrives.
        streamed = small.post("/lookup", content=iter([b'{"text": "', b"word " * 300, b'"}']))
        assert streamed.status_code == 413 and "over 1000 bytes" in streamed.json()["error"]
        assert small.post("/lookup", json={"text": "cedar bakery"}).status_code == 200


def test_an_api_key_when_one_is_set(indexed_url: str) -> None:
    with TestClient(create_app(indexed_url, api_key="s3cret")) as keyed:
        health = keyed.get("/health")  # for load balancers: no key needed, and no store named
        assert health.status_code == 200 and set(health.json()) == {"status", "documents", "ready"}
        for path in ("/docs", "/openapi.json", "/stats"):
            assert keyed.get(path).status_code == 401, path
            assert keyed.get(path, headers={"X-API-Key": "s3cret"}).status_code == 200, path
        assert keyed.post("/lookup", json={"id": "1"}).status_code == 401
        wrong = keyed.post("/lookup", json={"id": "1"}, headers={"X-API-Key": "nope"})
        assert wrong.status_code == 401 and "X-API-Key" in wrong.json()["error"]
        right = keyed.post("/lookup", json={"id": "1"}, headers={"X-API-Key": "s3cret"})
        assert right.status_code == 200


@pytest.mark.parametrize("url", ["solr://127.0.0.1:9/solr/x", "elasticsearch://127.0.0.1:9/x"])
def test_a_store_that_is_down_is_503(url: str) -> None:
    with TestClient(create_app(url)) as down:
        for response in (down.get("/health"), down.post("/lookup", json={"id": "1"})):
            assert response.status_code == 503
            assert "not reachable" in response.json()["error"]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _serving(url: str) -> tuple[subprocess.Popen[str], str]:
    """`neardup serve` as a user starts it, on a free loopback port, and the port's URL."""
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "neardup.cli", "serve", "--store", url, "--port", str(port)],
        stderr=subprocess.PIPE,
        text=True,
        env={k: v for k, v in os.environ.items() if k != "NEARDUP_API_KEY"},
    )
    return process, f"http://127.0.0.1:{port}"


@pytest.fixture
def served(indexed_url: str) -> Iterator[str]:
    """`neardup serve` as a user starts it, once it answers."""
    process, base = _serving(indexed_url)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if requests.get(f"{base}/health", timeout=1).status_code == 200:
                break
        except requests.ConnectionError:
            time.sleep(0.1)
    try:
        yield base
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_concurrent_adds_of_one_new_text_store_it_once(served: str) -> None:
    def add(n: int) -> requests.Response:
        body = {"if_unique": True, "records": [{"id": f"new{n}", "text": "One brand new listing"}]}
        return requests.post(f"{served}/records", json=body, timeout=60)

    with ThreadPoolExecutor(max_workers=8) as pool:
        answers = [r.json() for r in pool.map(add, range(8))]
    assert sum(len(a["added"]) for a in answers) == 1
    assert sum(len(a["duplicates"]) for a in answers) == 7
    assert requests.get(f"{served}/docs", timeout=10).status_code == 200
    home = requests.get(served, timeout=10)  # a browser pointed at the service: its documentation
    assert home.url == f"{served}/docs" and "swagger-ui" in home.text
    assert requests.get(f"{served}/openapi.json", timeout=10).json()["info"]["title"] == "neardup"


def test_an_empty_api_key_is_refused_not_taken_as_none(indexed_url: str) -> None:
    with pytest.raises(InvalidParameter, match="the API key is empty"):
        create_app(indexed_url, api_key="")


def test_the_docs_page_needs_no_network(client: TestClient) -> None:
    page = client.get("/docs").text
    assets = re.findall(r"""(?:src|href)=["']([^"']+)["']""", page)
    assert assets and all(a.startswith("/docs/assets/") for a in assets), assets
    assert "cdn" not in page.lower() and "https://" not in page
    for asset in assets:
        assert client.get(asset).status_code == 200, asset
    assert client.get("/openapi.json").json()["openapi"].startswith("3.1")


def test_a_batch_answer_says_exactly_what_was_stored(client: TestClient) -> None:
    twice = {"if_unique": True, "records": [{"id": "f1", "text": "a"}, {"id": "f1", "text": "b"}]}
    refused = client.post("/records", json=twice)
    assert refused.status_code == 400 and "'f1' is given twice" in refused.json()["error"]
    extra = {"records": [{"id": "x", "text": "words here", "price": 3}]}
    assert client.post("/records", json=extra).status_code == 400  # as unknown top-level fields
    empty = client.post("/records", json={"records": [{"id": " ", "text": "words here"}]})
    assert empty.json()["skipped"] == {" ": "empty id"}
    fresh = client.post("/records", json={"records": [{"id": "n1", "text": "Quite new words"}]})
    assert fresh.json()["added"] == ["n1"] and fresh.json()["replaced"] == []
    again = client.post("/records", json={"records": [{"id": "n1", "text": "Other new words"}]})
    assert again.json()["added"] == ["n1"] and again.json()["replaced"] == ["n1"]
    assert client.get("/records/n1").json()["content"] == "other new words"


def test_a_slow_read_does_not_hold_up_other_requests(
    indexed_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lookup that takes long (thousands of rows) runs off the event loop: /health answers
    while it is still running."""
    healthy = threading.Event()

    def slow_lookup(*args: Any, **kwargs: Any) -> list:
        assert healthy.wait(10), "/health waited for the lookup"
        return []

    monkeypatch.setattr(api, "lookup", slow_lookup)
    with TestClient(create_app(indexed_url)) as client, ThreadPoolExecutor(1) as pool:
        looking = pool.submit(client.post, "/lookup", json={"id": "1", "candidates": 10000})
        assert client.get("/health").status_code == 200
        healthy.set()
        assert looking.result(timeout=20).json() == {"matches": []}


def test_the_service_reads_the_stores_threshold_as_it_starts(tmp_path: Path) -> None:
    """A store whose automatic threshold no command had read yet: the first lookup read it
    from every candidate pair, a report's work (25 s at a million records), while its client
    waited. `neardup serve` now reads it as it starts, remembers it in the store and says it,
    and /health says it is ready once it has."""
    api.generate(600, tmp_path / "people.csv", kind="people", seed=5)
    url = f"sqlite:///{tmp_path / 'people.db'}"
    api.index([tmp_path / "people.csv"], url)
    assert api.stats(url)["rules_from"]["threshold"] == (
        "auto: read from the records by the next command that needs it"
    )
    process, base = _serving(url)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                health = requests.get(f"{base}/health", timeout=5).json()
            except requests.ConnectionError:
                health = {}
            if health.get("ready"):
                break
            time.sleep(0.1)
        read = api.stats(url)["rules_from"]["threshold"]  # remembered by the time it is ready
    finally:
        process.terminate()
        said = process.communicate(timeout=30)[1]
    assert health == {"status": "ok", "documents": 600, "ready": True}
    assert read.startswith("auto: the valley")
    threshold = api.rules_for(url).threshold
    assert f"neardup: threshold {threshold:g} ({read}), read in " in said
    assert "Traceback" not in said


def _ready(client: TestClient, deadline: float = 30) -> dict[str, Any]:
    """/health, once it says the service is ready (or at the deadline)."""
    ends = time.monotonic() + deadline
    while not (health := client.get("/health").json())["ready"] and time.monotonic() < ends:
        time.sleep(0.05)
    return health


def test_the_service_reads_the_threshold_again_once_an_index_run_has_changed_the_records(
    tmp_path: Path,
) -> None:
    """A service serving a store that `neardup index` adds to: the run forgets the threshold it
    read from other records, and the service's next lookup read it again while its client
    waited. The service reads it again once the records stay as they are."""
    api.generate(900, tmp_path / "people.csv", kind="people", seed=5)
    lines = (tmp_path / "people.csv").read_text(encoding="utf-8").splitlines(keepends=True)
    (tmp_path / "first.csv").write_text("".join(lines[:601]), encoding="utf-8")
    (tmp_path / "more.csv").write_text(lines[0] + "".join(lines[601:]), encoding="utf-8")
    url = f"sqlite:///{tmp_path / 'people.db'}"
    api.index([tmp_path / "first.csv"], url)
    said: list[str] = []
    with TestClient(create_app(url, threshold_read=said.append)) as client:
        assert _ready(client)["ready"] and len(said) == 1
        assert api.stats(url)["rules_from"]["threshold"].startswith("auto: the valley")
        api.index([tmp_path / "more.csv"], url)  # another writer: an index run
        deadline = time.monotonic() + 30
        while len(said) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        health = _ready(client)
    assert health == {"status": "ok", "documents": 900, "ready": True}
    assert len(said) == 2 and said[1].startswith("threshold 0.")
    choice = api.stats(url)["rules_from"]["threshold"]
    assert choice.startswith("auto: the valley") and f"({choice})" in said[1]
    assert not api.threshold_to_read(url)


def test_a_failed_read_ahead_is_one_line_and_the_service_answers(
    indexed_url: str, monkeypatch
) -> None:
    """What the read ahead cannot foresee ends it with a line said, not a thread's traceback;
    lookups read the threshold themselves, as they did before there was a read ahead."""

    def broken(_store: object) -> bool:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(api, "threshold_to_read", broken)
    said: list[str] = []
    with TestClient(create_app(indexed_url, threshold_read=said.append)) as client:
        assert _ready(client)["ready"]
        assert client.post("/lookup", json={"id": "1"}).status_code == 200
    assert said == [
        "warning: its threshold is no longer read ahead (RuntimeError('disk on fire')); "
        "lookups read it"
    ]
