"""Pure fingerprinting: normalisation, shingles, MinHash signatures and LSH bands.

No I/O and no engine here. The indexer and the searcher both call :func:`fingerprint_batch`, so a
stored record and a query text are always fingerprinted by exactly the same code.

The signature is a one-permutation MinHash with optimal densification (Shrivastava, ICML 2017):
every shingle is hashed once to 64 bits; the high bits choose one of K bins, the low 32 bits are the
value, each bin keeps its minimum, and an empty bin borrows the value of the first non-empty bin on
its own fixed probe sequence. Position ``i`` of two signatures agrees with probability exactly equal
to the Jaccard similarity of the two shingle sets, as with K independent hash functions, at the cost
of one hash per shingle instead of K: shingles + K work per text instead of shingles x K.

The hot loops (case folding, separators, shingle hashing, signatures, bands, MD5s, similarities)
are C, in ``_kernels.c``, and run over a whole batch at once; the texts cross into them as one
array of code points. The functions here allocate what the loops fill and hold the types they
expect.
"""

from __future__ import annotations

import re
import sys
import threading
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from functools import cache
from itertools import pairwise
from typing import Literal, TypeVar

import mmh3
import numpy as np

from . import _kernels
from .errors import InvalidParameter, InvalidText

ShingleKind = Literal["word", "char"]
_Sliceable = TypeVar("_Sliceable", str, np.ndarray)
T = TypeVar("T")


class TokenField(StrEnum):
    """The token fields a store can index; each is also the lookup method that ORs over it,
    and the engine field of the same name.

    A token has two forms: a 64-bit integer key (what the embedded store indexes and the report
    joins on) and a string (what the engines index). Both come from :meth:`keys`.
    """

    SHINGLES = "shingles"
    SIGNATURE = "signature"
    BANDS = "bands"

    def keys(self, fp: Fingerprint) -> np.ndarray:
        """The tokens as int64 keys: a shingle's hash, a signature position and value, a band's
        hash (in band order)."""
        if self is TokenField.SIGNATURE:
            return _signature_keys(fp.signature)
        return (fp.shingles if self is TokenField.SHINGLES else fp.bands).view(np.int64)

    def keys_of(self, fps: Sequence[Fingerprint]) -> tuple[np.ndarray, np.ndarray]:
        """The :meth:`keys` of many fingerprints, one after the other, and how many each has:
        a batch's arrays are stacked at once rather than a fingerprint at a time."""
        if self is TokenField.SHINGLES:
            sets = [fp.shingles for fp in fps]
            sizes = np.fromiter(map(len, sets), np.int64, len(sets))
            return np.concatenate(sets).view(np.int64), sizes
        if self is TokenField.SIGNATURE:
            keys = _signature_keys(np.stack([fp.signature for fp in fps]))
        else:
            keys = np.stack([fp.bands for fp in fps]).view(np.int64)
        return keys.ravel(), np.full(len(fps), keys.shape[1])

    def strings(self, keys: np.ndarray) -> list[str]:
        """The string form of :meth:`keys`: ``9f2c…`` (shingle), ``17_2837461`` (value 2837461
        at signature position 17), ``3_9f2c…`` (band 3)."""
        unsigned = np.asarray(keys, dtype=np.int64).view(np.uint64).tolist()
        if self is TokenField.SHINGLES:
            return [f"{k:016x}" for k in unsigned]
        if self is TokenField.SIGNATURE:
            return [f"{k >> 32}_{k & 0xFFFFFFFF}" for k in unsigned]
        return [f"{band}_{k:016x}" for band, k in enumerate(unsigned)]

    def tokens(self, fp: Fingerprint) -> list[str]:
        return self.strings(self.keys(fp))

    def size(self, fp: Fingerprint) -> int:
        """How many tokens ``fp`` has in this field: the score of an exact duplicate."""
        if self is TokenField.SHINGLES:
            return len(fp.shingles)
        return len(fp.signature if self is TokenField.SIGNATURE else fp.bands)


TOKEN_FIELDS: tuple[str, ...] = tuple(f.value for f in TokenField)


def _signature_keys(signatures: np.ndarray) -> np.ndarray:
    """Signature tokens as int64 keys, position in the high 32 bits and value in the low: of
    one signature, or of each row of many."""
    positions = np.arange(signatures.shape[-1], dtype=np.uint64) << np.uint64(32)
    return (positions | signatures.astype(np.uint64)).view(np.int64)


MAX_HASHES = 1024

# How a store's contents are normalised. 1: NFKC and lowercasing (stores made before 2 keep
# it: their contents were made so). 2, every new store's: NFKC and Unicode case folding
# (`Straße` and `STRASSE` alike), the default-ignorable characters left out (a zero-width space
# or a soft hyphen in scraped text made two words of one, or another word) and control
# characters (NUL) between words: NFKC_Casefold, as search engines' ICU folding normalises.
NORMALIZATION = 2
NORMALIZATIONS = (1, 2)


def check_num_hashes(num_hashes: int) -> int:
    if not 1 <= num_hashes <= MAX_HASHES:
        raise InvalidParameter(
            f"number of hashes must be between 1 and {MAX_HASHES}, not {num_hashes}"
        )
    return num_hashes


@dataclass(frozen=True)
class FingerprintParams:
    """Everything that decides a record's tokens; a store keeps these and refuses others.

    ``fields`` are the token fields the store indexes. Each costs index space and time (per
    record: one token per distinct shingle, K signature tokens, B band tokens), so a store built
    for one lookup method can index that method's field alone.
    """

    shingle_kind: ShingleKind = "char"
    shingle_size: int = 4
    num_hashes: int = 128
    bands: int = 64
    seed: int = 1
    fields: tuple[str, ...] = ("bands",)
    normalization: int = NORMALIZATION

    def __post_init__(self) -> None:
        given = (self.fields,) if isinstance(self.fields, str) else tuple(self.fields)
        unknown = sorted(set(given) - set(TOKEN_FIELDS))
        if unknown or not given:
            raise InvalidParameter(
                f"indexed fields must be some of {', '.join(TOKEN_FIELDS)}, "
                f"not {', '.join(unknown) or repr(self.fields)}"
            )
        # Stored as JSON lists and given in any order: one canonical tuple of plain names.
        object.__setattr__(self, "fields", tuple(f.value for f in TokenField if f in given))
        if self.shingle_kind not in ("word", "char"):
            raise InvalidParameter(
                f"shingle kind must be 'word' or 'char', not {self.shingle_kind!r}"
            )
        if not 1 <= self.shingle_size <= 64:
            raise InvalidParameter(
                f"shingle size must be between 1 and 64, not {self.shingle_size}"
            )
        check_num_hashes(self.num_hashes)
        if self.bands < 1:
            raise InvalidParameter(f"bands must be at least 1, not {self.bands}")
        if self.num_hashes % self.bands:
            raise InvalidParameter(
                f"bands must divide the number of hashes: {self.bands} bands "
                f"do not divide {self.num_hashes} hashes"
            )
        if not 0 <= self.seed < 2**32:
            raise InvalidParameter(f"seed must be between 0 and 2**32-1, not {self.seed}")
        if self.normalization not in NORMALIZATIONS:
            raise InvalidParameter(
                f"normalisation must be one of {NORMALIZATIONS}, not {self.normalization!r}"
            )

    @property
    def rows_per_band(self) -> int:
        return self.num_hashes // self.bands

    @property
    def shingle(self) -> str:
        return f"{self.shingle_kind}:{self.shingle_size}"

    def to_dict(self) -> dict[str, object]:
        return asdict(self) | {"fields": list(self.fields)}

    @classmethod
    def from_dict(cls, data: dict[str, object]) -> FingerprintParams:
        # Every store writes all of its keys; stores made before ``fields`` existed index all
        # three token fields, and those made before ``normalization`` the first one.
        known = {key: data[key] for key in cls.__dataclass_fields__ if key in data}
        return cls(**{"fields": TOKEN_FIELDS, "normalization": 1} | known)  # type: ignore[arg-type]

    def describe(self) -> str:
        return (
            f"shingle {self.shingle}, {self.num_hashes} hashes, {self.bands} bands, "
            f"seed {self.seed}, indexed fields {'+'.join(self.fields)}, "
            f"normalisation {self.normalization}"
        )


def parse_shingle(spec: str) -> tuple[ShingleKind, int]:
    """Parse ``word:3`` or ``char:5``."""
    kind, _, size = spec.partition(":")
    if kind not in ("word", "char") or not size.isdigit() or int(size) < 1:
        raise InvalidParameter(f"shingle must look like word:N or char:N, not {spec!r}")
    return kind, int(size)  # type: ignore[return-value]


@dataclass(slots=True, eq=False)
class Fingerprint:
    """The indexed fields of one text. Token arrays are numpy; string forms are derived.

    Treat it as read-only. (It is not a frozen dataclass because a batch makes one per record,
    and a frozen one takes several times longer to construct.)"""

    content: str
    md5: str
    first_word: str
    num_words: int
    shingle_hashes: np.ndarray | None  # uint64, one per shingle position (repeats included)
    signature: np.ndarray  # uint32, one value per hash position
    bands: np.ndarray  # uint64, one hash per band
    _shingles: np.ndarray | None = field(default=None, repr=False)

    @property
    def shingles(self) -> np.ndarray:
        """Sorted unique shingle hashes: the shingle set, made only when something needs it."""
        if self._shingles is None:
            if self.shingle_hashes is None:
                raise ValueError("this fingerprint was made without its shingles")
            self._shingles = distinct(self.shingle_hashes)
        return self._shingles


# --- normalisation ------------------------------------------------------------------------------


# The blocks where a character's own NFKC may stand for the NFKC of a text that holds it: all
# but those holding a starter that composes with the character before it (Indic vowel signs,
# Hangul jamo and a few more; a test checks this against unicodedata).
_FOLDABLE_BLOCKS = ((0x0001, 0x0900), (0x1E00, 0xD800), (0xE000, 0x10000), (0x1F000, 0x20000))
_EXPANDS = 0x80000000  # a fold table entry that points into the expansions (see fold_case)
_EXPANSIONS = 1 << 14  # room for them: all of Unicode 14's take 4,345


def _in_foldable_block(char: str) -> bool:
    return any(start <= ord(char) < end for start, end in _FOLDABLE_BLOCKS)


@dataclass
class _CodePointTables:
    """Lookup tables over all code points, each filled when a text first holds it (classifying
    all 1.1M takes two seconds, too long for every process start).

    ``is_separator``: whitespace and Unicode punctuation except '-', which normalisation turns
    into word boundaries. ``fold``: what NFKC and lowercasing make of the code point in any text
    of such code points, so that those texts are normalised by table (see :meth:`_fold`).

    Threads share the tables, and the compiled loops read them without the GIL: a code point's
    entries are written before it is marked classified, the expansions are never moved, and one
    thread classifies at a time.
    """

    normalization: int = NORMALIZATION
    is_separator: np.ndarray = field(default_factory=lambda: np.zeros(_CODE_POINTS, np.bool_))
    fold: np.ndarray = field(default_factory=lambda: np.zeros(_CODE_POINTS, np.uint32))
    classified: np.ndarray = field(default_factory=lambda: np.zeros(_CODE_POINTS, np.bool_))
    expansions: np.ndarray = field(default_factory=lambda: np.zeros(_EXPANSIONS, np.uint32))
    expansions_used: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def classify(self, codes: np.ndarray) -> None:
        """Classify every code point of ``codes`` not classified yet, and those it folds to."""
        if _kernels.all_marked(codes, self.classified):  # one pass, where a gather takes three
            return
        with self.lock:
            fresh = distinct(codes[~self.classified[codes]])
            folded: set[int] = set()
            for code in fresh.tolist():
                char = chr(code)
                kind = unicodedata.category(char)
                self.is_separator[code] = char != "-" and (
                    char.isspace() or kind[0] == "P" or (kind == "Cc" and self.normalization > 1)
                )
                self.fold[code], lowered = self._fold(char)
                folded.update(map(ord, lowered))
            self.classified[fresh] = True
        if folded:
            self.classify(np.fromiter(folded, np.uint32, len(folded)))

    def _fold(self, char: str) -> tuple[int, str]:
        """The fold entry of a character, and its NFKC lowercased. The entry is that form as
        one code point, or as ``_EXPANDS | i`` for several (their count at ``expansions[i]``,
        then the code points); or 0 where its text must be normalised in Python: the character
        may combine with a neighbour (its decomposition starts with a combining mark or a
        composing starter), or lowercases by context (capital sigma) or into more characters."""
        decomposed, composed = unicodedata.normalize("NFKD", char), _nfkc(char)
        if self.normalization > 1:
            folded = _case_folded(composed)
            # Case folding needs no context, and its expansions (ß to ss) fold by table, but
            # for one that starts with a combining mark, which may compose with what precedes.
            context = bool(folded) and unicodedata.combining(folded[0]) > 0
        else:
            folded = composed.lower()
            context = "\u03a3" in composed or len(folded) != len(composed)
        if (
            not _in_foldable_block(char)
            or not _in_foldable_block(decomposed[0])
            or unicodedata.combining(decomposed[0])
            or context
        ):
            return 0, folded
        if len(folded) == 1:
            return ord(folded), folded
        at = self.expansions_used
        if at + 1 + len(folded) > len(self.expansions):
            return 0, folded  # no room left (not with Unicode 14): Python normalises such texts
        self.expansions[at : at + 1 + len(folded)] = [len(folded), *map(ord, folded)]
        self.expansions_used += 1 + len(folded)
        return _EXPANDS | at, folded


_CODE_POINTS = sys.maxunicode + 1


@cache
def _tables(normalization: int = NORMALIZATION) -> _CodePointTables:
    return _CodePointTables(normalization)


# Unicode's Default_Ignorable_Code_Point (DerivedCoreProperties.txt): characters that show
# nothing, left out of a text by the second normalisation.
_IGNORABLE_RANGES = (
    (0x00AD, 0x00AD), (0x034F, 0x034F), (0x061C, 0x061C), (0x115F, 0x1160), (0x17B4, 0x17B5),
    (0x180B, 0x180F), (0x200B, 0x200F), (0x202A, 0x202E), (0x2060, 0x206F), (0x3164, 0x3164),
    (0xFE00, 0xFE0F), (0xFEFF, 0xFEFF), (0xFFA0, 0xFFA0), (0xFFF0, 0xFFF8),
    (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A), (0xE0000, 0xE0FFF),
)  # fmt: skip
_IGNORABLE = dict.fromkeys(
    code for start, end in _IGNORABLE_RANGES for code in range(start, end + 1)
)


def _case_folded(text: str) -> str:
    """``text`` (NFKC) case folded, its default-ignorable characters left out, and NFKC again
    where folding undid it: the second normalisation's NFKC_Casefold."""
    return _nfkc(text.casefold().translate(_IGNORABLE))


def _collapse_separators(
    codes: np.ndarray, offsets: np.ndarray, is_separator: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each text's runs of separators become one space between words, none at either end.

    Returns the new code points, each text's offsets into them and each text's word count.
    """
    out = np.empty(len(codes), dtype=np.uint32)
    out_offsets = np.zeros(len(offsets), dtype=np.int64)
    words = np.zeros(len(offsets) - 1, dtype=np.int64)
    written = _kernels.collapse_separators(codes, offsets, is_separator, out, out_offsets, words)
    return out[:written], out_offsets, words


_Joined = tuple[np.ndarray, np.ndarray]  # items joined in one array, and each item's offsets


def _code_points(texts: Sequence[str]) -> _Joined:
    """All texts' code points in one uint32 array, and each text's offsets into it."""
    offsets = _offsets(np.fromiter(map(len, texts), np.int64, len(texts)))
    codes = np.empty(offsets[-1], dtype=np.uint32)
    _kernels.code_points(list(texts), offsets, codes)
    return codes, offsets


def _offsets(lengths: np.ndarray) -> np.ndarray:
    """Where each of many items starts in their concatenation, and where the last one ends."""
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return offsets


def distinct(values: np.ndarray) -> np.ndarray:
    """The distinct values, sorted: np.unique's answer, by a sort. np.unique without its
    indices or counts imports numpy.ma to look for a masked array, 5 ms of a process."""
    ordered = np.sort(values)
    first = np.ones(len(ordered), dtype=bool)
    first[1:] = ordered[1:] != ordered[:-1]
    return ordered[first]


def _slices(whole: _Sliceable, offsets: np.ndarray) -> list[_Sliceable]:
    """Cut a batch's joined text or array back into its items."""
    return [whole[a:b] for a, b in pairwise(offsets.tolist())]


def _nfkc(text: str) -> str:
    # The quick check is much cheaper than normalising, and most texts are already NFKC.
    return text if unicodedata.is_normalized("NFKC", text) else unicodedata.normalize("NFKC", text)


def _folded(
    texts: Sequence[str], codes: np.ndarray, offsets: np.ndarray, tables: _CodePointTables
) -> _Joined:
    """The texts' code points after NFKC and lowercasing: by table where a text allows it (most
    do, and the table is many times faster), in Python for the others. ``codes`` are classified;
    so are the code points returned."""
    folded_offsets = np.zeros(len(offsets), dtype=np.int64)
    unfoldable = np.zeros(len(texts), dtype=np.bool_)
    folded = _kernels.fold_case(
        codes, offsets, tables.fold, tables.expansions, folded_offsets, unfoldable
    )
    if not unfoldable.any():
        return np.frombuffer(folded, dtype=np.uint32), folded_offsets
    fold = _case_folded if tables.normalization > 1 else str.lower
    normalized = [fold(_nfkc(texts[t])) for t in np.flatnonzero(unfoldable).tolist()]
    lengths = np.diff(folded_offsets)
    lengths[unfoldable] = np.fromiter(map(len, normalized), np.int64, len(normalized))
    joined = np.empty(lengths.sum(), dtype=np.uint32)
    by_table = np.repeat(~unfoldable, lengths)
    joined[by_table] = np.frombuffer(folded, dtype=np.uint32)
    joined[~by_table] = by_python = _code_points(normalized)[0]
    tables.classify(by_python)
    return joined, _offsets(lengths)


def _normalized_code_points(
    texts: Sequence[str], normalized: bool = False, normalization: int = NORMALIZATION
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The normalised texts as code points: (code points, offsets, word counts)."""
    codes, offsets = _code_points(texts)
    tables = _tables(normalization)
    tables.classify(codes)
    if not normalized:
        codes, offsets = _folded(texts, codes, offsets, tables)
    return _collapse_separators(codes, offsets, tables.is_separator)


def _strings(codes: np.ndarray, offsets: np.ndarray) -> list[str]:
    """The texts whose code points :func:`_code_points` gives."""
    return _kernels.strings(codes, offsets)


def normalize_batch(texts: Sequence[str], normalization: int = NORMALIZATION) -> list[str]:
    """NFKC, lowercase (case folded, default-ignorable characters left out, controls between
    words: the second ``normalization``), punctuation except '-' to spaces, whitespace runs to
    one space, trimmed."""
    codes, offsets, _ = _normalized_code_points(texts, normalization=normalization)
    return _strings(codes, offsets)


def normalize(text: str, normalization: int = NORMALIZATION) -> str:
    return normalize_batch([text], normalization)[0]


# --- hashing ------------------------------------------------------------------------------------


def _tokens(
    contents: Sequence[str],
    params: FingerprintParams,
    code_points: tuple[np.ndarray, np.ndarray] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Every token of every content in one flat array, and each content's offsets into it.

    Characters are their code points (``code_points``, when the caller has them already); words
    are hashed with MurmurHash3 (mmh3), once per distinct word in the batch.
    """
    if params.shingle_kind == "char":
        return code_points or _code_points(contents)
    words_per_content = [c.split(" ") if c else [] for c in contents]
    offsets = _offsets(np.fromiter(map(len, words_per_content), np.int64, len(contents)))
    flat = [w for words in words_per_content for w in words]
    vocabulary = {w: mmh3.hash64(w, params.seed, signed=False)[0] for w in dict.fromkeys(flat)}
    return np.fromiter(map(vocabulary.__getitem__, flat), np.uint64, len(flat)), offsets


def _sketch_contents(
    contents: Sequence[str],
    params: FingerprintParams,
    code_points: tuple[np.ndarray, np.ndarray] | None = None,
    keep_hashes: bool = True,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(shingle hashes, each text's offsets into them, signatures, band hashes) of every text,
    in one pass over the tokens (see ``sketch`` in ``_kernels.c``). Without ``keep_hashes``
    the shingle hashes are empty: they are the largest part, and often unused."""
    tokens, offsets = _tokens(contents, params, code_points)
    hash_offsets = _offsets(_shingle_counts(offsets, params))
    hashes = np.empty(hash_offsets[-1] if keep_hashes else 0, dtype=np.uint64)
    signatures = np.zeros((len(contents), params.num_hashes), dtype=np.uint32)
    bands = np.empty((len(contents), params.bands), dtype=np.uint64)
    _kernels.sketch(
        tokens,  # uint32 code points or uint64 word hashes
        tokens.itemsize,
        offsets,
        params.shingle_size,
        params.seed,
        params.num_hashes,
        params.bands,
        hash_offsets,
        hashes,
        signatures,
        bands,
    )
    return hashes, hash_offsets, signatures, bands


def _shingle_counts(offsets: np.ndarray, params: FingerprintParams) -> np.ndarray:
    """How many shingles each text has, from its tokens' offsets (``shingle_count`` in C)."""
    lengths = np.diff(offsets)
    return np.where(lengths > 0, np.maximum(lengths - params.shingle_size + 1, 1), 0)


# Texts per compiled pass: a larger pass's arrays fall out of the CPU caches and run slower.
_PASS_SIZE = 1000


def first_word(content: str) -> str:
    """The first word of a normalised content: what the first-word filter compares."""
    return content.partition(" ")[0]


def fingerprint_batch(
    texts: Sequence[str],
    params: FingerprintParams,
    *,
    normalized: bool = False,
    shingles: bool = True,
) -> list[Fingerprint]:
    """Fingerprint many texts at once: one compiled pass over the whole batch.

    ``normalized``: the texts are stored contents, normalised already. Normalisation is
    idempotent, so the Unicode steps (NFKC, lowercasing), the costly ones, are skipped.
    Without ``shingles`` the fingerprints keep no shingle hashes (``shingle_hashes`` is None),
    for a caller that only stores the other fields: they are most of a fingerprint's memory.
    """
    if len(texts) > _PASS_SIZE:
        return [
            fp
            for start in range(0, len(texts), _PASS_SIZE)
            for fp in fingerprint_batch(
                texts[start : start + _PASS_SIZE], params, normalized=normalized, shingles=shingles
            )
        ]
    codes, offsets, word_counts = _normalized_code_points(texts, normalized, params.normalization)
    contents = _strings(codes, offsets)
    hashes, hash_offsets, signatures, bands = _sketch_contents(
        contents, params, (codes, offsets), keep_hashes=shingles
    )
    try:
        md5s = _kernels.md5_hex(codes, offsets)  # without the GIL: beside the indexer's writer
    except ValueError:  # the one text UTF-8 cannot encode
        bad = next(text for text in texts if holds_surrogates(text))
        raise InvalidText(
            f"{bad[:60]!r} is not Unicode text: it holds bytes that are not UTF-8 or half of a "
            "surrogate pair"
        ) from None
    return [
        Fingerprint(
            content=content,
            md5=md5,
            first_word=first_word(content),
            num_words=num_words,
            shingle_hashes=shingle_hashes,
            signature=signature,
            bands=band_hashes,
        )
        for content, md5, num_words, shingle_hashes, signature, band_hashes in zip(
            contents,
            md5s,
            word_counts.tolist(),
            _slices(hashes, hash_offsets) if shingles else [None] * len(contents),
            signatures,
            bands,
            strict=True,
        )
    ]


def md5_digests(texts: Sequence[str]) -> np.ndarray:
    """Each text's MD5 digest (of its UTF-8), as 16-byte strings ("S16"); the texts must be
    Unicode (:func:`holds_surrogates`)."""
    codes, offsets = _code_points(texts)
    digests = np.empty(len(texts), dtype="S16")
    _kernels.md5_digests(codes, offsets, digests)
    return digests


def holds_surrogates(text: str) -> bool:
    """Whether a text holds lone surrogates (bytes that were not UTF-8, read with
    surrogateescape, or a JSON escape of half a pair): strict UTF-8 refuses to encode them,
    four times faster than searching for them."""
    if text.isascii():
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def fingerprint(text: str, params: FingerprintParams, *, normalized: bool = False) -> Fingerprint:
    return fingerprint_batch([text], params, normalized=normalized)[0]


def shingle_sets(contents: Sequence[str], params: FingerprintParams) -> list[np.ndarray]:
    """Sorted unique shingle hashes of already normalised contents: what verification needs,
    without normalising again."""
    if not contents:
        return []
    return _slices(*shingle_segments(contents, params))


def token_keys(
    contents: Sequence[str], params: FingerprintParams, field: TokenField
) -> tuple[np.ndarray, np.ndarray]:
    """The ``field`` keys of already normalised contents, content after content, as
    :meth:`TokenField.keys` gives them, and how many each content has: what a report joins on,
    without a :class:`Fingerprint` (and its MD5) per content."""
    if not contents:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
    if field is TokenField.SHINGLES:
        sets, set_offsets = shingle_segments(contents, params)
        return sets.view(np.int64), np.diff(set_offsets)
    _, _, signatures, bands = _sketch_contents(contents, params, keep_hashes=False)
    if field is TokenField.BANDS:
        return bands.ravel().view(np.int64), np.full(len(contents), params.bands)
    return _signature_keys(signatures).ravel(), np.full(len(contents), params.num_hashes)


def shingle_texts(content: str, params: FingerprintParams) -> dict[int, str]:
    """Each shingle of a normalised content, by its hash: the text behind a hash, for people."""
    if params.shingle_kind == "char":
        grams = [content[i : i + params.shingle_size] for i in range(len(content))]
    else:
        words = content.split(" ")
        grams = [" ".join(words[i : i + params.shingle_size]) for i in range(len(words))]
    hashes, offsets = shingle_segments(grams, params)
    return {
        int(hashes[offsets[i]]): gram for i, gram in enumerate(grams) if offsets[i + 1] > offsets[i]
    }


def shingle_segments(
    contents: Sequence[str], params: FingerprintParams
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`shingle_sets` as one array of every set, set after set, and each set's offsets."""
    numbers, offsets, distinct = shingle_numbers(contents, params)
    return distinct[numbers], offsets


# Contents past which shingle_numbers numbers half of them on a second thread.
PARALLEL_CONTENTS = 2_000

Numbered = tuple[np.ndarray, np.ndarray, np.ndarray]


def shingle_numbers(
    contents: Sequence[str], params: FingerprintParams, *, in_hash_order: bool = True
) -> Numbered:
    """The shingle sets of normalised contents as numbers: (each set's shingles as their
    numbers among all the sets' distinct shingles (int32), set after set; each set's offsets;
    the distinct shingles' hashes, in order of first sight). What a report weighs and marks,
    each distinct shingle once. Each set is sorted by hash unless ``in_hash_order`` is False
    (then in order of first sight, for similarities that need no order). Past
    PARALLEL_CONTENTS, each half of the contents is numbered on a thread of its own (20,000
    ads: 0.12 s on one), into its part of one array, and the two numberings are made one."""
    tokens, offsets = _tokens(contents, params)
    rooms = _offsets(_shingle_counts(offsets, params))  # where each content's numbers may go
    numbers = np.empty(int(rooms[-1]), dtype=np.int32)

    def numbered(part: slice) -> tuple[np.ndarray, np.ndarray]:
        """The part's set offsets and distinct shingles; its numbers from its first room on."""
        room = int(rooms[part.start])
        set_offsets = np.zeros(part.stop - part.start + 1, dtype=np.int64)
        distinct = _kernels.shingle_numbers(
            tokens,
            tokens.itemsize,
            offsets[part.start : part.stop + 1],
            params.shingle_size,
            params.seed,
            in_hash_order,
            numbers[room:],
            set_offsets,
        )
        return set_offsets, np.frombuffer(distinct, dtype=np.uint64)

    if len(contents) < PARALLEL_CONTENTS:
        set_offsets, distinct = numbered(slice(0, len(contents)))
        return numbers[: set_offsets[-1]], set_offsets, distinct
    (set_offsets, distinct), (later_offsets, later_distinct) = _on_two_threads(
        numbered, len(contents)
    )
    renumbered, new = _renumbering(distinct, later_distinct)
    # The second half's numbers, renumbered, move down behind the first's, a run at a time:
    # each run is read before its place (at or before it) is written.
    first, room = int(set_offsets[-1]), int(rooms[len(set_offsets) - 1])
    total = first + int(later_offsets[-1])
    for start in range(first, total, RENUMBERED_RUN):
        stop = min(start + RENUMBERED_RUN, total)
        numbers[start:stop] = renumbered[numbers[room + start - first : room + stop - first]]
    return (
        numbers[:total],
        np.concatenate([set_offsets, later_offsets[1:] + first]),
        np.concatenate([distinct, new]),
    )


# Numbers renumbered at once (see shingle_numbers): a run's copy stays small.
RENUMBERED_RUN = 1 << 20


def _renumbering(distinct: np.ndarray, later: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """How a second numbering (of the distinct shingles ``later``) continues the first (of
    ``distinct``), as numbering both at once gives it: the number of each of ``later`` (the
    first's, where it holds the shingle, else the next new one in their order of first
    sight), and its new shingles."""
    by_hash = np.argsort(distinct)
    at = np.searchsorted(distinct, later, sorter=by_hash).clip(max=len(distinct) - 1)
    held = np.zeros(len(later), dtype=bool)
    if len(distinct):
        held = distinct[by_hash[at]] == later
    new = np.flatnonzero(~held)
    renumbered = np.empty(len(later), dtype=np.int32)
    renumbered[held] = by_hash[at[held]]
    renumbered[new] = len(distinct) + np.arange(len(new), dtype=np.int32)
    return renumbered, later[new]


def word_numbers(contents: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Every word of normalised contents (words between single spaces) as a number, equal words
    alike, content after content (uint32), and each content's offsets into them."""
    codes, offsets = _code_points(contents)
    numbers = np.empty((len(codes) + len(contents)) // 2 + 1, dtype=np.uint32)  # words at most
    word_offsets = np.empty(len(contents) + 1, dtype=np.int64)
    written = _kernels.word_numbers(codes, offsets, numbers, word_offsets)
    return numbers[:written], word_offsets


# Pairs whose words are numbered at once (see word_edit_distances).
WORD_PAIRS = 2000


def word_edit_distance(a: str, b: str) -> int:
    """The Levenshtein distance of two normalised contents counted in words."""
    return word_edit_distances([a, b], [0], [1])[0]


def word_edit_distances(contents: Sequence[str], left: list[int], right: list[int]) -> list[int]:
    """:func:`word_edit_distance` of contents[left[i]] and contents[right[i]] for many pairs, in
    one compiled pass over their word numbers (``word_edit_distances`` in ``_kernels.c``). The
    words are numbered afresh for every WORD_PAIRS pairs: a pair needs equal numbers for equal
    words only within itself, and the code points of a few thousand contents at a time stay
    small."""
    distances: list[int] = []
    for start in range(0, len(left), WORD_PAIRS):
        pairs = np.array(left[start : start + WORD_PAIRS] + right[start : start + WORD_PAIRS])
        needed, where = np.unique(pairs.astype(np.int64), return_inverse=True)
        numbers, offsets = word_numbers([contents[i] for i in needed.tolist()])
        out = np.empty(len(pairs) // 2, dtype=np.int64)
        where = where.astype(np.int64)
        _kernels.word_edit_distances(numbers, offsets, where[: len(out)], where[len(out) :], out)
        distances += out.tolist()
    return distances


def shared_count(a: np.ndarray, b: np.ndarray) -> int:
    """How many values two sorted unique uint64 arrays share (a merge, no allocation)."""
    return _kernels.shared_count(a, b)


def jaccard(a: np.ndarray, b: np.ndarray) -> float:
    """Exact Jaccard similarity of two sorted unique hash arrays."""
    if not len(a) and not len(b):
        return 1.0
    shared = shared_count(a, b)
    return shared / (len(a) + len(b) - shared)


def jaccard_pairs(
    contents: Sequence[str], left: np.ndarray, right: np.ndarray, params: FingerprintParams
) -> np.ndarray:
    """Exact Jaccard similarity of the shingle sets of contents[left[i]] and contents[right[i]]
    (already normalised contents), for many pairs at once: equal to :func:`jaccard` of the two
    :func:`shingle_sets`."""
    numbers, offsets, distinct = shingle_numbers(contents, params, in_hash_order=False)
    return pair_similarities(numbers, len(distinct), None, offsets, left, right)


def estimated_jaccard(a: Fingerprint, b: Fingerprint) -> float:
    """The signature's estimate: the share of positions where the two signatures agree."""
    return float(np.mean(a.signature == b.signature))


# --- rarity-weighted similarity -------------------------------------------------------------------


# Records that hold none of the shingles, added to every store's count: a store of a handful of
# records says little about which shingles are rare, and this keeps its weights near equal (the
# similarity then near the unweighted cosine) until the store has records enough to tell.
PRIOR_RECORDS = 100


# The power of its document frequency that makes a shingle common. Near-duplicates raise the
# count of the shingles they share, a group of k copies by k, so full counts weigh a large
# group's own words least: Cora's references (groups of up to 240) reach F1 0.924 with them,
# 0.939 with this power, and DBLP-ACM 0.906 and 0.924, where Fodors-Zagat falls from 0.922
# to 0.883, still far above word-set Jaccard's 0.663 (benchmarks/README.md: the setting that
# loses least against that baseline on its worst dataset).
FREQUENCY_POWER = 0.75


# Past this many records a store weighs its shingles as a sample of this many would: by the
# share of records that hold each, a shingle rarer than one in REFERENCE_RECORDS counting as
# held by one. Counted in the whole store, a shingle only one record holds (a typo) weighs
# ln(N) and grows with the store, so the same two records grow less similar as records are
# added: a million generated person records lost F1 0.028 against 10,000 (0.965 against 0.993)
# at the threshold read from their data, and 0.011 with this reference (0.982). Stores of up to
# this many records (Febrl, the Kijiji ads, every public set but Walmart-Amazon's 24,628) weigh
# as whole counts weigh them.
REFERENCE_RECORDS = 10_000


def idf(document_frequency: np.ndarray, records: int) -> np.ndarray:
    """Inverse document frequency as Lucene's BM25 scores it (Solr's and Elasticsearch's default),
    ln(1 + (N - n + 0.5) / (n + 0.5)), for a shingle held by d of N records with n = d to the
    :data:`FREQUENCY_POWER` and N counting :data:`PRIOR_RECORDS` more; past
    :data:`REFERENCE_RECORDS`, d and N are those of a sample of that many records. A shingle no
    record holds weighs most; one every record holds, least but above zero."""
    held = np.asarray(document_frequency, dtype=np.float64)
    records = max(records, 0)
    if records > REFERENCE_RECORDS:
        sampled = np.maximum(held * (REFERENCE_RECORDS / records), 1.0)
        held, records = np.where(held > 0, sampled, 0.0), REFERENCE_RECORDS
    n = held**FREQUENCY_POWER
    return np.log1p((records + PRIOR_RECORDS - n + 0.5) / (n + 0.5))


def weighted_similarity(
    a: np.ndarray, wa: np.ndarray, b: np.ndarray, wb: np.ndarray, agreement: float
) -> float:
    """Cosine of two shingle sets whose shingles weigh their IDF (sorted unique hashes ``a``
    and ``b``, each shingle's weight in ``wa`` and ``wb``): the share of the two texts' weight
    they have in common, so a shared house number counts more than a shared ``st``; times the
    ``agreement`` of the two contents' numerals where the similarity weighs them
    (:func:`numeral_agreement`), else 1. 1.0 for two empty sets, as :func:`jaccard`."""
    return _kernels.weighted_similarity(a, wa, b, wb) * agreement


# Pairs past which pair_similarities measures half of them on a second thread.
PARALLEL_PAIRS = 200_000


def pair_similarities(
    numbers: np.ndarray,
    distinct: int,
    weights: np.ndarray | None,
    offsets: np.ndarray,
    left: np.ndarray,
    right: np.ndarray,
    numerals: Numerals | None = None,
) -> np.ndarray:
    """The similarity of sets left[i] and right[i], for many pairs at once: their exact Jaccard
    when ``weights`` is None, else :func:`weighted_similarity`, times the agreement of the two
    contents' ``numerals`` when given (:meth:`Numerals.agreement`): the same floats as one pair
    at a time. The sets are :func:`shingle_numbers`' (``distinct`` shingles in all);
    ``weights`` gives each distinct shingle's weight."""
    result = np.empty(len(left), dtype=np.float64)
    if len(numbers) and (numbers.min() < 0 or numbers.max() >= distinct):
        raise ValueError("pair_similarities: shingle numbers must be below distinct")
    # Where they fit 16 bits, the sets are read from a 16-bit copy, which both threads share:
    # half the bytes every pair reads.
    numbers = np.ascontiguousarray(numbers, dtype=np.uint16 if distinct <= 1 << 16 else np.int32)
    weights = None if weights is None else np.ascontiguousarray(weights, dtype=np.float64)
    offsets = _int64(offsets)
    # A report's sides are int32 already (the sets number fewer than 2**31): no copy.
    left, right = (np.ascontiguousarray(side, dtype=np.int32) for side in (left, right))

    def measure(part: slice) -> None:
        _kernels.pair_similarities(
            numbers,
            numbers.itemsize,
            distinct,
            weights,
            offsets,
            left[part],
            right[part],
            result[part],
        )

    _in_halves(measure, len(left))
    if weights is not None and numerals is not None:
        _in_halves(lambda part: numerals.weigh(result[part], left[part], right[part]), len(left))
    return result


def _in_halves(work: Callable[[slice], None], pairs: int) -> None:
    """``work`` of every pair, or of each half on a thread of its own past PARALLEL_PAIRS."""
    if pairs < PARALLEL_PAIRS:
        work(slice(0, pairs))
    else:
        _on_two_threads(work, pairs)


def _on_two_threads(work: Callable[[slice], T], count: int) -> tuple[T, T]:
    """``work`` of the first and of the second half of ``count`` items, the second on another
    thread: for kernels that run without the GIL, on inputs large enough to pay for a thread
    (a complete report measures millions of pairs)."""
    from concurrent.futures import ThreadPoolExecutor

    half = count // 2
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="neardup-halves") as helper:
        other = helper.submit(work, slice(half, count))
        return work(slice(0, half)), other.result()


def shared_counts(
    numbers: np.ndarray, distinct: int, offsets: np.ndarray, left: np.ndarray, right: np.ndarray
) -> np.ndarray:
    """How many members sets left[i] and right[i] share, sets as :func:`pair_similarities`
    takes them: from their exact Jaccard J, shared = J (|a| + |b|) / (1 + J), rounded."""
    sizes = np.diff(offsets)
    jaccard = pair_similarities(numbers, distinct, None, offsets, left, right)
    return np.rint(jaccard * (sizes[left] + sizes[right]) / (1 + jaccard)).astype(np.int64)


# --- numerals ---------------------------------------------------------------------------------

# A numeral: a run of digits in a normalised content ("12th st" holds 12, "456-0488" 456 and 0488).
_NUMERAL = re.compile(r"\d+")


# Numerals are told apart by their value where it has at most this many digits past its leading
# zeros (an int64 holds it), else by those digits.
_VALUE_DIGITS = 18

# How much of a pair's similarity rests on their numerals agreeing, with --similarity numerals.
# House numbers, zip codes, pages, phone and model numbers tell records apart that share most of
# their words: a few shingles of a differing number weigh little against a street and a city.
# At each dataset's best threshold picked with the truth, 0.15 raised 19 of 25 datasets (Cora
# 0.940 -> 0.956, DBLP-ACM 0.929 -> 0.946) and lost at most 0.003 (CDDB); 0.2 and 0.25 lost up
# to 0.010 and 0.015, 0.1 gained less (benchmarks/README.md, "A similarity that weighs
# numerals"). The default similarity: with the threshold read from the records it leaves 7 of 21
# public sets below word-set Jaccard's oracle baseline where the weighted similarity alone leaves
# 9 (DBLP-ACM 0.924 -> 0.944, Cora 0.939 -> 0.952). Where copies differ in their numbers (two
# ledgers' amounts and dates: 0.560 -> 0.379) it takes them apart: `--similarity weighted`.
NUMERAL_WEIGHT = 0.15


class Numerals:
    """The numerals of some normalised contents, each content's a set, for
    :meth:`agreement` of pairs of them."""

    def __init__(self, contents: Sequence[str]) -> None:
        owners, values, wide = _kernels.numeral_runs(list(contents), _VALUE_DIGITS)
        owner = np.frombuffer(owners, dtype=np.int64)
        keys = np.frombuffer(values, dtype=np.int64).copy()  # each run's value, 0 or more
        # A run of more digits is told apart by its digits: those runs are numbered below 0.
        numbered: dict[str, int] = {}
        for run, start, end in np.frombuffer(wide, dtype=np.int64).reshape(-1, 3).tolist():
            digits = _digits_of(contents[owner[run]][start:end])
            keys[run] = numbered.setdefault(digits, -1 - len(numbered))
        held_keys, codes = np.unique(keys, return_inverse=True)
        self.distinct = len(held_keys)
        width = max(self.distinct, 1)
        held = distinct(owner * width + codes)
        self.members = (held % width).astype(np.int32)  # each content's set, sorted
        self.sizes = np.bincount(held // width, minlength=len(contents))
        self.offsets = _offsets(self.sizes)

    def agreement(self, left: np.ndarray, right: np.ndarray) -> np.ndarray:
        """For each pair of contents left[i] and right[i]: 1 less NUMERAL_WEIGHT times the
        share of the numerals of the one with fewer that the other lacks, numerals compared by
        their value; 1 where either holds none (a copy that drops a number, or a record with
        none, says nothing against it)."""
        agreement = np.ones(len(left), dtype=np.float64)
        self.weigh(agreement, left, right)
        return agreement

    def weigh(self, similarities: np.ndarray, left: np.ndarray, right: np.ndarray) -> None:
        """Multiply each of ``similarities`` (float64, in place) by the :meth:`agreement` of
        contents left[i] and right[i], in C and without a temporary array: a report of 20,000
        ads weighs 2.7 million pairs."""
        _kernels.numeral_agreement(
            self.members,
            self.offsets,
            self.distinct,
            np.ascontiguousarray(left, dtype=np.int32),
            np.ascontiguousarray(right, dtype=np.int32),
            NUMERAL_WEIGHT,
            similarities,
        )


def _digits_of(numeral: str) -> str:
    """A numeral's digits in ASCII (``٣٤`` is ``34``)."""
    return "".join(str(unicodedata.decimal(digit)) for digit in numeral)


def numerals(content: str) -> tuple[str, ...]:
    """The distinct numerals of a normalised content, in the order they first appear."""
    return tuple(dict.fromkeys(_NUMERAL.findall(content)))


def numeral_agreement(a: str, b: str) -> float:
    """:meth:`Numerals.agreement` of two normalised contents: the same float."""
    return float(Numerals([a, b]).agreement(np.array([0]), np.array([1]))[0])


def _int64(values: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(values, dtype=np.int64)


# (shingle keys, how many records hold each): frequency_counts of some records.
Counted = tuple[np.ndarray, np.ndarray]


def frequency_counts(fingerprints: Sequence[Fingerprint]) -> Counted:
    """(shingle keys, how many of the records hold each): document frequencies of some records,
    keys as :meth:`TokenField.keys` gives them (int64, sorted). One pass over the shingles, with
    no set made per record."""
    values, counts = _kernels.document_frequencies([fp.shingle_hashes for fp in fingerprints])
    keys = np.frombuffer(values, dtype=np.int64)
    order = np.argsort(keys)
    return keys[order], np.frombuffer(counts, dtype=np.int64)[order]


# Characters of contents Frequencies.held numbers at once: its arrays stay within ~20 MB, which
# the heap keeps for the rest of the report once freed (8 million: a million people's report
# from Elasticsearch peaked 0.2 GB higher).
HELD_CHUNK_CHARACTERS = 1_000_000


@dataclass(frozen=True)
class Frequencies:
    """How many of a store's ``records`` hold each of some shingles (``keys``, sorted int64
    as :meth:`TokenField.keys` gives them; ``counts`` in the same order)."""

    records: int
    keys: np.ndarray
    counts: np.ndarray

    def plus(self, other: Frequencies) -> Frequencies:
        """The counts of both sets of records together (records that are not stored yet)."""
        keys, where = np.unique(np.concatenate([self.keys, other.keys]), return_inverse=True)
        counts = np.zeros(len(keys), dtype=np.int64)
        np.add.at(counts, where, np.concatenate([self.counts, other.counts]))
        return Frequencies(self.records + other.records, keys, counts)

    @classmethod
    def held(
        cls, contents: Sequence[str], copies: np.ndarray, params: FingerprintParams
    ) -> Frequencies:
        """The frequencies of a store counted from every content it holds (normalised, each
        held by ``copies`` records): the counts the store keeps, as each record adds its
        distinct shingles once. HELD_CHUNK_CHARACTERS of contents are numbered at a time."""
        copies = np.asarray(copies, dtype=np.int64)
        ends = np.cumsum(np.fromiter(map(len, contents), np.int64, len(contents)))
        passed = np.arange(
            HELD_CHUNK_CHARACTERS, ends[-1] if len(ends) else 0, HELD_CHUNK_CHARACTERS
        )
        cuts = [0, *np.unique(np.searchsorted(ends, passed)).tolist(), len(contents)]
        parts: tuple[list[np.ndarray], list[np.ndarray]] = ([], [])
        for start, stop in pairwise(cuts):
            numbers, offsets, shingles = shingle_numbers(
                contents[start:stop], params, in_hash_order=False
            )
            holders = np.repeat(copies[start:stop], np.diff(offsets))
            parts[0].append(shingles.view(np.int64))
            parts[1].append(np.bincount(numbers, weights=holders, minlength=len(shingles)))
        keys, where = np.unique(np.concatenate(parts[0]), return_inverse=True)
        counts = np.bincount(where, weights=np.concatenate(parts[1]), minlength=len(keys))
        return cls(int(copies.sum()), keys, counts.astype(np.int64))

    def weights(self, shingles: np.ndarray) -> np.ndarray:
        """The IDF of each shingle of a set; a shingle not among ``keys`` is held by none."""
        wanted = np.asarray(shingles).view(np.int64)
        if not len(self.keys):
            return idf(np.zeros(len(wanted)), self.records)
        at = np.minimum(np.searchsorted(self.keys, wanted), len(self.keys) - 1)
        return idf(np.where(self.keys[at] == wanted, self.counts[at], 0), self.records)
