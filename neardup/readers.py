"""Streaming record readers for line, TSV, CSV and JSON-lines files.

A reader yields :class:`Record` (id, text) one at a time, so memory does not grow with the file.
Bad records (undecodable bytes, empty lines, lines with an id and no text, rows without the text
fields) are skipped and counted in :class:`SkipLog` with their line numbers; a missing field name
is an error raised when the reader is opened, before anything is written.
"""

from __future__ import annotations

import codecs
import csv
import gzip
import io
import json
import os
import re
import shlex
import stat
import sys
import zlib
from bisect import insort
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain, islice
from pathlib import Path
from typing import IO, Any, Literal, NamedTuple, TypeVar

from .errors import NeardupError
from .fingerprint import holds_surrogates
from .phrases import counted

Format = Literal["lines", "text", "tsv", "csv", "jsonl", "json", "folder"]
# The formats of a record file; a folder given as records is one of documents (FolderReader).
FORMATS: tuple[Format, ...] = ("lines", "text", "tsv", "csv", "jsonl", "json")

_EXTENSIONS: dict[str, Format] = {
    ".txt": "lines",
    ".lines": "lines",
    ".tsv": "tsv",
    ".tab": "tsv",
    ".csv": "csv",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "json",
}
_ID_SEPARATOR = re.compile(r"[ \t]")
# The key of a lines or text file's record's values: its line as read, to write it back whole.
LINE = ""
# A JSON escape of a surrogate: half of a pair, unless the other half follows.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
# Values that are not content (see RecordReader._leave_out_noise), and how many rows decide.
_NOISE = {
    "URLs": re.compile(r"^(https?://|www\.)\S+$", re.IGNORECASE),
    # 10:30, and within an ISO 8601 timestamp: 2024-01-02T10:00:00Z
    "times of day": re.compile(r"(?<!\d)\d{1,2}:\d{2}(?!\d)"),
}
SAMPLE_ROWS = 200
SAMPLE_BYTES = 65_536  # read first to tell a file's encoding

csv.field_size_limit(sys.maxsize)


@dataclass(slots=True)  # one per record read; frozen, it would take five times as long to make
class Record:
    id: str
    text: str
    line: int = 0  # where it starts in its file, for messages about it
    # the row or object as read (tsv, csv, jsonl; a lines or text file's line for dedup), to
    # write the record back whole
    values: Mapping[str, object] | None = field(default=None, compare=False, repr=False)
    source: str = ""  # its file's name, where a run reads several, for messages about it

    @property
    def where(self) -> str:
        """Where it is, for a message: ``line 3``, ``b.csv, line 3`` of several files, or the
        file that is the record (a folder's document, of no line)."""
        if not self.line:
            return self.source
        return f"{self.source}, line {self.line}" if self.source else f"line {self.line}"


@dataclass
class SkipLog:
    """Counts skipped records by reason and keeps the first few line numbers."""

    reasons: Counter[str] = field(default_factory=Counter)
    examples: list[tuple[int, str]] = field(default_factory=list)
    keep: int = 5

    def add(self, line: int, reason: str, source: str = "") -> None:
        """Count a skip, and keep its line (with its file's ``source``, where a run reads
        several) if it is among the first."""
        self.reasons[reason] += 1
        # The first lines, in order: a sample read ahead skips some lines before earlier ones.
        if len(self.examples) < self.keep or line < self.examples[-1][0]:
            insort(self.examples, (line, f"{source}: {reason}" if source else reason))
            del self.examples[self.keep :]

    @property
    def total(self) -> int:
        return sum(self.reasons.values())

    def merge(self, other: SkipLog, source: str) -> None:
        self.reasons.update(other.reasons)
        for line, reason in other.examples:
            if len(self.examples) < self.keep:
                self.examples.append((line, f"{source}: {reason}"))

    def summary(self) -> str:
        if not self.total:
            return "none"
        counts = ", ".join(f"{n:,} {reason}" for reason, n in self.reasons.most_common())
        lines = ", ".join(
            f"line {line} ({reason})" if line else reason for line, reason in self.examples
        )
        return f"{self.total:,} ({counts}); first: {lines}"


STDIN = "-"  # a path that names standard input
# A URL given for a file (https://…, s3://…), or a path made of one ("https:/…"): two letters or
# more before the colon, where a Windows drive has one.
_URL = re.compile(r"[a-z][a-z0-9+.-]+:/", re.IGNORECASE)
# A file that starts with one of these byte order marks is read in its encoding, as UTF-8.
# UTF-32's come first: its little-endian mark begins as UTF-16's does.
_MARKED_ENCODINGS = {
    codecs.BOM_UTF32_LE: "UTF-32",
    codecs.BOM_UTF32_BE: "UTF-32",
    codecs.BOM_UTF16_LE: "UTF-16",
    codecs.BOM_UTF16_BE: "UTF-16",
}
GZIP_MAGIC = b"\x1f\x8b"
BYTE_ORDER_MARK = "\ufeff"  # as text; in UTF-8, codecs.BOM_UTF8
_SAVE_AS_TEXT = "save it as CSV UTF-8, or as tab-separated or JSON lines text"


class _NotRecords(NamedTuple):
    """A kind of file given as records that holds none: how its first bytes start, what it is,
    and how to make records of it (``{name}``: the file)."""

    start: re.Pattern[bytes]
    what: str
    advice: str


# The first bytes of files that are given as records and are not text, what they are, and how
# to make records of them: spreadsheets, documents, columnar files and archives that neardup
# does not unpack, whose bytes would be read as a header of garbage or as lines skipped one by
# one. Compressed files say the command that unpacks them ({name}: the file).
_NOT_TEXT = [
    _NotRecords(
        re.compile(rb"PK\x03\x04"),
        "a zip archive (as an .xlsx, .ods or .docx file is)",
        _SAVE_AS_TEXT,
    ),
    _NotRecords(
        re.compile(rb"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"),
        "an Office document (.xls or .doc)",
        _SAVE_AS_TEXT,
    ),
    _NotRecords(re.compile(rb"%PDF-"), "a PDF document", _SAVE_AS_TEXT),
    _NotRecords(
        re.compile(rb"PAR1[\0-\x1f]"),  # a page header follows, not text
        "a Parquet file",
        "export it as CSV or JSON lines (DuckDB, pandas and Spark write either)",
    ),
    _NotRecords(re.compile(rb"ARROW1\0"), "an Arrow file", "export it as CSV or JSON lines"),
    _NotRecords(
        re.compile(rb"SQLite format 3\0"),
        "a SQLite database",
        "a store is named with --store, and records are read from a file of lines, TSV, CSV "
        "or JSON",
    ),
    _NotRecords(
        re.compile(rb"BZh[1-9]1AY&SY"),
        "compressed with bzip2",
        "neardup reads gzip, not bzip2: unpack it first (bunzip2 -k {name})",
    ),
    _NotRecords(
        re.compile(rb"\xfd7zXZ\0"),
        "compressed with xz",
        "neardup reads gzip, not xz: unpack it first (unxz -k {name})",
    ),
    _NotRecords(
        re.compile(rb"\x28\xb5\x2f\xfd"),
        "compressed with zstd",
        "neardup reads gzip, not zstd: unpack it first (unzstd {name})",
    ),
    _NotRecords(
        re.compile(rb"7z\xbc\xaf\x27\x1c"), "a 7-Zip archive", "unpack it first (7z x {name})"
    ),
]
MAGIC_BYTES = 64  # enough of a file's start to tell each of them, a page's too


UTF8 = "utf-8"
# What every record format is written in: an encoding that writes these as ASCII does.
_ASCII_SYNTAX = "\t\n\r ,;\"'{}[]:=0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def text_encoding(name: str | None) -> str:
    """The name of the codec that reads record files in ``name`` (``--encoding``; UTF-8
    without it): one that keeps ASCII as it is, as UTF-8, the Windows code pages and the ISO
    8859 ones do, since lines, tabs, commas and quotes are found in the bytes before
    decoding."""
    if name is None:
        return UTF8
    try:
        written = _ASCII_SYNTAX.encode(name)
        codec = codecs.lookup(name).name
    except LookupError:
        raise NeardupError(
            f"unknown encoding {name!r}: give one such as windows-1252, latin-1 or utf-8"
        ) from None
    if written != _ASCII_SYNTAX.encode():
        raise NeardupError(
            f"--encoding {name} writes ASCII in bytes of its own; neardup reads encodings that "
            "keep it (UTF-8, Windows and ISO code pages), and UTF-16 and UTF-32 by the byte "
            "order mark a file starts with (leave --encoding out): save the file as UTF-8"
        )
    return UTF8 if codec in ("utf-8", "utf-8-sig") else codec


def _file_encoding(encoding: str) -> str:
    """The codec that decodes a whole file, or its start, in ``encoding``: UTF-8 without the
    byte order mark a spreadsheet's CSV UTF-8 starts with."""
    return "utf-8-sig" if encoding == UTF8 else encoding


def not_text(start: bytes) -> str | None:
    """What a file is that starts with ``start`` (MAGIC_BYTES of it or more), if it is a
    document, an archive or a compressed file other than gzip rather than text; None for
    anything else."""
    return next((kind.what for kind in _NOT_TEXT if kind.start.match(start)), None)


# A page or an XML document given as records, as web applications export "Excel" files: text,
# so a folder of saved pages is documents, but never a record file's first line.
_MARKUP = _NotRecords(
    re.compile(rb"(?:\xef\xbb\xbf)?\s*<(?:!doctype html|html|\?xml)[\s>]", re.IGNORECASE),
    "an HTML page or an XML document (as some exports named .xls are)",
    _SAVE_AS_TEXT,
)


def _not_records(start: bytes) -> _NotRecords | None:
    """What a file given as records is that starts with ``start``, where it holds none: not
    text (:func:`not_text`), or a page or an XML document."""
    return next((kind for kind in (*_NOT_TEXT, _MARKUP) if kind.start.match(start)), None)


def _not_records_error(name: str, kind: _NotRecords) -> NeardupError:
    quoted = "FILE" if name == file_name(STDIN) else shlex.quote(name)
    advice = kind.advice.format(name=quoted)
    return NeardupError(f"{name} is {kind.what}, not a record file: {advice}")


def not_a_table(path: Path) -> str | None:
    """Why a file of pairs at ``path`` is no table to read, and what to do, where it is a
    spreadsheet's workbook or another file that is not text (:func:`_not_records`)."""
    with path.open("rb") as file:
        kind = _not_records(file.read(MAGIC_BYTES))
    return None if kind is None else f"it is {kind.what}: {kind.advice.format(name=path)}"


def standard_input() -> IO[str]:
    """Standard input, or a NeardupError where the process has none (a job started with it
    closed)."""
    if sys.stdin is None:
        raise NeardupError("standard input is closed: give a file or a text in place of -")
    return sys.stdin


def file_name(path: str | Path) -> str:
    """How messages name a record file: standard input by that name."""
    return "standard input" if str(path) == STDIN else str(path)


def _url_error(url: str, format: Format | None) -> str:
    """What to do with a URL given for a record file: download it, or pipe it in."""
    if not url.lower().startswith(("http://", "https://", "ftp://")):
        return f"{url} is a URL: neardup reads files; copy it to one first"
    quoted = shlex.quote(url)
    piped = f"curl -fsSL {quoted} | neardup … - --format {format or record_format(url) or 'csv'}"
    download = f"download it (curl -fLO {quoted})"
    return f"{url} is a URL: neardup reads files; {download}, or pipe it in: {piped}"


def repeated_file(paths: Iterable[str | Path]) -> str | None:
    """Where two of ``paths`` are one file (``a.csv ./a.csv``, or globs that overlap), which:
    its records would be read twice, the second reading replacing the first's."""
    seen: dict[tuple[int, int], str] = {}
    for path in paths:
        try:
            stats = os.fstat(0) if str(path) == STDIN else os.stat(path)
        except OSError:  # the reader says why it cannot read it
            continue
        file, named = (stats.st_dev, stats.st_ino), file_name(path)
        if file in seen:
            if seen[file] == named:
                return f"{named} is given twice"
            return f"{seen[file]} and {named} are the same file"
        seen[file] = named
    return None


def read_once(path: str | Path) -> bool:
    """Whether ``path`` can be read only once: standard input, a pipe or another stream (a
    shell's ``<(zcat records.tsv.gz)``), not a regular file. What a second reader takes from
    a pipe, the first never sees."""
    if str(path) == STDIN:
        return True
    try:
        mode = os.stat(path).st_mode
    except OSError:  # the reader says why it cannot read it
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))  # a folder's files are regular


# A csv file's first line that names its delimiter, as Excel writes and reads it: "sep=;".
_SEPARATOR_LINE = re.compile(r"sep=(.)", re.IGNORECASE)
# What a csv file's fields may be separated by, other than commas, as its summary names them.
_OTHER_DELIMITERS = {";": "semicolons", "\t": "tabs"}


def csv_delimiter(first: str) -> tuple[str, bool]:
    """The delimiter of a CSV file, read from its first line, and whether that line only names
    it (a spreadsheet's ``sep=;`` line, the header following it). Else the line is the header:
    where commas make one field of it, semicolons (spreadsheets export CSV so where the comma
    is the decimal separator) or tabs (a tab-separated file named .csv), whichever make more
    fields; else a comma."""
    if named := _SEPARATOR_LINE.fullmatch(first.rstrip("\r\n")):
        return named[1], True
    return _header_delimiter(first), False


def _header_delimiter(header: str) -> str:
    def fields(delimiter: str) -> int:
        return len(next(csv.reader([header], delimiter=delimiter), []))

    if fields(",") > 1:
        return ","
    most = max(_OTHER_DELIMITERS, key=fields)
    return most if fields(most) > 1 else ","


def record_format(path: str | Path) -> Format | None:
    """The record format a file's name says (``people.csv.gz``: csv), if it says one."""
    suffixes = [s.lower() for s in Path(path).suffixes]
    if suffixes and suffixes[-1] == ".gz":
        suffixes.pop()
    return _EXTENSIONS.get(suffixes[-1]) if suffixes else None


def detect_format(path: str | Path) -> Format:
    if str(path) == STDIN:
        return "lines"
    if named := record_format(path):
        return named
    if not read_once(path) and (kind := _what_file_is(Path(path))):
        raise _not_records_error(str(path), kind)
    raise NeardupError(
        f"cannot tell the format of {path} from its name: give --format ({', '.join(FORMATS)})"
    )


def _peek(raw: IO[bytes], size: int) -> bytes:
    """The next ``size`` bytes of a buffered file, left to be read."""
    return raw.peek(size)[:size]  # type: ignore[attr-defined]


def _marked_encoding(raw: IO[bytes]) -> str | None:
    """UTF-16 or UTF-32, where a buffered file starts with its byte order mark (None where a
    .gz is damaged before it: reading it says so)."""
    try:
        start = _peek(raw, 4)
    except _DAMAGE:
        return None
    return next((name for mark, name in _MARKED_ENCODINGS.items() if start.startswith(mark)), None)


def _undecodable(exc: UnicodeError) -> tuple[str, int]:
    """Bytes of a UTF-16 or UTF-32 file that are none of its characters (half of one, where the
    file was cut short) become a byte that is not UTF-8 either: their line is skipped and
    counted as undecodable, as a UTF-8 file's is."""
    if not isinstance(exc, UnicodeDecodeError):
        raise exc
    return "\udcff", exc.end  # surrogateescape writes it as the byte 0xff


codecs.register_error("neardup.undecodable", _undecodable)


class _AsUtf8(io.RawIOBase):
    """A UTF-16 or UTF-32 file's bytes, as a spreadsheet's "Unicode text" is saved, read as
    UTF-8 with UTF-8's byte order mark: everything that reads a file's lines as bytes reads
    it as it reads a UTF-8 file's. Decoded as they arrive, so a stream's lines are read as
    soon as they are whole."""

    def __init__(self, source: IO[bytes], encoding: str) -> None:
        super().__init__()
        self.source = source
        self._decoder = codecs.getincrementaldecoder(encoding)("neardup.undecodable")
        self._pending = codecs.BOM_UTF8

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not self._pending:
            read = self.source.read1(SAMPLE_BYTES)  # type: ignore[attr-defined]
            text = self._decoder.decode(read, final=not read)
            if not read and not text:
                return 0
            self._pending = text.encode("utf-8", "surrogateescape")
        size = min(len(buffer), len(self._pending))
        buffer[:size] = self._pending[:size]
        self._pending = self._pending[size:]
        return size

    def close(self) -> None:
        self.source.close()
        super().close()


def _position(raw: IO[bytes]) -> int:
    """How far into the file as stored ``raw`` has read: a gzip file's compressed bytes, a
    UTF-16 or UTF-32 file's own bytes."""
    if isinstance(raw, io.BufferedReader) and isinstance(raw.raw, _AsUtf8):
        return _position(raw.raw.source)
    return raw.fileobj.tell() if isinstance(raw, gzip.GzipFile) else raw.tell()


def _what_file_is(path: Path) -> _NotRecords | None:
    """:func:`_not_records` of a regular file's first bytes (None where it cannot be read:
    reading it says why)."""
    try:
        with open(path, "rb") as f:
            return _not_records(f.read(MAGIC_BYTES))
    except OSError:
        return None


class RecordReader:
    """Reads one file as records, once. ``skipped`` and ``bytes_read`` grow as it goes."""

    def __init__(
        self,
        path: str | Path,
        format: Format | None = None,
        *,
        id_field: str | None = None,
        text_fields: Sequence[str] = (),
        number_prefix: str = "",
        encoding: str | None = None,
        indexed_with: NamedFields | None = None,
        every_row: bool = False,
    ) -> None:
        if _URL.match(str(path)):
            raise NeardupError(_url_error(str(path), format))
        self.path = Path(path)
        self.encoding = text_encoding(encoding)
        self.format: Format = format or detect_format(path)
        if self.format not in FORMATS:
            raise NeardupError(f"unknown format {format!r}: use one of {', '.join(FORMATS)}")
        if self.format in ("lines", "text") and (id_field or text_fields):
            raise NeardupError(
                "--id-field and --text-field apply to tsv, csv, jsonl and json files"
            )
        # A lines file read as text (format not given): its first words repeat, and where.
        self.first_words_repeat: tuple[str, int, int] | None = None
        # A json file's only object, around its records: the field that holds them, and the
        # object's other fields (in their order, that field's value left out) to write back.
        self.wrapper_key: str | None = None
        self.wrapper: dict[str, object] = {}
        # A lines file read as ID TEXT whose ids are words, none with a digit: the first, and
        # its line.
        self.word_id: tuple[str, int] | None = None
        self._format_given = format is not None
        self.id_field = id_field
        self.text_fields = list(text_fields)
        # The fields the store's records were read with, where a run named them: a file read
        # without naming its own reads them too, so that its records are made as those were.
        self.indexed_with = indexed_with or NamedFields()
        self.as_indexed: list[str] = []  # the flags of indexed_with that this file is read with
        self.automatic_text = False  # neardup chooses the text fields (none were named)
        self.left_out: dict[str, str] = {}  # fields it left out of the text, and why
        self.fields: list[str] = []  # the header's names, or the first JSON objects' keys
        self.header: list[str] = []  # a tsv or csv file's header row as read, to write back
        self.number_prefix = number_prefix  # for record-number ids, when several files are read
        # and then each record's file is named in messages about it (Record.where)
        self.source = file_name(self.path) if number_prefix else ""
        self.skipped = SkipLog()
        # Yield the rows of no record too (an empty id or text), and a lines or text file's
        # line as read, for a file written back whole (dedup): skipped and counted otherwise.
        self.every_row = every_row
        self.damaged: str | None = None  # where and how a compressed file turned out damaged
        self.streamed = read_once(path)  # no size, no position, no second reading
        self.delimiter = "\t" if self.format == "tsv" else ","  # a csv file's: read from its header
        self.separator_line = ""  # a csv file's "sep=;" line before its header, if it has one
        self._raw = self._open()
        sample = self._sample()
        start = sample[:MAGIC_BYTES]
        self._refuse_what_cannot_be_read(start, sample)
        if self.format == "lines" and not self._format_given:
            self._refuse_a_table_as_lines(sample)
        # Lines ended by a carriage return alone, as old Mac exports end them ("Tab delimited
        # text (Macintosh)"): split at each one, where they were read as one line.
        self._cr_lines = b"\r" in sample and b"\n" not in sample
        # How the file ends its lines, as its first line ends: a file written back keeps it.
        self.newline = "\r" if self._cr_lines else _first_line_end(sample)
        # Whether every line read so far ends with a line break: only a file's last line may
        # not, which is where a file that arrived cut short breaks off.
        self._line_ended = True
        # A tab-separated file that quotes its fields as Excel's "Text (Tab delimited)" does,
        # where one holds a tab or a line break: read as CSV of tabs, where a line break inside
        # quotes made two broken records of one.
        self.quoted = self.format == "tsv" and _quotes_breaks(sample, self.encoding)
        # Whether the file starts with UTF-8's byte order mark, as a spreadsheet's CSV UTF-8
        # does: a file written back keeps it, which is how such a spreadsheet knows UTF-8. A
        # file read in a code page is written back in UTF-8, so with the mark too.
        self.bom = start.startswith(codecs.BOM_UTF8) or self.encoding != UTF8
        self._records = self._until_damage(self._parse())
        self._first = next(self._records, None)  # reads the header now, so field errors come first

    @property
    def size(self) -> int:
        return 0 if self.streamed else self.path.stat().st_size

    @property
    def numbered(self) -> bool:
        """Whether the ids are record numbers: a text file, or a tsv, csv or jsonl one with no id
        field."""
        return self.format != "lines" and self.id_field is None

    @property
    def first(self) -> Record | None:
        """The file's first record, read with its header (and still to come when iterating)."""
        return self._first

    @property
    def stdin(self) -> bool:
        return str(self.path) == STDIN

    @property
    def bytes_read(self) -> int:
        """How far into the file (compressed bytes for .gz) reading has gone, for progress bars."""
        if self._raw.closed or self.streamed:
            return self.size
        return _position(self._raw)

    def __iter__(self) -> Iterator[Record]:
        if self._first is not None:
            yield self._first
        yield from self._records
        self._raw.close()

    def _until_damage(self, records: Iterator[Record]) -> Iterator[Record]:
        """The records up to where a compressed file turns out truncated or corrupt; the rest
        of the file is one counted skip, so what came before it is still indexed."""
        line = 0
        try:
            for record in records:
                line = record.line
                yield record
        except (*_DAMAGE, BrokenOff) as exc:
            start = exc.line if isinstance(exc, BrokenOff) else line + 1
            self.skipped.add(start, f"the rest of the file: {_damage(exc)}")
            self.damaged = f"damaged from line {start} ({_damage(exc)})"

    def close(self) -> None:
        self._raw.close()

    def _refuse_a_table_as_lines(self, sample: bytes) -> None:
        """Standard input, and a .txt file, are read as lines of ID TEXT unless --format says
        otherwise: a CSV table piped in was read so, each row's first cell and the next one's
        first word taken for its id ('p1,Kenneth') and its header for a record, and so was a
        spreadsheet's "Text (Tab delimited)" .txt. One error where it is a table of tabs (two
        or more on every line), or JSON; or, piped in, a table of commas (the first word of two
        lines holds one, or of the first line, a header, where every line holds as many
        cells: a .txt file of sentences has such lines too)."""
        text = sample.decode(self.encoding, errors="replace").removeprefix("\ufeff")
        lines = [line for line in text.splitlines()[:SAMPLE_ROWS] if line.strip()]
        if not lines:
            return
        first_words = [_first_word(line) for line in lines[:2]]
        whole = lines[:-1] or lines  # the last may be cut short
        tabs = {line.count("\t") for line in whole}
        if _starts_json(lines[0]):
            kind, formats = "JSON", "jsonl (an object a line) or --format json"
        elif (
            self.stdin
            and len(lines) > 1
            and (all("," in word for word in first_words) or _a_header_above(whole))
        ):
            kind, formats = "a CSV table", "csv"
        elif len(tabs) == 1 and min(tabs) >= 2:
            kind, formats = "a TSV table", "tsv"
        else:
            return
        by = "" if self.stdin else " by its name"
        raise NeardupError(
            f"{file_name(self.path)} looks like {kind} (its first line: {lines[0][:60]!r}), "
            f"and is read as lines of ID TEXT{by} unless told: give --format {formats}, or "
            "--format lines to read it so"
        )

    def _refuse_what_cannot_be_read(self, start: bytes, sample: bytes) -> None:
        """A file that starts as a file that holds no records does (:func:`_not_records`), or
        is in another encoding than it is read in, in one line, where its lines would be
        skipped one by one as undecodable, its bytes read as a header, or its letters
        garbled."""
        if kind := _not_records(start):  # with --format, or a name that misleads
            raise _not_records_error(file_name(self.path), kind)
        name = file_name(self.path)
        if self.encoding != UTF8:
            if where := utf8_letter(sample):
                line, letter = where
                raise NeardupError(
                    f"{name} is UTF-8 (line {line} holds {letter!r}, which --encoding "
                    f"{self.encoding} would read as "
                    f"{letter.encode().decode(self.encoding, 'replace')!r}): leave it out"
                )
        elif where := code_page_byte(sample):
            raise NeardupError(
                f'{name} is not UTF-8 but a Windows code page, as a spreadsheet\'s plain "CSV" '
                f"is saved ({held_byte(*where)}, and no line holds UTF-8): give --encoding "
                f"windows-1252, save it as CSV UTF-8, or convert it: {self._conversion()}"
            )

    def _line_encoding(self, number: int) -> str:
        """How line ``number`` is decoded: the first without UTF-8's byte order mark."""
        return _file_encoding(self.encoding) if number == 1 else self.encoding

    def _conversion(self) -> str:
        """The command that makes a UTF-8 copy of a file in Windows-1252."""
        iconv = "iconv -f WINDOWS-1252 -t UTF-8"
        if self.stdin:
            return f"… | {iconv} | neardup …"
        path = self.path
        if isinstance(self._raw, gzip.GzipFile):
            plain = path.with_suffix("") if path.suffix.lower() == ".gz" else path
            converted = plain.with_name(f"utf8-{plain.name}")
            return f"gunzip -c {shlex.quote(str(path))} | {iconv} > {shlex.quote(str(converted))}"
        converted = path.with_name(f"utf8-{path.name}")
        return f"{iconv} {shlex.quote(str(path))} > {shlex.quote(str(converted))}"

    def _raw_lines(self) -> Iterator[bytes]:
        """The file's lines as bytes, each ending with a line feed but the last, which may
        end with none (see ``_line_ended``)."""
        if not self._cr_lines:
            return iter(self._raw)
        return _split_at_returns(self._raw)

    def _noting_ends(self, lines: Iterable[str]) -> Iterator[str]:
        """``lines``, noting one that ends with no line break (see ``_line_ended``)."""
        for line in lines:
            if line[-1:] not in "\r\n":
                self._line_ended = False
            yield line

    def _sample(self) -> bytes:
        """The file's first SAMPLE_BYTES (decompressed), left to be read: all that is buffered
        of standard input or a pipe, which cannot be read twice. None where a .gz is damaged
        before them: that is counted as the file is read."""
        try:
            if self.streamed:
                return _peek(self._raw, SAMPLE_BYTES)
            with self._open() as again:
                return again.read(SAMPLE_BYTES)
        except (OSError, EOFError, zlib.error):
            return b""

    def _open(self) -> IO[bytes]:
        """The file's bytes, decompressed where it is gzip's, whatever its name says (a download
        saved without its .gz), and as UTF-8 where it is UTF-16 or UTF-32."""
        raw = self._decompressed()
        if encoding := _marked_encoding(raw):
            if self.encoding != UTF8:
                raw.close()
                raise NeardupError(
                    f"{file_name(self.path)} is {encoding} (it starts with its byte order "
                    f"mark), which neardup reads as it is: leave --encoding out"
                )
            return io.BufferedReader(_AsUtf8(raw, encoding), SAMPLE_BYTES)  # type: ignore[return-value]
        return raw

    def _decompressed(self) -> IO[bytes]:
        raw = self._opened()
        if isinstance(raw, gzip.GzipFile) or _peek(raw, 2) != GZIP_MAGIC:
            return raw
        if self.streamed:  # what was peeked is in its buffer: read on through it
            return gzip.GzipFile(fileobj=raw, mode="rb")  # type: ignore[return-value]
        raw.close()
        return gzip.open(self.path, "rb")  # type: ignore[return-value]

    def _opened(self) -> IO[bytes]:
        if self.stdin:
            return standard_input().buffer
        try:
            if self.path.suffix.lower() == ".gz":
                return gzip.open(self.path, "rb")  # type: ignore[return-value]
            return open(self.path, "rb")
        except IsADirectoryError:
            raise NeardupError(f"{self.path} is a directory, not a record file") from None
        except OSError as exc:
            raise NeardupError(f"cannot read {self.path}: {exc.strerror or exc}") from None

    def _parse(self) -> Iterator[Record]:
        if self.format in ("lines", "text"):
            return self._lines()
        if self.format == "jsonl":
            return self._from_values(self._jsonl())
        if self.format == "json":
            return self._from_values(self._json())
        return self._from_values(self._delimited())

    def _decoded_lines(self) -> Iterator[tuple[int, str]]:
        for number, raw in enumerate(self._raw_lines(), start=1):
            if raw[-1:] != b"\n":
                self._line_ended = False
            try:
                line = raw.decode(self._line_encoding(number))
            except UnicodeDecodeError:
                self.skipped.add(number, "undecodable bytes")
                continue
            line = line.rstrip("\r\n")
            if not line.strip():
                self.skipped.add(number, "empty line")
                continue
            yield number, line

    def _lines(self) -> Iterator[Record]:
        lines = self._decoded_lines()
        if self.format == "lines" and not self._format_given:
            sample, lines = _peeked(lines, SAMPLE_ROWS)
            self.first_words_repeat = _repeated_word(sample)
            if self.first_words_repeat:
                self.format = "text"
            else:
                self.word_id = _word_ids(sample)
        as_read = (lambda line: {LINE: line}) if self.every_row else (lambda line: None)
        if self.format == "text":
            for count, (number, line) in enumerate(lines, start=1):
                record_id = f"{self.number_prefix}{count}"
                yield Record(record_id, line.strip(), number, as_read(line), self.source)
            return
        for number, line in lines:
            parts = _ID_SEPARATOR.split(line.strip(), maxsplit=1)
            if len(parts) < 2 or not parts[1].strip():
                if self.every_row:
                    yield Record(parts[0], "", number, as_read(line), self.source)
                else:
                    self.skipped.add(number, "id without text")
                continue
            yield Record(parts[0], parts[1], number, as_read(line), self.source)

    def _jsonl(self) -> Iterator[tuple[dict[str, object], int, int]]:
        """The objects of JSON lines; a line that is not JSON is skipped and counted."""

        def values() -> Iterator[tuple[int, int, object, bool]]:
            whole = 0  # objects read: a file of none is no JSON lines, not one cut short
            for count, (number, line) in enumerate(self._decoded_lines(), start=1):
                try:
                    value = json.loads(line, parse_float=JsonNumber)
                except json.JSONDecodeError:
                    if whole and not self._line_ended:
                        raise BrokenOff(
                            f"{_CUT_SHORT}its last line is no whole JSON", number
                        ) from None
                    self.skipped.add(number, "invalid JSON")
                    continue
                whole += isinstance(value, dict)
                yield count, number, value, bool(_SURROGATE_ESCAPE.search(line))

        return self._objects(values(), "half of a surrogate pair")

    def _json(self) -> Iterator[tuple[dict[str, object], int, int]]:
        """The objects of a JSON array (an API's or a database's export), or of objects one
        after another, read a part of the file at a time; JSON that breaks off ends the
        records (see :meth:`_until_damage`)."""
        text = io.TextIOWrapper(
            self._raw, encoding=self._line_encoding(1), errors="surrogateescape"
        )
        read = _json_values(text)
        first, damage = _read_ahead(read, 2)
        if len(first) == 1 and not damage and _table_of_objects(first[0][1]):
            raise NeardupError(
                f"{file_name(self.path)} is one object of objects with the same keys, a table "
                "as pandas' DataFrame.to_json() writes it by columns: write it one object a "
                "record, to_json(orient='records', lines=True) to a .jsonl file"
            )
        if len(first) == 1 and not damage and (wrapped := _wrapped_array(first[0][1])):
            # One object around the records ({"data": [...], "meta": …}), as APIs answer.
            self.wrapper_key, items = wrapped
            self.wrapper = {**first[0][1], self.wrapper_key: None}
            number, _, suspect = first[0]
            read = iter([(number, item, suspect) for item in items])
        else:
            read = chain(first, _raising(damage) if damage else read)
        values = (
            (count, number, value, suspect)
            for count, (number, value, suspect) in enumerate(read, start=1)
        )
        return self._objects(values, "undecodable bytes or half of a surrogate pair")

    def _objects(
        self, values: Iterable[tuple[int, int, object, bool]], surrogates: str
    ) -> Iterator[tuple[dict[str, object], int, int]]:
        """The JSON objects among ``values`` (count, line, value, and whether it may hold a
        surrogate, which is checked), with their count and line; the rest skipped and counted,
        a value holding a surrogate as ``surrogates``."""
        for count, number, value, suspect in values:
            if not isinstance(value, dict):
                self.skipped.add(number, "not a JSON object")
                continue
            if suspect and holds_surrogates(json.dumps(value, ensure_ascii=False)):
                self.skipped.add(number, surrogates)
                continue
            yield value, count, number

    def _tsv_rows(self) -> Iterator[tuple[int, list[str], str | None]]:
        """TSV has no quoting: a row is a line split at its tabs, which the csv module takes
        five times as long to do. Each row comes with why to skip it, if it is to be skipped;
        a strict decode tells bytes that are not UTF-8 without looking at the text again."""
        for number, raw in enumerate(self._raw_lines(), start=1):
            if raw[-1:] != b"\n":
                self._line_ended = False
            encoding = self._line_encoding(number)
            try:
                line, skip = raw.decode(encoding), None
            except UnicodeDecodeError:
                line, skip = raw.decode(encoding, "surrogateescape"), "undecodable bytes"
            line = line.rstrip("\r\n")
            yield number, line.split("\t"), skip if line.strip() else "empty line"

    def _rows(self) -> Iterator[tuple[int, list[str]]]:
        """CSV rows, each with the line it starts on. A row whose quoting is broken is
        skipped and counted, and reading resumes on the line after its start: a quote that never
        closes would otherwise swallow every record after it."""
        resume = 0  # lines to pass over before reading, after a broken row
        while True:
            text = io.TextIOWrapper(
                self._raw, encoding=self._line_encoding(1), errors="surrogateescape", newline=""
            )
            for _ in range(resume):
                text.readline()
            lines: Iterator[str] = self._noting_ends(text)
            if not resume and self.format == "csv":  # the header, read first, tells the delimiter
                header = text.readline()
                self.delimiter, named = csv_delimiter(header)
                if named:
                    self.separator_line = header
                    resume = 1  # the header is the next line
                else:
                    lines = self._noting_ends(chain([header], text))
            rows = csv.reader(lines, delimiter=self.delimiter, strict=True)
            done = resume  # lines read before the next row
            try:
                for row in rows:
                    yield done + 1, row
                    done = resume + rows.line_num
                return
            except csv.Error:
                if not self._line_ended:
                    cut = f"{_CUT_SHORT}it ends inside a quoted field"
                    raise BrokenOff(cut, done + 1) from None
                if self.streamed:  # what has been read from a pipe cannot be read again
                    raise NeardupError(
                        f"{file_name(self.path)}, line {done + 1}: broken quoting (a quote that "
                        "does not close?); neardup resumes after it only in a regular file"
                    ) from None
                self.skipped.add(done + 1, "broken quoting (a quote that does not close?)")
                resume = done + 1
                self._raw.close()
                self._raw = self._open()

    def _delimited(self) -> Iterator[tuple[dict[str, object], int, int]]:
        plain = self.format == "tsv" and not self.quoted
        rows = self._tsv_rows() if plain else _with_skips(self._rows())
        first = next(rows, None)
        if first is None:
            return
        header = first[1]
        if any(map(holds_surrogates, header)):
            raise NeardupError(f"{self.path}: the header row has bytes that are not UTF-8")
        self.header = list(header)  # as written, spaces around a name too ("Name ")
        # A column with no name (a spreadsheet's header cell left blank) is named by its place:
        # two of them were one field, the second's values in place of the first's.
        header = [name.strip() or f"column {n}" for n, name in enumerate(header, start=1)]
        if len(header) == 1:
            self._refuse_a_csv_as_tsv(header[0])
            rows = self._refuse_a_title(first[0], header[0], rows)
        self._check_fields(header, "the header row")
        fields = len(header)
        for count, (number, row, skip) in enumerate(rows, start=1):
            if not self._line_ended and len(row) < fields:  # a row that short is read, but
                # not where the file ends without a line break: a file that arrived cut short
                raise BrokenOff(
                    f"{_CUT_SHORT}its last line holds {len(row)} of the header's {fields} fields",
                    number,
                )
            # Extra values have no name to go under; empty ones (a row's trailing commas, as
            # spreadsheets leave them) lose nothing.
            extra = len(row) > fields and any(value.strip() for value in row[fields:])
            if skip or extra:
                self.skipped.add(number, skip or "more fields than the header")
                continue
            yield dict(zip(header, row, strict=False)), count, number

    def _refuse_a_csv_as_tsv(self, header: str) -> None:
        """A CSV file read as tsv (``--format tsv``) is a file of one field, the whole line
        each record's text: one error where that field's name is a CSV header."""
        if self.format == "tsv" and len(next(csv.reader([header]))) > 1:
            raise NeardupError(
                f"{file_name(self.path)}: its header is one tab-separated field that holds "
                f"commas ({header[:60]!r}): a CSV file? give --format csv"
            )

    def _refuse_a_title(
        self, line: int, title: str, rows: Iterator[tuple[int, list[str], str | None]]
    ) -> Iterator[tuple[int, list[str], str | None]]:
        """A header of one field whose next rows all hold more values is a title above the
        real header (a report exported with its name on top): each row would be skipped as
        having more fields than the header. The rows, read ahead, go on where it is not."""
        ahead, rows = _peeked(rows, 20)
        read = [row for _, row, skip in ahead if not skip]
        if read and all(len(row) > 1 and any(v.strip() for v in row[1:]) for row in read):
            raise NeardupError(
                f"{file_name(self.path)}: line {line} holds one field ({title!r}) and the rows "
                f"after it {len(read[0])}: a title above the header? Remove it, so that the "
                "first line names the fields"
            )
        return rows

    def _from_values(self, rows: Iterator[tuple[dict[str, object], int, int]]) -> Iterator[Record]:
        """Records from rows of named values (with their count and line). When no text field
        was named, the first rows decide which fields are text (see :meth:`_leave_out_noise`)."""
        objects = self.format in ("jsonl", "json")
        # The header read, or the first objects: an object holds the fields it has values for.
        # Where the text fields are named, a stream's are checked against its first object, so
        # that its records are answered as they arrive, not once 200 have come.
        named = self.streamed and not self.automatic_text
        first, rows = _peeked(rows, SAMPLE_ROWS if objects and not named else 1)
        if objects and first:
            keys = dict.fromkeys(key for values, _, _ in first for key in values)
            if paths := self._paths_named([values for values, _, _ in first]):
                keys.update(dict.fromkeys(paths))
                rows = ((_Nested(values), count, line) for values, count, line in rows)
            sampled = "JSON object" if len(first) == 1 else f"{len(first):,} JSON objects"
            self._check_fields(list(keys), f"the first {sampled}")
        if self.automatic_text:
            first, rows = _peeked(rows, SAMPLE_ROWS)
            self._leave_out_noise([values for values, _, _ in first])
        id_field, fields, skipped = self.id_field, self.text_fields, self.skipped
        one_field = fields[0] if len(fields) == 1 else None  # most files: one text, no join
        for values, count, line in rows:  # no call a record: this runs per line
            if id_field:
                raw = _unwrapped(values.get(id_field))
                record_id = "" if isinstance(raw, dict | list) else _text(raw).strip()
                if not record_id and not self.every_row:
                    nested = isinstance(raw, dict | list)
                    skipped.add(line, "id is a list or an object" if nested else "empty id")
                    continue
            else:
                record_id = f"{self.number_prefix}{count}"
            if one_field is not None:
                text = _text(values.get(one_field)).strip()
            else:
                text = " ".join(filter(None, [_text(values.get(f)).strip() for f in fields]))
            if text and record_id:
                yield Record(record_id, text, line, values, self.source)
            elif self.every_row:
                yield Record(record_id, "", line, values, self.source)
            else:
                skipped.add(line, "no text")

    def _paths_named(self, samples: list[dict[str, object]]) -> list[str]:
        """The fields named (or the store's records were read with) as a path into nested
        objects, ``address.city``, that some of ``samples`` hold."""
        named = [self.id_field, *self.text_fields]
        named += [self.indexed_with.id_field, *self.indexed_with.text_fields]
        return [
            name
            for name in dict.fromkeys(n for n in named if n and "." in n)
            if any(_Nested(sample).get(name) is not None for sample in samples)
        ]

    def _leave_out_noise(self, samples: list[dict[str, object]]) -> None:
        """Leave out of the text the fields whose values are nearly all URLs or times of day:
        they differ between copies of one record (a repost has a new URL and time) and say
        nothing about its content. Numbers stay: in person and address records they matter."""
        for name in list(self.text_fields):
            values = [v for v in (_text(s.get(name)).strip() for s in samples) if v]
            for kind, pattern in _NOISE.items():
                if values and sum(map(bool, map(pattern.search, values))) >= 0.9 * len(values):
                    self.left_out[name] = kind
        if len(self.left_out) < len(self.text_fields):
            self.text_fields = [f for f in self.text_fields if f not in self.left_out]
        else:
            self.left_out.clear()  # nothing would be left: keep every field

    def fields_chosen(self) -> str | None:
        """What neardup chose in reading the file, for the summary: a csv file's delimiter,
        and what the text is made of, when no text field was named."""
        separated = self.format == "csv" and self.delimiter in _OTHER_DELIMITERS
        chosen = [f"fields separated by {_OTHER_DELIMITERS[self.delimiter]}"] if separated else []
        if self.quoted:
            chosen.append(
                "fields in quotes where they hold tabs or line breaks, as Excel writes them"
            )
        if self.first_words_repeat:
            word, first, second = self.first_words_repeat
            chosen.append(
                f"each line is a record's text, numbered 1, 2, …: its first words are no ids "
                f"({word!r} begins lines {first} and {second}; --format lines reads ID TEXT)"
            )
        if self.wrapper_key:
            chosen.append(f"the records of its {self.wrapper_key!r} array")
        if self.word_id:
            word, line = self.word_id
            chosen.append(
                f"each line's first word is its id, the rest its text ({word!r} at line {line}; "
                "--format text reads each line whole)"
            )
        if self.automatic_text and self.text_fields:  # an empty file has none
            left = ", ".join(f"{name} ({kind})" for name, kind in self.left_out.items())
            chosen.append(
                f"text from {_listed(self.text_fields)}"
                + (f"; left out {left}" if left else "")
                + " (--text-field chooses)"
            )
        if self.as_indexed:
            chosen.append(f"{' '.join(self.as_indexed)}, as the store's records were read")
        if self.numbered and (named := [f for f in self.fields if _NAMED_LIKE_ID.search(f)]):
            # Its values are in the text, and copies of a record differ by them.
            chosen.append(
                f"no field is named id, so records are numbered 1, 2, …: --id-field {named[0]!r}"
                " names a field of ids"
            )
        if not chosen:
            return None
        name = file_name(self.path) if self.streamed else self.path.name
        return f"{name}: {'; '.join(chosen)}"

    def _check_fields(self, names: list[str], where: str) -> None:
        if repeated := next((n for n in names if names.count(n) > 1), None):
            columns = [str(number) for number, n in enumerate(names, start=1) if n == repeated]
            raise NeardupError(
                f"{file_name(self.path)}: {where} names {repeated!r} in columns "
                f"{' and '.join(columns)}: a record keeps one value a name, so the others "
                "would be lost; rename them"
            )
        self.fields = names
        self._read_as_indexed(names)
        if self.id_field is None:  # 'id', else 'ID' or 'Id' as spreadsheets name it, else
            # '_id', the key of every MongoDB and Elasticsearch document, unique as theirs is
            named_id = [name for name in names if name.strip().casefold() == "id"]
            named_id += ["_id"] if "_id" in names else []
            self.id_field = "id" if "id" in names else next(iter(named_id), None)
        wanted = ([self.id_field] if self.id_field else []) + self.text_fields
        missing = [name for name in wanted if name not in names]
        if missing:
            raise NeardupError(
                f"{self.path}: no field {', '.join(map(repr, missing))} in {where} "
                f"(fields: {', '.join(map(repr, names))}){_meant(missing, names, self.text_fields)}"
            )
        if not self.text_fields:
            self.text_fields = [name for name in names if name != self.id_field]
            self.automatic_text = True

    def _read_as_indexed(self, names: list[str]) -> None:
        """The id field and the text fields that the store's records were read with, where none
        were named for this file and it has them all."""
        indexed = self.indexed_with
        if self.id_field is None and indexed.id_field in names:
            self.id_field = indexed.id_field
            self.as_indexed.append(f"--id-field {indexed.id_field!r}")
        if not self.text_fields and indexed.text_fields and set(indexed.text_fields) <= set(names):
            self.text_fields = list(indexed.text_fields)
            self.as_indexed.append(" ".join(f"--text-field {f!r}" for f in indexed.text_fields))


class FolderReader:
    """Reads a folder of documents, one record a file (articles, e-mails, tickets saved one to
    a file): every file under it but hidden ones, in the order of their paths, each its own
    text, its id its path within the folder (``2024/a.txt``; with the folder's name first
    where a run reads several sources). A file that is no UTF-8 text, or empty, is skipped and
    counted by its name. The same attributes as a :class:`RecordReader` of a file."""

    format: Format = "folder"
    fields: list[str] = []  # noqa: RUF012 - no header: never written to
    header = fields
    delimiter, separator_line, bom, numbered, streamed, damaged = ",", "", False, False, False, None
    quoted = False

    def __init__(
        self, path: str | Path, several: bool = False, encoding: str | None = None
    ) -> None:
        self.path = Path(path)
        self.encoding = text_encoding(encoding)
        self.skipped = SkipLog()
        self._prefix = f"{self.path.name}/" if several else ""
        self._files = folder_files(self.path)
        self.size = sum(f.stat().st_size for f in self._files)
        self.bytes_read = 0
        self._records = self._documents()
        self.first = next(self._records, None)

    def _documents(self) -> Iterator[Record]:
        for file in self._files:
            name = file.relative_to(self.path).as_posix()
            data = file.read_bytes()
            self.bytes_read += len(data)
            if data[:2] == GZIP_MAGIC:
                try:
                    data = gzip.decompress(data)
                except (OSError, EOFError, zlib.error):
                    self.skipped.add(0, "damaged gzip", name)
                    continue
            if reason := _not_document(data, self.encoding):
                self.skipped.add(0, reason, name)
                continue
            text = data.decode(_file_encoding(self.encoding))
            yield Record(f"{self._prefix}{name}", text.strip(), 0, None, name)

    def __iter__(self) -> Iterator[Record]:
        if self.first is not None:
            yield self.first
        yield from self._records

    def fields_chosen(self) -> str:
        return (
            f"{self.path}: each of its {counted(len(self._files), 'file')} is a record, its id "
            "its path within the folder"
        )

    def close(self) -> None:
        self._records.close()


Reader = RecordReader | FolderReader


class Records:
    """The records of some files, one file after the other; ``streamed`` where one of them
    is a stream (see :func:`neardup.indexer.batches`)."""

    def __init__(self, files: Sequence[Reader]) -> None:
        self.files = files
        self.streamed = any(reader.streamed for reader in files)

    def __iter__(self) -> Iterator[Record]:
        for reader in self.files:
            yield from reader


# The formats whose files hold records, where a text file may be a document.
_RECORD_FILE_FORMATS = ("tsv", "csv", "jsonl", "json")


def folder_files(folder: Path) -> list[Path]:
    """The files under a folder but hidden ones, in the order of their paths within it."""
    return sorted(
        (f for f in folder.rglob("*") if f.is_file() and not _hidden(f, folder)),
        key=lambda f: f.relative_to(folder).as_posix(),
    )


def record_files(folder: Path) -> list[Path] | None:
    """The files of a folder given in place of a file, where every one is a record file by its
    name (a month's export each: ``.csv``, ``.tsv``, ``.jsonl``, ``.json``, compressed or not):
    read as record files, as if each were given, and not as a document each; else None. A
    folder whose record files are half of its files or more, beside others (the exports and
    a README), is one error: read as documents, each export would be one record."""
    files = folder_files(folder)
    tables: list[Path] = []
    others: list[Path] = []
    for f in files:
        (tables if record_format(f) in _RECORD_FILE_FORMATS else others).append(f)
    if files and not others:
        return files
    if tables and len(tables) >= len(others):
        kinds = sorted({"".join(f.suffixes[-2 if f.suffix == ".gz" else -1 :]) for f in tables})
        under = "*" if all(f.parent == folder for f in tables) else "**/*"
        raise NeardupError(
            f"{folder} holds {len(tables)} record files ({_listed([f.name for f in tables])}) "
            f"and {len(others)} other (such as {others[0].relative_to(folder).as_posix()}): "
            "read as a folder of documents, each record file would be one record. Give the "
            f"record files "
            f"({' '.join(f'{folder}/{under}{kind}' for kind in kinds)}), or move the others out"
        )
    return None


def ids_in(path: str | Path, encoding: str | None = None) -> list[str]:
    """The ids of a file of one id a line (``-``: standard input; gzip read as such): whole
    lines, as an id may hold spaces ("New York 1" split at its spaces would delete the record
    "1"), blank lines left out. A line that is not UTF-8 stops the read: an id misread would
    delete nothing, or another record. A table (a report's pairs) is refused: its lines are
    no ids."""
    reader = RecordReader(path, "text", encoding=encoding)
    ids = [record.text for record in reader]
    if bad := [line for line, why in reader.skipped.examples if why == "undecodable bytes"]:
        raise NeardupError(
            f"{file_name(path)}, line {bad[0]}: bytes that are not {reader.encoding}: an id "
            "misread would delete nothing, or another record"
        )
    if ids and "\t" in ids[0]:
        raise NeardupError(
            f"{file_name(path)} holds columns (its first line: {ids[0][:60]!r}), where ids are "
            "one a line: give a column of them (cut -f1)"
        )
    return ids


@dataclass(frozen=True)
class NamedFields:
    """The id field and the text fields a run named (``--id-field``, ``--text-field``), as a
    store remembers them."""

    id_field: str | None = None
    text_fields: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {"id_field": self.id_field, "text_fields": list(self.text_fields)}

    @classmethod
    def from_dict(cls, stored: Mapping[str, Any] | None) -> NamedFields:
        stored = stored or {}
        return cls(stored.get("id_field"), tuple(stored.get("text_fields") or ()))


def _hidden(file: Path, folder: Path) -> bool:
    return any(part.startswith(".") for part in file.relative_to(folder).parts)


def _not_document(data: bytes, encoding: str) -> str | None:
    """Why a file's bytes are no document to read in ``encoding``, if they are not."""
    if what := not_text(data[:MAGIC_BYTES]):
        return f"not text: {what}"
    if b"\0" in data[:8192]:
        return "not text: binary"
    try:
        text = data.decode(_file_encoding(encoding))
    except UnicodeDecodeError:
        if encoding != UTF8:
            return f"not {encoding}"
        # --encoding windows-1252 reads such a file, as a record file's error says
        return "a Windows code page" if code_page_byte(data[:SAMPLE_BYTES]) else "not UTF-8"
    return None if text.strip() else "no text"


# Bytes that are not UTF-8, as surrogateescape decodes them; and characters that are.
_NOT_UTF8 = re.compile("[\udc80-\udcff]")
_UTF8_BEYOND_ASCII = re.compile("[^\x00-\x7f\udc80-\udcff]")
# A code page's letters beyond ASCII, as single bytes that are not UTF-8: é (0xE9), ü (0xFC).
_CODE_PAGE_LETTER = re.compile(
    rb"(?<=[A-Za-z])[\x80-\xff](?![\x80-\xff])|(?<![\x80-\xff])[\x80-\xff](?=[A-Za-z])"
)


def _quotes_breaks(sample: bytes, encoding: str) -> bool:
    """Whether a tab-separated file's first lines quote a field that holds a tab or a line
    break, as Excel and CSV writers do, and read as such quoting throughout: a stray quote of
    a file without quoting (``5" screen``) breaks that reading and leaves the file as it is."""
    text = sample.decode(encoding, "replace")
    if '"' not in text:
        return False
    rows = csv.reader(io.StringIO(text, newline=""), delimiter="\t", strict=True)
    broken = False
    try:
        for row in rows:
            broken = broken or any("\t" in field or "\n" in field for field in row)
    except csv.Error as exc:  # the sample may end inside a quoted field
        return broken and str(exc) == "unexpected end of data"
    return broken


def _whole_lines(sample: bytes) -> bytes:
    """A sample up to its last line break: no character cut at its end."""
    return sample[: sample.rfind(b"\n") + 1] or sample


def utf8_letter(sample: bytes) -> tuple[int, str] | None:
    """Where a file's first bytes show it is UTF-8: the line and the first character beyond
    ASCII, when the sample is UTF-8 throughout and holds one."""
    whole = _whole_lines(sample)
    try:
        text = whole.decode(UTF8)
    except UnicodeDecodeError:
        return None
    if letter := _UTF8_BEYOND_ASCII.search(text):
        return text.count("\n", 0, letter.start()) + 1, letter[0]
    return None


def held_byte(line: int, byte: int) -> str:
    """Where a file shows its code page (:func:`code_page_byte`), as an error says it."""
    return (
        f"line {line} holds the byte 0x{byte:02X}, "
        f"{bytes([byte]).decode('cp1252', 'replace')!r} in Windows-1252"
    )


def code_page_byte(sample: bytes) -> tuple[int, int] | None:
    """Where a file's first bytes show it is written in a single-byte code page (Windows-1252,
    Latin-1) rather than UTF-8: the line and value of its first byte that is not UTF-8, when
    no character beyond ASCII is UTF-8 in the sample and its bytes beyond ASCII stand alone
    beside letters, as accented letters do (``Jos\xe9``). A UTF-8 file with a damaged line, or
    bytes that are no text, is read as ever, its bad lines skipped and counted."""
    whole = _whole_lines(sample)
    if whole.isascii():
        return None
    text = whole.decode("utf-8", "surrogateescape")
    bad = _NOT_UTF8.search(text)
    if bad is None or _UTF8_BEYOND_ASCII.search(text):
        return None
    if len(_CODE_PAGE_LETTER.findall(whole)) < 0.8 * len(_NOT_UTF8.findall(text)):
        return None
    return text.count("\n", 0, bad.start()) + 1, ord(bad[0]) - 0xDC00


# A field's name that says it holds ids of some kind: "Customer ID", "record_id", "sku".
_NAMED_LIKE_ID = re.compile(r"(^|[\s_\-.])(id|key|sku|uuid|guid)$|^(id|key)[\s_\-.]", re.I)
# Names a summary lists in full; of more, the first and the last, and how many.
LISTED_NAMES = 12


def _listed(names: Sequence[str]) -> str:
    """``a, b, c``; of a wide file's many fields, ``col0, col1, …, col59 (60 fields)``."""
    if len(names) <= LISTED_NAMES:
        return ", ".join(names)
    return f"{', '.join(names[: LISTED_NAMES - 2])}, …, {names[-1]} ({len(names)} fields)"


def _a_header_above(lines: Sequence[str]) -> bool:
    """Whether ``lines`` are a CSV table's first: a header whose first word holds a comma,
    and every line of as many cells, two or more."""
    cells = {len(row) for row in csv.reader(lines)}
    return "," in _first_word(lines[0]) and len(cells) == 1 and min(cells) >= 2


def _meant(missing: Sequence[str], names: Sequence[str], texts: Sequence[str]) -> str:
    """What to give where a missing field is one of ``names`` in another case (``Name``), or
    a missing text field is several of them in one (``--text-field name,city``); else
    nothing."""
    for named in missing:
        if same := [n for n in names if n.casefold() == named.casefold()]:
            return f": did you mean {same[0]!r}?"
        listed = re.split(r"[,;\s]+", named.strip(",; "))
        if named in texts and len(listed) > 1 and set(listed) <= set(names):
            return ": give each once, " + " ".join(f"--text-field {shlex.quote(n)}" for n in listed)
    return ""


def _starts_json(line: str) -> bool:
    """Whether a file's first line starts JSON: a whole object or array, or the start of one
    written over several lines; not a log line's ``[2024-05-01 12:00:01]`` or ``[INFO]``."""
    line = line.strip()
    try:
        return isinstance(json.loads(line), dict | list)
    except ValueError:
        return line in ("{", "[") or line.startswith(('{"', "[{", '["', "[["))


def _first_word(line: str) -> str:
    """What a lines file's line has for its id: up to its first space or tab."""
    return _ID_SEPARATOR.split(line.strip(), maxsplit=1)[0]


def _holds_digit(word: str) -> bool:
    return any(c.isdigit() for c in word)


def _word_ids(lines: Sequence[tuple[int, str]]) -> tuple[str, int] | None:
    """The first line's first word and its line, when no first word of these (numbered) lines
    holds a digit: ids that may be a sentence's first words (``Apple unveils…``), worth a word
    in the summary."""
    words = [_first_word(line) for _, line in lines]
    if words and not any(map(_holds_digit, words)):
        return words[0], lines[0][0]
    return None


def _split_at_returns(raw: IO[bytes]) -> Iterator[bytes]:
    """Lines that end with a carriage return alone, each as if it ended with a line feed."""
    rest = b""
    while part := raw.read(1 << 16):
        lines = (rest + part).split(b"\r")
        rest = lines.pop()
        for line in lines:
            yield line + b"\n"
    if rest:
        yield rest


def _repeated_word(lines: Sequence[tuple[int, str]]) -> tuple[str, int, int] | None:
    """The first repeat among the first words of these (numbered) lines that is no id, and
    the lines of its first two: a file of sentences (``The quick…``, ``The cat…``) or of log
    lines (``[2024-05-01 12:00:01] ERROR…``) rather than of ids and texts, whose ids are
    unique or numbers (``r1`` twice: a file's updates of one record)."""
    first_seen: dict[str, int] = {}
    for number, line in lines:
        word = _first_word(line)
        if word in first_seen and (not _holds_digit(word) or _LOGGED.search(word)):
            return word, first_seen[word], number
        first_seen.setdefault(word, number)
    return None


# A log line's first word: a date, a time of day, or a bracketed tag, which no id is.
_LOGGED = re.compile(r"^[\[(<]|\d{4}-\d\d-\d\d|\d\d?:\d\d")


T = TypeVar("T")
# What ends a file's records early: compressed data cut short or corrupt, JSON that breaks off.
_DAMAGE = (EOFError, zlib.error, gzip.BadGzipFile)


def _read_ahead(rows: Iterator[T], count: int) -> tuple[list[T], BaseException | None]:
    """Up to ``count`` rows, and the damage that ended them early, if any."""
    read: list[T] = []
    try:
        read.extend(islice(rows, count))
    except (*_DAMAGE, BrokenOff) as exc:
        return read, exc
    return read, None


def _peeked(rows: Iterator[T], count: int) -> tuple[list[T], Iterator[T]]:
    """Up to ``count`` rows read ahead, and every row from the first on: the damage that
    ended the read ahead, if any, is raised once the rows before it are read."""
    ahead, damage = _read_ahead(rows, count)
    return ahead, chain(ahead, _raising(damage) if damage else rows)


def _raising(exc: BaseException) -> Iterator[Any]:
    raise exc
    yield  # a generator: raises where it is read


def _damage(exc: BaseException) -> str:
    if isinstance(exc, BrokenOff):
        return str(exc)
    return (
        "the compressed data ends early" if isinstance(exc, EOFError) else "corrupt compressed data"
    )


# Why a file whose last line ends without a line break is not whole there.
_CUT_SHORT = "cut short with no line break at its end: "


class BrokenOff(ValueError):
    """A file that breaks off from ``line`` on (cut short), or JSON that is not JSON from
    there, where its records were being read."""

    def __init__(self, reason: str, line: int) -> None:
        super().__init__(reason)
        self.line = line


# Characters read at a time from a JSON file; a value longer than this reads on until it ends.
JSON_PART = 1 << 20
_JSON_GAP = re.compile(r"[\s,]*")  # between a JSON array's values
_JSON_SPACE = re.compile(r"\s*")
_MAYBE_SURROGATE = re.compile("[\udc80-\udcff]|" + _SURROGATE_ESCAPE.pattern)


def _table_of_objects(value: object) -> bool:
    """Whether a file's only JSON value is a table written as an object of objects that hold
    the same keys (``{"name": {"0": "Anna", "1": "Bob"}, "city": {…}}``: pandas' columns, or
    its rows by index): one record of it would be the whole table."""
    if not isinstance(value, dict) or len(value) < 2:
        return False
    inner = [v for v in value.values() if isinstance(v, dict) and v]
    return len(inner) == len(value) and all(v.keys() == inner[0].keys() for v in inner)


def _wrapped_array(value: object) -> tuple[str, list[object]] | None:
    """Of a file's only JSON value, an object one of whose fields alone holds an array of
    objects (``{"data": [{…}, {…}], "count": 2}``): that field's name and array."""
    if not isinstance(value, dict):
        return None
    arrays = [
        (key, items)
        for key, items in value.items()
        if isinstance(items, list) and items and all(isinstance(i, dict) for i in items)
    ]
    return arrays[0] if len(arrays) == 1 else None


def _json_values(text: IO[str]) -> Iterator[tuple[int, object, bool]]:
    """Each value of a JSON array (or of values one after another) in ``text``, with the line
    it starts on and whether it may hold a surrogate (a byte that is not UTF-8, or the escape
    of one), holding a part of the file at a time."""
    decoder = json.JSONDecoder(parse_float=JsonNumber)
    buffer, at, line, ended = "", 0, 1, False

    def more() -> bool:
        nonlocal buffer, at, ended
        part = text.read(JSON_PART)
        buffer, at, ended = buffer[at:] + part, 0, not part
        return bool(part)

    def skip(gap: re.Pattern[str]) -> None:
        nonlocal at, line
        while True:
            end = gap.match(buffer, at).end()  # type: ignore[union-attr]
            line += buffer.count("\n", at, end)
            at = end
            if at < len(buffer) or not more():
                return

    skip(_JSON_SPACE)
    in_array = buffer.startswith("[", at)
    if in_array:
        at += 1
    while True:
        skip(_JSON_GAP)  # commas between objects outside an array too, as some exports write
        if at == len(buffer):
            if in_array:
                raise BrokenOff("the array does not close", line)
            return
        if in_array and buffer[at] == "]":
            at += 1
            skip(_JSON_SPACE)
            if at < len(buffer):
                raise BrokenOff("more after the array's end", line)
            return
        while True:
            try:
                value, end = decoder.raw_decode(buffer, at)
                break
            except json.JSONDecodeError as exc:  # a value cut by the part's end, or broken
                if ended or not more():
                    raise BrokenOff(f"invalid JSON: {exc.msg}", line) from None
        yield line, value, bool(_MAYBE_SURROGATE.search(buffer, at, end))
        line += buffer.count("\n", at, end)
        at = end


def _with_skips(
    rows: Iterator[tuple[int, list[str]]],
) -> Iterator[tuple[int, list[str], str | None]]:
    """Rows with why to skip each (see RecordReader._tsv_rows): empty, or not UTF-8."""
    for number, row in rows:
        joined = "".join(row)
        if not joined.strip():
            yield number, row, "empty line"
        else:
            yield number, row, "undecodable bytes" if holds_surrogates(joined) else None


class _Nested(dict):
    """A JSON object whose nested fields are named by their path too (``address.city``, as
    jq and Elasticsearch name them), for a reader that names one; a key holding a dot is
    itself first. Written back, it is the object as it was read."""

    def get(self, key: str, default: object = None) -> object:
        if key in self:
            return self[key]
        value: object = self
        for part in key.split("."):
            if not isinstance(value, dict) or part not in value:
                return default
            value = value[part]
        return value


def _unwrapped(value: object) -> object:
    """An id as MongoDB's extended JSON wraps it (``{"$oid": "5f8a…"}``, ``{"$numberLong":
    "…"}``, ``{"$uuid": "…"}``): its one value; any other value as it is."""
    if isinstance(value, dict) and len(value) == 1:
        ((key, inner),) = value.items()
        if key.startswith("$") and not isinstance(inner, dict | list):
            return inner
    return value


class JsonNumber(float):
    """A JSON number with a fraction or an exponent, as the file writes it: as an id or a
    text it is that text (a price ``19.90``, an id ``1e3``), where Python spells the float
    ``19.9`` and ``1000.0`` (the same record in a CSV file then differed by a character, and
    a report's id matched no id of the file). Its value is the float's: JSON of neardup's own
    holds the float, and a record file written back (dedup) the number as written."""

    __slots__ = ("written",)

    def __new__(cls, written: str) -> JsonNumber:
        number = super().__new__(cls, written)
        number.written = written
        return number

    def __str__(self) -> str:
        return self.written


def _text(value: object) -> str:
    """A field's value as text: a JSON list's values, or an object's (an address of street and
    city), joined by spaces in their order (tags, authors, a product's features), nothing for
    null."""
    if type(value) is str:  # every TSV and CSV value: the quickest test first
        return value
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, list):
        return " ".join(filter(None, (_text(item).strip() for item in value)))
    if value is None:
        return ""
    if isinstance(value, bool):  # as JSON spells it: an id true is "true", not Python's "True"
        return "true" if value else "false"
    return str(value)


def _first_line_end(sample: bytes) -> str:
    """``\\r\\n`` where the first line of ``sample`` ends so (Windows, a spreadsheet's CSV),
    else ``\\n``."""
    end = sample.find(b"\n")
    return "\r\n" if end > 0 and sample[end - 1 : end] == b"\r" else "\n"
