"""How results look: pair and group files, and the tables the CLI prints. No store, no logic."""

from __future__ import annotations

import csv
import gzip
import json
import math
import os
import stat
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import asdict
from functools import partial
from operator import attrgetter
from pathlib import Path
from typing import IO, TYPE_CHECKING, Literal

from .errors import NeardupError
from .evaluate import (
    SPREADSHEET_UNSAFE_CELL,
    THRESHOLDS,
    Evaluation,
    spreadsheet_safe,
    tsv_escape,
)
from .explain import Explanation
from .labels import MIN_GAIN
from .phrases import counted
from .readers import (
    BYTE_ORDER_MARK,
    LINE,
    Format,
    JsonNumber,
    Record,
    RecordReader,
    record_format,
)
from .report import PHASES, Pair, for_review
from .searcher import Match
from .tuning import NEAREST_SPLIT, TUNE_POINTS, Tuning, candidate_probability

if TYPE_CHECKING:  # the API imports this module: its types only for annotations
    from .api import LabelSample, LabelTuning, StoreTuning

ReportFormat = Literal["tsv", "csv", "jsonl", "json"]
REPORT_FORMATS: tuple[ReportFormat, ...] = ("tsv", "csv", "jsonl", "json")
JSON_FORMATS = ("jsonl", "json")  # objects, one a line or in one array


# Names of files that ask for what neardup does not write: a spreadsheet's or a document's own
# format, a page (report --html writes one), or a compression other than gzip. Text under such
# a name does not open where the name says it will.
_NAMES_NOT_WRITTEN = {
    ".xlsx": "an Excel workbook",
    ".xls": "an Excel workbook",
    ".ods": "a spreadsheet document",
    ".parquet": "a Parquet file",
    ".pdf": "a PDF document",
    ".html": "a web page",
    ".htm": "a web page",
    ".zip": "a zip archive",
    ".7z": "a 7-Zip archive",
    ".bz2": "bzip2",
    ".xz": "xz",
    ".zst": "zstd",
}
WRITTEN = "TSV, CSV (which spreadsheets open), JSON lines or JSON, compressed when named .gz"


def not_written(path: str | Path) -> str | None:
    """What an output file's name asks for that neardup does not write, if it does."""
    return _NAMES_NOT_WRITTEN.get(Path(path).suffix.lower())


@contextmanager
def whole_file(path: str | Path) -> Iterator[IO[str]]:
    """A text file replaced whole or not at all: written beside its name and renamed when
    complete, compressed when its name ends in .gz. A device or a pipe (``/dev/null``,
    ``/dev/stdout``, a shell's ``>(gzip > f)``) is written as it is: renamed over, the device
    was replaced by a file. A write that fails (a full disk) is a NeardupError naming the file,
    which is left as it was. Two processes writing one name at once (a scheduled report and
    one run by hand) each write a file of their own beside it: the last renamed is the file,
    whole, where both wrote into one and left it a mix of the two."""
    try:
        if is_stream(path):
            with text_file(path) as out:
                yield out
            return
        # Random as secrets.token_hex makes it, without importing secrets (hashlib, 1-3 ms).
        beside = Path(f"{path}.{os.getpid()}-{os.urandom(4).hex()}.partial")
        os.close(os.open(beside, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666))  # its own
        try:
            with text_file(beside, named=path) as out:
                yield out
            os.replace(beside, path)
        finally:
            beside.unlink(missing_ok=True)
    except OSError as exc:
        raise NeardupError(f"cannot write {path}: {exc.strerror or exc}") from None


def is_stream(path: str | Path) -> bool:
    """Whether ``path`` names something other than a regular file or a folder: a device, a
    pipe or a socket, written as it is."""
    try:
        mode = os.stat(path).st_mode
    except OSError:  # not there yet: a file to make
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def text_file(path: str | Path, named: str | Path | None = None) -> IO[str]:
    """A file to write UTF-8 text to, gzip-compressed when its name ends in .gz (or ``named``
    does, the name it is written for and renamed to when complete)."""
    if str(named or path).lower().endswith(".gz"):
        return gzip.open(path, "wt", encoding="utf-8", newline="")
    return open(path, "w", encoding="utf-8", newline="")


def named_format(path: str | None) -> ReportFormat | None:
    """The format an output file's name asks for (``pairs.csv``: csv), if any. A spreadsheet
    opens a .csv by commas: tabs under that name would land in one column."""
    named = record_format(path) if path else None
    return named if named in REPORT_FORMATS else None  # type: ignore[return-value]


def write_pairs(
    pairs: Sequence[Pair],
    out: IO[str],
    format: ReportFormat = "tsv",
    texts: Mapping[str, str] | None = None,
    threshold: float | None = None,
) -> int:
    """One row per pair; with the ``threshold`` the report applied, ``review`` (1 or 0) flags
    the near pairs just above it (see :func:`neardup.report.for_review`); with ``texts`` (by
    id), both records' texts in ``left_text`` and ``right_text``."""
    names = list(Pair.__dataclass_fields__)
    flagged = for_review(pairs, threshold) if threshold is not None else None
    fields = names + (["review"] if flagged is not None else [])
    fields += ["left_text", "right_text"] if texts else []
    rounded = names.index("similarity")
    values = attrgetter(*names)  # asdict's deep copy costs a second per 100,000 pairs

    def row(pair: Pair) -> tuple[object, ...]:
        cells = values(pair)
        cells = (*cells[:rounded], round(pair.similarity, 6), *cells[rounded + 1 :])
        if flagged is not None:
            cells = (*cells, int((pair.left_id, pair.right_id) in flagged))
        if texts:
            return (*cells, texts.get(pair.left_id, ""), texts.get(pair.right_id, ""))
        return cells

    return _write(map(row, pairs), fields, out, format)


def write_records(records: Iterable[tuple[str, str]], out: IO[str], format: ReportFormat) -> int:
    """A store's records as a record file, one row of ``id`` and ``content`` each: what
    ``neardup index`` reads back (JSON carries a content as it is; TSV and CSV make every
    cell safe to open in a spreadsheet)."""
    return _write(records, ["id", "content"], out, format)


def write_clusters(
    groups: Iterable[list[str]],
    out: IO[str],
    format: ReportFormat = "tsv",
    texts: Mapping[str, str] | None = None,
    review: Iterable[tuple[str, str]] = (),
) -> int:
    """One row per member (jsonl: per group); ``kept`` marks the group's first id, the one
    ``neardup dedup`` keeps; ``review`` (1 or 0) marks the groups that hold a pair of
    ``review`` (:func:`neardup.report.for_review`); with ``texts`` (by id), each member's text."""
    flagged = {i for pair in review for i in pair}
    numbered = [(n, g, int(any(i in flagged for i in g))) for n, g in enumerate(groups, start=1)]
    if format in JSON_FORMATS:
        return _write(
            (
                (n, len(g), g[0], g, r, *([[texts.get(i, "") for i in g]] if texts else []))
                for n, g, r in numbered
            ),
            ["group", "size", "kept", "ids", "review"] + (["texts"] if texts else []),
            out,
            format,
        )
    rows = (
        (n, len(g), member, int(k == 0), r, *([texts.get(member, "")] if texts else []))
        for n, g, r in numbered
        for k, member in enumerate(g)
    )
    fields = ["group", "size", "id", "kept", "review"] + (["text"] if texts else [])
    return _write(rows, fields, out, format)


def _write(
    rows: Iterable[Sequence[object]], fields: list[str], out: IO[str], format: ReportFormat
) -> int:
    """Rows of values in the order of ``fields``; returns how many were written."""
    count = 0
    with row_writer(fields, out, format) as write:
        for count, row in enumerate(rows, start=1):  # noqa: B007 - count is the result
            write(row)
    return count


@contextmanager
def row_writer(
    fields: Sequence[str], out: IO[str], format: ReportFormat
) -> Iterator[Callable[[Sequence[object]], None]]:
    """What writes one row of values in the order of ``fields``, every cell safe to open in
    a spreadsheet; the header (and a csv file's byte order mark) is written first, and a json
    file's array closed when the block ends."""
    if format == "json":
        with _json_array(out) as add:
            yield lambda row: add(
                json.dumps(dict(zip(fields, row, strict=True)), ensure_ascii=False)
            )
        return
    if format == "jsonl":
        yield lambda row: out.write(
            json.dumps(dict(zip(fields, row, strict=True)), ensure_ascii=False) + "\n"
        )
        return
    if format == "tsv":
        out.write("\t".join(fields) + "\n")
        yield partial(_write_tsv_row, out, len(fields))
        return
    out.write(BYTE_ORDER_MARK)  # CSV is for spreadsheets: Excel reads it as UTF-8 only with one
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(fields)
    yield lambda row: writer.writerow(_safe_cells(row))


@contextmanager
def _json_array(out: IO[str], end: str = "\n") -> Iterator[Callable[[str], None]]:
    """What writes values, as JSON texts, into one JSON array, a value a line, closed (and
    ``end`` written) when the block ends."""
    opening = ["[\n"]

    def add(value: str) -> None:
        out.write((opening.pop() if opening else ",\n") + value)

    yield add
    out.write(("[]" if opening else "\n]") + end)


def _write_tsv_row(out: IO[str], width: int, row: Sequence[object]) -> None:
    values = list(map(str, row))
    line = "\t".join(values)
    # Most rows need no escapes: one look at the joined line is cheaper than escaping.
    if line.count("\t") >= width or "\\" in line or "\n" in line or "\r" in line:
        values = list(map(tsv_escape, values))
        line = "\t".join(values)
    if SPREADSHEET_UNSAFE_CELL.search(line):
        line = "\t".join(map(spreadsheet_safe, values))
    out.write(line + "\n")


def _safe_cells(row: Iterable[object]) -> list[object]:
    return [spreadsheet_safe(cell) if isinstance(cell, str) else cell for cell in row]


# Values that json_as_read looks into: a number as written, or what may hold one.
_MAY_HOLD_WRITTEN = (JsonNumber, dict, list)


def json_as_read(value: object) -> str:
    """JSON of values read from a JSON file, as the file wrote them: a number with a fraction
    or an exponent as written (a price 12.50, where Python's float writes 12.5), the rest
    as json.dumps writes it."""
    if isinstance(value, JsonNumber):
        return value.written
    if isinstance(value, dict) and any(isinstance(v, _MAY_HOLD_WRITTEN) for v in value.values()):
        fields = (
            f"{json.dumps(k, ensure_ascii=False)}: {json_as_read(v)}" for k, v in value.items()
        )
        return "{" + ", ".join(fields) + "}"
    if isinstance(value, list) and any(isinstance(v, _MAY_HOLD_WRITTEN) for v in value):
        return "[" + ", ".join(map(json_as_read, value)) + "]"
    return json.dumps(value, ensure_ascii=False)


def _around_array(wrapper: Mapping[str, object], key: str | None) -> tuple[str, str]:
    """The JSON text of ``wrapper`` before and after the value of its field ``key`` (none
    without a key): its other fields as they were read, in their order."""
    if key is None:
        return "", ""
    fields = [json_as_read({name: value})[1:-1] for name, value in wrapper.items()]
    place = list(wrapper).index(key)
    opening = fields[place].removesuffix("null")  # '"records": '
    before, after = fields[:place], fields[place + 1 :]
    return "{" + "".join(f + ", " for f in before) + opening, "".join(", " + f for f in after) + "}"


@contextmanager
def record_writer(
    format: Format, read: RecordReader, out: IO[str]
) -> Iterator[Callable[[Record], None]]:
    """What writes records back in ``format``, as the file ``read`` had them: every field as
    it was read, a tsv or csv file's fields in their order under its header as read, a csv
    file's delimiter and the line naming it, and a spreadsheet's byte order mark (not in
    JSON), before the first record. A json file's array is closed when the block ends."""
    if read.bom and format not in JSON_FORMATS:  # a spreadsheet's CSV UTF-8
        out.write(BYTE_ORDER_MARK)
    if format == "csv":  # and the line naming its delimiter, which Excel reads
        out.write(read.separator_line)
    if format == "json":  # in the object around the array, if the file had one
        before, after = _around_array(read.wrapper, read.wrapper_key)
        out.write(before)
        with _json_array(out, after + "\n") as add:
            yield lambda record: add(json_as_read(record.values))
        return
    yield _record_writer(format, read, out)


def _record_writer(format: Format, read: RecordReader, out: IO[str]) -> Callable[[Record], None]:
    newline = read.newline  # the file's line ends, kept
    if format in ("lines", "text"):  # the line as read: its spaces and tabs, an id alone
        return lambda record: out.write(f"{(record.values or {})[LINE]}{newline}")
    if format == "jsonl":
        return lambda record: out.write(json_as_read(record.values) + newline)
    # Quoted where a value may hold a tab or a line break: CSV, and TSV from a quoted file or
    # from CSV (a line break inside a TSV value would split its record), as Excel quotes them.
    quoted = format == "csv" or (format == "tsv" and (read.quoted or read.format == "csv"))
    delimiter = read.delimiter if format == "csv" else "\t"
    cells = (
        csv.writer(out, delimiter=delimiter, lineterminator=newline).writerow
        if quoted
        else lambda row: out.write("\t".join(row) + newline)
    )
    fields, names = read.fields, read.header or read.fields
    header = [list(names)]

    def write(record: Record) -> None:
        if header:
            cells(header.pop())
        values = record.values or {}
        # The user's own values, exactly: an apostrophe before "+44 20 7946 0958" would
        # change the record, and again on each run; the file read held the same cells.
        cells([str(values.get(name, "")) for name in fields])

    return write


def stats_text(info: Mapping[str, object]) -> str:
    """``neardup stats``: what the store holds, its parameters, and each rule in effect with
    where it comes from."""
    lines = [f"{key}: {info[key]}" for key in ("store", "documents", "parameters")]
    if isinstance(named := info.get("named_fields"), Mapping):
        flags = [f"--id-field {named['id_field']!r}"] if named.get("id_field") else []
        flags += [f"--text-field {name!r}" for name in named.get("text_fields") or ()]
        lines.append(f"records read with: {' '.join(flags)} (files that name no fields too)")
    rules, sources = info.get("rules_in_effect"), info.get("rules_from")
    if isinstance(rules, Mapping) and isinstance(sources, Mapping):
        lines.append("rules in effect:")
        lines += [
            f"  {name} {value} ({sources[name]})"
            for name, value in rules.items()
            if name != "auto_threshold"
        ]
    return "\n".join(lines)


def store_tuning(tuning: StoreTuning) -> str:
    """``tune --store``: the histogram and the threshold read from it, the store's own where it
    keeps one, how many candidate pairs the report measured, and what the store's bands promise
    at the threshold read."""
    lines = [histogram_text(tuning.histogram, tuning.threshold, tuning.how, tuning.nearest)]
    if tuning.kept_how is not None:
        kept = f"{tuning.kept_threshold:g}"
        other = (
            "the one read here too"
            if tuning.kept_threshold == tuning.threshold
            else f"which every command applies; {tuning.threshold:g} is --threshold auto's "
            f"(tune --store with --threshold {kept}: what the candidates hold at {kept})"
        )
        lines.append(f"the store keeps its own threshold {kept} ({tuning.kept_how}), {other}")
    if unsure := tuning.unsure_text():
        lines.append(unsure)
    if tuning.checked_records is None:
        lines.append(f"{tuning.candidate_pairs:,} candidate pairs of records measured")
    else:
        lines.append(
            f"{sum(tuning.histogram):,} pairs measured by the checks of "
            f"{counted(tuning.checked_records, 'record')} as they arrived, which the threshold "
            f"is read from (a report measures {tuning.candidate_pairs:,} candidate pairs of the "
            "records kept)"
        )
    if left_out := tuning.left_out_text():
        lines.append(left_out)
    if tuning.candidate_probability is not None:
        lines.append(
            f"{tuning.bands} bands of {tuning.rows} rows: a pair whose shingle sets have Jaccard "
            f"{tuning.threshold:g} is a candidate with probability "
            f"{tuning.candidate_probability:.4f}, a more similar pair likelier still"
        )
    if tuning.estimated_candidate_recall is not None:
        lines.append(
            f"estimated candidate recall {tuning.estimated_candidate_recall:.3f}: of the pairs "
            "at or above the threshold, the share the bands make candidates, read from the "
            "Jaccard of each pair reported"
        )
    lines.append("report --exact lists every pair at or above the threshold, those missed too")
    return "\n".join(lines)


def write_label_sample(sample: LabelSample, out: IO[str], format: ReportFormat = "tsv") -> int:
    """``tune --label-sample``: one row per pair, its ``same`` column left blank for a person
    to fill in, both records' texts beside it, and its similarity last, so that it is read
    after the texts are."""
    fields = ["same", "left_id", "right_id", "left_text", "right_text", "similarity"]
    rows = (
        (
            "",
            pair.left_id,
            pair.right_id,
            sample.texts.get(pair.left_id, ""),
            sample.texts.get(pair.right_id, ""),
            round(pair.similarity, 6),
        )
        for pair in sample.pairs
    )
    return _write(rows, fields, out, format)


def label_tuning(tuned: LabelTuning) -> str:
    """``tune --labels``: the threshold the judged pairs chose, and what it and the threshold
    read from the data should give by them."""
    lines = [
        f"threshold {tuned.threshold:g}, remembered for every command: by "
        f"{counted(tuned.same, 'pair')} judged the same and {tuned.different:,} not"
        + (f" ({tuned.blank:,} left blank)" if tuned.blank else "")
        + f", of the {tuned.candidate_pairs:,} candidate pairs it should list with precision "
        f"{tuned.precision:.3f}, recall {tuned.recall:.3f}, F1 {tuned.f1:.3f}"
    ]
    if tuned.auto is not None and tuned.auto.threshold == tuned.threshold:
        lines.append(
            f"it is the threshold read from the data: no other is expected to give more than "
            f"{MIN_GAIN:g} more F1"
        )
    elif tuned.auto is not None:
        lines.append(
            f"the threshold read from the data, {tuned.auto.threshold:g}, by the same pairs: "
            f"precision {tuned.auto.precision:.3f}, recall {tuned.auto.recall:.3f}, F1 "
            f"{tuned.auto.f1:.3f} (--threshold auto uses it)"
        )
    return "\n".join(lines)


def match_table(matches: Sequence[Match]) -> str:
    if not matches:
        return "no duplicates found"
    header = f"{'id':<16} {'match':<6} {'edit':>4} {'similarity':>10} {'shared':>6}  content"
    lines = [header]
    for m in matches:
        content = m.content if len(m.content) <= 60 else m.content[:57] + "..."
        copies = f" (+{counted(len(m.copies), 'copy', 'copies')})" if m.copies else ""
        lines.append(
            f"{m.id:<16} {'exact' if m.exact else 'near':<6} {m.edit_distance:>4} "
            f"{m.similarity:>10.3f} {m.shared_tokens:>6}  {content}{copies}"
        )
    return "\n".join(lines)


def write_file_matches(
    found: Iterable[tuple[str, Match]], out: IO[str], format: ReportFormat = "tsv"
) -> None:
    """A lookup of a file's records: one line per (record, stored duplicate)."""
    with file_matches_writer(out, format) as write:
        write(found)


@contextmanager
def file_matches_writer(
    out: IO[str], format: ReportFormat = "tsv"
) -> Iterator[Callable[[Iterable[tuple[str, Match]]], None]]:
    """What writes a lookup of a file's records a batch at a time, each batch flushed as it is
    written (a stream's records answered as they arrive): one line per (record, stored
    duplicate), the header with the first batch or, where none came, when the block ends
    (nothing where it ends in an error). In TSV, as in every TSV neardup writes, a yes or no
    is 1 or 0 and a list (``copies``) a JSON list; JSON lines keep true, false and lists as
    they are."""
    columns = ["id", "stored_id", "exact", "edit_distance", "similarity", "shared_tokens", "copies"]
    listed = format in JSON_FORMATS
    with ExitStack() as begun:
        write_row: Callable[[Sequence[object]], None] | None = None

        def write(found: Iterable[tuple[str, Match]]) -> None:
            nonlocal write_row
            if write_row is None:
                write_row = begun.enter_context(row_writer(columns, out, format))
            for record_id, m in found:
                write_row(
                    (
                        record_id,
                        m.id,
                        m.exact if listed else int(m.exact),
                        m.edit_distance,
                        round(m.similarity, 6),
                        m.shared_tokens,
                        list(m.copies) if listed else _json_list(m.copies),
                    )
                )
            out.flush()

        yield write
        write(())


def _json_list(values: Sequence[str]) -> str:
    return json.dumps(list(values), ensure_ascii=False) if values else ""


def matches_json(matches: Sequence[Match]) -> str:
    return json.dumps([asdict(m) for m in matches], ensure_ascii=False, indent=2)


def explanation_table(e: Explanation) -> str:
    def side(name: str, record_id: str | None, content: str) -> str:
        return f"{name:<20}{f'id {record_id}: ' if record_id is not None else 'text: '}{content}"

    bands = ", ".join(map(str, e.bands_shared[:12])) + (" ..." if len(e.bands_shared) > 12 else "")
    return "\n".join(
        [
            side("A", e.a_id, e.a_content),
            side("B", e.b_id, e.b_content),
            f"{'word diff':<20}{e.marked_diff()}",
            f"{'word edits':<20}{e.edit_distance}",
            f"{f'Jaccard ({e.shingle})':<20}{e.jaccard:.3f}  "
            f"({counted(e.shingles_shared, 'shingle')} shared, {e.shingles_only_a} only in A, "
            f"{e.shingles_only_b} only in B)",
            *(
                [
                    f"{'weighted':<20}{e.weighted:.3f}  (each shingle weighing its rarity)",
                    f"{'numerals':<20}{e.numeral_agreement:.3f}  (A: "
                    f"{' '.join(e.numerals[0]) or 'none'}; B: {' '.join(e.numerals[1]) or 'none'}"
                    "; the numerals similarity is weighted times this)",
                ]
                if e.weighted is not None
                else []
            ),
            *(
                [
                    f"{'rarest shared':<20}"
                    + ", ".join(f"{text!r} ({held})" for text, held in e.rarest_shared)
                    + "  (records holding each)"
                ]
                if e.rarest_shared
                else []
            ),
            f"{'signature estimate':<20}{e.signature_estimate:.3f}  ({e.signature_shared} of "
            f"{e.num_hashes} positions agree)",
            f"{'bands':<20}{len(e.bands_shared)} of {e.num_bands} shared"
            + (f": {bands}" if bands else ""),
            f"{'verdict':<20}{e.reason}",
        ]
    )


def evaluation_table(result: Evaluation) -> str:
    o = result.overall
    lines = [
        f"precision {o.precision:.4f}  recall {o.recall:.4f}  F1 {o.f1:.4f}  "
        f"({o.right} of {o.reported} reported pairs are true; {o.true} true pairs)"
    ]
    if result.recall_by_similarity:
        lines += ["", "true similarity   true pairs   found   recall"]
        lines += [
            f"[{lo:.1f}, {hi:.1f}{']' if hi >= 1.0 else ')'}        {n:>10} {k:>7}   {k / n:.4f}"
            for lo, hi, n, k in result.recall_by_similarity
        ]
    if result.by_threshold:
        lines += ["", "threshold   reported   precision   recall      F1"]
        lines += [
            f"{t:>9.2f} {s.reported:>10} {s.precision:>11.4f} {s.recall:>8.4f} {s.f1:>7.4f}"
            for t, s in result.by_threshold
        ]
    if result.complete_from is not None and result.complete_from > THRESHOLDS[0]:
        lines.append(
            f"(rows from {result.complete_from:.4g}, where the report's pairs begin; for lower "
            "thresholds, eval a report made with a lower --threshold)"
        )
    return "\n".join(lines)


def tuning_table(tuning: Tuning) -> str:
    lines = [
        f"threshold {tuning.threshold}, {tuning.num_hashes} hashes: P(candidate) at similarity s",
        f"{'bands':>5} {'rows':>4} {'FN mass':>8} {'FP mass':>8}  "
        + " ".join(f"{s:>5}" for s in TUNE_POINTS),
    ]
    for c in tuning.choices:
        curve = " ".join(
            f"{float(candidate_probability(s, c.bands, c.rows)):>5.2f}" for s in TUNE_POINTS
        )
        mark = "  <- recommended" if c == tuning.recommended else ""
        masses = f"{c.false_negative_mass:>8.4f} {c.false_positive_mass:>8.4f}"
        lines.append(f"{c.bands:>5} {c.rows:>4} {masses}  {curve}{mark}")
    return "\n".join(lines)


def tuning_json(tuning: Tuning) -> str:
    rows = [asdict(c) | {"recommended": c == tuning.recommended} for c in tuning.choices]
    return json.dumps(rows, indent=2)


HISTOGRAM_WIDTH = 40


def histogram_text(
    histogram: Sequence[int],
    threshold: float | None,
    how: str,
    nearest: Sequence[int] | None = None,
) -> str:
    """Candidate pairs by similarity, two bins a row, bars on a log scale (the unrelated pairs
    outnumber the near-duplicates by orders of magnitude), the threshold's row marked; and the
    contents by their nearest similarity when the threshold was read from those."""
    shown = "none" if threshold is None else f"{threshold:g}"
    lines = [
        f"threshold {shown} ({how})",
        *_histogram_rows(histogram, threshold, "candidate pairs"),
    ]
    if nearest is not None and NEAREST_SPLIT in how:
        lines += _histogram_rows(nearest, threshold, "contents, at the nearest other one")
    return "\n".join(lines)


def _histogram_rows(histogram: Sequence[int], threshold: float | None, what: str) -> list[str]:
    rows = [(2 * i, sum(histogram[2 * i : 2 * i + 2])) for i in range((len(histogram) + 1) // 2)]
    largest = math.log1p(max((n for _, n in rows), default=0)) or 1.0
    lines = [f"similarity  {what} (log scale)"]
    step = 1 / len(histogram) if len(histogram) else 0.02
    for first, count in rows:
        low, high = first * step, (first + 2) * step
        bar = "#" * round(HISTOGRAM_WIDTH * math.log1p(count) / largest)
        mark = "  <- threshold" if threshold is not None and low <= threshold < high else ""
        lines.append(f"{low:4.2f}-{high:4.2f}  {count:>8,} {bar}{mark}")
    return lines


def phase_times(seconds: Mapping[str, float]) -> str:
    """Where a report's time went: ``time: 3.1 s (reading 0.7 s, joining 0.3 s, ...)``."""
    ordered = sorted(seconds.items(), key=lambda item: PHASES.index(item[0]))
    phases = ", ".join(f"{what} {spent:.1f} s" for what, spent in ordered)
    return f"time: {sum(seconds.values()):.1f} s ({phases})"
