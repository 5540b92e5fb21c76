"""How good a report is: precision, recall and F1 against a file of true pairs.

Pair files are TSV, CSV (separated as records are: commas, or a spreadsheet's semicolons) or JSON
lines with a header. The ids are the ``left_id`` and ``right_id``
columns when present, else the first two columns; a similarity is the ``similarity`` column, or one
whose name contains ``jaccard``, when present. A pair counts once whatever its order.
"""

from __future__ import annotations

import csv
import gzip
import json
import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from itertools import chain, combinations, pairwise
from pathlib import Path
from typing import IO

from .errors import NeardupError
from .readers import (
    GZIP_MAGIC,
    SAMPLE_BYTES,
    UTF8,
    code_page_byte,
    csv_delimiter,
    held_byte,
    not_a_table,
    record_format,
    text_encoding,
)
from .report import Pair

PairKey = tuple[str, str]
THRESHOLDS = [round(0.05 * i, 2) for i in range(2, 20)]


def _key(a: str, b: str) -> PairKey:
    return (a, b) if a < b else (b, a)


# Pair files in TSV are "linear TSV": one record per line, and a tab, line break or backslash
# inside a value is written \t, \n, \r or \\. CSV quotes as RFC 4180 does, lines ending in CRLF
# (so that a value holding either line break is quoted).
_TSV_ESCAPES = {"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"}
_TSV_TABLE = str.maketrans(_TSV_ESCAPES)
_TSV_UNESCAPES = {escaped: value for value, escaped in _TSV_ESCAPES.items()}
_TSV_ESCAPED = re.compile(r"\\[\\tnr]")


def tsv_escape(value: str) -> str:
    return value.translate(_TSV_TABLE)


def tsv_unescape(value: str) -> str:
    return _TSV_ESCAPED.sub(lambda m: _TSV_UNESCAPES[m.group()], value)


# A CSV or TSV cell that a spreadsheet would run as a formula (one starting with =, +, -, @, a tab
# or a carriage return) is written after an apostrophe, as OWASP advises against CSV injection;
# spreadsheets show it as text without the apostrophe. A cell that starts with an apostrophe
# gets one more, so that reading a pair file back removes exactly one. A number is no formula.
_SPREADSHEET_UNSAFE = ("=", "+", "-", "@", "\t", "\r", "'")
_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")
# Any cell of a TSV line that might need it: one look at the line before any cell's.
SPREADSHEET_UNSAFE_CELL = re.compile(r"(?:^|\t)[=+\-@'\r]")


def spreadsheet_safe(value: str) -> str:
    if value.startswith(_SPREADSHEET_UNSAFE) and not _NUMBER.fullmatch(value):
        return "'" + value
    return value


def _spreadsheet_value(cell: str) -> str:
    return cell[1:] if cell.startswith("'") else cell


def _rows(path: Path, encoding: str) -> tuple[list[str], Iterable[list[str]] | Iterable[dict]]:
    format = record_format(path)
    with _opened(path, encoding) as file:
        if format in ("jsonl", "json"):
            # JSON escapes every line break inside a value, so only "\n" ends a line.
            text = file.read()
            objects = (
                json.loads(text)
                if format == "json"
                else [json.loads(line) for line in text.split("\n") if line.strip()]
            )
            if not isinstance(objects, list):
                raise json.JSONDecodeError("not an array of pairs", text, 0)
            return (list(objects[0]) if objects else []), objects
        if format == "csv":
            rows = _csv_rows(file)
        else:
            lines = (line.rstrip("\r\n") for line in file.read().split("\n"))
            rows = [
                [_spreadsheet_value(tsv_unescape(v)) for v in line.split("\t")]
                for line in lines
                if line
            ]
    return (rows[0] if rows else []), rows[1:]


def _csv_rows(file: IO[str]) -> list[list[str]]:
    """A CSV file's rows, separated as its first line says: a spreadsheet's ``sep=;`` line, or
    the delimiter that makes the header more than one field (a spreadsheet saves semicolons
    where the comma is the decimal separator), as records are read."""
    first = file.readline()
    delimiter, named = csv_delimiter(first)
    lines = iter(file) if named else chain([first], file)
    return [list(map(_spreadsheet_value, row)) for row in csv.reader(lines, delimiter=delimiter)]


def _number(value: object) -> float:
    """A similarity as a file holds it: a JSON number, or text with a decimal point or, as a
    spreadsheet saves it where that is the decimal separator, a comma (ValueError if neither)."""
    if isinstance(value, str):
        value = value.strip().replace(",", ".", 1) if "." not in value else value
    return float(value)  # type: ignore[arg-type]


def _opened(path: Path, encoding: str) -> IO[str]:
    """A pair file to read, with or without a byte order mark, gzip-compressed or not."""
    with path.open("rb") as raw:
        compressed = raw.read(2) == GZIP_MAGIC
    encoding = "utf-8-sig" if encoding == UTF8 else encoding
    if compressed:
        return gzip.open(path, "rt", encoding=encoding, newline="")
    return path.open(encoding=encoding, newline="")


def _read_rows(
    path: Path, encoding: str | None, what: str
) -> tuple[list[str], Iterable[list[str]] | Iterable[dict]]:
    """:func:`_rows` of the file in ``encoding`` (UTF-8 without it), or one line saying why the
    file of ``what`` cannot be read, naming the encoding as it was given."""
    codec = text_encoding(encoding)
    try:
        if why := not_a_table(path):
            raise NeardupError(f"cannot read {what} from {path}: {why}")
        return _rows(path, codec)
    except UnicodeDecodeError as exc:
        why = _not_utf8(path) if codec == UTF8 else f"it is not {encoding} ({exc})"
        raise NeardupError(f"cannot read {what} from {path}: {why}") from None
    except OSError as exc:  # its reason alone: the error's text names the file again
        raise NeardupError(f"cannot read {what} from {path}: {exc.strerror or exc}") from None
    except (EOFError, json.JSONDecodeError) as exc:
        raise NeardupError(f"cannot read {what} from {path}: {exc}") from None


def _not_utf8(path: Path) -> str:
    """Why a pair file that is not UTF-8 cannot be read, and what to give."""
    with _opened(path, "latin-1") as file:  # its bytes, decompressed
        start = file.read(SAMPLE_BYTES).encode("latin-1")
    if where := code_page_byte(start):
        return (
            f"it is not UTF-8 but a Windows code page ({held_byte(*where)}): give --encoding "
            "windows-1252, or save it as UTF-8"
        )
    return "it is not UTF-8: give its --encoding, or save it as UTF-8"


def read_pairs(
    path: str | Path,
    known: Callable[[list[str]], bool] | None = None,
    encoding: str | None = None,
) -> dict[PairKey, float | None]:
    """Pairs in a file, each with its similarity (or None when the file has none). A CSV or TSV
    file's first line is its header, unless ``known`` says its first two cells are ids of
    records (a truth file written without a header): then it is the first pair. ``encoding``
    is the file's (UTF-8 without it). Of a file of judged pairs (a ``same`` column, as
    :func:`read_judged` reads it), the pairs judged the same."""
    path = Path(path)
    header, rows = _read_rows(path, encoding, "pairs")
    if groups := _groups_in(header, rows):
        return {_key(a, b): None for ids in groups for a, b in combinations(ids, 2)}
    first_line = 2
    if isinstance(rows, list) and len(header) >= 2 and known and known(header[:2]):
        rows, header, first_line = [header, *rows], ["left_id", "right_id"], 1
    if len(header) < 2:
        raise NeardupError(f"{path}: a pair file needs a header with at least two columns")
    left, right = (
        ("left_id", "right_id")
        if {"left_id", "right_id"} <= set(header)
        else (header[0], header[1])
    )
    similarity = next((h for h in header if h == "similarity" or "jaccard" in h.lower()), None)
    pairs: dict[PairKey, float | None] = {}
    for number, row in enumerate(rows, start=first_line):
        values = row if isinstance(row, dict) else dict(zip(header, row, strict=False))
        if "same" in header and not _judged_same(path, number, values.get("same")):
            continue
        try:
            a, b = str(values[left]), str(values[right])
            pairs[_key(a, b)] = _number(values[similarity]) if similarity else None
        except (KeyError, ValueError, TypeError):
            raise NeardupError(f"{path}: line {number} is not a pair") from None
    return pairs


# What a person may write in a judged pair's ``same`` column, read without case or spaces.
SAME = frozenset({"y", "yes", "1", "true", "same", "x"})
DIFFERENT = frozenset({"n", "no", "0", "false", "different"})


@dataclass
class Judged:
    """The pairs of a file a person judged: each pair's similarity and whether its records
    are the same one, and how many rows they left blank."""

    similarity: list[float] = field(default_factory=list)
    same: list[bool] = field(default_factory=list)
    blank: int = 0


def read_judged(paths: Sequence[str | Path], encoding: str | None = None) -> Judged:
    """The judged pairs of files with ``similarity`` and ``same`` columns (as ``neardup tune
    --label-sample`` or a report with a column added writes them): yes or no in ``same`` (y,
    1, true, same, x; n, 0, false, different), blank for a pair not judged. A pair repeated
    counts once, as it was judged last."""
    judged: dict[PairKey, tuple[float, bool]] = {}
    blank: set[PairKey] = set()
    for path in paths:
        _judged_in(Path(path), encoding, judged, blank)
    values = judged.values()
    return Judged([s for s, _ in values], [y for _, y in values], len(blank - judged.keys()))


def _judged_in(
    path: Path,
    encoding: str | None,
    judged: dict[PairKey, tuple[float, bool]],
    blank: set[PairKey],
) -> None:
    """Add the pairs judged in ``path`` to ``judged``, and those it left blank to ``blank``."""
    header, rows = _read_rows(path, encoding, "judged pairs")
    missing = [c for c in ("left_id", "right_id", "similarity", "same") if c not in header]
    if missing:
        raise NeardupError(
            f"{path}: judged pairs need the columns left_id, right_id, similarity and same "
            f"(missing: {', '.join(missing)}), as neardup tune --label-sample writes them"
        )
    for number, row in enumerate(rows, start=2):
        values = row if isinstance(row, dict) else dict(zip(header, row, strict=False))
        answer = _judged_same(path, number, values.get("same"))
        key = _key(str(values.get("left_id")), str(values.get("right_id")))
        if answer is None:
            blank.add(key)
            continue
        try:
            similarity = _number(values["similarity"])
        except (ValueError, TypeError):
            similarity = math.nan
        if not 0 <= round(similarity, 6) <= 1:  # a sum of weights may pass 1 by a rounding
            raise NeardupError(f"{path}: line {number} has no similarity from 0 to 1")
        judged[key] = (similarity, answer)


def _judged_same(path: Path, number: int, given: object) -> bool | None:
    """What line ``number`` of ``path`` says of its pair in its ``same`` column: the same
    record, different ones, or None where it is blank."""
    answer = "" if given is None else str(given).strip().casefold()
    if not answer:
        return None
    if answer not in SAME | DIFFERENT:
        raise NeardupError(
            f"{path}: line {number}: same is {given!r}: write yes or no (or leave it blank)"
        )
    return answer in SAME


# The column a file of groups names each record's group by, beside its id: a report's
# (`report --clusters`), or a truth file's of entities.
GROUP_COLUMNS = ("group", "cluster", "cluster_id", "entity_id")


def _groups_in(
    header: list[str], rows: Iterable[list[str]] | Iterable[dict]
) -> list[list[str]] | None:
    """The groups of a file of groups (None for a file of pairs): rows of an ``id`` and its
    group's name (:data:`GROUP_COLUMNS`), or JSON objects that list a group's ``ids``, as
    ``report --clusters`` writes them. Their pairs are every two records of a group."""
    if header and "ids" in header and "group" in header:
        return [[str(i) for i in row["ids"]] for row in rows if isinstance(row, dict)]
    named = [h for h in header if h.strip().casefold() in GROUP_COLUMNS]
    if "id" not in header or not named:
        return None
    groups: dict[str, list[str]] = {}
    for row in rows:
        values = row if isinstance(row, dict) else dict(zip(header, row, strict=False))
        if values.get(named[0]) not in (None, "") and values.get("id") not in (None, ""):
            groups.setdefault(str(values[named[0]]), []).append(str(values["id"]))
    return list(groups.values())


def pairs_of(report: Iterable[Pair]) -> dict[PairKey, float | None]:
    return {_key(p.left_id, p.right_id): p.similarity for p in report}


@dataclass
class Scores:
    reported: int
    right: int
    true: int

    @property
    def precision(self) -> float:
        return self.right / self.reported if self.reported else 1.0

    @property
    def recall(self) -> float:
        return self.right / self.true if self.true else 1.0

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0

    def as_dict(self) -> dict[str, float]:
        return {
            "reported": self.reported,
            "right": self.right,
            "true": self.true,
            "precision": round(self.precision, 6),
            "recall": round(self.recall, 6),
            "f1": round(self.f1, 6),
        }


@dataclass
class Evaluation:
    overall: Scores
    # (low, high, true pairs in the band, found) for truth files with a similarity
    recall_by_similarity: list[tuple[float, float, int, int]] = field(default_factory=list)
    # (threshold, scores of the reported pairs at or above it) for reports with a similarity,
    # from the least threshold the report answers for: below it, it lists no pair to count
    by_threshold: list[tuple[float, Scores]] = field(default_factory=list)
    # the report's threshold, or its least similarity where that is not known
    complete_from: float | None = None

    def as_dict(self) -> dict[str, object]:
        return {
            **self.overall.as_dict(),
            "recall_by_similarity": [
                {"from": lo, "to": hi, "true": n, "found": k, "recall": round(k / n, 6)}
                for lo, hi, n, k in self.recall_by_similarity
            ],
            "by_threshold": [{"threshold": t, **s.as_dict()} for t, s in self.by_threshold],
            "by_threshold_from": self.complete_from,
        }


def evaluate(
    truth: dict[PairKey, float | None],
    reported: dict[PairKey, float | None],
    threshold: float | None = None,
) -> Evaluation:
    """Precision and recall of ``reported`` against ``truth``, and at each threshold from the
    report's own ``threshold`` (else its least similarity) up: a lower threshold would list
    pairs the report never held, so its scores would be the report's, not the threshold's."""
    found = set(reported)
    result = Evaluation(Scores(len(found), len(found & set(truth)), len(truth)))
    similarities = [s for s in truth.values() if s is not None]
    if similarities:
        low = min(int(min(similarities) * 10) / 10, 0.9)
        edges = [round(low + 0.1 * i, 1) for i in range(round((1.0 - low) * 10))] + [1.0]
        for lo, hi in pairwise(edges):
            band = [
                p for p, s in truth.items() if s is not None and lo <= s and (s < hi or hi == 1.0)
            ]
            if band:
                result.recall_by_similarity.append(
                    (lo, hi, len(band), sum(p in found for p in band))
                )
    if reported and all(s is not None for s in reported.values()):
        floor = min(s for s in reported.values() if s is not None)
        if threshold is not None:
            floor = min(floor, threshold)
        result.complete_from = floor
        true = set(truth)
        for least in (t for t in THRESHOLDS if t >= floor):
            kept = {p for p, s in reported.items() if s is not None and s >= least}
            result.by_threshold.append((least, Scores(len(kept), len(kept & true), len(truth))))
    return result


def plot(
    result: Evaluation,
    path: str | Path,
    histogram: Sequence[int] | None = None,
    threshold: float | None = None,
) -> None:
    """Precision and recall over thresholds as a PNG (needs the ``plot`` extra: matplotlib);
    with the report's ``histogram`` of candidate similarities, a second panel draws it and the
    ``threshold`` the report applied."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise NeardupError("--plot needs matplotlib: pip install 'neardup[plot]'") from None
    if not result.by_threshold:
        raise NeardupError("--plot needs a report with a similarity column")
    thresholds = [t for t, _ in result.by_threshold]
    panels = 2 if histogram else 1
    figure, axes = plt.subplots(panels, 1, figsize=(6, 4 * panels), squeeze=False, sharex=True)
    scores = axes[0][0]
    scores.plot(thresholds, [s.precision for _, s in result.by_threshold], label="precision")
    scores.plot(thresholds, [s.recall for _, s in result.by_threshold], label="recall")
    scores.plot(thresholds, [s.f1 for _, s in result.by_threshold], label="F1", linestyle="--")
    scores.set_ylim(0, 1.02)
    if histogram:
        counts = axes[1][0]
        width = 1 / len(histogram)
        counts.bar([i * width for i in range(len(histogram))], histogram, width, align="edge")
        counts.set_yscale("symlog")
        counts.set_ylabel("candidate pairs")
    for panel in (row[0] for row in axes):
        if threshold is not None:
            panel.axvline(threshold, color="grey", linestyle=":", label=f"threshold {threshold:g}")
        panel.grid(alpha=0.3)
        panel.legend()
    axes[-1][0].set_xlabel("similarity")
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
