"""The indexer's background writer: batches written in order, one behind the caller, nothing
lost or hidden when either side fails, and its idle thread lent to the fingerprinting."""

from __future__ import annotations

import threading
import time

import pytest

from neardup.fingerprint import FingerprintParams, fingerprint_batch
from neardup.indexer import BackgroundWriter, _fingerprints


class SlowUpserts:
    """Takes the place of a store's upsert: keeps each batch after a pause, on the thread it
    runs on, and fails at the batch numbered ``fail_at``."""

    def __init__(self, fail_at: int | None = None) -> None:
        self.batches: list[list[str]] = []
        self.threads: set[int] = set()
        self.fail_at = fail_at

    def upsert(self, documents: list[str], counted: object = None) -> None:
        time.sleep(0.02)
        self.threads.add(threading.get_ident())
        if len(self.batches) == self.fail_at:
            raise OSError("disk full")
        self.batches.append(documents)


def test_batches_are_written_in_order_on_another_thread() -> None:
    store = SlowUpserts()
    with BackgroundWriter(store) as writer:  # type: ignore[arg-type]
        for n in range(5):
            writer.write([f"record {n}"])
    assert store.batches == [[f"record {n}"] for n in range(5)]
    assert store.threads and threading.get_ident() not in store.threads


def test_the_caller_goes_on_while_a_batch_is_written() -> None:
    store = SlowUpserts()
    with BackgroundWriter(store) as writer:  # type: ignore[arg-type]
        started = time.perf_counter()
        writer.write(["a"])
        handed_over = time.perf_counter() - started
        assert store.batches == []  # still being written
    assert handed_over < 0.02
    assert store.batches == [["a"]]


def test_a_failed_write_stops_the_next_one() -> None:
    store = SlowUpserts(fail_at=1)
    with pytest.raises(OSError, match="disk full"), BackgroundWriter(store) as writer:  # type: ignore[arg-type]
        for n in range(5):
            writer.write([str(n)])
    assert store.batches == [["0"]]


def test_a_failed_last_write_is_raised_at_the_end() -> None:
    store = SlowUpserts(fail_at=0)
    with pytest.raises(OSError, match="disk full"), BackgroundWriter(store) as writer:  # type: ignore[arg-type]
        writer.write(["0"])


def test_the_callers_error_wins_and_the_batch_in_hand_is_still_written() -> None:
    store = SlowUpserts()
    with pytest.raises(KeyboardInterrupt), BackgroundWriter(store) as writer:  # type: ignore[arg-type]
        writer.write(["0"])
        raise KeyboardInterrupt
    assert store.batches == [["0"]]


def test_an_idle_writers_thread_fingerprints_half_of_a_batch() -> None:
    params = FingerprintParams("char", 5, 128, 16)
    texts = [f"record {n} of a batch, with words enough to shingle" for n in range(3000)]
    store = SlowUpserts()
    with BackgroundWriter(store) as writer:  # type: ignore[arg-type]
        lent = []
        lend = writer.lend
        writer.lend = lambda *args, **kwargs: lent.append(args[1]) or lend(*args, **kwargs)  # type: ignore[method-assign]
        shared = _fingerprints(texts, params, True, writer)
        assert lent == [texts[1500:]]  # the writer's thread took the second half
        writer.write(["0"])
        alone = _fingerprints(texts, params, True, writer)  # while the batch is written
        assert len(lent) == 1
    expected = fingerprint_batch(texts, params)
    for fingerprints in (shared, alone):
        assert [fp.md5 for fp in fingerprints] == [fp.md5 for fp in expected]
        assert all(
            (a.signature == b.signature).all() and (a.bands == b.bands).all()
            for a, b in zip(fingerprints, expected, strict=True)
        )
