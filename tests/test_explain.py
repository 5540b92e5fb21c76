"""`neardup explain`: the numbers behind one pair agree with what lookups do with it."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest

from neardup import api
from neardup.explain import explain
from neardup.fingerprint import (
    FingerprintParams,
    fingerprint,
    jaccard,
    shingle_texts,
    word_edit_distance,
)
from neardup.searcher import MatchRules
from tests.runner import neardup

PARAMS = FingerprintParams("char", 4, 64, 16)
RECORDS = {
    "1": "Art's Deli 12224 Ventura Blvd. Studio City",
    "2": "Art's Delicatessen 12224 Ventura Blvd. Studio City",
    "3": "Arts Deli 12224 Ventura Boulevard Studio City CA",
    "4": "Golden Lotus Dim Sum 1209 Grant Ave San Francisco",
    "5": "Golden Lotus Dim Sum 1209 Grant Avenue San Francisco",
    "6": "Thai Orchid Kitchen 58 Elm Street Northampton",
}


def pair(a: str, b: str, **rules: object):
    return explain(fingerprint(a, PARAMS), fingerprint(b, PARAMS), PARAMS, MatchRules(**rules))


def test_the_diff_rebuilds_both_texts_and_counts_the_edit_distance() -> None:
    for a, b in itertools.permutations(RECORDS.values(), 2):
        found = pair(a, b)
        rebuilt_a = " ".join(c.a for c in found.diff if c.a)
        rebuilt_b = " ".join(c.b for c in found.diff if c.b)
        assert (rebuilt_a, rebuilt_b) == (found.a_content, found.b_content)
        assert found.edit_distance == word_edit_distance(found.a_content, found.b_content)
        assert {c.op for c in found.diff} <= {"equal", "replace", "delete", "insert"}


def test_the_numbers_are_the_searchers() -> None:
    a, b = fingerprint(RECORDS["1"], PARAMS), fingerprint(RECORDS["2"], PARAMS)
    found = explain(a, b, PARAMS, MatchRules())
    assert found.similarity == jaccard(a.shingles, b.shingles)
    assert found.shingles_shared + found.shingles_only_a == len(a.shingles)
    assert found.shingles_shared + found.shingles_only_b == len(b.shingles)
    union = found.shingles_shared + found.shingles_only_a + found.shingles_only_b
    assert found.similarity == pytest.approx(found.shingles_shared / union)
    assert found.signature_estimate == found.signature_shared / PARAMS.num_hashes
    assert list(found.bands_shared) == [n for n in range(16) if a.bands[n] == b.bands[n]]
    assert found.marked_diff() == "art s [-deli-]{+delicatessen+} 12224 ventura blvd studio city"


def test_the_verdict_names_the_rule_that_decided() -> None:
    same = pair(RECORDS["1"], "ART'S deli, 12224 Ventura Blvd Studio City")
    assert same.exact and same.accepted and "exact duplicates" in same.reason
    near = pair(RECORDS["4"], RECORDS["5"])
    assert near.accepted and "accepted: jaccard similarity" in near.reason
    strict = pair(RECORDS["4"], RECORDS["5"], threshold=0.99)
    assert (
        strict.candidate and not strict.accepted and "is below the threshold 0.99" in strict.reason
    )
    edits = pair(RECORDS["4"], RECORDS["5"], threshold=None, max_edit_distance=0)
    assert not edits.accepted and "1 word edits, over the maximum 0" in edits.reason
    apart = pair(RECORDS["1"], RECORDS["6"], method="bands")
    assert not apart.candidate and "share no band token" in apart.reason
    first = pair(RECORDS["1"], "The " + RECORDS["1"], first_word=True)
    assert not first.candidate and "first words differ" in first.reason


@pytest.fixture
def indexed(store_url_factory, tmp_path: Path) -> str:
    url = store_url_factory()
    path = tmp_path / "records.jsonl"
    path.write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in RECORDS.items()))
    api.index([path], url, params={"shingle": "char:4", "num_hashes": 64, "bands": 16})
    return url


def test_explain_accepts_exactly_the_pairs_a_lookup_returns(indexed: str) -> None:
    for rules in (
        {},
        {"threshold": 0.6},
        {"method": "bands", "threshold": 0.3},
        {"similarity": "jaccard", "threshold": 0.5},
    ):
        for a, b in itertools.permutations(RECORDS, 2):
            found = {m.id: m for m in api.lookup(indexed, id=a, rules=rules)}
            explained = api.explain(indexed, ids=[a, b], rules=rules)
            assert explained.accepted == (b in found), (a, b, rules, explained.reason)
            if b in found:
                assert explained.similarity == found[b].similarity
                assert explained.edit_distance == found[b].edit_distance


def test_explain_weighs_shingles_by_the_stores_counts(indexed: str) -> None:
    explained = api.explain(indexed, ids=["1", "2"])
    assert explained.similarity == explained.weighted != explained.jaccard
    assert explained.rarest_shared, "two near-duplicates share shingles"
    counts = [held for _, held in explained.rarest_shared]
    assert counts == sorted(counts) and counts[0] >= 2  # both records hold each of them
    with api.opened(indexed) as store:
        hashes = {text: h for h, text in shingle_texts(explained.a_content, store.params).items()}
        for text, held in explained.rarest_shared:
            assert text in explained.a_content and text in explained.b_content
            key = np.array([hashes[text]], dtype=np.uint64).view(np.int64)
            assert store.frequencies(key).counts.tolist() == [held]


def test_the_command_prints_a_table_or_json(indexed: str) -> None:
    table = neardup("explain", "1", "2", "--store", indexed)
    assert table.returncode == 0, table.stderr
    assert "[-deli-]{+delicatessen+}" in table.stdout and "verdict" in table.stdout
    text = neardup("explain", "4", "--text", "Golden Lotus 1209 Grant Ave", "--store", indexed)
    assert "text: golden lotus 1209 grant ave" in text.stdout
    as_json = json.loads(neardup("explain", "1", "3", "--store", indexed, "--json").stdout)
    assert as_json["a_id"] == "1" and as_json["b_id"] == "3" and "reason" in as_json
    one = neardup("explain", "1", "--store", indexed)
    assert one.returncode == 2 and "takes two records" in one.stderr
    unknown = neardup("explain", "1", "nine", "--store", indexed)
    assert unknown.returncode == 2 and "no record with id 'nine'" in unknown.stderr
    # As lookup names a stored record: "unrecognized arguments: --id --id 2" before.
    flags = neardup("explain", "--id", "1", "--id", "2", "--store", indexed)
    assert flags.returncode == 0 and flags.stdout == table.stdout
    mixed = neardup(
        "explain", "--id", "4", "--text", "Golden Lotus 1209 Grant Ave", "--store", indexed
    )
    assert mixed.stdout == text.stdout
    one = neardup("explain", "--text", "abcd", "--text", "abcd efgh", "--store", indexed).stdout
    assert "(1 shingle shared, 0 only in A, 5 only in B)" in one  # "1 shingles" before
