"""The allocator's tuning for runs of batches, measured in a process of its own."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

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


@pytest.mark.skipif(
    not (sys.platform.startswith("linux") and os.confstr("CS_GNU_LIBC_VERSION")),
    reason="glibc's allocator alone is tuned",
)
def test_memory_kept_for_the_next_batch_is_given_back_between_batches() -> None:
    """Tuned for batches, the allocator keeps blocks it freed in the process for the next
    batch; given back, their pages leave it."""
    run = subprocess.run(
        [sys.executable, "-c", FREED_BETWEEN_BLOCKS], capture_output=True, text=True, check=True
    )
    assert int(run.stdout) >= 150
