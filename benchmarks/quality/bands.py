"""Which records get 4-row bands: for each dataset, the mean normalised length of the first
1,000 records (as many from each source), how many pairs of them 2-row bands put in one bucket
per pair of them, and the bands `neardup index` chose for the whole set.

    python benchmarks/quality/bands.py --data DIR [--kijiji ADS.tsv PAIRS.tsv]
        [--documents ADS.tsv]

Records of LONG_TEXT characters or more whose 2-row buckets hold TEMPLATED pairs per pair or
more get 32 bands of 4 rows (neardup.settings.default_bands); every other set 64 of 2.
``--documents`` adds the documents `make bench-speed` grows from the ads (with the character
5-grams of its row of no preset too), and documents of `neardup generate`.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import candidates
from common import write_records
from public import Dataset

from neardup import api
from neardup.fingerprint import normalize_batch, parse_shingle
from neardup.generate import write_corpus
from neardup.readers import Record
from neardup.settings import BAND_SAMPLE, band_sample, two_row_bucket_pairs


def first_records(data: Dataset) -> list[str]:
    """The texts `neardup index` reads to measure: the first BAND_SAMPLE records, as many from
    each source (it measures those with words)."""
    sources: dict[str, list[str]] = {}
    for record in data.records:
        source = data.sources[record.id] if data.sources else ""
        sources.setdefault(source, []).append(record.text)
    each = max(1, BAND_SAMPLE // len(sources))
    return [text for texts in sources.values() for text in texts[:each]]


def measured(data: Dataset, shingle: str = "char:4") -> tuple[float, float | None, int]:
    kind, size = parse_shingle(shingle)
    asked = {"shingle_kind": kind, "shingle_size": size}
    sample = band_sample(normalize_batch(first_records(data)))
    bucket_pairs = two_row_bucket_pairs(asked, sample)  # short records' too, unlike index
    mean = sum(map(len, sample)) / len(sample)
    with tempfile.TemporaryDirectory() as folder:
        files = write_records(data.records, Path(folder), data.sources)
        url = f"sqlite:///{Path(folder) / 's.db'}"
        api.index(files, url, id_field="id", text_fields=["text"], params={"shingle": shingle})
        bands = api.stats(url)["parameters"]["bands"]
    return mean, bucket_pairs, bands


def generated_documents() -> Dataset:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "documents.tsv"
        write_corpus(path, None, 20_000, kind="documents")
        lines = path.read_text(encoding="utf-8").splitlines()[1:]
    return Dataset([Record(*line.split("\t", 1)) for line in lines], set())


def grown_documents(ads: Path) -> Dataset:
    """The documents `make bench-speed` grows from the ads (benchmarks/speed.py)."""
    sys.path.insert(0, str(Path(__file__).parents[1]))
    from speed import corpus

    return Dataset([Record(f"d{n}", t) for n, t in enumerate(corpus(ads, 20_000))], set())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    candidates.add_arguments(parser)
    parser.add_argument("--documents", type=Path, metavar="ADS")
    args = parser.parse_args()
    parts: list[tuple[str, Callable[[], Dataset], str]] = [
        (name, load, "char:4") for name, load in candidates.datasets(args)
    ]
    if args.documents:
        grown = "20,000 documents grown from the ads (make bench-speed)"
        for shingle in ("char:4", "char:5"):  # no flags; its row of no preset
            parts.append((grown, lambda: grown_documents(args.documents), shingle))
        generated = "20,000 generated documents (neardup generate)"
        parts.append((generated, generated_documents, "char:4"))
    print("| data | shingles | mean length | 2-row bucket pairs per pair | bands |")
    print("| --- | --- | --- | --- | --- |")
    for name, load, shingle in parts:
        mean, bucket_pairs, bands = measured(load(), shingle)
        shared = "-" if bucket_pairs is None else f"{bucket_pairs:.3f}"
        print(f"| {name} | {shingle} | {mean:.0f} | {shared} | {bands} |", flush=True)


if __name__ == "__main__":
    main()
