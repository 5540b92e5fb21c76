"""Every store gives the same report, figure for figure, on the same records and settings,
including a 2-shard SolrCloud collection."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from neardup import api
from neardup.searcher import MatchRules
from neardup.stores import open_store

SAMPLE = Path(__file__).resolve().parents[1] / "neardup" / "data" / "sample.txt"


def corpus(path: Path, size: int = 400, seed: int = 11) -> Path:
    """Records with planted near-duplicates: word drops, swaps, typos, and exact copies."""
    rng = random.Random(seed)
    words = [
        f"{rng.choice('bcdfghklmnprst')}{rng.choice('aeiou')}{rng.choice('nrst')}"
        for _ in range(300)
    ]
    lines = SAMPLE.read_text().splitlines()
    texts: list[str] = []
    for _ in range(size):
        if texts and rng.random() < 0.4:
            base = rng.choice(texts).split()
            edit = rng.random()
            if edit < 0.3 and len(base) > 3:
                base.pop(rng.randrange(len(base)))
            elif edit < 0.6 and len(base) > 3:
                i = rng.randrange(len(base) - 1)
                base[i], base[i + 1] = base[i + 1], base[i]
            elif edit < 0.9:
                i = rng.randrange(len(base))
                base[i] = base[i][:-1] + rng.choice("xyz")
            texts.append(" ".join(base))
        else:
            texts.append(" ".join(rng.choices(words, k=rng.randint(4, 14))))
    path.write_text("\n".join(lines + [f"g{n:04d} {t}" for n, t in enumerate(texts)]) + "\n")
    return path


def report_of(url: str, records: Path, rules: MatchRules) -> tuple[int, list]:
    api.index([records], url)
    with open_store(url, create=False) as store:
        return store.count(), api.report(store, rules=rules)


@pytest.mark.parametrize(
    "rules",
    [MatchRules(), MatchRules(method="lsh", rows=5), MatchRules(method="shingles", threshold=0.3)],
    ids=["minhash", "lsh", "shingles"],
)
def test_solr_report_equals_the_embedded_report(solr_server, sqlite_url, tmp_path, rules) -> None:
    records = corpus(tmp_path / "records.txt")
    expected = report_of(sqlite_url, records, rules)
    assert len(expected[1]) > 50
    assert report_of(solr_server.new_store_url(), records, rules) == expected
    solr_server.drop_made()


def test_solr_cloud_two_shards_equals_the_embedded_report(
    solr_cloud_server, sqlite_url, tmp_path
) -> None:
    records = corpus(tmp_path / "records.txt")
    url = solr_cloud_server.new_store_url()
    assert "shards=2" in url
    try:
        expected = report_of(sqlite_url, records, MatchRules())
        assert report_of(url, records, MatchRules()) == expected
        api.index([records], url)  # indexing again changes nothing
        assert api.stats(url)["documents"] == expected[0]
        with open_store(url) as store:
            shards = store._call("GET", "admin/collections", params={"action": "CLUSTERSTATUS"})
        collection = shards["cluster"]["collections"][url.split("/")[-1].split("?")[0]]
        assert len(collection["shards"]) == 2
    finally:
        solr_cloud_server.drop_made()
