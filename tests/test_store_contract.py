"""The contract every store keeps. Runs against every store kind; answers are checked against a
brute-force reference, so all stores agree exactly (same candidates, same order)."""

from __future__ import annotations

import random
import threading

import numpy as np
import pytest

from neardup.errors import NeardupError, ParameterMismatch, StoreUnavailable
from neardup.fingerprint import TOKEN_FIELDS, Fingerprint, FingerprintParams, fingerprint_batch
from neardup.stores import (
    Candidate,
    CandidateQuery,
    Document,
    Store,
    StoredRecord,
    TokenField,
    open_store,
    sort_candidates,
)

PARAMS = FingerprintParams("word", 1, 16, 4, fields=TOKEN_FIELDS)
HOSTILE = [
    'a:b (c) "d" \\e *f ?g [h] {i} ~j ^k',
    "AND OR NOT && || !",
    "id with spaces",
    "ünïcödé-ïd",
    "日本語",
    "*",
    "\\",
    '"',
    "a/b",
    "-leading-dash",
    "tab\there",
    "new\nline",
    "com,ma",
    '") OR ("',
    "line\u2028separator",
    "é" * 256,  # 512 UTF-8 bytes: the longest id every store holds
]


def documents(texts: dict[str, str], params: FingerprintParams = PARAMS) -> list[Document]:
    fps = fingerprint_batch(list(texts.values()), params)
    return [Document(i, fp) for i, fp in zip(texts, fps, strict=True)]


def tokens_of(
    field: TokenField,
    fp: Fingerprint,
    rows: int,
    first_word: str | None = None,
    exclude_md5: tuple[str, ...] = (),
) -> CandidateQuery:
    """The candidate query of ``fp``'s tokens in ``field``."""
    return CandidateQuery(field, field.keys(fp), rows, first_word, exclude_md5)


def reference_candidates(docs: list[Document], query: CandidateQuery) -> list[Candidate]:
    """The answer to ``query`` by brute force over ``docs``."""
    wanted = set(query.field.strings(query.keys))
    found = []
    for d in docs:
        if query.first_word is not None and d.fingerprint.first_word != query.first_word:
            continue
        if d.fingerprint.md5 in query.exclude_md5:
            continue
        score = len(wanted & set(query.field.tokens(d.fingerprint)))
        if score:
            fp = d.fingerprint
            record = StoredRecord(d.id, fp.content, fp.md5, fp.first_word, fp.num_words)
            found.append(Candidate(record, score))
    return sort_candidates(found)[: query.rows]


def answer(store: Store, docs: list[Document], query: CandidateQuery) -> list[Candidate]:
    """The store's answer to ``query``, checked against the brute-force reference."""
    found = store.candidates(query)
    assert found == reference_candidates(docs, query)
    return found


def random_corpus(seed: int, size: int) -> dict[str, str]:
    rng = random.Random(seed)
    words = [f"w{i}" for i in range(30)] + ["AND", "OR", "(x)", "a:b", '"q"']
    ids = [f"r{i:03d}" for i in range(size)] + HOSTILE
    return {i: " ".join(rng.choices(words, k=rng.randint(1, 12))) for i in ids}


def test_new_store_takes_params_and_keeps_them(store_factory) -> None:
    store: Store = store_factory()
    assert store.read_params() is None
    assert store.ensure_params(PARAMS) == PARAMS
    assert store.read_params() == PARAMS
    assert store.ensure_params(None) == PARAMS
    assert store.ensure_params({"num_hashes": 16}) == PARAMS


def test_settings_written_by_two_handles_keep_both_changes(store_url_factory) -> None:
    """Two handles on one store (two processes, or two of the service's threads): what one
    writes survives the other's later write, and a handle told to read again sees it."""
    url = store_url_factory()
    with open_store(url) as first, open_store(url) as second:
        first.ensure_params(PARAMS)
        assert second.read_params() == PARAMS  # read now, and held
        first.update_settings({"threshold_choice": {"threshold": 0.6}})
        assert "threshold_choice" not in second.settings  # as it read them
        second.update_settings({"last_report": {"threshold": 0.6}})
        first.update_settings({"threshold_choice": None})
        second.reload_settings(older_than=60.0)  # read a moment ago: kept
        assert second.settings["threshold_choice"] == {"threshold": 0.6}
        second.reload_settings()
        assert second.settings["threshold_choice"] is None
    with open_store(url) as third:
        assert third.settings["last_report"] == {"threshold": 0.6}
        assert third.settings["threshold_choice"] is None
        assert third.read_params() == PARAMS


def test_settings_written_whole_are_the_handles_copy_too(store_url_factory) -> None:
    """A handle that wrote the settings object in place answered with the one it had read."""
    with open_store(store_url_factory()) as store:
        store.ensure_params(PARAMS)
        store.update_settings({"threshold_choice": {"threshold": 0.6}})
        store.write_settings(PARAMS.to_dict())
        assert store.settings == PARAMS.to_dict() == store.read_settings()


def test_settings_merged_at_once_by_two_writers_lose_nothing(store_url_factory) -> None:
    """Two writers merging into one store's settings at the same moment (a service's checked
    adds and a report of another process): each write lands on what the other wrote, however
    they interleave, so neither's last value is undone by a stale copy of the other's."""
    url = store_url_factory()
    with open_store(url) as store:
        store.ensure_params(PARAMS)
    writes = 25

    def write(key: str) -> None:
        with open_store(url) as own:
            for n in range(writes):
                own.update_settings({key: {"n": n}})

    threads = [threading.Thread(target=write, args=(k,)) for k in ("last_report", "checked_pairs")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    with open_store(url) as store:
        assert store.settings["last_report"] == {"n": writes - 1}
        assert store.settings["checked_pairs"] == {"n": writes - 1}
        assert store.read_params() == PARAMS


def test_two_runs_making_one_store_at_once_agree_on_its_params(store_url_factory) -> None:
    """Two runs that each found no parameters (two index processes into one new store): the
    second to write them does not overwrite the first's, which it would fingerprint against;
    it is told the store's."""
    url = store_url_factory()
    other = FingerprintParams("char", 5, 16, 4, fields=TOKEN_FIELDS)
    with open_store(url) as first, open_store(url) as second:
        assert second.read_params() is None  # read before the first run writes its own
        assert first.ensure_params(PARAMS) == PARAMS
        with pytest.raises(ParameterMismatch, match="word:1, 16 hashes"):
            second.ensure_params(other)
        assert second.ensure_params(None) == PARAMS
    with open_store(url) as third:
        assert third.read_params() == PARAMS


def test_new_store_without_params_uses_defaults(store: Store) -> None:
    assert store.ensure_params(None) == FingerprintParams()


def test_other_params_are_refused_naming_both(store: Store) -> None:
    store.ensure_params(PARAMS)
    with pytest.raises(ParameterMismatch) as caught:
        store.ensure_params(FingerprintParams("char", 5, 16, 4))
    message = str(caught.value)
    assert "word:1, 16 hashes" in message and "char:5, 16 hashes" in message
    assert message.endswith(  # and what to do about it
        "leave those settings out to use the store's, or index into a new store (--store) to "
        "use these"
    )
    with pytest.raises(ParameterMismatch, match="32 hashes"):
        store.ensure_params({"num_hashes": 32, "bands": 8})


def test_upsert_get_count_and_idempotence(store: Store) -> None:
    store.ensure_params(PARAMS)
    docs = documents(
        {
            "1": "Art's Delicatessen Studio City",
            "2": "Other text",
            **dict.fromkeys(HOSTILE, "hostile id"),
        }
    )
    store.upsert(docs)
    store.upsert(docs)
    store.flush()
    assert store.count() == 2 + len(HOSTILE)
    got = store.get(["1", "missing", *HOSTILE])
    assert set(got) == {"1", *HOSTILE}
    record = got["1"]
    assert (record.content, record.first_word, record.num_words) == (
        "art s delicatessen studio city",
        "art",
        5,
    )
    assert record.md5 == docs[0].fingerprint.md5


def test_shingle_frequencies_count_the_live_records(store_url_factory) -> None:
    """What the weighted similarity weighs by: exact after replacements and deletes."""

    def key(word: str) -> int:
        return int(TokenField.SHINGLES.keys(documents({"q": word})[0].fingerprint)[0])

    words = ["alpha", "beta", "gamma", "delta"]

    def counted(store) -> tuple[int, dict[str, int]]:
        found = store.frequencies(np.array([key(w) for w in words], dtype=np.int64))
        by_key = dict(zip(found.keys.tolist(), found.counts.tolist(), strict=True))
        return found.records, {w: by_key[key(w)] for w in words}

    with open_store(store_url_factory()) as store:
        store.ensure_params(PARAMS)
        store.upsert(documents({"1": "alpha beta", "2": "alpha gamma", "3": "beta alpha"}))
        store.flush()
        assert counted(store) == (3, {"alpha": 3, "beta": 2, "gamma": 1, "delta": 0})
        store.upsert(documents({"2": "beta delta"}))  # replaced: gamma goes, delta comes
        store.delete(["3"])
        store.flush()
        assert counted(store) == (2, {"alpha": 1, "beta": 2, "gamma": 0, "delta": 1})


def test_contents_holding_counts_distinct_contents_up_to_the_cap(store_url_factory) -> None:
    """What explain asks to tell whether a report left a pair's buckets out: copies of one
    content count once, deletes count no more, and counting stops one past ``most``."""
    texts = {"1": "alpha beta", "2": "alpha beta", "3": "alpha gamma", "4": "alpha delta"}
    texts |= {"5": "beta gamma", "6": "alpha epsilon"}
    found = documents(texts)
    keys = {t: TokenField.SHINGLES.keys(d.fingerprint) for t, d in zip(texts, found, strict=True)}
    alpha = np.intersect1d(keys["1"], keys["3"])
    beta = np.intersect1d(keys["1"], keys["5"])
    zeta = TokenField.SHINGLES.keys(documents({"q": "zeta"})[0].fingerprint)
    asked = np.concatenate([alpha, beta, zeta])
    with open_store(store_url_factory()) as store:
        store.ensure_params(PARAMS)
        store.upsert(found)
        store.delete(["6"])
        store.flush()
        assert store.contents_holding(TokenField.SHINGLES, asked, 5).tolist() == [3, 2, 0]
        assert store.contents_holding(TokenField.SHINGLES, asked, 1).tolist() == [2, 2, 0]
        assert len(store.contents_holding(TokenField.BANDS, np.empty(0, np.int64), 1)) == 0


def test_upsert_replaces_by_id_and_moves_tokens(store_url_factory) -> None:
    url = store_url_factory()
    with open_store(url) as first:
        first.ensure_params(PARAMS)
        first.upsert(documents({"1": "alpha beta gamma", "2": "delta"}))
        first.flush()
    # A store opened again reads its parameters by itself before replacing a record.
    with open_store(url) as store:
        store.upsert(documents({"1": "delta epsilon"}))
        store.flush()
        assert store.count() == 2
        assert store.get(["1"])["1"].content == "delta epsilon"
        query = documents({"q": "alpha beta gamma"})[0].fingerprint
        assert store.candidates(tokens_of(TokenField.SHINGLES, query, 10)) == []
        query = documents({"q": "delta"})[0].fingerprint
        found = store.candidates(tokens_of(TokenField.SHINGLES, query, 10))
        assert [c.id for c in found] == ["1", "2"]


def test_last_of_duplicate_ids_in_a_batch_wins(store: Store) -> None:
    store.ensure_params(PARAMS)
    store.upsert(documents({"x": "first"}) + documents({"x": "second"}))
    store.flush()
    assert store.count() == 1
    assert store.get(["x"])["x"].content == "second"


def test_ids_by_md5_is_the_complete_group_in_id_order(store: Store) -> None:
    store.ensure_params(PARAMS)
    texts = {f"copy{i:02d}": "The same text!" for i in range(40)} | {"other": "another text"}
    docs = documents(texts)
    store.upsert(docs)
    store.flush()
    md5 = docs[0].fingerprint.md5
    assert store.ids_by_md5([md5]) == {md5: sorted(f"copy{i:02d}" for i in range(40))}
    assert store.ids_by_md5(["0" * 32]) == {"0" * 32: []}


def test_ids_by_md5_gives_several_complete_groups_at_once(store: Store) -> None:
    # 1,100 copies: more than one page of an engine's walk.
    copies = {f"c{i:04d}": "One text, many copies" for i in range(1100)}
    pair = {"p1": "a pair of texts", "p2": "A pair of texts!"}
    store.ensure_params(PARAMS)
    docs = documents(copies | pair | {"alone": "nothing like it"})
    store.upsert(docs)
    store.flush()
    md5 = {d.id: d.fingerprint.md5 for d in docs}
    absent = "f" * 32
    assert store.ids_by_md5([md5["p1"], absent, md5["c0000"], md5["alone"]]) == {
        md5["p1"]: ["p1", "p2"],
        absent: [],
        md5["c0000"]: sorted(copies),
        md5["alone"]: ["alone"],
    }
    assert store.ids_by_md5([]) == {}
    records = store.records_by_md5([md5["p1"], absent, md5["c0000"]])
    assert {m: [r.id for r in found] for m, found in records.items()} == {
        md5["p1"]: ["p1", "p2"],
        absent: [],
        md5["c0000"]: sorted(copies),
    }
    assert [r.content for r in records[md5["p1"]]] == ["a pair of texts"] * 2
    assert records[md5["p1"]][0] == store.get(["p1"])["p1"]
    # More MD5s than one query takes (Elasticsearch refuses 65,536 terms): asked in parts.
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("neardup.stores.base.MD5S_PER_QUERY", 2)
        asked = [md5["p1"], absent, md5["c0000"], md5["alone"]]
        assert store.ids_by_md5(asked) == {m: [r.id for r in found] for m, found in
                                           store.records_by_md5(asked).items()}  # fmt: skip
        assert store.ids_by_md5(asked)[md5["alone"]] == ["alone"]


@pytest.mark.parametrize("field", list(TokenField))
def test_candidates_equal_the_brute_force_reference(store: Store, field: TokenField) -> None:
    store.ensure_params(PARAMS)
    corpus = random_corpus(seed=3, size=60)
    docs = documents(corpus)
    store.upsert(docs)
    store.flush()
    for query in documents(random_corpus(seed=4, size=15)):
        fp = query.fingerprint
        for rows in (1, 5, 100):
            answer(store, docs, tokens_of(field, fp, rows))
        answer(store, docs, tokens_of(field, fp, 20, first_word=fp.first_word))
        md5s = (docs[0].fingerprint.md5, docs[5].fingerprint.md5)
        answer(store, docs, tokens_of(field, fp, 20, exclude_md5=md5s))


def test_ties_are_broken_by_id_in_byte_order(store: Store) -> None:
    store.ensure_params(PARAMS)
    ids = ["b", "a", "B", "é", "z", "aa", "10", "9", "日本"]
    store.upsert(documents(dict.fromkeys(ids, "same words here")))
    store.flush()
    query = documents({"q": "same words here"})[0].fingerprint
    found = store.candidates(tokens_of(TokenField.SHINGLES, query, 50))
    assert [c.id for c in found] == sorted(ids, key=lambda i: i.encode("utf-8"))
    assert {c.score for c in found} == {3}


def test_hostile_text_is_data(store: Store) -> None:
    store.ensure_params(PARAMS)
    # Stored records always have words (the indexer skips the others); the hostile part is
    # everything around them.
    texts = {h: f"{h} word {h} {h}x" for h in HOSTILE} | {
        "plain": "plain words only",
        "long": "word " * 5000,
        "nul": "a nul\x00byte inside",
        "cjk": "日本語のテキストには空白がない",
        "emoji": "emoji 😀 text 🏠",
        "rtl": "עברית טקסט מימין לשמאל",
    }
    docs = documents(texts)
    store.upsert(docs)
    store.flush()
    for d in docs:
        fp = d.fingerprint
        assert d.id in store.ids_by_md5([fp.md5])[fp.md5]
        for field in TokenField:
            answer(store, docs, tokens_of(field, fp, 5, first_word=fp.first_word))
    # An empty first word, and keys that match nothing, or nothing to match.
    nothing = np.array([-1, 0, 2**40], dtype=np.int64)
    for field in TokenField:
        assert store.candidates(CandidateQuery(field, nothing, 5, first_word="")) == []
        assert store.candidates(CandidateQuery(field, nothing[:0], 5)) == []


def test_iter_ids_in_byte_order(store: Store) -> None:
    store.ensure_params(PARAMS)
    ids = [f"id{i}" for i in range(1200)] + HOSTILE
    store.upsert(documents(dict.fromkeys(ids, "text")))
    store.flush()
    assert list(store.iter_ids()) == sorted(ids, key=lambda i: i.encode("utf-8"))
    batches = list(store.iter_records(batch_size=500))
    assert [len(b) for b in batches] == [500, 500, len(ids) - 1000]
    assert [r.id for b in batches for r in b] == list(store.iter_ids())
    assert {r.content for b in batches for r in b} == {"text"}


def test_delete(store: Store) -> None:
    store.ensure_params(PARAMS)
    store.upsert(documents({"1": "one two", "2": "two three", "3": "three four"}))
    store.flush()
    assert store.delete(["1", "3", "missing"]) == 2
    store.flush()
    assert store.count() == 1
    query = documents({"q": "one four"})[0].fingerprint
    assert store.candidates(tokens_of(TokenField.SHINGLES, query, 5)) == []


def test_upsert_needs_the_stores_parameters(store: Store) -> None:
    with pytest.raises(NeardupError, match="no fingerprint parameters yet"):
        store.upsert(documents({"1": "alpha beta"}))
    assert store.read_params() is None  # nothing was created or written


def test_get_more_ids_than_one_page(store: Store) -> None:
    store.ensure_params(PARAMS)
    texts = {f"id{i:04d}": f"record number {i}" for i in range(1500)}
    store.upsert(documents(texts))
    store.flush()
    got = store.get([*texts, "missing"])
    assert len(got) == 1500
    assert got["id1234"].content == "record number 1234"


def test_a_query_with_thousands_of_distinct_tokens(store: Store) -> None:
    # One clause per token: more than Lucene's default limit of 1,024 clauses.
    store.ensure_params(PARAMS)
    words = [f"w{i}" for i in range(3000)]
    docs = documents({"all": " ".join(words), "half": " ".join(words[::2]), "other": "x y"})
    store.upsert(docs)
    store.flush()
    query = docs[0].fingerprint
    found = answer(store, docs, tokens_of(TokenField.SHINGLES, query, 5))
    assert [(c.id, c.score) for c in found] == [("all", 3000), ("half", 1500)]


def test_drop_removes_the_store(store_url_factory) -> None:
    url = store_url_factory()
    with open_store(url) as store:
        store.ensure_params(PARAMS)
        store.upsert(documents({"1": "alpha"}))
        store.flush()
        store.drop()
    with pytest.raises(StoreUnavailable):
        open_store(url, create=False)


def reference_buckets(docs: list[Document], field: TokenField) -> list[list[str]]:
    """Every token held by two or more of ``docs``, as the sorted MD5s of its distinct contents
    (tokens of one content aside), sorted."""
    holders: dict[str, list[str]] = {}
    for d in docs:
        for token in set(field.tokens(d.fingerprint)):
            holders.setdefault(token, []).append(d.fingerprint.md5)
    buckets = [sorted(set(md5s)) for md5s in holders.values() if len(md5s) > 1]
    return sorted(b for b in buckets if len(b) > 1)


def test_shared_buckets_equal_the_brute_force_reference(store: Store, monkeypatch) -> None:
    # Limits small enough that the engines split their requests by token prefix, split answers
    # that hit their bucket limit, and walk buckets too large for their sub-aggregation.
    monkeypatch.setattr("neardup.stores.schema.TOKENS_PER_REQUEST", 40)
    monkeypatch.setattr("neardup.stores.elasticsearch.MAX_BUCKETS", 2)
    monkeypatch.setattr("neardup.stores.elasticsearch.BUCKET_CONTENTS", 1)
    store.ensure_params(PARAMS)
    rng = random.Random(5)
    corpus = {"copy1": "w1 w2 w3", "copy2": "w1 w2 w3"}
    for family in range(40):  # near-duplicates: one word of six changed
        words = [f"w{rng.randrange(200)}" for _ in range(6)]
        for variant in range(3):
            words[rng.randrange(6)] = f"v{rng.randrange(200)}"
            corpus[f"r{family:02d}{variant}"] = " ".join(words)
    store.upsert(documents(corpus))
    store.upsert(documents({"r000": "copy w1 w2 w3"}))
    store.delete(["r011"])
    store.flush()
    live = {**corpus, "r000": "copy w1 w2 w3"}
    del live["r011"]
    assert store.lists_buckets(TokenField.BANDS)
    listed = [b for page in store.shared_buckets(TokenField.BANDS) for b in page.hex()]
    expected = reference_buckets(documents(live), TokenField.BANDS)
    assert len(expected) > 40
    assert sorted(sorted(b) for b in listed) == expected


def test_iter_digests_in_id_order(store: Store) -> None:
    store.ensure_params(PARAMS)
    docs = documents({"b": "two words", "a": "One word", "c": "two words"})
    store.upsert(docs)
    store.flush()
    md5 = {d.id: d.fingerprint.md5 for d in docs}
    batches = list(store.iter_digests(batch_size=2))
    assert batches == [[(md5["a"], ""), (md5["b"], "")], [(md5["c"], "")]]
    assert [d for batch in store.iter_digests(first_word=True) for d in batch] == [
        (md5["a"], "one"),
        (md5["b"], "two"),
        (md5["c"], "two"),
    ]
