"""The CLI as a user runs it: its output and its exit code, in-process through ``main(argv)``,
and as a subprocess where the process itself matters."""

from __future__ import annotations

import csv
import gzip
import io
import json
import os
import re
import shlex
import shutil
import sqlite3
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from neardup import api
from neardup.api import last_report
from neardup.api import stats as api_stats
from neardup.errors import NeardupError
from neardup.evaluate import read_pairs
from neardup.generate import write_corpus
from neardup.output import whole_file
from neardup.readers import Record
from neardup.stores import open_store
from tests.corpora import SAMPLE, corpus
from tests.runner import assert_user_error, neardup, neardup_process

RECORDS = """\
1 Bella Napoli Trattoria 418 Harbor Street Portland ME 04101
2 Bella Napoli Trattoria 418 Harbor St. Portland, ME 04101
3 Golden Lotus Dim Sum 1209 Grant Ave San Francisco CA 94133
4 Golden Lotus Dim Sum Restaurant 1209 Grant Avenue San Francisco CA 94133
5 Thai Orchid Kitchen 58 Elm Street Northampton MA 01060
6 Bella Napoli Trattoria 418 Harbor Street Portland ME 04101
"""


@pytest.fixture
def records(tmp_path: Path) -> Path:
    path = tmp_path / "records.txt"
    path.write_text(RECORDS)
    return path


@pytest.fixture
def store_url(store_url_factory) -> str:
    """A new store of each kind in turn."""
    return store_url_factory()


@pytest.fixture
def indexed(records: Path, store_url: str) -> str:
    result = neardup("index", str(records), "--store", store_url)
    assert result.returncode == 0, result.stderr
    return store_url


def test_index_prints_a_summary_and_reindexing_keeps_the_count(
    records: Path, store_url: str
) -> None:
    result = neardup("index", str(records), "--store", store_url)
    assert result.returncode == 0
    assert "read 6, indexed 6, skipped none" in result.stderr
    assert "store holds 6" in result.stderr
    again = neardup("index", str(records), "--store", store_url)
    assert "store holds 6" in again.stderr


def test_store_defaults_to_environment_then_file_in_cwd(records: Path, tmp_path: Path) -> None:
    env_store = f"sqlite:///{tmp_path / 'env.db'}"
    assert neardup("index", str(records), env={"NEARDUP_STORE": env_store}).returncode == 0
    assert (tmp_path / "env.db").exists()
    work = tmp_path / "work"
    work.mkdir()
    environment = {k: v for k, v in os.environ.items() if k != "NEARDUP_STORE"}
    result = subprocess.run(
        [sys.executable, "-m", "neardup.cli", "index", str(records)],
        capture_output=True,
        text=True,
        env=environment,
        cwd=work,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert (work / "neardup.db").exists()


def test_the_console_script_and_its_exit_codes(records: Path, tmp_path: Path) -> None:
    script = shutil.which("neardup", path=str(Path(sys.executable).parent))
    assert script, "the neardup console script is installed beside this Python"
    version = subprocess.run([script, "--version"], capture_output=True, text=True, timeout=60)
    assert version.returncode == 0 and version.stdout.startswith("neardup ")
    url = f"sqlite:///{tmp_path / 'x.db'}"
    assert neardup_process("index", str(records), "--store", url).returncode == 0
    assert_user_error(neardup_process("lookup", "--store", url, "--id", "nope"), "no record")
    usage = neardup_process("lookup", "--store", url)  # argparse: a usage error is exit 2
    assert (
        usage.returncode == 2
        and "one of the arguments ID --id --text --file is required" in usage.stderr
    )


def test_a_reader_that_goes_away_is_not_an_error(records: Path, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'x.db'}"
    assert neardup_process("index", str(records), "--store", url).returncode == 0
    report = subprocess.Popen(
        [sys.executable, "-m", "neardup.cli", "report", "--store", url],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert report.stdout.readline().startswith("left_id")
    report.stdout.close()  # as `neardup report | head -1` does
    assert report.wait(timeout=60) in (0, 141)
    assert "Traceback" not in report.stderr.read()


def test_lookup_table_and_json(indexed: str) -> None:
    table = neardup("lookup", "--store", indexed, "--id", "1")
    assert table.returncode == 0
    lines = table.stdout.splitlines()
    assert lines[0].split()[:5] == ["id", "match", "edit", "similarity", "shared"]
    assert [line.split()[:2] for line in lines[1:]] == [["6", "exact"], ["2", "near"]]
    data = json.loads(
        neardup(
            "lookup",
            "--store",
            indexed,
            "--text",
            "golden lotus dim sum 1209 grant ave san francisco ca 94133",
            "--json",
        ).stdout
    )
    assert [(m["id"], m["exact"]) for m in data] == [("3", True), ("4", False)]
    assert set(data[0]) >= {"id", "content", "edit_distance", "similarity", "shared_tokens"}


def test_lookup_exits_as_grep_does(indexed: str) -> None:
    # 0: found, 1: nothing found, 2: an error; a script can branch on it.
    result = neardup("lookup", "--store", indexed, "--text", "completely unrelated words")
    assert result.returncode == 1
    assert result.stdout.strip() == "no duplicates found"
    assert neardup("lookup", "--store", indexed, "--id", "1").returncode == 0
    assert neardup("lookup", "--store", indexed, "--id", "nope").returncode == 2


def test_lookup_reads_its_text_from_stdin_and_index_prints_json(
    records: Path, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'x.db'}"
    summary = json.loads(neardup_process("index", str(records), "--store", url, "--json").stdout)
    assert (summary["read"], summary["indexed"], summary["documents"]) == (6, 6, 6)
    text = "Golden Lotus Dim Sum 1209 Grant Ave San Francisco CA 94133\n"
    found = neardup_process("lookup", "--store", url, "--text", "-", "--json", stdin=text)
    assert found.returncode == 0
    assert [m["id"] for m in json.loads(found.stdout)] == ["3", "4"]


def test_a_threshold_no_valley_showed_comes_with_how_judged_pairs_place_it(tmp_path: Path) -> None:
    """People with no copies show no valley: the report and tune --store say so and name the
    commands that place the threshold from pairs a person judges; people with copies show one,
    and they do not."""
    for name, duplicates, unsure in (("alone", "0", True), ("copies", "0.1", False)):
        corpus = tmp_path / f"{name}.tsv"
        made = neardup("generate", "2000", "--kind", "people", "--duplicates", duplicates,
                       "--seed", "2", "-o", str(corpus))  # fmt: skip
        assert made.returncode == 0, made.stderr
        url = f"sqlite:///{tmp_path / name}.db"
        assert neardup("index", str(corpus), "--store", url).returncode == 0
        page = tmp_path / f"{name}.html"
        result = neardup("report", "--store", url, "-o", str(tmp_path / f"{name}-pairs.tsv"),
                         "--html", str(page))  # fmt: skip
        assert result.returncode == 0, result.stderr
        assert ("(auto: no valley;" in result.stderr) == unsure
        hint = "tune --label-sample 100 -o judge.csv draws pairs to judge, and tune --labels"
        assert (hint in result.stderr) == unsure
        assert ('<p id="unsure">No valley parts' in page.read_text()) == unsure
        assert (hint in neardup("tune", "--store", url).stdout) == unsure
        tuned = json.loads(neardup("tune", "--store", url, "--json").stdout)
        assert (hint in (tuned["unsure"] or "")) == unsure and (tuned["unsure"] is None) != unsure
    # A store that keeps a threshold of its own reads none: nothing to place.
    kept = f"sqlite:///{tmp_path / 'kept.db'}"
    indexed = neardup("index", str(tmp_path / "alone.tsv"), "--store", kept, "--threshold", "0.5")
    assert indexed.returncode == 0, indexed.stderr
    tuned = json.loads(neardup("tune", "--store", kept, "--json").stdout)
    assert "(auto: no valley;" in neardup("tune", "--store", kept).stdout
    assert tuned["kept_threshold"] == 0.5 and tuned["unsure"] is None
    assert hint not in neardup("tune", "--store", kept).stdout


def test_report_formats(indexed: str, tmp_path: Path) -> None:
    out = tmp_path / "pairs.tsv"
    result = neardup("report", "--store", indexed, "-o", str(out))
    assert result.returncode == 0
    assert "4 pairs written to" in result.stderr
    spent = result.stderr.splitlines()[-1]  # where the time went, phase by phase
    assert re.fullmatch(
        r"time: [\d.]+ s \(reading [\d.]+ s, joining [\d.]+ s, measuring [\d.]+ s, "
        r"verifying [\d.]+ s\)",
        spent,
    )
    assert sorted(last_report(indexed).seconds) == ["joining", "measuring", "reading", "verifying"]
    rows = list(csv.DictReader(out.open(), delimiter="\t"))
    assert list(rows[0])[:4] == ["left_id", "right_id", "edit_distance", "similarity"]
    assert [(r["left_id"], r["right_id"]) for r in rows] == [
        ("1", "2"),
        ("1", "6"),
        ("2", "6"),
        ("3", "4"),
    ]
    as_csv = neardup("report", "--store", indexed, "--format", "csv").stdout
    # CSV is for spreadsheets: its byte order mark is how Excel knows the file is UTF-8.
    assert as_csv.startswith("\ufeffleft_id,")
    assert list(csv.DictReader(io.StringIO(as_csv.removeprefix("\ufeff")))) == rows
    as_jsonl = [
        json.loads(line)
        for line in neardup("report", "--store", indexed, "--format", "jsonl").stdout.splitlines()
    ]
    assert [(r["left_id"], r["right_id"]) for r in as_jsonl] == [
        ("1", "2"),
        ("1", "6"),
        ("2", "6"),
        ("3", "4"),
    ]


def test_a_report_is_written_in_the_format_its_file_is_named_for(
    indexed: str, tmp_path: Path
) -> None:
    """pairs.csv opens in a spreadsheet by commas: tabs would put each row in one cell."""
    tabbed = neardup("report", "--store", indexed).stdout
    expected = list(csv.DictReader(io.StringIO(tabbed), delimiter="\t"))
    for name, read in [
        ("pairs.csv", lambda text: list(csv.DictReader(io.StringIO(text)))),
        ("PAIRS.CSV", lambda text: list(csv.DictReader(io.StringIO(text)))),
        ("pairs.jsonl", lambda text: [json.loads(line) for line in text.splitlines()]),
        ("pairs.txt", lambda text: list(csv.DictReader(io.StringIO(text), delimiter="\t"))),
    ]:
        assert neardup("report", "--store", indexed, "-o", str(tmp_path / name)).returncode == 0
        rows = read((tmp_path / name).read_text(encoding="utf-8-sig"))
        assert [(r["left_id"], r["right_id"]) for r in rows] == [
            (r["left_id"], r["right_id"]) for r in expected
        ], name
    # --format says otherwise: it wins.
    neardup("report", "--store", indexed, "-o", str(tmp_path / "asked.csv"), "--format", "tsv")
    assert (tmp_path / "asked.csv").read_text() == tabbed


def test_report_clusters(indexed: str) -> None:
    result = neardup("report", "--store", indexed, "--clusters", "--format", "jsonl")
    groups = [json.loads(line) for line in result.stdout.splitlines()]
    assert groups == [
        {"group": 1, "size": 3, "kept": "1", "ids": ["1", "2", "6"], "review": 0},
        {"group": 2, "size": 2, "kept": "3", "ids": ["3", "4"], "review": 0},
    ]
    assert "2 groups from 4 pairs" in result.stderr
    centered = neardup("report", "--store", indexed, "--clusters", "--grouping", "center")
    rows = [line.split("\t") for line in centered.stdout.splitlines()[1:]]
    assert rows == [
        ["1", "3", "1", "1", "0"],
        ["1", "3", "2", "0", "0"],
        ["1", "3", "6", "0", "0"],
        ["2", "2", "3", "1", "0"],
        ["2", "2", "4", "0", "0"],
    ]


def test_report_with_the_records_own_texts(indexed: str, records: Path) -> None:
    own = dict(line.split(" ", 1) for line in RECORDS.splitlines())
    pairs = neardup("report", "--store", indexed, "--texts-from", str(records), "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(pairs.stdout.removeprefix("\ufeff"))))
    assert rows and all(
        (r["left_text"], r["right_text"]) == (own[r["left_id"]], own[r["right_id"]]) for r in rows
    )
    assert "Harbor St. Portland, ME" in pairs.stdout  # as the file has it, not normalised
    groups = neardup("report", "--store", indexed, "--clusters", "--texts-from", str(records))
    rows = [line.split("\t") for line in groups.stdout.splitlines()]
    assert rows[0] == ["group", "size", "id", "kept", "review", "text"]
    assert all(text == own[record_id] for _, _, record_id, _, _, text in rows[1:])


@pytest.mark.parametrize("given", ["--store", "NEARDUP_STORE"])
def test_report_refuses_the_texts_of_another_file(indexed: str, tmp_path: Path, given: str) -> None:
    """Another file's texts under the same ids would show, beside each pair, records the
    report never compared: refused in one line, nothing written. The store named by
    $NEARDUP_STORE was not asked, and such texts were shown."""
    first, rest = RECORDS.split("\n", 1)
    other = tmp_path / "other.txt"
    other.write_text(f"{first.split(' ', 1)[0]} Golden Lotus Dim Sum 1209 Grant Ave\n{rest}")
    page = tmp_path / "pairs.html"
    store = ["--store", indexed] if given == "--store" else []
    env = {"NEARDUP_STORE": indexed} if given == "NEARDUP_STORE" else None
    texts = ["--texts-from", str(other), "--html", str(page)]
    refused = neardup("report", *store, *texts, env=env)
    assert_user_error(refused, "other.txt, line 1: the store holds another text under the id '1'")
    assert not page.exists()


def test_report_rules(indexed: str) -> None:
    result = neardup("report", "--store", indexed, "--max-edit-distance", "0")
    assert [line.split("\t")[:2] for line in result.stdout.splitlines()[1:]] == [["1", "6"]]


def test_stats_json(indexed: str) -> None:
    data = json.loads(neardup("stats", "--store", indexed, "--json").stdout)
    assert data["documents"] == 6
    assert data["parameters"]["num_hashes"] == 128


def test_export_writes_the_records_index_reads_back(indexed: str, tmp_path: Path) -> None:
    api.add([Record("7", "=HYPERLINK(1) Bella Napoli")], indexed)
    lines = neardup("export", "--store", indexed).stdout.splitlines()
    assert [json.loads(line)["id"] for line in lines] == ["1", "2", "3", "4", "5", "6", "7"]
    assert json.loads(lines[1]) == {
        "id": "2",
        "content": "bella napoli trattoria 418 harbor st portland me 04101",
    }
    assert json.loads(lines[-1])["content"].startswith("=hyperlink")  # JSON: as it is
    result = neardup("export", "--store", indexed, "-o", str(tmp_path / "records.csv"))
    assert result.stderr == f"7 records written to {tmp_path / 'records.csv'}\n"
    rows = list(csv.reader((tmp_path / "records.csv").open(encoding="utf-8-sig")))
    assert rows[0] == ["id", "content"] and rows[-1][1].startswith("'=hyperlink")
    assert_user_error(neardup("export", "--store", f"sqlite:///{tmp_path / 'none.db'}"), "no store")


PHONE = r"\(?\d{3}\)?[ .-]?\d{3}[ .-]\d{4}"


def test_demo_prints_groups_a_lookup_and_the_commands_it_stands_for(tmp_path: Path) -> None:
    result = neardup("demo", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "near-duplicate pairs in" in result.stdout
    assert "Mama Rosa's Pizzeria" in result.stdout  # the sample's own text
    assert "left_id\tright_id" in result.stdout
    assert "Duplicates of record 41" in result.stdout
    assert (tmp_path / "neardup-demo.db").exists()
    lines = result.stdout.splitlines()
    commands = [line.strip() for line in lines if line.startswith("  neardup ")]
    assert len(commands) == 6
    assert lines[-1].endswith(str(tmp_path / "neardup-demo.html"))
    assert 'id="count-pairs"' in (tmp_path / "neardup-demo.html").read_text(encoding="utf-8")
    # The sample's phone numbers tell its restaurants apart: every pair shown is one restaurant.
    phones = {
        line.split()[0]: "".join(re.findall(r"\d", re.findall(PHONE, line)[-1]))
        for line in SAMPLE.read_text().splitlines()
    }
    pairs = re.findall(r"^(\w+)\t(\w+)\t\d+\t[\d.]+\t\d+\t(?:near|exact)$", result.stdout, re.M)
    assert len(pairs) > 20
    assert [(a, b) for a, b in pairs if phones[a] != phones[b]] == []
    for command in commands:  # each works on the store the demo kept
        ran = neardup(*shlex.split(command)[1:], cwd=tmp_path)
        assert ran.returncode == 0, (command, ran.stderr)
    assert "exact" in neardup(*shlex.split(commands[2])[1:], cwd=tmp_path).stdout
    again = neardup("demo", cwd=tmp_path)  # the same answer again (line 1 has timings)
    assert again.returncode == 0 and again.stdout.splitlines()[1:] == lines[1:]


def test_demo_leaves_a_store_of_other_records_alone(tmp_path: Path) -> None:
    """`demo --store mine.db` added its 70 records to the user's store and ended in a
    KeyError traceback, its groups holding the user's records."""
    records = corpus(tmp_path / "records.txt")
    assert neardup("index", str(records), "--store", "mine.db", cwd=tmp_path).returncode == 0
    held = api_stats(f"sqlite:///{tmp_path / 'mine.db'}")["documents"]
    refused = neardup("demo", "--store", "mine.db", cwd=tmp_path)
    other = held - len(SAMPLE.read_text().splitlines())  # the corpus holds the sample's too
    assert_user_error(refused, f"holds {other} records that are not the demo's (such as 'g0000')")
    assert api_stats(f"sqlite:///{tmp_path / 'mine.db'}")["documents"] == held
    for _ in range(2):  # a store of its own, run again: the same sample
        assert neardup("demo", "--store", "own.db", cwd=tmp_path).returncode == 0


def test_dash_as_the_output_is_standard_output(records: Path, tmp_path: Path) -> None:
    """`-o -` wrote a file named "-" (and the next command's `-o -` replaced it), where `-`
    as an input is standard input."""
    store = ["--store", "s.db"]
    assert neardup("index", str(records), *store, cwd=tmp_path).returncode == 0
    to_file = neardup("report", *store, "--threshold", "0.5", "-o", "pairs.tsv", cwd=tmp_path)
    dashed = neardup("report", *store, "--threshold", "0.5", "-o", "-", cwd=tmp_path)
    assert to_file.returncode == dashed.returncode == 0
    assert dashed.stdout == (tmp_path / "pairs.tsv").read_text() != ""
    kept = neardup("dedup", str(records), *store, "-o", "-", cwd=tmp_path)
    assert kept.returncode == 0 and kept.stdout.startswith("1 ")
    assert not (tmp_path / "-").exists()
    refused = neardup("generate", "5", "-o", "-", cwd=tmp_path)
    assert_user_error(refused, "generate writes a file, in the format its name says")


def test_a_database_of_another_application_is_left_as_it_is(records: Path, tmp_path: Path) -> None:
    """`--store app.db` for `--store dups.db`: neardup's tables were added to the
    application's database, and its write-ahead log turned on, a lookup's too."""
    app = tmp_path / "app.db"
    database = sqlite3.connect(app)
    database.execute("CREATE TABLE users (id INTEGER, name TEXT)")
    database.commit()
    database.close()
    before = app.read_bytes()
    said = "app.db is a SQLite database that is no neardup store (its tables: users)"
    for command in (["index", str(records)], ["lookup", "--id", "1"], ["report"]):
        assert_user_error(neardup(*command, "--store", str(app)), said)
    assert app.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["app.db", "records.txt"]


def test_a_bare_path_names_an_embedded_store(records: Path, tmp_path: Path) -> None:
    assert neardup("index", str(records), "--store", "plain.db", cwd=tmp_path).returncode == 0
    stats = json.loads(neardup("stats", "--store", "plain.db", "--json", cwd=tmp_path).stdout)
    same = json.loads(
        neardup("stats", "--json", "--store", f"sqlite:///{tmp_path / 'plain.db'}").stdout
    )
    assert stats["documents"] == same["documents"] == len(RECORDS.splitlines())
    assert stats["parameters"]["fields"] == ["bands"]
    printed = neardup("stats", "--store", "plain.db", cwd=tmp_path).stdout
    assert "'fields': ['bands']" in printed  # plain names, not the enum's


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["index", "missing.txt"], "cannot read missing.txt"),
        (["index", "records.txt", "--store", "mysql://x/y"], "unknown store URL"),
        # An engine's address as a browser shows it: the store URL it stands for.
        (
            ["stats", "--store", "http://127.0.0.1:8983/solr/people/"],
            "did you mean solr://127.0.0.1:8983/solr/people?",
        ),
        (
            ["stats", "--store", "https://localhost:9200/people"],
            "did you mean elasticsearch+https://localhost:9200/people?",
        ),
        (["index", "records.txt", "--store", "sqlite://relative.db"], "sqlite:///path"),
        # Without its slashes a scheme made a file named "sqlite:dups.db" beside the records.
        (["index", "records.txt", "--store", "sqlite:dups.db"], "did you mean sqlite:///dups.db?"),
        (["stats", "--store", "solr:127.0.0.1:1/solr/x"], "did you mean solr://127.0.0.1:1"),
        (["index", "records.txt", "--store", "solr://127.0.0.1:1/solr/x"], "solr"),
        (["index", "records.txt", "--shingle", "words:3"], "word:N or char:N"),
        (["index", "records.txt", "--num-hashes", "100", "--bands", "7"], "bands must divide"),
        (["index", "data.csv", "--text-field", "body"], "no field 'body'"),
        (["index", "data.csv", "--text-field", "Title"], "(fields: 'id', 'title'): did you mean"),
        (  # several fields in one flag, as some tools take them
            ["index", "data.csv", "--text-field", "id,title"],
            "(fields: 'id', 'title'): give each once, --text-field id --text-field title",
        ),
        (["index", "data.unknown"], "--format"),
        (["lookup", "--id", "1", "--store", "sqlite:///nothing-here.db"], "no store at"),
        (["report", "--store", "sqlite:///nothing-here.db"], "no store at"),
        (  # a user with one file runs dedup first: the command that makes the store
            ["dedup", "data.csv", "--store", "new.db", "-o", "kept.csv"],
            "no store at new.db: dedup writes a file back by the groups of the store it was "
            "indexed into: neardup index data.csv --store new.db first",
        ),
        (["index", "records.txt", "--store", "sqlite:///no/such/dir/x.db"], "cannot open"),
        (["index", "records.txt", "--store", "sqlite:///records.txt"], "cannot open"),
        (["index", "records.txt", "--fields", "bands,words"], "not words"),
    ],
)
def test_user_errors_are_one_line(
    args: list[str], message: str, records: Path, tmp_path: Path
) -> None:
    (tmp_path / "data.csv").write_text("id,title\n1,x\n")
    (tmp_path / "data.unknown").write_text("x")
    assert_user_error(neardup(*args, cwd=tmp_path), message)


def test_a_lookup_takes_the_id_as_its_argument(records: Path, sqlite_url: str) -> None:
    """As explain does: `lookup 1` said "one of the arguments --id --text --file is
    required", naming the flags and not the id given. A file given so is named too."""
    assert neardup("index", str(records), "--store", sqlite_url).returncode == 0
    flag = neardup("lookup", "--id", "1", "--store", sqlite_url)
    assert neardup("lookup", "1", "--store", sqlite_url).stdout == flag.stdout != ""
    both = neardup("lookup", "1", "--id", "2", "--store", sqlite_url)
    assert both.returncode == 2 and both.stdout == ""
    assert "argument --id: not allowed with argument ID" in both.stderr
    assert_user_error(
        neardup("lookup", str(records), "--store", sqlite_url),
        f"no record with id '{records}' in {sqlite_url}; a file's records are looked up with "
        f"--file {records}",
    )


@pytest.mark.parametrize("given", [["--id", "1", "--id", "2"], ["--text", "a b", "--text", "c"]])
def test_a_lookup_of_two_records_is_refused(given: list[str], indexed: str) -> None:
    """`lookup --id 1 --id 2` looked up 2 alone: the first was dropped without a word."""
    result = neardup("lookup", "--store", indexed, *given)
    assert result.returncode == 2 and result.stdout == ""
    assert "given twice: a lookup is of one record; --file looks up" in result.stderr


def test_unknown_id_and_parameter_mismatch(indexed: str, records: Path) -> None:
    assert_user_error(
        neardup("lookup", "--store", indexed, "--id", "nope"), "no record with id 'nope'"
    )
    result = neardup("index", str(records), "--store", indexed, "--shingle", "word:3")
    assert_user_error(result, "char:4")
    assert "word:3" in result.stderr


def test_a_failing_file_writes_nothing(records: Path, tmp_path: Path, sqlite_url: str) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("id,title\n1,x\n")
    result = neardup("index", str(records), str(bad), "--text-field", "body", "--store", sqlite_url)
    assert result.returncode != 0
    assert not (tmp_path / "store.db").exists()


def test_an_index_run_that_stored_none_of_its_records_fails(tmp_path: Path) -> None:
    """Every record skipped (JSON objects run together on one line, texts all empty) exited 0
    with nothing stored, and a script's next step failed on a store that was never made."""
    (tmp_path / "joined.jsonl").write_text('{"id": 1, "text": "a b"}{"id": 2, "text": "c"}\n')
    (tmp_path / "blank.csv").write_text("id,text\n1,\n2,\n")
    store = f"sqlite:///{tmp_path / 's.db'}"
    for name, why, none in (
        ("joined.jsonl", "1 invalid JSON", "the one record read could not"),
        ("blank.csv", "2 no text", "none of the 2 records read could"),
    ):
        result = neardup("index", str(tmp_path / name), "--store", store)
        assert result.returncode == 2 and f"indexed 0, skipped {why[0]} ({why})" in result.stderr
        assert result.stderr.splitlines()[-1].startswith(f"neardup: error: {none} be indexed")
    (tmp_path / "some.csv").write_text("id,text\n1,\n2,some words\n")
    assert neardup("index", str(tmp_path / "some.csv"), "--store", store).returncode == 0
    assert neardup("index", str(tmp_path / "blank.csv"), "--store", store).returncode == 2


def test_a_checked_run_whose_records_are_all_stored_already_succeeds(tmp_path: Path) -> None:
    """A nightly `index new.csv --skip-duplicates` whose records were all stored already
    exited 2, "none of the records read could be indexed: read the files with their
    --format…": what the check skips is what it was asked to, as is a repeated id skipped."""
    records = corpus(tmp_path / "records.txt")
    store = ["--store", f"sqlite:///{tmp_path / 's.db'}"]
    assert neardup("index", str(records), *store).returncode == 0
    again = neardup("index", str(records), *store, "--skip-duplicates")
    assert again.returncode == 0, again.stderr
    assert "indexed 0," in again.stderr and "stored already with the same text" in again.stderr
    stored = next(line for line in records.read_text().splitlines() if line.startswith("g0001"))
    (tmp_path / "repeat.txt").write_text(f"{stored}\n{stored} again\n")
    repeated = neardup("index", str(tmp_path / "repeat.txt"), *store, "--skip-duplicates",
                       "--on-duplicate-id", "skip")  # fmt: skip
    assert repeated.returncode == 0, repeated.stderr
    assert "skipped 2 (1 repeated id, 1 stored already" in repeated.stderr


def test_delete_takes_whole_lines_of_a_file_as_ids(tmp_path: Path) -> None:
    """An id may hold spaces: split at them, "New York 1" deleted the record "1"."""
    (tmp_path / "shops.tsv").write_text(
        "id\ttext\n1\tArt's Deli Ventura Blvd\nNew York 1\tGolden Lotus Grant Ave\n"
        "2\tThai Orchid Elm Street\n"
    )
    url = f"sqlite:///{tmp_path / 'shops.db'}"
    assert neardup("index", str(tmp_path / "shops.tsv"), "--store", url).returncode == 0
    (tmp_path / "gone.txt").write_text("\ufeffNew York 1\r\n\n")  # as Notepad saves it
    deleted = neardup("delete", "--file", str(tmp_path / "gone.txt"), "--store", url)
    assert deleted.returncode == 0, deleted.stderr
    assert "deleted 1 of 1 id" in deleted.stderr
    with api.opened(url) as store:
        assert sorted(store.iter_ids()) == ["1", "2"]
    # Ids the store does not hold are named: 'deleted 1 of 3 ids' named none of them.
    slips = neardup("delete", "2", "New York 1", "3", "--store", url)
    assert slips.returncode == 0
    assert slips.stderr.strip() == "deleted 1 of 3 ids; not in the store: 'New York 1', '3'"
    assert api.Deleted(1500, []).describe() == "deleted 1,500 of 1,500 ids"  # was '1500 of'
    missing = neardup("delete", "--file", str(tmp_path / "none.txt"), "--store", url)
    assert_user_error(missing, "cannot read")


@pytest.mark.parametrize(
    ("ids", "message"),
    [
        # A report's pairs given for ids: 'deleted 0 of 210 ids', exit 0.
        ("left_id\tright_id\tsimilarity\n1\t2\t0.9\n", "holds columns (its first line: "),
        # Bytes that are not UTF-8: a traceback, with ids half deleted or none.
        (b"1\n\xff\xfe2\n", "ids.txt, line 2: bytes that are not utf-8"),
    ],
)
def test_a_file_of_ids_that_holds_none_is_one_error(
    tmp_path: Path, ids: str | bytes, message: str
) -> None:
    (tmp_path / "shops.tsv").write_text("id\ttext\n1\tArt's Deli\n2\tThai Orchid\n")
    url = f"sqlite:///{tmp_path / 'shops.db'}"
    assert neardup("index", str(tmp_path / "shops.tsv"), "--store", url).returncode == 0
    written = ids.encode() if isinstance(ids, str) else ids
    (tmp_path / "ids.txt").write_bytes(written)
    assert_user_error(neardup("delete", "--file", "ids.txt", "--store", url, cwd=tmp_path), message)
    assert api.stats(url)["documents"] == 2
    (tmp_path / "ids.txt.gz").write_bytes(gzip.compress(b"2\n"))  # compressed, as every file
    assert neardup("delete", "--file", "ids.txt.gz", "--store", url, cwd=tmp_path).returncode == 0
    assert api.stats(url)["documents"] == 1


def test_schema_apply(store_url: str) -> None:
    result = neardup("schema", "apply", "--store", store_url)
    assert result.returncode == 0, result.stderr
    assert "schema applied to" in result.stderr
    data = json.loads(neardup("stats", "--store", store_url, "--json").stdout)
    assert data["documents"] == 0


def test_hostile_ids_and_text(tmp_path: Path, store_url: str) -> None:
    path = tmp_path / "hostile.jsonl"
    rows = [
        {"id": 'a:b (c) "d"', "text": 'AND OR NOT: (x) "y" \\ * ? [ ] { } ~ ^'},
        {"id": "*", "text": 'AND OR NOT: (x) "y" \\ * ? [ ] { } ~ ^ z'},
    ]
    at_limit, over = "é" * 256, "x" * 513  # 512 and 513 UTF-8 bytes
    rows += [
        {"id": "tab\there", "text": "tab and newline ids\tin a\nrecord"},
        {"id": "new\nline", "text": "tab and newline ids in a record"},
        {"id": at_limit, "text": "the longest id a store holds"},
        {"id": over, "text": "an id too long for some stores"},
        {"id": "y" * 40_000, "text": "an id far too long"},
        {"id": "half\ud800", "text": "an id that is not Unicode (JSON escapes it)"},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = neardup("index", str(path), "--store", store_url)
    assert result.returncode == 0, result.stderr
    assert "skipped 3 (2 id longer than 512 bytes, 1 half of a surrogate pair); first: line 6" in (
        result.stderr
    )
    assert "hostile.jsonl: half of a surrogate pair)" in result.stderr
    assert "store holds 5" in result.stderr
    result = neardup("lookup", "--store", store_url, "--id", 'a:b (c) "d"', "--json")
    assert result.returncode == 0, result.stderr
    assert [m["id"] for m in json.loads(result.stdout)] == ["*"]
    found = json.loads(
        neardup("lookup", "--store", store_url, "--id", "new\nline", "--json").stdout
    )
    assert [m["id"] for m in found] == ["tab\there"]
    alone = neardup("lookup", "--store", store_url, "--id", at_limit)  # held, with no duplicate
    assert (alone.returncode, alone.stdout.strip()) == (1, "no duplicates found")
    assert_user_error(neardup("lookup", "--store", store_url, "--id", over), "no record with id")
    pairs = tmp_path / "pairs.tsv"
    assert neardup("report", "--store", store_url, "-o", str(pairs)).returncode == 0
    assert set(read_pairs(pairs)) >= {("*", 'a:b (c) "d"'), ("new\nline", "tab\there")}


def test_a_bands_only_store_names_the_fix_for_other_methods(records: Path, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'bands.db'}"
    assert neardup("index", str(records), "--store", url, "--fields", "bands").returncode == 0
    assert json.loads(neardup("stats", "--store", url, "--json").stdout)["parameters"][
        "fields"
    ] == ["bands"]
    for method in ((), ("--method", "bands")):
        found = neardup("lookup", "--store", url, "--id", "1", *method, "--json")
        assert [m["id"] for m in json.loads(found.stdout)] == ["6", "2"]
    assert_user_error(
        neardup("lookup", "--store", url, "--id", "1", "--method", "signature"),
        "look up with --method bands, or index a new store with --fields signature",
    )


def test_an_engine_without_its_client_is_a_one_line_error(monkeypatch: pytest.MonkeyPatch) -> None:
    # The client is a dependency; a broken install that lost it still gets one line.
    monkeypatch.delitem(sys.modules, "neardup.stores.elasticsearch", raising=False)
    monkeypatch.setitem(sys.modules, "elastic_transport", None)
    message = "need elastic_transport, which is not installed: pip install neardup again"
    with pytest.raises(NeardupError, match=message):
        open_store("elasticsearch://127.0.0.1:1/x")


def test_an_interrupted_report_leaves_the_old_file_whole(
    records: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path / 'x.db'}"
    assert neardup("index", str(records), "--store", url).returncode == 0
    out = tmp_path / "pairs.tsv"
    out.write_text("the old report\n")

    def interrupted(pairs, file, format="tsv", texts=None, threshold=None):
        file.write("left_id\tright_id\n1\t2\n")
        raise KeyboardInterrupt

    monkeypatch.setattr("neardup.output.write_pairs", interrupted)
    result = neardup("report", "--store", url, "-o", str(out))
    assert result.returncode == 130
    assert result.stderr.strip().splitlines() == [
        "neardup: interrupted; run the same command again to complete it"
    ]
    assert out.read_text() == "the old report\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pairs.tsv", "records.txt", "x.db"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["lookup", "--id", "1", "--candidates", "0"],
            "candidates must be between 1 and 10000, not 0",
        ),
        (["lookup", "--id", "1", "--candidates", "100000000"], "between 1 and 10000"),
        (["report", "--threshold", "1.5"], "threshold must be between 0 and 1, not 1.5"),
        (["report", "--threshold", "-0.1"], "threshold must be between 0 and 1"),
        (["report", "--threshold", "nan"], "threshold must be between 0 and 1, not nan"),
        (["report", "--max-edit-distance", "-1"], "max edit distance must be 0 or more"),
        (["tune", "--threshold", "nan"], "between 0 and 1, not nan"),
        (["tune", "--threshold", "0.5", "--num-hashes", "0"], "between 1 and 1024, not 0"),
        (["tune", "--threshold", "0.5", "--num-hashes", "-3"], "between 1 and 1024, not -3"),
        (["tune", "--threshold", "0.5", "--num-hashes", "100000"], "between 1 and 1024"),
        (["generate", "-5", "-o", "g.tsv"], "a corpus needs at least one record, not -5"),
        (["generate", "5", "-o", "g.tsv", "--words", "0"], "a document needs at least one word"),
        (["generate", "5", "-o", "g.tsv", "--seed", "-3"], "seed must be 0 or more, not -3"),
        (["generate", "5", "-o", "g.tsv", "--duplicates", "2"], "between 0 and 1, not 2.0"),
    ],
)
def test_rules_at_the_edges_are_one_line_errors(
    args: list[str], message: str, indexed: str, tmp_path: Path
) -> None:
    store = ["--store", indexed] if args[0] in ("lookup", "report") else []
    assert_user_error(neardup(*args, *store, cwd=tmp_path), message)


@pytest.mark.parametrize("command", [["report"], ["dedup", "r.txt"], ["eval", "--truth", "t"]])
def test_candidates_is_a_lookups_flag_not_a_reports(command: list[str], indexed: str) -> None:
    """`report --candidates 1` was taken and did nothing: a report lists every pair at or
    above its threshold, however many a record has."""
    result = neardup(*command, "--store", indexed, "--candidates", "1")
    assert result.returncode == 2 and "unrecognized arguments: --candidates 1" in result.stderr
    assert "--candidates" not in neardup(command[0], "--help").stdout
    for looking_up in (["lookup", "--id", "1"], ["explain", "1", "2"]):
        assert neardup(*looking_up, "--store", indexed, "--candidates", "1").returncode in (0, 1)


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--num-hashes", "0"], "number of hashes must be between 1 and 1024, not 0"),
        (["--num-hashes", "100000"], "between 1 and 1024, not 100000"),
        (["--num-hashes", "100", "--bands", "7"], "7 bands do not divide 100 hashes"),
        (["--bands", "0"], "bands must be at least 1, not 0"),
        (["--bands", "30"], "30 bands do not divide 128 hashes"),  # found on opening the store
        (["--shingle", "char:0"], "word:N or char:N, not 'char:0'"),
        (["--shingle", "char:65"], "shingle size must be between 1 and 64"),
        (["--threshold", "nan"], "between 0 and 1, not nan"),
        (["--threshold", "2"], "between 0 and 1, not 2.0"),
        (["--batch-size", "0"], "the batch size must be at least 1"),
        (["--seed", "-1"], "seed must be between 0 and 2**32-1"),
        (["--fields", ""], "indexed fields must be some of"),
    ],
)
def test_index_settings_at_the_edges_are_refused_before_any_store_exists(
    flags: list[str], message: str, records: Path, tmp_path: Path
) -> None:
    result = neardup("index", str(records), "--store", "sqlite:///new.db", *flags, cwd=tmp_path)
    assert_user_error(result, message)
    assert not (tmp_path / "new.db").exists()


def test_one_hash_is_a_working_edge(records: Path, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'one.db'}"
    assert neardup("index", str(records), "--store", url, "--num-hashes", "1").returncode == 0
    assert api_stats(url)["parameters"]["bands"] == 1


def test_lookup_a_whole_file_and_from_standard_input(indexed: str, tmp_path: Path) -> None:
    new = "n1\tBella Napoli Trattoria 418 Harbor St Portland ME 04101\nn2\tSomething new\n"
    (tmp_path / "new.tsv").write_text("id\ttext\n" + new)
    out = tmp_path / "found.tsv"
    result = neardup(
        "lookup", "--store", indexed, "--file", str(tmp_path / "new.tsv"), "-o", str(out)
    )
    assert result.returncode == 0, result.stderr
    rows = list(csv.DictReader(out.open(), delimiter="\t"))
    assert [(r["id"], r["stored_id"], r["exact"]) for r in rows] == [
        ("n1", "2", "1"),  # the same text once normalised
        ("n1", "1", "0"),
        ("n1", "6", "0"),
    ]
    as_json = neardup("lookup", "--store", indexed, "--file", str(tmp_path / "new.tsv"), "--json")
    lines = [json.loads(line) for line in as_json.stdout.splitlines()]
    assert [(r["stored_id"], r["exact"], r["copies"]) for r in lines] == [
        ("2", True, []),
        ("1", False, []),
        ("6", False, []),
    ]
    collapsed = neardup_process(
        "lookup",
        "--store",
        indexed,
        "--file",
        "-",
        "--collapse-copies",
        stdin=new.replace("\t", " "),
    )
    assert collapsed.returncode == 0, collapsed.stderr
    rows = list(csv.DictReader(io.StringIO(collapsed.stdout), delimiter="\t"))
    assert [(r["id"], r["stored_id"], r["copies"]) for r in rows] == [
        ("n1", "2", ""),
        ("n1", "1", '["6"]'),
    ]
    nothing = neardup_process("lookup", "--store", indexed, "--file", "-", stdin="x entirely new\n")
    assert nothing.returncode == 1
    # A record the store holds under its id is no duplicate of itself; a .csv is written as CSV.
    (tmp_path / "held.txt").write_text(RECORDS.splitlines()[1] + "\n")
    held = neardup("lookup", "--store", indexed, "--file", str(tmp_path / "held.txt"), "-o",
                   str(tmp_path / "held.csv"))  # fmt: skip
    assert held.returncode == 0, held.stderr
    rows = list(csv.DictReader(io.StringIO((tmp_path / "held.csv").read_text("utf-8-sig"))))
    assert [(r["id"], r["stored_id"]) for r in rows] == [("2", "1"), ("2", "6")]


def test_index_skip_duplicates_stores_only_new_records(indexed: str, tmp_path: Path) -> None:
    (tmp_path / "day2.txt").write_text(
        "7 Golden Lotus Dim Sum 1209 Grant Ave San Francisco CA 94133\n"  # stored as 3
        "8 Casa Oaxaca Cocina 2210 Mission St San Francisco\n"
        "9 Casa Oaxaca Cocina 2210 Mission Street San Francisco\n"  # 8, earlier in the file
    )
    result = neardup(
        "index", str(tmp_path / "day2.txt"), "--store", indexed, "--skip-duplicates", "--json"
    )
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert (summary["read"], summary["indexed"], summary["documents"]) == (3, 1, 7)
    assert [(d["id"], d["duplicate_of"]) for d in summary["duplicates"]] == [("7", "3"), ("9", "8")]


def test_index_reads_standard_input(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'x.db'}"
    result = neardup_process("index", "-", "--store", url, stdin=RECORDS + "7\n")
    assert result.returncode == 0, result.stderr
    assert "store holds 6" in result.stderr
    assert "line 7 (standard input: id without text)" in result.stderr  # a skip names it too
    copies = neardup("lookup", "--store", url, "--id", "2", "--collapse-copies", "--json")
    assert [(m["id"], m["copies"]) for m in json.loads(copies.stdout)] == [("1", ["6"])]
    table = neardup("lookup", "--store", url, "--id", "2", "--collapse-copies").stdout
    assert table.endswith(" (+1 copy)\n")  # "+1 copies" before


def _through_a_pipe(command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``command`` in bash, with ``neardup`` the module and ``<(…)`` a pipe as users give one
    (`neardup index <(zcat records.tsv.gz)`)."""
    shell = f"{shlex.quote(sys.executable)} -m neardup.cli {command}"
    return subprocess.run(
        ["bash", "-c", shell], capture_output=True, text=True, cwd=cwd, timeout=120
    )


def test_a_pipe_is_read_once_with_every_record(tmp_path: Path) -> None:
    """A file given as a pipe is not a regular file: a new store's bands were chosen from its
    first records, read by a reader of their own, and the index read what that one left (250
    of 3,000 people, and exit 0). Read once, every record is indexed, and linked."""
    write_corpus(tmp_path / "people.tsv", None, 3_000, kind="people", seed=4)
    url = f"sqlite:///{tmp_path / 'piped.db'}"
    piped = _through_a_pipe(f"index <(cat people.tsv) --format tsv --store {url}", tmp_path)
    assert piped.returncode == 0, piped.stderr
    assert "read 3,000, indexed 3,000" in piped.stderr and api_stats(url)["documents"] == 3_000
    assert piped.stderr.startswith("/dev/fd/")  # the pipe named whole, not as "63"
    fresh = f"sqlite:///{tmp_path / 'linked.db'}"
    linked = _through_a_pipe(
        f"link people.tsv <(cat people.tsv) --format tsv --store {fresh} --json", tmp_path
    )
    assert linked.returncode == 0, linked.stderr
    assert "between 3,000 records and the store's 3,000" in linked.stderr
    assert len(linked.stdout.splitlines()) > 2_900


@pytest.mark.parametrize("given", ["-", "<(cat people.tsv)"])
def test_ids_checked_before_writing_need_a_file_read_twice(tmp_path: Path, given: str) -> None:
    """`--on-duplicate-id error` reads the ids first: from standard input or a pipe, the
    records would be gone by the second reading (a traceback, before)."""
    write_corpus(tmp_path / "people.tsv", None, 100, kind="people", seed=4)
    url = f"sqlite:///{tmp_path / 'once.db'}"
    command = f"index {given} --format tsv --store {url} --on-duplicate-id error"
    refused = _through_a_pipe(f"{command} < people.tsv", tmp_path)
    assert_user_error(refused, "can be read only once: give a regular file")
    assert not (tmp_path / "once.db").exists()


@pytest.mark.parametrize(
    ("command", "message"),
    [
        ("report --store sqlite:///store.db -o store.db", "it is the store store.db"),
        ("report --store store.db --html ./store.db", "it is the store store.db"),
        ("report -o store.db", "store.db, which the command reads"),  # $NEARDUP_STORE
        ("lookup --store store.db --file people.tsv -o people.tsv", "it is people.tsv"),
        ("dedup people.tsv --store store.db -o ./people.tsv", "it is people.tsv"),
        ("link people.tsv --store store.db -o people.tsv", "it is people.tsv"),
        ("eval --store store.db --truth truth.tsv --report truth.tsv --plot truth.tsv", "truth"),
        ("generate 10 -o new.tsv --truth ./new.tsv", "they name one file"),
    ],
)
def test_an_output_is_never_a_file_the_command_reads(
    tmp_path: Path, command: str, message: str
) -> None:
    """A typo in `-o` replaced the store with a report, or a record file with its lookups:
    refused in one line, before anything is read or written."""
    write_corpus(tmp_path / "people.tsv", tmp_path / "truth.tsv", 200, kind="people", seed=4)
    env = {"NEARDUP_STORE": f"sqlite:///{tmp_path / 'store.db'}"}
    assert neardup("index", "people.tsv", cwd=tmp_path, env=env).returncode == 0
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()}
    assert_user_error(neardup(*shlex.split(command), cwd=tmp_path, env=env), message)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()} == before


@pytest.mark.parametrize(
    "command", [["index", "-"], ["lookup", "--text", "-"], ["explain", "1", "--text", "-"]]
)
def test_standard_input_closed_is_one_line(indexed: str, command: list[str]) -> None:
    """A job started with standard input closed (`<&-`, some schedulers) has none: a
    traceback before."""
    closed = subprocess.run(
        [sys.executable, "-m", "neardup.cli", *command, "--store", indexed],
        capture_output=True,
        text=True,
        preexec_fn=lambda: os.close(0),
        timeout=120,
    )
    assert_user_error(closed, "standard input is closed: give a file or a text in place of -")


def test_batch_commands_keep_freed_memory_and_the_service_gives_it_back(
    monkeypatch: pytest.MonkeyPatch, records: Path, tmp_path: Path
) -> None:
    from neardup import cli, service

    tuned: list[bool] = []
    monkeypatch.setattr(cli, "keep_freed_memory", lambda: tuned.append(True))
    monkeypatch.setattr(service, "serve", lambda *args, **kwargs: None)
    store = f"sqlite:///{tmp_path / 'm.db'}"
    assert neardup("index", str(records), "--store", store).returncode == 0
    assert tuned == [True]
    assert neardup("serve", "--store", store).returncode == 0
    assert tuned == [True]


def test_a_second_days_numbered_file_does_not_replace_the_first(tmp_path: Path) -> None:
    """Files with no id column number their records 1, 2, …: the second day's file would
    replace the first day's records under the same numbers, so it is refused, while the same
    file again (a re-run) and a file with its ids named are indexed."""
    day1, day2 = tmp_path / "day1.tsv", tmp_path / "day2.tsv"
    day1.write_text("text\nBella Napoli Trattoria 418 Harbor St\nThai Orchid Kitchen 58 Elm St\n")
    day2.write_text("text\nGolden Lotus Dim Sum 1209 Grant Ave\nArt's Deli 12224 Ventura Blvd\n")
    url = f"sqlite:///{tmp_path / 'daily.db'}"
    assert neardup("index", str(day1), "--store", url).returncode == 0
    refused = neardup("index", str(day2), "--store", url)
    assert_user_error(refused, "day2.tsv has no id field, so its records are numbered")
    assert "--id-field" in refused.stderr
    assert api_stats(url)["documents"] == 2
    with open_store(url) as store:
        assert store.get(["1"])["1"].content.startswith("bella napoli")
    again = neardup("index", str(day1), "--store", url)  # a re-run replaces nothing
    assert again.returncode == 0, again.stderr
    assert api_stats(url)["documents"] == 2
    day2.write_text("sku\ttext\nx1\tGolden Lotus Dim Sum 1209 Grant Ave\n")
    named = neardup("index", str(day2), "--store", url, "--id-field", "sku")
    assert named.returncode == 0, named.stderr
    assert api_stats(url)["documents"] == 3


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["report", "-o", "missing/pairs.tsv"],
            "cannot write missing/pairs.tsv: no folder missing",
        ),
        (["report", "--html", "missing/r.html"], "cannot write missing/r.html: no folder"),
        (["report", "-o", "."], "cannot write .: it is a folder"),
        (["dedup", "records.txt", "-o", "missing/kept.txt"], "cannot write missing/kept.txt"),
        # Text under a workbook's or a page's name does not open where the name says it will.
        (["report", "-o", "pairs.xlsx"], "cannot write pairs.xlsx: its name asks for an Excel"),
        (["report", "-o", "pairs.html"], "named .gz; --html pairs.html writes one"),
        (["report", "--clusters", "-o", "groups.csv.bz2"], "its name asks for bzip2"),
        (["dedup", "records.txt", "-o", "kept.parquet"], "its name asks for a Parquet file"),
    ],
)
def test_an_output_that_cannot_be_written_is_refused_before_any_work(
    args: list[str], message: str, indexed: str, tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.setattr("neardup.api.report", lambda *a, **k: pytest.fail("the work ran"))
    result = neardup(*args, "--store", indexed, cwd=tmp_path)
    assert_user_error(result, message)
    assert ".partial" not in result.stderr


def test_an_output_that_is_a_pipe_or_a_device_is_written_as_it_is(
    indexed: str, tmp_path: Path
) -> None:
    """`report -o /dev/null` (as root) replaced the null device with a file of pairs: the
    report was written beside it and renamed over it. A pipe or a device is written as it is."""
    fifo = tmp_path / "pairs.fifo"
    os.mkfifo(fifo)
    read: list[str] = []
    # A daemon: where nothing opens the pipe for writing, the test fails rather than hangs.
    reader = threading.Thread(target=lambda: read.append(fifo.read_text()), daemon=True)
    reader.start()
    result = neardup("report", "--store", indexed, "-o", str(fifo))
    assert result.returncode == 0, result.stderr
    reader.join(timeout=30)
    assert read and read[0].startswith("left_id\tright_id")
    assert stat.S_ISFIFO(fifo.stat().st_mode) and not list(tmp_path.glob("*.partial"))


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full: not Linux")
def test_a_full_disk_is_an_error_and_a_non_zero_exit(indexed: str, tmp_path: Path) -> None:
    """On a full disk the report was lost and the run said '209 pairs written', exit 0, both
    to a file (`-o`) and to standard output (`> pairs.tsv`)."""
    to_file = neardup("report", "--store", indexed, "-o", "/dev/full")
    assert_user_error(to_file, "cannot write /dev/full: No space left on device")
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)
    with open("/dev/full", "w") as full:
        piped = subprocess.run(
            [sys.executable, "-m", "neardup.cli", "report", "--store", indexed],
            stdout=full, stderr=subprocess.PIPE, text=True, check=False,
        )  # fmt: skip
    assert piped.returncode == 2
    assert piped.stderr.strip().splitlines()[-1].startswith("neardup: error: ")
    assert "No space left on device" in piped.stderr and "Traceback" not in piped.stderr
    # generate wrote its files in place, and its error named none of them.
    generated = neardup("generate", "50", "-o", "corpus.tsv", "--truth", "/dev/full", cwd=tmp_path)
    assert_user_error(generated, "cannot write /dev/full: No space left on device")
    assert not list(tmp_path.glob("corpus.tsv*"))  # neither the records nor a part of them


def test_counts_read_as_english_and_help_shows_defaults(tmp_path: Path) -> None:
    (tmp_path / "two.txt").write_text(
        "a Thai Orchid Kitchen 58 Elm St\nb Thai Orchid Kitchen 58 Elm St\n"
    )
    url = f"sqlite:///{tmp_path / 'two.db'}"
    assert neardup("index", str(tmp_path / "two.txt"), "--store", url).returncode == 0
    one = neardup("report", "--store", url, "-o", str(tmp_path / "p.tsv"))
    assert one.stderr.startswith(f"1 pair written to {tmp_path / 'p.tsv'}\n")
    groups = neardup("report", "--store", url, "--clusters", "-o", str(tmp_path / "g.tsv"))
    assert groups.stderr.startswith("1 group from 1 pair written")
    shown = " ".join(neardup("generate", "--help").stdout.split())  # lines wrapped by width
    assert "(default: 80)" in shown and "(default: 1)" in shown
    assert "(default: 0.3 of documents, 0.1 of people)" in shown


def test_an_empty_first_run_leaves_no_store_for_later_data_to_inherit(tmp_path: Path) -> None:
    (tmp_path / "empty.tsv").write_text("")
    (tmp_path / "ads.tsv").write_text(
        "id\ttext\n"
        + "".join(
            f"{n}\t{'a long listing of a flat to let near the station, ' * 5}{n}\n"
            for n in range(3)
        )
    )
    url = f"sqlite:///{tmp_path / 'store.db'}"
    empty = neardup("index", str(tmp_path / "empty.tsv"), "--store", url)
    assert empty.returncode == 0, empty.stderr
    assert not (tmp_path / "store.db").exists()
    # The summary says so, rather than "store holds 0" of a store the next command cannot open.
    assert empty.stderr.rstrip().endswith(f"nothing stored, so no store was made at {url}")
    printed = neardup("index", str(tmp_path / "empty.tsv"), "--store", url, "--json")
    assert json.loads(printed.stdout)["store_made"] is False
    assert neardup("index", str(tmp_path / "ads.tsv"), "--store", url).returncode == 0
    assert api_stats(url)["parameters"]["bands"] == 32  # long texts' bands, not short records'


@pytest.mark.parametrize(
    ("flags", "warned"),
    [(["--host", "0.0.0.0"], True), (["--host", "::1"], False), ([], False)],
)
def test_serve_warns_when_other_machines_can_reach_it_without_a_key(
    flags: list[str], warned: bool, tmp_path: Path, monkeypatch
) -> None:
    (tmp_path / "r.tsv").write_text("id\ttext\n1\tone record\n")
    indexed = f"sqlite:///{tmp_path / 'r.db'}"
    api.index([tmp_path / "r.tsv"], indexed)
    monkeypatch.delenv("NEARDUP_API_KEY", raising=False)
    monkeypatch.setattr("neardup.service.serve", lambda *args, listening, **kwargs: listening())
    result = neardup("serve", "--store", indexed, *flags)
    assert result.returncode == 0
    assert ("anyone who reaches the port can read and change the store" in result.stderr) == warned
    assert ("http://[::1]:8000" in result.stderr) == ("::1" in flags)  # an IPv6 URL's brackets
    keyed = neardup("serve", "--store", indexed, "--host", "0.0.0.0", "--api-key", "k")
    assert "warning" not in keyed.stderr


def test_serve_warns_of_a_store_it_cannot_answer_from(tmp_path: Path, monkeypatch) -> None:
    """A mistyped store name served, and every request answered 503, with nothing said when
    it started."""
    monkeypatch.setattr("neardup.service.serve", lambda *args, listening, **kwargs: listening())
    missing = neardup("serve", "--store", str(tmp_path / "typo.db"))
    assert missing.stderr.splitlines()[1] == (
        f"neardup: warning: no store at {tmp_path / 'typo.db'}: requests answer 503 until "
        "records are added (POST /records, or neardup index)"
    )
    assert not (tmp_path / "typo.db").exists()


def test_serve_on_a_port_in_use_says_so_in_one_line() -> None:
    """The port is taken before the service says it serves: uvicorn's own log line and exit
    code 3 came after `neardup serves … on …`."""
    import socket

    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        result = neardup("serve", "--port", str(port))
    assert_user_error(result, f"cannot listen on 127.0.0.1:{port}: Address already in use")


@pytest.mark.parametrize("port", ["99999", "-1"])
def test_serve_on_a_port_past_the_range_says_so_in_one_line(port: str) -> None:
    """`--port 99999` ended in OverflowError's traceback."""
    result = neardup("serve", "--port", port)
    assert_user_error(result, f"cannot listen on port {port}: a port is from 0 to 65535")


def test_serve_refuses_an_empty_api_key() -> None:
    assert_user_error(neardup("serve", "--api-key", ""), "the API key is empty")


def test_pairs_just_above_the_threshold_are_flagged_for_review_in_every_file(
    indexed: str,
) -> None:
    pairs = {
        (r["left_id"], r["right_id"]): r
        for r in csv.DictReader(
            io.StringIO(neardup("report", "--store", indexed).stdout), delimiter="\t"
        )
    }
    lowest = min(float(r["similarity"]) for r in pairs.values() if r["kind"] == "near")
    asked = ["--threshold", f"{lowest - 0.01:.4f}"]  # the least similar near pair is 0.01 above
    flagged = neardup("report", "--store", indexed, *asked).stdout
    rows = list(csv.DictReader(io.StringIO(flagged), delimiter="\t"))
    assert {r["review"] for r in rows} == {"0", "1"}
    assert all((r["review"] == "1") == (
        r["kind"] == "near" and float(r["similarity"]) < lowest - 0.01 + 0.05
    ) for r in rows)  # fmt: skip
    groups = neardup("report", "--store", indexed, *asked, "--clusters", "--format", "jsonl")
    assert any(json.loads(line)["review"] == 1 for line in groups.stdout.splitlines())


def test_index_counts_and_names_the_stored_records_it_replaces(tmp_path: Path) -> None:
    (tmp_path / "a.tsv").write_text("id\ttext\nx1\tfirst text of x1\nx2\tfirst text of x2\n")
    (tmp_path / "b.tsv").write_text("id\ttext\nx2\tsecond text of x2\nx3\tnew text of x3\n")
    url = f"sqlite:///{tmp_path / 'r.db'}"
    first = json.loads(neardup("index", str(tmp_path / "a.tsv"), "--store", url, "--json").stdout)
    assert first["replaced_stored"] == 0
    second = neardup("index", str(tmp_path / "b.tsv"), "--store", url)
    assert (
        "replaced 1 stored record with the same id and another text (first: 'x2' at line 2)"
        in second.stderr
    )
    # The same file again replaces nothing: every record is as stored (it said 'replaced 2').
    again = neardup("index", str(tmp_path / "b.tsv"), "--store", url)
    assert "2 stored records given again unchanged" in again.stderr
    assert "replaced" not in again.stderr
    counts = json.loads(neardup("index", str(tmp_path / "b.tsv"), "--store", url, "--json").stdout)
    assert (counts["replaced_stored"], counts["unchanged"], counts["documents"]) == (0, 2, 3)
    (tmp_path / "b.tsv").write_text("id\ttext\nx2\tsecond text of x2\nx3\tedited text of x3\n")
    edited = json.loads(neardup("index", str(tmp_path / "b.tsv"), "--store", url, "--json").stdout)
    assert (edited["replaced_stored_first"], edited["unchanged"]) == (["'x3' at line 3"], 1)


def test_skip_duplicates_again_stores_nothing(tmp_path: Path) -> None:
    """A second run of the same file finds every record it kept, and every record it skipped,
    as a duplicate again: the check weighs shingles as a store holding all of them would."""
    records = corpus(tmp_path / "records.txt", size=600)
    url = f"sqlite:///{tmp_path / 'u.db'}"
    first = json.loads(neardup("index", str(records), "--store", url, "--skip-duplicates",
                               "--json").stdout)  # fmt: skip
    assert 0 < first["indexed"] < first["read"]
    again = json.loads(neardup("index", str(records), "--store", url, "--skip-duplicates",
                               "--json").stdout)  # fmt: skip
    assert again["indexed"] == 0 and api_stats(url)["documents"] == first["indexed"]
    # The records it kept are themselves, stored already; the others near-duplicates again.
    assert again["skipped_by_reason"] == {
        "stored already with the same text": first["indexed"],
        "a near-duplicate is stored": first["read"] - first["indexed"],
    }


@pytest.mark.parametrize(("stored", "read_from"), [(0, ""), (10, " and the 10 stored")])
def test_a_small_stores_skip_duplicates_run_reads_its_threshold_with_the_records_it_adds(
    tmp_path: Path, stored: int, read_from: str
) -> None:
    """A store whose pairs are too few to read a threshold from (none, or ten records'): the
    run reads it from its records and the first batch together, as a store holding them reads
    it (the threshold a report of the whole file chooses), not the fallback, and says so."""
    path = tmp_path / "people.tsv"
    write_corpus(path, tmp_path / "truth.tsv", 2_000, kind="people", seed=2)
    whole = f"sqlite:///{tmp_path / 'whole.db'}"
    api.index([path], whole)
    api.report(whole)
    expected = last_report(whole).threshold
    url = f"sqlite:///{tmp_path / 'new.db'}"
    if stored:
        (tmp_path / "first.tsv").write_text(
            "".join(path.read_text().splitlines(True)[: stored + 1])
        )
        neardup("index", str(tmp_path / "first.tsv"), "--store", url)
        neardup("lookup", "--store", url, "--id", "p00000000")  # too few to read: not kept
    summary = json.loads(neardup("index", str(path), "--store", url, "--skip-duplicates",
                                 "--json").stdout)  # fmt: skip
    assert expected != api.FALLBACK_THRESHOLD
    assert summary["checked"].startswith(
        f"near-duplicates checked at threshold {expected:g} (auto: read from the 2,000 records "
        f"being added{read_from}: the valley"
    )


def test_a_checked_store_keeps_the_threshold_it_was_checked_at(tmp_path: Path) -> None:
    """After `index --skip-duplicates` the store holds no near-duplicates, so its records alone
    would read another threshold: every later command uses the one its records were checked
    at, the same file checked again is judged as it was, and a plain index keeps it too;
    `neardup tune --store` reads it again."""
    path = tmp_path / "people.tsv"
    write_corpus(path, None, 2_000, kind="people", seed=2)
    url = f"sqlite:///{tmp_path / 'checked.db'}"
    first = json.loads(neardup("index", str(path), "--store", url, "--skip-duplicates",
                               "--json").stdout)  # fmt: skip
    stats = api.stats(url)
    threshold, how = stats["rules_in_effect"]["threshold"], stats["rules_from"]["threshold"]
    assert first["checked"].endswith(f"threshold {threshold:g} ({how})")
    assert how.startswith("auto: read from the 2,000 records being added")
    report = neardup("report", "--store", url, "-o", str(tmp_path / "pairs.tsv"))
    assert f"threshold {threshold:g} ({how})" in report.stderr
    again = json.loads(neardup("index", str(path), "--store", url, "--skip-duplicates",
                               "--json").stdout)  # fmt: skip
    assert again["indexed"] == 0
    assert [d["id"] for d in again["duplicates"]] == [d["id"] for d in first["duplicates"]]
    plain = tmp_path / "more.tsv"
    plain.write_text("id\ttext\nnew-1\tan entirely new record about nothing in particular\n")
    neardup("index", str(plain), "--store", url)
    assert api.stats(url)["rules_from"]["threshold"] == how
    neardup("tune", "--store", url)
    assert api.stats(url)["rules_from"]["threshold"] != how


def test_a_checked_run_says_where_it_reads_its_threshold_again(tmp_path: Path) -> None:
    """A run checked in batches reads its threshold from its first batch, then again from
    what its checks measured once they have seen twice those records, and says both."""
    path = tmp_path / "people.tsv"
    write_corpus(path, None, 2_000, kind="people", seed=2)
    url = f"sqlite:///{tmp_path / 'batches.db'}"
    summary = json.loads(neardup("index", str(path), "--store", url, "--skip-duplicates",
                                 "--batch-size", "500", "--json").stdout)  # fmt: skip
    first, then = summary["checked"].split("; from line 1,002: ")
    assert first.startswith("near-duplicates checked at threshold ")
    assert "read from the 500 records being added" in first
    assert "read from the pairs the checks of 1,000 records measured" in then
    assert api.stats(url)["rules_from"]["threshold"] == f"auto: {then.split('(auto: ')[1][:-1]}"


def test_skip_duplicates_stores_an_edited_record_over_its_own_version(tmp_path: Path) -> None:
    """A record indexed again with a small edit is no near-duplicate of what it was: it
    replaces its stored version, where a record that copies another stored one is refused."""
    url = f"sqlite:///{tmp_path / 'u.db'}"
    (tmp_path / "day1.tsv").write_text(
        "id\ttext\n1\tCasa Oaxaca Cocina 2210 Mission St San Francisco\n"
        "2\tThai Orchid Kitchen 58 Elm St Northampton MA\n"
    )
    (tmp_path / "day2.tsv").write_text(
        "id\ttext\n1\tCasa Oaxaca Cocina 2210 Mission Street San Francisco CA\n"
        "3\tThai Orchid Kitchen 58 Elm Street Northampton MA\n"
    )
    neardup("index", str(tmp_path / "day1.tsv"), "--store", url, "--skip-duplicates")
    day2 = json.loads(neardup("index", str(tmp_path / "day2.tsv"), "--store", url,
                              "--skip-duplicates", "--json").stdout)  # fmt: skip
    assert (day2["indexed"], day2["replaced_stored"], day2["documents"]) == (1, 1, 2)
    assert [(d["id"], d["duplicate_of"]) for d in day2["duplicates"]] == [("3", "2")]
    with open_store(url) as store:
        assert store.get(["1"])["1"].content == (
            "casa oaxaca cocina 2210 mission street san francisco ca"
        )


def test_generate_counts_what_it_wrote(tmp_path: Path) -> None:
    records, truth = tmp_path / "p.csv", tmp_path / "t.csv"
    made = neardup("generate", "5", "--kind", "people", "-o", str(records), "--truth", str(truth))
    assert made.returncode == 0, made.stderr
    pairs = len(truth.read_text().splitlines()) - 1
    assert pairs == 1  # "1 true pairs" before
    assert made.stderr == f"wrote 5 records to {records} and 1 true pair to {truth}\n"


@pytest.mark.parametrize(
    "name", ["people.csv", "people.jsonl", "people.json", "people.txt", "people.csv.gz"]
)
def test_a_generated_corpus_is_written_as_its_name_says_and_read_back_whole(
    tmp_path: Path, name: str
) -> None:
    """`generate -o people.csv` wrote tabs under a .csv name: `index` read each line as one
    field (ids lost, every field in the text) and `eval` refused the truth file."""
    records, truth = tmp_path / name, tmp_path / name.replace("people", "truth")
    made = neardup("generate", "300", "--kind", "people", "-o", str(records), "--truth", str(truth))
    assert made.returncode == 0, made.stderr
    url = f"sqlite:///{tmp_path / 'people.db'}"
    indexed = neardup("index", str(records), "--store", url)
    assert indexed.returncode == 0, indexed.stderr
    if not name.endswith(".txt"):  # lines: an id, then the text
        assert "text from name, street, city, state, zip" in indexed.stderr
    # The ids are the generator's: the copy p00000001 finds its original.
    assert "p00000000" in neardup("lookup", "--id", "p00000001", "--store", url).stdout
    report = tmp_path / "pairs.tsv"
    assert neardup("report", "--store", url, "-o", str(report)).returncode == 0
    scored = neardup("eval", "--truth", str(truth), "--report", str(report), "--json")
    assert scored.returncode == 0, scored.stderr
    assert json.loads(scored.stdout)["f1"] > 0.9
    # The same corpus as the TSV one of the same seed, in another form.
    tsv = tmp_path / "tsv"
    tsv.mkdir()
    neardup(
        "generate",
        "300",
        "--kind",
        "people",
        "-o",
        str(tsv / "p.tsv"),
        "--truth",
        str(tsv / "t.tsv"),
    )
    assert read_pairs(truth) == read_pairs(tsv / "t.tsv")
    again = f"sqlite:///{tsv / 'people.db'}"
    assert neardup("index", str(tsv / "p.tsv"), "--store", again).returncode == 0
    assert api.report(again) == api.report(url)


def test_a_text_file_of_sentences_keeps_every_line_and_dedups_back_to_text(
    tmp_path: Path,
) -> None:
    """Read as ID TEXT, the lines that start with 'The' replaced each other: 'store holds 2'
    of 4 lines. Each line is now a record, and dedup writes the kept lines as they were."""
    lines = [
        "The quick brown fox jumps over the lazy dog",
        "The quick brown fox jumped over the lazy dog",
        "A completely different sentence here",
        "The cat sat on the mat today",
    ]
    (tmp_path / "notes.txt").write_text("\n".join(lines) + "\n")
    url = f"sqlite:///{tmp_path / 'notes.db'}"
    indexed = neardup("index", str(tmp_path / "notes.txt"), "--store", url)
    assert indexed.returncode == 0, indexed.stderr
    assert "notes.txt: each line is a record's text" in indexed.stderr
    assert "store holds 4" in indexed.stderr and "replaced" not in indexed.stderr
    out = tmp_path / "kept.txt"
    deduped = neardup(
        "dedup", str(tmp_path / "notes.txt"), "--store", url, "--threshold", "0.5", "-o", str(out)
    )
    assert deduped.returncode == 0, deduped.stderr
    assert out.read_text().splitlines() == [lines[0], *lines[2:]]
    # Another such file would replace them by number: it is refused with what to do instead.
    (tmp_path / "more.txt").write_text("The dog barked all night\nThe neighbours complained\n")
    refused = neardup("index", str(tmp_path / "more.txt"), "--store", url)
    assert_user_error(refused, "Index the files in one run (each record is then numbered")


def test_a_json_array_is_indexed_reported_and_deduplicated_as_json(tmp_path: Path) -> None:
    """A .json file (one array of objects) could not be read at all, and `report -o
    pairs.json` wrote tab-separated lines under that name."""
    shops = [
        {"sku": "a1", "title": "Art's Deli 12224 Ventura Blvd Studio City", "price": 10},
        {"sku": "a2", "title": "Art's Deli 12224 Ventura Boulevard Studio City", "price": 10},
        {"sku": "b1", "title": "Thai Orchid Kitchen 58 Elm Street Northampton", "price": 12},
    ]
    (tmp_path / "shops.json").write_text(json.dumps(shops, indent=2))
    url = f"sqlite:///{tmp_path / 'shops.db'}"
    indexed = neardup("index", "shops.json", "--id-field", "sku", "--store", url, cwd=tmp_path)
    assert "read 3, indexed 3, skipped none" in indexed.stderr, indexed.stderr
    given = ("--store", url, "--threshold", "0.5")
    assert neardup("report", *given, "-o", "pairs.json", cwd=tmp_path).returncode == 0
    pairs = json.loads((tmp_path / "pairs.json").read_text())
    assert [(p["left_id"], p["right_id"]) for p in pairs] == [("a1", "a2")]
    neardup("report", *given, "--clusters", "-o", "groups.json", cwd=tmp_path)
    assert json.loads((tmp_path / "groups.json").read_text())[0]["ids"] == ["a1", "a2"]
    deduped = neardup("dedup", "shops.json", "--id-field", "sku", *given, "-o", "kept.json",
                      cwd=tmp_path)  # fmt: skip
    assert deduped.returncode == 0, deduped.stderr
    assert json.loads((tmp_path / "kept.json").read_text()) == [shops[0], shops[2]]
    scored = neardup("eval", "--truth", "pairs.json", "--report", "pairs.json", cwd=tmp_path)
    assert scored.stdout.startswith("precision 1.0000  recall 1.0000")


def test_dedup_writes_the_object_around_a_json_array_back(tmp_path: Path) -> None:
    """An API's answer, {"meta": …, "records": [...], "count": …}, was written back as the
    bare array: its other fields were lost without a word."""
    records = [
        {"id": "a1", "title": "Art's Deli 12224 Ventura Blvd Studio City"},
        {"id": "a2", "title": "Art's Deli 12224 Ventura Boulevard Studio City"},
        {"id": "b1", "title": "Thai Orchid Kitchen 58 Elm Street Northampton"},
    ]
    answer = {"meta": {"page": 1, "records": None}, "records": records, "next": "/p/2"}
    (tmp_path / "answer.json").write_text(json.dumps(answer, indent=2))
    given = ("--store", f"sqlite:///{tmp_path / 'a.db'}", "--threshold", "0.5")
    assert neardup("index", "answer.json", *given[:2], cwd=tmp_path).returncode == 0
    deduped = neardup("dedup", "answer.json", *given, "-o", "kept.json", cwd=tmp_path)
    assert deduped.returncode == 0, deduped.stderr
    kept = json.loads((tmp_path / "kept.json").read_text())
    assert list(kept.items()) == list({**answer, "records": records[::2]}.items())
    lines = neardup("dedup", "answer.json", *given, "-o", "kept.jsonl", cwd=tmp_path)
    assert lines.returncode == 0, lines.stderr  # JSON lines hold the records alone
    assert (tmp_path / "kept.jsonl").read_text().splitlines() == [
        json.dumps(r) for r in records[::2]
    ]


@pytest.mark.parametrize("name", ["pairs.tsv", "pairs.tsv.gz"])
def test_two_writers_of_one_file_at_once_leave_one_of_them_whole(name: str, tmp_path: Path) -> None:
    """Two reports written to one name at once (a scheduled one and one run by hand) wrote
    into one file beside it: the second emptied the first's, the first's rename failed
    ("cannot write"), and the file left was a mix of the two. Each now writes its own, and the
    one renamed last is the file, whole."""
    path = tmp_path / name
    first, second = "first\n" * 50_000, "second\n" * 10
    with whole_file(path) as one:
        one.write(first[: len(first) // 2])
        with whole_file(path) as other:
            other.write(second)
        assert read_text(path) == second
        one.write(first[len(first) // 2 :])
    assert read_text(path) == first
    assert not list(tmp_path.glob("*.partial"))


def read_text(path: Path) -> str:
    data = path.read_bytes()
    return (gzip.decompress(data) if path.suffix == ".gz" else data).decode()


def test_a_report_named_gz_is_compressed_and_read_back(tmp_path: Path) -> None:
    """pairs.csv.gz held plain tab-separated text: neither gzip nor CSV, as its name says."""
    records = corpus(tmp_path / "records.txt")
    url = f"sqlite:///{tmp_path / 'r.db'}"
    assert neardup("index", str(records), "--store", url).returncode == 0
    plain, packed = tmp_path / "pairs.csv", tmp_path / "pairs.csv.gz"
    assert neardup("report", "--store", url, "-o", str(plain)).returncode == 0
    assert neardup("report", "--store", url, "-o", str(packed)).returncode == 0
    assert gzip.decompress(packed.read_bytes()) == plain.read_bytes()
    assert read_pairs(packed) == read_pairs(plain) != {}
    assert not list(tmp_path.glob("*.partial"))


def test_a_folder_of_record_files_is_read_as_its_files(tmp_path: Path) -> None:
    """A folder of monthly exports (`neardup index exports/`) was read as two documents, each
    export one record: read 2, indexed 2. Where every file is a record file by its name, the
    folder is read as if each were given; a folder with a document among them is documents."""
    folder = tmp_path / "exports"
    folder.mkdir()
    (folder / "jan.csv").write_text("id,name\nj1,Anna Rossi Roma\nj2,Marco Bianchi\n")
    (folder / "feb.jsonl.gz").write_bytes(
        gzip.compress(b'{"id": "f1", "name": "Anna Rosi Roma"}\n')
    )
    url = f"sqlite:///{tmp_path / 'exports.db'}"
    indexed = neardup("index", str(folder), "--store", url)
    assert indexed.returncode == 0, indexed.stderr
    assert "read 3, indexed 3, skipped none" in indexed.stderr
    assert "f1" in neardup("lookup", "--id", "j1", "--store", url, "--threshold", "0.3").stdout
    assert neardup("index", str(folder), str(folder / "jan.csv"), "--store", url).returncode == 2
    assert_user_error(neardup("dedup", str(folder), "--store", url), "is a folder")
    # A README beside the exports: each export was read as one document, read 3, exit 0.
    (folder / "notes.txt").write_text("a note about the exports\n")
    mixed = neardup("index", str(folder), "--store", f"sqlite:///{tmp_path / 'd.db'}")
    assert_user_error(
        mixed,
        f"{folder} holds 2 record files (feb.jsonl.gz, jan.csv) and 1 other (such as "
        f"notes.txt): read as a folder of documents, each record file would be one record. "
        f"Give the record files ({folder}/*.csv {folder}/*.jsonl.gz), or move the others out",
    )
    for name in ("a.txt", "b.txt"):  # documents, among them two files named as records
        (folder / name).write_text(f"the document {name}\n")
    documents = neardup("index", str(folder), "--store", f"sqlite:///{tmp_path / 'd.db'}")
    assert "each of its 5 files is a record" in documents.stderr


def test_a_folder_of_documents_is_indexed_and_reported_by_file(tmp_path: Path) -> None:
    """`neardup index articles/` said 'is a directory, not a record file'."""
    folder = tmp_path / "articles"
    folder.mkdir()
    story = "The city council approved the new budget for buses and schools after a long debate"
    (folder / "a.txt").write_text(story + " on Tuesday night.")
    (folder / "b.txt").write_text(story + " on Tuesday evening.")
    (folder / "c.txt").write_text("A storm closed the harbour and every ferry stayed in port.")
    url = f"sqlite:///{tmp_path / 'articles.db'}"
    indexed = neardup("index", str(folder), "--store", url)
    assert indexed.returncode == 0, indexed.stderr
    assert "read 3, indexed 3, skipped none" in indexed.stderr
    rows = list(
        csv.DictReader(io.StringIO(neardup("report", "--store", url).stdout), delimiter="\t")
    )
    assert [(r["left_id"], r["right_id"]) for r in rows] == [("a.txt", "b.txt")]
    assert "a.txt" in neardup("lookup", "--id", "b.txt", "--store", url).stdout
    refused = neardup("dedup", str(folder), "--store", url)
    assert_user_error(refused, "is a folder: dedup writes one record file back")
    given = neardup("index", str(folder), "--format", "csv", "--store", url)
    assert_user_error(given, "--format, --id-field and --text-field apply to record files")
    # A folder is read twice where a run needs it: a new store's bands are chosen for its
    # documents' length (long texts: 32 bands), and --on-duplicate-id error reads ids first.
    for name in "de":
        (folder / f"{name}.txt").write_text(f"{story} and again {name} " * 8)
    again = f"sqlite:///{tmp_path / 'again.db'}"
    checked = neardup("index", str(folder), "--store", again, "--on-duplicate-id", "error")
    assert checked.returncode == 0, checked.stderr
    assert api_stats(again)["parameters"]["bands"] == 32
