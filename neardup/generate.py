"""Synthetic corpora with known near-duplicates, of any size, for measuring quality and speed.

Two kinds, each deterministic for a seed. In both, a share of the records are edited copies of
a recent original; an original and its copies form a family, and every two members of a family
are a true pair, written with their true character 5-shingle Jaccard similarity.

- ``documents``: originals made of words from an invented vocabulary with a Zipf-like frequency
  (so some words are everywhere and most are rare, as in real text), in a few paragraphs; a copy
  has words dropped, two words swapped, a paragraph inserted, the last paragraph cut or a footer
  appended.
- ``people``: short person records (name, street, city, state, zip) drawn with the frequencies
  of American first and last names and street suffixes (Faker's lists), from a pool of cities
  where a few hold many people, as real records do; a copy has 1-3 edits: a typo, an
  abbreviation (Street to St, a first name to its initial), the names swapped, or a part dropped.
"""

from __future__ import annotations

import contextlib
import random
from collections import deque
from collections.abc import Callable, Sequence
from itertools import combinations
from pathlib import Path
from typing import IO, Any, Literal

import numpy as np

from .errors import InvalidParameter
from .fingerprint import FingerprintParams, fingerprint_batch, jaccard
from .output import named_format, row_writer, whole_file
from .readers import record_format

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
    """Documents: paragraphs of invented words."""

    fields = ("text",)
    prefix = "d"

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

    def row(self, paragraphs: list[list[str]]) -> list[str]:
        return [". ".join(" ".join(p) for p in paragraphs)]

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


# How people's records abbreviate: street suffixes as the USPS writes them, and more.
_ABBREVIATIONS = {
    "Street": "St", "Avenue": "Ave", "Road": "Rd", "Drive": "Dr", "Lane": "Ln", "Court": "Ct",
    "Place": "Pl", "Boulevard": "Blvd", "Terrace": "Ter", "Circle": "Cir", "Highway": "Hwy",
    "Parkway": "Pkwy", "Square": "Sq", "Mount": "Mt", "North": "N", "South": "S", "East": "E",
    "West": "W", "Port": "Pt", "Lake": "Lk", "Fort": "Ft", "Saint": "St", "Apartment": "Apt",
}  # fmt: skip
CITIES = 5_000  # the pool people live in; its Zipf weights put many in a few cities


class _People:
    """Person records: name, street, city, state, zip, as fields of a row."""

    fields = ("name", "street", "city", "state", "zip")
    prefix = "p"

    def __init__(self, seed: int) -> None:
        from faker.providers.address.en_US import Provider as Address  # here: only this kind
        from faker.providers.person.en_US import Provider as Person

        self.rng = random.Random(seed)
        self.np_rng = np.random.default_rng(seed)
        first = {**Person.first_names_female, **Person.first_names_male}
        self.first_names = _Weighted(self.np_rng, list(first), list(first.values()))
        last = Person.last_names
        self.last_names = _Weighted(self.np_rng, list(last), list(last.values()))
        suffixes = list(Address.street_suffixes)
        self.suffixes = _Weighted(
            self.np_rng, suffixes, [4.0 if s in _ABBREVIATIONS else 1.0 for s in suffixes]
        )
        prefixes, endings = list(Address.city_prefixes), list(Address.city_suffixes)
        self.cities = [
            (
                " ".join(
                    filter(
                        None,
                        [
                            self.rng.choice([*prefixes, "", "", ""]),
                            self.last_names.one() + self.rng.choice([*endings, "", ""]),
                        ],
                    )
                ),
                self.rng.choice(Address.states_abbr),
                f"{self.rng.randrange(10_000, 99_999)}",
            )
            for _ in range(CITIES)
        ]
        self.city = _Weighted(self.np_rng, list(range(CITIES)), 1.0 / np.arange(1, CITIES + 1))

    def original(self) -> list[list[str]]:
        city, state, zip_code = self.cities[self.city.one()]
        street = f"{self.rng.randrange(1, 9_999)} {self.last_names.one()} {self.suffixes.one()}"
        name = [self.first_names.one(), self.last_names.one()]
        return [name, street.split(), city.split(), [state], [zip_code]]

    def row(self, parts: list[list[str]]) -> list[str]:
        return [" ".join(part) for part in parts]

    def edited(self, parts: list[list[str]]) -> list[list[str]]:
        copy = [list(p) for p in parts]
        for _ in range(self.rng.randint(1, 3)):
            edit = self.rng.random()
            if edit < 0.45:  # a typo in one word
                part = self.rng.choice([p for p in copy if p] or [[""]])
                if part and part[0]:
                    at = self.rng.randrange(len(part))
                    part[at] = _typo(self.rng, part[at])
            elif edit < 0.75:  # an abbreviation
                words = [(p, i) for p in copy for i, w in enumerate(p) if w in _ABBREVIATIONS]
                if words:
                    part, i = self.rng.choice(words)
                    part[i] = _ABBREVIATIONS[part[i]]
                elif copy[0] and len(copy[0][0]) > 1:
                    copy[0][0] = copy[0][0][0]  # the first name's initial
            elif edit < 0.88 and len(copy[0]) == 2:  # last name first
                copy[0].reverse()
            else:  # a part left out: the zip, the state or the city
                copy[self.rng.choice([2, 3, 4])] = []
        return copy


class _Weighted:
    """Draws from ``values`` with ``weights``, from a table made once."""

    def __init__(self, rng: np.random.Generator, values: list, weights: Any) -> None:
        self.rng, self.values = rng, values
        cumulative = np.cumsum(np.asarray(weights, dtype=np.float64))
        self.cumulative = cumulative / cumulative[-1]
        self.ahead: list[int] = []

    def one(self) -> Any:
        if not self.ahead:  # drawn a thousand at a time: one numpy call per draw costs more
            self.ahead = self.cumulative.searchsorted(self.rng.random(1000), side="right").tolist()
        return self.values[self.ahead.pop()]


def _typo(rng: random.Random, word: str) -> str:
    """One keystroke wrong: a letter replaced, dropped, doubled, or two swapped."""
    if len(word) < 2:
        return word + rng.choice("aeiou")
    at = rng.randrange(len(word) - 1)
    kind = rng.randrange(4)
    if kind == 0:
        return word[:at] + rng.choice("abcdefghijklmnopqrstuvwxyz") + word[at + 1 :]
    if kind == 1:
        return word[:at] + word[at + 1 :]
    if kind == 2:
        return word[: at + 1] + word[at:]
    return word[:at] + word[at + 1] + word[at] + word[at + 2 :]


LISTING = "Bella Napoli Trattoria 418 Harbor Street Portland ME 04101 open daily"


def near_copies(count: int, line: str = LISTING, seed: int = 3) -> list[str]:
    """``count`` copies of ``line``, each with one or two letters replaced: one group whose every
    pair is a near-duplicate, as a feed that repeats one listing."""
    rng = random.Random(seed)
    copies = []
    for _ in range(count):
        chars = list(line)
        for _ in range(rng.randint(1, 2)):
            at = rng.randrange(len(chars))
            if chars[at] != " ":
                chars[at] = rng.choice("xqzjkw")
        copies.append("".join(chars))
    return copies


Kind = Literal["documents", "people"]
KINDS: tuple[Kind, ...] = ("documents", "people")
# The share of copies when none is given: templated ads are copied often, person records less.
DEFAULT_DUPLICATES: dict[str, float] = {"documents": 0.3, "people": 0.1}


def write_corpus(
    output: str | Path,
    truth: str | Path | None,
    count: int,
    *,
    kind: Kind = "documents",
    seed: int = 1,
    words: int = 80,
    duplicates: float | None = None,
    pool: int = 5_000,
) -> tuple[int, int]:
    """Write ``count`` records (id and the kind's fields) and, if asked, the true pairs
    (left_id, right_id, jaccard_char5), each file in the format its name says (csv, jsonl,
    json; .txt: lines of id and text) and compressed when it ends in .gz, else TSV. Returns
    (records, true pairs).

    Copies are made of one of the last ``pool`` originals, so memory does not grow with ``count``;
    a family's pairs are written when its original leaves the pool.
    """
    if kind not in KINDS:
        raise InvalidParameter(f"unknown kind {kind!r}: use {' or '.join(KINDS)}")
    if duplicates is None:
        duplicates = DEFAULT_DUPLICATES[kind]
    if count < 1:
        raise InvalidParameter(f"a corpus needs at least one record, not {count}")
    if words < 1:
        raise InvalidParameter(f"a document needs at least one word, not {words}")
    if seed < 0:
        raise InvalidParameter(f"seed must be 0 or more, not {seed}")
    if not 0.0 <= duplicates <= 1.0:
        raise InvalidParameter(f"the share of copies must be between 0 and 1, not {duplicates}")
    writer: _Writer | _People = _Writer(seed, words) if kind == "documents" else _People(seed)
    recent: deque[str] = deque()
    originals: dict[str, list[list[str]]] = {}  # documents' paragraphs, or people's fields
    families: dict[str, list[tuple[str, str]]] = {}
    pairs = 0
    with contextlib.ExitStack() as files:
        write_record = files.enter_context(
            _record_writer(files.enter_context(whole_file(output)), output, writer.fields)
        )
        write_pair = None
        if truth:
            write_pair = files.enter_context(
                row_writer(
                    ["left_id", "right_id", "jaccard_char5"],
                    files.enter_context(whole_file(truth)),
                    named_format(str(truth)) or "tsv",
                )
            )
        for n in range(count):
            doc_id = f"{writer.prefix}{n:08d}"
            if recent and writer.rng.random() < duplicates:
                family = recent[writer.rng.randrange(len(recent))]
                parts = writer.edited(originals[family])
            else:
                family, parts = doc_id, writer.original()
                originals[doc_id] = parts
                recent.append(doc_id)
                if len(recent) > pool:
                    gone = recent.popleft()
                    del originals[gone]
                    pairs += _write_family(write_pair, families.pop(gone))
            row = writer.row(parts)
            families.setdefault(family, []).append((doc_id, " ".join(row)))
            write_record([doc_id, *row])
        for members in families.values():
            pairs += _write_family(write_pair, members)
    return count, pairs


_TRUTH_PARAMS = FingerprintParams("char", 5, 8, 1)


def _record_writer(
    out: IO[str], path: str | Path, fields: Sequence[str]
) -> contextlib.AbstractContextManager[Callable[[Sequence[object]], None]]:
    """What writes records (an id, then the kind's fields) in the format the file's name says,
    as ``neardup index`` reads it: TSV when it says none."""
    format = record_format(path) or "tsv"
    if format in ("lines", "text"):
        return contextlib.nullcontext(
            lambda row: out.write(f"{row[0]} {' '.join(map(str, row[1:]))}\n")
        )
    return row_writer(["id", *fields], out, format)


def _write_family(
    write: Callable[[Sequence[object]], None] | None, members: list[tuple[str, str]]
) -> int:
    """Every pair of one family, with the Jaccard similarity of their character 5-shingles."""
    if write is None or len(members) < 2:
        return 0
    fps = fingerprint_batch([text for _, text in members], _TRUTH_PARAMS)
    written = 0
    for (i, (a, _)), (j, (b, _)) in combinations(enumerate(members), 2):
        write([a, b, f"{jaccard(fps[i].shingles, fps[j].shingles):.4f}"])
        written += 1
    return written
