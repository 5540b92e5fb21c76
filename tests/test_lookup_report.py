from __future__ import annotations

import importlib
import io
import json
import random
import re
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import replace
from functools import partial
from itertools import combinations
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from neardup import _kernels, api, cli
from neardup.errors import NeardupError, ParameterMismatch, TooManyPairs, UnknownRecord
from neardup.fingerprint import TOKEN_FIELDS, FingerprintParams, fingerprint_batch
from neardup.generate import near_copies, write_corpus
from neardup.indexer import SeenIds, index_records
from neardup.readers import Record, RecordReader
from neardup.report import (
    Pair,
    _ahead_of_engine,
    _block_runs,
    _nearest_histogram,
    _read_ahead,
    clusters,
    find_pairs,
    in_order,
    ordered_pair,
)
from neardup.searcher import (
    MAX_CANDIDATES,
    Match,
    MatchRules,
    Searcher,
    in_natural_order,
    natural_key,
    ranked,
)
from neardup.selfjoin import (
    Contents,
    LeftOut,
    _key_bits,
    counted_pairs,
    pairs_across,
    rarest_keys,
    read_contents,
    scored_pairs,
)
from neardup.stores import CandidateQuery, StoredRecord, TokenField
from neardup.stores.base import MAX_ID_BYTES, ordered_map
from neardup.tuning import choose_threshold
from tests.corpora import corpus

RECORDS = {
    "1": "Bella Napoli Trattoria 418 Harbor Street Portland ME 04101",
    "2": "Bella Napoli Trattoria 418 Harbor St. Portland, ME 04101",
    "3": "Golden Lotus Dim Sum 1209 Grant Ave San Francisco CA 94133",
    "4": "Golden Lotus Dim Sum Restaurant 1209 Grant Avenue San Francisco CA 94133",
    "5": "Thai Orchid Kitchen 58 Elm Street Northampton MA 01060",
    "6": "Bella Napoli Trattoria 418 Harbor Street Portland ME 04101",
}


ALL_FIELDS = FingerprintParams(fields=TOKEN_FIELDS)


def fill(store, records: dict[str, str], params=ALL_FIELDS) -> None:
    index_records(store, [Record(i, t) for i, t in records.items()], params)


def test_lookup_by_id_lists_exact_then_near(store) -> None:
    fill(store, RECORDS)
    matches = api.lookup(store, id="1")
    assert [(m.id, m.exact) for m in matches] == [("6", True), ("2", False)]
    near = matches[1]
    assert near.edit_distance == 1  # street -> st; punctuation is gone after normalisation
    assert 0.5 < near.similarity < 1.0
    assert near.shared_tokens > 0


def test_lookup_by_new_text(store) -> None:
    fill(store, RECORDS)
    matches = api.lookup(
        store, text="Golden Lotus Dim Sum, 1209 Grant Ave., San Francisco CA 94133"
    )
    assert [m.id for m in matches] == ["3", "4"]
    assert matches[0].exact and matches[0].similarity == 1.0
    assert matches[1].edit_distance == 2


def test_rules_filter_candidates(store) -> None:
    fill(store, RECORDS | {"8": "Golden Gate Bakery 1029 Grant Avenue San Francisco CA 94133"})
    # 8 shares the street and city; in a store this small nothing yet says they are common.
    assert [m.id for m in api.lookup(store, id="3", rules={"threshold": 0.6})] == ["4"]
    assert [m.id for m in api.lookup(store, id="3", rules=MatchRules(max_edit_distance=1))] == []
    assert [m.id for m in api.lookup(store, id="3", rules=MatchRules(threshold=0.99))] == []
    # With no rule set, every candidate that shares a token comes back.
    loose = MatchRules(method="shingles", threshold=None)
    found = api.lookup(store, id="3", rules=loose)
    assert [m.id for m in found][:2] == ["4", "8"]
    query = Searcher(store, store.params, loose).fingerprint_record("3")[1]
    field = TokenField.SHINGLES
    shared = store.candidates(CandidateQuery(field, field.keys(query), 10, None, [query.md5]))
    assert sorted(m.id for m in found) == sorted(c.id for c in shared)


@pytest.mark.parametrize("method", list(TokenField))
def test_every_method_finds_the_near_duplicate(store, method: str) -> None:
    fill(store, RECORDS)
    assert [m.id for m in api.lookup(store, id="3", rules=MatchRules(method=method))] == ["4"]


def test_first_word_filter(store) -> None:
    fill(store, RECORDS | {"7": "The Golden Lotus Dim Sum 1209 Grant Ave San Francisco CA 94133"})
    assert [m.id for m in api.lookup(store, id="3")] == ["7", "4"]
    assert [m.id for m in api.lookup(store, id="3", rules=MatchRules(first_word=True))] == ["4"]


def test_unknown_id_and_empty_text(store) -> None:
    fill(store, RECORDS)
    with pytest.raises(UnknownRecord, match="no record with id 'nope'"):
        api.lookup(store, id="nope")
    with pytest.raises(NeardupError, match="no words"):
        api.lookup(store, text="?!")


def test_indexing_with_other_params_is_refused(store, tmp_path: Path) -> None:
    fill(store, RECORDS)
    path = tmp_path / "more.txt"
    path.write_text("7 one more record\n")
    with pytest.raises(ParameterMismatch):
        api.index([path], store, params={"shingle": "word:3"})
    assert store.count() == len(RECORDS)


def test_report_lists_each_pair_once_in_id_order(store) -> None:
    fill(store, RECORDS)
    pairs = api.report(store)
    assert [(p.left_id, p.right_id, p.kind) for p in pairs] == [
        ("1", "2", "near"),
        ("1", "6", "exact"),
        ("2", "6", "near"),
        ("3", "4", "near"),
    ]
    assert pairs[0].edit_distance == pairs[2].edit_distance
    assert pairs[0].similarity == pairs[2].similarity
    assert clusters(pairs) == [["1", "2", "6"], ["3", "4"]]


def test_exact_duplicate_groups_of_40_are_complete(store) -> None:
    copies = {f"c{i:02d}": "Forty identical copies of one listing, 12 Main St" for i in range(40)}
    near = {"n1": "Forty identical copies of one listing, 12 Main Street"}
    fill(store, copies | near | {"x": "Something else entirely, nothing alike"})
    # Jaccard: in a store of 40 copies, their shingles are common and weigh little.
    jaccard = {"similarity": "jaccard"}
    pairs = api.report(store, rules=jaccard)
    exact = [(p.left_id, p.right_id) for p in pairs if p.kind == "exact"]
    assert exact == list(combinations(sorted(copies), 2))
    assert len(exact) == 780
    near_pairs = [(p.left_id, p.right_id) for p in pairs if p.kind == "near"]
    assert near_pairs == [(c, "n1") for c in sorted(copies)]
    groups = clusters(pairs)
    assert groups == [[*sorted(copies), "n1"]]
    assert [m.id for m in api.lookup(store, id="n1", rules=jaccard)] == sorted(copies)


def test_report_on_an_empty_store(store) -> None:
    store.ensure_params(None)
    assert api.report(store) == []


def test_clusters_are_connected_components() -> None:
    def pair(a: str, b: str) -> Pair:
        return Pair(a, b, 1, 0.9, 10, "near")

    groups = clusters(
        [
            pair("a", "b"),
            pair("c", "d"),
            pair("b", "e"),
            pair("x", "y"),
            pair("d", "z"),
            pair("c", "z"),
        ]
    )
    assert groups == [["a", "b", "e"], ["c", "d", "z"], ["x", "y"]]


def test_center_groups_do_not_chain() -> None:
    def pair(a: str, b: str, similarity: float) -> Pair:
        return Pair(a, b, 1, similarity, 10, "near")

    chain = [pair("a", "b", 0.9), pair("b", "c", 0.8), pair("c", "d", 0.9)]
    assert clusters(chain, "components") == [["a", "b", "c", "d"]]
    assert clusters(chain, "center") == [["a", "b"], ["c", "d"]]
    star = [pair("a", "b", 0.9), pair("b", "c", 0.85), pair("a", "c", 0.8), pair("x10", "x9", 1)]
    groups = clusters(star, "center")
    assert groups == [["a", "b", "c"], ["x9", "x10"]]
    linked = {(p.left_id, p.right_id) for p in star} | {(p.right_id, p.left_id) for p in star}
    assert all((g[0], member) in linked for g in groups for member in g[1:])


def test_cluster_ids_are_in_natural_order() -> None:
    pairs = [Pair(a, b, 1, 0.9, 10, "near") for a, b in [("10", "2"), ("ad10", "ad9"), ("1", "10")]]
    assert clusters(pairs) == [["1", "2", "10"], ["ad9", "ad10"]]


def test_index_files_counts_and_replaces(tmp_path: Path, sqlite_url: str) -> None:
    path = tmp_path / "records.txt"
    path.write_text("".join(f"{i} {t}\n" for i, t in RECORDS.items()) + "9 ...\n\n")
    first = api.index([path], sqlite_url)
    assert (first.read, first.indexed, first.documents) == (8, 6, 6)
    assert first.skipped.reasons == {"empty line": 1, "no words after normalisation": 1}
    assert first.read == first.indexed + first.skipped.total  # every line read is accounted for
    second = api.index([path], sqlite_url)
    assert second.documents == 6
    assert api.stats(sqlite_url)["documents"] == 6


def test_index_several_files_without_ids_keeps_every_record(
    tmp_path: Path, sqlite_url: str
) -> None:
    for name in ("a.csv", "b.csv"):
        (tmp_path / name).write_text("name\nfirst record\nsecond record\n")
    summary = api.index([tmp_path / "a.csv", tmp_path / "b.csv"], sqlite_url)
    assert summary.documents == 4
    pairs = [(p.left_id, p.right_id, p.kind) for p in api.report(sqlite_url)]
    assert pairs == [("a.csv:1", "b.csv:1", "exact"), ("a.csv:2", "b.csv:2", "exact")]


STRATEGY_RULES = [
    MatchRules(method="signature", similarity="jaccard"),
    MatchRules(method="bands", candidates=2),
    MatchRules(method="shingles", candidates=1, threshold=0.2),
    MatchRules(first_word=True, candidates=3, threshold=0.3),
    MatchRules(threshold=None, max_edit_distance=3, candidates=2),
]


def every_lookup(url: str, rules: MatchRules) -> list[Pair]:
    """The reference for a complete report: each stored record looked up with candidates enough for
    every record that shares a token, each pair once."""
    found = set()
    with api.opened(url) as store:
        searcher = Searcher(store, store.params, replace(rules, candidates=MAX_CANDIDATES))
        for batch in store.iter_records(1000):
            for record in batch:
                for m in searcher.lookup_id(record.id):
                    kind = "exact" if m.exact else "near"
                    found.add((*ordered_pair(record.id, m.id), m.edit_distance, m.similarity, kind))
    return in_order(Pair(a, b, d, s, 0, k) for a, b, d, s, k in found)


def without_tokens(pairs: list[Pair]) -> list[Pair]:
    return [replace(p, shared_tokens=0) for p in pairs]


@pytest.mark.parametrize(
    "rules", STRATEGY_RULES, ids=["signature", "bands", "shingles", "first-word", "edit-only"]
)
def test_a_report_holds_every_pair_a_lookup_with_no_limit_finds(
    sqlite_url: str, tmp_path: Path, rules: MatchRules, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Few candidates and many exact copies: a report keeps no per-record cut, whatever lookups'.
    api.index([corpus(tmp_path / "records.txt")], sqlite_url, params=ALL_FIELDS)
    joined = api.report(sqlite_url, rules=rules, strategy="join")
    assert len(joined) > 50
    assert without_tokens(joined) == every_lookup(sqlite_url, rules)
    with monkeypatch.context() as fetching:  # contents past the budget: fetched, not kept
        fetching.setattr(
            importlib.import_module("neardup.report"),
            "read_contents",
            partial(read_contents, kept_characters=0),
        )
        assert api.report(sqlite_url, rules=rules, strategy="join") == joined
    if rules.method == "bands":
        assert joined == api.report(sqlite_url, rules=rules, strategy="buckets")


def test_numerals_weigh_alike_in_a_report_a_lookup_and_explain(
    sqlite_url: str, tmp_path: Path
) -> None:
    """With ``--similarity numerals`` a report, a lookup and explain measure one pair alike, to
    the bit, and two people of one street at other house numbers fall below the weighted
    similarity."""
    path = tmp_path / "people.tsv"
    write_corpus(path, None, 400, kind="people", seed=3)
    api.index([path], sqlite_url)
    rules = MatchRules(threshold=0.3, similarity="numerals")
    numerals = api.report(sqlite_url, rules=rules, strategy="join")
    assert without_tokens(numerals) == every_lookup(sqlite_url, rules)
    weighted = {
        (p.left_id, p.right_id): p.similarity
        for p in api.report(sqlite_url, rules=replace(rules, similarity="weighted"))
    }
    lower = [p for p in numerals if p.similarity < weighted[(p.left_id, p.right_id)]]
    assert len(lower) > 10 and all(
        p.similarity <= weighted[(p.left_id, p.right_id)] for p in numerals
    )
    pair = lower[0]
    explained = api.explain(sqlite_url, ids=[pair.left_id, pair.right_id], rules=rules)
    assert explained.similarity == pair.similarity and explained.numeral_agreement < 1
    assert explained.weighted == weighted[(pair.left_id, pair.right_id)]


def near_copy_records(count: int) -> list[Record]:
    """``count`` records that each differ from one address line by a typo or two: one group
    whose every pair is a near-duplicate."""
    return [Record(f"c{n}", text) for n, text in enumerate(near_copies(count))]


def test_a_group_of_500_near_copies_yields_every_pair(store_url_factory) -> None:
    url = store_url_factory()
    api.add(near_copy_records(500), url)
    rules = {"similarity": "jaccard", "threshold": 0.5}
    with api.opened(url) as store:
        strategies = ["buckets"] + (["join"] if store.local else [])
    for strategy in strategies:
        pairs = api.report(url, rules=rules, strategy=strategy)
        assert len(pairs) == 500 * 499 // 2, strategy
    # A lookup keeps its limit: the 10 distinct contents that share most tokens.
    assert 10 <= len(api.lookup(url, id="c0", rules={"similarity": "jaccard"})) < 499


def test_scored_pairs_count_the_distinct_tokens_each_pair_of_contents_shares() -> None:
    rng = np.random.default_rng(8)
    sizes = rng.integers(0, 12, 300)
    # Few keys: large buckets, repeats in a content; spread over 64 bits, as hashes are.
    keys = rng.integers(-30, 30, int(sizes.sum())) * np.int64(-7046029254386353131)
    ids = [str(g) for g in range(len(sizes))]
    contents = partial(Contents, ids, {}, [], keys, sizes, None)  # a join lets go of its keys
    held = np.split(keys, np.cumsum(sizes)[:-1])
    expected = {
        (a, b): len(set(held[a].tolist()) & set(held[b].tolist()))
        for a in range(len(held))
        for b in range(a + 1, len(held))
    }
    (low, high, shared), left_out = scored_pairs(contents(), first_word=False)
    assert left_out is None
    for ranges in (["PARTITION_KEYS"], ["CACHED_KEYS"], ["PARTITION_KEYS", "CACHED_KEYS"]):
        with pytest.MonkeyPatch.context() as patch:  # the keys joined a range at a time
            for name in ranges:
                patch.setattr(f"neardup.selfjoin.{name}", 100)
            (*in_parts,), _ = scored_pairs(contents(), first_word=False)
        assert all((a == b).all() for a, b in zip(in_parts, (low, high, shared), strict=True))
    found = dict(zip(zip(low.tolist(), high.tolist(), strict=True), shared.tolist(), strict=True))
    assert found == {pair: count for pair, count in expected.items() if count}
    assert list(found) == sorted(found)


def test_a_join_takes_the_same_bits_of_every_key_however_many() -> None:
    """Past a million keys, their bits are taken a million at a time: keys spread over 64
    bits, as hashes are, with the bits a partition (the top ones) or a range takes."""
    keys = np.random.default_rng(5).integers(-(2**63), 2**63 - 1, (1 << 21) + 7, dtype=np.int64)
    for shift, bits in ((61, 3), (56, 8), (32, 4)):
        expected = (keys.view(np.uint64) >> np.uint64(shift)) & np.uint64(2**bits - 1)
        assert (_key_bits(keys, shift, bits) == expected).all()


def test_counted_pairs_count_each_pair_as_np_unique_does() -> None:
    """The codes are sorted by radix in place: over a million of them (sorted a part at a time),
    with pairs of content numbers up to 2**31, repeats, and most pairs of two contents (a part
    larger than the sort's spare buffer)."""
    rng = np.random.default_rng(12)
    low = rng.integers(0, 2**31 - 2, 1_200_000)
    high = np.minimum(low + rng.integers(1, 2**20, len(low)), 2**31 - 1)
    lows = np.concatenate([low, np.full(1_500_000, 7), low[:1000]])
    highs = np.concatenate([high, rng.integers(8, 2**16, 1_500_000), high[:1000]])
    codes = (lows.astype(np.int64) << 32) | highs
    rng.shuffle(codes)
    values, counts = np.unique(codes, return_counts=True)
    low, high, shared = counted_pairs(codes)
    assert (codes[1:] >= codes[:-1]).all()
    assert (low.astype(np.int64) << 32 | high).tolist() == values.tolist()
    assert shared.tolist() == counts.tolist()


def test_contents_count_the_copies_of_each_content() -> None:
    members = {1: ["b", "b2", "b3"], 3: ["d", "d2"]}
    contents = Contents(["a", "b", "c", "d"], members, [], np.empty(0), np.zeros(4), None)
    assert contents.copies().tolist() == [len(contents.ids(g)) for g in range(4)] == [1, 3, 1, 2]


def test_past_its_budget_the_join_leaves_out_the_largest_buckets_and_says_so() -> None:
    rng = np.random.default_rng(9)
    sizes = rng.integers(1, 8, 400)
    keys = rng.zipf(1.6, int(sizes.sum())) % 500  # a few tokens shared by very many contents
    ids = [str(g) for g in range(len(sizes))]
    contents = partial(Contents, ids, {}, [], keys, sizes, None)  # a join lets go of its keys
    held = [set(k.tolist()) for k in np.split(keys, np.cumsum(sizes)[:-1])]
    holders = {key: sum(key in h for h in held) for key in set(keys.tolist())}
    every = sum(n * (n - 1) // 2 for n in holders.values())
    (_, _, shared), left_out = scored_pairs(contents(), first_word=False, budget=every // 10)
    assert left_out is not None and left_out.pairs > every - every // 10
    assert shared.sum() == every - left_out.pairs <= every // 10
    common = {key for key, n in holders.items() if n > left_out.size}
    assert left_out.buckets == len(common) and min(holders[k] for k in common) > left_out.size
    assert "pair that shares only such buckets is not a candidate" in left_out.describe()
    # Buckets of two contents alone past the budget: no size to stop at.
    twos = sum(n == 2 for n in holders.values())
    assert twos > 1
    with pytest.raises(TooManyPairs, match="even without its largest buckets"):
        scored_pairs(contents(), first_word=False, budget=twos - 1)


def bucket_pairs_of(url: str) -> int:
    """Every bucket pair of a store's bands: what a report would make with no budget."""
    with api.opened(url) as store, pytest.raises(TooManyPairs) as every:
        find_pairs(store, store.params, MatchRules(), "join", pair_budget=0)
    return every.value.pairs


def test_a_report_past_its_pair_budget_is_the_same_from_the_join_and_the_buckets(
    sqlite_url: str, tmp_path: Path, monkeypatch
) -> None:
    api.index([corpus(tmp_path / "records.txt")], sqlite_url)
    budget = bucket_pairs_of(sqlite_url) * 3 // 4
    rules = MatchRules(threshold=0.3)
    monkeypatch.setattr("neardup.stores.sqlite.POSTINGS_PER_PART", 500)  # several pages
    with api.opened(sqlite_url) as store:
        whole = find_pairs(store, store.params, rules, "join")
        joined, listed = (
            find_pairs(store, store.params, rules, strategy, budget)
            for strategy in ("join", "buckets")
        )
    assert whole.left_out is None
    assert joined.left_out == listed.left_out and joined.left_out.budget == budget
    assert joined.pairs == listed.pairs and (joined.histogram == listed.histogram).all()
    ids = {(p.left_id, p.right_id) for p in joined.pairs}
    assert ids < {(p.left_id, p.right_id) for p in whole.pairs}


def test_the_cli_report_says_which_buckets_it_left_out(
    sqlite_url: str, tmp_path: Path, monkeypatch, capsys
) -> None:
    api.index([corpus(tmp_path / "records.txt")], sqlite_url)
    budget = bucket_pairs_of(sqlite_url) * 3 // 4
    monkeypatch.setattr("neardup.selfjoin.PAIR_BUDGET", budget)
    assert cli.main(["report", "--store", sqlite_url, "-o", str(tmp_path / "pairs.tsv")]) == 0
    said = capsys.readouterr().err
    assert re.search(r"left out [\d,]+ buckets of bands shared by more than \d+ contents", said)
    one = LeftOut(size=12, buckets=1, pairs=78, budget=40).describe()
    assert one.startswith("left out 1 bucket of bands shared by more than 12 contents each")
    assert api.last_report(sqlite_url).left_out["budget"] == budget
    page = tmp_path / "report.html"
    assert cli.main(["report", "--store", sqlite_url, "--html", str(page)]) == 0
    said_on_page = r'<p id="left-out">The report left out [\d,]+ buckets of bands'
    assert re.search(said_on_page, page.read_text())


def test_each_content_counts_once_at_its_nearest_similarity() -> None:
    """What an automatic threshold splits when the pairs show no valley: content 0 is nearest
    to 2 (0.9), 1 to 0 (0.4), 2 to 0, 3 is held by two records (1.0), 4 by no pair (0)."""
    similarities = np.array([0.4, 0.9, 0.3, 0.2])
    low, high = np.array([0, 0, 1, 2]), np.array([1, 2, 2, 3])
    copies = np.array([1, 1, 1, 2, 1])
    found = _nearest_histogram(similarities, copies, low, high)
    assert found.sum() == 5
    assert {bin_: int(found[bin_]) for bin_ in np.flatnonzero(found)} == {0: 1, 20: 1, 45: 2, 49: 1}


def test_an_automatic_threshold_is_chosen_from_the_pairs_and_each_contents_nearest(
    sqlite_url: str, tmp_path: Path, monkeypatch
) -> None:
    """The report hands the chooser both histograms: every candidate pair of records, and one
    count per distinct content at its nearest similarity."""
    seen = []

    def choose(histogram, fallback, nearest=None):
        seen.append((histogram, nearest))
        return choose_threshold(histogram, fallback, nearest)

    monkeypatch.setattr(importlib.import_module("neardup.report"), "choose_threshold", choose)
    api.index([corpus(tmp_path / "records.txt")], sqlite_url)
    api.report(sqlite_url)
    with api.opened(sqlite_url) as store:
        contents = len({record.md5 for batch in store.iter_records() for record in batch})
    (histogram, nearest) = seen[0]
    assert nearest.sum() == contents and histogram.sum() > contents
    assert api.last_report(sqlite_url).nearest == nearest.tolist()  # what tune --store shows
    assert api.report(sqlite_url, rules={"threshold": 0.5}) and len(seen) == 1  # none to choose


def test_explain_says_when_the_last_report_left_a_pairs_buckets_out(
    sqlite_url: str, tmp_path: Path, monkeypatch
) -> None:
    """A lookup finds a pair that shares only buckets a report left out past its budget; explain
    says that a report like the last one does not list it, and says so of no pair it lists."""
    api.index([corpus(tmp_path / "records.txt")], sqlite_url)
    monkeypatch.setattr("neardup.selfjoin.PAIR_BUDGET", bucket_pairs_of(sqlite_url) * 3 // 4)
    every = {"threshold": 0}
    with api.opened(sqlite_url) as store:
        whole = find_pairs(store, store.params, MatchRules(threshold=None), "join", 10**9)
    listed = {(p.left_id, p.right_id) for p in api.report(sqlite_url, rules=every)}
    left_out = sorted({(p.left_id, p.right_id) for p in whole.pairs} - listed)
    assert api.last_report(sqlite_url).left_out and left_out
    for ids in random.Random(5).sample(left_out, min(20, len(left_out))):
        found = api.explain(sqlite_url, ids=ids, rules=every)
        assert found.candidate and found.report_left_out
        assert "a report like it does not list them" in found.reason
    for ids in random.Random(5).sample(sorted(listed), 20):
        assert not api.explain(sqlite_url, ids=ids, rules=every).report_left_out


def test_a_store_answers_only_the_methods_of_its_indexed_fields(store) -> None:
    fill(store, RECORDS, FingerprintParams(fields=("bands",)))
    assert [m.id for m in api.lookup(store, id="1", rules={"method": "bands"})] == ["6", "2"]
    # With no method given, the store is queried through the field it indexes.
    assert [m.id for m in api.lookup(store, id="1")] == ["6", "2"]
    for method in ("signature", "shingles"):
        with pytest.raises(NeardupError, match=f"--method {method} needs .* indexes only bands"):
            api.lookup(store, id="1", rules={"method": method})
    fp = Searcher(store, store.params, MatchRules(method="bands")).fingerprint_record("1")[1]
    # (The engines index shingles whatever the fields, to count them: see Store.frequencies.)
    field = TokenField.SIGNATURE
    assert store.candidates(CandidateQuery(field, field.keys(fp), 5)) == []


def _repeated_ids(tmp_path: Path) -> Path:
    path = tmp_path / "ads.txt"
    path.write_text(
        "1 first text of one\n2 another record\n1 second text of one\n3 more\n1 third\n"
    )
    return path


def test_a_repeated_id_replaces_the_earlier_record_and_is_counted(
    tmp_path: Path, sqlite_url: str
) -> None:
    summary = api.index([_repeated_ids(tmp_path)], sqlite_url)
    assert (summary.read, summary.indexed, summary.documents) == (5, 5, 3)
    assert summary.replaced.total == 2
    assert (
        "replaced 2 earlier records with a repeated id (first: '1' at line 3, '1' at line 5; "
        "--on-duplicate-id keep keeps every one)" in (summary.describe())
    )
    with api.opened(sqlite_url) as store:
        assert store.get(["1"])["1"].content == "third"


def test_a_repeat_across_files_is_named_with_its_file(tmp_path: Path, sqlite_url: str) -> None:
    """Of two monthly files, 'at line 2' named no file: the first's line 2 or the second's."""
    (tmp_path / "june.csv").write_text("id,name\n1,Anna Rossi\n2,Marco Bianchi\n")
    (tmp_path / "july.csv").write_text("id,name\n2,Marco Bianchi Milano\n1,Anna Rosi\n")
    files = [tmp_path / "june.csv", tmp_path / "july.csv"]
    summary = api.index(files, sqlite_url)
    july = str(tmp_path / "july.csv")  # as it was given
    assert f"(first: '2' at {july}, line 2, '1' at {july}, line 3;" in summary.describe()
    with pytest.raises(NeardupError, match=r"july.csv, line 2: the id '2' came earlier"):
        api.index(files, f"sqlite:///{tmp_path / 'other.db'}", on_duplicate_id="error")
    skipped = api.index(files, f"sqlite:///{tmp_path / 'third.db'}", on_duplicate_id="skip")
    assert skipped.skipped.reasons == {"repeated id": 2}
    assert skipped.skipped.examples == [(2, f"{july}: repeated id"), (3, f"{july}: repeated id")]


def test_one_file_given_twice_is_one_error_before_anything_is_read(
    tmp_path: Path, sqlite_url: str
) -> None:
    """`index june.csv ./june.csv` (or globs that overlap) read each record twice, and said it
    replaced 2 records with a repeated id: the first reading's."""
    (tmp_path / "june.csv").write_text("id,name\n1,Anna Rossi\n2,Marco Bianchi\n")
    (tmp_path / "latest.csv").symlink_to(tmp_path / "june.csv")
    june = str(tmp_path / "june.csv")
    with pytest.raises(NeardupError, match=f"^{re.escape(june)} is given twice: give it once$"):
        api.index([june, june], sqlite_url)
    same = f"^{re.escape(june)} and {re.escape(str(tmp_path / 'latest.csv'))} are the same file"
    with pytest.raises(NeardupError, match=same):
        api.lookup_file([june, tmp_path / "latest.csv"], sqlite_url)
    assert not Path(sqlite_url.removeprefix("sqlite:///")).exists()
    # link FILE FILE linked every record with itself: "3 links".
    with pytest.raises(NeardupError, match="are the same file: link pairs the records of two"):
        api.link([june, tmp_path / "latest.csv"], sqlite_url)
    assert not Path(sqlite_url.removeprefix("sqlite:///")).exists()
    (tmp_path / "copy.csv").write_bytes((tmp_path / "june.csv").read_bytes())  # another file
    assert api.index([june, tmp_path / "copy.csv"], sqlite_url).read == 4


def test_files_that_name_no_fields_are_read_as_the_store_records_were(
    tmp_path: Path, store_url_factory: Callable[[], str]
) -> None:
    """A store indexed with --text-field name: `lookup --file` of the same file without it
    read every field, found none of the store's duplicates and said so with exit 1; indexing
    it again replaced every record with another text."""
    people = tmp_path / "people.csv"
    people.write_text("id,name,city\n1,Anna Rossi,Roma\n2,Anna Rosi,Milano\n3,Marco Bianchi,Roma\n")
    url = store_url_factory()
    api.index([people], url, text_fields=["name"])
    assert api.stats(url)["named_fields"] == {"id_field": None, "text_fields": ["name"]}
    assert [(i, m.id) for i, m in api.lookup_file([people], url).matches] == [
        ("1", "2"),
        ("2", "1"),
    ]
    again = api.index([people], url)
    assert (again.replaced_stored.total, again.unchanged) == (0, 3)
    kept = io.StringIO()
    assert api.dedup(people, kept, url).removed == 1
    # Fields named now win, and a file without the store's fields is read as ever.
    assert api.lookup_file([people], url, text_fields=["name", "city"]).matches == []
    other = tmp_path / "titles.csv"
    other.write_text("id,title\n9,Anna Rossi\n")
    assert [(i, m.id) for i, m in api.lookup_file([other], url).matches] == [("9", "1"), ("9", "2")]


def test_a_file_looked_up_is_answered_as_a_lookup_each_would_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """lookup --file of 2,000 templated records ('N record number N of many') against 20,000
    took 75 s, a candidate query each reading every record that shares the template's bands:
    the file is joined with the store's contents read once (0.6 s), with the same answers.
    Records whose tokens very many stored records share are joined by their rarer tokens
    alone, and the summary counts them."""
    rng = random.Random(9)
    stored = tmp_path / "orders.txt"
    stored.write_text(
        "".join(f"o{i} order {rng.randrange(10**6)} for customer c{i % 97} of many\n"
                for i in range(400))
    )  # fmt: skip
    url = f"sqlite:///{tmp_path / 'orders.db'}"
    api.index([stored], url)
    arriving = tmp_path / "new.txt"
    lines = stored.read_text().splitlines()[:60]
    arriving.write_text(
        "".join(f"n{k} {line.split(' ', 1)[1]} today\n" for k, line in enumerate(lines))
    )
    looked_up = api.lookup_file([arriving], url)
    one_each = [
        (f"n{k}", m)
        for k, line in enumerate(lines)
        for m in api.lookup(url, text=f"{line.split(' ', 1)[1]} today")
    ]
    assert looked_up.matches == one_each and looked_up.records == 60
    assert looked_up.narrowed == 60  # every record shares the template's bands with all 400
    assert "60 records looked up against the stored records that share" in looked_up.describe()
    monkeypatch.setattr("neardup.searcher.JOIN_ENTRIES", 10**9)  # every token, none left out
    whole = api.lookup_file([arriving], url)
    assert whole.matches == one_each and whole.narrowed == 0
    assert "rarer tokens" not in whole.describe()
    monkeypatch.undo()  # a link joins as a lookup of a file does, and says so
    linked = api.link([arriving], url)
    assert linked.narrowed == 60 and "60 records linked against the stored" in linked.describe()


def test_a_lookup_joins_where_reading_the_store_costs_less_than_its_lookups(
    sqlite_url: str, tmp_path: Path
) -> None:
    """300 people looked up against a million took 8.7 s joined, 1.2 s one at a time; 10,000
    took 10.0 s joined, 34.6 s one at a time. A check, which takes every candidate, joins
    short records from 300 whatever the store's size."""
    (tmp_path / "r.txt").write_text("1 Anna Rossi Roma\n")
    api.index([tmp_path / "r.txt"], sqlite_url)
    with api.opened(sqlite_url) as store:
        lookup = Searcher(store, store.params, MatchRules(candidates=10))
        check = Searcher(store, store.params, MatchRules(candidates=MAX_CANDIDATES))
        assert not lookup._joins(300, 1_000_000) and lookup._joins(10_000, 1_000_000)
        assert check._joins(300, 1_000_000) and not check._joins(299, 1_000_000)


def test_the_ids_seen_in_a_run_are_those_a_set_would_hold() -> None:
    """Batches with repeats inside them and across them, and enough of them to merge the
    sorted arrays of MD5s several times over."""
    rng = random.Random(5)
    seen, reference = SeenIds(), set()
    for size in [0, 1, 3, 7, 50, 2, 200, 31, 500, 9, 1000, 64] * 3:
        ids = [f"r{rng.randrange(3000)}" for _ in range(size)] + ["\u00e9t\u00e9", ""][: size % 3]
        expected = []
        for record_id in ids:
            expected.append(record_id not in reference)
            reference.add(record_id)
        assert seen.first_seen(ids).tolist() == expected


def test_a_repeated_id_can_be_skipped_or_stop_the_run(tmp_path: Path, sqlite_url: str) -> None:
    path = _repeated_ids(tmp_path)
    with pytest.raises(NeardupError, match="line 3: the id '1' came earlier in this run"):
        api.index([path], sqlite_url, on_duplicate_id="error")
    assert not (tmp_path / "store.db").exists()  # stopped before anything was written
    summary = api.index([path], sqlite_url, on_duplicate_id="skip")
    assert (summary.indexed, summary.documents, summary.skipped.reasons["repeated id"]) == (3, 3, 2)
    with api.opened(sqlite_url) as store:
        assert store.get(["1"])["1"].content == "first text of one"


def test_a_repeated_id_can_be_kept_under_a_numbered_id(tmp_path: Path, sqlite_url: str) -> None:
    """Files whose ids are not unique (freeDB's disc ids) keep every record: a repeat is stored
    as ID#2, ID#3, past any id of the file that holds such a name already, and the same file
    indexed again replaces the same records."""
    path = tmp_path / "discs.csv"
    path.write_text(
        "id,text\n1,first disc\n1#2,a record named like a numbered one\n2,another disc\n"
        "1,second disc\n1,third disc\n"
    )
    summary = api.index([path], sqlite_url, on_duplicate_id="keep")
    assert (summary.read, summary.indexed, summary.documents) == (5, 5, 5)
    assert (
        "kept 2 records with a repeated id under a numbered id (first: '1' at line 5 as "
        "'1#3', '1' at line 6 as '1#4')" in summary.describe()
    )
    with api.opened(sqlite_url) as store:
        held = store.get(["1", "1#2", "1#3", "1#4"])
        assert [held[i].content for i in ("1", "1#2", "1#3", "1#4")] == [
            "first disc", "a record named like a numbered one", "second disc", "third disc"
        ]  # fmt: skip
    again = api.index([path], sqlite_url, on_duplicate_id="keep")
    assert (again.kept.total, again.replaced_stored.total, again.unchanged) == (2, 0, 5)
    assert again.documents == 5


def test_a_repeat_too_long_to_number_is_skipped_and_counted(
    tmp_path: Path, sqlite_url: str
) -> None:
    long_id = "x" * MAX_ID_BYTES
    path = tmp_path / "long.csv"
    path.write_text(f"id,text\n{long_id},one text\n{long_id},another text\n")
    summary = api.index([path], sqlite_url, on_duplicate_id="keep")
    assert (summary.indexed, summary.documents) == (1, 1)
    assert summary.skipped.reasons == {
        f"repeated id, numbered: id longer than {MAX_ID_BYTES} bytes": 1
    }


@pytest.mark.parametrize(
    ("on_duplicate_id", "held", "counted"),
    [
        ("replace", {"1": "trains and rails of the north", "2": "ships"}, "replaced 1 earlier"),
        ("skip", {"1": "the quick brown fox jumps", "2": "ships"}, "1 repeated id"),
        ("keep", {"1": "the quick brown fox jumps", "1#2": "trains and rails of the north",
                  "2": "ships"}, "kept 1 record"),
    ],
)  # fmt: skip
def test_indexing_only_unique_records_treats_a_repeated_id_as_asked(
    tmp_path: Path, sqlite_url: str, on_duplicate_id: str, held: dict[str, str], counted: str
) -> None:
    path = tmp_path / "records.csv"
    path.write_text(
        "id,text\n1,the quick brown fox jumps\n2,ships\n1,trains and rails of the north\n"
    )
    summary = api.index([path], sqlite_url, skip_duplicates=True, on_duplicate_id=on_duplicate_id)
    assert counted in summary.describe()
    with api.opened(sqlite_url) as store:
        assert {i: r.content for i, r in store.get([*held, "1#2"]).items()} == held


def test_an_edited_repeat_replaces_its_id_when_only_unique_records_are_stored(
    tmp_path: Path, sqlite_url: str
) -> None:
    """A repeated id is the record edited, as a replaced id is without the check: no
    near-duplicate of itself, so it replaces the record, and the store holds no copy."""
    path = tmp_path / "records.csv"
    path.write_text(
        "id,text\n1,the quick brown fox jumps over the lazy dog\n"
        "1,the quick brown fox jumps over the lazy dogs\n"
    )
    summary = api.index([path], sqlite_url, skip_duplicates=True)
    assert (summary.indexed, summary.replaced.total, summary.documents) == (2, 1, 1)
    assert summary.duplicates == []
    with api.opened(sqlite_url) as store:
        assert store.get(["1"])["1"].content.endswith("lazy dogs")


def test_ids_repeated_across_files_are_counted(tmp_path: Path, sqlite_url: str) -> None:
    for name in ("a.csv", "b.csv"):
        (tmp_path / name).write_text(f"id,text\nshared,text from {name}\nonly-{name},more\n")
    summary = api.index([tmp_path / "a.csv", tmp_path / "b.csv"], sqlite_url)
    assert (summary.replaced.total, summary.documents) == (1, 3)


def test_a_report_shows_its_progress_when_asked(sqlite_url: str, tmp_path: Path, capsys) -> None:
    api.index([corpus(tmp_path / "records.txt")], sqlite_url)
    quiet = api.report(sqlite_url)
    assert capsys.readouterr().err == ""
    # The store remembers the threshold the first report chose, so these verify while measuring.
    for strategy, passes in (
        ("join", ["reading", "measuring"]),
        ("buckets", ["reading", "joining", "measuring"]),
    ):
        assert api.report(sqlite_url, strategy=strategy, progress=True) == quiet
        shown = capsys.readouterr().err
        assert all(f"{what}:" in shown for what in passes), shown
    exact = api.report(sqlite_url, exact=True)
    assert capsys.readouterr().err == ""
    assert api.report(sqlite_url, exact=True, progress=True) == exact
    assert "joining:" in capsys.readouterr().err


def test_one_round_trip_lookups_equal_the_separate_queries(store) -> None:
    """A lookup whose first candidate query is not full takes its groups from that answer;
    one that is full keeps the distinct contents it holds and asks for those it is short of,
    and the groups, separately. Both give what the separate queries give, on contents with
    and without stored copies, and on contents of the same shingles (each repeats its words:
    they tie, so a stored record's own copy may rank below more contents than it asks for)."""
    records = dict(RECORDS)
    records |= {f"copy{n}": RECORDS["3"] for n in range(12)}
    records |= {f"near{n}": RECORDS["4"] for n in range(3)}
    records |= {f"tie{n}": " ".join(["alpha beta"] * n) for n in range(1, 6)}
    fill(store, records)
    for candidates in (2, 5, 50):
        searcher = Searcher(store, store.params, MatchRules(candidates=candidates, threshold=0.3))
        for record_id in records:
            fp = searcher.fingerprint_record(record_id)[1]
            near = searcher.near_duplicates_many([fp])[0]
            groups = store.ids_by_md5([fp.md5, *(m.md5 for m in near)])
            copies = sorted(groups[fp.md5], key=natural_key)
            others = [member for m in near for member in sorted(groups[m.md5], key=natural_key)]
            # By id, its own record left out; by its text, every record holding it listed.
            for exclude_id, own in [
                (record_id, [i for i in copies if i != record_id]),
                (None, copies),
            ]:
                found = searcher.lookup(fp, exclude_id=exclude_id)
                assert [m.id for m in found] == own + others, (candidates, record_id, exclude_id)
                assert [m.exact for m in found] == [m.md5 == fp.md5 for m in found]


def test_a_large_embedded_store_reports_from_its_buckets(
    sqlite_url: str, tmp_path: Path, monkeypatch
) -> None:
    api.index([corpus(tmp_path / "records.txt")], sqlite_url)
    joined = api.report(sqlite_url)

    report = importlib.import_module("neardup.report")
    monkeypatch.setattr(report, "JOIN_RECORDS", 10)
    with api.opened(sqlite_url) as store:  # short records whose keys fit: still joined
        assert report._joinable(store)
        monkeypatch.setattr(report, "LONG_TEXT", 5)  # long ones that fit a run: joined
        assert report._joinable(store)
        monkeypatch.setattr(report, "ONE_RUN_CHARACTERS", 1000)  # past it: listed
        assert not report._joinable(store)
        monkeypatch.setattr(report, "JOIN_RECORDS", 10**6)
        assert report._joinable(store)  # an embedded store of few records: joined
        monkeypatch.setattr(store, "local", False)
        assert not report._joinable(store)  # an engine's long records past a run: listed
        monkeypatch.setattr(report, "JOIN_RECORDS", 10)
        monkeypatch.setattr(report, "LONG_TEXT", 200)
        monkeypatch.setattr(report, "JOIN_KEYS", store.count() * store.params.bands - 1)
        assert not report._joinable(store)  # short, but too many keys: listed

    def unread(*args: object) -> None:
        raise AssertionError("the report read the records' contents")

    monkeypatch.setattr("neardup.stores.sqlite.SQLiteStore.iter_records", unread)
    assert api.report(sqlite_url) == joined


def test_buckets_need_the_bands_method(sqlite_url: str, tmp_path: Path) -> None:
    api.index([corpus(tmp_path / "records.txt")], sqlite_url, params=ALL_FIELDS)
    with pytest.raises(NeardupError, match="needs the bands method, not signature"):
        api.report(sqlite_url, rules=MatchRules(method="signature"), strategy="buckets")


def test_a_store_made_for_the_jaccard_similarity_does_not_count_shingles(
    sqlite_url: str, tmp_path: Path
) -> None:
    records = corpus(tmp_path / "records.txt")
    api.index([records], sqlite_url, preset="documents")  # Jaccard: no weights to count for
    with api.opened(sqlite_url) as store:
        assert not store.keeps_frequencies
    assert api.report(sqlite_url)
    with pytest.raises(NeardupError, match="does not count its shingles"):
        api.report(sqlite_url, rules={"similarity": "weighted"})
    api.index([records], sqlite_url)  # indexing again keeps the store as it was made
    with api.opened(sqlite_url) as store:
        assert not store.keeps_frequencies


def test_pairs_are_measured_a_pair_of_blocks_of_contents_at_a_time() -> None:
    rng = np.random.default_rng(5)
    low = np.sort(rng.integers(0, 3000, 25_000))
    high = low + rng.integers(1, 3000 - low + 1)  # sides as a report's: low below high
    runs = _block_runs(low, high, block=700)
    assert sorted(np.concatenate(runs).tolist()) == list(range(len(low)))  # each pair once
    assert len(runs) == 5 * 6 / 2  # 5 blocks: each pair of them, and each with itself
    for run in runs:
        assert (np.diff(run) > 0).all()  # in the report's order within a run
        assert len(np.unique(low[run] // 700)) == len(np.unique(high[run] // 700)) == 1
        assert len(np.unique(np.r_[low[run], high[run]])) <= 2 * 700
    (whole,) = _block_runs(low, high, block=3001)
    assert whole.tolist() == list(range(len(low)))
    assert _block_runs(low[:0], high[:0], block=700) == []


def test_a_report_measured_in_runs_finds_what_one_run_finds(
    sqlite_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past ONE_RUN_CHARACTERS of contents the pairs are measured and verified a run at a
    time, each run's contents fetched again: the same pairs, similarities and threshold."""
    api.index([corpus(tmp_path / "records.txt")], sqlite_url)
    rules = MatchRules(auto_threshold=True, threshold=None)
    report = importlib.import_module("neardup.report")  # the package names its function so
    with api.opened(sqlite_url) as store:
        whole = find_pairs(store, store.params, rules)
        monkeypatch.setattr(report, "ONE_RUN_CHARACTERS", 2_000)
        runs: list[np.ndarray] = []
        block_runs = report._block_runs

        def small_runs(low: np.ndarray, high: np.ndarray, block: int) -> list[np.ndarray]:
            these = block_runs(low, high, 30)  # runs of 60 contents at most
            runs.extend(these)
            return these

        monkeypatch.setattr(report, "_block_runs", small_runs)
        in_runs = find_pairs(store, store.params, rules)
    assert len(runs) > 10 and in_runs.pairs == whole.pairs and len(whole.pairs) > 10
    assert in_runs.rules == whole.rules and in_runs.histogram.tolist() == whole.histogram.tolist()


def test_a_given_threshold_verifies_while_measuring_and_finds_what_auto_found(
    sqlite_url: str, tmp_path: Path
) -> None:
    api.index([corpus(tmp_path / "records.txt")], sqlite_url)
    with api.opened(sqlite_url) as store:
        auto = find_pairs(store, store.params, MatchRules(auto_threshold=True, threshold=None))
        given = find_pairs(store, store.params, replace(auto.rules, auto_threshold=False))
    assert auto.choice and not given.choice
    assert given.pairs == auto.pairs and any(p.kind == "near" for p in given.pairs)
    assert given.rules == replace(auto.rules, auto_threshold=False)


def test_a_report_reads_the_next_batch_on_another_thread_in_order() -> None:
    readers: set[int] = set()

    def batches(fail_at: int | None = None) -> Iterator[list[int]]:
        for n in range(5):
            readers.add(threading.get_ident())
            if n == fail_at:
                raise OSError("connection reset")
            yield [n]

    assert list(_read_ahead(batches())) == [[n] for n in range(5)]
    assert readers and threading.get_ident() not in readers
    with pytest.raises(OSError, match="connection reset"):
        list(_read_ahead(batches(fail_at=3)))
    first_two = _read_ahead(batches())
    assert [next(first_two), next(first_two)] == [[0], [1]]
    first_two.close()  # stopping early waits for the batch being read, and ends the thread


def test_work_on_other_threads_reads_in_the_snapshot_of_the_thread_that_started_it() -> None:
    """An engine's snapshot is the context of the thread that took it: the records a report
    reads ahead, and the bucket aggregations an engine runs on threads, read in it too."""
    snapshot: ContextVar[str | None] = ContextVar("snapshot", default=None)

    def batches() -> Iterator[list[str | None]]:
        for _ in range(3):
            yield [snapshot.get()]

    token = snapshot.set("a point in time")
    try:
        assert list(_read_ahead(batches())) == [["a point in time"]] * 3
        assert list(ordered_map(lambda _: snapshot.get(), range(5), 2)) == ["a point in time"] * 5
    finally:
        snapshot.reset(token)
    assert list(ordered_map(lambda _: snapshot.get(), range(2), 2)) == [None, None]


def test_only_an_engines_batches_are_read_ahead() -> None:
    batches = iter([[0], [1]])
    assert _ahead_of_engine(SimpleNamespace(local=True), batches) is batches  # type: ignore[arg-type]
    readers: set[int] = set()

    def remote() -> Iterator[list[int]]:
        readers.add(threading.get_ident())
        yield [0]

    assert list(_ahead_of_engine(SimpleNamespace(local=False), remote())) == [[0]]  # type: ignore[arg-type]
    assert readers and threading.get_ident() not in readers


def test_lookups_of_many_texts_at_once_equal_one_lookup_each(store, tmp_path: Path) -> None:
    records = list(RecordReader(corpus(tmp_path / "records.txt")))
    params = store.ensure_params(None)
    index_records(store, records, params)
    searcher = Searcher(store, params, MatchRules(candidates=4, threshold=0.3))
    fps = [searcher.fingerprint_text(r.text) for r in records[:120]]
    assert searcher.lookup_many(fps) == [searcher.lookup(fp) for fp in fps]
    assert sum(map(len, searcher.lookup_many(fps))) > 100


@pytest.mark.parametrize(
    "rules",
    [
        {},
        {"first_word": True},
        {"candidates": 3},  # cut short: the first three by shared bands, then by id
        {"similarity": "numerals"},
        {"similarity": "jaccard", "threshold": 0.2},
    ],
)
def test_a_batch_joined_with_the_store_is_answered_as_its_lookups_are(
    store, tmp_path: Path, rules: dict
) -> None:
    """A checked batch's answers from the store's contents read once and joined with it are
    those of a lookup each: matches, similarities, shared bands and order, with the records of
    the batch whose contents the store holds (exact copies first)."""
    records = list(RecordReader(corpus(tmp_path / "records.txt")))
    params = store.ensure_params(None)
    index_records(store, records[:250], params)
    searcher = Searcher(store, params, MatchRules(**{"threshold": 0.3, **rules}))
    fps = [searcher.fingerprint_text(r.text) for r in records[200:]]
    every = read_contents(store.iter_records(), params, searcher.field, searcher.rules.first_word)
    joined = searcher._joined(fps, every)
    assert joined == searcher.lookup_many(fps)
    assert (
        sum(m.exact for ms in joined for m in ms)
        > 20
        < sum(not m.exact for ms in joined for m in ms)
    )
    if "candidates" in rules:  # the cut applies: a lookup of every candidate finds more
        wider = Searcher(store, params, replace(searcher.rules, candidates=MAX_CANDIDATES))
        assert sum(map(len, wider._joined(fps, every))) > sum(map(len, joined))


def test_a_checked_file_is_kept_alike_joined_or_looked_up(tmp_path: Path, monkeypatch) -> None:
    """index --skip-duplicates keeps the same records, names the same duplicates and counts
    the same pairs for the threshold whether its batches are joined with the store (the keys
    read from it scanned, or sorted) or looked up a record at a time."""
    records = tmp_path / "people.tsv"  # short records: 2-row bands
    api.generate(600, records, kind="people", seed=5)
    searcher = importlib.import_module("neardup.searcher")
    joins: list[int] = []
    join = Searcher._joined

    def counted(self: Searcher, fps: list, contents: Contents) -> list:
        joins.append(len(fps))
        return join(self, fps, contents)

    monkeypatch.setattr(Searcher, "_joined", counted)

    def checked(name: str, join_records: int, join_batch: int) -> tuple:
        monkeypatch.setattr(searcher, "JOIN_RECORDS", join_records)
        monkeypatch.setattr(searcher, "JOIN_BATCH", join_batch)
        joins.clear()
        url = f"sqlite:///{tmp_path / name}"
        summary = api.index([records], url, skip_duplicates=True, batch_size=100)
        with api.opened(url) as store:
            kept = sorted(store.iter_ids())
            return kept, summary.skipped.reasons, store.settings["checked_pairs"], len(joins)

    # Joined for the store's size, as short records whatever it is, then looked up.
    *joined, batches_joined = checked("joined.db", 50, 601)
    *short, short_batches_joined = checked("short.db", 0, 50)
    *looked_up, none_joined = checked("looked_up.db", 0, 601)
    # Joined, the keys read sorted after one batch, runs of at most 1,000 keys (16 records).
    monkeypatch.setattr("neardup.selfjoin.SCANS_BEFORE_SORTING", 1)
    monkeypatch.setattr("neardup.selfjoin.RUN_KEYS", 1_000)
    *sorted_early, _ = checked("sorted.db", 50, 601)
    assert batches_joined == short_batches_joined == 5 and none_joined == 0
    assert joined == short == looked_up == sorted_early
    assert len(joined[0]) < 600 and sum(joined[2]["histogram"]) > 1_000


def test_a_run_of_checks_reads_the_store_once_unless_another_process_writes(
    tmp_path: Path, monkeypatch
) -> None:
    """index --skip-duplicates joins each batch with the contents the first joined batch read,
    and the records each batch stored, while nothing else writes the store: the same records
    kept as a run that reads the store for every batch. A record another process stores
    between two batches makes the next batch read the store again, and its near copy is a
    duplicate; at the run's end no postings wait outside the store's postings."""
    records = tmp_path / "people.csv"  # short records: 2-row bands, each batch joined
    api.generate(600, records, kind="people", seed=5)
    searcher = importlib.import_module("neardup.searcher")
    monkeypatch.setattr(searcher, "JOIN_BATCH", 50)
    reads: list[int] = []
    read = searcher.read_contents
    monkeypatch.setattr(searcher, "read_contents", lambda *a, **k: reads.append(1) or read(*a, **k))

    def checked(name: str, every_batch_reads: bool) -> tuple[list[str], list[str]]:
        reads.clear()
        url = f"sqlite:///{tmp_path / name}"
        with monkeypatch.context() as reading:
            if every_batch_reads:
                reading.setattr(searcher.KeptContents, "current", lambda *_: None)
            summary = api.index([records], url, skip_duplicates=True, batch_size=100)
        with api.opened(url) as store:
            left = [t for f in TokenField for t in store._tables(f)[1:] if store._has_rows(t)]
            return sorted(store.iter_ids()), left, summary.duplicates

    kept, left, duplicates = checked("kept.db", every_batch_reads=False)
    assert len(reads) == 1 and left == []
    assert (kept, duplicates) == checked("read.db", every_batch_reads=True)[::2] and len(reads) == 5
    # Another process stores a near copy of a record of the third batch after the second.
    later = list(RecordReader(records))[250]
    intruder = Record("intruder", later.text.replace(later.text.split()[-1], "zz", 1))
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    checks = api._add

    def another_writes_after_the_second(*args: Any, **kwargs: Any) -> api.Added:
        done = checks(*args, **kwargs)
        calls.append(1)
        if len(calls) == 2:
            api.add([intruder], url)  # through another handle, as another process would
        return done

    calls: list[int] = []
    monkeypatch.setattr(api, "_add", another_writes_after_the_second)
    reads.clear()
    summary = api.index([records], url, skip_duplicates=True, batch_size=100)
    assert (later.id, "intruder") in [(record, found) for record, found, _ in summary.duplicates]
    assert len(reads) == 2


def test_contents_extended_by_new_records_are_those_read_with_them(monkeypatch) -> None:
    """Contents read from a store and then given the records stored since, a batch at a time,
    hold the ids, first words and texts that reading them all gives, and a batch joined with
    them finds the same contents sharing the same keys, in the same order, whether its keys
    are scanned or searched for in sorted runs merged as batches come (runs of at most 100
    keys here, so that some stay apart), and once the keys read are sorted too (after two
    batches here)."""
    monkeypatch.setattr("neardup.selfjoin.RUN_KEYS", 100)
    monkeypatch.setattr("neardup.selfjoin.SCANS_BEFORE_SORTING", 2)
    params = FingerprintParams(num_hashes=32, bands=16)
    texts = [f"record {n} of street {n % 7} in town {n % 3}" for n in range(40)]
    fps = fingerprint_batch(texts, params)
    stored = [
        StoredRecord(f"r{n:02}", fp.content, fp.md5, fp.first_word, 1) for n, fp in enumerate(fps)
    ]
    first = read_contents([stored[:10]], params, TokenField.BANDS, True)
    read = first.keys
    for start, end in [(10, 11), (11, 12), (12, 14), (14, 15), (15, 19), (19, 40)]:
        keys, sizes = TokenField.BANDS.keys_of(fps[start:end])
        first.extend(
            [r.id for r in stored[start:end]],
            [fp.content for fp in fps[start:end]],
            [fp.first_word for fp in fps[start:end]],
            keys,
            sizes,
        )
    assert [len(keys) for keys, _ in first.sorted_keys.runs] == [64, 80, 336]  # 4, 5 and 21 records
    whole = partial(read_contents, [stored], params, TokenField.BANDS, True)  # read afresh
    assert (first.heads, first.first_words, first.texts) == (
        whole().heads,
        whole().first_words,
        whole().texts,
    )
    batch = fingerprint_batch(
        [f"record {n} of street {n % 7} in town 1" for n in range(30)], params
    )
    keys, sizes = TokenField.BANDS.keys_of(batch)

    def joined(contents: Contents, most: int) -> list[list[list[int]]]:
        chunks = pairs_across(keys, sizes, contents, most)
        return [[a.record.tolist(), a.content.tolist(), a.shared.tolist()] for a in chunks]

    for most in (1_000, 3):  # every key, and the rarer keys alone
        assert joined(first, most) == joined(whole(), most) and joined(whole(), most)[0][1]
    assert len(first.keys) == 160  # 10 records of 16 bands, scanned for two batches
    assert joined(first, 3) == joined(whole(), 3) and len(first.keys) == len(first.sizes) == 0
    assert joined(first, 1_000) == joined(whole(), 1_000)
    # The keys read, in runs of about 100 keys at content boundaries, then those added; the
    # keys read sorted in the array that held them, not copied beside it.
    runs = first.sorted_keys.runs
    assert [len(keys) for keys, _ in runs] == [112, 48, 64, 80, 336]
    assert [np.shares_memory(keys, read) for keys, _ in runs] == [True, True, False, False, False]


def test_the_holders_of_a_batchs_keys_are_found_by_one_scan_of_the_stores() -> None:
    """key_holders counts the key sets that hold each wanted key, then lists them in order
    for the keys asked (a place of -1 passes a key over), as a sort of the keys would."""
    rng = np.random.default_rng(7)
    store = rng.integers(-(2**63), 2**63 - 1, 5_000, dtype=np.int64)
    store[rng.integers(0, 5_000, 2_000)] = store[:20][rng.integers(0, 20, 2_000)]  # repeats
    sizes = np.diff(np.r_[0, np.sort(rng.integers(0, 5_000, 300)), 5_000])  # some sets empty
    holding = np.repeat(np.arange(len(sizes)), sizes)
    wanted = np.unique(np.r_[store[:30], rng.integers(-(2**63), 2**63 - 1, 50, dtype=np.int64)])
    held = np.zeros(len(wanted), dtype=np.int64)
    _kernels.key_holders(store, sizes, wanted, held, None)
    assert held.tolist() == [int(np.count_nonzero(store == key)) for key in wanted]
    asked = held > 1
    starts = np.r_[0, np.cumsum(np.where(asked, held, 0))]
    holders = np.empty(starts[-1], dtype=np.int64)
    _kernels.key_holders(store, sizes, wanted, np.where(asked, starts[:-1], -1), holders)
    expected = [holding[store == key] for key in wanted[asked]]
    assert holders.tolist() == np.concatenate(expected).tolist()
    with pytest.raises(ValueError, match="distinct wanted keys"):
        repeated = np.r_[wanted, wanted[:1]]
        _kernels.key_holders(store, sizes, repeated, np.zeros(len(repeated), np.int64), None)
    with pytest.raises(ValueError, match="room"):
        places = np.where(asked, starts[:-1], -1)
        _kernels.key_holders(store, sizes, wanted, places, holders[:-1])
    with pytest.raises(ValueError, match="sizes that sum to the keys"):
        _kernels.key_holders(store, sizes[:-1], wanted, held, None)


def test_sorted_values_are_searched_for_as_numpy_searches_them() -> None:
    """sorted_search gives np.searchsorted's places, left and right, for values in ascending
    order: repeated keys and values, values below, between and past every key, keys spread
    over all 64 bits; values out of order are refused."""
    rng = np.random.default_rng(11)
    wide = np.sort(rng.integers(-(2**63), 2**63 - 1, 20_000, dtype=np.int64))
    narrow = np.sort(rng.integers(-40, 40, 500))
    for keys in (wide, narrow, narrow[:0], narrow[:1]):
        for values in (
            np.sort(np.r_[rng.choice(wide, 300), rng.integers(-(2**63), 2**63 - 1, 300)]),
            np.sort(rng.integers(-60, 60, 1_000)),
            np.empty(0, dtype=np.int64),
        ):
            for right in (False, True):
                places = np.empty(len(values), dtype=np.int64)
                _kernels.sorted_search(keys, values.astype(np.int64), right, places)
                side = "right" if right else "left"
                assert places.tolist() == np.searchsorted(keys, values, side).tolist()
    with pytest.raises(ValueError, match="ascending order"):
        _kernels.sorted_search(narrow, np.array([3, 1]), False, np.empty(2, dtype=np.int64))


def test_a_record_joins_by_its_rarest_keys_up_to_its_entries() -> None:
    """Each record keeps its keys the fewest contents hold while their entries fit, and keys
    held by as many are kept or left out together, whatever their order."""
    counts = np.array([5, 1, 3, 3, 9, 2, 2, 2, 4, 0])
    record_of = np.array([0, 0, 0, 0, 0, 1, 1, 1, 2, 2])
    joined = rarest_keys(counts, record_of, most=8)
    # Record 0: 1 + 3 + 3 fit, the 5 would pass 8; record 1: the three 2s fit (6); record 2: all.
    assert joined.tolist() == [False, True, True, True, False, True, True, True, True, True]
    # Two keys of 3 where only one fits: both are left out.
    assert rarest_keys(counts, record_of, most=5)[:4].tolist() == [False, True, False, False]
    assert rarest_keys(np.empty(0, np.int64), np.empty(0, np.int64), most=8).tolist() == []
    rng = np.random.default_rng(3)
    for _ in range(50):
        counts = rng.integers(0, 20, 40)
        record_of = np.sort(rng.integers(0, 6, 40))
        shuffled = np.concatenate(
            [rng.permutation(np.flatnonzero(record_of == r)) for r in range(6)]
        )
        most = int(rng.integers(0, 60))
        joined = rarest_keys(counts, record_of, most)
        assert (rarest_keys(counts[shuffled], record_of[shuffled], most) == joined[shuffled]).all()
        for r in range(6):
            mine = counts[record_of == r]
            kept = joined[record_of == r]
            assert mine[kept].sum() <= most
            assert not kept.any() or mine[kept].max() < mine[~kept].min(initial=10**9)
            # Nothing more of the next size would fit.
            if (~kept).any():
                size = mine[~kept].min()
                assert mine[kept].sum() + mine[mine == size].sum() > most


@pytest.mark.parametrize("method", ["bands", "signature", "shingles"])
def test_a_batch_past_its_entries_joins_by_its_rarer_keys(
    tmp_path: Path, monkeypatch, method: str
) -> None:
    """Where a record's keys are held by more stored contents than JOIN_ENTRIES in all, its
    candidates are those of its rarer keys: each match shares one of them and is a match of the
    whole join, the same in every field and order, with every key it shares counted, by
    whichever tokens the store is queried. Chunks of a few records give the same answers."""
    people = tmp_path / "people.tsv"
    api.generate(800, people, kind="people", seed=11)
    records = list(RecordReader(people))
    url = f"sqlite:///{tmp_path / 'people.db'}"
    api.index([people], url, params={"fields": "bands,signature,shingles"})
    searcher_module = importlib.import_module("neardup.searcher")
    selfjoin = importlib.import_module("neardup.selfjoin")
    with api.opened(url) as store:
        params = store.params
        rules = MatchRules(method=method, threshold=0.05, candidates=MAX_CANDIDATES)
        searcher = Searcher(store, params, rules)
        fps = [searcher.fingerprint_text(r.text + " x") for r in records[:150]]
        every = read_contents(store.iter_records(), params, searcher.field, False)
        monkeypatch.setattr(searcher_module, "JOIN_ENTRIES", 10**9)  # every key
        whole = searcher._joined(fps, every)
        held = np.sort(every.keys)

        def entries(keys: np.ndarray) -> np.ndarray:  # the stored contents holding each key
            return np.searchsorted(held, keys, "right") - np.searchsorted(held, keys, "left")

        # A bound half the records pass, whatever the field's keys.
        most = int(np.median([entries(searcher.field.keys_of([fp])[0]).sum() for fp in fps]))
        monkeypatch.setattr(searcher_module, "JOIN_ENTRIES", most)
        narrowed = searcher._joined(fps, every)
        monkeypatch.setattr(selfjoin, "ACROSS_ENTRIES", 100)
        assert searcher._joined(fps, every) == narrowed
        stored = {record.md5: record for batch in store.iter_records() for record in batch}
    left_out = 0
    for fp, mine, all_of_them in zip(fps, narrowed, whole, strict=True):
        # The same matches, shared tokens too (counted over every key), in the same order.
        assert mine == [m for m in all_of_them if m.id in {n.id for n in mine}]
        keys = searcher.field.keys_of([fp])[0]
        by_record = np.zeros(len(keys), dtype=np.int64)
        rare = set(keys[rarest_keys(entries(keys), by_record, most)].tolist())
        left_out += len(rare) < len(set(keys.tolist()))
        for match in mine:
            theirs = searcher.field.keys_of([searcher.fingerprint_text(stored[match.md5].content)])
            assert rare & set(theirs[0].tolist())
    assert 0 < left_out < len(fps)
    assert sum(map(len, narrowed)) < sum(map(len, whole))


def test_a_checked_run_says_how_many_records_it_joined_by_their_rarer_keys(
    tmp_path: Path, monkeypatch
) -> None:
    people = tmp_path / "people.tsv"
    api.generate(800, people, kind="people", seed=11)
    monkeypatch.setattr("neardup.searcher.JOIN_ENTRIES", 60)
    checked = f"sqlite:///{tmp_path / 'checked.db'}"
    summary = api.index([people], checked, skip_duplicates=True, batch_size=100)
    assert summary.narrowed > 0
    assert f"{summary.narrowed:,} records checked against the stored records that share" in (
        summary.describe()
    )
    assert summary.as_dict()["narrowed"] == summary.narrowed


def test_every_list_of_ids_is_in_the_order_people_read_them(
    sqlite_url: str, tmp_path: Path
) -> None:
    """Pairs, their rows, lookups and groups all list ad9 before ad10 before ad100 (byte order
    would put ad10 and ad100 first)."""
    records = tmp_path / "records.csv"
    text = "two bedroom flat near the station with a balcony"
    records.write_text(f"id,text\nad100,{text}\nad10,{text}\nad9,{text}\n")
    api.index([records], sqlite_url)
    pairs = api.report(sqlite_url, rules={"threshold": 0.5})
    assert [(p.left_id, p.right_id) for p in pairs] == [
        ("ad9", "ad10"),
        ("ad9", "ad100"),
        ("ad10", "ad100"),
    ]
    assert [m.id for m in api.lookup(sqlite_url, text=text)] == ["ad9", "ad10", "ad100"]
    assert clusters(pairs) == [["ad9", "ad10", "ad100"]]


def test_matches_rank_by_edits_then_similarity_then_id_making_keys_for_ties_alone() -> None:
    """The order of the whole key, with an id's natural key made only where two matches tie:
    a key cached for each of a link's candidates outlived its batch and held memory."""
    generator = random.Random(3)
    for _ in range(100):
        matches = [
            Match(f"r{generator.randint(1, 30)}", "", "", False, generator.randint(0, 2), s, 1)
            for s in generator.choices([0.5, 0.7, 0.9], k=generator.randint(0, 8))
        ]
        whole = sorted(matches, key=lambda m: (m.edit_distance, -m.similarity, natural_key(m.id)))
        assert ranked(matches) == whole
    natural_key.cache_clear()
    apart = [Match(f"r{n}", "", "", False, n % 2, 0.5 + n / 100, 1) for n in range(20)]
    assert [m.id for m in ranked(apart)] == [
        f"r{n}" for n in [*range(18, -1, -2), *range(19, 0, -2)]
    ]
    assert in_natural_order(["r10"]) == ["r10"]
    assert natural_key.cache_info().currsize == 0  # no two tied: no key made
    assert [m.id for m in ranked([*apart[:2], replace(apart[0], id="r10")])] == ["r0", "r10", "r1"]
    assert natural_key.cache_info().currsize == 2


def test_records_the_store_holds_are_not_looked_up_again(tmp_path: Path, monkeypatch) -> None:
    """index --skip-duplicates answers a record whose content is stored with the records that
    hold it: the decision and the first duplicate a lookup gives, without the lookup."""
    records = corpus(tmp_path / "records.txt", size=300)
    url = f"sqlite:///{tmp_path / 'u.db'}"
    api.index([records], url, skip_duplicates=True)
    again = list(RecordReader(records))
    everything = api.add(again, url, if_unique=True)
    looked_up: list[str] = []
    answered = Searcher.lookup_batch

    def counted(self: Searcher, fps: list, stored: int) -> list:
        looked_up.extend(fp.md5 for fp in fps)
        return answered(self, fps, stored)

    monkeypatch.setattr(Searcher, "lookup_batch", counted)
    decided = api.add(again, url, if_unique=True, every_duplicate=False)
    with api.opened(url) as store:
        held = store.ids_by_md5(looked_up)
    assert looked_up and not any(held.values())  # only contents the store does not hold
    assert decided.added == everything.added == []
    assert {i: m[0] for i, m in decided.duplicates.items()} == {
        i: m[0] for i, m in everything.duplicates.items()
    }


def test_a_store_made_before_case_folding_keeps_its_normalisation(tmp_path: Path) -> None:
    """Scraped text holds zero-width spaces and soft hyphens, and German addresses write
    STRASSE for Straße: a new store folds them alike. A store made before keeps the contents
    it holds, and so the normalisation they were made with: its lookups, reports and dedup
    answer as they did (dedup compares each record's text with the stored content)."""
    records = tmp_path / "shops.tsv"
    records.write_text(
        "id\ttext\n1\tAnna Rossi Hauptstraße 5\n2\tANNA ROSSI HAUPTSTRASSE 5\n"
        "3\tMarco Bian\u00adchi Via \u200bRoma 1\n4\tMarco Bianchi Via Roma 1\n5\tnothing alike\n"
    )
    new, old = f"sqlite:///{tmp_path / 'new.db'}", f"sqlite:///{tmp_path / 'old.db'}"
    api.index([records], new)
    api.index([records], old, params={"normalization": 1})
    with sqlite3.connect(tmp_path / "old.db") as database:  # as a store made before wrote it
        settings = json.loads(
            database.execute("SELECT value FROM meta WHERE key = 'params'").fetchone()[0]
        )
        del settings["normalization"]
        database.execute("UPDATE meta SET value = ? WHERE key = 'params'", (json.dumps(settings),))
    assert api.stats(old)["parameters"]["normalization"] == 1
    exact = {(p.left_id, p.right_id) for p in api.report(new, rules={"threshold": 0.5})}
    assert exact == {("1", "2"), ("3", "4")}
    assert all(p.kind == "exact" for p in api.report(new, rules={"threshold": 0.5}))
    assert all(p.kind == "near" for p in api.report(old, rules={"threshold": 0.3}))
    assert api.lookup(old, text="Marco Bian\u00adchi Via \u200bRoma 1")[0].exact
    plain = "Marco Bianchi Via Roma 1"
    assert [m.id for m in api.lookup(old, text=plain) if m.exact] == ["4"]
    assert [m.id for m in api.lookup(new, text=plain) if m.exact] == ["3", "4"]
    kept = io.StringIO()
    api.dedup(records, kept, old, rules={"threshold": 0.3})  # no record "holds another text"
    assert len(kept.getvalue().splitlines()) == 4
    api.index([records], old)  # an index run keeps the store's normalisation
    assert api.stats(old)["parameters"]["normalization"] == 1
