"""The ``neardup`` command: each command parses its flags, makes one :mod:`neardup.api` call and
prints the result (:mod:`neardup.output`). Nothing else happens here."""

from __future__ import annotations

import argparse
import gc
import ipaddress
import json
import logging
import os
import shlex
import sqlite3
import sys
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import IO, Any, NoReturn

from . import api, output
from .errors import NeardupError, NoStore, StoreUnavailable, UnknownRecord
from .memory import keep_freed_memory
from .phrases import counted
from .searcher import natural_key

Command = Callable[[argparse.Namespace], int]
# Exit statuses, as grep has them: a lookup that finds nothing is 1, an error is 2.
NOTHING_FOUND, FAILED = 1, 2
_COMMANDS: dict[str, Command] = {}
DEMO_PAGE = "neardup-demo.html"
RULE_FLAGS = ("method", "candidates", "first_word", "threshold", "max_edit_distance", "similarity")
PARAM_FLAGS = ("shingle", "num_hashes", "bands", "seed", "fields")
# Allocations between two collections of the youngest objects (Python's default: 700). A run
# makes hundreds of thousands of objects that hold no reference cycles (records, fingerprints,
# rows); scanning them as they came cost ~4% of indexing 20,000 ads. Cycles are still
# collected, only less often.
GC_THRESHOLD = 100_000


def _threshold(value: str) -> float | str:
    """A --threshold: ``auto`` or a number."""
    if value == api.AUTO:
        return value
    try:
        return float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"use auto or a number, not {value!r}") from None


class _Once(argparse.Action):
    """A lookup's record, given once: given twice, the first was dropped without a word."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:  # fmt: skip
        if getattr(namespace, self.dest) is not None:
            raise argparse.ArgumentError(
                self, "given twice: a lookup is of one record; --file looks up a file's records"
            )
        setattr(namespace, self.dest, values)


def _given(args: argparse.Namespace, names: Sequence[str]) -> dict[str, Any]:
    """The flags among ``names`` that the user gave (argparse leaves the others None, and
    has none of those a command does not take)."""
    return {name: value for name in names if (value := getattr(args, name, None)) is not None}


# --- options shared by several commands -----------------------------------------------------------


def _store_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--store", help=f"store URL (default: $NEARDUP_STORE, else {api.DEFAULT_STORE_URL})"
    )


def _preset_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--preset",
        choices=list(api.PRESETS),
        help="settings for a kind of data: "
        + "; ".join(f"{p.name}: {p.purpose}" for p in api.PRESETS.values())
        + " (flags given as well win)",
    )


# What --threshold means where a command reads the store's own (every one but link).
THRESHOLD_HELP = (
    "least similarity of a near-duplicate, or auto: read from the similarities of every "
    "candidate pair (the valley between their humps) by the first command that needs it, and "
    "remembered until an index run changes the records (default: what the store was indexed "
    "for, else auto; 0 turns it off; with no valley, where the pairs' tail thins out; with too "
    f"few pairs, {api.FALLBACK_THRESHOLD})"
)


def _rule_options(
    parser: argparse.ArgumentParser,
    threshold_help: str = THRESHOLD_HELP,
    candidates: int | None = api.MatchRules().candidates,
) -> None:
    """The match rules' flags; ``--candidates`` where the command looks records up (a default
    of None: a report's, which lists every pair at or above its threshold, with no such cap)."""
    defaults = api.MatchRules()
    _preset_option(parser)
    parser.add_argument(
        "--method",
        choices=list(api.TOKEN_FIELDS),
        help="the token field the candidate query ORs over: the MinHash signature, LSH bands "
        "or the shingles (default: what the store was indexed for, else the first of these "
        "it indexes)",
    )
    if candidates is not None:
        parser.add_argument(
            "--candidates",
            type=int,
            help=f"distinct candidates a lookup fetches and measures (default: {candidates})",
        )
    parser.add_argument(
        "--first-word",
        action="store_true",
        default=None,
        help="only consider candidates with the same first word",
    )
    parser.add_argument("--threshold", type=_threshold, help=threshold_help)
    parser.add_argument(
        "--similarity",
        choices=api.SIMILARITIES,
        help="what the threshold bounds: jaccard of the shingle sets; weighted, their cosine "
        "with each shingle weighing its rarity in the store (IDF), for records whose copies "
        "differ in their numbers (amounts, dates); or numerals, that cosine times the "
        "agreement of the records' runs of digits, where numbers name things (house, model, "
        f"page numbers) (default: {defaults.similarity})",
    )
    parser.add_argument(
        "--max-edit-distance", type=int, help="most word-level edit distance (default: no limit)"
    )


def _reader_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--format", choices=api.FORMATS, help="file format (default: from the name)"
    )
    parser.add_argument(
        "--id-field",
        help="column or key holding the id (default: 'id' if present, or 'ID' or 'Id', or "
        "'_id', else the record number)",
    )
    parser.add_argument(
        "--text-field",
        action="append",
        default=[],
        dest="text_fields",
        help="column or key holding text; repeat to join several (default: every field but the "
        "id, leaving out fields of URLs or times of day; the summary names them)",
    )
    _encoding_option(parser)


def _texts_from_options(parser: argparse.ArgumentParser, what: str) -> None:
    """--texts-from, with the fields to read its records by."""
    parser.add_argument(
        "--texts-from",
        metavar="FILE",
        action="append",
        help=f"the record file the store was indexed from (once per file, for several): {what}",
    )
    parser.add_argument("--id-field", help="with --texts-from: as when indexing")
    parser.add_argument(
        "--text-field",
        action="append",
        default=[],
        dest="text_fields",
        help="with --texts-from: as when indexing",
    )


def _encoding_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--encoding",
        help="the files' character encoding, such as windows-1252 (a spreadsheet's plain CSV "
        "on Windows) or latin-1 (default: utf-8, or UTF-16 or UTF-32 where a file starts "
        "with its byte order mark; what neardup writes is UTF-8)",
    )


def _grouping_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--grouping",
        choices=api.GROUPINGS,
        default="components",
        help="components (a chain of pairs is one group) or center (every member a "
        "near-duplicate of its group's first id); default: components",
    )


def _rules(args: argparse.Namespace) -> dict[str, Any]:
    return {"preset": args.preset, "rules": _given(args, RULE_FLAGS)}


def command(name: str) -> Callable[[Command], Command]:
    """Register a command; its docstring is its help."""

    def register(run: Command) -> Command:
        _COMMANDS[name] = run
        return run

    return register


# --- commands -------------------------------------------------------------------------------------


@command("index")
def _index(args: argparse.Namespace) -> int:
    """Index record files into a store."""
    summary = api.index(
        args.files,
        args.store,
        format=args.format,
        id_field=args.id_field,
        text_fields=args.text_fields,
        encoding=args.encoding,
        preset=args.preset,
        params=_given(args, PARAM_FLAGS),
        threshold=args.threshold,
        similarity=args.similarity,
        batch_size=args.batch_size,
        on_duplicate_id=args.on_duplicate_id,
        skip_duplicates=args.skip_duplicates,
        progress=sys.stderr.isatty(),
        like=args.like,
    )
    if args.json:
        print(json.dumps(summary.as_dict(), indent=2))
    else:
        print(summary.describe(), file=sys.stderr)
    if summary.damaged:  # what could be read is stored; the exit status says the rest
        return _damaged(summary.damaged, "the records before it are indexed")
    if summary.read and summary.unread == summary.read:  # a script's next step fails
        none = (
            "the one record read could not"
            if summary.read == 1
            else f"none of the {summary.read:,} records read could"
        )
        print(
            f"neardup: error: {none} be indexed (see why above): read the files with their "
            "--format, --id-field and --text-field",
            file=sys.stderr,
        )
        return FAILED
    return 0


def _damaged(damaged: list[str], done: str) -> int:
    """One error line for each damaged file, saying what was done with the records before the
    damage; the exit status of a run that read only part of its input."""
    for damage in damaged:
        print(f"neardup: error: {damage}: {done}", file=sys.stderr)
    return FAILED


@command("lookup")
def _lookup(args: argparse.Namespace) -> int:
    """Find the stored duplicates of a record, of a new text, or of every record of a file."""
    if args.file:
        with (
            _output_file(args.output) as out,
            output.file_matches_writer(out, _matches_format(args)) as write,
        ):
            looked_up = api.lookup_file(
                [args.file],
                args.store,
                format=args.format,
                id_field=args.id_field,
                text_fields=args.text_fields,
                encoding=args.encoding,
                collapse=args.collapse_copies,
                each=write,
                **_rules(args),
            )
        print(looked_up.describe(), file=sys.stderr)
        if looked_up.damaged:
            return _damaged(looked_up.damaged, "the records before it are looked up")
        return 0 if looked_up.lines else NOTHING_FOUND
    text = api.standard_input().read() if args.text == "-" else args.text
    record = args.id or args.given_id
    try:
        matches = api.lookup(
            args.store, id=record, text=text, collapse=args.collapse_copies, **_rules(args)
        )
    except UnknownRecord as unknown:
        if args.given_id and Path(args.given_id).is_file():
            hint = f"; a file's records are looked up with --file {shlex.quote(args.given_id)}"
            raise UnknownRecord(f"{unknown}{hint}") from None
        raise
    print(output.matches_json(matches) if args.json else output.match_table(matches))
    return 0 if matches else NOTHING_FOUND


@command("link")
def _link(args: argparse.Namespace) -> int:
    """Link a file's records one to one with a store's: each with its mutual best match."""
    linked = api.link(
        args.files,
        args.store,
        format=args.format,
        id_field=args.id_field,
        text_fields=args.text_fields,
        encoding=args.encoding,
        linked_id_field=args.linked_id_field,
        linked_text_fields=args.linked_text_fields,
        **_rules(args),
    )
    written_as = _matches_format(args)
    with _output_file(args.output) as out:
        output.write_file_matches(linked.links, out, written_as)
    if linked.indexed:
        print(linked.indexed.describe(), file=sys.stderr)
    written = f"; written to {args.output}" if args.output else ""
    print(f"{linked.describe()}{written}", file=sys.stderr)
    if linked.damaged:
        return _damaged(linked.damaged, "the records before it are linked")
    return 0 if linked.links else NOTHING_FOUND


def _matches_format(args: argparse.Namespace) -> output.ReportFormat:
    """How lookup --file and link write their lines: JSON lines with --json, else as the
    output file is named (a .csv opens in a spreadsheet), else TSV."""
    return "jsonl" if args.json else output.named_format(args.output) or "tsv"


@command("explain")
def _explain(args: argparse.Namespace) -> int:
    """Show why two records are or are not near-duplicates: word diff, similarities, verdict."""
    texts = [api.standard_input().read() if text == "-" else text for text in args.texts]
    ids = args.ids + args.id_flags
    found = api.explain(args.store, ids=ids, texts=texts, **_rules(args))
    print(json.dumps(found.as_dict(), indent=2) if args.json else output.explanation_table(found))
    return 0


def _note_untold(untold: Collection[str], files: list[str], instead: str) -> None:
    """Say on stderr that records of the pairs are in none of ``files`` (--texts-from)."""
    if untold:
        print(
            f"neardup: note: {counted(len(untold), 'record')} of the pairs (such as "
            f"{min(untold, key=natural_key)!r}) {'is' if len(untold) == 1 else 'are'} in "
            f"none of {', '.join(files)}: {instead}; give every file the store was indexed from",
            file=sys.stderr,
        )


@command("report")
def _report(args: argparse.Namespace) -> int:
    """Write every near-duplicate pair (or group) in a store."""
    pairs = api.report(args.store, exact=args.exact, progress=sys.stderr.isatty(), **_rules(args))
    texts = None
    if args.texts_from:
        texts = api.record_texts(
            args.texts_from,
            (i for p in pairs for i in (p.left_id, p.right_id)),
            id_field=args.id_field,
            text_fields=args.text_fields,
            encoding=args.encoding,
            store=args.store,
        )
        untold = {i for p in pairs for i in (p.left_id, p.right_id)} - texts.keys()
        _note_untold(untold, args.texts_from, "left without a text")
    # An exact report applies the store's threshold and keeps no histogram of its own.
    measured, threshold = pairs.measured, pairs.threshold
    if args.html:
        page = api.report_page(
            pairs,
            args.store,
            grouping=args.grouping,
            measured=measured,
            texts=texts,
            **_rules(args),
        )
        with _output_file(args.html) as out:
            out.write(page)
        print(f"report page written to {args.html} ({len(page.encode()):,} bytes)", file=sys.stderr)
        if not args.output:
            _print_measured(args, measured, threshold)
            return 0
    written_as = args.format or output.named_format(args.output) or "tsv"
    with _output_file(args.output) as out:
        if args.clusters:
            groups = api.clusters(pairs, args.grouping)
            review = api.for_review(pairs, threshold)
            output.write_clusters(groups, out, written_as, texts, review)
            written = f"{counted(len(groups), 'group')} from {counted(len(pairs), 'pair')}"
        else:
            written = output.write_pairs(pairs, out, written_as, texts, threshold)
            written = counted(written, "pair")
    print(f"{written}{f' written to {args.output}' if args.output else ''}", file=sys.stderr)
    _print_measured(args, measured, threshold)
    return 0


def _print_measured(
    args: argparse.Namespace, measured: api.Measured | None, threshold: float | None
) -> None:
    """The threshold the report applied and how it was chosen (an automatic one with the
    histogram it was read from), and where the time went."""
    if args.exact:
        print(
            f"threshold {threshold:g}: every pair at or above it, not only candidates",
            file=sys.stderr,
        )
        return
    if measured:
        text = output.histogram_text(
            measured.histogram, measured.threshold, measured.how, measured.nearest
        )
        shown = measured.how.startswith(api.AUTO) and measured.readable
        print(text if shown else text.splitlines()[0], file=sys.stderr)
        if left_out := measured.left_out_text():
            print(left_out, file=sys.stderr)
        if missed := measured.missed_text():
            print(missed, file=sys.stderr)
        if unsure := measured.unsure_text():
            print(unsure, file=sys.stderr)
        if measured.seconds:
            print(output.phase_times(measured.seconds), file=sys.stderr)


@command("dedup")
def _dedup(args: argparse.Namespace) -> int:
    """Write a record file back with one record per group of near-duplicates."""
    with _output_file(args.output) as out:
        summary = api.dedup(
            args.file,
            out,
            args.store,
            format=args.format,
            id_field=args.id_field,
            text_fields=args.text_fields,
            encoding=args.encoding,
            keep=args.keep,
            grouping=args.grouping,
            written_as=output.named_format(args.output),
            **_rules(args),
        )
    print(summary.describe(), file=sys.stderr)
    return 0


@command("delete")
def _delete(args: argparse.Namespace) -> int:
    """Remove records by id from a store."""
    ids = list(args.ids)
    if args.file:
        ids += api.ids_in(args.file, args.encoding)
    if not ids:
        raise NeardupError("give the ids to delete, or --file with one id per line")
    print(api.delete(ids, args.store).describe(), file=sys.stderr)
    return 0


@command("export")
def _export(args: argparse.Namespace) -> int:
    """Write every record of a store (id and content) as a file that index reads back."""
    written_as = args.format or output.named_format(args.output) or "jsonl"
    with _output_file(args.output) as out:
        written = api.export(out, args.store, format=written_as)
    where = f" to {args.output}" if args.output else ""
    print(f"{counted(written, 'record')} written{where}", file=sys.stderr)
    return 0


@command("stats")
def _stats(args: argparse.Namespace) -> int:
    """Show what a store holds and the settings it was indexed with."""
    info = api.stats(args.store)
    if args.json:
        print(json.dumps(info, indent=2))
    else:
        print(output.stats_text(info))
    return 0


@command("eval")
def _eval(args: argparse.Namespace) -> int:
    """Measure precision and recall of a report against true pairs."""
    result = api.evaluate(
        args.truth,
        report_file=args.report,
        store=args.store,
        plot_file=args.plot,
        encoding=args.encoding,
        **_rules(args),
    )
    print(json.dumps(result.as_dict(), indent=2) if args.json else output.evaluation_table(result))
    return 0


@command("tune")
def _tune(args: argparse.Namespace) -> int:
    """Choose a store's threshold from its candidate pairs, or LSH bands for a threshold."""
    asked = {
        "--label-sample": args.label_sample,
        "--labels": args.labels,
        "--threshold": args.threshold,
    }
    given = [flag for flag, value in asked.items() if value is not None]
    if len(given) > 1:
        raise NeardupError(f"give one of {', '.join(given)}: each asks tune for another thing")
    if args.label_sample is not None:
        return _label_sample(args)
    if args.texts_from:
        raise NeardupError("--texts-from gives the texts of a --label-sample: give one with it")
    if args.labels:
        tuned = api.tune_with_labels(
            args.labels, args.store, encoding=args.encoding, preset=args.preset
        )
        print(json.dumps(asdict(tuned), indent=2) if args.json else output.label_tuning(tuned))
        return 0
    if args.threshold is None or args.store is not None:  # the store: given, else as for any
        measured = api.tune_store(args.store, preset=args.preset, threshold=args.threshold)
        # With JSON, the line that says how to place a threshold no valley showed (else null).
        as_json = {**asdict(measured), "unsure": measured.unsure_text()}
        print(json.dumps(as_json, indent=2) if args.json else output.store_tuning(measured))
        return 0
    tuning = api.tune(args.threshold, args.num_hashes)
    print(output.tuning_json(tuning) if args.json else output.tuning_table(tuning))
    return 0


def _label_sample(args: argparse.Namespace) -> int:
    """Write pairs for a person to judge, never over pairs judged before."""
    sample = api.label_sample(
        args.store,
        count=args.label_sample,
        preset=args.preset,
        output=args.output,
        format=args.format,
        texts_from=args.texts_from or (),
        id_field=args.id_field,
        text_fields=args.text_fields,
        encoding=args.encoding,
    )
    if args.texts_from:
        _note_untold(sample.untold, args.texts_from, "shown as the store holds them")
    if args.output is None:
        output.write_label_sample(sample, sys.stdout, args.format or "tsv")
    written = f" written to {args.output}" if args.output else ""
    print(
        f"{counted(len(sample.pairs), 'pair')} to judge{written}, drawn from similarity "
        f"{sample.floor:g} up, half of them within 0.15 of the threshold "
        f"{sample.threshold:g} ({sample.how}): write yes or no in each row's same column, "
        "then run neardup tune --labels FILE",
        file=sys.stderr,
    )
    return 0


@command("generate")
def _generate(args: argparse.Namespace) -> int:
    """Write a synthetic corpus with known near-duplicates."""
    records, pairs = api.generate(
        args.count,
        args.output,
        args.truth,
        kind=args.kind,
        seed=args.seed,
        words=args.words,
        duplicates=args.duplicates,
    )
    truth = f" and {counted(pairs, 'true pair')} to {args.truth}" if args.truth else ""
    written = counted(records, "document" if args.kind == "documents" else "record")
    print(f"wrote {written} to {args.output}{truth}", file=sys.stderr)
    return 0


@command("schema")
def _schema(args: argparse.Namespace) -> int:
    """Create a store's core, collection, index or tables, or add the fields it lacks."""
    print(f"schema applied to {api.apply_schema(args.store)}", file=sys.stderr)
    return 0


@command("serve")
def _serve(args: argparse.Namespace) -> int:
    """Serve lookups and adds over HTTP (JSON; OpenAPI documentation at /docs)."""
    key = api.check_api_key(
        args.api_key if args.api_key is not None else os.environ.get("NEARDUP_API_KEY")
    )

    def listening() -> None:
        print(
            f"neardup serves {args.store or api.DEFAULT_STORE_URL} on "
            f"http://{_in_url(args.host)}:{args.port}{' (API key required)' if key else ''}",
            file=sys.stderr,
        )
        if key is None and not _loopback(args.host):
            print(
                f"neardup: warning: {args.host} is reachable from other machines and no API key "
                "is set: anyone who reaches the port can read and change the store (--api-key)",
                file=sys.stderr,
            )
        try:  # a mistyped store name, or an engine down, said now rather than at each request
            api.stats(args.store)
        except NoStore as exc:
            print(
                f"neardup: warning: {exc.missing}: requests answer 503 until records are added "
                "(POST /records, or neardup index)",
                file=sys.stderr,
            )
        except StoreUnavailable as exc:
            print(f"neardup: warning: {exc}: requests answer 503 until it answers", file=sys.stderr)

    from .service import serve  # here: the service's dependencies load only for the service

    def threshold_read(line: str) -> None:
        print(f"neardup: {line}", file=sys.stderr)

    serve(
        args.store,
        host=args.host,
        port=args.port,
        api_key=key,
        listening=listening,
        threshold_read=threshold_read,
    )
    return 0


def _in_url(host: str) -> str:
    """``host`` as a URL writes it: an IPv6 address in brackets."""
    return f"[{host}]" if ":" in host else host


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


@command("demo")
def _demo(args: argparse.Namespace) -> int:
    """Index the bundled sample, print its duplicates and one lookup, and keep the store."""
    result = api.demo(args.store)
    store = f"--store {result.store}"
    print(f"Indexed {api.SAMPLE.name} into {result.store}: {result.summary.describe()}\n")
    print(f"{len(result.pairs)} near-duplicate pairs in {len(result.groups)} groups:\n")
    for number, group in enumerate(result.groups, start=1):
        print(f"group {number} ({len(group)} records)")
        for member in group:
            print(f"  {member:>4}  {result.originals[member]}")
    print(f"\nPairs (neardup report {store}):")
    output.write_pairs(result.pairs, sys.stdout)
    print(f"\nDuplicates of record {result.looked_up} (neardup lookup --id {result.looked_up}):")
    print(output.match_table(result.matches))
    first, second = result.groups[0][:2]
    print("\nThe store is kept: these are the commands the demo stands for.\n")
    print(f"  neardup index {api.SAMPLE} {store}")
    print(f"  neardup report {store} --clusters")
    print(f"  neardup lookup --id {result.looked_up} {store}")
    print(f"  neardup explain {first} {second} {store}")
    print(f"  neardup lookup --text {shlex.quote(result.originals[first])} {store}")
    print(f"  neardup report {store} --html {DEMO_PAGE}")
    Path(DEMO_PAGE).write_text(result.page, encoding="utf-8")
    print(f"\nThe report as a page, to open in a browser: {Path(DEMO_PAGE).resolve()}")
    return 0


def _standard_output_as_dash(args: argparse.Namespace) -> None:
    """``-o -`` is standard output, as ``-`` is standard input: it wrote a file named "-",
    which the next command's ``-o -`` replaced. A corpus is written in its name's format."""
    if getattr(args, "output", None) != "-":
        return
    if args.command == "generate":
        raise NeardupError("generate writes a file, in the format its name says: give -o its name")
    args.output = None


def _check_outputs(args: argparse.Namespace) -> None:
    """Refuse an output file that cannot be written before any work: a report of a large store
    should not end, minutes later, in an error about a file beside it. Nor one the command
    reads: `report -o neardup.db` replaced the store with its pairs."""
    outputs = ("output", "html", "plot", *(("truth",) if args.command == "generate" else ()))
    written = [path for path in (getattr(args, name, None) for name in outputs) if path]
    if len({Path(path).resolve() for path in written}) < len(written):
        raise NeardupError(f"cannot write {' and '.join(written)}: they name one file")
    read_files = _files_read(args) if written else []
    for path in written:
        target = Path(path)
        folder = target.parent if str(target.parent) else Path(".")
        if target.is_dir():
            raise NeardupError(f"cannot write {path}: it is a folder")
        data = path in (getattr(args, "output", None), getattr(args, "truth", None))
        if data and (asked := output.not_written(path)):  # not a page (--html) or a plot
            page = f"; --html {path} writes one" if "page" in asked and "html" in args else ""
            raise NeardupError(
                f"cannot write {path}: its name asks for {asked}, and neardup writes "
                f"{output.WRITTEN}{page}"
            )
        if read := next((name for f, name in read_files if _same_file(target, f)), None):
            raise NeardupError(f"cannot write {path}: it is {read}, which the command reads")
        if output.is_stream(target):  # written as it is, where no file is made beside it
            if not os.access(target, os.W_OK):
                raise NeardupError(f"cannot write {path}: permission denied")
            continue
        if not folder.is_dir():
            raise NeardupError(f"cannot write {path}: no folder {folder}")
        if not os.access(folder, os.W_OK) or (target.exists() and not os.access(target, os.W_OK)):
            raise NeardupError(f"cannot write {path}: permission denied")


def _files_read(args: argparse.Namespace) -> list[tuple[str, str]]:
    """The files a command reads, each with how an error names it: its record, id, truth and
    report files, and its store's."""
    read = [*(getattr(args, "files", None) or [])]
    read += [getattr(args, name, None) for name in ("file", "report")]
    if args.command == "eval":
        read.append(args.truth)
    named = [(path, path) for path in read if path]
    if "store" in args and args.command != "demo" and (store := api.embedded_file(args.store)):
        named.append((store, f"the store {store}"))
    return named


def _same_file(target: Path, read: str) -> bool:
    try:
        return target.samefile(read)
    except OSError:  # either does not exist
        return False


@contextmanager
def _output_file(path: str | None) -> Iterator[IO[str]]:
    """A report's destination: stdout, or a file replaced whole or not at all
    (:func:`neardup.output.whole_file`)."""
    if path is None:
        yield sys.stdout
        return
    with output.whole_file(path) as out:
        yield out


# --- the parser -----------------------------------------------------------------------------------


def _written_options(
    parser: argparse.ArgumentParser, what: str, default: str, output_help: str = "file to write"
) -> None:
    """-o and --format of a command that writes a file (``what``: the --format help's start;
    ``default``: how the format is chosen without it)."""
    parser.add_argument("-o", "--output", help=f"{output_help} (default: stdout)")
    parser.add_argument(
        "--format", choices=output.REPORT_FORMATS, help=f"{what} (default: {default})"
    )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="neardup", description="Find near-duplicate records and documents with MinHash."
    )
    parser.add_argument("--version", action="version", version=f"neardup {api.__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add(name: str) -> argparse.ArgumentParser:
        doc = (_COMMANDS[name].__doc__ or "").strip()
        return commands.add_parser(name, help=doc[0].lower() + doc[1:].rstrip("."))

    index = add("index")
    index.add_argument(
        "files",
        nargs="+",
        metavar="FILE",
        help="record files (- reads standard input), or folders of documents, one record a file",
    )
    _store_option(index)
    _reader_options(index)
    defaults = api.FingerprintParams()
    index.add_argument(
        "--shingle", help=f"word:N or char:N (new store default: {defaults.shingle})"
    )
    index.add_argument(
        "--num-hashes",
        type=int,
        help=f"signature length K (new store default: {defaults.num_hashes})",
    )
    index.add_argument(
        "--bands",
        type=int,
        help="LSH bands B, dividing K (new store default: tuned for --threshold, else K/2: "
        f"{defaults.bands})",
    )
    index.add_argument("--seed", type=int, help=f"hash seed (new store default: {defaults.seed})")
    index.add_argument(
        "--fields",
        help="token fields to index, comma-separated, each the --method that queries it: "
        f"{', '.join(api.TOKEN_FIELDS)}; fewer fields, smaller and faster stores "
        "(new store default: bands)",
    )
    index.add_argument(
        "--threshold",
        type=_threshold,
        help="least similarity the store is for: a number tunes the bands, and later lookups "
        "and reports use it (default: auto, see report --threshold)",
    )
    index.add_argument(
        "--similarity",
        choices=api.SIMILARITIES,
        help="what the threshold bounds, which later lookups and reports use (see report "
        f"--similarity; default: {api.MatchRules().similarity})",
    )
    _preset_option(index)
    index.add_argument(
        "--like",
        metavar="STORE",
        help="make the new store like STORE: its parameters, the rules its runs remembered and "
        "whether it counts its shingles (with STORE's records from export: the same answers)",
    )
    index.add_argument(
        "--batch-size", type=int, default=api.DEFAULT_BATCH_SIZE, help="records per transaction"
    )
    index.add_argument(
        "--json", action="store_true", help="print the summary as JSON on standard output"
    )
    index.add_argument(
        "--skip-duplicates",
        action="store_true",
        help="store only records with no near-duplicate in the store or earlier in the files "
        "(by the store's rules); the summary counts the others",
    )
    index.add_argument(
        "--on-duplicate-id",
        choices=api.ON_DUPLICATE_ID,
        default="replace",
        help="a record whose id came earlier in the run: replaces the earlier one (counted), "
        "is skipped (counted), is kept under its id numbered, ID#2, ID#3 (counted), or stops "
        "the run before anything is written (default: replace)",
    )

    lookup = add("lookup")
    _store_option(lookup)
    target = lookup.add_mutually_exclusive_group(required=True)
    target.add_argument("given_id", nargs="?", metavar="ID", help="id of a stored record")
    target.add_argument("--id", action=_Once, help="the same, as a flag")
    target.add_argument("--text", action=_Once, help="a new text (-: read it from standard input)")
    target.add_argument(
        "--file",
        action=_Once,
        help="every record of a record file (-: standard input), without adding them",
    )
    _reader_options(lookup)
    lookup.add_argument("-o", "--output", help="with --file: file to write (default: stdout)")
    _rule_options(lookup)
    lookup.add_argument("--json", action="store_true", help="print JSON (with --file: JSON lines)")
    lookup.add_argument(
        "--collapse-copies",
        action="store_true",
        help="each matched content once, with the ids of its other copies (default: every id)",
    )

    link = add("link")
    link.add_argument(
        "files",
        nargs="+",
        metavar="FILE",
        help="the records to link to the store's; with two files, the first is indexed into "
        "the store first (a new store's bands chosen for both) and the second linked to it",
    )
    _store_option(link)
    _reader_options(link)
    link.add_argument(
        "--linked-id-field",
        help="with two files: the second's id field, where it is not --id-field's",
    )
    link.add_argument(
        "--linked-text-field",
        action="append",
        default=[],
        dest="linked_text_fields",
        help="with two files: the second's text field, where they are not --text-field's; "
        "repeat to join several",
    )
    link.add_argument("-o", "--output", help="file to write (default: stdout)")
    _rule_options(
        link,
        "least similarity of a link, or auto: where the similarities of the links dip between "
        "records with a counterpart and records without (Otsu's split), else none "
        "(default: auto; 0 keeps every mutual best match)",
        candidates=api.LINK_CANDIDATES,
    )
    link.add_argument("--json", action="store_true", help="write JSON lines")

    explain = add("explain")
    explain.add_argument("ids", nargs="*", metavar="ID", help="ids of stored records")
    _store_option(explain)
    # As lookup names a stored record; a positional list would take over this flag's values.
    explain.add_argument(
        "--id",
        dest="id_flags",
        action="append",
        default=[],
        help="the id of a stored record, as for lookup (twice for two)",
    )
    explain.add_argument(
        "--text",
        dest="texts",
        action="append",
        default=[],
        help="a new text (twice for two; -: read it from standard input)",
    )
    _rule_options(explain)
    explain.add_argument("--json", action="store_true", help="print JSON")

    report = add("report")
    _store_option(report)
    _written_options(
        report, "of the pairs or groups", "from the -o file's name, .csv, .jsonl or .json, else tsv"
    )
    report.add_argument(
        "--exact",
        action="store_true",
        help="every pair at or above the threshold, from all pairs instead of the candidates: "
        "the same similarity and threshold, to see what the candidates miss (up to a few "
        "hundred thousand short records)",
    )
    report.add_argument("--clusters", action="store_true", help="write groups instead of pairs")
    _grouping_option(report)
    _texts_from_options(
        report, "adds each record's own text (not normalised) to the pairs or groups"
    )
    _encoding_option(report)
    report.add_argument(
        "--html",
        metavar="FILE",
        help="also write the report as one self-contained HTML page (pairs then go only to -o)",
    )
    _rule_options(report, candidates=None)

    dedup = add("dedup")
    dedup.add_argument("file", metavar="FILE", help="the record file the store was indexed from")
    _store_option(dedup)
    _reader_options(dedup)
    dedup.add_argument("-o", "--output", help="file to write (default: stdout)")
    dedup.add_argument(
        "--keep",
        choices=api.KEEPS,
        default="first",
        help="which record of a group to write: its first id, or its longest content "
        "(default: first)",
    )
    _grouping_option(dedup)
    _rule_options(dedup, candidates=None)

    delete = add("delete")
    delete.add_argument("ids", nargs="*", metavar="ID")
    delete.add_argument("--file", help="a file of ids to delete, one per line (-: standard input)")
    _encoding_option(delete)
    _store_option(delete)

    export = add("export")
    _store_option(export)
    _written_options(
        export,
        "of the records",
        "from the -o file's name, .csv, .tsv or .json, else jsonl: contents as they are, where "
        "TSV and CSV cells are made safe for spreadsheets",
    )

    stats = add("stats")
    _store_option(stats)
    stats.add_argument("--json", action="store_true", help="print JSON")

    evaluation = add("eval")
    evaluation.add_argument("--truth", required=True, help="file of true pairs")
    evaluation.add_argument("--report", help="file of reported pairs (default: a fresh report)")
    evaluation.add_argument(
        "--encoding",
        help="the truth file's character encoding, such as windows-1252 (a spreadsheet's plain "
        "CSV on Windows) or latin-1 (default: utf-8)",
    )
    _store_option(evaluation)
    _rule_options(evaluation, candidates=None)
    evaluation.add_argument("--json", action="store_true", help="print JSON")
    evaluation.add_argument("--plot", help="write precision and recall over thresholds to a PNG")

    tune = add("tune")
    tune.add_argument(
        "--store",
        help="measure this store's candidate pairs, show their similarities and choose its "
        "threshold as report --threshold auto does (the one every command applies, unless the "
        "store keeps one given at index or judged: then both are shown), and estimate "
        "the share of the pairs at or above it that the candidates hold (default, without "
        f"--threshold: $NEARDUP_STORE, else {api.DEFAULT_STORE_URL})",
    )
    _preset_option(tune)
    tune.add_argument(
        "--threshold",
        type=float,
        help="show every bands x rows split for this threshold; with --store, what the "
        "store's candidates hold at it (its threshold stays as it is)",
    )
    tune.add_argument(
        "--num-hashes", type=int, default=defaults.num_hashes, help="K (default: %(default)s)"
    )
    tune.add_argument(
        "--label-sample",
        type=int,
        metavar="N",
        help="write about N of the store's candidate pairs for a person to judge (a same "
        "column to fill in with yes or no), half from every similarity, half from around "
        "the threshold read from the data",
    )
    tune.add_argument(
        "--labels",
        nargs="+",
        metavar="FILE",
        help="choose the store's threshold from pairs a person judged (--label-sample's files, "
        "filled in): the one whose F1 they make highest, remembered for every command",
    )
    _written_options(
        tune, "--label-sample's", "by -o's name, else tsv", output_help="--label-sample's file"
    )
    _texts_from_options(
        tune, "with --label-sample: each record's own text to judge (not normalised)"
    )
    tune.add_argument(
        "--encoding",
        help="the character encoding of the --labels or --texts-from files (default: utf-8)",
    )
    tune.add_argument("--json", action="store_true", help="print JSON")

    generate = add("generate")
    generate.add_argument("count", type=int, help="how many records")
    generate.add_argument(
        "-o",
        "--output",
        required=True,
        help="the records: an id and the kind's fields, as the name says (.csv, .jsonl, "
        ".json, .txt: lines of id and text; .gz: compressed), else TSV",
    )
    generate.add_argument(
        "--truth", help="also write the true pairs (.csv, .jsonl, .json; .gz: compressed), else TSV"
    )
    generate.add_argument("--seed", type=int, default=1, help="random seed (default: %(default)s)")
    generate.add_argument(
        "--words",
        type=int,
        default=80,
        help="mean words per document, for documents (default: %(default)s)",
    )
    generate.add_argument(
        "--kind",
        choices=api.KINDS,
        default="documents",
        help="documents (paragraphs of words) or people (name, street, city, state, zip) "
        "(default: %(default)s)",
    )
    generate.add_argument(
        "--duplicates",
        type=float,
        help="share of records that are edited copies (default: 0.3 of documents, 0.1 of people)",
    )

    schema = add("schema")
    actions = schema.add_subparsers(dest="schema_command", required=True, metavar="ACTION")
    _store_option(actions.add_parser("apply", help=_schema.__doc__))

    serve = add("serve")
    _store_option(serve)
    serve.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (default: loopback)"
    )
    serve.add_argument("--port", type=int, default=8000, help="port (default: 8000)")
    serve.add_argument(
        "--api-key",
        help="require this key in an X-API-Key header (default: $NEARDUP_API_KEY, else none)",
    )

    demo = add("demo")
    demo.add_argument("--store", help="store URL (default: a temporary SQLite file)")
    return parser


def _quiet_client_loggers() -> None:
    """Client libraries log failures with tracebacks; the CLI reports them as one line instead."""
    for name in ("elastic_transport", "elasticsearch", "urllib3"):
        logger = logging.getLogger(name)
        logger.addHandler(logging.NullHandler())
        logger.propagate = False


def main(argv: Sequence[str] | None = None) -> int:
    gc.set_threshold(GC_THRESHOLD, *gc.get_threshold()[1:])
    args = _parser().parse_args(argv)
    if args.command != "serve":  # a service runs for days: it gives freed memory back
        keep_freed_memory()
    _quiet_client_loggers()
    try:
        _standard_output_as_dash(args)
        _check_outputs(args)
        code = _COMMANDS[args.command](args)
        _flush_standard_output()
        return code
    except NeardupError as exc:
        print(f"neardup: error: {exc}", file=sys.stderr)
    except sqlite3.Error as exc:
        print(f"neardup: error: SQLite: {exc}", file=sys.stderr)
    except BrokenPipeError:  # the reader went away (`neardup report | head`): not an error
        _drop_unwritten_output()
        return 141
    except OSError as exc:
        named = f": {exc.filename}" if exc.filename else ""
        print(f"neardup: error: {exc.strerror or exc}{named}", file=sys.stderr)
        _drop_unwritten_output()
    except (KeyboardInterrupt, SystemError) as exc:
        if not _interrupted(exc):
            raise
        print("neardup: interrupted; run the same command again to complete it", file=sys.stderr)
        return 130
    return FAILED


def _flush_standard_output() -> None:
    """Write what stdout holds now: on a full disk (`neardup report > pairs.tsv`) this fails
    with an error and exit status 2, where Python's own flush at exit failed after exit 0."""
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        raise
    except OSError as exc:
        _drop_unwritten_output()
        raise NeardupError(f"cannot write standard output: {exc.strerror or exc}") from None


def _drop_unwritten_output() -> None:
    """Point stdout at the null device: what its buffer still holds would fail again at exit,
    with a traceback."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def _interrupted(exc: BaseException | None) -> bool:
    """Whether Ctrl-C caused ``exc``: inside compiled code it arrives as a SystemError whose
    cause is the KeyboardInterrupt."""
    while exc is not None:
        if isinstance(exc, KeyboardInterrupt):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def run() -> NoReturn:
    """The ``neardup`` command: :func:`main`, then an exit without the interpreter's teardown.
    By then every file and store is closed and only the standard streams hold unwritten output;
    freeing the modules' objects one by one took ~25 ms of each process."""
    code = main()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BrokenPipeError:  # as in main: the reader went away
        code = 141
    os._exit(code)


if __name__ == "__main__":
    run()
