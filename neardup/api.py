"""The Python API: everything neardup does, one function per CLI command.

Each function takes a store URL (or an open :class:`~neardup.stores.Store`; None is
``$NEARDUP_STORE``, else ``sqlite:///neardup.db``); with a URL it opens the store and closes it
afterwards. Settings are keyword arguments: ``preset`` names a preset, ``params`` holds the
fingerprint settings and ``rules`` the match rules, each either complete
(:class:`FingerprintParams`, :class:`MatchRules`) or a mapping of just the settings given, applied
over the store's own. A store remembers the preset and threshold it was indexed with, and later
lookups and reports use them when they are not given again.
"""

from __future__ import annotations

import shlex
import threading
import time
from collections.abc import Callable, Container, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass, field, replace
from itertools import islice
from pathlib import Path
from typing import IO, Any, Protocol

import numpy as np

from ._version import __version__ as __version__  # re-exported: neardup.api.__version__
from .errors import (
    InvalidParameter,
    NeardupError,
    NoStore,
    ParameterMismatch,
    StoreChanged,
    StoreFull,
    TooManyPairs,
)
from .evaluate import Evaluation, pairs_of, plot, read_judged, read_pairs
from .evaluate import evaluate as score
from .exact import exact_pairs
from .explain import Explanation
from .explain import explain as explain_pair
from .fingerprint import (
    NORMALIZATION,
    TOKEN_FIELDS,
    Fingerprint,
    FingerprintParams,
    TokenField,
    check_num_hashes,
    fingerprint_batch,
    holds_surrogates,
    jaccard_pairs,
    normalize_batch,
)
from .generate import KINDS as KINDS  # re-exported: the CLI offers them
from .generate import Kind, write_corpus
from .indexer import (
    DEFAULT_BATCH_SIZE,
    DUPLICATE_STORED,
    ON_DUPLICATE_ID,
    STORED_ALREADY,
    IndexSummary,
    OnDuplicateId,
    batches,
    index_records,
    narrowed_note,
    with_words,
)
from .labels import Expected, chance_by_bin, judged_threshold, pairs_to_judge
from .linkage import MutualBest
from .memory import give_back_freed_memory
from .output import (
    ReportFormat,
    named_format,
    record_writer,
    whole_file,
    write_label_sample,
    write_records,
)
from .phrases import counted, leading_lines
from .progress import progress_bar
from .readers import (
    FORMATS,
    STDIN,
    FolderReader,
    Format,
    NamedFields,
    Reader,
    Record,
    RecordReader,
    Records,
    SkipLog,
    file_name,
    ids_in,
    read_once,
    record_files,
    repeated_file,
    standard_input,
)
from .report import (
    GROUPINGS,
    Found,
    Grouping,
    Pair,
    Strategy,
    clusters,
    find_pairs,
    held_weights,
)
from .report import for_review as for_review  # re-exported: the CLI flags pairs with it
from .searcher import (
    MAX_CANDIDATES,
    SIMILARITIES,
    CheckedPairs,
    KeptContents,
    Match,
    MatchRules,
    Searcher,
    Similarity,
    collapse_copies,
    natural_key,
)
from .selfjoin import LeftOut
from .settings import (
    AUTO,
    BAND_SAMPLE,
    FALLBACK_THRESHOLD,
    PRESETS,
    RulesRequest,
    asked_num_hashes,
    check_threshold,
    choice_key,
    default_bands,
    doubled_or_halved,
    from_judged_pairs,
    match_rules,
    measured_sample,
    params_request,
    remembered_rules,
    rule_sources,
    threshold_choice,
)
from .stores import DEFAULT_STORE_URL, Store, embedded_file, id_problem, open_store
from .stores.base import ParamsRequest
from .tuning import (
    MIN_CANDIDATES,
    MIN_TAIL_PAIRS,
    NO_VALLEY,
    ThresholdChoice,
    Tuning,
    candidate_probability,
    choose_link_threshold,
    choose_threshold,
    estimated_candidate_recall,
    even_odds,
    similarity_histogram,
)
from .tuning import tune as tune_bands

__all__ = [  # what the CLI and the service use besides the functions
    "AUTO",
    "DEFAULT_BATCH_SIZE",
    "DEFAULT_STORE_URL",
    "DEMO_STORE_URL",
    "FALLBACK_THRESHOLD",
    "FORMATS",
    "GROUPINGS",
    "KEEPS",
    "LINK_CANDIDATES",
    "ON_DUPLICATE_ID",
    "PRESETS",
    "SAMPLE",
    "SIMILARITIES",
    "TOKEN_FIELDS",
    "FingerprintParams",
    "MatchRules",
    "clusters",
    "embedded_file",
    "ids_in",
    "standard_input",
]

StoreRef = Store | str | None
SAMPLE = Path(__file__).parent / "data" / "sample.txt"


@contextmanager
def opened(store: StoreRef, *, create: bool = False) -> Iterator[Store]:
    """Use an open store as it is, or open one from a URL (None: the default) and close it."""
    if isinstance(store, Store):
        yield store
        return
    with open_store(store, create=create) as fresh:
        yield fresh


def index(
    paths: Sequence[str | Path],
    store: StoreRef = None,
    *,
    format: Format | None = None,
    id_field: str | None = None,
    text_fields: Sequence[str] = (),
    encoding: str | None = None,
    preset: str | None = None,
    params: ParamsRequest = None,
    threshold: float | None = None,
    similarity: Similarity | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
    on_duplicate_id: OnDuplicateId = "replace",
    skip_duplicates: bool = False,
    progress: bool = False,
    measured_with: Sequence[Reader] = (),
    like: StoreRef = None,
) -> IndexSummary:
    """Index record files. Every file is opened and checked before anything is written.
    ``encoding`` is theirs where it is not UTF-8 (``windows-1252``), as for every function that
    reads record files.

    ``threshold`` is the least similarity the store is for: the LSH bands are tuned for it
    (unless ``params`` gives them), and later lookups and reports use it, as they use the
    ``preset``'s rules and ``similarity`` (what the threshold bounds: ``numerals`` for records
    whose numbers name things). A record whose id came earlier in the run replaces the earlier
    one and is counted (``on_duplicate_id="replace"``), is skipped and counted (``"skip"``), is
    kept under its id numbered, ``ID#2``, ``ID#3``, and counted (``"keep"``), or stops the run
    before anything is written (``"error"``). With ``skip_duplicates``, a record that
    has a near-duplicate in the store or earlier in the files is not stored; the summary counts
    it and ``summary.duplicates`` says of what. A new store's bands are chosen for the length
    of the records of ``paths`` and of ``measured_with`` (the reader of a file to be linked to
    them, with fields of its own). A new store made ``like`` another takes its settings: its
    parameters, the rules its runs remembered (a judged threshold too), and whether it counts
    its shingles; with the other's records (:func:`export`), it answers as the other does.
    """
    asked = params_request(params, preset_name=preset, threshold=threshold)
    copied: dict[str, object] = {}
    if like is not None:
        if preset or params or threshold is not None or similarity is not None:
            raise NeardupError(
                "--like takes another store's settings: give it without --preset, the "
                "parameters, --threshold or --similarity"
            )
        asked, copied = _settings_of(like)
    if batch_size < 1:
        raise NeardupError(f"the batch size must be at least 1, not {batch_size}")

    indexed_with = _fields_indexed_with(store)

    def readers() -> list[Reader]:
        return _readers(paths, format, id_field, text_fields, encoding, indexed_with)

    if on_duplicate_id == "error":  # a first pass over the ids, so that a repeat writes nothing
        if streams := [str(p) for p in paths if read_once(p)]:
            raise NeardupError(
                f"--on-duplicate-id error reads the ids first and the records after, and "
                f"{_stream_name(streams[0])} can be read only once: give a regular file"
            )
        check = IndexSummary()
        for reader in readers():
            for batch in batches(reader, batch_size):
                check.admit(batch, "error")
    files = readers()  # every file is opened and its header checked before the store is
    summary = IndexSummary()
    with opened(store, create=True) as target, _removed_if_left_empty(target, summary):
        new = target.read_params() is None
        if like is not None and not new:
            raise NeardupError(
                f"--like makes a new store like another, and {target.url} holds records "
                "already: index into a new one"
            )
        requested = asked
        if new and isinstance(asked, Mapping | None):
            measured = _readers(
                _read_twice(paths), format, id_field, text_fields, encoding, indexed_with
            )
            asked = _with_bands(asked, [*measured, *measured_with])
        try:
            chosen = target.ensure_params(asked)
        except ParameterMismatch:
            if asked is requested:
                raise
            # Another run made the store meanwhile: its bands, as for a store made before.
            chosen = target.ensure_params(requested)
        if not new:
            _refuse_renumbering(target, files)
        if copied:
            target.update_settings(copied)
        if id_field or text_fields:
            _remember_fields(target, indexed_with, id_field, text_fields)
        given = {"threshold": threshold, "similarity": similarity}
        rules = {name: value for name, value in given.items() if value is not None}
        if preset or rules:
            # The rules given now, over what the store remembers of earlier runs' rules.
            remembered = match_rules(chosen, target.settings, rules, preset_name=preset)
            settings: dict[str, object] = {"rules": remembered_rules(remembered)}
            if new and remembered.similarity == "jaccard":  # no weights to count shingles for
                settings["frequencies"] = False
            target.update_settings(settings)
        total = sum(r.size for r in files)
        with (
            progress_bar(progress, total=total, unit="B", unit_scale=True) as bar,
            _choice_forgotten_if_changed(target, summary),
            _said_how_far(target),
        ):
            for reader in files:
                done = bar.n

                def advance(reader: Reader = reader, done: int = done) -> None:
                    bar.update(done + reader.bytes_read - bar.n)

                if skip_duplicates:
                    _add_unique(
                        target, reader, batch_size, summary, preset, on_duplicate_id, advance
                    )
                else:
                    index_records(
                        target,
                        reader,
                        chosen,
                        batch_size=batch_size,
                        summary=summary,
                        on_batch=advance,
                        on_duplicate_id=on_duplicate_id,
                    )
                summary.read += reader.skipped.total  # rows read and skipped are read too
                _account_for(reader, summary)
    return summary


def _settings_of(store: StoreRef) -> tuple[FingerprintParams, dict[str, object]]:
    """A store's parameters, and the settings a store made like it takes: the rules its runs
    remembered, a judged threshold's account, whether it counts its shingles. Not what was
    measured (the same records measure the same) nor the fields its files were read with (an
    exported file has its own)."""
    with opened(store) as source:
        params = source.read_params()
        if params is None:
            raise NeardupError(f"{source.url} holds no records: there is nothing to be like")
        kept = {k: v for k, v in (source.settings or {}).items() if k in ("rules", "judged")}
        return params, {**kept, "frequencies": source.keeps_frequencies}


@contextmanager
def _said_how_far(target: Store) -> Iterator[None]:
    """A full disk stops a run at a batch, the batches before it stored: its error says what
    the store holds, which the same command run again completes (a record stored already is
    left unchanged)."""
    try:
        yield
    except StoreFull as exc:
        try:
            holds = f", and the store holds {counted(target.count(), 'record')}"
        except NeardupError:  # an engine whose full disk fails its reads too
            holds = ""
        raise StoreFull(
            f"{exc}{holds}: free some space and run the same command again to complete it"
        ) from None


@contextmanager
def _choice_forgotten_if_changed(target: Store, summary: IndexSummary) -> Iterator[None]:
    """Forget the store's automatic threshold when the run stores records other than those
    it held, failed or not: it was read from other records, and the next command that needs
    it reads it again; unless records were checked at it (:func:`_records_checked_at`)."""
    try:
        yield
    finally:
        if summary.indexed > summary.unchanged:  # records given again unchanged change nothing
            _forget_read_choice(target)


@contextmanager
def _removed_if_left_empty(target: Store, summary: IndexSummary) -> Iterator[None]:
    """Remove a store this run created when the run ends, failed or not, with nothing in it
    (said in the ``summary``): the next run that stores records makes it, with bands chosen
    for them."""
    try:
        yield
    finally:
        if target.created and target.count() == 0 and target.drop_if_alone():
            summary.removed = target.url


def _refuse_renumbering(target: Store, files: Sequence[Reader]) -> None:
    """Stop before writing when a file's ids are record numbers and the store holds its first
    number with another text: the file is not the one indexed before, and its records 1, 2, …
    would silently replace the store's (yesterday's file under today's numbers)."""
    for reader in files:
        first = reader.first
        if not reader.numbered or first is None:
            continue
        stored = target.get([first.id]).get(first.id)
        content = normalize_batch([first.text], target.params.normalization)[0]
        if stored is not None and stored.content != content:
            named = (  # a text file has no field to name
                "Index the files in one run (each record is then numbered within its file: "
                f"{reader.path.name}:1), or into a new store"
                if reader.format == "text"
                else "Name the id field (--id-field), or index into a new store"
            )
            raise NeardupError(
                f"{reader.path} has no id field, so its records are numbered 1, 2, …, and "
                f"{target.url} already holds a record {first.id!r} with another text: indexing "
                f"would replace the stored records. {named}"
            )


def _with_bands(
    asked: Mapping[str, object] | None, files: Sequence[Reader], sample: int = BAND_SAMPLE
) -> Mapping[str, object] | None:
    """A new store's settings with bands chosen for the length of its first records, when
    nothing chose them (see :func:`neardup.settings.default_bands`): ``sample`` records, as
    many from the start of each file (two files linked, a shop's long descriptions and
    another's short names, are both measured). With no file (standard input or a pipe is
    read once, so not measured: :func:`_read_twice`) the store keeps the short records'
    default."""
    if "bands" in (asked or {}):
        return asked
    texts = []
    if files:
        each = max(1, sample // len(files))
        texts = [r.text for reader in files for r in islice(reader, each)]
        for reader in files:
            reader.close()
    return _bands_for(asked, normalize_batch(texts))


def _read_twice(paths: Sequence[str | Path]) -> list[str | Path]:
    """The files among ``paths`` that can be read again: not standard input or a pipe."""
    return [p for p in paths if not read_once(p)]


def _stream_name(path: str) -> str:
    """How an error names a file read once: a pipe says what it is."""
    return file_name(path) if path == STDIN else f"{path}, a pipe or stream,"


def _bands_for(asked: Mapping[str, object] | None, normalized: Sequence[str]) -> dict[str, object]:
    """``asked`` with bands for the ``normalized`` texts of a new store's first records (none:
    the short records' default; see :func:`neardup.settings.measured_sample`). A store made by
    adding a large lot of records measures its first, as `index` does."""
    bands = default_bands(asked_num_hashes(asked), *measured_sample(asked, normalized))
    return {**(asked or {}), "bands": bands}


def _readers(
    paths: Sequence[str | Path],
    format: Format | None,
    id_field: str | None,
    text_fields: Sequence[str],
    encoding: str | None,
    indexed_with: NamedFields | None = None,
    every_row: bool = False,
) -> list[Reader]:
    """A reader per file (``-``: standard input), each opened and its header checked, and per
    folder of documents; a file whose fields are not named is read with those the store's
    records were read with (``indexed_with``), where it has them; ``every_row`` for a file
    written back whole (:class:`~neardup.readers.RecordReader`)."""
    paths = [file for path in paths for file in _files_given(path)]
    if twice := repeated_file(paths):
        raise NeardupError(f"{twice}: give it once")
    several = len(paths) > 1
    return [
        _folder_reader(path, format, id_field, text_fields, several, encoding)
        if path != STDIN and Path(path).is_dir()
        else RecordReader(
            path,
            format,
            id_field=id_field,
            text_fields=text_fields,
            number_prefix=f"{Path(path).name}:" if several else "",
            encoding=encoding,
            indexed_with=indexed_with,
            every_row=every_row,
        )
        for path in paths
    ]


def _fields_indexed_with(store: StoreRef) -> NamedFields:
    """The fields that runs named to read the store's records (none for a new store)."""
    try:
        with opened(store) as source:
            return NamedFields.from_dict((source.settings or {}).get("named_fields"))
    except NoStore:
        return NamedFields()


def _remember_fields(
    target: Store, indexed_with: NamedFields, id_field: str | None, text_fields: Sequence[str]
) -> None:
    """Remember the fields a run named, over those earlier runs named, for later runs that
    read files without naming them."""
    named = NamedFields(
        id_field or indexed_with.id_field, tuple(text_fields) or indexed_with.text_fields
    )
    if named != indexed_with:
        target.update_settings({"named_fields": named.as_dict()})


def _files_given(path: str | Path) -> Sequence[str | Path]:
    """What a path given stands for: a folder of record files its files, read as if each were
    given; anything else itself (a folder of documents is read by a FolderReader)."""
    if path != STDIN and Path(path).is_dir():
        return record_files(Path(path)) or [path]
    return [path]


def _folder_reader(
    path: str | Path,
    format: Format | None,
    id_field: str | None,
    text_fields: Sequence[str],
    several: bool,
    encoding: str | None,
) -> FolderReader:
    if format or id_field or text_fields:
        raise NeardupError(
            f"{path} is a folder, each of its files a record: --format, --id-field and "
            "--text-field apply to record files"
        )
    return FolderReader(path, several, encoding)


def _add_unique(
    target: Store,
    records: Iterable[Record],
    batch_size: int,
    summary: IndexSummary,
    preset: str | None,
    on_duplicate_id: OnDuplicateId,
    on_batch: Callable[[], None],
) -> None:
    """Store the records that have no near-duplicate in the store, counting the others; a
    repeated id goes as ``on_duplicate_id`` says, a replacing record only if it is unique."""
    started = time.perf_counter()
    last_checked = ""  # the threshold the last part was checked at, and why
    kept = KeptContents()
    for batch in batches(records, batch_size):
        admitted = summary.admit(batch, on_duplicate_id)
        summary.read += len(batch)
        replacing = {id(r) for r in admitted.replacing}
        for part in _runs_of_distinct_ids([r for r in admitted.records if r]):
            result = _add(
                part, target, if_unique=True, preset=preset, every_duplicate=False, kept=kept
            )
            if result.checked and result.checked != last_checked:
                summary.checked = _checked_so_far(summary.checked, result.checked, part[0].line)
                last_checked = result.checked
            summary.indexed += len(result.added)
            summary.narrowed += result.narrowed
            lines = {r.id: r.line for r in part}
            for record_id, reason in result.skipped.items():
                summary.skipped.add(lines[record_id], reason)
            for record_id in result.unchanged:
                summary.skipped.add(lines[record_id], STORED_ALREADY)
            for record_id, found in result.duplicates.items():
                summary.skipped.add(lines[record_id], DUPLICATE_STORED)
                summary.duplicates.append((record_id, found[0].id, found[0].similarity))
            added = set(result.added)
            summary.count_replacing([r for r in part if id(r) in replacing and r.id in added])
            stored = [r for r in part if id(r) not in replacing and r.id in result.replaced]
            summary.count_replaced(stored, result.replaced)
        on_batch()
    target.flush()  # each part was only published (Store.publish)
    summary.documents = target.count()
    summary.seconds += time.perf_counter() - started


CHECKED_AT = "near-duplicates checked at "


def _checked_so_far(said: str, checked: str, line: int) -> str:
    """The run's line on the thresholds it checked at (``said``), with another it checks at
    from ``line`` on (``checked``): a store checked as records arrive reads its threshold
    again as its checks grow."""
    return f"{said}; from line {line:,}: {checked.removeprefix(CHECKED_AT)}" if said else checked


def _runs_of_distinct_ids(records: list[Record]) -> Iterator[list[Record]]:
    """``records`` in runs in which no id repeats: a record replacing one of its run's own is
    checked against it once that one is stored."""
    run: list[Record] = []
    ids: set[str] = set()
    for record in records:
        if record.id in ids:
            yield run
            run, ids = [], set()
        run.append(record)
        ids.add(record.id)
    if run:
        yield run


def rules_for(
    store: StoreRef = None, rules: RulesRequest = None, preset: str | None = None
) -> MatchRules:
    """The rules a lookup or report on ``store`` uses (see :func:`neardup.settings.match_rules`).

    An automatic threshold the store has not chosen for its records yet is chosen now, from
    every candidate pair as a report measures them, and remembered: lookup, explain, dedup,
    ``index --skip-duplicates`` and report then agree, whichever runs first. An index run that
    changes the records forgets it; records added one by one (:func:`add`) keep it until the
    store holds twice the records it was read from. A threshold records were checked at
    (``if_unique``, ``index --skip-duplicates``) is kept by both (:func:`_records_checked_at`),
    and a store whose records were checked reads it from what its checks measured, again each
    time they have seen twice the records (:func:`_read_from_checks`)."""
    with opened(store) as source:
        chosen = match_rules(source.params, source.settings, rules, preset_name=preset)
        if (known := _known_rules(source, chosen)) is not None:
            return known
        with _READING.setdefault(source.url, threading.RLock()):
            source.reload_settings()  # read by another thread while this one waited?
            chosen = match_rules(source.params, source.settings, rules, preset_name=preset)
            if not chosen.to_choose:
                return chosen
            try:
                return _remembered(source, _threshold_read(source, chosen)).rules
            except TooManyPairs as error:  # a lookup still answers; the report says what to do
                choice = ThresholdChoice(FALLBACK_THRESHOLD, False, f"{error}")
                _remember_choice(source, chosen, choice)
                return replace(chosen, threshold=choice.threshold)


def threshold_to_read(store: StoreRef = None) -> bool:
    """Whether the store's threshold is automatic and has not been read from its records as
    they are now: the next command that needs it (:func:`rules_for`) reads it first, from every
    candidate pair, as a report reads it. False for a store with no records yet."""
    with opened(store) as source:
        if not source.read_params():
            return False
        return _known_rules(source, match_rules(source.params, source.settings)) is None


def _known_rules(source: Store, chosen: MatchRules) -> MatchRules | None:
    """``chosen`` with its threshold where the store need not read one from its records (one
    given, one remembered, or one read from what its checks measured); None where it must."""
    if not chosen.to_choose:
        return chosen
    if checked := _read_from_checks(source, chosen):
        return replace(chosen, threshold=checked.threshold)
    return None


# Reads of a threshold that a lookup waits for, where records it read were deleted meanwhile
# (Solr's snapshot cannot hold those): the lookup reads again, as a user would run it again.
THRESHOLD_READS = 3


def _threshold_read(source: Store, chosen: MatchRules) -> Found:
    for _ in range(THRESHOLD_READS - 1):
        with suppress(StoreChanged):
            return find_pairs(source, source.params, chosen)
    try:
        return find_pairs(source, source.params, chosen)
    except StoreChanged as changed:  # said of what the user asked for, not of a report
        raise StoreChanged(
            changed.what,
            f"its threshold was read from its records, each of {THRESHOLD_READS} times",
            "ask",
        ) from None


# One thread of a process at a time reads a store's automatic threshold (by store URL); the
# others then use what it remembered: the service's first lookups each read it, a report's
# work each, before one of them had remembered it.
_READING: dict[str, threading.RLock] = {}


def _remembered(store: Store, found: Found) -> Found:
    """``found``, after remembering the threshold it chose, if it chose one from the records
    the store still holds: where another process indexed or deleted records while the report
    read them, its run has forgotten the threshold, or is yet to, and the next command reads
    it again."""
    if found.choice and store.count() == found.records:
        _remember_choice(store, found.rules, found.choice, found.records)
    return found


def _too_small_to_read(store: Store) -> bool:
    """Whether the store's pairs of records in all are too few to read a threshold from."""
    held = store.count()
    return held * (held - 1) // 2 < MIN_TAIL_PAIRS


def _remember_choice(
    store: Store, rules: MatchRules, choice: ThresholdChoice, records: int | None = None
) -> None:
    """Remember ``choice`` for ``rules``, read from ``records`` records (the store's), unless
    it is the fallback of a store too small to read a threshold from: the next command reads it
    again. A store fed through the service that was asked once while it held ten records kept
    0.5 past its thousands, where its records read 0.55."""
    if choice.from_data or not _too_small_to_read(store):
        entry = {"threshold": choice.threshold, "how": _how(choice), "for": choice_key(rules)}
        entry["records"] = store.count() if records is None else records
        store.remember({"threshold_choice": entry})


def _records_checked_at(choice: Mapping[str, Any]) -> bool:
    """Whether records were checked at the remembered ``choice``: the store then holds no two
    records that similar, so its records alone would read another threshold (the Kijiji ads
    checked at 0.89 read 0.36 after, where 1,379 pairs of ads the check kept apart lie), and
    the next check would refuse records this one stored. Index runs and adds keep it; checks
    read it again from what they measured (:func:`_outgrown_by_checks`)."""
    return bool(choice.get("checked"))


def _read_from_half_or_fewer(choice: Mapping[str, Any], records: int) -> bool:
    """Whether the remembered ``choice`` was read from half of ``records`` records or fewer:
    it is read again then, so that it comes from at least half of them, once each time they
    double (a store asked first at 110 generated people read 0.38 and kept it past 3,000,
    where their records read 0.55)."""
    return "records" in choice and records >= 2 * choice["records"]


def _doubled_or_halved(store: Store, choice: Mapping[str, Any]) -> bool:
    """Whether records added or deleted a few at a time have doubled or halved the store
    since ``choice`` was read from it (read again at every change, each would cost a report);
    a threshold records were checked at is kept."""
    if _records_checked_at(choice) or "records" not in choice:
        return False
    return doubled_or_halved(choice["records"], store.count())


def _not_checked(_store: Store, choice: Mapping[str, Any]) -> bool:
    """Whether ``choice`` was read from the records rather than checked at: a run that
    changes the records forgets it then (:func:`_records_checked_at`)."""
    return not _records_checked_at(choice)


def _forget_read_choice(store: Store) -> None:
    """Forget a threshold read from the records (not one they were checked at), as stored
    now, not as this handle read it when its run began: a report made meanwhile remembered
    one, read from the records before the run's. (Adds a few at a time keep a threshold until
    the store has doubled, so they need not read the settings again for it.)"""
    store.reload_settings()
    _forget_choice_if(store, _not_checked)


def _forget_choice_if(store: Store, stale: Callable[[Store, Mapping[str, Any]], bool]) -> None:
    """Forget the store's remembered threshold choice, if it has one that is ``stale``."""
    choice = (store.settings or {}).get("threshold_choice")
    if choice and stale(store, choice):
        store.update_settings({"threshold_choice": None})


def _how(choice: ThresholdChoice) -> str:
    """How ``choice`` was made, as the store remembers it."""
    return choice.reason if choice.from_data else f"{choice.reason}; the fallback"


def lookup(
    store: StoreRef = None,
    *,
    id: str | None = None,
    text: str | None = None,
    preset: str | None = None,
    rules: RulesRequest = None,
    collapse: bool = False,
) -> list[Match]:
    """The stored duplicates of one record (by id) or of a new text: exact ones first. Every
    record holding a matched content is listed; with ``collapse``, each content once, its
    other ids in ``copies``."""
    if (id is None) == (text is None):
        raise NeardupError("give exactly one of id and text")
    with opened(store) as source:
        searcher = Searcher(source, source.params, rules_for(source, rules, preset))
        found = searcher.lookup_id(id) if id is not None else searcher.lookup_text(text or "")
        return collapse_copies(found) if collapse else found


def explain(
    store: StoreRef = None,
    *,
    ids: Sequence[str] = (),
    texts: Sequence[str] = (),
    preset: str | None = None,
    rules: RulesRequest = None,
) -> Explanation:
    """Why two records are or are not near-duplicates at the store's settings: the word diff,
    the similarities, the shared tokens, and the rule that decided. ``ids`` name stored records,
    ``texts`` new ones; two in all, ids first."""
    if len(ids) + len(texts) != 2:
        raise NeardupError(f"explain takes two records (ids or texts), not {len(ids) + len(texts)}")
    with opened(store) as source:
        searcher = Searcher(source, source.params, rules_for(source, rules, preset))
        sides = [searcher.fingerprint_record(i)[1] for i in ids]
        sides += [searcher.fingerprint_text(t) for t in texts]
        names = (*ids, None, None)
        frequencies = None
        if source.keeps_frequencies:
            both = np.concatenate([sides[0].shingles, sides[1].shingles]).view(np.int64)
            frequencies = source.frequencies(both)
        cut = _report_cut(source, searcher.rules, sides) if len(ids) == 2 else None
        return explain_pair(
            sides[0],
            sides[1],
            source.params,
            searcher.rules,
            (names[0], names[1]),
            frequencies,
            cut,
        )


def _report_cut(
    source: Store, rules: MatchRules, sides: list[Fingerprint]
) -> tuple[LeftOut, int] | None:
    """What the store's last report left out past its budget, if it did, for two stored
    records that share tokens of its field, with how many contents hold the least held of
    those tokens (counted to one more than the size it left out)."""
    measured = last_report(source)
    if measured is None or not measured.left_out or sides[0].md5 == sides[1].md5:
        return None
    left_out = LeftOut(**measured.left_out)
    if left_out.field != rules.method:
        return None
    token_field = TokenField(left_out.field)
    shared = np.intersect1d(token_field.keys(sides[0]), token_field.keys(sides[1]))
    if not len(shared):
        return None
    return left_out, int(source.contents_holding(token_field, shared, left_out.size).min())


# Records of a file looked up together: where joining them with the store's contents costs
# less than a lookup each, they are (Searcher.lookup_batch), the store read once for them all.
LOOKUP_BATCH = 10_000


def lookup_file(
    paths: Sequence[str | Path],
    store: StoreRef = None,
    *,
    format: Format | None = None,
    id_field: str | None = None,
    text_fields: Sequence[str] = (),
    encoding: str | None = None,
    preset: str | None = None,
    rules: RulesRequest = None,
    collapse: bool = False,
    each: Callable[[list[tuple[str, Match]]], None] | None = None,
) -> FileLookup:
    """Look up every record of some files (``-``: standard input) without adding them: each
    record's id with each of its stored duplicates, in file order. A record's own stored
    version (the same id) is no duplicate of it, as for ``add(if_unique=True)``. With
    ``each``, the matches are given to it a batch at a time as they are found, and not kept:
    a stream's records are answered as they arrive (see :func:`neardup.indexer.batches`)."""
    files = _readers(paths, format, id_field, text_fields, encoding, _fields_indexed_with(store))
    summary = FileLookup()

    def found(results: list[tuple[str, list[Match]]]) -> None:
        matches = [(i, m) for i, record_matches in results for m in record_matches]
        summary.records += len(results)
        summary.with_duplicates += sum(1 for _, record_matches in results if record_matches)
        summary.lines += len(matches)
        if each is None:
            summary.matches += matches
        elif matches:
            each(matches)

    looked_up = lookup_records(
        Records(files),
        store,
        preset=preset,
        rules=rules,
        collapse=collapse,
        skipped=summary.skipped,
        each=found,
    )
    summary.narrowed = looked_up.narrowed
    for reader in files:
        _account_for(reader, summary)
    return summary


def lookup_records(
    records: Iterable[Record],
    store: StoreRef = None,
    *,
    preset: str | None = None,
    rules: RulesRequest = None,
    collapse: bool = False,
    skipped: SkipLog | None = None,
    each: Callable[[list[tuple[str, list[Match]]]], None] | None = None,
) -> Lookups:
    """Look up records without adding them: each record's id with its stored duplicates, in
    order. A record whose text has no words is answered with none, or, given ``skipped``,
    counted there and left out. A record's own stored version (the same id) is no duplicate
    of it, as for ``add(if_unique=True)``. Where reading the store's contents once costs less
    than a lookup each, the records are joined with them: the same answers, but for records
    whose tokens very many stored records share, joined by their rarer tokens and counted.
    With ``each``, each batch's answers are given to it as they are found, and not kept."""
    found: list[tuple[str, list[Match]]] = []
    with opened(store) as source:
        searcher = Searcher(source, source.params, rules_for(source, rules, preset))
        stored = source.count()
        for batch in batches(records, LOOKUP_BATCH):
            fps = fingerprint_batch([r.text for r in batch], source.params)
            worded = [fp for fp in fps if fp.num_words]
            answers = iter(searcher.lookup_batch(worded, stored, reread=False))
            results: list[tuple[str, list[Match]]] = []
            for record, fp in zip(batch, fps, strict=True):
                if not fp.num_words and skipped is not None:
                    skipped.add(record.line, "no words after normalisation", record.source)
                    continue
                matches = [m for m in next(answers) if m.id != record.id] if fp.num_words else []
                results.append((record.id, collapse_copies(matches) if collapse else matches))
            if each is None:
                found += results
            else:
                each(results)
        return Lookups(found, searcher.narrowed)


@dataclass
class Lookups:
    """What :func:`lookup_records` found: each record's id with its stored duplicates, in
    order, and how many records were looked up by their rarer tokens alone."""

    results: list[tuple[str, list[Match]]]
    narrowed: int = 0


@dataclass
class FileLookup:
    """What :func:`lookup_file` found: each record's id with each of its stored duplicates, in
    file order; how many records it looked up; and what reading the files left to say."""

    matches: list[tuple[str, Match]] = field(default_factory=list)  # unless given as found
    records: int = 0
    with_duplicates: int = 0  # records that have stored duplicates
    lines: int = 0  # (record, stored duplicate) pairs found
    skipped: SkipLog = field(default_factory=SkipLog)
    text: list[str] = field(default_factory=list)  # how each file was read, where neardup chose
    damaged: list[str] = field(default_factory=list)  # files whose rest could not be read
    narrowed: int = 0  # records looked up by their rarer tokens alone

    def describe(self) -> str:
        have = "has" if self.with_duplicates == 1 else "have"
        lines = [*self.text, narrowed_note(self.narrowed, "looked up")]
        return leading_lines(lines) + (
            f"of {counted(self.records, 'record')} looked up, {self.with_duplicates:,} {have} "
            f"stored duplicates ({counted(self.lines, 'line')}); skipped "
            f"{self.skipped.summary()}"
        )


class _ReadAccount(Protocol):
    skipped: SkipLog
    text: list[str]
    damaged: list[str]


def _account_for(reader: Reader, summary: _ReadAccount) -> None:
    """What reading a file left to say, into ``summary``: its rows skipped, how neardup read
    it where it chose (its text fields, its delimiter), and where it is damaged."""
    summary.skipped.merge(reader.skipped, file_name(reader.path))
    if chosen := reader.fields_chosen():
        summary.text.append(chosen)
    if reader.damaged:
        summary.damaged.append(f"{file_name(reader.path)} is {reader.damaged}")


# Records of a file linked at once: where joining them with the store costs less than a lookup
# each, they are joined with the store's contents, read by the first such batch and kept for the
# rest, since a link writes nothing (Searcher.lookup_batch).
LINK_BATCH = 10_000
# Each record's candidates in a link, unless asked otherwise: a lookup's 10 ranked by shared
# tokens miss some records' true counterpart, and a stored record's best match is known only
# among the records that found it. On the 12 public sets of two sources 20 raises F1 on 9 and
# lowers none (Abt-Buy 0.620 -> 0.644, IMDB-TVDB 0.453 -> 0.473), for 1.3-1.6 times the time;
# 30 gains at most 0.015 more for twice the time (benchmarks/README.md, "Linking two sources").
LINK_CANDIDATES = 20
# The token fields of a store a link of two files makes: the bands that reports and lookups
# query, and the signature, that a link queries. A record's best match is wanted however unlike
# it is, and two sources often describe one thing apart (a shop's long description, another's
# short title): bands of 4 rows make a pair of Jaccard 0.2 a candidate once in 20, where 128
# MinHash values OR-queried rank it by the ~25 it shares. On 14 public sets of two sources and
# generated people F1 rises by up to 0.34 (Amazon-Google with descriptions 0.167 -> 0.510) and
# falls by at most 0.013 (the payments), for about twice the time (benchmarks/README.md,
# "Linked by the MinHash signature").
LINK_FIELDS = (TokenField.BANDS, TokenField.SIGNATURE)


@dataclass
class Linked:
    """What :func:`link` found: each record of the file that has a counterpart in the store,
    in file order, with that stored record; how many records it linked, and the store's."""

    links: list[tuple[str, Match]]
    records: int  # the file's records with words, each looked up
    stored: int
    threshold: float  # the least similarity of a link (0: none)
    how: str  # how the threshold was chosen
    indexed: IndexSummary | None = None  # the first of two files, indexed into the store
    skipped: SkipLog = field(default_factory=SkipLog)  # rows of the file not linked
    text: list[str] = field(default_factory=list)  # how the file was read, where neardup chose
    damaged: list[str] = field(default_factory=list)  # the file, if its rest could not be read
    narrowed: int = 0  # records linked by their rarer tokens alone
    bands_reach: float | None = None  # linked by bands alone: the Jaccard they reach half the time

    def describe(self) -> str:
        """How the file was read, where neardup chose, the records linked by their rarer tokens
        alone, and what bands miss where the store holds no signature; then one line: the
        links found, of the records of either side, and the rows skipped."""
        at = f" at similarity {self.threshold:g} or more" if self.threshold else ""
        lines = [*self.text, narrowed_note(self.narrowed, "linked"), self._bands_note()]
        return leading_lines(lines) + (
            f"{counted(len(self.links), 'link')}, each a mutual best match{at} ({self.how}), "
            f"between {counted(self.records, 'record')} and the store's {self.stored:,}; "
            f"skipped {self.skipped.summary()}"
        )

    def _bands_note(self) -> str:
        if self.bands_reach is None:
            return ""
        return (
            "linked by the store's LSH bands, as it holds no signature tokens: a record whose "
            f"counterpart shares less than {self.bands_reach:.2f} of their shingles (Jaccard) "
            "is mostly left unlinked; a store indexed with --fields bands,signature links by "
            "the signature"
        )


def link(
    paths: Sequence[str | Path],
    store: StoreRef = None,
    *,
    format: Format | None = None,
    id_field: str | None = None,
    text_fields: Sequence[str] = (),
    linked_id_field: str | None = None,
    linked_text_fields: Sequence[str] = (),
    encoding: str | None = None,
    preset: str | None = None,
    rules: RulesRequest = None,
) -> Linked:
    """Link the records of a file to the records a store holds, one to one: each record with
    the stored record most like it, when that stored record is most like it of all the file's
    records too (:class:`neardup.linkage.MutualBest`). For two sources of the same things, each
    holding a thing once: two shops' listings, two ledgers, two libraries.

    Each record's candidates are a lookup's (``rules``' ``candidates`` of them, by shared
    tokens; LINK_CANDIDATES unless given), each measured with the store's similarity. They are
    found by the MinHash signature where the store indexes it (LINK_FIELDS: a new store of two
    files linked does), else by its bands, unless ``rules`` or ``preset`` say otherwise. The
    links' threshold is ``rules``' ``threshold``: a number (0: every mutual best match), or
    ``auto`` (the default), read from the links' similarities
    (:func:`neardup.tuning.choose_link_threshold`), not the store's, which is read for
    near-duplicates within one source. With two files, the first is indexed into the store (a
    new store's bands chosen for both files' records) and the second linked to it; two
    sources name their fields apart, so ``linked_id_field`` and ``linked_text_fields`` name
    the linked file's where they are not ``id_field`` and ``text_fields``."""
    if len(paths) not in (1, 2):
        raise NeardupError(
            "link takes one file, linked to the store's records, or two: the first indexed "
            "into the store and the second linked to it"
        )
    if twice := repeated_file(paths):  # each record would link to itself
        raise NeardupError(
            f"{twice}: link pairs the records of two sources; the near-duplicates within one "
            "file are its report (neardup index FILE, then neardup report)"
        )
    if len(paths) == 1 and (linked_id_field or linked_text_fields):
        raise NeardupError(
            "--linked-id-field and --linked-text-field name the fields of the second of two "
            "files: with one, give --id-field and --text-field"
        )
    linked_fields = (linked_id_field or id_field, linked_text_fields or text_fields)
    # Checked before indexing; one file is read as the store's records were, two sources each
    # with their own fields.
    indexed_with = _fields_indexed_with(store) if len(paths) == 1 else None
    linked_file = _readers(paths[-1:], format, *linked_fields, encoding, indexed_with)
    indexed = None
    if len(paths) == 2:
        reading = {
            "format": format,
            "id_field": id_field,
            "text_fields": text_fields,
            "encoding": encoding,
        }
        new = _is_new(store)
        if not new:  # a new store holds no other records
            _refuse_other_sources(
                store,
                paths,
                lambda: _readers(paths[:1], **reading, indexed_with=_fields_indexed_with(store)),
            )
        measured = _readers(_read_twice(paths[1:]), format, *linked_fields, encoding)
        fields = {"fields": LINK_FIELDS} if new and not preset else None
        indexed = index(
            [paths[0]], store, preset=preset, params=fields, measured_with=measured, **reading
        )
    records = (r for reader in linked_file for r in reader)
    linked = link_records(records, store, preset=preset, rules=rules)
    for reader in linked_file:
        _account_for(reader, linked)
    linked.indexed = indexed
    return linked


def _is_new(store: StoreRef) -> bool:
    """Whether ``store`` is yet to be made: no file, or an engine's index with no parameters."""
    try:
        with opened(store) as source:
            return source.read_params() is None
    except NoStore:
        return True


def _held_besides(source: Store, known: Container[str] = ()) -> list[str]:
    """The ids ``source`` holds that are not ``known``: none in a store with no parameters
    yet (an engine's index not made), which holds nothing."""
    if source.read_params() is None or not source.count():
        return []
    return [i for i in source.iter_ids() if i not in known]


def _refuse_other_sources(
    store: StoreRef, paths: Sequence[str | Path], first: Callable[[], list[Reader]]
) -> None:
    """Stop before indexing when the store holds records that are not the first file's: the
    second file would be linked to them too (a store of yesterday's records, or the default
    store of another run), and the links would depend on what was indexed before."""
    try:
        with opened(store) as source:
            held = set(_held_besides(source))
            url = source.url
    except NoStore:
        held = set()
    if not held:
        return
    if read_once(paths[0]):
        raise NeardupError(
            f"{url} holds records already, and {_stream_name(str(paths[0]))} can be read only "
            "once to check that they are its own: give a regular file, or a new store"
        )
    for reader in first():
        held.difference_update(record.id for record in reader)
    if held:
        other = min(held)
        raise NeardupError(
            f"{url} holds {counted(len(held), 'record')} that {file_name(paths[0])} does not "
            f"(such as {other!r}), and link of two files links the second with the first "
            f"alone: give a store of its own (--store), or link the second with every stored "
            f"record: neardup link {paths[1]} --store {url}"
        )


def link_records(
    records: Iterable[Record],
    store: StoreRef = None,
    *,
    preset: str | None = None,
    rules: RulesRequest = None,
) -> Linked:
    """:func:`link` of records given, not read from a file (the service's ``POST /link``)."""
    with opened(store) as source:
        if not (stored := source.count()):
            raise NeardupError(f"{source.url} holds no records to link to: index them first")
        chosen, asked = _link_rules(source, rules, preset)
        searcher = Searcher(source, source.params, chosen)
        best = MutualBest()
        ids: list[str] = []
        skipped = SkipLog()
        for batch in batches(records, LINK_BATCH):
            give_back_freed_memory()  # what the last batch (or the index) freed, held to the end
            fps = fingerprint_batch([r.text for r in batch], source.params)
            worded = with_words(batch, fps, skipped)
            answers = searcher.lookup_batch([fp for _, fp in worded], stored, reread=False)
            for (record, _), matches in zip(worded, answers, strict=True):
                best.add(len(ids), collapse_copies(matches))  # a text held twice is one thing
                ids.append(record.id)
        links = best.links()
        if asked is None:
            histogram = similarity_histogram(np.array([m.similarity for _, m in links]))
            choice = choose_link_threshold(histogram)
            threshold, how = choice.threshold, f"auto: {choice.reason}"
        else:
            threshold, how = asked, "given" if asked else "no threshold"
        kept = [(ids[place], m) for place, m in links if m.similarity >= threshold]
        params = source.params
        reach = None
        if chosen.method == TokenField.BANDS and TokenField.SIGNATURE not in params.fields:
            reach = even_odds(params.bands, params.rows_per_band)
        return Linked(
            kept,
            len(ids),
            stored,
            threshold,
            how,
            skipped=skipped,
            narrowed=searcher.narrowed,
            bands_reach=reach,
        )


def _link_rules(
    source: Store, rules: RulesRequest, preset: str | None
) -> tuple[MatchRules, float | None]:
    """The store's rules for a link, with no threshold (every candidate measured and kept)
    and at least LINK_CANDIDATES candidates unless asked for, and the threshold asked for: a
    number, or None to read it from the links."""
    if isinstance(rules, MatchRules):
        asked = None if rules.auto_threshold else rules.threshold or 0.0
        return replace(rules, threshold=None, auto_threshold=False), asked
    given = dict(rules or {})
    auto = given.get("threshold", AUTO) == AUTO
    if auto:
        given.pop("threshold", None)
    chosen = match_rules(source.params, source.settings, given, preset_name=preset)
    asked = None if auto else chosen.threshold or 0.0
    if not ("method" in given or preset) and TokenField.SIGNATURE in source.params.fields:
        chosen = replace(chosen, method=TokenField.SIGNATURE)
    if "candidates" not in given:
        chosen = replace(chosen, candidates=max(chosen.candidates, LINK_CANDIDATES))
    return replace(chosen, threshold=None, auto_threshold=False), asked


def report(
    store: StoreRef = None,
    *,
    preset: str | None = None,
    rules: RulesRequest = None,
    exact: bool = False,
    strategy: Strategy = "auto",
    progress: bool = False,
) -> Report:
    """Every near-duplicate pair in the store, once each, sorted by ids, with the threshold
    applied and what the report measured (:class:`Report`).

    With ``exact``, pairs come from every pair of contents (see :mod:`neardup.exact`) instead
    of the candidates: the same similarity and threshold (an automatic one is read from the
    candidates first, if the store has none yet), every pair at or above it; slower, for
    measuring what the candidates miss. ``strategy`` chooses how candidates are found (see
    :func:`neardup.report.find_pairs`); the pairs are the same either way. ``progress`` shows
    progress bars on stderr.
    """
    with opened(store) as source:
        if exact:
            return _exact_report(source, rules, preset, progress)
        pairs, measured, _ = _measured_report(source, rules, preset, strategy, progress)
        return Report(pairs, measured.threshold, measured)


def _measured_report(
    source: Store,
    rules: RulesRequest,
    preset: str | None,
    strategy: Strategy = "auto",
    progress: bool = False,
    estimate_recall: bool = False,
) -> tuple[list[Pair], Measured, MatchRules]:
    """:func:`report`'s pairs, what it measured (remembered as the store's last report) and
    the rules it applied; with ``estimate_recall``, the candidate recall estimated wherever
    the candidates are the bands, not only where they may miss pairs."""
    chosen = match_rules(source.params, source.settings, rules, preset_name=preset)
    checked = _read_from_checks(source, chosen) if chosen.to_choose else None
    if checked:
        chosen = replace(chosen, threshold=checked.threshold)
    with source.snapshot():  # the recall's contents are those of the pairs' records
        found = find_pairs(source, source.params, chosen, strategy, progress=progress)
        recall, applied = None, found.rules
        if applied.threshold is not None and (
            _bands_may_miss(source, applied)
            or (estimate_recall and applied.method == TokenField.BANDS)
        ):
            recall = _candidate_recall(source, found.pairs, applied.similarity)
    found = _remembered(source, found)
    if choice := found.choice or checked:  # made now: said, remembered or not
        how = f"auto: {_how(choice)}"
    else:
        how = _threshold_source(source, preset, rules, applied)
    left_out = asdict(found.left_out) if found.left_out else None
    nearest = None if found.nearest is None else found.nearest.tolist()
    measured = Measured(
        found.histogram.tolist(),
        applied.threshold,
        how,
        found.seconds,
        left_out,
        nearest,
        recall,
    )
    source.remember({"last_report": asdict(measured)})
    return found.pairs, measured, applied


# The candidate recall the bands are held to: a report whose bands make a pair of Jaccard at
# its threshold a candidate with a lower chance estimates what they miss.
CANDIDATE_RECALL_TARGET = 0.99


def _bands_may_miss(store: Store, rules: MatchRules) -> bool:
    """Whether the report's candidates are the store's bands and make a pair of Jaccard at
    the threshold a candidate with less than CANDIDATE_RECALL_TARGET: only then is the
    estimate worth its cost (the 2-row bands of short records reach 0.99 at 0.27)."""
    params = store.params
    return rules.method == TokenField.BANDS and (
        candidate_probability(rules.threshold, params.bands, params.rows_per_band)
        < CANDIDATE_RECALL_TARGET
    )


def _exact_report(source: Store, rules: RulesRequest, preset: str | None, progress: bool) -> Report:
    """Every pair at or above the store's threshold of its similarity (an automatic one read
    by a report, as lookups read it), from every pair of contents rather than the candidates."""
    chosen = rules_for(source, rules, preset)
    if not chosen.threshold:
        raise NeardupError("the exact report needs a --threshold above 0")
    with source.snapshot():
        records = [r for batch in source.iter_records() for r in batch]
        contents, copies = [r.content for r in records], np.ones(len(records), dtype=np.int64)
        weights = held_weights(source, source.params, chosen, contents, copies)
        pairs = exact_pairs(records, source.params, chosen, weights, progress)
    return Report(pairs, chosen.threshold, None)


@dataclass
class Measured:
    """What a store's last report measured: how many candidate pairs fell in each bin of
    similarity (0.02 wide, from 0 to 1), the threshold it applied, how that was chosen, and
    where the time went (seconds by phase; not part of what two reports are compared on)."""

    histogram: list[int]
    threshold: float | None
    how: str
    seconds: dict[str, float] = field(default_factory=dict, compare=False)
    left_out: dict[str, Any] | None = None  # the buckets it left out (LeftOut), past its budget
    # With an automatic threshold: the contents by the similarity of their nearest other one.
    nearest: list[int] | None = None
    # The share of the pairs at or above the threshold that the candidates hold, estimated
    # from the pairs reported (see _candidate_recall) where the bands may miss some.
    estimated_candidate_recall: float | None = None

    def left_out_text(self) -> str | None:
        """What the report left out of its candidates, in a line; None when nothing."""
        return LeftOut(**self.left_out).describe() if self.left_out else None

    def missed_text(self) -> str | None:
        """What the candidates may miss, in a line, when the estimated candidate recall is
        under CANDIDATE_RECALL_TARGET; None otherwise."""
        recall = self.estimated_candidate_recall
        if recall is None or recall >= CANDIDATE_RECALL_TARGET:
            return None
        return (
            f"estimated candidate recall {recall:.3f}: the bands may miss pairs at or above the "
            "threshold; report --exact lists every one"
        )

    def unsure_text(self) -> str | None:
        """How to check or place an automatic threshold read where no valley parted the
        near-duplicates from the rest, in a line; None otherwise. Pairs a person judges move it
        most there (the payments of two ledgers 0.379 -> 0.563, Abt-Buy 0.159 -> 0.454:
        benchmarks/README.md, "A threshold from judged pairs")."""
        if not (self.how.startswith(AUTO) and NO_VALLEY in self.how):
            return None
        return (
            "no valley parts the near-duplicates from the rest: to check or place the threshold, "
            "tune --label-sample 100 -o judge.csv draws pairs to judge, and tune --labels "
            "judge.csv reads them"
        )

    @property
    def readable(self) -> bool:
        """Whether the histogram holds enough pairs to be worth showing."""
        return sum(self.histogram) >= MIN_CANDIDATES


class Report(list[Pair]):
    """What :func:`report` returns: its pairs (a list), with the threshold it applied and
    what it measured (None for an exact report), as this report found them, whatever other
    processes report meanwhile (:func:`last_report` is the store's last, whoever made it)."""

    def __init__(
        self, pairs: Iterable[Pair], threshold: float | None, measured: Measured | None
    ) -> None:
        super().__init__(pairs)
        self.threshold = threshold
        self.measured = measured


def last_report(store: StoreRef = None) -> Measured | None:
    """What the store's last report measured (None before its first report)."""
    with opened(store) as source:
        remembered = (source.settings or {}).get("last_report")
        return Measured(**remembered) if remembered else None


@dataclass
class StoreTuning(Measured):
    """What ``tune --store`` finds: the report's measurements (with the estimated candidate
    recall wherever the candidates are the bands), and what the store's bands promise: the
    chance that a pair whose shingle sets have Jaccard similarity at the threshold becomes a
    candidate, 1 - (1 - s^rows)^bands."""

    candidate_pairs: int = 0
    bands: int = 0
    rows: int = 0  # LSH rows per band
    candidate_probability: float | None = None  # at the threshold, for the bands method
    # Where the threshold is read from the pairs the store's checks measured (records checked
    # as they arrived): how many records they saw; the histogram is then theirs.
    checked_records: int | None = None
    # Where the store keeps a threshold of its own (given at index, or judged), which every
    # command applies in place of the one read here: that threshold, and where it came from.
    kept_threshold: float | None = None
    kept_how: str | None = None

    def unsure_text(self) -> str | None:
        """As a report's (:meth:`Measured.unsure_text`), but for a store that keeps a
        threshold of its own: no valley is then read for any command."""
        return None if self.kept_how is not None else super().unsure_text()


def tune_store(
    store: StoreRef = None, *, preset: str | None = None, threshold: float | None = None
) -> StoreTuning:
    """Measure the store's candidate pairs and choose its threshold from them, as
    ``report --threshold auto`` does (and remembers), without writing the pairs; or, given a
    ``threshold``, what the store's candidates hold at that one."""
    asked = {"threshold": AUTO if threshold is None else check_threshold(threshold)}
    with opened(store) as source:
        if threshold is None:
            source.remember({"threshold_choice": None})  # read it again from the records
        # What this report measured, read in its one state, not what the store remembers of
        # the last report, which another process may have made since.
        _, measured, rules = _measured_report(source, asked, preset, estimate_recall=True)
        params = source.params
        bands, rows = params.bands, params.rows_per_band
        chance = None
        # Only the bands' candidates miss pairs: a store that remembers the signature or
        # shingles as its method compares every record that shares one.
        if measured.threshold is not None and rules.method == TokenField.BANDS:
            chance = float(candidate_probability(measured.threshold, bands, rows))
        candidate_pairs = sum(measured.histogram)
        # The pairs the threshold was read from: the checks' where they speak for the store.
        checked = _checks_speaking_for(source, rules) if threshold is None else None
        if checked:
            measured.histogram, measured.nearest = checked["histogram"], checked["nearest"]
        kept = match_rules(params, source.settings, None, preset_name=preset)
        kept_how = None if kept.auto_threshold else _threshold_source(source, preset, None, kept)
    return StoreTuning(
        **asdict(measured),
        candidate_pairs=candidate_pairs,
        bands=bands,
        rows=rows,
        candidate_probability=chance,
        checked_records=checked["records"] if checked else None,
        kept_threshold=None if kept_how is None else kept.threshold,
        kept_how=kept_how,
    )


# Pairs to judge are drawn from the candidate pairs at or above this similarity, or above a
# higher one where more than JUDGE_POOL pairs lie above it: a report listing them holds each.
JUDGE_FLOOR = 0.1
JUDGE_POOL = 1_000_000


@dataclass
class LabelSample:
    """Pairs for a person to judge (:func:`label_sample`), with their records' texts."""

    pairs: list[Pair]  # in the order to show them
    # Each record's text: as its file has it where the files were given and hold it, else its
    # content as the store holds it (normalised).
    texts: dict[str, str]
    threshold: float  # read from the data: half the pairs were drawn around it
    floor: float  # the least similarity of the pairs drawn from
    how: str  # how the threshold was read, or why it was not
    untold: list[str] = field(default_factory=list)  # records of the pairs none of them holds


def label_sample(
    store: StoreRef = None,
    *,
    count: int = 100,
    seed: int = 1,
    preset: str | None = None,
    output: str | Path | None = None,
    format: ReportFormat | None = None,
    texts_from: Sequence[str | Path] = (),
    id_field: str | None = None,
    text_fields: Sequence[str] = (),
    encoding: str | None = None,
) -> LabelSample:
    """``count`` of the store's candidate pairs for a person to judge (all where fewer), half
    drawn from every similarity from JUDGE_FLOOR up, half from around the threshold read from
    the data (:func:`neardup.labels.pairs_to_judge`), exact copies aside; written to
    ``output`` when given (in ``format``, else as its name says), never over a file of judged
    pairs. Each record's text is its content as the store holds it, or as ``texts_from`` (the
    files the store was indexed from, read as :func:`record_texts` reads them) have it. It
    costs two reports: one that reads the threshold and counts the pairs, one that lists the
    pairs from the floor."""
    if count < 2:
        raise InvalidParameter(f"a sample of pairs to judge needs at least 2, not {count}")
    if output is not None and Path(output).is_file() and (held := _judged_in(output)):
        raise NeardupError(
            f"{output} holds {counted(held, 'judged pair')}: write the sample to another "
            "file, and give both to --labels"
        )
    sample = _drawn_to_judge(store, count, seed, preset)
    if texts_from:
        own = record_texts(
            texts_from,
            sample.texts,
            id_field=id_field,
            text_fields=text_fields,
            encoding=encoding,
            store=store,
        )
        sample.texts.update(own)
        sample.untold = sorted(sample.texts.keys() - own.keys())
    if output is not None:
        with whole_file(output) as out:
            write_label_sample(sample, out, format or named_format(str(output)) or "tsv")
    return sample


def _drawn_to_judge(store: StoreRef, count: int, seed: int, preset: str | None) -> LabelSample:
    with opened(store) as source:
        _, measured, rules = _measured_report(source, {"threshold": AUTO}, preset)
        floor = _judge_floor(np.array(measured.histogram))
        listed = find_pairs(source, source.params, replace(rules, threshold=floor))
        near = [p for p in listed.pairs if p.kind == "near"]
        similarities = np.array([p.similarity for p in near], dtype=np.float64)
        threshold = FALLBACK_THRESHOLD if measured.threshold is None else measured.threshold
        picked = [near[n] for n in pairs_to_judge(similarities, count, threshold, floor, seed)]
        ids = sorted({i for p in picked for i in (p.left_id, p.right_id)})
        texts = {i: record.content for i, record in source.get(ids).items()}
    return LabelSample(picked, texts, threshold, floor, measured.how)


def _judge_floor(histogram: np.ndarray) -> float:
    """The least similarity of the pairs to draw from: JUDGE_FLOOR, or the lowest bin edge
    above which at most JUDGE_POOL candidate pairs lie."""
    bins = len(histogram)
    above = np.cumsum(histogram[::-1])[::-1]  # pairs from each bin up
    fits = np.flatnonzero(above <= JUDGE_POOL)  # the last bin where even it holds more
    first = max(round(JUDGE_FLOOR * bins), int(fits[0]) if len(fits) else bins - 1)
    return first / bins


def _judged_in(path: str | Path) -> int:
    """How many judged pairs a file holds (0 where it holds none, or is no file of them)."""
    try:
        return len(read_judged([path]).same)
    except NeardupError:
        return 0


@dataclass
class LabelTuning:
    """The threshold that pairs a person judged choose (:func:`tune_with_labels`), what it
    should give and what the threshold read from the data should give, by their judgement."""

    threshold: float
    precision: float  # expected at it, over the store's candidate pairs
    recall: float
    f1: float
    auto: Expected | None  # the threshold read from the data, by the same judgement
    same: int  # pairs judged the same record
    different: int
    blank: int  # rows left blank: not judged
    candidate_pairs: int


def tune_with_labels(
    judged_files: str | Path | Sequence[str | Path],
    store: StoreRef = None,
    *,
    encoding: str | None = None,
    preset: str | None = None,
) -> LabelTuning:
    """The threshold whose F1 is highest by pairs a person judged (``judged_files``: see
    :func:`neardup.evaluate.read_judged`), over the store's candidate pairs; the store
    remembers it as its threshold for every command, as ``index --threshold`` does, until
    another is given (``--threshold auto`` uses the one read from the data)."""
    files = [judged_files] if isinstance(judged_files, str | Path) else list(judged_files)
    judged = read_judged(files, encoding)
    judged_file = ", ".join(map(str, files))
    same = sum(judged.same)
    different = len(judged.same) - same
    if not same or not different:
        kind = "different" if same else "the same" if different else "yet"
        raise NeardupError(
            f"{judged_file}: no pair is judged {kind} ({same} the same, {different} not, "
            f"{judged.blank} blank): write yes or no in the same column of pairs of every "
            "similarity, as tune --label-sample draws them"
        )
    with opened(store) as source:
        _, measured, _ = _measured_report(source, {"threshold": AUTO}, preset)
        histogram = np.array(measured.histogram)
        chance = chance_by_bin(np.array(judged.similarity), np.array(judged.same), len(histogram))
        best, auto = judged_threshold(histogram, chance, measured.threshold)
        # The threshold alone, over the rules index runs remembered: the others keep theirs.
        kept = (source.settings or {}).get("rules") or {}
        source.update_settings(
            {
                "rules": {**kept, "threshold": best.threshold, "auto_threshold": False},
                "judged": {
                    "threshold": best.threshold,
                    "same": same,
                    "different": different,
                    "records": source.count(),
                },
            }
        )
    return LabelTuning(
        best.threshold,
        best.precision,
        best.recall,
        best.f1,
        auto,
        same,
        different,
        judged.blank,
        int(histogram.sum()),
    )


# The near pairs a candidate recall is estimated from, at most: an even sample of a report's.
ESTIMATE_PAIRS = 100_000


def _candidate_recall(store: Store, pairs: Sequence[Pair], similarity: Similarity) -> float | None:
    """The share of the pairs at or above the threshold that the store's bands make
    candidates, estimated from the near pairs reported (every k-th, up to ESTIMATE_PAIRS) and
    the Jaccard of their shingle sets (:func:`neardup.tuning.estimated_candidate_recall`);
    None without near pairs. Pairs measured by the Jaccard ``similarity`` carry it already."""
    near = [p for p in pairs if p.kind == "near"]
    near = near[:: max(1, -(-len(near) // ESTIMATE_PAIRS))]
    if similarity == "jaccard":
        jaccards = np.array([p.similarity for p in near], dtype=np.float64)
    else:
        jaccards = _shingle_jaccards(store, near)
    return estimated_candidate_recall(jaccards, store.params.bands, store.params.rows_per_band)


def _shingle_jaccards(store: Store, pairs: Sequence[Pair]) -> np.ndarray:
    """The Jaccard of each pair's shingle sets, their contents read from the store."""
    ids = sorted({i for p in pairs for i in (p.left_id, p.right_id)})
    contents = {i: record.content for i, record in store.get(ids).items()}
    if len(contents) < len(ids):  # deleted meanwhile, which Solr's snapshot cannot show
        raise StoreChanged(f"{counted(len(ids) - len(contents), 'record')} of its pairs deleted")
    distinct = sorted(set(contents.values()))
    number = {content: n for n, content in enumerate(distinct)}
    left = np.array([number[contents[p.left_id]] for p in pairs], dtype=np.int64)
    right = np.array([number[contents[p.right_id]] for p in pairs], dtype=np.int64)
    return jaccard_pairs(distinct, left, right, store.params)


@dataclass
class Added:
    """What :func:`add` did: the ids it stored, and for each record it did not store because
    of ``if_unique``, the near-duplicates the store already held, or that it held the record
    itself (``unchanged``: the same id with the same content)."""

    added: list[str]
    duplicates: dict[str, list[Match]]
    skipped: dict[str, str]  # id: why it was not stored (no words, an id too long)
    replaced: list[str] = field(default_factory=list)  # added ids the store held before
    unchanged: list[str] = field(default_factory=list)
    # With ``if_unique``: the threshold the records were checked at, and where it comes from.
    checked: str = ""
    # With ``if_unique``: records checked against the stored records that share their rarer
    # tokens alone, the tokens very many stored records share left out (JOIN_ENTRIES).
    narrowed: int = 0


def add(
    records: Sequence[Record],
    store: StoreRef = None,
    *,
    if_unique: bool = False,
    preset: str | None = None,
    rules: RulesRequest = None,
    every_duplicate: bool = True,
) -> Added:
    """Add or replace records (each visible to lookups when this returns). With ``if_unique``,
    a record that has a near-duplicate in the store, by the store's rules or ``rules``, or
    earlier among ``records``, is not stored, and its duplicates are returned instead (see
    :meth:`Searcher.unique`: every candidate, weighed as in a store holding them all). Without
    ``every_duplicate``, a record whose content the store holds is answered with the records
    holding it alone, the first duplicates a lookup lists, without looking up near ones: the
    same decision, and no lookup for a file indexed again.

    With ``if_unique``, the check and the add hold the store's lock (:meth:`Store.exclusive`):
    another process's check-then-add waits for them. Threads sharing one store object
    serialise their own (see :mod:`neardup.service`).
    """
    return _add(
        records,
        store,
        if_unique=if_unique,
        preset=preset,
        rules=rules,
        every_duplicate=every_duplicate,
    )


def _add(
    records: Sequence[Record],
    store: StoreRef,
    *,
    if_unique: bool,
    preset: str | None,
    every_duplicate: bool,
    rules: RulesRequest = None,
    kept: KeptContents | None = None,
) -> Added:
    """:func:`add`; ``kept``: a run of checks' store contents, from one call to the next (its
    records are published, not flushed: the run flushes at its end)."""
    result = Added([], {}, {})
    with opened(store, create=True) as target:
        storable = []
        surrogates = [holds_surrogates(r.text) for r in records]
        # Normalised in one batch: a call per record cost a tenth of a check-then-add.
        texts = [r.text for r, bad in zip(records, surrogates, strict=True) if not bad]
        held_params = target.read_params()
        new = held_params is None
        normalized = normalize_batch(texts, NORMALIZATION if new else held_params.normalization)
        # A new store's bands, as index chooses them: for the length of its first records.
        params = target.ensure_params(_bands_for(None, normalized) if new else None)
        with_words = {t for t, words in zip(texts, normalized, strict=True) if words}
        for record, bad in zip(records, surrogates, strict=True):
            if problem := id_problem(record.id):
                result.skipped[record.id] = problem
            elif bad:
                result.skipped[record.id] = "text holds half of a surrogate pair"
            elif record.text not in with_words:
                result.skipped[record.id] = "no words after normalisation"
            else:
                storable.append(record)
        held = target.get(list(dict.fromkeys(r.id for r in storable)))
        if not if_unique:
            index_records(target, storable, params)
            result.added = list(dict.fromkeys(r.id for r in storable))
            _forget_choice_if(target, _doubled_or_halved)
        elif storable:
            asked = (rules, preset)
            _add_if_unique(target, params, asked, storable, result, every_duplicate, held, kept)
        result.replaced = [i for i in result.added if i in held]
    return result


def _add_if_unique(
    target: Store,
    params: FingerprintParams,
    asked: tuple[RulesRequest, str | None],
    storable: list[Record],
    result: Added,
    every_duplicate: bool,
    held: Container[str],
    kept: KeptContents | None,
) -> None:
    """Check ``storable`` against the store and each other, and store the new ones, holding
    the store's lock: the rules too are read under it, since an automatic threshold not chosen
    yet is read from every record, which another writer must not change meanwhile.
    ``held``: the ids of ``storable`` the store held; ``kept``: the contents a run of checks
    keeps."""
    with target.exclusive():
        target.reload_settings()  # as the writer before this one left them
        chosen, how = _checking_rules(target, params, asked, storable)
        result.checked = f"{CHECKED_AT}threshold {chosen.threshold:g} ({how})"
        remembered = threshold_choice(target.settings, chosen) if chosen.auto_threshold else None
        if remembered and not _records_checked_at(remembered):
            target.update_settings({"threshold_choice": {**remembered, "checked": True}})
        fps = fingerprint_batch([r.text for r in storable], params)
        # Every candidate, as a report and the check among the records themselves take:
        # a lookup's ten would miss stored duplicates the records' own check found.
        every = replace(chosen, candidates=MAX_CANDIDATES)
        searcher = Searcher(target, params, every, kept=kept)
        new, found, measured = searcher.unique([r.id for r in storable], fps, every_duplicate)
        result.narrowed = searcher.narrowed
        if chosen.auto_threshold:
            _count_checks(target, chosen, measured, len(storable))
        for record, is_new, matches in zip(storable, new, found, strict=True):
            if is_new:
                result.added.append(record.id)
            elif all(m.id == record.id and m.exact for m in matches):
                result.unchanged.append(record.id)
            else:
                result.duplicates[record.id] = matches
        stored = [(r, fp) for r, fp, n in zip(storable, fps, new, strict=True) if n]
        before = target.records_version()
        index_records(target, [r for r, _ in stored], params, more_follow=kept is not None)
        if kept:
            replaced = any(r.id in held for r, _ in stored)
            ids, stored_fps = [r.id for r, _ in stored], [fp for _, fp in stored]
            kept.add_stored(target, before, ids, stored_fps, replaced)


def _checking_rules(
    target: Store,
    params: FingerprintParams,
    asked: tuple[RulesRequest, str | None],
    records: Sequence[Record],
) -> tuple[MatchRules, str]:
    """The rules ``records`` are checked by, :func:`rules_for`'s, and where their threshold
    comes from. A store whose pairs in all are too few to read an automatic threshold from
    (MIN_TAIL_PAIRS: fewer than 46 records, none in a new store) reads it from its records and
    ``records`` together, as a store holding them reads it, and remembers it: a new store's
    first ``index --skip-duplicates`` run checks its file by the threshold of its first batch,
    not by the fallback."""
    chosen = match_rules(params, target.settings, asked[0], preset_name=asked[1])
    if chosen.auto_threshold and not chosen.to_choose and _outgrown_by_checks(target, chosen):
        chosen = replace(chosen, threshold=None)
    if chosen.to_choose and (checked := _read_from_checks(target, chosen)):
        return replace(chosen, threshold=checked.threshold), f"auto: {_how(checked)}"
    if chosen.to_choose and _too_small_to_read(target):
        import tempfile  # (3 ms with shutil) for a store too small to read its threshold from

        with (
            tempfile.TemporaryDirectory(prefix="neardup-") as folder,
            open_store(f"sqlite:///{Path(folder) / 'trial.db'}", create=True) as trial,
        ):
            trial.ensure_params(params)
            stored = [Record(r.id, r.content) for batch in target.iter_records() for r in batch]
            index_records(trial, [*stored, *records], params)
            found = find_pairs(trial, params, chosen)
        added = f"the {counted(len(records), 'record')} being added"
        if stored:
            added += f" and the {len(stored):,} stored"
        choice = replace(found.choice, reason=f"read from {added}: {found.choice.reason}")
        _remember_choice(target, chosen, choice, records=len(stored) + len(records))
        return found.rules, f"auto: {_how(choice)}"
    chosen = rules_for(target, *asked)
    return chosen, rule_sources(target.settings, chosen)["threshold"]


def _count_checks(target: Store, rules: MatchRules, measured: CheckedPairs, records: int) -> None:
    """Add what a check of ``records`` records measured to what the store's checks measured
    before (for ``rules``' similarity: another similarity starts again)."""
    before = _checks_for(target, rules) or {"histogram": 0, "nearest": 0, "records": 0}
    nearest = similarity_histogram(np.fromiter(measured.nearest.values(), dtype=np.float64))
    totals = {
        "for": choice_key(rules),
        "histogram": (measured.histogram + before["histogram"]).tolist(),
        "nearest": (nearest + before["nearest"]).tolist(),
        "records": before["records"] + records,
    }
    target.update_settings({"checked_pairs": totals})


def _read_from_checks(store: Store, rules: MatchRules) -> ThresholdChoice | None:
    """The threshold read from every pair the store's checks measured, for a store whose
    records were checked as they arrived (``if_unique``), remembered when read from data; None
    for a store never checked. Its records alone would not do: the checks stored no two of
    them that similar, so they have lost the duplicates' hump (a store fed one person at a time
    read 0.26 from its first 46 records and refused 1,553 of 2,702 people wrongly; the pairs
    its checks measured hold each refused record's similarity to what it duplicates). None too
    where the checks saw fewer than half the records the store holds: those indexed since
    without a check keep their duplicates, and read it (a store that checked one record
    before 3,000 were indexed read the checks' fallback 0.5 where its records read 0.55)."""
    checked = _checks_speaking_for(store, rules)
    if not checked:
        return None
    # From MIN_TAIL_PAIRS pairs: a few hundred read anything (0.38 of the first 77 ads).
    read = choose_threshold(
        np.array(checked["histogram"]),
        FALLBACK_THRESHOLD,
        np.array(checked["nearest"]),
        least=MIN_TAIL_PAIRS,
    )
    source = f"read from the pairs the checks of {counted(checked['records'], 'record')} measured"
    choice = replace(read, reason=f"{source}: {read.reason}")
    if choice.from_data:
        _remember_choice(store, rules, choice, records=checked["records"])
    return choice


def _checks_speaking_for(store: Store, rules: MatchRules) -> dict[str, Any] | None:
    """What the store's checks measured (:func:`_checks_for`), when they saw at least half
    the records it holds: what its automatic threshold is read from then."""
    checked = _checks_for(store, rules)
    return checked if checked and 2 * checked["records"] >= store.count() else None


def _outgrown_by_checks(store: Store, rules: MatchRules) -> bool:
    """Whether the store's checks have measured twice the records its threshold was read from:
    it is read again from them, so that a store checked as records arrive reads it from at
    least half of them, at no cost (their histograms are in its settings)."""
    checked = _checks_for(store, rules)
    remembered = threshold_choice(store.settings, rules) or {}
    return bool(checked) and _read_from_half_or_fewer(remembered, checked["records"])


def _checks_for(store: Store, rules: MatchRules) -> dict[str, Any] | None:
    """What the store's checks measured (:func:`_count_checks`), if they measured it for
    ``rules``' similarity: another similarity's counts are none of its own."""
    checked = (store.settings or {}).get("checked_pairs")
    return checked if checked and checked.get("for") == choice_key(rules) else None


def report_page(
    pairs: Sequence[Pair],
    store: StoreRef = None,
    *,
    grouping: Grouping = "components",
    preset: str | None = None,
    rules: RulesRequest = None,
    measured: Measured | None = None,
    texts: Mapping[str, str] | None = None,
) -> str:
    """A report's pairs as one self-contained HTML page (see :mod:`neardup.html`): summary,
    histogram of similarities with the threshold, groups with their word differences.

    ``measured`` is what the report measured (its :attr:`Report.measured`): the
    page then shows every candidate pair's similarity and how the threshold was chosen; without
    it, the reported pairs' similarities. ``texts`` (by id, :func:`record_texts`) are the
    records' own texts, shown instead of the normalised contents."""
    from .html import HtmlReport, pair_histogram, render  # (2 ms) for the commands that show one

    groups = clusters(pairs, grouping)
    with opened(store) as source:
        chosen = rules_for(source, rules, preset)
        if measured is None:
            measured = Measured(
                pair_histogram([p.similarity for p in pairs]),
                chosen.threshold,
                _threshold_source(source, preset, rules, chosen),
            )
            histogram_of = "reported pairs"
        else:
            histogram_of = "candidate pairs"
        page = HtmlReport(
            store=source.url,
            records=source.count(),
            settings=f"{source.params.describe()}; {chosen.describe()}",
            threshold=measured.threshold,
            threshold_source=measured.how,
            left_out=measured.left_out_text(),
            missed=measured.missed_text(),
            unsure=measured.unsure_text(),
            nearest=measured.nearest,
            histogram=measured.histogram,
            histogram_of=histogram_of,
            pairs=pairs,
            groups=groups,
            contents={
                i: r.content for i, r in source.get([m for group in groups for m in group]).items()
            },
            originals=texts,
        )
    return render(page)


def _threshold_source(
    store: Store, preset: str | None, rules: RulesRequest, applied: MatchRules
) -> str:
    if applied.auto_threshold:
        choice = threshold_choice(store.settings, applied)
        return f"auto: {choice['how']}" if choice else "auto"
    if isinstance(rules, MatchRules) or "threshold" in (rules or {}):
        return "given for this report"
    if preset:
        return f"the {preset} preset's"
    # The records counted only where pairs were judged: the judged threshold's note needs them.
    records = store.count() if (store.settings or {}).get("judged") else None
    if judged := from_judged_pairs(store.settings, applied, records):
        return judged
    if "threshold" in ((store.settings or {}).get("rules") or {}):
        return "the one the store was indexed for"
    return "the default"


def record_texts(
    paths: str | Path | Sequence[str | Path],
    ids: Iterable[str],
    *,
    format: Format | None = None,
    id_field: str | None = None,
    text_fields: Sequence[str] = (),
    encoding: str | None = None,
    store: StoreRef = None,
) -> dict[str, str]:
    """The texts of some records as the files the store was indexed from have them (not
    normalised), by id: for reports that people read. Only the ``ids`` asked for are kept in
    memory. Each is checked against the content ``store`` holds under its id: another file's
    texts beside a report's pairs would show records it never compared."""
    wanted = set(ids)
    indexed_with = _fields_indexed_with(store)
    paths = [paths] if isinstance(paths, str | Path) else list(paths)
    readers = _readers(paths, format, id_field, text_fields, encoding, indexed_with)
    # The last of a repeated id, as stored, or each under its numbered id where the report
    # names those; a folder of record files read as index read it.
    numbering = IndexSummary()
    read = {
        r.id: r
        for reader in readers
        for batch in batches(reader, DEFAULT_BATCH_SIZE)
        for r in _as_kept(batch, numbering, wanted)
        if r.id in wanted
    }
    if damaged := next((reader for reader in readers if reader.damaged), None):
        raise NeardupError(
            f"{file_name(damaged.path)} is {damaged.damaged}: the texts of the records after "
            "it are lost; give a whole copy of it"
        )
    with opened(store) as source:
        held = {i: r.content for i, r in source.get(sorted(read)).items()}
        normalization = source.params.normalization if held else NORMALIZATION
    records = [r for r in read.values() if r.id in held]
    if other := _other_texts(records, held, normalization):
        first = records[min(other)]
        raise _another_text(first.source or paths[0], first.line, first.id)
    return {i: r.text for i, r in read.items()}


KEEPS = ("first", "longest")


@dataclass
class DedupSummary:
    read: int = 0
    written: int = 0
    removed: int = 0
    groups: int = 0
    keep: str = "first"
    skipped: SkipLog = field(default_factory=SkipLog)
    # the kept records of the file's groups that the file does not hold: another file's
    kept_elsewhere: list[str] = field(default_factory=list)
    path: str = ""
    no_record: int = 0  # rows of no id or no text, which no group holds: written as they are

    def describe(self) -> str:
        elsewhere = ""
        if held := self.kept_elsewhere:
            elsewhere = (
                f"; for {counted(len(held), 'group')} that is a stored record {self.path} does "
                f"not hold, as another file's: {', '.join(map(repr, held[:3]))}"
                + (", …" if len(held) > 3 else "")
            )
        as_they_are = ""
        if self.no_record:
            as_they_are = f" ({counted(self.no_record, 'row')} with no id or no text, as it was)"
        return (
            f"read {self.read:,}, wrote {self.written:,}{as_they_are}, removed "
            f"{counted(self.removed, 'near-duplicate')} from {counted(self.groups, 'group')} "
            f"(kept the {self.keep} record of each{elsewhere}); "
            f"skipped {self.skipped.summary()}"
        )


def dedup(
    path: str | Path,
    out: IO[str],
    store: StoreRef = None,
    *,
    format: Format | None = None,
    id_field: str | None = None,
    text_fields: Sequence[str] = (),
    encoding: str | None = None,
    keep: str = "first",
    grouping: Grouping = "components",
    preset: str | None = None,
    rules: RulesRequest = None,
    written_as: Format | None = None,
) -> DedupSummary:
    """Write the records of ``path`` to ``out`` in the file's own format (or ``written_as``: a
    tsv or csv file's fields as csv, tsv or jsonl), one record per group of near-duplicates in the
    store: the group's first id (``keep="first"``) or the one with the longest content
    (``"longest"``). Records in no group are written as they are.

    A store holds normalised contents, not the records: the file is read again, with the reader
    settings it was indexed with, so every field of a kept record is written as it was."""
    if keep not in KEEPS:
        raise NeardupError(f"keep must be one of {', '.join(KEEPS)}, not {keep!r}")
    if path != STDIN and Path(path).is_dir():
        raise NeardupError(
            f"{path} is a folder: dedup writes one record file back, and a folder's files are "
            "left as they are; report --clusters lists its groups of near-duplicates"
        )
    indexed_with = _fields_indexed_with(store)
    # Every row, a row of no record too: no group holds it, so it is written as it is.
    reader = _readers(
        [path], format, id_field, text_fields, encoding, indexed_with, every_row=True
    )[0]
    written_as = written_as or reader.format
    objects = {written_as, reader.format} <= {"json", "jsonl"}  # an array's, or one a line
    if written_as != reader.format and reader.format not in ("tsv", "csv") and not objects:
        raise NeardupError(
            f"the records of a {reader.format} file are written back as {reader.format}, "
            f"not {written_as}: name the output .{reader.format}"
        )
    try:
        with opened(store) as source:
            groups = clusters(report(source, preset=preset, rules=rules), grouping)
            stored = source.get([member for group in groups for member in group])
            normalization = source.params.normalization
    except NoStore as exc:  # one command where a user with one file expects it
        into = f" --store {shlex.quote(store)}" if isinstance(store, str) else ""
        raise NoStore(
            exc.missing,
            f"dedup writes a file back by the groups of the store it was indexed into: "
            f"neardup index {shlex.quote(str(path))}{into} first",
        ) from None
    grouped = {i: r.content for i, r in stored.items()}
    kept_of: dict[str, str] = {}  # each grouped id: the id its group keeps
    longest = keep == "longest"
    for group in groups:
        kept = max(group, key=lambda i: len(grouped.get(i, ""))) if longest else group[0]
        kept_of.update(dict.fromkeys(group, kept))
    removed = {member for member, kept in kept_of.items() if member != kept}
    summary = DedupSummary(keep=keep, skipped=reader.skipped, path=file_name(path))
    misread: dict[str, int] = {}  # ids read with a text the store does not hold: first line
    read_as_held: set[str] = set()
    first_ids: list[str] = []  # the first batch's: whether the store holds them at all
    numbering = IndexSummary()  # the ids an index run that kept repeated ids gave them
    with record_writer(written_as, reader, out) as write:
        for rows in batches(reader, DEFAULT_BATCH_SIZE):
            places = [place for place, row in enumerate(rows) if row.text]  # rows of a record
            batch = [rows[place] for place in places]
            records = _as_kept(batch, numbering, grouped)  # as the store holds them
            stored_as = dict(zip(places, records, strict=True))
            other = {places[p] for p in _other_texts(records, grouped, normalization)}
            first_ids = first_ids or [r.id for r in batch]
            for place, record in enumerate(rows):
                summary.read += 1
                as_stored = stored_as.get(place)
                if as_stored is None:  # in no group
                    summary.no_record += 1
                elif place in other:  # not the record the store's groups are of: as it is
                    misread.setdefault(as_stored.id, record.line)
                elif as_stored.id in grouped:
                    read_as_held.add(as_stored.id)
                    if as_stored.id in removed:
                        summary.removed += 1
                        continue
                write(record)
                summary.written += 1
    if stray := sorted((line, i) for i, line in misread.items() if i not in read_as_held):
        raise _another_text(path, *stray[0])
    if reader.damaged:  # the file written back would lack every record after the damage
        raise NeardupError(
            f"{file_name(reader.path)} is {reader.damaged}: not written back, as the records "
            "after it are lost; dedup a whole copy of it"
        )
    kept_here = {kept_of[i] for i in read_as_held}  # the groups of the file's records
    summary.groups = len(kept_here)
    summary.kept_elsewhere = sorted(kept_here - read_as_held, key=natural_key)
    if groups and not read_as_held and not misread and not _holds_any(store, first_ids):
        raise NeardupError(
            f"none of the records of {path} are in the store: read it with the settings it "
            "was indexed with (--format, --id-field)"
        )
    return summary


def _as_kept(
    records: list[Record], numbering: IndexSummary, wanted: Container[str]
) -> list[Record]:
    """``records`` under the ids the store holds them by: a repeat of an id under the
    numbered id an index run that kept repeats gave it (``5#2``: :func:`index`'s
    ``on_duplicate_id="keep"``), where that id is ``wanted`` (a group's, a report's); else as
    read (a repeat that replaced the earlier record is stored under the id itself)."""
    numbered = numbering.admit(records, "keep").records
    return [
        kept if kept is not None and kept.id != record.id and kept.id in wanted else record
        for record, kept in zip(records, numbered, strict=True)
    ]


def _holds_any(store: StoreRef, ids: Sequence[str]) -> bool:
    """Whether the store holds any of ``ids``: a file in none of its groups is either one
    without near-duplicates or one read with other ids than it was indexed with."""
    with opened(store) as source:
        return bool(source.get(ids))


def _another_text(path: str | Path, line: int, record_id: str) -> NeardupError:
    """The error of a file whose record at ``line`` is not the text the store holds under its
    id."""
    return NeardupError(
        f"{path}, line {line}: the store holds another text under the id {record_id!r}: "
        "give the file the store was indexed from (with its --format, --id-field and "
        "--text-field), or index this one"
    )


def _other_texts(
    records: list[Record], contents: Mapping[str, str], normalization: int
) -> set[int]:
    """The places in ``records`` of those whose text is not the content the store holds under
    their id (``contents``, of the records in its groups): a record a later one of the same id
    replaced in the store, or a file other than the one indexed, or edited since."""
    held = [place for place, record in enumerate(records) if record.id in contents]
    normalized = normalize_batch([records[place].text for place in held], normalization)
    return {
        place
        for place, content in zip(held, normalized, strict=True)
        if content != contents[records[place].id]
    }


@dataclass
class Deleted:
    """What :func:`delete` did: how many records it removed, and the ids given that the store
    did not hold (a typing slip, or a record deleted before), in the order given."""

    removed: int
    missing: list[str]

    def describe(self) -> str:
        given = self.removed + len(self.missing)
        named = ", ".join(map(repr, self.missing[:5])) + (", …" if len(self.missing) > 5 else "")
        return f"deleted {self.removed:,} of {counted(given, 'id')}" + (
            f"; not in the store: {named}" if self.missing else ""
        )


def delete(ids: Sequence[str], store: StoreRef = None, *, few: bool = False) -> Deleted:
    """Remove records by id; later lookups and reports no longer see them. A threshold read
    from the records is read again from those left, as after an index run; ``few`` deletes
    (the service's, one a request) keep it until the store has halved, as its adds keep it
    until the store has doubled."""
    wanted = list(dict.fromkeys(ids))
    with opened(store) as target:
        held = target.get(wanted)
        removed = target.delete(wanted)
        target.flush()
        if removed and few:
            _forget_choice_if(target, _doubled_or_halved)
        elif removed:
            _forget_read_choice(target)
        return Deleted(removed, [i for i in wanted if i not in held])


def evaluate(
    truth: str | Path,
    *,
    report_file: str | Path | None = None,
    store: StoreRef = None,
    preset: str | None = None,
    rules: RulesRequest = None,
    plot_file: str | Path | None = None,
    encoding: str | None = None,
) -> Evaluation:
    """Precision and recall of a report against a file of true pairs (in ``encoding``, UTF-8
    without it). The report is ``report_file``, else a fresh report of ``store``; ``plot_file``
    draws them over thresholds, and a fresh report's candidate similarities with the threshold
    it applied."""
    # A truth file's first line is a pair where both its cells are ids: the store's, or the
    # report file's, where there is no store to ask.
    measured = None
    if report_file is not None:
        reported = read_pairs(report_file)
        ids = {i for pair in reported for i in pair}
        true_pairs = read_pairs(truth, lambda cells: set(cells) <= ids, encoding)
    else:
        with opened(store) as source:
            reported_pairs = report(source, preset=preset, rules=rules)
            reported, measured = pairs_of(reported_pairs), reported_pairs.measured
            true_pairs = read_pairs(
                truth, lambda cells: len(source.get(cells)) == len(cells), encoding
            )
    result = score(true_pairs, reported, measured.threshold if measured else None)
    if plot_file is not None:
        drawn = (measured.histogram, measured.threshold) if measured else (None, None)
        plot(result, plot_file, *drawn)
    return result


def tune(threshold: float, num_hashes: int = FingerprintParams().num_hashes) -> Tuning:
    """Every bands x rows split of ``num_hashes`` with its S-curve around ``threshold``, and the
    recommended one (what ``index --threshold`` chooses)."""
    return tune_bands(check_threshold(threshold), check_num_hashes(num_hashes))


def generate(
    count: int,
    output: str | Path,
    truth: str | Path | None = None,
    *,
    kind: Kind = "documents",
    seed: int = 1,
    words: int = 80,
    duplicates: float | None = None,
) -> tuple[int, int]:
    """Write a synthetic corpus of ``kind`` (documents, or people's records) with known
    near-duplicates (and its true pairs); returns (records, true pairs). ``duplicates``: the
    share of copies (default: 0.3 of documents, 0.1 of people)."""
    return write_corpus(
        output, truth, count, kind=kind, seed=seed, words=words, duplicates=duplicates
    )


def stats(store: StoreRef = None) -> dict[str, object]:
    """What the store holds, and the settings it was indexed with."""
    with opened(store) as source:
        params = source.read_params()
        # Not rules_for: stats reads the store and never measures it.
        in_effect = match_rules(params, source.settings) if params else None
        documents = source.count()
        return {
            "store": source.url,
            "documents": documents,
            "parameters": params.to_dict() if params else None,
            "rules": (source.settings or {}).get("rules"),  # what index remembered, if anything
            # the fields index runs named, which files read without naming theirs are read with
            "named_fields": (source.settings or {}).get("named_fields"),
            "rules_in_effect": remembered_rules(in_effect) if in_effect else None,
            "rules_from": rule_sources(source.settings, in_effect, documents)
            if in_effect
            else None,
        }


def export(out: IO[str], store: StoreRef = None, *, format: ReportFormat = "jsonl") -> int:
    """Write every record of the store to ``out`` as a record file of ``id`` and ``content``
    (its normalised text, which indexes again to the same fingerprint), in id order, as one
    state of the store; returns how many. What moves a store to another one or to another
    engine: no store keeps its token fields where an engine's own copy (Elasticsearch's
    ``_reindex``) would carry them, and records added through the service are in no file."""
    with opened(store) as source, source.snapshot():
        records = ((r.id, r.content) for batch in source.iter_records() for r in batch)
        return write_records(records, out, format)


def apply_schema(store: StoreRef = None) -> str:
    """Create the store's schema, or add the fields an existing one lacks; returns the store URL."""
    with opened(store, create=True) as target:
        target.apply_schema()
        return target.url


def check_api_key(api_key: str | None) -> str | None:
    """A service's key: None serves without one; an empty one is refused, not taken for none."""
    if api_key is not None and not api_key:
        raise InvalidParameter(
            "the API key is empty, which would let anyone in: give a key, or none to serve "
            "without one"
        )
    return api_key


@dataclass
class Demo:
    store: str  # where the sample is indexed, kept for the user's own lookups
    summary: IndexSummary
    pairs: list[Pair]
    groups: list[list[str]]
    originals: dict[str, str]  # each record's text as the sample file has it
    looked_up: str  # the id of the record the demo looks up
    matches: list[Match]
    page: str  # the report as an HTML page


DEMO_STORE_URL = "sqlite:///neardup-demo.db"


def demo(store: StoreRef = None) -> Demo:
    """Index the bundled sample into ``store`` (default: ``neardup-demo.db`` in the current
    folder, made afresh and kept), report it (pairs, groups, an HTML page), and look up the
    first record of its largest group."""
    if store is None:
        store = DEMO_STORE_URL
        with open_store(store) as old:
            old.drop()
    originals = {r.id: r.text for r in RecordReader(SAMPLE)}
    with opened(store, create=True) as target:
        _refuse_a_store_of_other_records(target, originals)
        summary = index([SAMPLE], target)
        pairs = report(target)
        groups = clusters(pairs)
        looked_up = groups[0][0]
        matches = lookup(target, id=looked_up)
        page = report_page(pairs, target, measured=pairs.measured)
        return Demo(target.url, summary, pairs, groups, originals, looked_up, matches, page)


def _refuse_a_store_of_other_records(target: Store, sample: Container[str]) -> None:
    """Stop before the demo adds its sample to a store of the user's own records: its report
    would be of both, and the store would keep the sample's records."""
    if held := _held_besides(target, sample):
        raise NeardupError(
            f"{target.url} holds {counted(len(held), 'record')} that are not the demo's "
            f"(such as {min(held)!r}): the demo indexes its sample into a store of its own: "
            "leave --store out, or give a new one"
        )
