"""Report files opened in a spreadsheet: a cell that would run as a formula is written as text.

Every CSV and TSV writer (pairs, groups, a file's lookups, dedup) starts such a cell with an
apostrophe, as OWASP advises for CSV injection; JSON lines keep the values exactly, and the
pair files read back (``neardup eval``) to the exact ids."""

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
def test_dedup_files_hold_no_formula(tmp_path: Path, format: str) -> None:
    sep = "\t" if format == "tsv" else ","
    rows = [
        ("=1+1", TEXT, "-5"),
        ("@A1", TEXT + " again", "+7"),
        ("x", "other text entirely", "=2"),
    ]
    path = tmp_path / f"records.{format}"
    path.write_text("".join(sep.join(row) + "\n" for row in [("id", "text", "price"), *rows]))
    url = f"sqlite:///{tmp_path / 'd.db'}"
    flags = ["--store", url, "--text-field", "text"]
    assert neardup("index", str(path), *flags).returncode == 0
    out = tmp_path / f"kept.{format}"
    result = neardup("dedup", str(path), *flags, "--threshold", "0.3", "-o", str(out))
    assert result.returncode == 0, result.stderr
    written = cells(out, format)
    assert not [cell for cell in written if unsafe(cell)]
    assert "'=2" in written and "-5" in written  # a formula is text, a number stays a number
