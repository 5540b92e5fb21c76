"""The memory a run holds, measured in a process of its own: the allocator's tuning for runs of
batches, and what a whole read of the store leaves held."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from neardup import api

GLIBC = pytest.mark.skipif(
    not (sys.platform.startswith("linux") and os.confstr("CS_GNU_LIBC_VERSION")),
    reason="glibc's allocator alone is measured",
)

# Blocks of 16 MB, every other one freed: 160 MB free between blocks still held, where no trim
# threshold reaches it.
FREED_BETWEEN_BLOCKS = """
import numpy as np
from neardup.memory import give_back_freed_memory, keep_freed_memory

def resident_mb():
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * 4096 >> 20

keep_freed_memory()
blocks = [np.ones(2 << 20) for _ in range(20)]
del blocks[::2]
kept = resident_mb()
give_back_freed_memory()
print(kept - resident_mb())
"""


@GLIBC
def test_memory_kept_for_the_next_batch_is_given_back_between_batches() -> None:
    """Tuned for batches, the allocator keeps blocks it freed in the process for the next
    batch; given back, their pages leave it."""
    run = subprocess.run(
        [sys.executable, "-c", FREED_BETWEEN_BLOCKS], capture_output=True, text=True, check=True
    )
    assert int(run.stdout) >= 150


# The memory glibc's allocator holds in use before and after a whole read of the store.
WHOLE_READ = """
import ctypes, sys
from neardup import api

class Info(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost".split()
    )]

mallinfo2 = ctypes.CDLL(None).mallinfo2
mallinfo2.restype = Info
with api.opened(sys.argv[1]) as store:
    before = mallinfo2().uordblks
    read = sum(len(batch) for batch in store.iter_records())
    print(read, (mallinfo2().uordblks - before) >> 10)
"""


@GLIBC
def test_a_whole_read_of_the_embedded_store_leaves_no_pages_cached(tmp_path: Path) -> None:
    """A link or a run of checks reads the store's records once and holds what it read to its
    end: the pages SQLite cached for that read (2.4 MB for 20,000 people) are given back
    when it ends."""
    records, url = tmp_path / "people.tsv", f"sqlite:///{tmp_path / 'people.db'}"
    api.generate(20_000, records, kind="people", seed=1)
    api.index([records], url)
    run = subprocess.run(
        [sys.executable, "-c", WHOLE_READ, url], capture_output=True, text=True, check=True
    )
    read, grown_kb = map(int, run.stdout.split())
    assert read == 20_000 and grown_kb < 512
