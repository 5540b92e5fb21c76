"""Report files opened in a spreadsheet: a cell that would run as a formula is written as text.

Every CSV and TSV writer of neardup's own output (pairs, groups, a file's lookups) starts such
a cell with an apostrophe, as OWASP advises for CSV injection; JSON lines keep the values
exactly, and the pair files read back (``neardup eval``) to the exact ids. A file ``dedup``
writes back is the user's records, every value as read."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest

from neardup.evaluate import read_pairs, spreadsheet_safe
from tests.runner import neardup

# Ids a spreadsheet would run: each starts with a character that begins a formula.
FORMULAS = ["=cmd|' /C calc'!A0", "+SUM(1+1)", "-2+3", "@SUM(A1)", "\tx=1", "\r=1"]
TEXT = "Bella Napoli Trattoria 418 Harbor Street Portland ME 04101"


def unsafe(cell: str) -> bool:
    return cell[:1] in ("=", "+", "-", "@", "\t", "\r") and not re.fullmatch(r"[+-]?[\d.]+", cell)


@pytest.mark.parametrize(
    ("value", "written"),
    [
        ("=1+1", "'=1+1"),
        ("+SUM(1)", "'+SUM(1)"),
        ("-x", "'-x"),
        ("@A1", "'@A1"),
        ("\t=1", "'\t=1"),
        ("\r=1", "'\r=1"),
        ("'quoted", "''quoted"),  # so that reading back removes exactly one apostrophe
        ("-12.5", "-12.5"),  # a number is not a formula
        ("+3e5", "+3e5"),
        ("plain", "plain"),
        ("", ""),
    ],
)
def test_a_cell_that_starts_a_formula_gets_an_apostrophe(value: str, written: str) -> None:
    assert spreadsheet_safe(value) == written


@pytest.fixture
def store(tmp_path: Path) -> str:
    records = tmp_path / "records.jsonl"
    lines = [{"id": f, "text": TEXT} for f in FORMULAS] + [{"id": "plain", "text": TEXT}]
    records.write_text("".join(json.dumps(line) + "\n" for line in lines))
    url = f"sqlite:///{tmp_path / 'r.db'}"
    result = neardup("index", str(records), "--store", url)
    assert result.returncode == 0, result.stderr
    return url


def cells(path: Path, format: str) -> list[str]:
    with path.open(encoding="utf-8", newline="") as file:
        if format == "csv":
            return [cell for row in csv.reader(file) for cell in row]
        return [cell for line in file.read().split("\n") for cell in line.split("\t")]


@pytest.mark.parametrize("format", ["tsv", "csv"])
@pytest.mark.parametrize("what", [[], ["--clusters"]], ids=["pairs", "clusters"])
def test_report_files_hold_no_formula(
    store: str, tmp_path: Path, format: str, what: list[str]
) -> None:
    out = tmp_path / f"report.{format}"
    result = neardup("report", "--store", store, "--format", format, *what, "-o", str(out))
    assert result.returncode == 0, result.stderr
    written = cells(out, format)
    assert not [cell for cell in written if unsafe(cell)]
    assert "'=cmd|' /C calc'!A0" in written and "'+SUM(1+1)" in written
    if not what:  # the pairs read back to the exact ids, as JSON lines hold them
        exact = tmp_path / "report.jsonl"
        neardup("report", "--store", store, "--format", "jsonl", "-o", str(exact))
        ids = {json.loads(line)["left_id"] for line in exact.read_text().splitlines()}
        assert "=cmd|' /C calc'!A0" in ids
        assert read_pairs(out) == read_pairs(exact)


def test_a_files_lookups_hold_no_formula(store: str, tmp_path: Path) -> None:
    (tmp_path / "new.tsv").write_text(f"id\ttext\n=HYPERLINK(1)\t{TEXT}\n")
    out = tmp_path / "found.tsv"
    result = neardup(
        "lookup", "--store", store, "--file", str(tmp_path / "new.tsv"), "-o", str(out)
    )
    assert result.returncode == 0, result.stderr
    written = cells(out, "tsv")
    assert not [cell for cell in written if unsafe(cell)]
    assert "'=HYPERLINK(1)" in written and "'+SUM(1+1)" in written


@pytest.mark.parametrize("format", ["tsv", "csv"])
def test_dedup_writes_the_records_values_as_read(tmp_path: Path, format: str) -> None:
    """A file dedup writes back is the user's records, not a report: a phone number or a
    handle keeps its first character, and a second run changes nothing."""
    sep = "\t" if format == "tsv" else ","
    rows = [
        ("1", TEXT, "+44 20 7946 0958", "@bella"),
        ("2", TEXT + " again", "+44 20 7946 0958", "=1+1"),
        ("3", "other text entirely", "-", "'quoted"),
    ]
    path = tmp_path / f"records.{format}"
    header = ("id", "text", "phone", "note")
    path.write_text("".join(sep.join(row) + "\n" for row in [header, *rows]))
    url = f"sqlite:///{tmp_path / 'd.db'}"
    flags = ["--store", url, "--text-field", "text", "--threshold", "0.3"]
    assert neardup("index", str(path), *flags[:4]).returncode == 0
    out, again = tmp_path / f"kept.{format}", tmp_path / f"again.{format}"
    assert neardup("dedup", str(path), *flags, "-o", str(out)).returncode == 0
    with out.open(newline="") as file:
        assert list(csv.reader(file, delimiter=sep)) == [list(header), *map(list, rows[::2])]
    assert neardup("dedup", str(out), *flags, "-o", str(again)).returncode == 0
    assert again.read_bytes() == out.read_bytes()
