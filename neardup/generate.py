"""A synthetic corpus with known near-duplicates, of any size, for measuring quality and speed.

Originals are made of words from an invented vocabulary with a Zipf-like frequency (so some words
are everywhere and most are rare, as in real text), in a few paragraphs. A share of the documents
are edited copies of a recent original: words dropped, two words swapped, a paragraph inserted,
the last paragraph cut, a footer appended. An original and its copies form a family; every two
members of a family are a true pair, written with their true character 5-shingle Jaccard
similarity. Deterministic for a seed.
"""

from __future__ import annotations

import contextlib
import csv
import random
from collections import deque
from itertools import combinations
from pathlib import Path
from typing import Any

import numpy as np

from .errors import InvalidParameter
from .fingerprint import FingerprintParams, fingerprint_batch, jaccard

_SYLLABLES = [c + v for c in "bcdfghklmnprstvz" for v in "aeiou"] + ["ar", "en", "ol", "us", "ta"]
_FOOTERS = [
    "Contact our agency for a visit, no fees for tenants",
    "Call now for more information and photos",
    "Listing managed by Casa Bella Real Estate, all rights reserved",
    "Reply to this ad with your phone number and we will call you back",
]


def _vocabulary(rng: random.Random, size: int = 20_000) -> list[str]:
    words: set[str] = set()
    while len(words) < size:
        words.add("".join(rng.choices(_SYLLABLES, k=rng.randint(1, 4))))
    ordered = sorted(words)
    rng.shuffle(ordered)  # frequency rank must not follow the alphabet
    return ordered


class _Writer:
    def __init__(self, seed: int, words: int) -> None:
        self.rng = random.Random(seed)
        self.np_rng = np.random.default_rng(seed)
        self.vocabulary = _vocabulary(self.rng)
        weights = 1.0 / np.arange(1, len(self.vocabulary) + 1) ** 1.05
        # The draws of Generator.choice with these weights, without its checking and summing
        # them on every call (25 times the cost of the draw).
        self.cumulative = np.cumsum(weights / weights.sum())
        self.cumulative /= self.cumulative[-1]
        self.words = words

    def phrase(self, count: int) -> list[str]:
        picks = self.cumulative.searchsorted(self.np_rng.random(count), side="right")
        return [self.vocabulary[i] for i in picks.tolist()]

    def original(self) -> list[list[str]]:
        total = max(4, int(self.np_rng.normal(self.words, self.words / 4)))
        cuts = sorted(self.rng.sample(range(1, total), k=min(total - 1, self.rng.randint(1, 3))))
        text = self.phrase(total)
        return [text[a:b] for a, b in zip([0, *cuts], [*cuts, total], strict=True)]

    def edited(self, paragraphs: list[list[str]]) -> list[list[str]]:
        copy = [list(p) for p in paragraphs]
        for _ in range(self.rng.randint(1, 3)):
            edit = self.rng.random()
            paragraph = self.rng.choice(copy)
            if edit < 0.3 and len(paragraph) > 3:  # drop a few words
                for _ in range(max(1, len(paragraph) // 30)):
                    paragraph.pop(self.rng.randrange(len(paragraph)))
            elif edit < 0.5 and len(paragraph) > 2:  # swap two neighbours
                i = self.rng.randrange(len(paragraph) - 1)
                paragraph[i], paragraph[i + 1] = paragraph[i + 1], paragraph[i]
            elif edit < 0.65:  # insert a short paragraph
                copy.insert(self.rng.randrange(len(copy) + 1), self.phrase(self.rng.randint(5, 12)))
            elif edit < 0.8 and len(copy) > 1 and len(copy[-1]) > 4:  # cut the last paragraph
                copy[-1] = copy[-1][: len(copy[-1]) // 2]
            else:  # append an agency footer
                copy.append(self.rng.choice(_FOOTERS).split())
        return copy


def write_corpus(
    output: str | Path,
    truth: str | Path | None,
    count: int,
    *,
    seed: int = 1,
    words: int = 80,
    duplicates: float = 0.3,
    pool: int = 5_000,
) -> tuple[int, int]:
    """Write ``count`` documents (TSV: id, text) and, if asked, the true pairs (TSV: left_id,
    right_id, jaccard_char5). Returns (documents, true pairs).

    Copies are made of one of the last ``pool`` originals, so memory does not grow with ``count``;
    a family's pairs are written when its original leaves the pool.
    """
    if count < 1 or words < 1:
        raise InvalidParameter(f"a corpus needs documents and words, not {count} and {words}")
    if not 0.0 <= duplicates <= 1.0:
        raise InvalidParameter(f"the share of copies must be between 0 and 1, not {duplicates}")
    writer = _Writer(seed, words)
    recent: deque[str] = deque()
    originals: dict[str, list[list[str]]] = {}
    families: dict[str, list[tuple[str, str]]] = {}
    pairs = 0
    with contextlib.ExitStack() as files:
        documents = csv.writer(
            files.enter_context(open(output, "w", encoding="utf-8", newline="")),
            delimiter="\t",
            lineterminator="\n",
        )
        documents.writerow(["id", "text"])
        truth_rows = None
        if truth:
            truth_rows = csv.writer(
                files.enter_context(open(truth, "w", encoding="utf-8", newline="")),
                delimiter="\t",
                lineterminator="\n",
            )
            truth_rows.writerow(["left_id", "right_id", "jaccard_char5"])
        for n in range(count):
            doc_id = f"d{n:08d}"
            if recent and writer.rng.random() < duplicates:
                family = recent[writer.rng.randrange(len(recent))]
                text = _text(writer.edited(originals[family]))
            else:
                family, paragraphs = doc_id, writer.original()
                text = _text(paragraphs)
                originals[doc_id] = paragraphs
                recent.append(doc_id)
                if len(recent) > pool:
                    gone = recent.popleft()
                    del originals[gone]
                    pairs += _write_family(truth_rows, families.pop(gone))
            families.setdefault(family, []).append((doc_id, text))
            documents.writerow([doc_id, text])
        for members in families.values():
            pairs += _write_family(truth_rows, members)
    return count, pairs


def _text(paragraphs: list[list[str]]) -> str:
    return ". ".join(" ".join(p) for p in paragraphs)


_TRUTH_PARAMS = FingerprintParams("char", 5, 8, 1)


def _write_family(rows: Any, members: list[tuple[str, str]]) -> int:
    """Every pair of one family, with the Jaccard similarity of their character 5-shingles."""
    if rows is None or len(members) < 2:
        return 0
    fps = fingerprint_batch([text for _, text in members], _TRUTH_PARAMS)
    written = 0
    for (i, (a, _)), (j, (b, _)) in combinations(enumerate(members), 2):
        rows.writerow([a, b, f"{jaccard(fps[i].shingles, fps[j].shingles):.4f}"])
        written += 1
    return written
