"""What only the Elasticsearch store does: mapping, _meta and the settings document, bulk
failures, server errors."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import ClassVar

import pytest
from fastapi.testclient import TestClient

from neardup import api
from neardup.errors import NeardupError, StoreChanged, StoreFull, StoreUnavailable
from neardup.fingerprint import TOKEN_FIELDS, FingerprintParams, fingerprint
from neardup.readers import Record
from neardup.service import create_app
from neardup.stores import Document, TokenField, open_store
from neardup.stores.base import LAYOUT, MEASURED_SETTINGS
from neardup.stores.elasticsearch import RECORD_FIELDS, SETTINGS_INDEX
from neardup.stores.schema import elasticsearch_mapping
from tests.corpora import corpus
from tests.servers import when_a_report_reads


def test_parameters_live_in_the_mapping_meta(elasticsearch_server, elasticsearch_url) -> None:
    url = elasticsearch_url
    params = FingerprintParams("word", 2, 32, 8)
    with open_store(url) as store:
        store.ensure_params(params)
    index = url.rsplit("/", 1)[-1]
    mapping = elasticsearch_server.request("GET", f"{index}/_mapping").json()
    meta = mapping[index]["mappings"]["_meta"]
    assert meta["neardup_params"] == params.to_dict() | {"layout": LAYOUT}
    assert mapping[index]["mappings"]["properties"]["signature"]["type"] == "keyword"
    with open_store(url) as store:
        assert store.read_params() == params


def _mapping_version(server, index: str) -> int:
    state = server.request("GET", f"_cluster/state/metadata/{index}").json()
    return state["metadata"]["indices"][index]["mapping_version"]


def test_checked_adds_count_their_pairs_without_changing_the_mapping(
    elasticsearch_server, elasticsearch_url, tmp_path
) -> None:
    """What commands measure (here the pairs each check counts) lives in a document of
    neardup-settings: a change of mapping per add is a change of the cluster's state."""
    index = elasticsearch_url.rsplit("/", 1)[-1]
    lines = corpus(tmp_path / "records.txt", size=60).read_text().splitlines()[-60:]
    records = [Record(f"r{n}", line) for n, line in enumerate(lines)]
    api.add(records[:30], elasticsearch_url, if_unique=True)
    before = _mapping_version(elasticsearch_server, index)
    for record in records[30:]:
        api.add([record], elasticsearch_url, if_unique=True)
    assert _mapping_version(elasticsearch_server, index) == before
    document = elasticsearch_server.request("GET", f"{SETTINGS_INDEX}/_doc/{index}").json()
    assert document["_source"]["settings"]["checked_pairs"]["records"] == 60
    meta = elasticsearch_server.request("GET", f"{index}/_mapping").json()[index]["mappings"]
    assert set(meta["_meta"]["neardup_params"]) & MEASURED_SETTINGS == set()


def test_measured_settings_kept_in_the_mapping_are_read_and_moved(
    elasticsearch_server, elasticsearch_url
) -> None:
    """A store whose mapping's _meta holds what commands measured, as stores were written
    before the settings document: read from there, moved into the document at the next
    write, the configuration left in place."""
    index = elasticsearch_url.rsplit("/", 1)[-1]
    with open_store(elasticsearch_url) as store:
        params = store.ensure_params(None)
    choice = {"threshold": 0.7, "reason": "as an earlier neardup chose it"}
    settings = params.to_dict() | {"layout": LAYOUT, "threshold_choice": choice}
    meta = {"neardup_params": settings}
    elasticsearch_server.request("PUT", f"{index}/_mapping", json={"_meta": meta})
    with open_store(elasticsearch_url) as store:
        assert store.settings["threshold_choice"] == choice
        store.update_settings({"last_report": {"pairs": 3}})
    with open_store(elasticsearch_url) as store:
        assert store.settings["threshold_choice"] == choice
        assert store.settings["last_report"] == {"pairs": 3}
    document = elasticsearch_server.request("GET", f"{SETTINGS_INDEX}/_doc/{index}").json()
    assert document["_source"]["settings"]["threshold_choice"] == choice


def test_an_index_deleted_behind_the_store_forgets_what_was_measured(
    elasticsearch_server, elasticsearch_url
) -> None:
    """Its settings document names the index it was written for: an index of the same name
    made again does not read another index's threshold."""
    index = elasticsearch_url.rsplit("/", 1)[-1]
    with open_store(elasticsearch_url) as store:
        store.ensure_params(None)
        store.update_settings({"threshold_choice": {"threshold": 0.7}})
    elasticsearch_server.request("DELETE", index)
    with open_store(elasticsearch_url) as store:
        assert store.read_settings() is None
        store.ensure_params(None)
        assert "threshold_choice" not in store.settings


def test_bulk_failures_name_the_record(elasticsearch_url) -> None:
    with open_store(elasticsearch_url) as store:
        params = store.ensure_params(None)
        fine = fingerprint("some words here", params)
        immense = fingerprint("x" * 40_000 + " more", params)  # a term over Lucene's 32 KB limit
        with pytest.raises(
            NeardupError, match=r"rejected 1 record: 'huge-one': .*field \[first_word\]"
        ):
            store.upsert([Document("fine", fine), Document("huge-one", immense)])
        store.flush()
        assert list(store.get(["fine", "huge-one"])) == ["fine"]


def test_schema_apply_creates_the_index(elasticsearch_server, elasticsearch_url) -> None:
    api.apply_schema(elasticsearch_url)
    index = elasticsearch_url.rsplit("/", 1)[-1]
    assert elasticsearch_server.request("HEAD", index).status_code == 200
    api.apply_schema(elasticsearch_url)  # applying again is harmless


def test_a_missing_index_is_a_clear_error_for_readers(elasticsearch_server) -> None:
    url = elasticsearch_server.new_store_url().rsplit("/", 1)[0] + "/absent"
    with pytest.raises(StoreUnavailable, match="no Elasticsearch index 'absent'"):
        open_store(url, create=False)


def test_basic_auth(elasticsearch_secure_server, monkeypatch) -> None:
    server = elasticsearch_secure_server
    monkeypatch.setenv("NEARDUP_ES_CA_CERTS", str(server.ca))
    with_user = server.new_store_url()
    try:
        api.apply_schema(with_user)
        assert api.stats(with_user)["documents"] == 0
        bare = f"elasticsearch+https://{server.host_port}/{with_user.rsplit('/', 1)[1]}"
        with pytest.raises(NeardupError, match="401"):
            api.stats(bare)
        wrong = with_user.replace("s3cret", "wrong")
        with pytest.raises(NeardupError, match="401"):
            api.stats(wrong)
    finally:
        server.drop_made()


class _RecordingHandler(BaseHTTPRequestHandler):
    """Answers like Elasticsearch does to 'does this index exist', and keeps the headers."""

    seen: ClassVar[list[str | None]] = []

    def do_HEAD(self) -> None:
        self.seen.append(self.headers.get("Authorization"))
        self.send_response(200)
        self.send_header("X-Elastic-Product", "Elasticsearch")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def test_api_key_from_the_environment_is_sent(monkeypatch) -> None:
    # The integ-test distribution cannot issue API keys (no analysis-common module for the
    # security index), so this checks what the store sends, on a loopback listener.
    listener = HTTPServer(("127.0.0.1", 0), _RecordingHandler)
    thread = threading.Thread(target=listener.handle_request, daemon=True)
    thread.start()
    monkeypatch.setenv("NEARDUP_ES_API_KEY", "a2V5LWlkOmtleS1zZWNyZXQ=")
    store = open_store(f"elasticsearch://127.0.0.1:{listener.server_port}/x", create=False)
    store.close()
    thread.join(timeout=10)
    listener.server_close()
    assert _RecordingHandler.seen == ["ApiKey a2V5LWlkOmtleS1zZWNyZXQ="]


def test_an_unreachable_server_is_a_clear_error() -> None:
    with pytest.raises(StoreUnavailable, match="not reachable"):
        open_store("elasticsearch://127.0.0.1:9/x", create=False)


@pytest.mark.parametrize("url", ["elasticsearch://127.0.0.1:9200/", "elasticsearch://h:1/a/b"])
def test_malformed_urls(url: str) -> None:
    with pytest.raises(NeardupError, match="elasticsearch://host:port/INDEX"):
        open_store(url)


@pytest.mark.parametrize(
    ("name", "said"),
    [
        ("People", "is lowercase"),
        ("My Index", "is lowercase and holds no spaces"),
        ("shop,2024", "holds no ','"),
        ("_people", "does not start with -, _ or +"),
        ("x" * 256, "is 255 bytes at most"),
    ],
)
def test_an_index_name_elasticsearch_refuses_is_one_line_before_any_request(
    name: str, said: str
) -> None:
    """The index name is checked before the server is asked (none listens on port 9)."""
    with pytest.raises(
        NeardupError, match=f"cannot name an Elasticsearch index: an index name {said}"
    ):
        open_store(f"elasticsearch://127.0.0.1:9/{name}")


def test_a_record_keeps_its_tokens_out_of_its_stored_source(
    elasticsearch_server, elasticsearch_url, sqlite_url, tmp_path
) -> None:
    """Every token field is indexed and searched, none is stored (as in Solr's schema): a
    record's _source holds its five fields, after the store's _meta has changed too, and
    the store answers as the embedded one does."""
    records = corpus(tmp_path / "records.txt", size=300)
    index = elasticsearch_url.rsplit("/", 1)[-1]
    for url in (elasticsearch_url, sqlite_url):
        api.index([records], url, params={"fields": TOKEN_FIELDS})
        api.report(url)  # stores its threshold: a change of the store's _meta
    mapping = elasticsearch_server.request("GET", f"{index}/_mapping").json()
    assert mapping[index]["mappings"]["_source"] == {"excludes": list(TOKEN_FIELDS)}
    with open_store(elasticsearch_url) as store:
        some = [r.id for r in next(store.iter_records())][:5]
    for record_id in some:
        stored = elasticsearch_server.request("GET", f"{index}/_doc/{record_id}").json()
        assert set(stored["_source"]) == set(RECORD_FIELDS)
    assert api.report(elasticsearch_url) == api.report(sqlite_url)
    for method in TokenField:
        asked = {"method": method.value, "threshold": 0.5}
        assert api.lookup(elasticsearch_url, id=some[0], rules=asked) == api.lookup(
            sqlite_url, id=some[0], rules=asked
        )


def test_an_index_made_before_bands_had_doc_values_reports_by_reading(
    elasticsearch_url, sqlite_url, tmp_path, monkeypatch
) -> None:
    records = corpus(tmp_path / "records.txt")
    old = elasticsearch_mapping()
    old["properties"]["bands"]["doc_values"] = False
    monkeypatch.setattr("neardup.stores.elasticsearch.elasticsearch_mapping", lambda: old)
    api.index([records], elasticsearch_url)
    monkeypatch.undo()  # what a newer neardup sees: it leaves the field as it is
    api.index([records], sqlite_url)
    with open_store(elasticsearch_url) as store:
        assert not store.lists_buckets(TokenField.BANDS)
    assert api.report(elasticsearch_url) == api.report(sqlite_url)
    with pytest.raises(NeardupError, match="made before its bands had doc values"):
        api.report(elasticsearch_url, strategy="buckets")


def test_a_url_may_name_several_nodes_and_the_client_fails_over(
    elasticsearch_url: str, tmp_path: Path
) -> None:
    """elasticsearch://h1:9200,h2:9200/index: a node that is down (port 9, nothing listens)
    comes first; the client's node pool goes on to the live one."""
    scheme, rest = elasticsearch_url.split("://", 1)
    url = f"{scheme}://127.0.0.1:9,{rest}"
    (tmp_path / "r.txt").write_text(
        "1 Bella Napoli Trattoria 418 Harbor St\n2 Thai Orchid 58 Elm\n"
    )
    api.index([tmp_path / "r.txt"], url)
    assert api.stats(url)["documents"] == 2
    assert [m.id for m in api.lookup(url, text="Bella Napoli Trattoria 418 Harbor Street")] == ["1"]
    with open_store(url) as store:
        assert store.url.startswith(f"{scheme}://127.0.0.1:9,127.0.0.1:")


def test_credentials_are_never_in_messages() -> None:
    with pytest.raises(NeardupError) as refused:
        open_store("elasticsearch://ann:s3cret@127.0.0.1:9200/?shards=x")
    assert "s3cret" not in str(refused.value)
    with pytest.raises(NeardupError) as solr:
        open_store("solr://ann:s3cret@h1:8983,h2:8983/solr/c")
    assert "s3cret" not in str(solr.value) and "names one node, not 2" in str(solr.value)


def test_many_candidate_queries_go_in_msearches_of_bounded_rows(
    elasticsearch_url, tmp_path, monkeypatch
) -> None:
    """A batch of queries is split into _msearch requests of at most MSEARCH_HITS rows, with
    the answers of one request for all, in the same order: a node builds each answer whole
    in its heap."""
    from neardup.searcher import Searcher
    from neardup.stores import elasticsearch

    records = [
        Record(f"r{n}", line)
        for n, line in enumerate(corpus(tmp_path / "r.txt", size=80).read_text().splitlines())
    ]
    with open_store(elasticsearch_url) as store:
        params = store.ensure_params(None)
        api.add(records, store)
        searcher = Searcher(store, params, api.rules_for(store, {"threshold": 0.3}))
        queries = [searcher._query(searcher.fingerprint_text(r.text), 10) for r in records[:30]]
        whole = store.candidates_many(queries)
        sent: list[int] = []
        msearch = store.es.msearch

        def counted(searches: list) -> object:
            sent.append(len(searches) // 2)
            return msearch(searches=searches)

        monkeypatch.setattr(store.es, "msearch", counted)
        monkeypatch.setattr(elasticsearch, "MSEARCH_HITS", 25)
        assert store.candidates_many(queries) == whole
    assert sent == [2] * 15
    assert sum(map(len, whole)) > 30


def test_a_disk_past_the_flood_stage_is_a_full_disk(
    elasticsearch_server, elasticsearch_url, tmp_path
) -> None:
    """Past its flood-stage watermark Elasticsearch makes the index read-only: the refusal was
    the same long reason three times over, cut off mid-URL. It is a full disk, as SQLite's is:
    one line of what the store holds and what to do; lookups answer meanwhile."""
    api.index([corpus(tmp_path / "records.txt")], elasticsearch_url)
    index = elasticsearch_url.rsplit("/", 1)[-1]
    blocked = {"index.blocks.read_only_allow_delete": True}
    refused = None
    try:
        # The node lifts the block itself where its disk has room, every 30 s: a write that
        # came after that is tried again, once the block is set anew.
        for attempt in range(5):
            held = api.stats(elasticsearch_url)["documents"]
            elasticsearch_server.request("PUT", f"{index}/_settings", json=blocked)
            new = tmp_path / "new.txt"
            new.write_text(f"zz{attempt} a brand new record of words nobody wrote before\n")
            try:
                api.index([new], elasticsearch_url)
            except StoreFull as exc:
                refused = str(exc)
                break
        assert refused == (
            f"Elasticsearch at {elasticsearch_server.base}: its disk passed the flood-stage "
            "watermark, and the index takes no writes until the node has room (Elasticsearch "
            f"then lifts the block itself); 1 record not written, and the store holds {held:,} "
            "records: free some space and run the same command again to complete it"
        )
        assert api.lookup(elasticsearch_url, text="a brand new record of words") is not None
    finally:
        lifted = {"index.blocks.read_only_allow_delete": None}
        elasticsearch_server.request("PUT", f"{index}/_settings", json=lifted)


def test_an_index_of_another_application_is_left_as_it_is(
    elasticsearch_server, elasticsearch_url, tmp_path: Path
) -> None:
    """`--store elasticsearch://…/products`, an application's own index, was given
    neardup's _meta and fields, and neardup's documents beside its own."""
    index = elasticsearch_url.rsplit("/", 1)[-1]
    own = {"properties": {"name": {"type": "text"}, "price": {"type": "float"}}}
    created = elasticsearch_server.request("PUT", index, json={"mappings": own})
    assert created.ok, created.text
    records = corpus(tmp_path / "records.txt", 50)
    with pytest.raises(StoreUnavailable, match="is an index that is no neardup store \\(its"):
        api.index([records], elasticsearch_url)
    with pytest.raises(StoreUnavailable, match="its fields: name, price\\)"):
        api.apply_schema(elasticsearch_url)
    mapping = elasticsearch_server.request("GET", f"{index}/_mapping").json()[index]["mappings"]
    assert mapping == own
    count = elasticsearch_server.request("GET", f"{index}/_count").json()["count"]
    assert count == 0


@pytest.mark.parametrize("written", [False, True], ids=["unchanged", "written meanwhile"])
def test_a_report_that_loses_its_point_in_time_goes_on_only_in_the_same_state(
    elasticsearch_url, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, written: bool
) -> None:
    """A node that leaves takes a report's point in time with it, and the report's next search
    opens another, which shows the index as it is then. It went on with records of two states;
    now, where records were written meanwhile, it says so in one line, and where none were,
    it goes on with the same answer. The point in time is closed here while the report reads
    (between two pages of its records), as a node that leaves closes it."""
    first = corpus(tmp_path / "first.txt", 300)
    second = corpus(tmp_path / "second.txt", 200, seed=12)
    api.index([first], elasticsearch_url)
    expected = api.report(elasticsearch_url)
    with open_store(elasticsearch_url) as store:
        engine = type(store)
    lost: list[str] = []

    def lost_first(store) -> None:
        point = store._snapshot.get()
        if not lost:
            store.es.close_point_in_time(id=point.id)
            if written:
                api.index([second], elasticsearch_url)
            lost.append(point.id)

    when_a_report_reads(monkeypatch, engine, lost_first)
    if written:
        with pytest.raises(StoreChanged, match="lost with a node, and records were written"):
            api.report(elasticsearch_url)
    else:
        assert api.report(elasticsearch_url) == expected
    assert lost  # the place met


def test_a_threshold_that_keeps_changing_while_read_is_a_conflict_to_ask_again(
    elasticsearch_url, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A service's first lookup reads the store's threshold from its records, as a report
    reads them. Where each read lost its point in time to a node and records were written
    meanwhile, it answered 400, as if the request were wrong, and told the user to run a
    report they never ran. It is 409, and says what changed while what was read."""
    api.index([corpus(tmp_path / "records.txt", 200)], elasticsearch_url)
    with open_store(elasticsearch_url) as store:
        engine = type(store)
    reads: list[str] = []

    def written_each_time(store) -> None:
        point = store._snapshot.get()
        if point is not None:  # a threshold's read, not the lookup's own
            store.es.close_point_in_time(id=point.id)
            api.add([Record(f"new-{len(reads)}", "a record written meanwhile")], elasticsearch_url)
            reads.append(point.id)

    when_a_report_reads(monkeypatch, engine, written_each_time)
    with TestClient(create_app(elasticsearch_url)) as client:
        answer = client.post("/lookup", json={"text": "a record written meanwhile"})
    assert answer.status_code == 409, answer.text
    assert answer.json()["error"] == (
        "the store changed while its threshold was read from its records, each of 3 times (the "
        "point in time it read was lost with a node, and records were written or deleted "
        "before another was opened): ask again"
    )
    assert len(reads) == 3
