"""The benchmark scripts run, on small data, against real stores: they are not part of any
other run, and a script that no test starts breaks without anyone seeing."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from neardup import api

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def run(script: str, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / script), *args],
        capture_output=True, text=True, timeout=300, cwd=BENCHMARKS,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_the_engines_benchmark_runs_on_each_store(
    store_url_factory: Callable[[], str], tmp_path: Path
) -> None:
    records = tmp_path / "records.tsv"
    api.generate(300, records, seed=2)
    url = store_url_factory()
    table = run("engines.py", str(records), url, "--preset", "documents", "--runs", "1",
                "--lookups", "20")  # fmt: skip
    row = next(line for line in table.splitlines() if line.startswith(url))
    cells = row[len(url) :].split()
    assert len(cells) == 6 and cells[0] != "-"  # records/s measured
    assert (cells[1] == "-") == url.startswith("sqlite")  # the engines' own bulk rate


def test_the_scale_benchmark_runs(tmp_path: Path) -> None:
    table = run("scale.py", "--records", "2000", "--folder", str(tmp_path))
    assert "2,000" in table or "2000" in table
