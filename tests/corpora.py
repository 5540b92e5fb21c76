"""Generated test corpora (the project's tests read no data they do not ship or make)."""

from __future__ import annotations

import random
from pathlib import Path

SAMPLE = Path(__file__).resolve().parents[1] / "neardup" / "data" / "sample.txt"


def corpus(path: Path, size: int = 400, seed: int = 11) -> Path:
    """Records with planted near-duplicates: word drops, swaps, typos, and exact copies."""
    rng = random.Random(seed)
    words = [
        f"{rng.choice('bcdfghklmnprst')}{rng.choice('aeiou')}{rng.choice('nrst')}"
        for _ in range(300)
    ]
    lines = SAMPLE.read_text().splitlines()
    texts: list[str] = []
    for _ in range(size):
        if texts and rng.random() < 0.4:
            base = rng.choice(texts).split()
            edit = rng.random()
            if edit < 0.3 and len(base) > 3:
                base.pop(rng.randrange(len(base)))
            elif edit < 0.6 and len(base) > 3:
                i = rng.randrange(len(base) - 1)
                base[i], base[i + 1] = base[i + 1], base[i]
            elif edit < 0.9:
                i = rng.randrange(len(base))
                base[i] = base[i][:-1] + rng.choice("xyz")
            texts.append(" ".join(base))
        else:
            texts.append(" ".join(rng.choices(words, k=rng.randint(4, 14))))
    path.write_text("\n".join(lines + [f"g{n:04d} {t}" for n, t in enumerate(texts)]) + "\n")
    return path
