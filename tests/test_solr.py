"""What only the Solr store does: schema management through the Schema API, server errors."""

from __future__ import annotations

import importlib
from types import SimpleNamespace

import pytest

from neardup import api
from neardup.errors import NeardupError, StoreUnavailable
from neardup.readers import Record
from neardup.selfjoin import read_contents
from neardup.stores import open_store, solr
from tests.corpora import corpus
from tests.servers import when_a_report_reads


def fields(server, name: str) -> set[str]:
    return {f["name"] for f in server.request("GET", f"{name}/schema/fields").json()["fields"]}


def test_a_core_of_another_application_is_left_as_it_is(solr_server, solr_url, tmp_path) -> None:
    """`--store solr://…/solr/products`, an application's own core, was given neardup's
    fields and settings, and neardup's documents beside its own."""
    name = solr_url.rsplit("/", 1)[-1]
    api.apply_schema(solr_url)  # a core, which its application's schema then makes its own
    # (the cores share the configset's schema here: the field is taken out again below)
    own = {"add-field": {"name": "price", "type": "pint", "stored": True}}
    solr_server.request("POST", f"{name}/schema", json=own).raise_for_status()
    try:
        records = corpus(tmp_path / "records.txt", 50)
        with pytest.raises(StoreUnavailable, match="is a core that is no neardup store"):
            api.index([records], solr_url)
        with pytest.raises(StoreUnavailable, match="its fields: price\\)"):
            api.apply_schema(solr_url)
        query = {"q": "*:*", "rows": 0}
        found = solr_server.request("GET", f"{name}/select", params=query).json()
        assert found["response"]["numFound"] == 0
    finally:
        taken_out = {"delete-field": {"name": "price"}}
        solr_server.request("POST", f"{name}/schema", json=taken_out).raise_for_status()


def test_schema_apply_adds_missing_fields(solr_server, solr_url) -> None:
    url = solr_url
    name = url.rsplit("/", 1)[-1]
    api.apply_schema(url)
    removal = {"delete-field": {"name": "bands"}}
    solr_server.request("POST", f"{name}/schema", json=removal).raise_for_status()
    assert "bands" not in fields(solr_server, name)
    api.apply_schema(url)
    assert "bands" in fields(solr_server, name)


def test_a_core_made_before_bands_had_doc_values_reports_from_its_buckets(
    solr_server, solr_url, sqlite_url, tmp_path
) -> None:
    # Solr's facets uninvert an indexed field without doc values: old cores need no upgrade.
    name = solr_url.rsplit("/", 1)[-1]
    api.apply_schema(solr_url)
    old = {"name": "bands", "type": "tokens", "indexed": True, "stored": False}
    solr_server.request("POST", f"{name}/schema", json={"replace-field": old}).raise_for_status()
    records = corpus(tmp_path / "records.txt")
    api.index([records], solr_url)
    api.index([records], sqlite_url)
    schema = solr_server.request("GET", f"{name}/schema/fields/bands").json()["field"]
    assert schema["type"] == "tokens"
    assert api.report(solr_url, strategy="buckets") == api.report(sqlite_url)


def test_a_missing_core_is_a_clear_error_for_readers(solr_server) -> None:
    url = solr_server.new_store_url().rsplit("/", 1)[0] + "/absent"
    with pytest.raises(StoreUnavailable, match="no Solr core or collection 'absent'"):
        open_store(url, create=False)


def test_credentials_from_the_url_the_environment_or_netrc(
    solr_server, solr_url, monkeypatch, tmp_path
) -> None:
    if not solr_server.auth:
        pytest.skip("this Solr does not require credentials")
    with_user = solr_url
    api.apply_schema(with_user)
    bare = f"solr://{solr_server.host_port}/solr/{with_user.rsplit('/', 1)[1]}"
    with pytest.raises(NeardupError, match=r"refused the credentials \(HTTP 401\)"):
        api.stats(bare)
    monkeypatch.setenv("NEARDUP_SOLR_USER", solr_server.auth[0])
    monkeypatch.setenv("NEARDUP_SOLR_PASSWORD", solr_server.auth[1])
    assert api.stats(bare)["documents"] == 0
    monkeypatch.setenv("NEARDUP_SOLR_PASSWORD", "wrong")
    with pytest.raises(NeardupError, match="refused the credentials"):
        api.stats(bare)
    monkeypatch.delenv("NEARDUP_SOLR_USER")
    monkeypatch.delenv("NEARDUP_SOLR_PASSWORD")
    logins = tmp_path / "netrc"
    host, (user, password) = solr_server.host_port.split(":")[0], solr_server.auth
    logins.write_text(f"machine {host} login {user} password {password}\n")
    logins.chmod(0o600)
    monkeypatch.setenv("NETRC", str(logins))
    assert api.stats(bare)["documents"] == 0


def test_an_unreachable_server_is_a_clear_error() -> None:
    with pytest.raises(StoreUnavailable, match="not reachable"):
        open_store("solr://127.0.0.1:9/solr/x", create=False)


@pytest.mark.parametrize(
    "url", ["solr://127.0.0.1:8983/", "solr://127.0.0.1:8983/solr", "solr://h/x"]
)
def test_malformed_urls(url: str) -> None:
    with pytest.raises(NeardupError, match="solr://host:port/solr/NAME"):
        open_store(url)


@pytest.mark.parametrize(
    "url",
    [
        "solr://127.0.0.1:9/solr/my%20core",
        "solr://127.0.0.1:9/solr/-x",
        "solr+zk://127.0.0.1:9/a:b",
    ],
)
def test_a_name_solr_refuses_is_one_line_before_any_request(url: str) -> None:
    with pytest.raises(NeardupError, match="cannot name a Solr core or collection"):
        open_store(url)


def test_an_unreachable_zookeeper_is_one_line(monkeypatch) -> None:
    monkeypatch.setattr(solr, "ZOOKEEPER_SECONDS", 1)
    with pytest.raises(
        StoreUnavailable, match=r"^Solr's ZooKeeper at 127.0.0.1:9 is not reachable"
    ):
        open_store("solr+zk://127.0.0.1:9/x", create=False)


def test_a_zookeeper_url_names_a_collection() -> None:
    with pytest.raises(NeardupError, match=r"solr\+zk://zk1:2181,zk2:2181\[/chroot\]/NAME"):
        open_store("solr+zk://127.0.0.1:2181/")


def test_a_flush_makes_writes_visible_without_writing_segments(solr_server) -> None:
    """A check-then-add flushes after each add: a soft commit opens a searcher on what was
    written (17 ms a hard commit took of a 43 ms add); Solr's transaction log keeps it through a
    kill, and the configset's autoCommit writes segments within a minute. A run of a thousand
    records or more ends with a hard commit."""
    with open_store(solr_server.new_store_url()) as store:
        api.add([Record("1", "the first record of the core")], store)
        committed = store._core("GET", "admin/luke", params={"numTerms": 0})["index"]
        api.add([Record("2", "a second record, added and flushed")], store)
        after = store._core("GET", "admin/luke", params={"numTerms": 0})["index"]
        assert store.count() == 2  # visible
        assert after["segmentsFile"] == committed["segmentsFile"]  # no new commit point
        assert after["userData"] == committed["userData"]
        # A run of records ends with its segments written: a restart replays little.
        run = [
            Record(f"r{n}", f"record number {n} of a run")
            for n in range(solr.HARD_COMMIT_DOCUMENTS)
        ]
        api.add(run, store)
        written = store._core("GET", "admin/luke", params={"numTerms": 0})["index"]
        assert written["segmentsFile"] != after["segmentsFile"] and store.count() == 1002


def test_through_zookeeper_a_replica_of_a_node_not_live_is_never_drawn() -> None:
    """A node killed leaves its replicas "active" in the collection's state; only ZooKeeper's
    live list says it is gone. pysolr read the state alone and kept drawing the lost node."""
    keeper = object.__new__(solr._LiveZooKeeper)  # the watch's state, without a ZooKeeper

    def replica(port: int, leader: bool) -> dict[str, str]:
        node = f"127.0.0.1:{port}"
        return {"state": "active", "base_url": f"http://{node}/solr", "node_name": f"{node}_solr",
                "leader": str(leader).lower()}  # fmt: skip

    shard = {"state": "active", "replicas": {"a": replica(8983, True), "b": replica(8984, False)}}
    keeper.collections = {"people": {"shards": {"shard1": shard}}}
    keeper.aliases = {}
    keeper.liveNodes = ["127.0.0.1:8984_solr", "127.0.0.1:8985_solr"]
    assert keeper.getHosts("people") == ["http://127.0.0.1:8984/solr"]
    assert keeper.getRandomURL("people") == "http://127.0.0.1:8984/solr/people"
    assert keeper.getHosts("people", only_leader=True) == []  # its leader is not elected yet
    keeper.liveNodes.append("127.0.0.1:8983_solr")
    assert keeper.getHosts("people") == ["http://127.0.0.1:8983/solr", "http://127.0.0.1:8984/solr"]


def test_through_zookeeper_each_try_asks_a_node_drawn_again(solr_server, monkeypatch) -> None:
    """A node killed stays in ZooKeeper's live list until its session expires: a request that
    drew it is asked again of a node drawn again, not of the same one until the backoff ends."""
    monkeypatch.setattr(solr, "FAILOVER_SECONDS", 30)
    live = solr_server.base.split("://", 1)[1].replace("/solr", "_solr")
    drawn = iter(["127.0.0.1:9_solr", live])  # the killed node first, then one that answers

    keeper = SimpleNamespace(liveNodes=["127.0.0.1:9_solr", live])
    monkeypatch.setattr(solr.random, "choice", lambda nodes: next(drawn))
    with open_store(solr_server.new_store_url()) as store:
        store.zookeeper, store._node_scheme = keeper, "http"
        try:
            assert store._request("GET", "admin/info/system")["mode"] == "std"
        finally:
            store.zookeeper = None  # a stand-in: nothing to close


def test_a_lookup_reads_its_threshold_again_where_records_are_deleted_meanwhile(
    solr_url, tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lookup waits for the store's automatic threshold, read from every record. A delete
    landing while it read them, which Solr's snapshot cannot hold, would leave the lookup
    with "run the report again": it reads them again instead."""
    records = corpus(tmp_path / "records.txt", 120)
    rest = tmp_path / "rest.txt"
    rest.write_text("".join(line for line in records.open() if not line.startswith("1 ")))
    api.index([records], solr_url)
    deleting = ["1"]

    def deleted_first(store: solr.SolrStore) -> None:
        if deleting:
            api.delete([deleting.pop()], solr_url)

    when_a_report_reads(monkeypatch, solr.SolrStore, deleted_first)
    matches = api.lookup(solr_url, id="2")
    assert not deleting  # the place met
    embedded = f"sqlite:///{tmp_path / 'rest.db'}"
    api.index([rest], embedded)
    assert matches == api.lookup(embedded, id="2") != []
    assert api.rules_for(solr_url).threshold == api.rules_for(embedded).threshold


def test_a_report_whose_records_another_process_deletes_says_to_run_it_again(
    solr_url, tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Solr shows another process's writes at its next commit, also in the middle of a
    report, which has no snapshot to hold there: a report then met contents it had read with
    no record left, and ended in a traceback (IndexError from the store's buckets, KeyError
    from a join too large to keep the contents it read), or listed a record no longer held.
    Here a delete lands while the report reads: before it reads the records' texts, or
    between two pages of the records it joins."""
    api.index([corpus(tmp_path / "records.txt", 120)], solr_url)
    report = importlib.import_module("neardup.report")
    by_md5 = solr.SolrStore.records_by_md5

    def deleted_first(store: solr.SolrStore, md5s: list[str]):
        api.delete([r.id for r in by_md5(store, md5s[:1])[md5s[0]]], solr_url)
        return by_md5(store, md5s)

    def read_then_deleted(*args, **kwargs):  # the contents fetched by id, not kept
        contents = read_contents(*args, **{**kwargs, "kept_characters": 0})
        api.delete(list(contents.heads), solr_url)
        return contents

    with monkeypatch.context() as deleting:
        deleting.setattr(solr.SolrStore, "records_by_md5", deleted_first)
        with pytest.raises(NeardupError, match="the store changed while the report read it: run"):
            api.report(solr_url, strategy="buckets")
    api.index([corpus(tmp_path / "records.txt", 120)], solr_url)
    with monkeypatch.context() as deleting:
        deleting.setattr(report, "read_contents", read_then_deleted)
        with pytest.raises(NeardupError, match="the store changed while the report read it: run"):
            api.report(solr_url, strategy="join")
    api.index([corpus(tmp_path / "records.txt", 120)], solr_url)
    deleting = ["1"]

    def deleted_while_read(store: solr.SolrStore) -> None:  # the join keeps what it read
        if deleting:
            api.delete([deleting.pop()], solr_url)

    when_a_report_reads(monkeypatch, solr.SolrStore, deleted_while_read)
    said = r"read it \(1 record of the 190 it read deleted or written again\): run the report"
    with pytest.raises(NeardupError, match=said):
        api.report(solr_url, strategy="join")


def test_a_recall_estimate_whose_records_another_process_deletes_says_to_run_it_again(
    solr_url, tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`tune --store` estimates its candidate recall from the contents of the records its
    report listed, in the report's state. Solr's cannot show a record deleted meanwhile: the
    estimate ended in a traceback (KeyError); it says to run it again, in one line."""
    records = tmp_path / "people.csv"
    api.generate(1000, records, kind="people")
    api.index([records], solr_url)
    estimate = api._candidate_recall

    def deleted_first(store, pairs, similarity):
        near = next(p for p in pairs if p.kind == "near")
        api.delete([near.left_id], solr_url)
        return estimate(store, pairs, similarity)

    monkeypatch.setattr(api, "_candidate_recall", deleted_first)
    said = r"read it \(1 record of its pairs deleted\): run the report again"
    with pytest.raises(NeardupError, match=said):
        api.tune_store(solr_url)
