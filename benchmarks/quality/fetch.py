"""Fetch the public entity-resolution benchmarks that public.py and candidates.py read.

    python benchmarks/quality/fetch.py [--into .bench/public] [--source https://github.com/]

Each dataset is read out of the public Git repository that ships it, at a fixed commit, so
that every run measures the same records; nothing is bundled with neardup. ``--into`` gets:

- ``hpi/``: Fodors-Zagat (``restaurant.csv``, ``restaurant_gold.csv``) and Cora (``cora.tsv``,
  ``cora_DPL.tsv``) from jmakr0/Distributed-Entity-Resolution, the HPI DuDe toolkit's copies
  (Cora from the commit that added it, before the repository dropped it);
- ``cddb/``: the HPI freeDB CDs (``cd_dataset.csv``, ``cd_dataset_duplicates.csv``) from
  philipp94831/dysni, at the commit that took repeated disc ids out;
- ``magellan/``: DBLP-ACM, Amazon-Google, Walmart-Amazon (``structured/``, and their
  ``dirty/`` versions, whose fields are moved into the title at random) and Abt-Buy
  (``textual/``), each ``table_a``, ``table_b`` and ``gold`` as Parquet, from
  DataReconciliation/BiBlock's copies of the Magellan sets.
- ``splink/``: person records in groups, with the group of each (``fake_1000.csv``;
  ``historical_figures_with_errors_50k.parquet``, people of Wikidata with errors put in), and
  payments recorded in two ledgers (``transactions_origin.parquet``,
  ``transactions_destination.parquet``), from moj-analytical-services/splink_datasets (MIT
  licence).
- ``pyjedai/``: product titles of the SIGMOD 2022 programming contest, notebooks
  (``X1.csv``, true pairs ``Y1.csv``) and storage (``X2.csv``, ``Y2.csv``), and six pairs of
  sources linked from its clean-clean sets, each a folder of two sources and ``gt.csv``:
  restaurants of two guides (``D1/``), software of Amazon and Google Products with their
  descriptions (``D3/``), movies and the people in them of IMDB, TMDB and TVDB (``D5/``
  IMDB-TMDB, ``D6/`` IMDB-TVDB, ``D7/`` TMDB-TVDB), and movies of IMDB and DBpedia (``D10/``),
  from AI-team-UoA/pyJedAI (Apache licence 2.0).

Then: ``python benchmarks/quality/public.py --data DIR``. ``--source`` is where the
repositories are cloned from (``owner/name`` is appended): a mirror, or a local folder of bare
repositories named ``owner+name``. Needs git.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

# pyJedAI's clean-clean sets fetched: the two sources linked (``gt.csv`` pairs them).
CLEAN_CLEAN = {
    "D1": ("rest1", "rest2"),
    "D3": ("amazon", "gp"),
    "D5": ("imdb", "tmdb"),
    "D6": ("imdb", "tvdb"),
    "D7": ("tmdb", "tvdb"),
    "D10": ("imdb", "dbpedia"),
}
# (repository, commit, path in the repository, path under --into)
FILES = [
    *(
        ("jmakr0/Distributed-Entity-Resolution", "bc4668f", f"data/{name}", f"hpi/{name}")
        for name in ("restaurant.csv", "restaurant_gold.csv")
    ),
    *(
        ("jmakr0/Distributed-Entity-Resolution", "d1dabed", f"data/{name}", f"hpi/{name}")
        for name in ("cora.tsv", "cora_DPL.tsv")
    ),
    *(
        ("philipp94831/dysni", "2f7f890", f"data/{name}", f"cddb/{name}")
        for name in ("cd_dataset.csv", "cd_dataset_duplicates.csv")
    ),
    *(
        ("DataReconciliation/BiBlock", "53b6a95", f"{kind}/{name}/{part}.parquet",
         f"magellan/{kind}/{name}/{part}.parquet")
        for kind, name in [
            ("structured", "dblp_acm"),
            ("structured", "amazon-google"),
            ("structured", "walmart-amazon"),
            ("textual", "abt_buy"),
            ("dirty", "dblp-acm"),
            ("dirty", "amazon-google"),
            ("dirty", "walmart-amazon"),
        ]
        for part in ("table_a", "table_b", "gold")
    ),
    *(
        ("moj-analytical-services/splink_datasets", "75876d8", f"data/{name}", f"splink/{name}")
        for name in (
            "fake_1000.csv",
            "historical_figures_with_errors_50k.parquet",
            "transactions_origin.parquet",
            "transactions_destination.parquet",
        )
    ),
    *(
        ("AI-team-UoA/pyJedAI", "14b3507", f"data/sigmod_2022/{name}", f"pyjedai/{name}")
        for name in ("X1.csv", "Y1.csv", "X2.csv", "Y2.csv")
    ),
    *(
        ("AI-team-UoA/pyJedAI", "619b00e", f"data/ccer/{path}", f"pyjedai/{path}")
        for set_, sources in CLEAN_CLEAN.items()
        for path in (f"{set_}/{name}.csv" for name in (*sources, "gt"))
    ),
]  # fmt: skip


def repository_url(source: str, repository: str) -> str:
    """Where to clone ``owner/name`` from: a URL prefix, or a folder of ``owner+name``."""
    folder = Path(source) / repository.replace("/", "+")
    if folder.exists():
        return str(folder / "repo" if (folder / "repo").exists() else folder)
    return source.rstrip("/") + "/" + repository


def fetch(into: Path, source: str) -> None:
    """Every file of FILES that ``into`` lacks, each repository it needs cloned once (bare, no
    checkout): a folder filled before more sets were added gets just those."""
    missing = [entry for entry in FILES if not (into / entry[3]).exists()]
    with tempfile.TemporaryDirectory(prefix="neardup-fetch-") as scratch:
        clones: dict[str, Path] = {}
        for repository, commit, path, target in missing:
            if repository not in clones:
                clones[repository] = Path(scratch) / repository.replace("/", "+")
                url = repository_url(source, repository)
                print(f"cloning {url}", file=sys.stderr)
                git("clone", "--quiet", "--bare", url, str(clones[repository]))
            content = git("--git-dir", str(clones[repository]), "show", f"{commit}:{path}")
            (into / target).parent.mkdir(parents=True, exist_ok=True)
            partial = into / f"{target}.partial"  # a file cut short is never taken for one
            partial.write_bytes(content)
            partial.replace(into / target)
    print(
        f"{len(missing)} of {len(FILES)} files fetched into {into}; next: public.py --data {into}",
        file=sys.stderr,
    )


def git(*args: str) -> bytes:
    try:
        return subprocess.run(["git", *args], check=True, capture_output=True).stdout
    except subprocess.CalledProcessError as error:
        sys.exit(f"fetch.py: git {args[0]} failed: {error.stderr.decode().strip()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--into", type=Path, default=Path(".bench/public"))
    parser.add_argument("--source", default="https://github.com/")
    args = parser.parse_args()
    fetch(args.into, args.source)


if __name__ == "__main__":
    main()
