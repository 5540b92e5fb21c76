"""Timing helpers the benchmark scripts share."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from neardup.searcher import Searcher


def interleaved_seconds(
    works: Mapping[str, Callable[[], object]], runs: int
) -> dict[str, tuple[list[float], object]]:
    """Each work's wall times over ``runs`` rounds, every work called once a round in turn, and
    its last result. This machine's speed drifts by tens of percent within minutes; works timed
    in the same round are compared under the same conditions."""
    times: dict[str, list[float]] = {name: [] for name in works}
    results: dict[str, object] = {}
    for _ in range(runs):
        for name, work in works.items():
            started = time.perf_counter()
            results[name] = work()
            times[name].append(time.perf_counter() - started)
    return {name: (times[name], results[name]) for name in works}


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
