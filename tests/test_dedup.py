"""`neardup dedup`: a record file written back with one record per group, every field kept."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from neardup import api
from tests.runner import assert_user_error, neardup

LISTINGS = """\
sku,title,description,price
12345,Art's Deli,12224 Ventura Blvd. Studio City,10
12346,Art's Deli,"12224 Ventura Boulevard, Studio City",11
12347,Golden Lotus Dim Sum,1209 Grant Ave San Francisco CA 94133,12
12348,Golden Lotus Dim Sum Restaurant,"1209 Grant Avenue, San Francisco CA 94133",13
12349,Thai Orchid Kitchen,58 Elm Street Northampton MA 01060,14
12350,Art's Deli,12224 Ventura Blvd. Studio City,10
"""
TEXT = ["--text-field", "title", "--text-field", "description"]


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "listings.csv").write_text(LISTINGS, encoding="utf-8")
    indexed = neardup("index", "listings.csv", "--id-field", "sku", *TEXT, cwd=tmp_path, env=ENV)
    assert indexed.returncode == 0, indexed.stderr
    return tmp_path


ENV = {"NEARDUP_STORE": "sqlite:///listings.db"}


def rows(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text)))


def test_one_record_per_group_every_field_as_it_was(folder: Path) -> None:
    result = neardup("dedup", "listings.csv", "--id-field", "sku", *TEXT, "-o", "kept.csv",
                     cwd=folder, env=ENV)  # fmt: skip
    assert result.returncode == 0, result.stderr
    original = rows(LISTINGS)
    kept = rows((folder / "kept.csv").read_text(encoding="utf-8"))
    assert kept == [original[0]] + [r for r in original[1:] if r[0] in {"12345", "12347", "12349"}]
    assert "read 6, wrote 3, removed 3 near-duplicates from 2 groups" in result.stderr


def test_a_spreadsheets_file_keeps_its_byte_order_mark(folder: Path) -> None:
    """Excel's CSV UTF-8 starts with a byte order mark, which is how Excel knows the file is
    UTF-8 when it opens it again: written back without it, "Café" read as "CafÃ©"."""
    (folder / "excel.csv").write_text("\ufeff" + LISTINGS.replace("Deli", "Délice"), "utf-8")
    args = ["--id-field", "sku", *TEXT, "--threshold", "0.5"]
    assert neardup("index", "excel.csv", *args, "--store", "excel.db", cwd=folder).returncode == 0
    result = neardup(
        "dedup", "excel.csv", *args, "--store", "excel.db", "-o", "kept.csv", cwd=folder
    )
    assert result.returncode == 0, result.stderr
    kept = (folder / "kept.csv").read_bytes()
    assert kept.startswith("\ufeffsku,title,".encode()) and "Délice".encode() in kept
    # A file without one is written back without one.
    result = neardup("dedup", "listings.csv", *args, "-o", "plain.csv", cwd=folder, env=ENV)
    assert result.returncode == 0, result.stderr
    assert (folder / "plain.csv").read_bytes().startswith(b"sku,title,")


def test_keep_longest_and_center_groups(folder: Path) -> None:
    out = io.StringIO()
    summary = api.dedup(
        folder / "listings.csv",
        out,
        f"sqlite:///{folder / 'listings.db'}",
        id_field="sku",
        text_fields=["title", "description"],
        keep="longest",
        grouping="center",
    )
    assert [r[0] for r in rows(out.getvalue())[1:]] == ["12346", "12348", "12349"]
    assert (summary.read, summary.written, summary.removed, summary.groups) == (6, 3, 3, 2)


@pytest.mark.parametrize("kind", ["jsonl", "tsv", "lines"])
def test_other_formats_are_written_in_their_own_format(tmp_path: Path, kind: str) -> None:
    records = [
        {"id": "a1", "text": "Blue Heron Cafe 77 Maple Avenue Burlington", "tags": ["x", 1]},
        {"id": "a2", "text": "Blue Heron Cafe, 77 Maple Ave., Burlington", "tags": []},
        {"id": "a3", "text": "Rosie's Diner 35 Main St. Keene NH", "tags": None},
    ]
    lines = {
        "jsonl": [json.dumps(r) for r in records],
        "tsv": ["id\ttext"] + [f"{r['id']}\t{r['text']}" for r in records],
        "lines": [f"{r['id']} {r['text']}" for r in records],
    }[kind]
    path = tmp_path / f"records.{kind if kind != 'lines' else 'txt'}"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    env = {"NEARDUP_STORE": f"sqlite:///{tmp_path / 'r.db'}"}
    assert neardup("index", path.name, cwd=tmp_path, env=env).returncode == 0
    kept = neardup("dedup", path.name, cwd=tmp_path, env=env)
    assert kept.returncode == 0, kept.stderr
    assert kept.stdout.splitlines() == [
        line for line in lines if not line.startswith(("a2", '{"id": "a2"'))
    ]


@pytest.mark.parametrize("kind", ["jsonl", "json"])
def test_json_numbers_are_written_back_as_the_file_wrote_them(tmp_path: Path, kind: str) -> None:
    """A price 12.50 came back as 12.5, and 2e3 as 2000.0: a JSON number with a fraction or
    an exponent was written as Python spells the float, in the records and around them."""
    objects = [
        '{"id": "a1", "text": "Blue Heron Cafe 77 Maple Avenue", "price": 12.50, '
        '"sizes": [1.0, {"w": 2e3}]}',
        '{"id": "a2", "text": "Blue Heron Cafe, 77 Maple Ave.", "price": 12.50}',
        '{"id": "a3", "text": "Rosie\'s Diner 35 Main St. Keene NH", "price": 9.90}',
    ]
    kept = [objects[0], objects[2]]
    if kind == "json":
        objects = ['{"data": [', ",\n".join(objects), '], "total": 35.90}']
        kept = ['{"data": [', f"{kept[0]},", kept[1], '], "total": 35.90}']
    (tmp_path / f"records.{kind}").write_text("\n".join(objects) + "\n", encoding="utf-8")
    env = {"NEARDUP_STORE": f"sqlite:///{tmp_path / 'r.db'}"}
    assert neardup("index", f"records.{kind}", cwd=tmp_path, env=env).returncode == 0
    written = neardup("dedup", f"records.{kind}", cwd=tmp_path, env=env)
    assert written.returncode == 0, written.stderr
    assert written.stdout.splitlines() == kept


def test_rows_of_no_record_are_written_back_as_they_are(tmp_path: Path) -> None:
    """A row with no text, or no id (a line of an id alone), is no record, and no group holds
    it: dedup left it out of the file it wrote, a product without a title lost from the user's
    data (counted as skipped, as an index run counts it). A lines file's lines come back as
    they were: a tab after the id was written as a space."""
    header, rest = LISTINGS.split("\n", 1)  # the first row read before any other: none
    listings = f"{header}\n12351,,,15\n{rest},Art's Deli,12224 Ventura Blvd. Studio City,10\n"
    (tmp_path / "listings.csv").write_text(listings, encoding="utf-8")
    args = ["listings.csv", "--id-field", "sku", *TEXT]
    indexed = neardup("index", *args, cwd=tmp_path, env=ENV)
    assert "skipped 2 (1 no text, 1 empty id)" in indexed.stderr
    result = neardup("dedup", *args, "-o", "kept.csv", cwd=tmp_path, env=ENV)
    assert result.returncode == 0, result.stderr
    original = rows(listings)
    kept = rows((tmp_path / "kept.csv").read_text(encoding="utf-8"))
    assert kept == [r for r in original if r[0] not in {"12346", "12348", "12350"}]
    assert "read 8, wrote 5 (2 rows with no id or no text, as it was), removed 3" in result.stderr
    assert "skipped none" in result.stderr
    lines = ["1\tArt's Deli 12224 Ventura Blvd.", "2 Art's Deli 12224 Ventura", "3", "4  Thai "]
    (tmp_path / "lines.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    env = {"NEARDUP_STORE": "sqlite:///lines.db"}
    assert neardup("index", "lines.txt", cwd=tmp_path, env=env).returncode == 0
    kept = neardup("dedup", "lines.txt", cwd=tmp_path, env=env)
    assert kept.stdout.splitlines() == [lines[0], lines[2], lines[3]], kept.stderr


@pytest.mark.parametrize(
    ("name", "newline"),
    [("listings.csv", "\n"), ("listings.txt", "\r\n"), ("listings.jsonl", "\r\n"),
     ("listings.tsv", "\r\n")],
)  # fmt: skip
def test_a_file_is_written_back_with_its_own_line_ends(
    tmp_path: Path, name: str, newline: str
) -> None:
    """A lines file saved on Windows came back with Unix line ends, and every CSV file with
    Windows ones: each line a diff of the file and its deduplicated copy, where only the
    removed records differ. Each file now keeps the line ends it was read with."""
    records = [(row[0], " ".join(row[1:3]).replace(",", "")) for row in rows(LISTINGS)[1:]]
    written = {
        "listings.csv": ["id,text", *(f"{i},{text}" for i, text in records)],
        "listings.txt": [f"{i} {text}" for i, text in records],
        "listings.jsonl": [json.dumps({"id": i, "text": text}) for i, text in records],
        "listings.tsv": ["id\ttext", *(f"{i}\t{text}" for i, text in records)],
    }[name]
    (tmp_path / name).write_bytes(newline.join([*written, ""]).encode())
    env = {"NEARDUP_STORE": "sqlite:///lines.db"}
    assert neardup("index", name, cwd=tmp_path, env=env).returncode == 0
    result = neardup("dedup", name, "-o", f"kept-{name}", cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stderr
    kept = (tmp_path / f"kept-{name}").read_bytes().decode()
    removed = ("12346", "12348", "12350")
    assert kept == newline.join([*(w for w in written if not any(i in w for i in removed)), ""])


def test_the_output_is_written_in_the_format_its_name_asks_for(folder: Path) -> None:
    """A csv file's records written to kept.tsv are tab-separated, to kept.jsonl JSON lines;
    a format the records cannot be written in is a one-line error that writes nothing."""
    options = ["--id-field", "sku", *TEXT]
    for name in ("kept.tsv", "kept.jsonl"):
        result = neardup("dedup", "listings.csv", *options, "-o", name, cwd=folder, env=ENV)
        assert result.returncode == 0, result.stderr
    tabbed = (folder / "kept.tsv").read_text(encoding="utf-8").splitlines()
    assert [line.split("\t") for line in tabbed] == rows(LISTINGS)[0:1] + [
        r for r in rows(LISTINGS)[1:] if r[0] in {"12345", "12347", "12349"}
    ]
    objects = [json.loads(line) for line in (folder / "kept.jsonl").read_text().splitlines()]
    assert [o["sku"] for o in objects] == ["12345", "12347", "12349"]
    (folder / "listings.jsonl").write_text("".join(json.dumps(o) + "\n" for o in objects))
    result = neardup("dedup", "listings.jsonl", *options, "-o", "back.csv", cwd=folder, env=ENV)
    assert result.returncode == 2
    assert "the records of a jsonl file are written back as jsonl, not csv" in result.stderr
    assert not (folder / "back.csv").exists()


def test_a_file_read_with_other_settings_is_an_error_and_writes_nothing(folder: Path) -> None:
    result = neardup("dedup", "listings.csv", "--format", "tsv", "-o", "kept.csv", cwd=folder,
                     env=ENV)  # fmt: skip
    assert result.returncode == 2
    assert "a CSV file? give --format csv" in result.stderr  # read as tsv: one field
    assert not (folder / "kept.csv").exists()


def test_a_file_is_read_with_the_fields_it_was_indexed_with(folder: Path) -> None:
    """Dedup without --id-field sku used to read record numbers for ids, and found none of
    the store's groups: the store remembers the fields its index run named."""
    named = neardup("dedup", "listings.csv", "--id-field", "sku", *TEXT, cwd=folder, env=ENV)
    remembered = neardup("dedup", "listings.csv", cwd=folder, env=ENV)
    assert remembered.returncode == 0, remembered.stderr
    assert remembered.stdout == named.stdout and "removed 3" in remembered.stderr


def test_a_file_other_than_the_one_indexed_is_refused_and_writes_nothing(folder: Path) -> None:
    """Another day's file numbers its listings with the same skus: the store's groups are of
    other texts, and removing its records by their ids alone would drop listings that have no
    copy. Nothing is written."""
    other = LISTINGS.replace("Art's Deli", "Bella Napoli Trattoria", 1)
    (folder / "other.csv").write_text(other, encoding="utf-8")
    result = neardup("dedup", "other.csv", "--id-field", "sku", *TEXT, "-o", "kept.csv",
                     cwd=folder, env=ENV)  # fmt: skip
    assert_user_error(result, "other.csv, line 2: the store holds another text under the id")
    assert not (folder / "kept.csv").exists()


def test_a_record_a_repeated_id_replaced_in_the_store_is_written_as_it_is(tmp_path: Path) -> None:
    """The store holds the last record of a repeated id: the earlier one is no record of its
    groups, so it is written as it is, and the file is still the one indexed."""
    (tmp_path / "shops.tsv").write_text(
        "id\ttext\n1\tGolden Lotus Dim Sum Grant Ave\n1\tThai Orchid Kitchen 58 Elm Street\n"
        "2\tThai Orchid Kitchen 58 Elm St\n3\tArt's Deli Ventura Blvd\n"
    )
    assert neardup("index", "shops.tsv", cwd=tmp_path, env=ENV).returncode == 0
    result = neardup("dedup", "shops.tsv", "--threshold", "0.3", cwd=tmp_path, env=ENV)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[1:] == [
        "1\tGolden Lotus Dim Sum Grant Ave",
        "1\tThai Orchid Kitchen 58 Elm Street",
        "3\tArt's Deli Ventura Blvd",
    ]


def test_a_file_separated_by_semicolons_is_written_back_with_them(tmp_path: Path) -> None:
    (tmp_path / "shop.csv").write_text(LISTINGS.replace(",", ";"), encoding="utf-8")
    indexed = neardup("index", "shop.csv", "--id-field", "sku", cwd=tmp_path, env=ENV)
    assert "shop.csv: fields separated by semicolons" in indexed.stderr
    result = neardup("dedup", "shop.csv", "--id-field", "sku", "-o", "kept.csv", cwd=tmp_path,
                     env=ENV)  # fmt: skip
    assert result.returncode == 0, result.stderr
    kept = (tmp_path / "kept.csv").read_text(encoding="utf-8").splitlines()
    assert kept[0] == "sku;title;description;price" and len(kept) == 4
    assert all(line.count(";") == 3 for line in kept)


def test_a_csv_file_that_names_its_delimiter_is_read_and_written_back_so(tmp_path: Path) -> None:
    """Excel writes and reads a first line "sep=;": it was read as a header of one field, and
    every record skipped as having more fields than the header."""
    named = "sep=;\n" + LISTINGS.replace(",", ";")
    (tmp_path / "shop.csv").write_text(named, encoding="utf-8")
    indexed = neardup("index", "shop.csv", "--id-field", "sku", cwd=tmp_path, env=ENV)
    assert indexed.returncode == 0, indexed.stderr
    assert "skipped none" in indexed.stderr and "text from title, description, price" in (
        indexed.stderr
    )
    result = neardup("dedup", "shop.csv", "--id-field", "sku", "-o", "kept.csv", cwd=tmp_path,
                     env=ENV)  # fmt: skip
    assert result.returncode == 0, result.stderr
    kept = (tmp_path / "kept.csv").read_text(encoding="utf-8").splitlines()
    assert kept[:2] == ["sep=;", "sku;title;description;price"] and len(kept) == 5


@pytest.mark.parametrize("header", ["sku,title,,", "sku , title,description ,price "])
def test_a_header_with_blank_names_is_written_back_as_it_was(tmp_path: Path, header: str) -> None:
    """Names with spaces around them ('Name ', as a spreadsheet keeps them) were written back
    trimmed: a header the file's next reader does not expect."""
    blank = LISTINGS.replace("sku,title,description,price", header)
    (tmp_path / "shop.csv").write_text(blank, encoding="utf-8")
    assert neardup("index", "shop.csv", "--id-field", "sku", cwd=tmp_path, env=ENV).returncode == 0
    result = neardup("dedup", "shop.csv", "--id-field", "sku", "-o", "kept.csv", cwd=tmp_path,
                     env=ENV)  # fmt: skip
    assert result.returncode == 0, result.stderr
    kept = (tmp_path / "kept.csv").read_text(encoding="utf-8").splitlines()
    assert kept[0] == header and kept[1].startswith("12345,Art's Deli,12224 Ventura")


def test_the_summary_counts_one_group_in_the_singular() -> None:
    summary = api.DedupSummary(read=3, written=2, removed=1, groups=1)
    assert summary.describe().startswith("read 3, wrote 2, removed 1 near-duplicate from 1 group (")


def test_files_indexed_into_one_store_are_each_written_back(tmp_path: Path) -> None:
    """A store of yesterday's file and today's: a record of today's whose group keeps
    yesterday's is removed, and the summary names the stored record it gave way to. Yesterday's
    file, whose records are kept, is written back whole; it was refused as "in none of the
    store's groups"."""
    listings = LISTINGS.splitlines(keepends=True)
    (tmp_path / "monday.csv").write_text("".join(listings[:4]), encoding="utf-8")
    (tmp_path / "tuesday.csv").write_text(listings[0] + "".join(listings[4:]), encoding="utf-8")
    indexed = neardup("index", "monday.csv", "tuesday.csv", "--id-field", "sku", *TEXT,
                      cwd=tmp_path, env=ENV)  # fmt: skip
    assert indexed.returncode == 0, indexed.stderr
    monday = neardup("dedup", "monday.csv", cwd=tmp_path, env=ENV)
    assert monday.returncode == 0, monday.stderr
    assert [row[0] for row in rows(monday.stdout)] == ["sku", "12345", "12347"]
    assert "removed 1 near-duplicate from 2 groups (kept the first record of each);" in (
        monday.stderr
    )
    tuesday = neardup("dedup", "tuesday.csv", cwd=tmp_path, env=ENV)
    assert tuesday.returncode == 0, tuesday.stderr
    assert [row[0] for row in rows(tuesday.stdout)] == ["sku", "12349"]
    assert (
        "removed 2 near-duplicates from 2 groups (kept the first record of each; for 2 groups "
        "that is a stored record tuesday.csv does not hold, as another file's: '12345', '12347')"
    ) in tuesday.stderr
    (tmp_path / "new.csv").write_text(listings[0] + listings[5].replace("12349", "99"))
    unheld = neardup("dedup", "new.csv", cwd=tmp_path, env=ENV)
    assert_user_error(unheld, "none of the records of new.csv are in the store: read it with")


def test_a_report_takes_the_texts_of_every_file_the_store_was_indexed_from(
    tmp_path: Path,
) -> None:
    """--texts-from took one file, and a second replaced the first: the pairs between two
    files' records showed one side's text empty, without a word."""
    listings = LISTINGS.splitlines(keepends=True)
    (tmp_path / "monday.csv").write_text("".join(listings[:4]), encoding="utf-8")
    (tmp_path / "tuesday.csv").write_text(listings[0] + "".join(listings[4:]), encoding="utf-8")
    fields = ["--id-field", "sku", *TEXT]
    indexed = neardup("index", "monday.csv", "tuesday.csv", *fields, cwd=tmp_path, env=ENV)
    assert indexed.returncode == 0, indexed.stderr
    texts = ["--texts-from", "monday.csv", "--texts-from", "tuesday.csv", "--format", "csv"]
    both = neardup("report", *texts, cwd=tmp_path, env=ENV)
    rows = list(csv.DictReader(io.StringIO(both.stdout.removeprefix("\ufeff"))))
    assert len(rows) == 4 and all(row["left_text"] and row["right_text"] for row in rows)
    assert ("12347", "12348") in {(row["left_id"], row["right_id"]) for row in rows}
    assert "note" not in both.stderr
    one = neardup("report", *texts[:2], cwd=tmp_path, env=ENV)
    assert one.stderr.startswith(
        "neardup: note: 2 records of the pairs (such as '12348') are in none of monday.csv: "
        "left without a text; give every file the store was indexed from"
    )


def test_repeated_ids_kept_numbered_are_removed_by_their_numbered_ids(tmp_path: Path) -> None:
    """Indexed with --on-duplicate-id keep, the second record of id 5 is stored as 5#2: dedup
    read it as 5, whose stored text is another, and wrote it back though its group keeps 4."""
    (tmp_path / "shops.csv").write_text(
        "id,text\n4,Marco Bianchi Corso Italia 4 Torino\n5,Anna Rossi Via Roma 12 Milano\n"
        "5,Marco Bianchi Corso Italia 4 Turin\n"
    )
    kept = ["--on-duplicate-id", "keep"]
    assert neardup("index", "shops.csv", *kept, cwd=tmp_path, env=ENV).returncode == 0
    rules = ["--threshold", "0.5"]
    assert "4\t5#2\t" in neardup("report", *rules, cwd=tmp_path, env=ENV).stdout
    result = neardup("dedup", "shops.csv", *rules, cwd=tmp_path, env=ENV)
    assert [row[1] for row in rows(result.stdout)[1:]] == [
        "Marco Bianchi Corso Italia 4 Torino",
        "Anna Rossi Via Roma 12 Milano",
    ]
    assert "removed 1 near-duplicate from 1 group (kept the first record of each);" in (
        result.stderr
    )
    texts = neardup("report", *rules, "--texts-from", "shops.csv", cwd=tmp_path, env=ENV)
    assert texts.stdout.splitlines()[1].endswith(
        "\tMarco Bianchi Corso Italia 4 Torino\tMarco Bianchi Corso Italia 4 Turin"
    )
    assert "note" not in texts.stderr
