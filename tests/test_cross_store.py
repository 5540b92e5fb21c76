"""Every store gives the same report, figure for figure, on the same records and settings,
including a 2-shard SolrCloud collection and a 2-shard index on a 2-node Elasticsearch cluster.

The embedded store reports by the self-join; the engines from the band buckets they list
themselves (bands method) or by the self-join over their records (other methods): so these
tests also hold both strategies to the same answer."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from neardup import api
from neardup.errors import NeardupError, TooManyPairs
from neardup.fingerprint import TOKEN_FIELDS
from neardup.generate import write_corpus
from neardup.readers import Record, RecordReader
from neardup.report import Strategy, find_pairs
from neardup.searcher import MatchRules
from neardup.settings import RulesRequest
from neardup.stores import open_store
from tests.corpora import corpus
from tests.servers import when_a_report_reads


def engine_strategy(rules: RulesRequest) -> Strategy:
    method = rules.method if isinstance(rules, MatchRules) else rules.get("method", "bands")
    return "buckets" if method == "bands" else "join"


def report_of(
    url: str, records: Path, rules: RulesRequest, strategy: Strategy
) -> tuple[int, list, api.Measured | None]:
    """The store's size, its report's pairs, and what the report measured (the candidates'
    histogram and the threshold applied)."""
    api.index([records], url, params={"fields": TOKEN_FIELDS})
    with open_store(url, create=False) as store:
        pairs = api.report(store, rules=rules, strategy=strategy)
        return store.count(), pairs, api.last_report(store)


RULES = [
    MatchRules(),  # bands, weighted similarity
    MatchRules(method="signature", similarity="jaccard"),
    MatchRules(method="bands", candidates=5, similarity="jaccard"),
    MatchRules(method="shingles", threshold=0.3),
    {"threshold": "auto"},  # the store's defaults: weighted, the threshold read from the data
]


@pytest.mark.parametrize(
    "rules",
    RULES,
    ids=["bands-weighted", "signature-jaccard", "bands-jaccard", "shingles", "auto"],
)
@pytest.mark.parametrize("kind", ["solr", "elasticsearch"])
def test_engine_report_equals_the_embedded_report(
    request, kind, sqlite_url, tmp_path, rules
) -> None:
    server = request.getfixturevalue(f"{kind}_server")
    records = corpus(tmp_path / "records.txt")
    expected = report_of(sqlite_url, records, rules, "join")
    assert len(expected[1]) > 50
    if rules == {"threshold": "auto"}:  # read from the data, not the fallback
        assert expected[2].how.startswith("auto: the valley")
    try:
        engine = report_of(server.new_store_url(), records, rules, engine_strategy(rules))
        assert engine == expected
    finally:
        server.drop_made()


@pytest.mark.parametrize("kind", ["solr", "elasticsearch"])
def test_an_engine_weighs_numerals_as_the_embedded_store_does(
    request, kind, sqlite_url, tmp_path
) -> None:
    """People of one street at other house numbers: the same pairs and similarities with
    ``--similarity numerals`` on every store, the threshold read from them alike."""
    server = request.getfixturevalue(f"{kind}_server")
    path = tmp_path / "people.tsv"
    write_corpus(path, None, 400, kind="people", seed=3)
    rules = {"threshold": "auto", "similarity": "numerals"}
    expected = report_of(sqlite_url, path, rules, "join")
    assert len(expected[1]) > 20 and expected[2].how.startswith("auto")
    try:
        assert report_of(server.new_store_url(), path, rules, "buckets") == expected
    finally:
        server.drop_made()


def changed_report(url: str, records: Path, changes: Path, gone: list[str]) -> tuple:
    """Index ``records``, then ``changes`` (some of them again, with other texts), delete
    ``gone``, and join: the pairs, what the report measured, and the pairs from every pair of
    records (``report --exact``)."""
    api.index([records], url)
    api.index([changes], url)
    api.delete(gone, url)
    with open_store(url, create=False) as store:
        joined = api.report(store, strategy="join"), api.last_report(store)
        return *joined, api.report(store, exact=True, rules={"threshold": 0.4})


@pytest.mark.parametrize("kind", ["solr", "elasticsearch"])
def test_an_engines_join_weighs_shingles_by_the_records_it_read(
    request, kind, sqlite_url, tmp_path, monkeypatch
) -> None:
    """A join holds every content of the store (so does an exact report), and on an engine it
    counts the shingles' document frequencies from them instead of asking the engine, a
    thousand shingles a request: the same figures as the counts the embedded store keeps,
    after records were replaced and deleted (which the engine's own term statistics still
    count)."""
    server = request.getfixturevalue(f"{kind}_server")
    records = corpus(tmp_path / "records.txt")
    lines = records.read_text().splitlines()
    texts = [line.split(" ", 1)[1] for line in lines[-100:]]
    changes = tmp_path / "changes.txt"
    changes.write_text("".join(f"g{n:04d} {texts[n][::-1]}\n" for n in range(40)))
    gone = [f"g{n:04d}" for n in range(40, 60)]
    expected = changed_report(sqlite_url, records, changes, gone)
    assert len(expected[0]) > 50 and len(expected[2]) > 50
    try:
        url = server.new_store_url()
        api.index([records], url)  # the store's class, to refuse its frequency requests
        with open_store(url, create=False) as store:
            engine = type(store)

        def asked(*args, **kwargs):
            raise AssertionError("the join asked the engine for its shingles' frequencies")

        monkeypatch.setattr(engine, "_frequencies", asked)
        assert changed_report(url, records, changes, gone) == expected
    finally:
        server.drop_made()


def arrived(url: str, records: list) -> tuple[list[str], list[str], tuple]:
    """Check and add ``records`` 40 at a time: each lot's check line, the ids stored, and the
    store's threshold with where it comes from."""
    lots = range(0, len(records), 40)
    lines = [api.add(records[at : at + 40], url, if_unique=True).checked for at in lots]
    with open_store(url, create=False) as store:
        kept = list(store.iter_ids())
    stats = api.stats(url)
    return lines, kept, (stats["rules_in_effect"]["threshold"], stats["rules_from"]["threshold"])


@pytest.mark.parametrize("kind", ["solr", "elasticsearch"])
def test_records_checked_as_they_arrive_are_judged_alike_on_every_store(
    request, kind, sqlite_url, tmp_path
) -> None:
    """The threshold a store checked as records arrive reads from its checks, each check's
    threshold and the records kept: the same on an engine as on the embedded store."""
    server = request.getfixturevalue(f"{kind}_server")
    path = tmp_path / "people.tsv"
    write_corpus(path, None, 600, kind="people", seed=8)
    records = list(RecordReader(path))
    expected = arrived(sqlite_url, records)
    assert "read from the pairs the checks of" in expected[2][1]
    try:
        assert arrived(server.new_store_url(), records) == expected
    finally:
        server.drop_made()


@pytest.mark.parametrize("kind", ["solr", "elasticsearch"])
def test_past_the_pair_budget_an_engine_leaves_out_the_buckets_the_embedded_store_does(
    request, kind, sqlite_url, tmp_path, monkeypatch
) -> None:
    """The engine lists its buckets, the embedded store joins: past the report's budget both
    leave out the same largest buckets, and give the same pairs and histogram."""
    server = request.getfixturevalue(f"{kind}_server")
    records = corpus(tmp_path / "records.txt")
    api.index([records], sqlite_url, params={"fields": TOKEN_FIELDS})
    with open_store(sqlite_url, create=False) as store, pytest.raises(TooManyPairs) as every:
        find_pairs(store, store.params, MatchRules(), "join", pair_budget=0)
    monkeypatch.setattr("neardup.selfjoin.PAIR_BUDGET", every.value.pairs * 3 // 4)
    expected = report_of(sqlite_url, records, MatchRules(), "join")
    assert expected[2].left_out and expected[2].left_out["buckets"] > 0
    try:
        assert report_of(server.new_store_url(), records, MatchRules(), "buckets") == expected
    finally:
        server.drop_made()


def assert_sharded_store_agrees(server, sqlite_url: str, tmp_path: Path) -> str:
    """A 2-shard store reports what the embedded store reports, and re-indexing adds nothing."""
    records = corpus(tmp_path / "records.txt")
    url = server.new_store_url()
    assert "shards=2" in url
    expected = report_of(sqlite_url, records, MatchRules(), "join")
    assert report_of(url, records, MatchRules(), "buckets") == expected
    api.index([records], url)
    assert api.stats(url)["documents"] == expected[0]
    return url


def test_solr_cloud_two_shards_equals_the_embedded_report(
    solr_cloud_server, sqlite_url, tmp_path
) -> None:
    try:
        url = assert_sharded_store_agrees(solr_cloud_server, sqlite_url, tmp_path)
        with open_store(url) as store:
            status = store._request("GET", "admin/collections", params={"action": "CLUSTERSTATUS"})
        collection = status["cluster"]["collections"][url.split("/")[-1].split("?")[0]]
        assert len(collection["shards"]) == 2
    finally:
        solr_cloud_server.drop_made()


def test_solr_cloud_through_zookeeper_equals_the_embedded_report(
    solr_cloud_server, sqlite_url, tmp_path
) -> None:
    """pysolr's SolrCloud client, following the live nodes ZooKeeper lists, gives the same
    pairs, lookups and settings as the embedded store."""
    records = corpus(tmp_path / "records.txt")
    url = solr_cloud_server.new_zookeeper_url()
    try:
        expected = report_of(sqlite_url, records, MatchRules(), "join")
        assert report_of(url, records, MatchRules(), "buckets") == expected
        some = expected[1][0].left_id
        assert api.lookup(url, id=some) == api.lookup(sqlite_url, id=some)
        assert api.stats(url)["parameters"] == api.stats(sqlite_url)["parameters"]
    finally:
        solr_cloud_server.drop_made()


def test_elasticsearch_two_nodes_two_shards_equals_the_embedded_report(
    elasticsearch_cluster_server, sqlite_url, tmp_path
) -> None:
    try:
        url = assert_sharded_store_agrees(elasticsearch_cluster_server, sqlite_url, tmp_path)
        with open_store(url) as store:
            shards = store.es.cat.shards(index=store.index, format="json")
        assert {shard["node"] for shard in shards} == {"node-1", "node-2"}
    finally:
        elasticsearch_cluster_server.drop_made()


@pytest.mark.parametrize("kind", ["solr", "elasticsearch"])
def test_tune_store_reads_the_same_on_every_store(request, kind, sqlite_url, tmp_path) -> None:
    """`tune --store`'s threshold, histogram and candidate recall estimated from the pairs
    reported, from the engine's records as from the embedded store's."""
    server = request.getfixturevalue(f"{kind}_server")
    records = corpus(tmp_path / "records.txt")

    def tuned(url: str) -> tuple:
        api.index([records], url)
        found = api.tune_store(url)
        return (found.threshold, found.how, found.histogram, found.estimated_candidate_recall)

    expected = tuned(sqlite_url)
    assert expected[3] is not None and 0 < expected[3] <= 1
    try:
        assert tuned(server.new_store_url()) == expected
    finally:
        server.drop_made()


@pytest.mark.parametrize("kind", ["solr", "elasticsearch"])
@pytest.mark.parametrize(
    ("contents", "read"),
    [
        (5_000, "all 1,770 pairs of records"),
        (50, "1,225 pairs of records in a sample of 50 of the store's 60 contents"),
    ],
)
def test_a_small_store_reads_the_same_threshold_from_every_pair(
    request, kind, contents, read, sqlite_url, tmp_path, monkeypatch
) -> None:
    """Sixty people make too few candidate pairs to read a threshold from: every pair of
    them is read instead, or of a sample of them past EVERY_PAIR_CONTENTS, from the engine's
    records as from the embedded store's."""
    server = request.getfixturevalue(f"{kind}_server")
    # the module, which the package's report function hides
    monkeypatch.setattr(sys.modules["neardup.report"], "EVERY_PAIR_CONTENTS", contents)
    people = tmp_path / "people.tsv"
    write_corpus(people, None, 60, kind="people", seed=1, duplicates=0.1)

    def reported(url: str) -> tuple:
        api.index([people], url)
        pairs = api.report(url)
        measured = api.last_report(url)
        return measured.threshold, measured.how, pairs

    expected = reported(sqlite_url)
    assert read in expected[1]
    try:
        assert reported(server.new_store_url()) == expected
    finally:
        server.drop_made()


@pytest.mark.parametrize("strategy", ["join", "buckets"])
@pytest.mark.parametrize("kind", ["solr", "elasticsearch", "solr_cloud", "elasticsearch_cluster"])
def test_a_report_reads_the_records_as_they_were_when_it_began(
    request, kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, strategy: Strategy
) -> None:
    """An engine shows another run's writes to a report's next search: Elasticsearch at each
    refresh, every second while a run writes (3,997 pairs of 60,000 generated people, where
    the store held 3,116 before the run and 6,224 after it), Solr at each commit (a service's
    add, a run's end). Here another run indexes its records, and makes them searchable, while
    the report reads: between two pages of the records it joins (walked), or between its
    reading of the records and of their shingles' counts when it lists the store's buckets
    (on threads), on one node and on two shards (Solr's versions come from each shard's
    leader)."""
    server = request.getfixturevalue(f"{kind}_server")
    try:
        assert_read_as_it_began(server.new_store_url(), tmp_path, monkeypatch, strategy)
    finally:
        server.drop_made()


def assert_read_as_it_began(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, strategy: Strategy
) -> None:
    first = corpus(tmp_path / "first.txt", 300)
    second = tmp_path / "second.txt"
    lines = corpus(tmp_path / "more.txt", 300, seed=12).read_text().splitlines()
    second.write_text("".join(f"h{line[1:]}\n" for line in lines if line.startswith("g")))
    before, after = (f"sqlite:///{tmp_path / name}" for name in ("before.db", "after.db"))
    api.index([first], before)
    api.index([first, second], after)
    api.index([first], url)
    waiting = index_when_counted(monkeypatch, url, second)
    pairs = api.report(url, strategy=strategy)
    assert not waiting  # the place met
    assert pairs == api.report(before) != api.report(after)
    monkeypatch.undo()
    assert api.report(url) == api.report(after)


def index_when_counted(monkeypatch: pytest.MonkeyPatch, url: str, records: Path) -> list[Path]:
    """Another run indexes ``records`` into the engine store ``url`` (and makes them
    searchable) once a report has begun to read (:func:`when_a_report_reads`); the list it
    returns is empty once it has."""
    with open_store(url) as store:
        engine = type(store)
    waiting = [records]

    def another_run_first(store) -> None:
        if waiting:
            api.index([waiting.pop()], url)

    when_a_report_reads(monkeypatch, engine, another_run_first)
    return waiting


@pytest.mark.parametrize("kind", ["solr", "elasticsearch"])
def test_a_file_indexed_again_while_a_report_reads_writes_nothing_it_holds(
    request, kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A nightly run indexes the whole export again. It wrote every record again, and a Solr
    report that read meanwhile saw its records deleted and written again (Solr's snapshot is
    held by versions), and stopped. Records given again unchanged are now not written."""
    url = request.getfixturevalue(f"{kind}_url")
    records = corpus(tmp_path / "records.txt", 300)
    api.index([records], url)
    expected = api.report(url)
    waiting = index_when_counted(monkeypatch, url, records)
    assert api.report(url) == expected
    assert not waiting  # the place met


def _records(url: str) -> list[tuple[str, str, str]]:
    with open_store(url, create=False) as store:
        return [(r.id, r.content, r.md5) for batch in store.iter_records() for r in batch]


@pytest.mark.parametrize("preset", [None, "documents"])
def test_a_store_exported_indexes_again_into_the_same_store(
    store_url_factory, sqlite_url, tmp_path, preset
) -> None:
    """`neardup export` then `neardup index --like` moves a store, from any store into
    another: the same records (those added through the service, in no file, too; a content a
    spreadsheet would take for a formula as it is), the same settings (the preset's rules, a
    store that does not count its shingles) and the same report. Elasticsearch's own copy of
    an index cannot: its tokens are not in _source."""
    source = store_url_factory()
    api.index([corpus(tmp_path / "records.txt", size=300)], source, preset=preset)
    added = [Record("added", "a record sent to the service"), Record("sum", "=SUM(A1) +1 -2")]
    api.add(added, source)
    moved = tmp_path / "records.jsonl"
    with moved.open("w", encoding="utf-8") as out:
        assert api.export(out, source) == api.stats(source)["documents"]
    api.index([moved], sqlite_url, like=source)
    assert _records(sqlite_url) == _records(source)
    assert dict((i, c) for i, c, _ in _records(sqlite_url))["sum"].startswith("=sum")
    settings = ("parameters", "rules", "rules_in_effect", "rules_from")
    assert [api.stats(sqlite_url)[k] for k in settings] == [api.stats(source)[k] for k in settings]
    with open_store(source) as old, open_store(sqlite_url) as new:
        assert new.keeps_frequencies == old.keeps_frequencies == (preset is None)
    assert api.report(sqlite_url) == api.report(source)
    with pytest.raises(NeardupError, match="holds records already: index into a new one"):
        api.index([moved], sqlite_url, like=source)


def test_like_takes_a_store_with_records_and_no_other_settings(sqlite_url, tmp_path) -> None:
    records = corpus(tmp_path / "records.txt", size=50)
    other = f"sqlite:///{tmp_path / 'other.db'}"
    with pytest.raises(NeardupError, match="no store at"):
        api.index([records], sqlite_url, like=other)
    api.index([records], other)
    with pytest.raises(NeardupError, match="give it without --preset"):
        api.index([records], sqlite_url, like=other, threshold=0.5)
    assert not (tmp_path / "store.db").exists()
