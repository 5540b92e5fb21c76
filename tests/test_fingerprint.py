import hashlib
import importlib
import math
import random
import re
import sys
import unicodedata
from concurrent.futures import ThreadPoolExecutor
from itertools import combinations, pairwise

import Levenshtein
import numpy as np
import pytest

from neardup.errors import InvalidParameter
from neardup.fingerprint import (
    FREQUENCY_POWER,
    NUMERAL_WEIGHT,
    PRIOR_RECORDS,
    REFERENCE_RECORDS,
    TOKEN_FIELDS,
    Fingerprint,
    FingerprintParams,
    Frequencies,
    Numerals,
    TokenField,
    estimated_jaccard,
    fingerprint,
    fingerprint_batch,
    frequency_counts,
    idf,
    jaccard,
    jaccard_pairs,
    md5_digests,
    normalize,
    normalize_batch,
    numeral_agreement,
    pair_similarities,
    parse_shingle,
    shingle_numbers,
    shingle_sets,
    token_keys,
    weighted_similarity,
    word_edit_distance,
    word_edit_distances,
    word_numbers,
)

WORD3 = FingerprintParams("word", 3, 20, 5)
# The module: the package exports a function of the same name.
fingerprinting = importlib.import_module("neardup.fingerprint")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Art's Delicatessen", "art s delicatessen"),
        ("  Hello,   WORLD!\t\n", "hello world"),
        ("well-known (co-op)", "well-known co-op"),
        ("ﬁne Ｆｕｌｌ width", "fine full width"),  # NFKC folds ligatures and full-width forms
        ("«quoted» — dash…", "quoted dash"),
        ("ÉCOLE Straße", "école strasse"),  # case folded: STRASSE alike
        ("Ros\u00adsi Via\u200bRoma", "rossi viaroma"),  # soft hyphen, zero-width space
        ("Anna\x00Rossi\x1fRoma", "anna rossi roma"),  # control characters part words
        ("a+b=c $5", "a+b=c $5"),  # symbols are not punctuation
        ("¿Qué? ¡Sí!", "qué sí"),
        ("", ""),
        ("!!! ...", ""),
    ],
)
def test_normalize(text: str, expected: str) -> None:
    assert normalize(text) == expected


def test_stores_made_before_the_second_normalisation_keep_the_first() -> None:
    texts = ["ÉCOLE Straße", "Ros\u00adsi", "Anna\x00Rossi", "ΟΔΟΣ"]
    assert normalize_batch(texts, 1) == ["école straße", "ros\u00adsi", "anna\x00rossi", "οδος"]
    assert normalize_batch(texts, 2) == ["école strasse", "rossi", "anna rossi", "οδοσ"]
    assert FingerprintParams.from_dict({"bands": 64}).normalization == 1  # a store's settings
    assert FingerprintParams().normalization == 2  # a new store's


def test_normalize_is_idempotent_and_batch_equals_single() -> None:
    texts = ["Art's Deli, 12224 Ventura Blvd.", "«quoted» — dash…", "ＡＢＣ  def", "x"]
    batch = normalize_batch(texts)
    assert batch == [normalize(t) for t in texts]
    assert normalize_batch(batch) == batch


def reference_normalize(text: str, normalization: int = 2) -> str:
    """Normalisation as its definition says, a character at a time: NFKC and lowercasing, or
    NFKC_Casefold (default-ignorable characters left out, by Unicode's list)."""
    composed = unicodedata.normalize("NFKC", text)
    if normalization == 1:
        folded = composed.lower()
    else:
        kept = "".join(c for c in composed.casefold() if not DEFAULT_IGNORABLE.match(c))
        folded = unicodedata.normalize("NFKC", kept)

    def separates(c: str) -> bool:
        kind = unicodedata.category(c)
        return c != "-" and (c.isspace() or kind[0] == "P" or (normalization > 1 and kind == "Cc"))

    return " ".join("".join(" " if separates(c) else c for c in folded).split())


# Unicode 15's Default_Ignorable_Code_Point, as DerivedCoreProperties.txt lists it.
DEFAULT_IGNORABLE = re.compile(
    "[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e"
    "\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufff8\U0001bca0-\U0001bca3"
    "\U0001d173-\U0001d17a\U000e0000-\U000e0fff]"
)


# Characters that NFKC changes, alone or next to others, or that lowercase in context.
TRICKY = (
    "AÉßİΣσς¨²ºﬁ…Å\u212b\u0301\u0308\u0327ᄀ\u1161\u11a8가ㄱ\u09cb\u09be\u0b47\u0b3e"
    "ＦＵ\u00a0\u2028\u3099か\U0001f600\U0001d400-, .'ǰŉ\u00ad\u200b\u200d\ufe0f\x00\x1f"
)


@pytest.mark.parametrize("normalization", [1, 2])
def test_normalisation_by_table_equals_its_definition_on_tricky_texts(normalization: int) -> None:
    rng = random.Random(7)
    texts = ["".join(rng.choices(TRICKY, k=rng.randrange(12))) for _ in range(3000)]
    expected = [reference_normalize(t, normalization) for t in texts]
    assert normalize_batch(texts, normalization) == expected


@pytest.mark.parametrize("normalization", [1, 2])
def test_normalisation_by_table_equals_its_definition_for_every_bmp_character(
    normalization: int,
) -> None:
    # Each character alone, between letters, and next to a random other one.
    rng = random.Random(11)
    chars = [chr(c) for c in range(1, 0x10000) if not 0xD800 <= c < 0xE000]
    texts = [
        text
        for c in chars
        for text in (c, f"Ab{c}cD", c + rng.choice(chars), rng.choice(chars) + c)
    ]
    assert normalize_batch(texts, normalization) == [
        reference_normalize(t, normalization) for t in texts
    ]


def test_foldable_blocks_hold_no_starter_that_composes_with_the_one_before() -> None:
    """The table folds a text a character at a time only where no character can compose with
    the one before it: check that against this Python's Unicode data."""
    composing = {0x1161 + v for v in range(21)} | {0x11A8 + t for t in range(27)}  # Hangul
    for code in range(sys.maxunicode + 1):
        decomposition = unicodedata.decomposition(chr(code))
        if decomposition and not decomposition.startswith("<"):
            parts = [int(part, 16) for part in decomposition.split()]
            if len(parts) == 2 and not unicodedata.combining(chr(parts[1])):
                composing.add(parts[1])
    assert composing
    assert not [
        hex(c)
        for c in composing
        if any(start <= c < end for start, end in fingerprinting._FOLDABLE_BLOCKS)
    ]


def test_art_s_deli_differs_by_one_word_after_normalisation() -> None:
    a = normalize("Art's Delicatessen 12224 Ventura Blvd. Studio City")
    b = normalize("Art's Deli 12224 Ventura Blvd. Studio City")
    assert word_edit_distance(a, b) == 1
    assert word_edit_distance(a, a) == 0
    assert word_edit_distance(a, "") == len(a.split())


def test_word_edit_distance_counts_words_not_characters() -> None:
    assert word_edit_distance("a b c d", "a x c d") == 1
    assert word_edit_distance("the cat sat", "cat sat the") == 2
    assert word_edit_distance("delicatessen", "deli") == 1


def test_words_are_numbered_alike_when_alike_and_apart_when_not() -> None:
    numbers, offsets = word_numbers(["to be or not to be", "", "bé be b\u00e9 b"])
    assert numbers.tolist() == [0, 1, 2, 3, 0, 1, 4, 1, 4, 5]
    assert offsets.tolist() == [0, 6, 6, 10]
    rng = random.Random(3)  # enough distinct words for the table to grow several times
    texts = [" ".join(f"w{rng.randrange(20_000)}" for _ in range(50)) for _ in range(400)]
    first_seen: dict[str, int] = {}
    expected = [first_seen.setdefault(w, len(first_seen)) for t in texts for w in t.split()]
    assert word_numbers(texts)[0].tolist() == expected and len(first_seen) > 10_000


@pytest.mark.parametrize("word_pairs", [fingerprinting.WORD_PAIRS, 7])
def test_word_edit_distances_equal_levenshtein_on_the_words(
    word_pairs: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fingerprinting, "WORD_PAIRS", word_pairs)  # 7: numbered 7 pairs at a time
    rng = random.Random(7)
    vocabulary = ["a", "b", "ab", "città", "straße", "日本", "x-y", "\U0001f600", "aa"]
    # Lengths around the 64-word blocks of the bit-parallel distance, few words so that many
    # match, and near-copies, whose common prefix and suffix are cut before the blocks.
    texts = normalize_batch(
        [
            " ".join(
                rng.choices(
                    vocabulary[: rng.randint(1, 9)],
                    k=rng.choice([0, 1, 5, 12, 63, 64, 65, 127, 128, 129, 300]),
                )
            )
            for _ in range(80)
        ]
    )
    texts += [_edited(t, rng) for t in texts]
    left = [rng.randrange(len(texts)) for _ in range(400)] + list(range(80))
    right = [rng.randrange(len(texts)) for _ in range(400)] + list(range(80, 160))
    assert word_edit_distances(texts, left, right) == [
        Levenshtein.distance(texts[a].split(), texts[b].split())
        for a, b in zip(left, right, strict=True)
    ]
    assert word_edit_distances(["a b c d", "a x c d"], [0], [1]) == [1]


def _edited(text: str, rng: random.Random) -> str:
    """The text with a few of its words replaced, dropped or doubled."""
    words = text.split()
    for _ in range(rng.randint(0, 3)):
        if words:
            at = rng.randrange(len(words))
            words[at : at + 1] = rng.choice([[], ["new"], [words[at]] * 2])
    return " ".join(words)


def test_fields() -> None:
    fp = fingerprint("3 Art's Delicatessen 12224 Ventura Blvd. Studio City", WORD3)
    assert fp.content == "3 art s delicatessen 12224 ventura blvd studio city"
    assert fp.first_word == "3"
    assert fp.num_words == 9
    assert fp.md5 == hashlib.md5(fp.content.encode()).hexdigest()
    assert len(fp.shingles) == 7  # 9 words give 7 word 3-shingles
    assert len(fp.signature) == 20 and fp.signature.dtype == np.uint32
    assert len(fp.bands) == 5


def test_text_shorter_than_a_shingle_is_one_shingle() -> None:
    assert len(fingerprint("two words", WORD3).shingles) == 1
    assert len(fingerprint("abc", FingerprintParams("char", 5, 16, 4)).shingles) == 1
    assert not np.array_equal(
        fingerprint("two words", WORD3).shingles, fingerprint("two", WORD3).shingles
    )


def test_char_shingles_count_distinct_ngrams() -> None:
    fp = fingerprint("abcabc", FingerprintParams("char", 3, 16, 4))
    assert len(fp.shingles) == 3  # abc, bca, cab


def test_signature_tokens_are_tagged_by_position() -> None:
    fp = fingerprint("some text to hash", WORD3)
    tokens = TokenField.SIGNATURE.tokens(fp)
    assert tokens == [f"{i}_{v}" for i, v in enumerate(fp.signature.tolist())]
    bands = TokenField.BANDS.tokens(fp)
    assert bands == [f"{b}_{h:016x}" for b, h in enumerate(fp.bands.tolist())]
    assert len(set(bands)) == 5
    assert TokenField.SHINGLES.tokens(fp) == [f"{h:016x}" for h in fp.shingles.tolist()]


@pytest.mark.parametrize("field", list(TokenField))
def test_token_keys_and_strings_are_one_to_one(field: TokenField) -> None:
    fps = fingerprint_batch(["some text to hash", "other words entirely"], WORD3)
    keys = [field.keys(fp) for fp in fps]
    assert all(
        k.dtype == np.int64 and len(k) == field.size(fp) for k, fp in zip(keys, fps, strict=True)
    )
    strings = [field.strings(k) for k in keys]
    # Different keys at the same position make different strings, and the same key the same one.
    for a, b, sa, sb in zip(*keys, *strings, strict=False):
        assert (a == b) == (sa == sb)


def test_same_text_same_signature_across_runs_and_batches() -> None:
    params = FingerprintParams("char", 4, 64, 16)
    texts = ["first text here", "Second, different text!", "first text here"]
    batch = fingerprint_batch(texts, params)
    singles = [fingerprint(t, params) for t in texts]
    for a, b in zip(batch, singles, strict=True):
        assert np.array_equal(a.signature, b.signature)
        assert np.array_equal(a.bands, b.bands)
        assert np.array_equal(a.shingles, b.shingles)
    assert np.array_equal(batch[0].signature, batch[2].signature)


def test_signature_is_stable_across_machines() -> None:
    # Stored indexes depend on these exact values: a change here breaks every existing store.
    fp = fingerprint(
        "Art's Delicatessen 12224 Ventura Blvd. Studio City", FingerprintParams("char", 4, 8, 2)
    )
    assert TokenField.SIGNATURE.tokens(fp) == GOLDEN_SIGNATURE
    fp = fingerprint(
        "Art's Delicatessen 12224 Ventura Blvd. Studio City", FingerprintParams("word", 3, 8, 2)
    )
    assert TokenField.SIGNATURE.tokens(fp) == GOLDEN_WORD_SIGNATURE


GOLDEN_SIGNATURE = [
    "0_1056702757",
    "1_436404013",
    "2_408811499",
    "3_1540478672",
    "4_316728758",
    "5_522005133",
    "6_27711547",
    "7_2312405635",
]
# 7 shingles into 8 bins: empty bins borrow a value along their probe sequence.
GOLDEN_WORD_SIGNATURE = [
    "0_299007852",
    "1_2135660430",
    "2_492913388",
    "3_2135660430",
    "4_492913388",
    "5_299007852",
    "6_2135660430",
    "7_299007852",
]


def test_seed_changes_the_signature() -> None:
    a = fingerprint("some text", FingerprintParams(seed=1))
    b = fingerprint("some text", FingerprintParams(seed=2))
    assert not np.array_equal(a.signature, b.signature)


def _random_pair(rng: random.Random, vocabulary: list[str]) -> tuple[str, str]:
    base = rng.choices(vocabulary, k=rng.randint(5, 120))
    other = list(base)
    for _ in range(rng.randint(0, len(base))):
        action = rng.random()
        position = rng.randrange(len(other) + 1)
        if action < 0.4 and other:
            other.pop(min(position, len(other) - 1))
        elif action < 0.8:
            other.insert(position, rng.choice(vocabulary))
        elif other:
            other[min(position, len(other) - 1)] = rng.choice(vocabulary)
    return " ".join(base), " ".join(other or ["x"])


@pytest.mark.parametrize(
    "params", [FingerprintParams("word", 2, 128, 32), FingerprintParams("char", 5, 64, 16)]
)
def test_signature_estimate_tracks_true_jaccard_within_binomial_error(
    params: FingerprintParams,
) -> None:
    rng = random.Random(7)
    vocabulary = [f"w{i}" for i in range(400)]
    k = params.num_hashes
    errors, outside = [], 0
    pairs = 600
    for _ in range(pairs):
        a, b = fingerprint_batch(list(_random_pair(rng, vocabulary)), params)
        truth = jaccard(a.shingles, b.shingles)
        estimate = estimated_jaccard(a, b)
        sigma = math.sqrt(truth * (1 - truth) / k)
        errors.append(estimate - truth)
        if abs(estimate - truth) > 3 * sigma + 1 / k:
            outside += 1
    # 3 sigma holds for 99.7% of binomial draws; allow a little slack for the discrete tails.
    assert outside <= pairs * 0.01
    # No bias: the mean error is within a few standard errors of zero.
    assert abs(np.mean(errors)) < 4 * np.std(errors) / math.sqrt(pairs) + 1e-3


def test_identical_and_disjoint_sets() -> None:
    params = FingerprintParams("word", 1, 64, 16)
    a, b, c = fingerprint_batch(["a b c d e f", "a b c d e f", "u v w x y z"], params)
    assert estimated_jaccard(a, b) == 1.0 and jaccard(a.shingles, b.shingles) == 1.0
    assert jaccard(a.shingles, c.shingles) == 0.0
    assert estimated_jaccard(a, c) < 0.1


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"num_hashes": 100, "bands": 32}, "bands must divide"),
        ({"shingle_kind": "byte"}, "shingle kind"),
        ({"shingle_size": 0}, "shingle size"),
        ({"num_hashes": 0, "bands": 1}, "number of hashes"),
    ],
)
def test_params_are_validated(kwargs: dict, message: str) -> None:
    with pytest.raises(InvalidParameter, match=message):
        FingerprintParams(**kwargs)


def test_parse_shingle() -> None:
    assert parse_shingle("word:3") == ("word", 3)
    assert parse_shingle("char:5") == ("char", 5)
    for bad in ("word", "char:x", "line:3", "word:0"):
        with pytest.raises(ValueError):
            parse_shingle(bad)


def test_params_round_trip() -> None:
    params = FingerprintParams("word", 3, 20, 5, seed=9)
    assert FingerprintParams.from_dict(params.to_dict()) == params


def test_indexed_fields_are_validated_and_canonical() -> None:
    assert FingerprintParams().fields == ("bands",)
    assert FingerprintParams.from_dict({}).fields == ("shingles", "signature", "bands")
    assert FingerprintParams(fields=["bands", "shingles"]).fields == ("shingles", "bands")
    assert FingerprintParams(fields="bands").fields == ("bands",)
    for wrong in [(), ("bands", "words")]:
        with pytest.raises(InvalidParameter, match="indexed fields must be some of"):
            FingerprintParams(fields=wrong)
    params = FingerprintParams("word", 3, 20, 5, fields=("signature",))
    assert FingerprintParams.from_dict(params.to_dict()) == params
    # Stores written before the setting existed index every field.
    older = {k: v for k, v in params.to_dict().items() if k != "fields"}
    assert FingerprintParams.from_dict(older).fields == TOKEN_FIELDS
    assert "indexed fields signature" in params.describe()


@pytest.mark.parametrize("params", [FingerprintParams(), WORD3], ids=["char", "word"])
def test_fingerprinting_a_stored_content_skips_nothing_that_matters(
    params: FingerprintParams,
) -> None:
    texts = [
        "Art's Deli, 12224 Ventura Blvd.",
        "ﬁne Ｆｕｌｌ width ÉCOLE Straße ΟΔΟΣ",
        "İstanbul \u2028 «quoted» — dash… ¨ ²",
        "a\U0001e95eb \U0001f600 x\U00010100y",
        "",
        "!!! ...",
    ]
    raw = fingerprint_batch(texts, params)
    stored = fingerprint_batch([fp.content for fp in raw], params, normalized=True)
    for a, b in zip(raw, stored, strict=True):
        assert_alike_but_shingles(a, b)
        assert np.array_equal(a.shingles, b.shingles)


@pytest.mark.parametrize("params", [FingerprintParams(), WORD3], ids=["char", "word"])
def test_jaccard_of_many_pairs_equals_jaccard_of_sorted_sets(params: FingerprintParams) -> None:
    rng = random.Random(3)
    words = [f"w{i}" for i in range(20)]
    texts = [" ".join(rng.choices(words, k=rng.randint(0, 30))) for _ in range(200)]
    contents = normalize_batch([*texts, "", "a", "aaaa aaaa aaaa"])
    sets = shingle_sets(contents, params)
    left = np.array([rng.randrange(len(contents)) for _ in range(2000)] + [200, 200, 201])
    right = np.array([rng.randrange(len(contents)) for _ in range(2000)] + [200, 201, 202])
    expected = [jaccard(sets[a], sets[b]) for a, b in zip(left, right, strict=True)]
    assert jaccard_pairs(contents, left, right, params).tolist() == expected
    # The pairs cover disjoint, identical (and both empty) and partly shared sets.
    assert {0.0, 1.0} < set(expected) and len(set(expected)) > 20


def test_weighted_similarity_of_many_pairs_has_the_bits_of_one_pair_at_a_time(monkeypatch) -> None:
    rng = random.Random(4)
    words = [f"w{i}" for i in range(30)]
    texts = [" ".join(rng.choices(words, k=rng.randint(0, 40))) for _ in range(150)]
    # Long texts too, that share more shingles than the kernel gathers at once.
    texts += [" ".join(rng.choices(words, k=3000)) for _ in range(3)]
    contents = normalize_batch([*texts, "", "a"])
    numbers, offsets, distinct = shingle_numbers(contents, FingerprintParams())
    sets = distinct[numbers]
    weights = np.array([rng.uniform(0.1, 9.0) for _ in distinct])
    # Sorted by the left side, as a report's pairs are, with a left side coming back later.
    left = np.array([*sorted(rng.randrange(len(contents)) for _ in range(1500)), 3, 153, 153, 150])
    right = np.array([rng.randrange(len(contents)) for _ in range(1500)] + [3, 153, 154, 151])
    one_at_a_time = [
        weighted_similarity(
            sets[offsets[a] : offsets[a + 1]],
            weights[numbers[offsets[a] : offsets[a + 1]]],
            sets[offsets[b] : offsets[b + 1]],
            weights[numbers[offsets[b] : offsets[b + 1]]],
            numeral_agreement(contents[a], contents[b]),
        )
        for a, b in zip(left, right, strict=True)
    ]
    numerals = Numerals(contents)  # "w12 w3" holds 12 and 3: the words' numerals differ
    measured = pair_similarities(numbers, len(distinct), weights, offsets, left, right, numerals)
    assert measured.tolist() == one_at_a_time
    with monkeypatch.context() as halved:  # half on a second thread: the same floats
        halved.setattr(importlib.import_module("neardup.fingerprint"), "PARALLEL_PAIRS", 2)
        assert pair_similarities(
            numbers, len(distinct), weights, offsets, left, right, numerals
        ).tolist() == (one_at_a_time)
    assert {0.0, 1.0} < set(one_at_a_time) and len(set(one_at_a_time)) > 100
    assert (numerals.agreement(left, right) < 1).sum() > 100
    # Past 65,536 distinct shingles the sets are read as 32-bit numbers: the same floats.
    wide = np.concatenate([np.zeros(70_000), weights])
    assert (
        pair_similarities(
            numbers + 70_000, len(wide), wide, offsets, left, right, numerals
        ).tolist()
        == one_at_a_time
    )
    with pytest.raises(ValueError, match="must index the weights"):
        pair_similarities(numbers, len(distinct), weights[:-1], offsets, left, right, numerals)
    with pytest.raises(ValueError, match="must be below distinct"):
        pair_similarities(numbers, len(distinct) - 1, None, offsets, left, right)
    with pytest.raises(ValueError, match="must name sets below"):
        pair_similarities(numbers, len(distinct), None, offsets, left, right + len(offsets))


def test_frequency_counts_count_each_record_once_per_shingle() -> None:
    texts = ["abab abab", "abab", "xyz", "", "ababx"]
    fingerprints = fingerprint_batch(texts, FingerprintParams("char", 2, 8, 4))
    keys, counts = frequency_counts(fingerprints)
    expected: dict[int, int] = {}
    for fp in fingerprints:
        for key in set(fp.shingles.view(np.int64).tolist()):
            expected[key] = expected.get(key, 0) + 1
    assert keys.tolist() == sorted(expected)
    assert counts.tolist() == [expected[k] for k in sorted(expected)]


@pytest.mark.parametrize("chunk", [None, 1, 7], ids=["one-chunk", "a-content-a-chunk", "chunks"])
@pytest.mark.parametrize("params", [FingerprintParams(), WORD3], ids=["char", "word"])
def test_frequencies_held_by_contents_are_those_their_records_count(
    params, chunk, monkeypatch
) -> None:
    """What a report that holds every content weighs by: the counts a store keeps, made one
    record at a time (frequency_counts), with a content held by several records counted for
    each of them, however many characters are numbered at a time."""
    if chunk:
        monkeypatch.setattr(fingerprinting, "HELD_CHUNK_CHARACTERS", chunk)
    contents = normalize_batch(["abab abab xy", "abab", "the cat sat on the mat", "zz", "abab x"])
    copies = np.array([1, 3, 2, 1, 1])
    records = [text for text, n in zip(contents, copies.tolist(), strict=True) for _ in range(n)]
    keys, counts = frequency_counts(fingerprint_batch(records, params, normalized=True))
    held = Frequencies.held(contents, copies, params)
    assert held.records == len(records) == 8
    assert held.keys.tolist() == keys.tolist()
    assert held.counts.tolist() == counts.tolist()
    assert held.counts.dtype == np.int64
    none = Frequencies.held([], np.empty(0), params)
    assert (none.records, none.keys.tolist(), none.counts.tolist()) == (0, [], [])


@pytest.mark.parametrize("params", [FingerprintParams(), WORD3], ids=["char", "word"])
@pytest.mark.parametrize("halves", [False, True], ids=["one-thread", "two-halves"])
def test_shingle_numbers_number_each_distinct_shingle_in_order_of_first_sight(
    params: FingerprintParams, halves: bool, monkeypatch
) -> None:
    if halves:  # each half numbered on its own thread, then the two made one numbering
        fingerprint_module = importlib.import_module("neardup.fingerprint")
        monkeypatch.setattr(fingerprint_module, "PARALLEL_CONTENTS", 2)
        monkeypatch.setattr(fingerprint_module, "RENUMBERED_RUN", 7)  # moved in runs
    rng = random.Random(5)
    words = [f"w{i}" for i in range(40)]
    texts = [" ".join(rng.choices(words, k=rng.randint(0, 90))) for _ in range(300)]
    contents = normalize_batch([*texts, "", "a", "aaaa aaaa aaaa"])
    # The reference: each text's shingle hashes as the sketch makes them (shingle_sets itself
    # comes from shingle_numbers).
    fingerprints = fingerprint_batch(contents, params, normalized=True)
    sets = [np.unique(fp.shingle_hashes).tolist() for fp in fingerprints]
    numbers, offsets, distinct = shingle_numbers(contents, params)
    assert [distinct[numbers[a:b]].tolist() for a, b in pairwise(offsets)] == sets
    assert [s.tolist() for s in shingle_sets(contents, params)] == sets
    flat = [h for s in sets for h in s]
    assert distinct.tolist() == list(dict.fromkeys(flat))
    assert len(flat) > len(distinct)  # sets share shingles, each numbered once
    # Out of hash order: the same sets, each shingle once, in the order the text first has it.
    numbers, offsets, distinct = shingle_numbers(contents, params, in_hash_order=False)
    unordered = [distinct[numbers[a:b]].tolist() for a, b in pairwise(offsets)]
    assert unordered == [list(dict.fromkeys(fp.shingle_hashes.tolist())) for fp in fingerprints]


@pytest.mark.parametrize("field", list(TokenField))
def test_token_keys_of_contents_equal_each_fingerprints_keys(field: TokenField) -> None:
    params = FingerprintParams("char", 3, 16, 8)
    contents = normalize_batch(["Art's Deli 12224 Ventura Blvd.", "", "a", "abab abab", "x y z"])
    keys, sizes = token_keys(contents, params, field)
    expected = [field.keys(fp) for fp in fingerprint_batch(contents, params, normalized=True)]
    assert sizes.tolist() == [len(k) for k in expected]
    assert keys.tolist() == np.concatenate(expected).tolist()


def test_fingerprints_without_shingles_keep_every_other_field() -> None:
    texts = ["Art's Deli 12224 Ventura Blvd.", "", "x", "the quick brown fox " * 40]
    for params in (FingerprintParams(), WORD3):
        full = fingerprint_batch(texts, params)
        lean = fingerprint_batch(texts, params, shingles=False)
        for a, b in zip(full, lean, strict=True):
            assert_alike_but_shingles(a, b)
            assert b.shingle_hashes is None
            with pytest.raises(ValueError, match="without its shingles"):
                _ = b.shingles


def test_code_points_read_every_string_width_and_give_the_strings_back() -> None:
    texts = ["", "ascii", "latin é ß", "bmp € ㄱ 가", "astral 😀 𝐀", "x"]
    codes, offsets = fingerprinting._code_points(texts)
    assert codes.tolist() == [ord(c) for c in "".join(texts)]
    assert offsets.tolist() == [0, *np.cumsum([len(t) for t in texts]).tolist()]
    assert fingerprinting._strings(codes, offsets) == texts


def test_code_points_refuse_what_is_not_the_measured_strings() -> None:
    offsets = np.array([0, 1], dtype=np.int64)
    with pytest.raises(TypeError):
        fingerprinting._kernels.code_points([b"x"], offsets, np.empty(1, np.uint32))
    with pytest.raises(TypeError):
        fingerprinting._kernels.code_points(["xy"], offsets, np.empty(2, np.uint32))
    with pytest.raises(ValueError):
        fingerprinting._kernels.code_points(["x"], offsets, np.empty(0, np.uint32))


def assert_alike_but_shingles(a: Fingerprint, b: Fingerprint) -> None:
    """Two fingerprints agree on every field but (maybe) the shingles."""
    assert (a.content, a.md5, a.first_word, a.num_words) == (
        b.content,
        b.md5,
        b.first_word,
        b.num_words,
    )
    assert np.array_equal(a.signature, b.signature) and np.array_equal(a.bands, b.bands)


def test_threads_classifying_new_characters_at_once_normalise_as_one_does() -> None:
    # The tables are filled as texts bring new characters, while other threads' compiled loops
    # read them without the GIL.
    rng = random.Random(3)
    pool = [chr(c) for c in range(0x20, 0x3000) if unicodedata.category(chr(c))[0] != "C"]
    batches = [
        ["".join(rng.choices(pool, k=rng.randrange(40))) for _ in range(300)] for _ in range(8)
    ]
    expected = [[reference_normalize(t) for t in batch] for batch in batches]
    for _ in range(8):  # a race shows in some runs only
        fingerprinting._tables.cache_clear()
        with ThreadPoolExecutor(4) as threads:
            assert list(threads.map(normalize_batch, batches)) == expected


def test_md5s_are_hashlibs_of_the_utf8_at_every_length_and_width() -> None:
    rng = random.Random(9)
    pool = [chr(c) for c in [*range(0x20, 0x250), 0x7FF, 0x800, 0xFFFF, 0x10000, 0x10FFFF]]
    texts = ["".join(rng.choices(pool, k=rng.randrange(300))) for _ in range(500)]
    texts += ["", "a", *("x" * n for n in range(50, 130))]  # every way to end a 64-byte block
    codes, offsets = fingerprinting._code_points(texts)
    expected = [hashlib.md5(t.encode("utf-8")).hexdigest() for t in texts]
    assert fingerprinting._kernels.md5_hex(codes, offsets) == expected
    assert md5_digests(texts).tobytes() == bytes.fromhex("".join(expected))
    codes, offsets = fingerprinting._code_points(["fine", "a\ud800b"])
    with pytest.raises(ValueError, match="text 1 holds a surrogate"):
        fingerprinting._kernels.md5_hex(codes, offsets)


def test_idf_is_lucenes_below_the_reference_size_and_by_share_above_it() -> None:
    held = np.array([0, 1, 7, 300])
    n = held**FREQUENCY_POWER
    bm25 = np.log1p((500 + PRIOR_RECORDS - n + 0.5) / (n + 0.5))
    assert idf(held, 500).tolist() == bm25.tolist()
    # Past the reference, a shingle weighs by the share of records holding it: the same share
    # of a store a hundred times larger weighs the same, and a typo no larger store makes rarer.
    reference, larger = REFERENCE_RECORDS, 100 * REFERENCE_RECORDS
    assert idf(np.array([0, 100, 5_000, larger // 2]), larger).tolist() == (
        idf(np.array([0, 1, 50, reference // 2]), reference).tolist()
    )
    assert idf(np.array([1, 3]), larger).tolist() == idf(np.array([1, 1]), reference).tolist()


def test_numerals_are_the_runs_of_digits_a_regular_expression_finds() -> None:
    """Each content's numerals, found in C over its characters, are the distinct values of
    what ``\\d+`` finds in it, whatever the scripts and lengths; a run never goes on into the
    next content."""
    rng = random.Random(3)
    alphabet = [*"ab -.", *"0123456789", "0", "0", "٣", "४", "𝟗", "²", "½", "é", "߁"]

    def value(numeral: str) -> str:
        return "".join(str(unicodedata.decimal(c)) for c in numeral).lstrip("0") or "0"

    for _ in range(200):
        contents = [
            "".join(rng.choices(alphabet, k=rng.randint(0, 40))) for _ in range(rng.randint(0, 9))
        ]
        contents.append("0" * rng.randint(0, 25) + "".join(rng.choices("0123456789٣४𝟗", k=30)))
        expected = [{value(n) for n in re.findall(r"\d+", c)} for c in contents]
        numerals = Numerals(contents)
        assert numerals.sizes.tolist() == [len(values) for values in expected]
        for a, b in combinations(range(len(contents)), 2):
            shared = len(expected[a] & expected[b])
            fewer = min(len(expected[a]), len(expected[b]))
            lacking = 1 - shared / fewer if fewer else 0
            assert numerals.agreement(np.array([a]), np.array([b]))[0] == pytest.approx(
                1 - NUMERAL_WEIGHT * lacking
            )
    assert Numerals(["12", "34"]).sizes.tolist() == [1, 1]
    assert Numerals([]).sizes.tolist() == []
    with pytest.raises(ValueError, match="below len"):  # checked in C, not read past its end
        Numerals(["12 a", "14 b"]).agreement(np.array([0]), np.array([2]))


@pytest.mark.parametrize(
    ("a", "b", "lacking"),
    [
        ("12 main st 90210", "12 main st 90210", 0),
        ("12 main st 90210", "14 main st 90210", 1 / 2),  # another house of the street
        ("12 main st 90210", "main st 90210", 0),  # a copy that drops its house number
        ("12 main st", "main st", 0),  # no numeral on one side says nothing
        ("main st", "elm st", 0),
        ("lenovo x1 carbon 20kh006m", "lenovo x1 carbon 20kh007m", 1 / 3),  # another model
        ("310 456-0488 12th st", "12th st 456 0488 310", 0),  # the same numerals, reordered
        ("1994 1995", "1996 1997 1998", 1),
        ("northampton ma 01060", "northampton ma 1060", 0),  # a zip a spreadsheet read as a number
        ("٣٤ شارع", "34 شارع", 0),  # the same number in Arabic-Indic and ASCII digits
        ("unit ०७", "unit 8", 1),
        ("9" * 5000, "9" * 5000, 0),  # past the digits Python's int() reads
        ("0" * 25 + "7 st", "7 st", 0),  # leading zeros past the digits an int64 holds
        ("1" + "0" * 18, "1" + "0" * 17, 1),  # 19 digits against 18
        ("12345678901234567890", "12345678901234567891", 1),  # 20 digits, the last one apart
    ],
)
def test_numerals_that_disagree_lower_the_weighted_similarity(a: str, b: str, lacking: float):
    """Runs of digits (house and model numbers, years, phones) tell records apart that share
    their words: the weighted similarity falls by NUMERAL_WEIGHT of the share of the fewer
    numerals that the other record lacks."""
    assert numeral_agreement(a, b) == pytest.approx(1 - NUMERAL_WEIGHT * lacking)
    assert numeral_agreement(b, a) == numeral_agreement(a, b)
    many = Numerals([a, b, a])
    assert many.agreement(np.array([0, 1, 0]), np.array([1, 2, 2])).tolist() == [
        numeral_agreement(a, b),
        numeral_agreement(b, a),
        1.0,
    ]
