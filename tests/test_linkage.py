"""Linking two sources one to one: the mutual best matches, on every store, and the command."""

from __future__ import annotations

import importlib
import json
import random
import sys
from pathlib import Path

import numpy as np
import pytest

from neardup import api
from neardup.errors import NeardupError
from neardup.generate import write_corpus
from neardup.linkage import MutualBest
from neardup.readers import RecordReader
from neardup.searcher import Match, natural_key
from neardup.tuning import (
    LINKS_SPLIT,
    choose_link_threshold,
    similarity_histogram,
)
from tests.runner import neardup


def match(stored_id: str, similarity: float) -> Match:
    return Match(stored_id, "", "", False, 0, similarity, 1)


def linked(found: dict[int, list[Match]]) -> list[tuple[int, str]]:
    best = MutualBest()
    for place in sorted(found):
        best.add(place, found[place])
    return [(place, m.id) for place, m in best.links()]


def test_a_record_links_to_its_best_match_when_it_is_that_records_best_too() -> None:
    found = {
        0: [match("a", 0.9), match("b", 0.5)],
        1: [match("a", 0.8), match("c", 0.4)],  # a prefers 0: 1 has no link, though c is free
        2: [match("d", 0.6)],
        3: [match("d", 0.6), match("e", 0.3)],  # a tie for d: the record first in the file
        4: [match("f10", 0.7), match("f9", 0.7)],  # a tie: f9 before f10, as people read ids
        5: [],
    }
    assert linked(found) == [(0, "a"), (2, "d"), (4, "f9")]


def mutual_by_definition(found: dict[int, list[Match]]) -> list[tuple[int, str]]:
    """Every pair whose two sides rank each other first over all the pairs, from scratch."""
    pairs = [(place, m.id, m.similarity) for place, ms in found.items() for m in ms]

    def best_of_record(place: int) -> str:
        mine = [p for p in pairs if p[0] == place]
        return min(mine, key=lambda p: (-p[2], natural_key(p[1])))[1]

    def best_of_stored(stored_id: str) -> int:
        theirs = [p for p in pairs if p[1] == stored_id]
        return min(theirs, key=lambda p: (-p[2], p[0]))[0]

    return sorted(
        {
            (place, stored_id)
            for place, stored_id, _ in pairs
            if best_of_record(place) == stored_id and best_of_stored(stored_id) == place
        }
    )


def test_the_links_are_the_mutual_best_matches_in_any_order_of_matches() -> None:
    generator = random.Random(7)
    for _ in range(200):
        stored = [f"s{n}" for n in range(generator.randint(1, 8))]
        found = {
            place: [
                match(stored_id, generator.choice([0.2, 0.5, 0.5, 0.7, 0.9]))
                for stored_id in generator.sample(stored, generator.randint(0, len(stored)))
            ]
            for place in range(generator.randint(1, 8))
        }
        links = linked(found)
        assert links == mutual_by_definition(found)
        assert len({s for _, s in links}) == len(links)  # no stored record linked twice
        shuffled = {place: generator.sample(ms, len(ms)) for place, ms in found.items()}
        assert linked(shuffled) == links


def two_sources(tmp_path: Path) -> tuple[Path, Path, set[tuple[str, str]]]:
    """600 generated people as the linking benchmark makes two sources of them: four fifths of
    the people in the first, an edited copy of some of them and the last fifth in the second."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from linking import two_sources as made  # a script's module, beside the benchmarks

    people, truth = tmp_path / "people.tsv", tmp_path / "truth.tsv"
    write_corpus(people, truth, 600, kind="people", seed=3, duplicates=0.3)
    return made(people, truth, tmp_path)


def records_in(path: Path) -> int:
    return len(path.read_text().splitlines()) - 1


def test_two_sources_link_one_to_one_alike_on_every_store(
    store, sqlite_url: str, tmp_path: Path
) -> None:
    first, second, truth = two_sources(tmp_path)
    every = {"threshold": 0}
    expected = api.link([first, second], sqlite_url, rules=every)
    links = {(record_id, m.id) for record_id, m in expected.links}
    assert expected.stored == records_in(first) and expected.records == records_in(second)
    assert len({record_id for record_id, _ in links}) == len(links)
    assert len({stored_id for _, stored_id in links}) == len(links)
    assert links >= truth  # every edited copy finds its original
    # Of the people of the second source alone, those whose nearest has no closer record.
    alone = records_in(second) - len(truth)
    assert 0 < len(links - truth) < alone / 2
    got = api.link([first, second], store, rules=every)
    assert got.links == expected.links and got.records == expected.records


def test_the_links_threshold_is_read_where_their_similarities_dip(
    sqlite_url: str, tmp_path: Path
) -> None:
    """People with a counterpart link high, those without to their nearest, low: Otsu's split
    of the links' similarities parts them. Given a threshold, the links below it go, and 0
    keeps every mutual best match."""
    first, second, truth = two_sources(tmp_path)
    read = api.link([first, second], sqlite_url)
    assert {(i, m.id) for i, m in read.links} == truth
    assert read.how == f"auto: {LINKS_SPLIT}" and 0.3 < read.threshold < 0.7
    every = api.link([second], sqlite_url, rules={"threshold": 0}).links
    assert [(i, m) for i, m in every if m.similarity >= read.threshold] == read.links
    strong = api.link([second], sqlite_url, rules={"threshold": 0.7}).links
    assert strong == [(i, m) for i, m in every if m.similarity >= 0.7]
    assert 0 < len(strong) < len(read.links)


def test_links_that_do_not_dip_are_all_kept() -> None:
    """Most records with a counterpart: one hump of links, no threshold read from it."""
    rising = similarity_histogram(np.linspace(0.3, 1.0, 400) ** 0.5)
    assert choose_link_threshold(rising).threshold == 0.0
    humps = np.random.default_rng(1)
    two_kinds = np.r_[humps.normal(0.35, 0.06, 300), humps.normal(0.85, 0.06, 200)].clip(0, 1)
    read = choose_link_threshold(similarity_histogram(two_kinds))
    assert read.from_data and read.reason == LINKS_SPLIT and 0.5 < read.threshold < 0.7
    few = choose_link_threshold(similarity_histogram(np.array([0.15, 0.9, 0.95])))
    assert (few.threshold, few.from_data) == (0.0, False)
    assert few.reason == "3 links, too few to read a threshold from: every one kept"


def test_linking_to_an_empty_store_or_three_files_is_refused(
    sqlite_url: str, tmp_path: Path
) -> None:
    first, second, _ = two_sources(tmp_path)
    empty = f"sqlite:///{tmp_path / 'empty.db'}"
    api.index([first], empty)
    api.delete([r.id for r in RecordReader(first)], empty)
    with pytest.raises(NeardupError, match="holds no records to link to"):
        api.link([second], empty)
    with pytest.raises(NeardupError, match="link takes one file"):
        api.link([first, second, second], sqlite_url)


def test_two_sources_that_name_their_fields_apart(tmp_path: Path) -> None:
    """A shop's file and another's, with their own names for the id and the text: linked as
    the same records under one set of names are, and each file measured for the new store's
    bands by its own fields."""
    first, second, _ = two_sources(tmp_path)
    renamed = tmp_path / "renamed.tsv"
    header, *rows = second.read_text().splitlines()
    assert header.split("\t")[:2] == ["id", "name"]
    renamed.write_text("\n".join(["code\tfull_name\t" + header.split("\t", 2)[2], *rows]) + "\n")
    store = f"sqlite:///{tmp_path / 'same.db'}"
    expected = api.link([first, second], store, text_fields=["name", "street"])
    apart = f"sqlite:///{tmp_path / 'apart.db'}"
    printed = neardup(
        "link", str(first), str(renamed), "--store", apart, "--text-field", "name",
        "--text-field", "street", "--linked-id-field", "code", "--linked-text-field",
        "full_name", "--linked-text-field", "street", "--json",
    )  # fmt: skip
    assert printed.returncode == 0, printed.stderr
    links = [json.loads(line) for line in printed.stdout.splitlines()]
    assert [(link["id"], link["stored_id"]) for link in links] == [
        (record_id, match.id) for record_id, match in expected.links
    ]
    assert len(links) > 100
    assert api.stats(apart)["parameters"] == api.stats(store)["parameters"]
    one = neardup("link", str(renamed), "--store", apart, "--linked-id-field", "code")
    assert one.returncode == 2 and "the second of two files" in one.stderr


def test_two_files_are_not_linked_through_a_store_of_other_records(store, tmp_path: Path) -> None:
    """The first of two files was indexed into a store that held other records already (the
    default store of another run, yesterday's records), and the second linked to them too:
    its records linked to the other records, and the links depended on the store's past."""
    first, second, _ = two_sources(tmp_path)
    linked = api.link([first, second], store)
    assert api.link([first, second], store).links == linked.links  # the same run again
    other = tmp_path / "other.tsv"
    other.write_text("id\ttext\nx1\tsome other record\n")
    api.index([other], store)
    with pytest.raises(
        NeardupError, match=r"holds 1 record that .*first.tsv does not \(such as 'x1'\)"
    ):
        api.link([first, second], store)
    assert api.stats(store)["documents"] == records_in(first) + 1  # nothing indexed


def described_apart(folder: Path, things: int = 20) -> tuple[Path, Path]:
    """Two shops' listings of the same things, each a title of six words with a description of
    the shop's own: 40 words in the first, 30 in the second (words of random letters). A
    listing shares its title alone with its counterpart, and nothing with the rest."""
    rng = random.Random(5)

    def words(n: int) -> str:
        letters = "abcdefghijklmnopqrstuvwxyz"
        return " ".join("".join(rng.choices(letters, k=rng.randint(4, 8))) for _ in range(n))

    titles = [words(6) for _ in range(things)]
    first, second = folder / "long.tsv", folder / "short.tsv"
    first.write_text(
        "id\ttext\n" + "".join(f"a{n}\t{t} {words(40)}\n" for n, t in enumerate(titles))
    )
    second.write_text(
        "id\ttext\n" + "".join(f"b{n}\t{t} {words(30)}\n" for n, t in enumerate(titles))
    )
    return first, second


def test_two_files_described_apart_are_linked_by_their_signatures(tmp_path: Path) -> None:
    """A link wants each record's best match however unlike it is: the store a link of two
    files makes holds the signature too, whose OR-query finds a counterpart that shares a
    tenth of its shingles, where 4-row bands mostly do not. A store of such bands alone is
    linked by them, and the summary says what they miss."""
    first, second = described_apart(tmp_path)
    linked = f"sqlite:///{tmp_path / 'linked.db'}"
    found = api.link([first, second], linked, rules={"threshold": 0})
    assert {(i, m.id) for i, m in found.links} == {(f"b{n}", f"a{n}") for n in range(20)}
    assert max(m.similarity for _, m in found.links) < 0.2
    assert api.stats(linked)["parameters"]["fields"] == ["signature", "bands"]
    assert api.stats(linked)["parameters"]["bands"] == 64  # long texts, but no template
    assert found.bands_reach is None and "LSH bands" not in found.describe()
    assert api.rules_for(linked).method == "bands"  # lookups and reports query the bands
    banded = f"sqlite:///{tmp_path / 'banded.db'}"
    api.index([first], banded, params={"bands": 32})
    by_bands = api.link([second], banded, rules={"threshold": 0})
    assert len(by_bands.links) < 5
    assert by_bands.bands_reach == pytest.approx((1 - 0.5 ** (1 / 32)) ** (1 / 4))
    printed = neardup("link", str(second), "--store", banded)
    assert printed.returncode == (0 if by_bands.links else 1), printed.stderr  # 1: no links
    assert (
        "linked by the store's LSH bands, as it holds no signature tokens: a record whose "
        "counterpart shares less than 0.38 of their shingles (Jaccard) is mostly left "
        "unlinked; a store indexed with --fields bands,signature links by the signature"
    ) in printed.stderr
    preset = f"sqlite:///{tmp_path / 'preset.db'}"
    api.link([first, second], preset, preset="records")
    assert api.stats(preset)["parameters"]["fields"] == ["bands"]


def test_the_link_command_indexes_the_first_file_and_writes_the_links(tmp_path: Path) -> None:
    first, second, _ = two_sources(tmp_path)
    with second.open("a") as more:
        more.write("wordless\t...\t\t\t\t\nno-text\n")  # counted and named, not lost
    store = f"sqlite:///{tmp_path / 'links.db'}"
    out = tmp_path / "links.csv"
    result = neardup("link", str(first), str(second), "--store", store, "-o", str(out))
    assert result.returncode == 0, result.stderr
    lines = out.read_text().splitlines()
    assert lines[0] == "\ufeffid,stored_id,exact,edit_distance,similarity,shared_tokens,copies"
    assert len(lines) - 1 == len(api.link([second], store).links) > 0
    assert f"indexed {records_in(first)}" in result.stderr and f"written to {out}" in result.stderr
    assert "skipped 2 (1 no words after normalisation, 1 no text)" in result.stderr
    missing = neardup("link", str(first), "nope.tsv", "--store", f"sqlite:///{tmp_path / 'x.db'}")
    assert missing.returncode != 0 and len(missing.stderr.strip().splitlines()) == 1
    assert not (
        tmp_path / "x.db"
    ).exists()  # the second file is checked before the first is indexed


def test_a_link_reads_the_store_once_for_all_its_batches(
    sqlite_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing writes the store while a link runs: its batches join the contents the first one
    read, and give the links one batch gives."""
    first, second, _ = two_sources(tmp_path)
    whole = api.link([first, second], sqlite_url, rules={"threshold": 0})
    searcher = importlib.import_module("neardup.searcher")
    reads = []
    counted = searcher.read_contents
    monkeypatch.setattr(
        searcher, "read_contents", lambda *a, **k: reads.append(1) or counted(*a, **k)
    )
    monkeypatch.setattr(api, "LINK_BATCH", 40)
    batched = api.link([second], sqlite_url, rules={"threshold": 0})
    assert batched.links == whole.links and len(reads) == 1


@pytest.mark.parametrize(
    ("rules", "candidates"), [(None, api.LINK_CANDIDATES), ({"candidates": 7}, 7)]
)
def test_a_link_measures_twice_a_lookups_candidates_unless_told(
    sqlite_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    rules: dict | None,
    candidates: int,
) -> None:
    """A stored record's best match is known only among the records that found it, so a link
    asks for more candidates than a lookup's 10, or as many as it is told."""
    first, second, _ = two_sources(tmp_path)
    api.index([first], sqlite_url)
    searcher = importlib.import_module("neardup.searcher")
    asked = []
    looked_up = searcher.Searcher.lookup_batch

    def lookup_batch(self, *args, **kwargs):
        asked.append(self.rules.candidates)
        return looked_up(self, *args, **kwargs)

    monkeypatch.setattr(searcher.Searcher, "lookup_batch", lookup_batch)
    api.link([second], sqlite_url, rules=rules)
    assert asked and set(asked) == {candidates}
    assert api.rules_for(sqlite_url).candidates == api.MatchRules().candidates == 10
    if rules is None:
        assert f"(default: {api.LINK_CANDIDATES})" in neardup("link", "--help").stdout


def test_a_links_last_small_batch_joins_the_contents_its_first_read(
    sqlite_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A link reads the store's contents for its first batch and joins every later one with
    them: a last batch too small to be worth reading them for is not looked up a record at a
    time (the last 671 of 300,000 people took a sixth of their link), and the links are those
    of one batch. Each batch starts by giving back the memory the one before freed."""
    first, second, _ = two_sources(tmp_path)
    whole = api.link([first, second], sqlite_url)
    stored, records = records_in(first), records_in(second)
    searcher = importlib.import_module("neardup.searcher")
    # Two batches: all but one record, joined, then the last one, too few to join alone.
    monkeypatch.setattr(api, "LINK_BATCH", records - 1)
    monkeypatch.setattr(searcher, "LOOKUP_JOIN_RECORDS", -(-stored // (records - 1)))
    with api.opened(sqlite_url) as store:
        lone = searcher.Searcher(store, store.params, api.MatchRules())
        assert lone._joins(records - 1, stored) and not lone._joins(1, stored)
    looked_up = []
    lookup_many = searcher.Searcher.lookup_many

    def counted(self, fps):
        looked_up.append(len(fps))
        return lookup_many(self, fps)

    monkeypatch.setattr(searcher.Searcher, "lookup_many", counted)
    given_back: list[int] = []
    monkeypatch.setattr(api, "give_back_freed_memory", lambda: given_back.append(1))
    batched = api.link([second], sqlite_url)
    assert looked_up == [] and len(given_back) == 2
    assert batched.links == whole.links and batched.threshold == whole.threshold


def test_a_text_the_store_holds_twice_is_linked_once_with_its_copy_named(
    sqlite_url: str, tmp_path: Path
) -> None:
    stored, linked = tmp_path / "stored.tsv", tmp_path / "linked.tsv"
    stored.write_text(
        "id\ttext\ns2\tGolden Lotus Dim Sum 1209 Grant Ave San Francisco\n"
        "s1\tGolden Lotus Dim Sum 1209 Grant Ave San Francisco\n"
        "s3\tThai Orchid Kitchen 58 Elm Street Northampton\n"
    )
    linked.write_text(
        "id\ttext\nx\tGolden Lotus Dim Sum, 1209 Grant Avenue, San Francisco\n"
        "y\tGolden Lotus Dim Sum 1209 Grant Ave San Francisco\n"
    )
    links = api.link([stored, linked], sqlite_url, rules={"threshold": 0}).links
    assert [(i, m.id, m.exact, m.copies) for i, m in links] == [("y", "s1", True, ("s2",))]
