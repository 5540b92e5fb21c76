import bz2
import codecs
import gzip
import io
import json
import lzma
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest

from neardup import api
from neardup.errors import NeardupError
from neardup.readers import FolderReader, Record, RecordReader, code_page_byte, detect_format
from tests.runner import assert_user_error, neardup


def write(path: Path, data: str | bytes) -> Path:
    path.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
    return path


def read(path: Path, **kwargs) -> tuple[list[Record], RecordReader]:
    reader = RecordReader(path, **kwargs)
    return list(reader), reader


def test_lines_split_id_at_first_space_or_tab(tmp_path: Path) -> None:
    path = write(
        tmp_path / "a.txt",
        "3 Art's Delicatessen 12224 Ventura Blvd. Studio City\n7\tTab separated text\n",
    )
    records, reader = read(path)
    assert [(r.id, r.text) for r in records] == [
        ("3", "Art's Delicatessen 12224 Ventura Blvd. Studio City"),
        ("7", "Tab separated text"),
    ]
    assert reader.skipped.total == 0


def test_a_text_file_of_sentences_is_one_record_a_line_numbered(tmp_path: Path) -> None:
    """A .txt of sentences was read as ID TEXT: 'The' became the id of every line that starts
    with it, and the store kept one of them. First words that repeat (and hold no digit) are
    no ids: each line is then a record's whole text, numbered as a file with no id field."""
    sentences = "The quick brown fox\nA different line\n\nThe cat sat on the mat\nOk\n"
    records, reader = read(write(tmp_path / "notes.txt", sentences))
    assert [(r.id, r.text, r.line) for r in records] == [
        ("1", "The quick brown fox", 1),
        ("2", "A different line", 2),
        ("3", "The cat sat on the mat", 4),
        ("4", "Ok", 5),  # one word is a whole text here, not an id without one
    ]
    assert (reader.format, reader.numbered) == ("text", True)
    assert reader.fields_chosen() == (
        "notes.txt: each line is a record's text, numbered 1, 2, …: its first words are no ids "
        "('The' begins lines 1 and 4; --format lines reads ID TEXT)"
    )
    assert reader.skipped.reasons == {"empty line": 1}
    given, reader = read(tmp_path / "notes.txt", format="lines")  # as the user says
    assert [r.id for r in given] == ["The", "A", "The"] and reader.fields_chosen() is None
    # First words that never repeat are ids, and where none holds a digit the summary says so.
    records, reader = read(write(tmp_path / "h.txt", "Apple unveils a phone\nGoogle buys\n"))
    assert [(r.id, r.text) for r in records] == [("Apple", "unveils a phone"), ("Google", "buys")]
    assert reader.fields_chosen() == (
        "h.txt: each line's first word is its id, the rest its text ('Apple' at line 1; "
        "--format text reads each line whole)"
    )
    # Ids that repeat are ids still when they hold a digit (a file's updates of one record).
    ids = "r1 first text\nr2 other\nr1 second text\n"
    records, reader = read(write(tmp_path / "ids.txt", ids))
    assert reader.format == "lines" and [r.id for r in records] == ["r1", "r2", "r1"]
    assert reader.fields_chosen() is None  # ids as ids look: nothing to say


@pytest.mark.parametrize(
    ("sample", "found"),
    [
        ("id;name\n1;Jos\xe9 Garc\xeda\n2;Fran\xe7ois\n".encode("cp1252"), (2, 0xE9)),
        (b"id,name\n1,Ann\n2,\xc9mile Zola\n", (3, 0xC9)),  # a word that begins with one
        ("id,name\n1,Jos\xe9\n".encode(), None),  # UTF-8
        (b"id,name\n1,ascii only\n", None),
        ("1,Jos\xe9\n2,Jos".encode() + b"\xe9 damaged\n", None),  # UTF-8 with one bad line
        (b"1 good\n3 \xff\xfe broken\n", None),  # bytes that are no letters
    ],
)
def test_a_file_in_a_windows_code_page_is_told_from_a_damaged_utf8_one(
    sample: bytes, found: tuple[int, int] | None
) -> None:
    assert code_page_byte(sample) == found


def test_a_csv_saved_in_a_windows_code_page_is_refused_before_anything_is_written(
    tmp_path: Path,
) -> None:
    """Excel's plain "CSV" on Windows is Windows-1252: every record with an accent was
    skipped as undecodable (exit 0, 'store holds 2' of 4 people)."""
    people = "id;name;city\r\n1;Jos\xe9 Garc\xeda;M\xe1laga\r\n2;Jose Garcia;Malaga\r\n"
    people += "3;Fran\xe7ois M\xfcller;Z\xfcrich\r\n4;Anna Rossi;Roma\r\n"
    (tmp_path / "people.csv").write_bytes(people.encode("cp1252"))
    url = f"sqlite:///{tmp_path / 'p.db'}"
    refused = neardup("index", "people.csv", "--store", url, cwd=tmp_path)
    assert_user_error(refused, "people.csv is not UTF-8 but a Windows code page")
    assert "line 2 holds the byte 0xE9, 'é' in Windows-1252" in refused.stderr
    assert "give --encoding windows-1252" in refused.stderr
    command = "iconv -f WINDOWS-1252 -t UTF-8 people.csv > utf8-people.csv"
    assert refused.stderr.rstrip().endswith(command)
    assert not (tmp_path / "p.db").exists()
    (tmp_path / "utf8-people.csv").write_text(people, encoding="utf-8")  # what iconv writes
    indexed = neardup("index", "utf8-people.csv", "--store", url, cwd=tmp_path)
    assert "read 4, indexed 4, skipped none" in indexed.stderr


PEOPLE_IN_A_CODE_PAGE = [("1", "José García Málaga"), ("2", "François Müller Zürich")]


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("people.csv", "id;name;city\r\n1;José García;Málaga\r\n2;François Müller;Zürich\r\n"),
        ("people.tsv", "id\tname\tcity\n1\tJosé García\tMálaga\n2\tFrançois Müller\tZürich\n"),
        ("people.txt", "1 José García Málaga\n2 François Müller Zürich\n"),
        (
            "people.jsonl",
            '{"id": "1", "name": "José García Málaga"}\n'
            '{"id": "2", "name": "François Müller Zürich"}\n',
        ),
        (
            "people.json",
            '[{"id": "1", "name": "José García Málaga"},'
            ' {"id": "2", "name": "François Müller Zürich"}]',
        ),
    ],
)
def test_every_format_is_read_in_the_encoding_given(tmp_path: Path, name: str, text: str) -> None:
    """A file in a Windows code page was refused, with a command to convert it that Windows
    does not have: --encoding reads it as it is."""
    path = write(tmp_path / name, text.encode("cp1252"))
    reader = RecordReader(path, encoding="windows-1252")
    assert [(r.id, r.text) for r in reader] == PEOPLE_IN_A_CODE_PAGE
    assert reader.skipped.total == 0
    gzipped = write(tmp_path / f"{name}.gz", gzip.compress(text.encode("latin-1")))
    assert [(r.id, r.text) for r in RecordReader(gzipped, encoding="latin-1")] == (
        PEOPLE_IN_A_CODE_PAGE
    )


@pytest.mark.parametrize(
    ("encoding", "said"),
    [
        ("latin-1", "people.csv is UTF-8 (line 2 holds 'é', which --encoding iso8859-1 would "
         "read as 'Ã©'): leave it out"),
        ("utf-16", "--encoding utf-16 writes ASCII in bytes of its own"),
        ("klingon", "unknown encoding 'klingon'"),
        ("base64", "unknown encoding 'base64'"),
    ],
)  # fmt: skip
def test_an_encoding_that_would_misread_the_file_is_one_error(
    tmp_path: Path, encoding: str, said: str
) -> None:
    """A UTF-8 file read as Latin-1 would be stored with every accent garbled, and UTF-16
    splits no line where its bytes do."""
    write(tmp_path / "people.csv", "id,name\n1,José\n".encode())
    refused = neardup(
        "index", "people.csv", "--encoding", encoding, "--store", "s.db", cwd=tmp_path
    )
    assert_user_error(refused, said)
    assert not (tmp_path / "s.db").exists()
    assert [(r.id, r.text) for r in RecordReader(tmp_path / "people.csv", encoding="utf-8")] == [
        ("1", "José")
    ]


def test_dedup_writes_a_file_read_in_a_code_page_back_in_utf8(tmp_path: Path) -> None:
    """Everything neardup writes is UTF-8; a CSV with the mark a spreadsheet knows it by."""
    people = "id,name,city\r\n1,José Müller,Zürich\r\n2,José Müler,Zürich\r\n3,Anna,Roma\r\n"
    write(tmp_path / "people.csv", people.encode("cp1252"))
    flags = ["--encoding", "windows-1252", "--store", "s.db"]
    indexed = neardup("index", "people.csv", *flags, cwd=tmp_path)
    assert "read 3, indexed 3, skipped none" in indexed.stderr
    neardup("dedup", "people.csv", *flags, "-o", "kept.csv", cwd=tmp_path)
    kept = (tmp_path / "kept.csv").read_bytes()
    assert kept.decode("utf-8-sig").splitlines() == [
        "id,name,city", "1,José Müller,Zürich", "3,Anna,Roma"
    ]  # fmt: skip
    assert kept.startswith(codecs.BOM_UTF8)


def test_lines_skip_and_count_bad_lines_and_keep_the_rest(tmp_path: Path) -> None:
    data = b"1 good one\n\n2\n3 \xff\xfe broken\n   \n4 good two\r\n5 \n"
    records, reader = read(write(tmp_path / "a.txt", data))
    assert [r.id for r in records] == ["1", "4"]
    assert records[1].text == "good two"
    assert reader.skipped.reasons == {"empty line": 2, "id without text": 2, "undecodable bytes": 1}
    assert [line for line, _ in reader.skipped.examples] == [2, 3, 4, 5, 7]
    assert "line 4 (undecodable bytes)" in reader.skipped.summary()


def test_utf8_bom_is_not_part_of_the_first_id(tmp_path: Path) -> None:
    records, _ = read(write(tmp_path / "a.txt", "\ufeff1 text\n"))
    assert records[0].id == "1"


def test_tsv_with_id_and_text_fields(tmp_path: Path) -> None:
    path = write(
        tmp_path / "a.tsv",
        'key\ttitle\tbody\tprice\nk1\tNice flat\tBright "rooms"\t450\nk2\tStudio\t\t300\n',
    )
    records, _ = read(path, id_field="key", text_fields=["title", "body"])
    assert [(r.id, r.text) for r in records] == [
        ("k1", 'Nice flat Bright "rooms"'),
        ("k2", "Studio"),
    ]


EXCEL_TSV = (
    'id\ttext\tcity\r\n1\t"He said ""hi"" there"\tRoma\r\n'
    '2\t"first line\nsecond line"\tMilano\r\n3\t"a\ttab"\tTorino\r\n4\tplain text\tBari\r\n'
)


def test_a_tsv_quoted_as_excel_writes_it_is_read_by_its_quotes(tmp_path: Path) -> None:
    """Excel's "Text (Tab delimited)" quotes a field that holds a line break: record 2 became
    '2' with half its text and a record with the id 'second line"', without a word."""
    records, reader = read(write(tmp_path / "excel.tsv", EXCEL_TSV))
    assert [(r.id, r.text) for r in records] == [
        ("1", 'He said "hi" there Roma'),
        ("2", "first line\nsecond line Milano"),
        ("3", "a\ttab Torino"),
        ("4", "plain text Bari"),
    ]
    assert reader.skipped.total == 0
    assert "fields in quotes where they hold tabs or line breaks" in (reader.fields_chosen() or "")
    kept = neardup("dedup", "excel.tsv", "--store", "s.db", cwd=tmp_path)
    assert "no store at" in kept.stderr
    assert neardup("index", "excel.tsv", "--store", "s.db", cwd=tmp_path).returncode == 0
    kept = neardup("dedup", "excel.tsv", "--store", "s.db", cwd=tmp_path)
    assert kept.stdout.replace("\r\n", "\n") == EXCEL_TSV.replace("\r\n", "\n")


@pytest.mark.parametrize(
    "text",
    [
        'id\ttext\n1\t5" screen tv\n2\tplain "quoted" words\n3\t"whole"\n',  # no quoting
        'id\ttext\tcity\n1\t"Best flat\tRoma\n2\tsecond "one\tBari\n',  # stray quotes
    ],
)
def test_a_tsv_without_quoting_keeps_its_quotes_and_lines(tmp_path: Path, text: str) -> None:
    records, reader = read(write(tmp_path / "plain.tsv", text))
    assert not reader.quoted
    expected = [" ".join(line.split("\t")[1:]) for line in text.splitlines()[1:]]
    assert [r.text for r in records] == expected


def test_a_quoted_field_cut_by_the_sample_still_tells_quoting() -> None:
    """The first 64 KB may end inside a quoted field: what was read before it decides."""
    from neardup.readers import _quotes_breaks

    assert _quotes_breaks(b'id\ttext\n1\t"a\nb"\n2\t"cut he', "utf-8")
    assert not _quotes_breaks(b'id\ttext\n1\t"cut he', "utf-8")


@pytest.mark.parametrize(
    ("given", "said"),
    [
        ("https://example.com/people.jsonl.gz", "download it (curl -fLO https://example.com/"),
        ("s3://bucket/people.csv", "s3://bucket/people.csv is a URL: neardup reads files; copy"),
    ],
)
def test_a_url_given_for_a_file_says_how_to_read_it(given: str, said: str) -> None:
    """'cannot read https:/example.com/…: No such file or directory', the URL misspelt."""
    refused = neardup("index", given, "--store", "sqlite:///never.db")
    assert_user_error(refused, said)
    if given.startswith("https"):
        assert f"pipe it in: curl -fsSL {given} | neardup … - --format jsonl" in refused.stderr


def test_a_table_written_as_one_object_of_objects_is_one_error(tmp_path: Path) -> None:
    """pandas' DataFrame.to_json() writes a table by columns, one object of objects: it was
    read as one record, skipped as 'id is a list or an object', exit 0."""
    write(tmp_path / "frame.json", '{"id":{"0":1,"1":2},"name":{"0":"Anna Rossi","1":"Bob"}}')
    refused = neardup("index", "frame.json", "--store", "s.db", cwd=tmp_path)
    assert_user_error(refused, "frame.json is one object of objects with the same keys")
    assert "to_json(orient='records', lines=True)" in refused.stderr
    # One record whose fields are objects of their own is a record.
    write(tmp_path / "one.json", '{"name": {"first": "Anna"}, "address": {"city": "Roma"}}')
    assert [r.text for r in read(tmp_path / "one.json")[0]] == ["Anna Roma"]


def test_a_mongodb_export_is_read_by_its_ids_without_its_timestamps(tmp_path: Path) -> None:
    """mongoexport writes each document's `_id` as `{"$oid": …}` and dates as ISO 8601
    timestamps: the records were numbered, with the object id and the time in their text (two
    copies differed by both), and `--id-field _id` skipped every record as an object."""
    path = write(
        tmp_path / "people.jsonl",
        '{"_id": {"$oid": "5f8a1b2c3d4e5f6a7b8c9d0e"}, "name": "Anna Rossi", "city": "Roma", '
        '"created": {"$date": "2024-01-02T10:00:00Z"}}\n'
        '{"_id": {"$oid": "5f8a1b2c3d4e5f6a7b8c9d0f"}, "name": "Anna Rosi", "city": "Roma", '
        '"created": {"$date": "2024-01-05T11:30:00.000Z"}}\n',
    )
    records, reader = read(path)
    assert [(r.id, r.text) for r in records] == [
        ("5f8a1b2c3d4e5f6a7b8c9d0e", "Anna Rossi Roma"),
        ("5f8a1b2c3d4e5f6a7b8c9d0f", "Anna Rosi Roma"),
    ]
    assert reader.left_out == {"created": "times of day"}
    assert [r.id for r in read(path, id_field="_id")[0]] == [r.id for r in records]
    listed = write(tmp_path / "listed.jsonl", '{"_id": ["a", "b"], "name": "x"}\n')
    assert read(listed)[1].skipped.reasons == {"id is a list or an object": 1}


def test_csv_quoted_fields_with_newlines_and_record_numbers(tmp_path: Path) -> None:
    path = write(
        tmp_path / "a.csv",
        'name,address\n"Art\'s, Deli","12224 Ventura\nStudio City"\nBob,Main St\n',
    )
    records, _ = read(path)
    assert [(r.id, r.text) for r in records] == [
        ("1", "Art's, Deli 12224 Ventura\nStudio City"),
        ("2", "Bob Main St"),
    ]
    assert records[1].line == 4


def test_a_column_named_id_is_the_id(tmp_path: Path) -> None:
    records, _ = read(write(tmp_path / "a.csv", "text,id\nhello there,x9\n"))
    assert records == [Record("x9", "hello there", 2)]


def test_csv_skips_undecodable_empty_and_textless_rows(tmp_path: Path) -> None:
    data = b"id,text\na,fine\nb,\xff bad\n,\nc,\nd,also fine\n"
    records, reader = read(write(tmp_path / "a.csv", data))
    assert [r.id for r in records] == ["a", "d"]
    assert reader.skipped.reasons == {"undecodable bytes": 1, "empty line": 1, "no text": 1}


def test_tsv_has_no_quoting_and_skips_undecodable_empty_and_textless_rows(tmp_path: Path) -> None:
    data = (
        b'\xef\xbb\xbfid\ttext\r\na\t"quoted, kept"\r\nb\t\xff bad\n\t\nc\t\n'
        b"d\tcaf\xc3\xa9 \tone\textra\n"
    )
    records, reader = read(write(tmp_path / "a.tsv", data))
    assert [(r.id, r.text, r.line) for r in records] == [("a", '"quoted, kept"', 2)]
    assert reader.skipped.reasons == {
        "undecodable bytes": 1,
        "empty line": 1,
        "no text": 1,
        "more fields than the header": 1,  # d's "one" and "extra" have no field to go in
    }


def test_a_row_trailing_empty_fields_is_read_and_one_with_more_values_skipped(
    tmp_path: Path,
) -> None:
    """Spreadsheets leave trailing commas on some rows ('1,Anna Rossi,Roma,'): such rows were
    skipped as having more fields than the header, though the extra fields hold nothing."""
    rows = "id,name,city\n1,Anna Rossi,Roma,\n2,Marco,Milano, ,\n3,Luca,Roma,extra\n"
    records, reader = read(write(tmp_path / "a.csv", rows))
    assert [(r.id, r.text) for r in records] == [("1", "Anna Rossi Roma"), ("2", "Marco Milano")]
    assert reader.skipped.examples == [(4, "more fields than the header")]


@pytest.mark.parametrize(
    ("name", "data"),
    [
        ("a.tsv", "id\tname\r1\tAnna Rossi\r2\tMarco\r"),
        ("a.txt", "1 Anna Rossi\r2 Marco"),
        ("a.csv", "id,name\r1,Anna Rossi\r2,Marco\r"),
        ("a.jsonl", '{"id": 1, "name": "Anna Rossi"}\r{"id": 2, "name": "Marco"}\r'),
    ],
)
def test_lines_ended_by_carriage_returns_alone_are_lines(
    tmp_path: Path, name: str, data: str
) -> None:
    """Old Mac exports end lines with a carriage return alone: a tsv file read as one line
    indexed nothing, and a lines file one record of everything."""
    records, _ = read(write(tmp_path / name, data))
    assert [(r.id, r.text) for r in records] == [("1", "Anna Rossi"), ("2", "Marco")]


def test_a_title_above_the_header_is_one_line_before_anything_is_read(tmp_path: Path) -> None:
    """A report exported with its name on top: the title was the header, and every row was
    skipped as having more fields than it ('read 2, indexed 0')."""
    path = write(tmp_path / "a.csv", "Customers 2026\nid,name\n1,Anna Rossi\n2,Marco\n")
    with pytest.raises(NeardupError, match=r"line 1 holds one field \('Customers 2026'\) and "
                       r"the rows after it 2: a title above the header\?"):  # fmt: skip
        RecordReader(path)
    # One column whose texts now and then hold a comma is read, those rows counted.
    records, reader = read(write(tmp_path / "b.csv", "text\nhello world\na, b\nthird\n"))
    assert [r.text for r in records] == ["hello world", "third"]
    assert reader.skipped.reasons == {"more fields than the header": 1}


def test_missing_field_is_an_error_before_any_record(tmp_path: Path) -> None:
    path = write(tmp_path / "a.csv", "id,title\n1,x\n")
    with pytest.raises(NeardupError, match=r"no field 'body'.*'id', 'title'"):
        RecordReader(path, text_fields=["body"])
    with pytest.raises(NeardupError, match="no field 'key'"):
        RecordReader(path, id_field="key")


def test_jsonl(tmp_path: Path) -> None:
    lines = [
        json.dumps({"id": 1, "title": "First", "body": "text one"}),
        "not json",
        json.dumps(["a", "list"]),
        json.dumps({"id": 2, "title": "Second", "body": None}),
        json.dumps({"id": 3, "title": {}}),
        # An object's values are text, as a list's are: an address of street and city.
        json.dumps({"id": 4, "title": "Art's Deli", "body": {"street": "12224 Ventura Blvd",
                                                            "city": ["Studio City"]}}),
    ]  # fmt: skip
    records, reader = read(
        write(tmp_path / "a.jsonl", "\n".join(lines) + "\n"), text_fields=["title", "body"]
    )
    assert [(r.id, r.text) for r in records] == [
        ("1", "First text one"),
        ("2", "Second"),
        ("4", "Art's Deli 12224 Ventura Blvd Studio City"),
    ]
    assert reader.skipped.reasons == {"invalid JSON": 1, "not a JSON object": 1, "no text": 1}


def test_json_escapes_of_half_a_surrogate_pair_are_counted(tmp_path: Path) -> None:
    lines = [
        '{"id": "1", "text": "half \\ud800 of a pair"}',
        '{"id": "2\\uDFFF", "text": "in the id"}',
        '{"id": "3", "text": "in another field", "note": ["\\udc00"]}',
        '{"id": "4", "text": "a whole pair \\ud83d\\ude00 and \\\\ud800 written out"}',
    ]
    records, reader = read(write(tmp_path / "a.jsonl", "\n".join(lines) + "\n"))
    assert [(r.id, r.text) for r in records] == [
        ("4", "a whole pair \U0001f600 and \\ud800 written out")
    ]
    assert reader.skipped.reasons == {"half of a surrogate pair": 3}


def test_a_nested_field_is_named_by_its_path(tmp_path: Path) -> None:
    """`--text-field address.city`, as jq and Elasticsearch name a nested field, was "no
    field 'address.city'". A key that holds a dot is itself first; dedup writes each object
    back as it was read."""
    people = [
        {"id": 1, "name": "Anna Rossi", "address": {"street": "Via Roma 1", "city": "Milano"}},
        {"id": 2, "name": "Anna Rosi", "address": {"street": "Via Roma 1", "city": "Milan"}},
        {"id": 3, "name": "Luca Verdi", "address": {"city": "Roma"}, "address.city": "Rome"},
        {"id": 4, "name": "No Address", "address": "unknown"},
    ]
    path = write(tmp_path / "people.jsonl", "".join(json.dumps(p) + "\n" for p in people))
    records, _ = read(path, text_fields=["name", "address.city"])
    assert [(r.id, r.text) for r in records] == [
        ("1", "Anna Rossi Milano"),
        ("2", "Anna Rosi Milan"),
        ("3", "Luca Verdi Rome"),
        ("4", "No Address"),
    ]
    records, _ = read(path, id_field="address.city", text_fields=["name"])
    assert [r.id for r in records] == ["Milano", "Milan", "Rome"]
    with pytest.raises(NeardupError, match=r"no field 'address\.zip' in the first 4 JSON objects"):
        RecordReader(path, text_fields=["address.zip"])
    url = f"sqlite:///{tmp_path / 'people.db'}"
    api.index([path], url, text_fields=["name", "address.city"])
    kept = io.StringIO()
    api.dedup(path, kept, url, rules={"threshold": 0.3})
    assert [json.loads(line) for line in kept.getvalue().splitlines()] == [
        people[0],
        *people[2:],
    ]


def test_jsonl_missing_field_is_an_error(tmp_path: Path) -> None:
    path = write(tmp_path / "a.jsonl", '{"id": 1, "title": "x"}\n')
    with pytest.raises(NeardupError, match="no field 'body' in the first JSON object"):
        RecordReader(path, text_fields=["body"])


@pytest.mark.parametrize("name", ["a.jsonl", "a.json"])
def test_json_objects_need_not_hold_every_field(tmp_path: Path, name: str) -> None:
    """An object holds the fields it has values for (APIs leave out nulls): a field the first
    object lacked was refused when named, and left out of the text when not."""
    objects = [{"id": 1, "name": "Anna"}, {"id": 2, "name": "Marco", "note": "vip client"}]
    text = "\n".join(map(json.dumps, objects)) if name.endswith("l") else json.dumps(objects)
    write(tmp_path / name, text)
    records, reader = read(tmp_path / name)
    assert [(r.id, r.text) for r in records] == [("1", "Anna"), ("2", "Marco vip client")]
    assert reader.fields_chosen() == f"{name}: text from name, note (--text-field chooses)"
    named, _ = read(tmp_path / name, text_fields=["note"])
    assert [(r.id, r.text) for r in named] == [("2", "vip client")]  # 1 has no text: skipped
    with pytest.raises(NeardupError, match="no field 'body' in the first 2 JSON objects"):
        RecordReader(tmp_path / name, text_fields=["body"])


def test_gzip_and_format_detection(tmp_path: Path) -> None:
    path = tmp_path / "a.tsv.gz"
    with gzip.open(path, "wt") as out:
        out.write("id\ttext\n1\thello\n")
    assert detect_format(path) == "tsv"
    records, reader = read(path)
    assert records == [Record("1", "hello", 2)]
    assert reader.bytes_read == reader.size
    for name, expected in [
        ("x.txt", "lines"),
        ("x.CSV", "csv"),
        ("x.ndjson", "jsonl"),
        ("x.tab", "tsv"),
    ]:
        assert detect_format(name) == expected
    with pytest.raises(NeardupError, match="--format"):
        detect_format("x.parquet")


def test_format_flag_overrides_extension(tmp_path: Path) -> None:
    records, _ = read(write(tmp_path / "a.data", "id\ttext\n1\thello\n"), format="tsv")
    assert records[0].text == "hello"


def test_missing_file_and_directory(tmp_path: Path) -> None:
    with pytest.raises(NeardupError, match="cannot read"):
        RecordReader(tmp_path / "missing.txt")
    with pytest.raises(NeardupError, match="is a directory"):
        RecordReader(tmp_path, format="lines")


def test_field_flags_are_refused_for_line_files(tmp_path: Path) -> None:
    with pytest.raises(NeardupError, match="apply to tsv"):
        RecordReader(write(tmp_path / "a.txt", "1 x\n"), text_fields=["x"])


def test_reading_streams(tmp_path: Path) -> None:
    path = tmp_path / "big.txt"
    with path.open("w") as out:
        for i in range(50_000):
            out.write(f"{i} record number {i}\n")
    reader = RecordReader(path)
    iterator = iter(reader)
    next(iterator)
    # Only a read buffer has been consumed, not the whole file.
    assert reader.bytes_read < path.stat().st_size / 4
    assert sum(1 for _ in iterator) == 49_999


def test_a_quote_that_never_closes_swallows_nothing_after_it(tmp_path: Path) -> None:
    path = write(
        tmp_path / "a.csv",
        'id,text\n1,first good record\n2,"unterminated quote\n3,third good\n4,"multi\nline"\n',
    )
    records, reader = read(path)
    assert [(r.id, r.line) for r in records] == [("1", 2), ("3", 4), ("4", 5)]
    assert records[2].text == "multi\nline"
    assert reader.skipped.examples == [(3, "broken quoting (a quote that does not close?)")]


def test_text_after_a_closing_quote_is_a_counted_skip(tmp_path: Path) -> None:
    records, reader = read(write(tmp_path / "a.csv", 'id,text\n1,"a"b\n2,fine "quoted" words\n'))
    assert [(r.id, r.text) for r in records] == [("2", 'fine "quoted" words')]
    assert reader.skipped.total == 1


def test_a_truncated_gzip_keeps_what_came_before(tmp_path: Path) -> None:
    data = gzip.compress("".join(f"{i} record number {i}\n" for i in range(20_000)).encode())
    records, reader = read(write(tmp_path / "a.txt.gz", data[: len(data) // 2]))
    assert 1000 < len(records) < 20_000
    assert [r.id for r in records] == [str(i) for i in range(len(records))]
    ((line, reason),) = reader.skipped.examples
    assert line == len(records) + 1 and "ends early" in reason
    assert reader.damaged == f"damaged from line {line} (the compressed data ends early)"
    # Every record kept is whole: the last one's text was not cut by the damage.
    assert records[-1].text == f"record number {len(records) - 1}"
    records, reader = read(write(tmp_path / "b.txt.gz", data[:10] + b"\xff" * 200))
    assert records == [] and "corrupt" in reader.skipped.examples[0][1]


@pytest.mark.parametrize("name", ["a.txt.gz", "a.csv.gz", "a.jsonl.gz"])
def test_a_gzip_cut_within_its_first_rows_keeps_them(tmp_path: Path, name: str) -> None:
    """The first 200 rows are read ahead (to choose the text fields, or to tell ids from
    text): damage among them lost every record before it."""
    rows = {
        "a.txt.gz": [f"{i} record number {i}" for i in range(100)],
        "a.csv.gz": ["id,text", *(f"{i},record number {i}" for i in range(100))],
        "a.jsonl.gz": [json.dumps({"id": i, "text": f"record number {i}"}) for i in range(100)],
    }[name]
    data = gzip.compress(("\n".join(rows) + "\n").encode())
    records, reader = read(write(tmp_path / name, data[: len(data) * 2 // 3]))
    assert 5 < len(records) < 100
    assert [r.text for r in records] == [f"record number {i}" for i in range(len(records))]
    assert reader.damaged and "ends early" in reader.damaged


def test_a_json_array_is_read_an_object_a_record(tmp_path: Path, monkeypatch) -> None:
    """An API's or a database's export: one array of objects. Read a few characters at a time
    here, so that objects, strings and escapes are cut at every place between two reads."""
    monkeypatch.setattr("neardup.readers.JSON_PART", 7)
    people = [
        {"id": 1, "name": "Anna Rossi", "address": {"street": "Via Roma 12", "city": "Roma"}},
        {"id": "x2", "name": 'Jos\u00e9 "Pepe" Garc\u00eda', "address": ["a", "b"]},
        {"id": 3, "name": "Line\nbreak", "address": 4.5},
    ]
    text = json.dumps(["skipped: no object", *people], indent=2)
    records, reader = read(write(tmp_path / "people.json", text), id_field="id")
    assert [(r.id, r.text) for r in records] == [
        ("1", "Anna Rossi Via Roma 12 Roma"),
        ("x2", 'José "Pepe" García a b'),
        ("3", "Line\nbreak 4.5"),
    ]
    assert [r.line for r in records] == [3, 11, 19]  # where each object starts
    assert reader.skipped.reasons == {"not a JSON object": 1}
    # Objects one after another, as JSON lines named .json are, read the same way, and so are
    # objects with commas between them and no array around (as some exports write them).
    for joint in ("\n", ",\n"):
        lines = joint.join(json.dumps(p) for p in people) + joint
        again, _ = read(write(tmp_path / "lines.json", lines), id_field="id")
        assert [(r.id, r.text) for r in again] == [(r.id, r.text) for r in records]


def test_a_json_object_around_an_array_of_records_is_read_as_that_array(tmp_path: Path) -> None:
    """APIs answer {"data": [...], "count": …}: read as one record holding every record's text."""
    wrapped = {"count": 2, "data": [{"id": 1, "t": "Anna Rossi"}, {"id": 2, "t": "Marco"}],
               "meta": {"page": 1}, "tags": ["a"]}  # fmt: skip
    records, reader = read(write(tmp_path / "a.json", json.dumps(wrapped)), id_field="id")
    assert [(r.id, r.text) for r in records] == [("1", "Anna Rossi"), ("2", "Marco")]
    assert reader.fields_chosen() == (
        "a.json: the records of its 'data' array; text from t (--text-field chooses)"
    )
    # Two arrays of objects, or one object of records among others, are read as they are.
    two = {"a": [{"id": 1, "t": "x"}], "b": [{"id": 2, "t": "y"}]}
    records, _ = read(write(tmp_path / "b.json", json.dumps(two)), text_fields=["a"])
    assert [r.text for r in records] == ["1 x"]  # one record: which array would be a guess
    objects = json.dumps({"id": 1, "t": "x", "list": [{"k": "v"}]}) + "\n" + '{"id": 2}'
    records, _ = read(write(tmp_path / "c.json", objects), id_field="id", text_fields=["t"])
    assert [r.id for r in records] == ["1"]


def test_json_values_are_read_as_json_spells_them(tmp_path: Path) -> None:
    objects = '{"id": true, "t": [false, 1.5, null, "x"]}\n{"id": 7, "t": "y"}\n'
    records, _ = read(write(tmp_path / "a.jsonl", objects), id_field="id")
    assert [(r.id, r.text) for r in records] == [("true", "false 1.5 x"), ("7", "y")]


@pytest.mark.parametrize("name", ["a.jsonl", "a.json"])
def test_json_numbers_are_read_as_the_file_writes_them(tmp_path: Path, name: str) -> None:
    """A price 19.90 was read as Python spells the float, 19.9 (the same record in a CSV file
    then differed by a character), and an id 1e3 as 1000.0, which no id of the file is."""
    objects = ['{"id": 1e3, "t": "chair", "price": 19.90}', '{"id": 1.50, "t": "desk"}']
    text = "\n".join(objects) if name.endswith("l") else f"[{', '.join(objects)}]"
    records, _ = read(write(tmp_path / name, text), id_field="id")
    assert [(r.id, r.text) for r in records] == [("1e3", "chair 19.90"), ("1.50", "desk")]


def test_a_json_value_that_is_no_text_is_skipped_and_counted(tmp_path: Path) -> None:
    data = (
        b'[{"id": 1, "t": "half \\ud800 a pair"},\n{"id": 2, "t": "bad \xff\xfe bytes"},\n'
        b'{"id": 3, "t": "\\ud83d\\ude00 a whole pair"}]'
    )
    records, reader = read(write(tmp_path / "a.json", data), id_field="id")
    assert [(r.id, r.text) for r in records] == [("3", "\U0001f600 a whole pair")]
    assert reader.skipped.reasons == {"undecodable bytes or half of a surrogate pair": 2}


@pytest.mark.parametrize(
    ("text", "kept", "damage"),
    [
        ('[{"id": 1, "t": "a b"},\n{"id": 2, "t": "c"}\n', 2, "line 3 (the array does not close)"),
        (
            '[{"id": 1, "t": "a b"},\n{"id": 2 "t": "c"},\n{"id": 3, "t": "d"}]',
            1,
            "line 2 (invalid",
        ),
        ('[{"id": 1, "t": "a b"}]\n\n{"id": 2}', 1, "line 3 (more after the array's end)"),
    ],
)
def test_json_that_breaks_off_keeps_the_objects_before_it(
    tmp_path: Path, text: str, kept: int, damage: str
) -> None:
    records, reader = read(write(tmp_path / "a.json", text), id_field="id")
    assert [r.id for r in records] == [str(n) for n in range(1, kept + 1)]
    assert reader.damaged and reader.damaged.startswith(f"damaged from {damage}")


@pytest.mark.parametrize(
    ("data", "damage"),
    [
        (
            gzip.compress(b"id,text\n" + b"1,a record\n" * 2000)[:40],
            "the compressed data ends early",
        ),
        (b"\x1f\x8b\x08\x00garbage-not-gzip-at-all", "corrupt compressed data"),
    ],
)
def test_a_piped_gzip_damaged_before_its_first_record_is_one_line(
    tmp_path: Path, data: bytes, damage: str
) -> None:
    """Read from a pipe, its first bytes are sampled from the stream itself: the damage
    raised there was a traceback."""
    url = f"sqlite:///{tmp_path / 'p.db'}"
    command = [sys.executable, "-m", "neardup.cli", "index", "-", "--format", "csv", "--store", url]
    result = subprocess.run(command, input=data, capture_output=True, check=False)
    stderr = result.stderr.decode()
    assert result.returncode == 2 and "Traceback" not in stderr
    assert stderr.strip().splitlines()[-1] == (
        f"neardup: error: standard input is damaged from line 1 ({damage}): the records "
        "before it are indexed"
    )


def test_indexing_a_damaged_file_keeps_what_came_before_and_exits_non_zero(tmp_path: Path) -> None:
    data = gzip.compress("".join(f"{i} record number {i}\n" for i in range(20_000)).encode())
    write(tmp_path / "cut.txt.gz", data[: len(data) // 2])
    url = f"sqlite:///{tmp_path / 'cut.db'}"
    result = neardup("index", str(tmp_path / "cut.txt.gz"), "--store", url)
    assert result.returncode == 2
    last = result.stderr.strip().splitlines()[-1]
    assert re.fullmatch(
        r"neardup: error: .*cut\.txt\.gz is damaged from line \d+ \(the compressed data ends "
        r"early\): the records before it are indexed",
        last,
    )
    assert 1000 < api.stats(url)["documents"] < 20_000
    write(tmp_path / "fake.txt.gz", b"not gzip at all\n")
    assert neardup("index", str(tmp_path / "fake.txt.gz"), "--store", url).returncode == 2


def test_every_command_that_reads_a_damaged_file_says_so_and_exits_non_zero(
    tmp_path: Path,
) -> None:
    """A file cut short: lookup --file and link looked up the records before the damage and
    said nothing, exit 0; dedup wrote back a file that lacked every record after it, exit 0;
    a report's texts from it left the records after it without one, with a note to give
    every file the store was indexed from."""
    rng = random.Random(3)
    words = [f"w{rng.randrange(10**9)}" for _ in range(40_000)]
    whole = "".join(f"{i} {' '.join(words[i * 8 : i * 8 + 8])}\n" for i in range(5_000)).encode()
    write(tmp_path / "whole.txt", whole)
    compressed = gzip.compress(whole, mtime=0)
    write(tmp_path / "cut.txt.gz", compressed[: len(compressed) // 2])
    store = ["--store", "s.db"]
    assert neardup("index", "whole.txt", *store, cwd=tmp_path).returncode == 0
    done = {
        ("lookup", "--file", "cut.txt.gz", "-o", "seen.tsv"): "the records before it are looked up",
        ("link", "cut.txt.gz", "-o", "links.tsv"): "the records before it are linked",
        ("dedup", "cut.txt.gz", "-o", "kept.txt"): "not written back, as the records after it",
        ("report", "--texts-from", "cut.txt.gz", "-o", "texts.tsv"): "the texts of the records",
    }
    for command, said in done.items():
        result = neardup(*command, *store, cwd=tmp_path)
        assert result.returncode == 2, command
        assert re.search(
            r"neardup: error: cut\.txt\.gz is damaged from line \d+ \(the compressed data ends "
            rf"early\): {said}",
            result.stderr,
        ), result.stderr
    looked_up = neardup("lookup", "--file", "cut.txt.gz", *store, cwd=tmp_path).stderr
    assert "skipped 1 (1 the rest of the file: the compressed data ends early)" in looked_up
    assert (tmp_path / "seen.tsv").exists() and not (tmp_path / "kept.txt").exists()
    assert not (tmp_path / "texts.tsv").exists()
    # Rows lookup --file skips are counted, as index counts them: they were lost without a word.
    write(tmp_path / "bad.csv", 'id,text\n1,x\n2,\n3,"never closed\n')
    skipped = neardup("lookup", "--file", "bad.csv", *store, cwd=tmp_path)
    assert "of 1 record looked up, 0 have stored duplicates (0 lines); skipped 2 (" in (
        skipped.stderr
    )


_PEOPLE = '{"id": 1, "t": "Ann Lee"}\n{"id": 2, "t": "Bob Stone"}\n'


@pytest.mark.parametrize(
    ("name", "whole", "cut_at", "said"),
    [
        ("people.csv", "id,name,city\n1,Ann Lee,Rome\n2,Bob Stone,Pisa\n", "2,Bob", "2 of the"),
        ("people.tsv", "id\tname\tcity\n1\tAnn Lee\tRome\n2\tBob Stone\tPisa\n", "2\tBob", "2 of"),
        ("people.csv", 'id,note\n1,"one line"\n2,"two\nlines"\n', '2,"two\nli', "inside a quoted"),
        ("people.jsonl", _PEOPLE, '{"id": 2, "t', "no whole JSON"),
    ],
)  # fmt: skip
def test_a_file_cut_short_in_its_last_record_keeps_the_records_before_and_says_so(
    tmp_path: Path, name: str, whole: str, cut_at: str, said: str
) -> None:
    """A CSV that arrived cut short ('2,Bob'): its last record was stored as 'Bob', without
    its city, exit 0. A last line with no line break that is no whole record is where the
    file breaks off, as a cut .gz or JSON array does; a file with no line break at its end
    but whole records reads as before."""
    write(tmp_path / name, whole[: whole.index(cut_at) + len(cut_at)])
    store = ["--store", "s.db"]
    cut = neardup("index", name, *store, cwd=tmp_path)
    assert cut.returncode == 2 and api.stats(f"sqlite:///{tmp_path / 's.db'}")["documents"] == 1
    assert re.search(
        rf"{name} is damaged from line \d \(cut short with no line break at its end: .*{said}",
        cut.stderr,
    ), cut.stderr
    refused = neardup("dedup", name, *store, "-o", f"kept{Path(name).suffix}", cwd=tmp_path)
    assert refused.returncode == 2 and "not written back" in refused.stderr
    write(tmp_path / name, whole.rstrip("\n"))  # whole, with no line break at its end
    assert neardup("index", name, *store, cwd=tmp_path).returncode == 0
    assert api.stats(f"sqlite:///{tmp_path / 's.db'}")["documents"] == 2


def test_a_file_read_in_another_format_is_not_taken_for_one_cut_short(tmp_path: Path) -> None:
    """A pretty-printed JSON object read as JSON lines ended on a line with no line break:
    "damaged from line 9 (cut short…)", where the advice was to give its format; a CSV read
    as tsv was one field of whole lines, indexed without a word."""
    write(tmp_path / "one.json", json.dumps({"id": 1, "t": "Ann Lee", "more": [1, 2]}, indent=1))
    as_lines = neardup("index", "one.json", "--format", "jsonl", "--store", "s.db", cwd=tmp_path)
    assert as_lines.returncode == 2 and "cut short" not in as_lines.stderr
    assert "read the files with their --format" in as_lines.stderr
    write(tmp_path / "people.csv", "id,name,city\n1,Ann Lee,Rome\n")
    as_tsv = neardup("index", "people.csv", "--format", "tsv", "--store", "s.db", cwd=tmp_path)
    assert_user_error(as_tsv, "its header is one tab-separated field that holds commas")


@pytest.mark.parametrize(
    ("name", "content"),
    [("empty.csv", ""), ("header.csv", "id,text\n"), ("empty.jsonl", ""), ("empty.txt", "")],
)
def test_empty_and_header_only_files_have_no_records(tmp_path: Path, name: str, content: str):
    records, reader = read(write(tmp_path / name, content))
    assert records == [] and reader.skipped.total == 0
    assert "text from  " not in (reader.fields_chosen() or "")  # an empty file has no fields


def test_huge_fields_and_lines_are_records_like_any_other(tmp_path: Path) -> None:
    big = "x" * 1_200_000
    records, _ = read(write(tmp_path / "a.csv", f"id,text\n1,good\n2,{big}\n3,good too\n"))
    assert [len(r.text) for r in records] == [4, 1_200_000, 8]
    line = "word " * 10_000_000  # a 50 MB line
    records, _ = read(write(tmp_path / "b.txt", f"1 good\n2 {line}\n3 good too\n"))
    assert [r.id for r in records] == ["1", "2", "3"] and len(records[1].text) > 49_000_000


def test_json_lines_of_every_wrong_kind_are_counted(tmp_path: Path) -> None:
    lines = [
        "[1, 2]",
        "5",
        '"text"',
        "null",
        '{"id": "1", "text": null}',
        '{"id": "2", "text": "good two"}',
        "not json",
        '{"id": null, "text": "x"}',
        '{"id": "3", "text": {"an": {"empty": []}}}',
        '{"id": "4", "text": "good four"}',
        '{"id": "5", "text": [null, [], {"n": null}]}',
        '{"id": [5], "text": "an id in a list"}',
        '{"id": {"n": 6}, "text": "an id in an object"}',
    ]
    records, reader = read(write(tmp_path / "a.jsonl", "\n".join(lines) + "\n"))
    assert [r.id for r in records] == ["2", "4"]
    assert reader.skipped.reasons == {
        "not a JSON object": 4,
        "no text": 3,
        "invalid JSON": 1,
        "empty id": 1,
        "id is a list or an object": 2,
    }


def test_without_named_text_fields_urls_and_times_of_day_are_left_out(tmp_path: Path) -> None:
    rows = [
        f"{i}\tFlat {i} near the station\t{500 + i}\t12 ottobre, 11:{i % 60:02d}\thttps://ads.example/{i}"
        for i in range(300)
    ]
    header = "id\ttitle\tprice\ttimestamp\turl\n"
    records, reader = read(write(tmp_path / "ads.tsv", header + "\n".join(rows) + "\n"))
    assert len(records) == 300
    assert records[7].text == "Flat 7 near the station 507"  # numbers stay: they identify
    assert reader.left_out == {"timestamp": "times of day", "url": "URLs"}
    assert reader.fields_chosen() == (
        "ads.tsv: text from title, price; left out timestamp (times of day), url (URLs) "
        "(--text-field chooses)"
    )
    named, reader = read(tmp_path / "ads.tsv", text_fields=["title", "url"])
    assert named[7].text == "Flat 7 near the station https://ads.example/7"
    assert reader.fields_chosen() is None


def test_a_csv_file_separated_by_semicolons_is_read_by_its_fields(tmp_path: Path) -> None:
    """Spreadsheets export CSV with semicolons where the comma is the decimal separator: read
    with commas, the header was one field and each whole line the text. A comma inside a field
    of such a file, or a semicolon inside a comma file's, is a character like any other."""
    semicolons = (
        'sku;title;price\n12345;Art\'s Deli, Studio City;10,50\n12346;"Bella; Napoli";9,90\n'
    )
    records, reader = read(write(tmp_path / "shop.csv", semicolons), id_field="sku")
    assert [(r.id, r.text) for r in records] == [
        ("12345", "Art's Deli, Studio City 10,50"),
        ("12346", "Bella; Napoli 9,90"),
    ]
    assert reader.delimiter == ";"
    assert reader.fields_chosen() == (
        "shop.csv: fields separated by semicolons; text from title, price (--text-field chooses)"
    )
    commas = 'sku,title\n1,"Art\'s Deli; Studio City"\n'
    records, reader = read(write(tmp_path / "commas.csv", commas), id_field="sku")
    assert [(r.id, r.text) for r in records] == [("1", "Art's Deli; Studio City")]
    assert reader.delimiter == ","


def test_an_id_column_named_as_spreadsheets_name_it_is_the_id(tmp_path: Path) -> None:
    """A header 'ID,Name,City' made the ids record numbers and put each ID in the text, so two
    copies of one person differed by their ids (similarity 0.56 instead of 0.75)."""
    records, reader = read(write(tmp_path / "a.csv", "ID,Name\n1001,Anna Rossi\n"))
    assert [(r.id, r.text) for r in records] == [("1001", "Anna Rossi")]
    assert (reader.id_field, reader.numbered) == ("ID", False)
    both = "Id,id,name\n7,1001,Anna Rossi\n"  # 'id' itself first
    records, _ = read(write(tmp_path / "b.csv", both))
    assert [(r.id, r.text) for r in records] == [("1001", "7 Anna Rossi")]
    records, _ = read(write(tmp_path / "c.csv", "identity,name\nx,Anna\n"))
    assert [(r.id, r.text) for r in records] == [("1", "x Anna")]
    # A field named as ids of some kind is not taken for the id (a customer's id names many
    # orders), but the summary points to it: its values are in the text.
    records, reader = read(write(tmp_path / "d.csv", '"Customer ID",Name\n1001,Anna\n'))
    assert [(r.id, r.text) for r in records] == [("1", "1001 Anna")]
    assert reader.fields_chosen() == (
        "d.csv: text from Customer ID, Name (--text-field chooses); no field is named id, so "
        "records are numbered 1, 2, …: --id-field 'Customer ID' names a field of ids"
    )
    _, reader = read(write(tmp_path / "e.csv", "name,paid,valid\nAnna,1,2\n"))
    assert "--id-field" not in (reader.fields_chosen() or "")


def test_columns_with_no_name_are_named_by_their_place(tmp_path: Path) -> None:
    """Two header cells left blank were one field: the second column's values replaced the
    first's ('Roma' lost), where a repeated name is refused."""
    records, reader = read(write(tmp_path / "a.csv", "id,name,,\n1,Anna Rossi,Roma,IT\n"))
    assert [(r.id, r.text) for r in records] == [("1", "Anna Rossi Roma IT")]
    assert (reader.fields, reader.header) == (["id", "name", "column 3", "column 4"],
                                              ["id", "name", "", ""])  # fmt: skip
    assert (
        reader.fields_chosen() == "a.csv: text from name, column 3, column 4 (--text-field chooses)"
    )


def test_a_wide_file_summary_names_its_first_and_last_text_fields(tmp_path: Path) -> None:
    header = ",".join(["id", *(f"col{i}" for i in range(60))])
    row = ",".join(["1", *(f"v{i}" for i in range(60))])
    records, reader = read(write(tmp_path / "wide.csv", f"{header}\n{row}\n"))
    assert records[0].text == " ".join(f"v{i}" for i in range(60))  # every field, all the same
    assert reader.fields_chosen() == (
        "wide.csv: text from col0, col1, col2, col3, col4, col5, col6, col7, col8, col9, …, "
        "col59 (60 fields) (--text-field chooses)"
    )


def test_a_tab_separated_file_named_csv_is_read_by_its_fields(tmp_path: Path) -> None:
    """A TSV saved under a .csv name was read with commas: one field, the id column lost and
    every line whole as the text. A header that commas leave whole and tabs split is tabs."""
    tabs = "sku\ttitle\tprice\n12345\tArt's Deli, Studio City\t10.50\n"
    records, reader = read(write(tmp_path / "shop.csv", tabs), id_field="sku")
    assert [(r.id, r.text) for r in records] == [("12345", "Art's Deli, Studio City 10.50")]
    assert reader.delimiter == "\t"
    assert reader.fields_chosen() == (
        "shop.csv: fields separated by tabs; text from title, price (--text-field chooses)"
    )
    # A header of commas stays commas, whatever its fields hold.
    records, reader = read(write(tmp_path / "c.csv", 'sku,"a\tb"\n1,x\n'), id_field="sku")
    assert reader.delimiter == "," and records[0].text == "x"


UNICODE_TEXT = (
    "id\tname\tcity\r\n1\tJosé Müller\tZürich\r\n2\tJosé Müler\tZürich\r\n3\tAnna 北京\tRoma\r\n"
)
UNICODE_RECORDS = [("1", "José Müller Zürich"), ("2", "José Müler Zürich"), ("3", "Anna 北京 Roma")]


def marked(text: str, encoding: str) -> bytes:
    """``text`` in ``encoding`` after its byte order mark, as Windows writes it (Python's
    utf-16 and utf-32 write a mark of their own)."""
    mark = {"utf-16-be": codecs.BOM_UTF16_BE, "utf-32-be": codecs.BOM_UTF32_BE}
    return mark.get(encoding, b"") + text.encode(encoding)


def as_format(name: str, text: str) -> str:
    """UNICODE_TEXT's rows as a file of ``name``'s format."""
    if ".csv" in name:
        return text.replace("\t", ",")
    if ".jsonl" in name:
        rows = [line.split("\t") for line in text.splitlines()[1:]]
        return "".join(json.dumps({"id": i, "name": n, "city": c}) + "\n" for i, n, c in rows)
    return text


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-be", "utf-32", "utf-32-be"])
@pytest.mark.parametrize("name", ["people.tsv", "people.tsv.gz", "people.csv", "people.jsonl"])
def test_a_file_in_utf16_or_utf32_is_read_by_its_byte_order_mark(
    tmp_path: Path, name: str, encoding: str
) -> None:
    """A spreadsheet's "Unicode text" is UTF-16 with its byte order mark: it was refused, and
    before that indexed as nothing, every line skipped as undecodable. Its records are read
    as a UTF-8 file's are, and progress reaches the file's own size."""
    data = marked(as_format(name, UNICODE_TEXT), encoding)
    path = write(tmp_path / name, gzip.compress(data) if name.endswith(".gz") else data)
    records, reader = read(path)
    assert [(r.id, r.text) for r in records] == UNICODE_RECORDS
    assert reader.skipped.total == 0
    assert reader.bytes_read == reader.size == path.stat().st_size


def test_a_utf16_file_cut_inside_a_character_skips_that_line_and_counts_it(
    tmp_path: Path,
) -> None:
    """Half of a UTF-16 character where the file breaks off is no character: its line is
    counted as undecodable, as a UTF-8 file's, and the lines before it are read."""
    records, reader = read(write(tmp_path / "people.tsv", marked(UNICODE_TEXT, "utf-16")[:-3]))
    assert [(r.id, r.text) for r in records] == UNICODE_RECORDS[:2]
    assert reader.skipped.summary() == "1 (1 undecodable bytes); first: line 4 (undecodable bytes)"


def test_a_utf16_file_indexes_and_is_written_back_in_utf8(tmp_path: Path) -> None:
    """Whatever neardup writes is UTF-8: dedup writes such a file back in it, with the mark a
    spreadsheet knows it by and the file's own line ends."""
    write(tmp_path / "people.tsv", marked(UNICODE_TEXT, "utf-16"))
    indexed = neardup("index", "people.tsv", "--store", "s.db", cwd=tmp_path)
    assert "read 3, indexed 3, skipped none" in indexed.stderr
    neardup("dedup", "people.tsv", "--store", "s.db", "-o", "kept.tsv", cwd=tmp_path)
    kept = (tmp_path / "kept.tsv").read_bytes()
    lines = UNICODE_TEXT.splitlines(keepends=True)
    assert kept == codecs.BOM_UTF8 + "".join([lines[0], lines[1], lines[3]]).encode()


def test_an_encoding_given_for_a_file_marked_utf16_is_one_error(tmp_path: Path) -> None:
    write(tmp_path / "people.tsv", marked(UNICODE_TEXT, "utf-16"))
    refused = neardup(
        "index", "people.tsv", "--encoding", "latin-1", "--store", "s.db", cwd=tmp_path
    )
    assert_user_error(
        refused,
        "people.tsv is UTF-16 (it starts with its byte order mark), which neardup reads as it "
        "is: leave --encoding out",
    )
    assert not (tmp_path / "s.db").exists()


SAVE_AS_TEXT = "save it as CSV UTF-8"


@pytest.mark.parametrize(
    ("name", "start", "said", "advice"),
    [
        (
            "prices.xlsx",
            b"PK\x03\x04\x14\x00\x06\x00\x08\x00\x00\x00!\x00",
            "a zip archive",
            SAVE_AS_TEXT,
        ),
        (
            "prices.xls",
            b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1\x00\x00",
            "an Office document",
            SAVE_AS_TEXT,
        ),
        ("prices.pdf", b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n", "a PDF document", SAVE_AS_TEXT),
        # A web application's "Excel" export: an HTML table named .xls, read as CSV before.
        ("export.xls", b"\n  <HTML><body><table>", "an HTML page or an XML document", SAVE_AS_TEXT),
        ("sheet.csv", b'\xef\xbb\xbf<?xml version="1.0"?>', "an HTML page or an XML", SAVE_AS_TEXT),
        ("prices.parquet", b"PAR1\x15\x04\x15", "a Parquet file", "export it as CSV or JSON lines"),
        ("prices.db", b"SQLite format 3\x00\x10\x00", "a SQLite database", "named with --store"),
        (
            "prices.csv.bz2",
            bz2.compress(b"id,name\n1,Art's Deli\n"),
            "compressed with bzip2",
            "(bunzip2 -k prices.csv.bz2)",
        ),
        (
            "prices.csv.xz",
            lzma.compress(b"id,name\n1,Art's Deli\n"),
            "compressed with xz",
            "(unxz -k prices.csv.xz)",
        ),
        (
            "prices.csv.zst",
            b"\x28\xb5\x2f\xfd\x24\x10",
            "compressed with zstd",
            "(unzstd prices.csv.zst)",
        ),
    ],
)
@pytest.mark.parametrize("flags", [[], ["--format", "csv"]], ids=["named", "as-csv"])
def test_a_spreadsheet_document_or_archive_given_as_records_is_one_error(
    tmp_path: Path, name: str, start: bytes, said: str, advice: str, flags: list[str]
) -> None:
    """A workbook as Excel saves it, read as CSV, made a header of its zip's bytes and indexed
    nothing with exit status 0; without --format it asked for one, which no format reads. A
    Parquet export or a bzip2 download was read so too, and a store given in place of records
    was said to have a header of bytes that are not UTF-8."""
    write(tmp_path / name, start + bytes(range(256)) * 4)
    refused = neardup("index", name, *flags, "--store", "s.db", cwd=tmp_path)
    assert_user_error(refused, f"{name} is {said}")
    assert "not a record file" in refused.stderr and advice in refused.stderr
    assert not (tmp_path / "s.db").exists()


def test_text_that_starts_as_a_parquet_file_does_is_read(tmp_path: Path) -> None:
    """Parquet's first bytes are PAR1 and a page header: a lines file whose first id is PAR1
    is text."""
    write(tmp_path / "codes.txt", b"PAR1 parrot cage large\nPAR2 parrot cage small\n")
    records, _ = read(tmp_path / "codes.txt")
    assert [r.id for r in records] == ["PAR1", "PAR2"]


def test_a_compressed_file_is_read_whatever_its_name_says(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A download saved without its .gz, or piped in compressed, is read as the .gz is."""
    text = "id,name\n1,Art's Deli\n2,Arts Deli\n"
    write(tmp_path / "shop.csv", gzip.compress(text.encode()))
    records, reader = read(tmp_path / "shop.csv", id_field="id")
    assert [(r.id, r.text) for r in records] == [("1", "Art's Deli"), ("2", "Arts Deli")]
    assert reader.bytes_read == reader.size
    piped = gzip.compress(b"1 Art's Deli\n2 Arts Deli\n")
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BufferedReader(io.BytesIO(piped))))
    records, _ = read(Path("-"))
    assert [(r.id, r.text) for r in records] == [("1", "Art's Deli"), ("2", "Arts Deli")]


@pytest.mark.parametrize(
    ("piped", "said"),
    [
        ("id,name,city\np1,Kenneth Robles,Mccallstad\n", "a CSV table"),
        # Names in the first column, so no later line's first word holds a comma: its header
        # was stored as a record's text.
        ("name,city\nAnn Lee,Rome\nAnn Le,Rome\n", "a CSV table"),
        ('name,address\nAnn Lee,"4 Elm St, Rome"\nBob Stone,"9 Oak Rd, Pisa"\n', "a CSV table"),
        ("id\tname\tcity\np1\tKenneth Robles\tMccallstad\n", "a TSV table"),
        ('{"id": "p1", "name": "Kenneth Robles"}\n', "JSON"),
        ("1 Smith, John at 5 Elm St\n2 Smith, Jon at 5 Elm Street\n", None),  # lines
        ("1 Lee, Ann, Rome\n2 Lee, Anne, Rome\n3 Stone, Bob, Pisa\n", None),
        ("1\tArt's Deli\n2\tArts Deli\n", None),  # lines of ID<TAB>TEXT
    ],
)
def test_a_table_piped_in_without_its_format_is_one_error(
    piped: str, said: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`cat people.csv | neardup index -` read lines of ID TEXT: 3,000 records with ids such
    as 'p00000000,Kenneth', the header one of them, exit 0."""
    data = io.BytesIO(piped.encode())
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BufferedReader(data)))
    if said is None:
        assert len(read(Path("-"))[0]) == piped.count("\n")
        return
    with pytest.raises(NeardupError, match=f"^standard input looks like {said} \\(its first"):
        RecordReader(Path("-"))


def test_a_spreadsheets_tab_delimited_txt_is_one_error(tmp_path: Path) -> None:
    """A spreadsheet's "Text (Tab delimited)" export is named .txt: its header was stored as
    a record with the id 'ID', its rows as ID TEXT."""
    table = "ID\tName\tCity\r\n1\tAnn Lee\tRome\r\n2\tAnn Le\tRome\r\n"
    path = write(tmp_path / "contacts.txt.gz", gzip.compress(table.encode()))
    said = "is read as lines of ID TEXT by its name unless told: give --format tsv"
    with pytest.raises(NeardupError, match=rf"/contacts.txt.gz looks like a TSV table .* {said}"):
        RecordReader(path)
    records, _ = read(path, format="tsv")
    assert [(r.id, r.text) for r in records] == [("1", "Ann Lee Rome"), ("2", "Ann Le Rome")]


@pytest.mark.parametrize("name", ["app.txt", "-"])
def test_log_lines_are_texts_not_json_nor_ids(
    tmp_path: Path, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Log lines piped in were "JSON" (they start with '['), and in a .txt file their
    timestamps were ids: the store kept one line of three, the others replaced."""
    log = (
        "".join(f"[2024-05-01 12:00:0{n}] ERROR timeout on node {n}\n" for n in range(3))
        + "[2024-05-01 12:00:09] INFO retried\n"
    )
    if name == "-":
        data = io.BytesIO(log.encode())
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BufferedReader(data)))
        path = Path("-")
    else:
        path = write(tmp_path / name, log)
    records, reader = read(path)
    assert [r.id for r in records] == ["1", "2", "3", "4"] and reader.format == "text"
    assert "('[2024-05-01' begins lines 1 and 2;" in reader.fields_chosen()


@pytest.mark.parametrize("name", ["phones.csv", "phones.tsv"])
def test_a_header_that_names_a_column_twice_is_one_error(tmp_path: Path, name: str) -> None:
    """Two columns called phone (a spreadsheet allows it): the first's values were lost, the
    second's read twice, and dedup wrote the second's into both columns."""
    separator = "," if name.endswith(".csv") else "\t"
    write(tmp_path / name, separator.join(["id", "phone", "name", "phone"]) + "\n1,2,3,4\n")
    refused = neardup("index", name, "--store", "s.db", cwd=tmp_path)
    assert_user_error(refused, f"{name}: the header row names 'phone' in columns 2 and 4")
    assert not (tmp_path / "s.db").exists()


def test_a_file_of_nothing_but_urls_keeps_them(tmp_path: Path) -> None:
    records, reader = read(
        write(tmp_path / "a.jsonl", '{"id": "1", "link": "https://x.example/a"}\n')
    )
    assert records[0].text == "https://x.example/a" and reader.left_out == {}


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("extra.csv", "id,text,extra\n1,kept row,x\n3,a,b,c,d,e\n"),
        ("extra.tsv", "id\ttext\n1\tkept row\n2\tfoo\tbar\tbaz\n"),
    ],
)
def test_a_row_with_more_fields_than_the_header_is_a_counted_skip(
    tmp_path: Path, name: str, text: str
) -> None:
    path = tmp_path / name
    path.write_text(text)
    reader = RecordReader(path)
    assert [(r.id, r.text) for r in reader] == [
        ("1", "kept row x" if "extra" in text[:20] else "kept row")
    ]
    assert reader.skipped.reasons == {"more fields than the header": 1}
    assert reader.skipped.examples == [(3, "more fields than the header")]


def test_a_json_list_is_text_of_its_values(tmp_path: Path) -> None:
    """Tags, authors and features come as lists: their values are the record's words, joined
    by spaces, with numbers as written; a text field of such lists is not left out."""
    lines = [
        '{"id": "1", "title": "Nikon D750", "features": ["24 MP", 1080, ["wifi"], null]}',
        '{"id": "2", "title": "Canon EOS", "features": []}',
        '{"id": "3", "features": ["only", "features"]}',
    ]
    records, reader = read(write(tmp_path / "a.jsonl", "\n".join(lines) + "\n"))
    assert [r.text for r in records] == [
        "Nikon D750 24 MP 1080 wifi",
        "Canon EOS",
        "only features",
    ]
    assert not reader.skipped.total


def test_a_folder_of_documents_is_one_record_a_file(tmp_path: Path) -> None:
    """Articles saved one to a file: each file under the folder is a record, its id its path
    within the folder; hidden files are left alone, and a file that is no text is counted."""
    folder = tmp_path / "articles"
    (folder / "2024").mkdir(parents=True)
    (folder / ".git").mkdir()
    (folder / "b.txt").write_text("\ufeffSecond article text\n")
    (folder / "2024" / "a.txt").write_text("First article,\nover two lines")
    (folder / "2024" / "c.txt.gz").write_bytes(gzip.compress(b"Compressed article"))
    (folder / ".git" / "config").write_text("hidden")
    (folder / "empty.txt").write_text(" \n")
    (folder / "photo.jpg").write_bytes(b"\xff\xd8\xff\xe0\x00\x10JFIF\x00")
    (folder / "old.txt").write_bytes("Caf\xe9 cr\xe8me".encode("latin-1"))
    (folder / "bad.txt").write_bytes(b"\xff\xfe\xfa")
    reader = FolderReader(folder)
    assert [(r.id, r.text) for r in reader] == [
        ("2024/a.txt", "First article,\nover two lines"),
        ("2024/c.txt.gz", "Compressed article"),
        ("b.txt", "Second article text"),
    ]
    assert reader.skipped.reasons == {
        "no text": 1, "not text: binary": 1, "a Windows code page": 1, "not UTF-8": 1
    }  # fmt: skip
    assert reader.skipped.summary().endswith(
        "first: bad.txt: not UTF-8, empty.txt: no text, old.txt: a Windows code page, "
        "photo.jpg: not text: binary"
    )
    assert reader.fields_chosen() == (
        f"{folder}: each of its 7 files is a record, its id its path within the folder"
    )
    assert next(r.id for r in FolderReader(folder, several=True)) == "articles/2024/a.txt"
    in_latin1 = FolderReader(folder, encoding="latin-1")
    assert ("old.txt", "Café crème") in [(r.id, r.text) for r in in_latin1]
    assert in_latin1.skipped.reasons == {"no text": 1, "not text: binary": 1}
