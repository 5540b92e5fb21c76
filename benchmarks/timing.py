"""Timing helpers the benchmark scripts share."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence

import numpy as np

from neardup.searcher import Searcher


def median_seconds(work: Callable[[], object], runs: int) -> tuple[float, object]:
    """The median wall time of ``runs`` calls, and the last call's result."""
    times, result = [], None
    for _ in range(runs):
        started = time.perf_counter()
        result = work()
        times.append(time.perf_counter() - started)
    return statistics.median(times), result


def lookup_latencies_ms(searcher: Searcher, ids: Sequence[str], count: int) -> np.ndarray:
    """Milliseconds per lookup by id, for ``count`` ids spread over ``ids``, after 20 warm-up
    lookups (connections opened, caches and compiled code loaded)."""
    chosen = list(ids)[:: max(1, len(ids) // count)][:count]
    for record_id in chosen[:20]:
        searcher.lookup_id(record_id)
    latencies = []
    for record_id in chosen:
        started = time.perf_counter()
        searcher.lookup_id(record_id)
        latencies.append(time.perf_counter() - started)
    return np.array(latencies) * 1000
