"""The ``neardup`` command: a thin layer over :mod:`neardup.api`."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sqlite3
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import IO

from . import api
from .errors import NeardupError
from .evaluate import describe, evaluate, pairs_of, plot, read_pairs
from .fingerprint import FingerprintParams, parse_shingle
from .generate import write_corpus
from .indexer import DEFAULT_BATCH_SIZE
from .presets import PRESETS, preset
from .readers import FORMATS
from .report import REPORT_FORMATS, clusters, write_clusters, write_pairs
from .searcher import METHOD_FIELDS, Match, MatchRules
from .stores import default_store_url
from .tuning import band_choices, candidate_probability, recommend_bands


def _store_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--store",
        default=None,
        help=f"store URL (default: $NEARDUP_STORE, else {default_store_url()})",
    )


def _preset_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--preset",
        choices=list(PRESETS),
        help="settings for a kind of data: "
        + "; ".join(f"{p.name}: {p.purpose}" for p in PRESETS.values())
        + " (flags given as well win)",
    )


def _rule_options(parser: argparse.ArgumentParser) -> None:
    defaults = MatchRules()
    _preset_option(parser)
    parser.add_argument(
        "--method",
        choices=list(METHOD_FIELDS),
        help="candidate query: signature tokens, shingles or LSH bands "
        f"(default: {defaults.method})",
    )
    parser.add_argument(
        "--rows",
        type=int,
        help=f"distinct candidates fetched per record (default: {defaults.rows})",
    )
    parser.add_argument(
        "--first-word",
        action="store_true",
        default=None,
        help="only consider candidates with the same first word",
    )
    parser.add_argument(
        "--threshold",
        type=float,
        help="minimum Jaccard similarity of the shingle sets "
        f"(default: {defaults.threshold}; 0 turns it off)",
    )
    parser.add_argument(
        "--max-edit-distance",
        type=int,
        help="maximum word-level edit distance (default: no limit)",
    )


def _rules(args: argparse.Namespace) -> MatchRules:
    """The preset's rules (or the defaults), with every flag the user gave applied over them."""
    base = preset(args.preset).rules if args.preset else MatchRules()
    given = {
        name: getattr(args, name)
        for name in ("method", "rows", "first_word", "threshold", "max_edit_distance")
        if getattr(args, name) is not None
    }
    if given.get("threshold") == 0:
        given["threshold"] = None
    return replace(base, **given)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="neardup", description="Find near-duplicate records and documents with MinHash."
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    index = commands.add_parser("index", help="index record files into a store")
    index.add_argument("files", nargs="+", metavar="FILE")
    _store_option(index)
    index.add_argument(
        "--format", choices=FORMATS, help="file format (default: from the extension)"
    )
    index.add_argument(
        "--id-field",
        help="column or key holding the id (default: 'id' if present, else the record number)",
    )
    index.add_argument(
        "--text-field",
        action="append",
        default=[],
        dest="text_fields",
        help="column or key holding text; repeat to join several (default: all but the id)",
    )
    index.add_argument("--shingle", help="word:N or char:N (new store default: char:4)")
    index.add_argument("--num-hashes", type=int, help="signature length K (new store default: 128)")
    index.add_argument("--bands", type=int, help="LSH bands B, dividing K (new store default: 32)")
    index.add_argument("--seed", type=int, help="hash seed (new store default: 1)")
    index.add_argument(
        "--fields",
        help="token fields to index, comma-separated: shingles (for --method shingles), "
        "signature (minhash), bands (lsh); fewer fields, smaller and faster stores "
        "(new store default: all three; the presets: bands)",
    )
    index.add_argument(
        "--threshold", type=float, help="pick the bands for this Jaccard threshold (see tune)"
    )
    _preset_option(index)
    index.add_argument(
        "--batch-size", type=int, default=DEFAULT_BATCH_SIZE, help="records per transaction"
    )

    lookup = commands.add_parser("lookup", help="find the stored duplicates of a record or a text")
    _store_option(lookup)
    target = lookup.add_mutually_exclusive_group(required=True)
    target.add_argument("--id", help="id of a stored record")
    target.add_argument("--text", help="a new text")
    _rule_options(lookup)
    lookup.add_argument("--json", action="store_true", help="print JSON")

    report = commands.add_parser("report", help="write every near-duplicate pair (or group)")
    _store_option(report)
    report.add_argument("-o", "--output", help="file to write (default: stdout)")
    report.add_argument("--format", choices=REPORT_FORMATS, default="tsv")
    report.add_argument(
        "--exact",
        action="store_true",
        help="exact Jaccard over all pairs instead of sketches (corpora up to tens of thousands)",
    )
    report.add_argument(
        "--clusters",
        action="store_true",
        help="write groups (connected components) instead of pairs",
    )
    _rule_options(report)

    evaluation = commands.add_parser("eval", help="precision and recall of a report")
    evaluation.add_argument("--truth", required=True, help="file of true pairs")
    source = evaluation.add_mutually_exclusive_group()
    source.add_argument("--report", help="file of reported pairs (default: a fresh report)")
    _store_option(evaluation)
    _rule_options(evaluation)
    evaluation.add_argument("--json", action="store_true", help="print JSON")
    evaluation.add_argument("--plot", help="write precision and recall over thresholds to a PNG")

    tune = commands.add_parser("tune", help="choose LSH bands for a similarity threshold")
    tune.add_argument("--threshold", type=float, required=True)
    tune.add_argument("--num-hashes", type=int, default=FingerprintParams().num_hashes)
    tune.add_argument("--json", action="store_true", help="print JSON")

    generate = commands.add_parser(
        "generate", help="write a synthetic corpus with known near-duplicates"
    )
    generate.add_argument("count", type=int, help="how many documents")
    generate.add_argument("-o", "--output", required=True, help="documents (TSV: id, text)")
    generate.add_argument("--truth", help="also write the true pairs (TSV)")
    generate.add_argument("--seed", type=int, default=1)
    generate.add_argument("--words", type=int, default=80, help="mean words per document")
    generate.add_argument(
        "--duplicates", type=float, default=0.3, help="share of documents that are edited copies"
    )

    stats = commands.add_parser("stats", help="what the store holds")
    _store_option(stats)
    stats.add_argument("--json", action="store_true", help="print JSON")

    schema = commands.add_parser("schema", help="manage a store's schema")
    schema_commands = schema.add_subparsers(dest="schema_command", required=True, metavar="ACTION")
    apply = schema_commands.add_parser(
        "apply", help="create the core, collection, index or tables, or add missing fields"
    )
    _store_option(apply)

    demo = commands.add_parser("demo", help="index the bundled sample and print its duplicates")
    demo.add_argument("--store", default=None, help="store URL (default: a temporary SQLite file)")
    return parser


def _param_overrides(args: argparse.Namespace) -> dict[str, object]:
    """The fingerprint settings a user asked for: the preset's, then the flags given.

    With --threshold and no --bands, the bands are the tuned choice for that threshold.
    """
    overrides: dict[str, object] = preset(args.preset).params.to_dict() if args.preset else {}
    if args.shingle:
        try:
            overrides["shingle_kind"], overrides["shingle_size"] = parse_shingle(args.shingle)
        except ValueError as exc:
            raise NeardupError(str(exc)) from None
    for name in ("num_hashes", "bands", "seed"):
        if getattr(args, name) is not None:
            overrides[name] = getattr(args, name)
    if args.fields:
        overrides["fields"] = tuple(f.strip() for f in args.fields.split(","))
    if args.threshold is not None and args.bands is None:
        num_hashes = int(overrides.get("num_hashes", FingerprintParams().num_hashes))  # type: ignore[call-overload]
        overrides["num_hashes"] = num_hashes
        overrides["bands"] = recommend_bands(args.threshold, num_hashes).bands
    elif args.num_hashes is not None and args.bands is None:
        overrides["bands"] = _bands_for(args.num_hashes)
    return overrides


def _bands_for(num_hashes: int) -> int:
    """Default bands for K hashes: 4 rows per band when K allows it, else one row each."""
    return num_hashes // 4 if num_hashes % 4 == 0 else num_hashes


def _run_index(args: argparse.Namespace) -> int:
    summary = api.index(
        args.files,
        args.store,
        format=args.format,
        id_field=args.id_field,
        text_fields=args.text_fields,
        params=_param_overrides(args),
        batch_size=args.batch_size,
        progress=sys.stderr.isatty(),
    )
    print(summary.describe(), file=sys.stderr)
    return 0


def _match_table(matches: Sequence[Match]) -> str:
    if not matches:
        return "no duplicates found"
    header = f"{'id':<16} {'match':<6} {'edit':>4} {'similarity':>10} {'shared':>6}  content"
    lines = [header]
    for m in matches:
        content = m.content if len(m.content) <= 60 else m.content[:57] + "..."
        lines.append(
            f"{m.id:<16} {'exact' if m.exact else 'near':<6} {m.edit_distance:>4} "
            f"{m.similarity:>10.3f} {m.shared_tokens:>6}  {content}"
        )
    return "\n".join(lines)


def _run_lookup(args: argparse.Namespace) -> int:
    matches = api.lookup(args.store, id=args.id, text=args.text, rules=_rules(args))
    if args.json:
        print(json.dumps([asdict(m) for m in matches], ensure_ascii=False, indent=2))
    else:
        print(_match_table(matches))
    return 0


def _write_report(pairs: list, args: argparse.Namespace, out: IO[str]) -> str:
    if args.clusters:
        groups = clusters(pairs)
        write_clusters(groups, out, args.format)
        return f"{len(groups)} groups from {len(pairs)} pairs"
    write_pairs(pairs, out, args.format)
    return f"{len(pairs)} pairs"


def _run_report(args: argparse.Namespace) -> int:
    pairs = api.report(args.store, rules=_rules(args), exact=args.exact)
    if args.output:
        with open(args.output, "w", encoding="utf-8", newline="") as out:
            written = _write_report(pairs, args, out)
    else:
        written = _write_report(pairs, args, sys.stdout)
    print(f"{written}{f' written to {args.output}' if args.output else ''}", file=sys.stderr)
    return 0


def _run_stats(args: argparse.Namespace) -> int:
    info = api.stats(args.store)
    if args.json:
        print(json.dumps(info, indent=2))
    else:
        for key, value in info.items():
            print(f"{key}: {value}")
    return 0


def _run_eval(args: argparse.Namespace) -> int:
    truth = read_pairs(args.truth)
    reported = (
        read_pairs(args.report)
        if args.report
        else pairs_of(api.report(args.store, rules=_rules(args)))
    )
    result = evaluate(truth, reported)
    if args.plot:
        plot(result, args.plot)
    print(json.dumps(result.as_dict(), indent=2) if args.json else describe(result))
    return 0


def _run_tune(args: argparse.Namespace) -> int:
    if not 0 < args.threshold < 1:
        raise NeardupError(f"threshold must be between 0 and 1, not {args.threshold}")
    choices = band_choices(args.threshold, args.num_hashes)
    best = recommend_bands(args.threshold, args.num_hashes)
    if args.json:
        rows = [asdict(c) | {"recommended": c == best} for c in choices]
        print(json.dumps(rows, indent=2))
        return 0
    points = [0.2, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95]
    print(f"threshold {args.threshold}, {args.num_hashes} hashes: P(candidate) at similarity s")
    print(
        f"{'bands':>5} {'rows':>4} {'FN mass':>8} {'FP mass':>8}  "
        + " ".join(f"{s:>5}" for s in points)
    )
    for c in choices:
        curve = " ".join(
            f"{float(candidate_probability(s, c.bands, c.rows)):>5.2f}" for s in points
        )
        mark = "  <- recommended" if c == best else ""
        masses = f"{c.false_negative_mass:>8.4f} {c.false_positive_mass:>8.4f}"
        print(f"{c.bands:>5} {c.rows:>4} {masses}  {curve}{mark}")
    return 0


def _run_generate(args: argparse.Namespace) -> int:
    documents, pairs = write_corpus(
        args.output,
        args.truth,
        args.count,
        seed=args.seed,
        words=args.words,
        duplicates=args.duplicates,
    )
    truth = f" and {pairs} true pairs to {args.truth}" if args.truth else ""
    print(f"wrote {documents} documents to {args.output}{truth}", file=sys.stderr)
    return 0


def _run_schema(args: argparse.Namespace) -> int:
    print(f"schema applied to {api.apply_schema(args.store)}", file=sys.stderr)
    return 0


def _run_demo(args: argparse.Namespace) -> int:
    sample = Path(__file__).parent / "data" / "sample.txt"
    with tempfile.TemporaryDirectory() as folder:
        store = args.store or f"sqlite:///{Path(folder) / 'demo.db'}"
        with api.opened(store, create=True) as opened_store:
            summary = api.index([str(sample)], opened_store)
            print(f"Indexed {sample.name}: {summary.describe()}\n")
            pairs = api.report(opened_store)
            records = opened_store.get(
                sorted({p.left_id for p in pairs} | {p.right_id for p in pairs})
            )
        groups = clusters(pairs)
        print(f"{len(pairs)} near-duplicate pairs in {len(groups)} groups:\n")
        for number, group in enumerate(groups, start=1):
            print(f"group {number} ({len(group)} records)")
            for member in group:
                print(f"  {member:>4}  {records[member].content}")
        print("\nPairs (neardup report):")
        write_pairs(pairs, sys.stdout)
    return 0


_COMMANDS = {
    "index": _run_index,
    "lookup": _run_lookup,
    "report": _run_report,
    "stats": _run_stats,
    "schema": _run_schema,
    "eval": _run_eval,
    "tune": _run_tune,
    "generate": _run_generate,
    "demo": _run_demo,
}


def _quiet_client_loggers() -> None:
    """Client libraries log failures with tracebacks; the CLI reports them as one line instead."""
    for name in ("pysolr", "elastic_transport", "elasticsearch", "urllib3"):
        logger = logging.getLogger(name)
        logger.addHandler(logging.NullHandler())
        logger.propagate = False


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    _quiet_client_loggers()
    try:
        return _COMMANDS[args.command](args)
    except NeardupError as exc:
        print(f"neardup: error: {exc}", file=sys.stderr)
    except sqlite3.Error as exc:
        print(f"neardup: error: SQLite: {exc}", file=sys.stderr)
    except BrokenPipeError:  # the reader went away (`neardup report | head`): not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except OSError as exc:
        print(
            f"neardup: error: {exc.strerror or exc}: {exc.filename or ''}".rstrip(": "),
            file=sys.stderr,
        )
    except KeyboardInterrupt:
        print("neardup: interrupted; every finished batch is stored", file=sys.stderr)
        return 130
    return 1


if __name__ == "__main__":
    sys.exit(main())
