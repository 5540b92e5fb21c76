"""One peer's MinHash + LSH over a file of normalised texts, as a process of its own: what a
user of datasketch or rensa runs. Prints the number of candidate pairs.

    python benchmarks/peers.py datasketch|rensa CONTENTS.txt

Character 5-shingles, 128 hashes, threshold 0.8 (rensa: 16 bands); insert every text, then
query every one, in memory. It imports nothing of neardup, so the process costs only what the
peer's own run costs. `speed.py` runs it.
"""

from __future__ import annotations

import sys
from pathlib import Path


def shingles(content: str) -> list[str]:
    return [content[i : i + 5] for i in range(max(1, len(content) - 4))]


def datasketch_pairs(contents: list[str]) -> int:
    from datasketch import MinHash, MinHashLSH

    lsh = MinHashLSH(threshold=0.8, num_perm=128)
    sketches = []
    for n, content in enumerate(contents):
        m = MinHash(num_perm=128)
        m.update_batch([s.encode() for s in shingles(content)])
        lsh.insert(str(n), m)
        sketches.append(m)
    return sum(len(lsh.query(m)) - 1 for m in sketches) // 2


def rensa_pairs(contents: list[str]) -> int:
    from rensa import RMinHash, RMinHashLSH

    lsh = RMinHashLSH(threshold=0.8, num_perm=128, num_bands=16)
    sketches = []
    for n, content in enumerate(contents):
        m = RMinHash(num_perm=128, seed=1)
        m.update(shingles(content))
        lsh.insert(n, m)
        sketches.append(m)
    return sum(len(lsh.query(m)) - 1 for m in sketches) // 2


PEERS = {"datasketch": datasketch_pairs, "rensa": rensa_pairs}

if __name__ == "__main__":
    peer, path = sys.argv[1], Path(sys.argv[2])
    print(PEERS[peer](path.read_text(encoding="utf-8").splitlines()))
