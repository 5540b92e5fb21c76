"""Pure fingerprinting: normalisation, shingles, MinHash signatures and LSH bands.

No I/O and no engine here. The indexer and the searcher both call :func:`fingerprint_batch`, so a
stored record and a query text are always fingerprinted by exactly the same code.

The signature is a one-permutation MinHash with optimal densification (Shrivastava, ICML 2017):
every shingle is hashed once to 64 bits; the high bits choose one of K bins, the low 32 bits are the
value, each bin keeps its minimum, and an empty bin borrows the value of the first non-empty bin on
its own fixed probe sequence. Position ``i`` of two signatures agrees with probability exactly equal
to the Jaccard similarity of the two shingle sets, as with K independent hash functions, at the cost
of one hash per shingle instead of K. Everything is vectorised over the whole batch with numpy.
"""

from __future__ import annotations

import hashlib
import sys
import unicodedata
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from functools import cache
from typing import Literal

import mmh3
import numpy as np

from .errors import InvalidParameter

ShingleKind = Literal["word", "char"]

_U64 = np.uint64
_MASK32 = _U64(0xFFFFFFFF)
_MULTIPLIER = _U64(0x9E3779B97F4A7C15)  # odd 64-bit constant for combining token hashes


@dataclass(frozen=True)
class FingerprintParams:
    """Everything that decides a record's tokens; a store keeps these and refuses others."""

    shingle_kind: ShingleKind = "char"
    shingle_size: int = 4
    num_hashes: int = 128
    bands: int = 32
    seed: int = 1

    def __post_init__(self) -> None:
        if self.shingle_kind not in ("word", "char"):
            raise InvalidParameter(
                f"shingle kind must be 'word' or 'char', not {self.shingle_kind!r}"
            )
        if not 1 <= self.shingle_size <= 64:
            raise InvalidParameter(
                f"shingle size must be between 1 and 64, not {self.shingle_size}"
            )
        if not 1 <= self.num_hashes <= 1024:
            raise InvalidParameter(
                f"number of hashes must be between 1 and 1024, not {self.num_hashes}"
            )
        if self.bands < 1 or self.num_hashes % self.bands:
            raise InvalidParameter(
                f"bands must divide the number of hashes: {self.bands} bands "
                f"do not divide {self.num_hashes} hashes"
            )
        if not 0 <= self.seed < 2**32:
            raise InvalidParameter(f"seed must be between 0 and 2**32-1, not {self.seed}")

    @property
    def rows_per_band(self) -> int:
        return self.num_hashes // self.bands

    @property
    def shingle(self) -> str:
        return f"{self.shingle_kind}:{self.shingle_size}"

    def to_dict(self) -> dict[str, object]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, object]) -> FingerprintParams:
        return cls(**{key: data[key] for key in cls.__dataclass_fields__})  # type: ignore[arg-type]

    def describe(self) -> str:
        return (
            f"shingle {self.shingle}, {self.num_hashes} hashes, {self.bands} bands, "
            f"seed {self.seed}"
        )


def parse_shingle(spec: str) -> tuple[ShingleKind, int]:
    """Parse ``word:3`` or ``char:5``."""
    kind, _, size = spec.partition(":")
    if kind not in ("word", "char") or not size.isdigit() or int(size) < 1:
        raise InvalidParameter(f"shingle must look like word:N or char:N, not {spec!r}")
    return kind, int(size)  # type: ignore[return-value]


@dataclass(frozen=True)
class Fingerprint:
    """The indexed fields of one text. Token arrays are numpy; string forms are derived."""

    content: str
    md5: str
    first_word: str
    num_words: int
    shingles: np.ndarray  # sorted unique uint64 shingle hashes
    signature: np.ndarray  # uint32, one value per hash position
    bands: np.ndarray  # uint64, one hash per band

    def shingle_tokens(self) -> list[str]:
        return [f"{h:016x}" for h in self.shingles.tolist()]

    def signature_tokens(self) -> list[str]:
        return [f"{i}_{v}" for i, v in enumerate(self.signature.tolist())]

    def band_tokens(self) -> list[str]:
        return [f"{b}_{h:016x}" for b, h in enumerate(self.bands.tolist())]


# --- normalisation ------------------------------------------------------------------------------


@cache
def _is_punctuation() -> np.ndarray:
    """A lookup table over all code points: True for Unicode punctuation except '-'."""
    table = np.zeros(sys.maxunicode + 1, dtype=bool)
    for code in range(sys.maxunicode + 1):
        if unicodedata.category(chr(code))[0] == "P":
            table[code] = True
    table[ord("-")] = False
    return table


def normalize_batch(texts: Sequence[str]) -> list[str]:
    """NFKC, lowercase, punctuation except '-' to spaces, whitespace runs to one space, trimmed.

    Punctuation is replaced in one vectorised pass over the whole batch's code points.
    """
    lowered = [unicodedata.normalize("NFKC", t).lower() for t in texts]
    codes = np.frombuffer("".join(lowered).encode("utf-32-le"), dtype=np.uint32).copy()
    codes[_is_punctuation()[codes]] = ord(" ")
    spaced = codes.tobytes().decode("utf-32-le")
    contents, position = [], 0
    for text in lowered:
        contents.append(" ".join(spaced[position : position + len(text)].split()))
        position += len(text)
    return contents


def normalize(text: str) -> str:
    return normalize_batch([text])[0]


# --- hashing ------------------------------------------------------------------------------------


def _fmix64(h: np.ndarray) -> np.ndarray:
    """MurmurHash3's 64-bit finaliser: a bijection that spreads every input bit over the output."""
    h = h ^ (h >> _U64(33))
    h = h * _U64(0xFF51AFD7ED558CCD)
    h = h ^ (h >> _U64(33))
    h = h * _U64(0xC4CEB9FE1A85EC53)
    return h ^ (h >> _U64(33))


def _token_hashes(
    contents: Sequence[str], params: FingerprintParams
) -> tuple[np.ndarray, np.ndarray]:
    """Hash every token (word or character) of every content into one flat uint64 array.

    Returns the array and the start offset of each content in it (length len(contents) + 1).
    Words are hashed with MurmurHash3 (mmh3), once per distinct word in the batch; characters are
    their code points, mixed when the n-gram is finalised.
    """
    if params.shingle_kind == "char":
        lengths = np.fromiter((len(c) for c in contents), dtype=np.int64, count=len(contents))
        codes = np.frombuffer("".join(contents).encode("utf-32-le"), dtype=np.uint32)
        tokens = codes.astype(np.uint64)
    else:
        words_per_content = [c.split(" ") if c else [] for c in contents]
        lengths = np.fromiter((len(w) for w in words_per_content), np.int64, len(contents))
        flat = [w for words in words_per_content for w in words]
        vocabulary = {w: mmh3.hash64(w, params.seed, signed=False)[0] for w in dict.fromkeys(flat)}
        tokens = np.fromiter((vocabulary[w] for w in flat), dtype=np.uint64, count=len(flat))
    offsets = np.zeros(len(contents) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return tokens, offsets


def _combine(h: np.ndarray, token: np.ndarray) -> np.ndarray:
    return h * _MULTIPLIER + token + _U64(1)


def _shingle_hashes(
    tokens: np.ndarray, offsets: np.ndarray, params: FingerprintParams
) -> tuple[np.ndarray, np.ndarray]:
    """Hash every n-gram of tokens, per content. Returns (hashes, owning content index).

    A content with fewer tokens than the shingle size is one shingle of all its tokens.
    Shingles are grouped by content, in content order.
    """
    n = params.shingle_size
    starts, lengths = offsets[:-1], np.diff(offsets)
    seed = _U64(params.seed)
    # Every window of the flat array, built from contiguous slices; windows that cross a content
    # boundary are computed too and then left out.
    windows = max(len(tokens) - n + 1, 0)
    h = np.full(windows, seed, dtype=np.uint64)
    for j in range(n):
        h = _combine(h, tokens[j : j + windows])
    full_counts = np.maximum(lengths - n + 1, 0)
    owner = np.repeat(np.arange(len(starts)), full_counts)
    within = np.arange(len(owner)) - np.repeat(np.cumsum(full_counts) - full_counts, full_counts)
    hashes, owners = h[starts[owner] + within], owner
    short = np.nonzero((lengths > 0) & (lengths < n))[0]
    if len(short):  # rare: a content shorter than one shingle is a shingle of its own
        short_hashes = np.array(
            [_short_shingle(tokens[offsets[i] : offsets[i + 1]], seed) for i in short],
            dtype=np.uint64,
        )
        order = np.argsort(np.concatenate([owners, short]), kind="stable")
        hashes = np.concatenate([hashes, short_hashes])[order]
        owners = np.concatenate([owners, short])[order]
    return _fmix64(hashes), owners


def _short_shingle(tokens: np.ndarray, seed: np.uint64) -> np.uint64:
    h = np.array([seed], dtype=np.uint64)
    for token in tokens:
        h = _combine(h, token)
    return h[0]


@cache
def _probe_table(num_hashes: int, seed: int, attempts: int) -> np.ndarray:
    """Each bin's fixed sequence of bins to borrow from when it is empty (optimal densification)."""
    bins = np.arange(num_hashes, dtype=np.uint64)[:, None]
    tries = np.arange(1, attempts + 1, dtype=np.uint64)[None, :]
    mixed = _fmix64((bins << _U64(32)) ^ tries ^ (_U64(seed) << _U64(48)))
    return ((mixed >> _U64(32)) * _U64(num_hashes) >> _U64(32)).astype(np.int64)


def _densify(signature: np.ndarray, filled: np.ndarray, params: FingerprintParams) -> None:
    """Fill empty bins in place from the first non-empty bin on each bin's probe sequence."""
    attempts = 32
    rows, cols = np.nonzero(~filled & filled.any(axis=1, keepdims=True))
    while len(rows):
        probes = _probe_table(params.num_hashes, params.seed, attempts)[cols]
        hits = filled[rows[:, None], probes]
        found = hits.any(axis=1)
        chosen = probes[np.arange(len(rows)), hits.argmax(axis=1)]
        signature[rows[found], cols[found]] = signature[rows[found], chosen[found]]
        rows, cols = rows[~found], cols[~found]
        attempts *= 4


def _signatures(
    hashes: np.ndarray, owner: np.ndarray, count: int, params: FingerprintParams
) -> np.ndarray:
    """One-permutation MinHash: high 32 bits pick the bin, low 32 bits are the value."""
    k = params.num_hashes
    bins = ((hashes >> _U64(32)) * _U64(k)) >> _U64(32)
    slot = owner.astype(np.int64) * k + bins.astype(np.int64)
    empty = _U64(1 << 32)
    minima = np.full(count * k, empty, dtype=np.uint64)
    np.minimum.at(minima, slot, hashes & _MASK32)
    minima = minima.reshape(count, k)
    filled = minima != empty
    signature = minima.astype(np.uint32)
    _densify(signature, filled, params)
    return signature


def _band_hashes(signatures: np.ndarray, params: FingerprintParams) -> np.ndarray:
    rows = params.rows_per_band
    grouped = signatures.reshape(len(signatures), params.bands, rows).astype(np.uint64)
    h = np.broadcast_to(
        np.arange(params.bands, dtype=np.uint64) + (_U64(params.seed) << _U64(32)),
        grouped.shape[:2],
    )
    for r in range(rows):
        h = _combine(h, grouped[:, :, r])
    return _fmix64(h)


def _unique_per_owner(hashes: np.ndarray, owner: np.ndarray, count: int) -> list[np.ndarray]:
    """Sorted unique hashes of each content (sorting each segment in place beats a global sort)."""
    bounds = np.zeros(count + 1, dtype=np.int64)
    np.cumsum(np.bincount(owner, minlength=count), out=bounds[1:])
    hashes = hashes.copy()
    for i in range(count):
        hashes[bounds[i] : bounds[i + 1]].sort()
    keep = np.ones(len(hashes), dtype=bool)
    keep[1:] = (hashes[1:] != hashes[:-1]) | (owner[1:] != owner[:-1])
    kept_bounds = np.zeros(count + 1, dtype=np.int64)
    np.cumsum(np.bincount(owner[keep], minlength=count), out=kept_bounds[1:])
    unique = hashes[keep]
    return [unique[kept_bounds[i] : kept_bounds[i + 1]] for i in range(count)]


def fingerprint_batch(texts: Sequence[str], params: FingerprintParams) -> list[Fingerprint]:
    """Fingerprint many texts at once (vectorised across the whole batch)."""
    contents = normalize_batch(texts)
    tokens, offsets = _token_hashes(contents, params)
    hashes, owner = _shingle_hashes(tokens, offsets, params)
    signatures = _signatures(hashes, owner, len(contents), params)
    bands = _band_hashes(signatures, params)
    shingles = _unique_per_owner(hashes, owner, len(contents))
    results = []
    for i, content in enumerate(contents):
        words = content.split(" ") if content else []
        results.append(
            Fingerprint(
                content=content,
                md5=hashlib.md5(content.encode("utf-8")).hexdigest(),
                first_word=words[0] if words else "",
                num_words=len(words),
                shingles=shingles[i],
                signature=signatures[i],
                bands=bands[i],
            )
        )
    return results


def fingerprint(text: str, params: FingerprintParams) -> Fingerprint:
    return fingerprint_batch([text], params)[0]


def shingle_sets(contents: Sequence[str], params: FingerprintParams) -> list[np.ndarray]:
    """Sorted unique shingle hashes of already normalised contents: what verification needs,
    without normalising again or computing signatures."""
    if not contents:
        return []
    tokens, offsets = _token_hashes(contents, params)
    hashes, owner = _shingle_hashes(tokens, offsets, params)
    return _unique_per_owner(hashes, owner, len(contents))


def jaccard(a: np.ndarray, b: np.ndarray) -> float:
    """Exact Jaccard similarity of two sorted unique hash arrays."""
    if not len(a) and not len(b):
        return 1.0
    shared = len(np.intersect1d(a, b, assume_unique=True))
    return shared / (len(a) + len(b) - shared)


def estimated_jaccard(a: Fingerprint, b: Fingerprint) -> float:
    """The signature's estimate: the share of positions where the two signatures agree."""
    return float(np.mean(a.signature == b.signature))
