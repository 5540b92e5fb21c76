"""Public entity-resolution benchmarks, and the naive baseline neardup must at least match.

    python benchmarks/quality/fetch.py --into DIR   # once: git clones of two public repositories
    python benchmarks/quality/public.py --data DIR   # or --restaurant, --cora, --magellan DIR

The data is not part of neardup; each loader reads a dataset as its public repository ships it
(fetch.py gets each at a fixed commit):

- ``--restaurant DIR``: Fodors-Zagat restaurants (864 name + address lines from two guides,
  112 true pairs): ``restaurant.csv`` and ``restaurant_gold.csv`` of the HPI DuDe toolkit, as
  the ``data/`` folder of github.com/jmakr0/Distributed-Entity-Resolution holds them. The
  ``class`` column (the answer) is left out of the text.
- ``--cora DIR``: Cora citations (1,879 references in groups of up to 240, 64,578 true pairs):
  ``cora.tsv`` and ``cora_DPL.tsv`` from the same repository's history (commit d1dabed).
- ``--cddb DIR``: freeDB CDs (9,206 discs of artist, title, category, genre, year and track
  list, 227 true pairs): ``cd_dataset.csv`` and ``cd_dataset_duplicates.csv``, the HPI CDDB
  set as github.com/philipp94831/dysni holds it with repeated disc ids taken out (2f7f890).
- ``--magellan DIR``: DBLP-ACM (4,910 references from two libraries, 2,224 true pairs),
  Abt-Buy (2,173 products with long descriptions, 1,097 pairs), Amazon-Google and
  Walmart-Amazon (software and electronics listings of two shops): ``structured/dblp_acm``,
  ``textual/abt_buy``, ``structured/amazon-google``, ``structured/walmart-amazon``, each
  ``table_a``, ``table_b`` and ``gold`` as Parquet, as github.com/DataReconciliation/BiBlock
  ships the Magellan sets (reading them needs pyarrow); and the dirty versions of the
  structured three (``dirty/dblp-acm``, ``dirty/amazon-google``, ``dirty/walmart-amazon``),
  whose field values are moved into the title at random, as sources that fill fields
  differently do.
- ``--splink DIR``: person records in groups, each record's group its truth (every two records
  of a group a true pair), as github.com/moj-analytical-services/splink_datasets ships them:
  ``fake_1000.csv`` (1,000 people: name, date of birth, city, email; 2,031 true pairs) and
  ``historical_figures_with_errors_50k.parquet`` (50,578 records of 5,156 people of Wikidata,
  in groups of 3 to 21 with errors put in: full name, date of birth, birth place, postcode,
  gender, occupation; 303,961 true pairs). Their derived name columns are left out, as their
  ids and groups are.
  And ``transactions_origin.parquet`` with ``transactions_destination.parquet``: 45,326
  payments as each of two ledgers records them (memo, date, amount; the memos cut or
  reworded, the dates a day or two apart, some amounts changed), a linkage task whose truth
  pairs each payment of one ledger with its own in the other.
- ``--pyjedai DIR``: the SIGMOD 2022 programming contest's product titles as
  github.com/AI-team-UoA/pyJedAI ships them, notebooks (``X1.csv``: 1,661 titles, 2,814 true
  pairs in ``Y1.csv``) and storage devices (``X2.csv``: 1,993 records of name, price, brand,
  description and category, 4,392 true pairs in ``Y2.csv``); and four linkage tasks of its
  clean-clean sets, each a folder of two ``|``-separated sources and their true pairs in
  ``gt.csv``: restaurants of two guides (``D1/rest1.csv``, ``D1/rest2.csv``: 339 and 2,256
  records of name, phone and street, 89 true pairs), and movies, series and the people in
  them as IMDB, TMDB and TVDB list them (``D5/`` IMDB-TMDB, 1,968 true pairs; ``D6/``
  IMDB-TVDB, 1,072; ``D7/`` TMDB-TVDB, 1,095); and, added after the rules were made, software
  as Amazon and Google Products describe it (``D3/amazon.csv``, ``D3/gp.csv``: 1,354 and 3,039
  records of title, description, manufacturer and price, ``#``-separated, 1,103 true pairs)
  and movies as IMDB and DBpedia list them (``D10/imdb.csv``, ``D10/dbpedia.csv``: 27,615 and
  23,182 records of title, people and year, 22,863 true pairs).

For each: neardup with no flags, each preset, ``--similarity weighted`` (the default
similarity without the agreement of the records' runs of digits), and the naive baseline:
word-set Jaccard of every
pair of records that share a word, at the threshold that gives it its best F1 against the truth
(an oracle threshold: the baseline's best case, which no user without labels could pick).

The Magellan sets are linkage tasks: their truth judges only pairs of a record of one source
and a record of the other. Both sources go into one store as two files given to one `neardup
index`, as a user deduplicating both files does, and the pairs between the sources are scored (a
pair within one source is no mistake: the truth says nothing of it), for neardup and the
baseline alike. Every set of two sources (the Magellan sets, the payments, pyJedAI's linked
sets) also gets a row of `neardup link` with no flags, as a user linking the two files runs
it: the first file indexed into a new store, each record of the second paired with its mutual
best match there.
"""

from __future__ import annotations

import argparse
import csv
import io
from collections import defaultdict
from collections.abc import Callable
from functools import partial
from itertools import combinations
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import numpy as np
from common import linked_pairs, reported_pairs

from neardup.evaluate import Scores
from neardup.fingerprint import normalize_batch
from neardup.readers import Record

if TYPE_CHECKING:
    import pandas as pd


class Dataset(NamedTuple):
    records: list[Record]
    truth: set[tuple[str, str]]
    # Each record's source where the truth links two sources (and judges no pair within one).
    sources: dict[str, str] | None = None

    def scored(self, pairs: set[tuple[str, str]]) -> set[tuple[str, str]]:
        """The pairs the truth judges: all of them, or only those between the two sources."""
        if self.sources is None:
            return pairs
        return {(a, b) for a, b in pairs if self.sources[a] != self.sources[b]}


def _pair(a: str, b: str) -> tuple[str, str]:
    return (a, b) if a < b else (b, a)


def _joined(values: list[object]) -> str:
    return " ".join(
        str(v).strip()
        for v in values
        if v is not None and str(v).strip() not in ("", "nan", "<NA>")
    )


def _record(row: dict[str, object], id_key: str = "id", prefix: str = "") -> Record:
    """A record of every field of ``row`` but its id, whose id is ``prefix`` then ``row``'s."""
    return Record(f"{prefix}{row[id_key]}", _joined([v for k, v in row.items() if k != id_key]))


def restaurant(folder: Path) -> Dataset:
    rows = list(csv.DictReader(io.StringIO((folder / "restaurant.csv").read_text())))
    fields = ["name", "addr", "city", "phone", "type"]
    records = [Record(str(n), _joined([row[f] for f in fields])) for n, row in enumerate(rows, 1)]
    gold = csv.reader(io.StringIO((folder / "restaurant_gold.csv").read_text()))
    next(gold)
    truth = {_pair(a.strip(), b.strip()) for _, a, b in gold}
    return Dataset(records, truth)


def cora(folder: Path) -> Dataset:
    rows = list(csv.DictReader(io.StringIO((folder / "cora.tsv").read_text()), delimiter="\t"))
    records = [_record(row) for row in rows]
    lines = (folder / "cora_DPL.tsv").read_text().split("\n")[1:]
    truth = {_pair(*line.split("\t")[:2]) for line in lines if line.strip()}
    return Dataset(records, truth)


def cddb(folder: Path) -> Dataset:
    with (folder / "cd_dataset.csv").open(encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    records = [_record(row) for row in rows]
    with (folder / "cd_dataset_duplicates.csv").open(encoding="utf-8", newline="") as f:
        truth = {_pair(row["firstId"], row["secondId"]) for row in csv.DictReader(f)}
    return Dataset(records, truth)


def magellan(folder: Path) -> Dataset:
    import pandas as pd

    records, sources = [], {}
    for side in ("a", "b"):
        table = pd.read_parquet(folder / f"table_{side}.parquet")
        for values in table.to_dict("records"):
            records.append(_record(values, "_id", side))
            sources[records[-1].id] = side
    gold = pd.read_parquet(folder / "gold.parquet")
    truth = {_pair(f"a{a}", f"b{b}") for a, b in zip(gold["id1"], gold["id2"], strict=True)}
    return Dataset(records, truth, sources)


def grouped(table: pd.DataFrame, fields: list[str]) -> Dataset:
    """Records of ``table``'s ``fields``, every two of one ``cluster`` a true pair."""
    records, groups = [], defaultdict(list)
    for row in table.to_dict("records"):
        records.append(Record(str(row["unique_id"]), _joined([row[f] for f in fields])))
        groups[row["cluster"]].append(records[-1].id)
    truth = {_pair(a, b) for ids in groups.values() for a, b in combinations(ids, 2)}
    return Dataset(records, truth)


def splink_fake(folder: Path) -> Dataset:
    import pandas as pd

    fields = ["first_name", "surname", "dob", "city", "email"]
    return grouped(pd.read_csv(folder / "fake_1000.csv"), fields)


def splink_payments(folder: Path) -> Dataset:
    import pandas as pd

    records, sources, ledgers = [], {}, defaultdict(list)
    for side in ("origin", "destination"):
        table = pd.read_parquet(folder / f"transactions_{side}.parquet")
        for row in table.to_dict("records"):
            values = [row["memo"], row["transaction_date"], row["amount"]]
            records.append(Record(f"{side[0]}{row['unique_id']}", _joined(values)))
            sources[records[-1].id] = side
            ledgers[row["ground_truth"]].append(records[-1].id)
    truth = {_pair(*ids) for ids in ledgers.values() if len(ids) == 2}
    return Dataset(records, truth, sources)


def sigmod_contest(folder: Path, number: int) -> Dataset:
    with (folder / f"X{number}.csv").open(encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    records = [_record(row) for row in rows]
    with (folder / f"Y{number}.csv").open(encoding="utf-8", newline="") as f:
        truth = {_pair(row["lid"], row["rid"]) for row in csv.DictReader(f)}
    return Dataset(records, truth)


def clean_clean(folder: Path, first: str, second: str, delimiter: str = "|") -> Dataset:
    """Two sources linked, as pyJedAI ships them: ``first`` and ``second`` (fields separated by
    ``delimiter``, an ``id`` field numbering each source's records) and ``gt.csv``, pairs of
    their ids."""
    records, sources = [], {}
    for name in (first, second):
        with (folder / f"{name}.csv").open(encoding="utf-8", newline="") as f:
            for row in csv.DictReader(f, delimiter=delimiter):
                records.append(_record(row, prefix=f"{name}:"))
                sources[records[-1].id] = name
    with (folder / "gt.csv").open(encoding="utf-8", newline="") as f:
        truth = {
            _pair(f"{first}:{row['D1']}", f"{second}:{row['D2']}")
            for row in csv.DictReader(f, delimiter=delimiter)
        }
    return Dataset(records, truth, sources)


def splink_historical(folder: Path) -> Dataset:
    import pandas as pd

    table = pd.read_parquet(folder / "historical_figures_with_errors_50k.parquet")
    fields = ["full_name", "dob", "birth_place", "postcode_fake", "gender", "occupation"]
    return grouped(table, fields)


def baseline(data: Dataset) -> tuple[Scores, float]:
    """Word-set Jaccard of every pair sharing a word (that the truth judges: see
    :meth:`Dataset.scored`), at its oracle threshold: the best F1 of any threshold, and that
    threshold. The pairs are counted, never held: a sparse product of the records' word sets, a
    block of records at a time, gives each pair's shared words, and each distinct similarity
    keeps how many pairs have it and how many of them are true (the commonest words make most
    of 24,628 product listings' 300 million pairs)."""
    from scipy.sparse import csr_matrix  # in the test extras, and with recordlinkage

    records, truth, sources = data

    words = [set(text.split()) for text in normalize_batch([r.text for r in records])]
    vocabulary: dict[str, int] = {}
    rows = np.repeat(np.arange(len(words)), [len(held) for held in words])
    columns = [vocabulary.setdefault(word, len(vocabulary)) for held in words for word in held]
    holds = csr_matrix(
        (np.ones(len(rows), dtype=np.int32), (rows, columns)), shape=(len(words), len(vocabulary))
    )
    sizes = np.array([len(held) for held in words])
    # One number per source; with one source, each record its own, so that every pair counts.
    source = (
        np.unique([sources[r.id] for r in records], return_inverse=True)[1]
        if sources
        else np.arange(len(records))
    )
    number = {r.id: n for n, r in enumerate(records)}
    true_codes = np.sort([min(number[a], number[b]) * len(words) + max(number[a], number[b])
                          for a, b in truth if a in number and b in number])  # fmt: skip
    totals: dict[float, list[int]] = defaultdict(lambda: [0, 0])  # similarity: pairs, true
    for start in range(0, len(words), 1000):
        shared = (holds[start : start + 1000] @ holds.T).tocoo()
        left, right = shared.row + start, shared.col
        above = (right > left) & (source[left] != source[right])
        left, right, count = left[above], right[above], shared.data[above]
        similarity = count / (sizes[left] + sizes[right] - count)
        codes = left.astype(np.int64) * len(words) + right
        where = np.minimum(np.searchsorted(true_codes, codes), max(len(true_codes) - 1, 0))
        correct = true_codes[where] == codes if len(true_codes) else np.zeros(len(codes), bool)
        values, inverse = np.unique(similarity, return_inverse=True)
        pairs_of, true_of = np.bincount(inverse), np.bincount(inverse, weights=correct)
        for value, pairs, true in zip(
            values.tolist(), pairs_of.tolist(), true_of.tolist(), strict=True
        ):
            totals[value][0] += pairs
            totals[value][1] += int(true)
    values = sorted(totals, reverse=True)
    reported = np.cumsum([totals[v][0] for v in values])
    correct = np.cumsum([totals[v][1] for v in values])
    best = int(np.argmax(2 * correct / (reported + len(truth))))
    return Scores(int(reported[best]), int(correct[best]), len(truth)), values[best]


SETTINGS: list[tuple[str, dict[str, object]]] = [
    ("**no flags**", {}),
    ("--preset records", {"preset": "records"}),
    ("--preset documents", {"preset": "documents"}),
    ("--similarity weighted", {"rules": {"similarity": "weighted"}}),
]


def rows(name: str, load: Callable[[], Dataset]) -> list[str]:
    data = load()
    lines = []
    for setting, options in SETTINGS:
        found, seconds = reported_pairs(data.records, sources=data.sources, **options)
        found = data.scored(found)
        s = Scores(len(found), len(found & data.truth), len(data.truth))
        lines.append(
            f"| {name} | {setting} | {s.precision:.3f} | {s.recall:.3f} | {s.f1:.3f} | "
            f"{len(found):,} | {seconds:.1f} |"
        )
    if data.sources is not None:  # two sources: linked one to one
        found, seconds = linked_pairs(data.records, data.sources)
        s = Scores(len(found), len(found & data.truth), len(data.truth))
        lines.append(
            f"| {name} | **`neardup link`, no flags** | {s.precision:.3f} | {s.recall:.3f} | "
            f"{s.f1:.3f} | {len(found):,} | {seconds:.1f} |"
        )
    s, threshold = baseline(data)
    lines.append(
        f"| {name} | baseline: word Jaccard >= {threshold:.2f} (oracle) | {s.precision:.3f} | "
        f"{s.recall:.3f} | {s.f1:.3f} | {s.reported:,} | |"
    )
    return lines


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The folders the public datasets are read from (see the module's docstring)."""
    parser.add_argument("--data", type=Path, help="the folder fetch.py filled: all of them")
    parser.add_argument("--restaurant", type=Path)
    parser.add_argument("--cora", type=Path)
    parser.add_argument("--cddb", type=Path)
    parser.add_argument("--magellan", type=Path)
    parser.add_argument("--splink", type=Path)
    parser.add_argument("--pyjedai", type=Path)


def datasets(args: argparse.Namespace) -> list[tuple[str, Callable[[], Dataset]]]:
    """The public datasets whose folders ``args`` names, each with its loader."""
    parts: list[tuple[str, Callable[[], Dataset]]] = []
    if args.data:
        args.restaurant = args.cora = args.data / "hpi"
        args.magellan = args.data / "magellan"
        args.cddb = args.data / "cddb"
        args.splink = args.data / "splink"
        args.pyjedai = args.data / "pyjedai"
    if args.restaurant:
        parts.append(("Fodors-Zagat (864)", partial(restaurant, args.restaurant)))
    if args.cora:
        parts.append(("Cora (1,879)", partial(cora, args.cora)))
    if args.cddb:
        parts.append(("CDDB (9,206)", partial(cddb, args.cddb)))
    for name, folder in [] if not args.magellan else [
        ("DBLP-ACM (4,910)", "structured/dblp_acm"),
        ("Abt-Buy (2,173)", "textual/abt_buy"),
        ("Amazon-Google (4,589)", "structured/amazon-google"),
        ("Walmart-Amazon (24,628)", "structured/walmart-amazon"),
        ("DBLP-ACM, dirty (4,910)", "dirty/dblp-acm"),
        ("Amazon-Google, dirty (4,589)", "dirty/amazon-google"),
        ("Walmart-Amazon, dirty (24,628)", "dirty/walmart-amazon"),
    ]:  # fmt: skip
        parts.append((name, partial(magellan, args.magellan / folder)))
    if args.splink:
        parts.append(("People, fake (1,000)", partial(splink_fake, args.splink)))
        parts.append(("People, historical (50,578)", partial(splink_historical, args.splink)))
        parts.append(("Payments, two ledgers (90,652)", partial(splink_payments, args.splink)))
    if args.pyjedai:
        parts.append(("Notebooks, SIGMOD 2022 (1,661)", partial(sigmod_contest, args.pyjedai, 1)))
        parts.append(("Storage, SIGMOD 2022 (1,993)", partial(sigmod_contest, args.pyjedai, 2)))
        for name, folder, sources, delimiter in [
            ("Restaurants, two guides (2,595)", "D1", ("rest1", "rest2"), "|"),
            ("Movies, IMDB-TMDB (11,174)", "D5", ("imdb", "tmdb"), "|"),
            ("Movies, IMDB-TVDB (12,928)", "D6", ("imdb", "tvdb"), "|"),
            ("Movies, TMDB-TVDB (13,866)", "D7", ("tmdb", "tvdb"), "|"),
            ("Amazon-Google, descriptions (4,393)", "D3", ("amazon", "gp"), "#"),
            ("Movies, IMDB-DBpedia (50,797)", "D10", ("imdb", "dbpedia"), "|"),
        ]:  # fmt: skip
            parts.append((name, partial(clean_clean, args.pyjedai / folder, *sources, delimiter)))
    return parts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(parser)
    args = parser.parse_args()
    print("| data | setting | precision | recall | F1 | pairs | index + report s |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for name, load in datasets(args):
        for line in rows(name, load):
            print(line, flush=True)


if __name__ == "__main__":
    main()
