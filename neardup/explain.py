"""Why two records are, or are not, near-duplicates at a store's settings: every number the
searcher uses on a pair, and the rule that decided it. Pure: fingerprints in, an explanation out."""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np

from .fingerprint import (
    Fingerprint,
    FingerprintParams,
    Frequencies,
    TokenField,
    estimated_jaccard,
    jaccard,
    numeral_agreement,
    numerals,
    shared_count,
    shingle_texts,
    weighted_similarity,
    word_edit_distance,
)
from .phrases import counted
from .searcher import MatchRules
from .selfjoin import LeftOut

RAREST_SHOWN = 8


# A token of each field, as a sentence names it.
TOKEN_NOUNS = {"shingles": "shingle", "signature": "signature", "bands": "band"}


@dataclass(frozen=True)
class WordChange:
    """One step of the word-level diff: ``op`` is equal, replace, delete (words only in A) or
    insert (words only in B)."""

    op: str
    a: str
    b: str


@dataclass(frozen=True)
class Explanation:
    a_id: str | None
    b_id: str | None
    a_content: str  # normalised, as stored
    b_content: str
    exact: bool  # the same normalised content (MD5)
    diff: tuple[WordChange, ...]
    edit_distance: int  # words; the number of words the diff inserts, deletes or replaces
    shingle: str  # the store's shingling, e.g. word:1 or char:4
    similarity: float  # the rules' similarity: one of the two below
    jaccard: float  # exact Jaccard of the shingle sets
    weighted: float | None  # the shingles weighing their rarity (None: a store that cannot)
    numerals: tuple[tuple[str, ...], tuple[str, ...]]  # A's and B's runs of digits
    numeral_agreement: float  # what --similarity numerals multiplies the weighted one by
    rarest_shared: tuple[tuple[str, int], ...]  # shared shingles held by fewest records
    shingles_shared: int
    shingles_only_a: int
    shingles_only_b: int
    signature_estimate: float  # shared signature positions / num_hashes
    signature_shared: int
    num_hashes: int
    bands_shared: tuple[int, ...]  # the band numbers the two records share
    num_bands: int
    candidate: bool  # the store's candidate query (method) can return B for A
    accepted: bool
    reason: str
    # The store's last report left out every bucket the two share (past its pair budget), so
    # a report like it does not list them, whatever a lookup finds.
    report_left_out: bool = False

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def marked_diff(self) -> str:
        """The diff as one line: ``[-words only in A-]{+words only in B+}``, as ``git diff
        --word-diff`` writes it."""
        parts = []
        for change in self.diff:
            if change.op == "equal":
                parts.append(change.a)
                continue
            removed = f"[-{change.a}-]" if change.a else ""
            added = f"{{+{change.b}+}}" if change.b else ""
            parts.append(removed + added)
        return " ".join(parts)


def word_diff(a: str, b: str) -> tuple[WordChange, ...]:
    """The edit operations behind the word edit distance, equal runs included."""
    import Levenshtein  # here: most commands never explain, and it loads in ~13 ms

    left, right = a.split(), b.split()
    return tuple(
        WordChange(op, " ".join(left[i1:i2]), " ".join(right[j1:j2]))
        for op, i1, i2, j1, j2 in Levenshtein.opcodes(left, right)
    )


def explain(
    a: Fingerprint,
    b: Fingerprint,
    params: FingerprintParams,
    rules: MatchRules,
    ids: tuple[str | None, str | None] = (None, None),
    frequencies: Frequencies | None = None,
    report_cut: tuple[LeftOut, int] | None = None,
) -> Explanation:
    """What the searcher sees of ``b`` when it looks up ``a`` with ``rules``; ``frequencies``
    (the store's, for both records' shingles) weigh the shingles. ``report_cut`` is what the
    store's last report left out past its budget, and how many contents hold the least held
    token the two share (counted to one more than the size it left out)."""
    edit_distance = word_edit_distance(a.content, b.content)
    shared = shared_count(a.shingles, b.shingles)
    bands = tuple(int(n) for n in np.flatnonzero(a.bands == b.bands))
    signature_shared = int(np.count_nonzero(a.signature == b.signature))
    plain = jaccard(a.shingles, b.shingles)
    weighted, rarest, similarity = None, (), plain
    if frequencies is not None:
        weights = frequencies.weights(a.shingles), frequencies.weights(b.shingles)
        weighted = weighted_similarity(a.shingles, weights[0], b.shingles, weights[1], 1.0)
        rarest = _rarest_shared(a, b, params, frequencies)
        if rules.similarity != "jaccard":  # the bits a lookup measures: the cosine times it
            similarity = weighted * rules.numeral_agreement(a.content, b.content)
    else:
        rules = replace(rules, similarity="jaccard")  # nothing to weigh the shingles by
    shared_tokens = {
        TokenField.SHINGLES: shared,
        TokenField.SIGNATURE: signature_shared,
        TokenField.BANDS: len(bands),
    }[TokenField(rules.method)]
    candidate, accepted, reason = _verdict(a, b, rules, shared_tokens, edit_distance, similarity)
    left_out = report_cut is not None and report_cut[1] > report_cut[0].size
    if left_out:
        cut = report_cut[0]
        reason += (
            f"; but the last report left out buckets of {cut.field} held by more than "
            f"{cut.size:,} contents, past its budget of {cut.budget:,} bucket pairs, and every "
            f"{TOKEN_NOUNS[cut.field]} token these two share is held by more: a report like it "
            "does not list them"
        )
    return Explanation(
        a_id=ids[0],
        b_id=ids[1],
        a_content=a.content,
        b_content=b.content,
        exact=a.md5 == b.md5,
        diff=word_diff(a.content, b.content),
        edit_distance=edit_distance,
        shingle=params.shingle,
        similarity=similarity,
        jaccard=plain,
        weighted=weighted,
        numerals=(numerals(a.content), numerals(b.content)),
        numeral_agreement=numeral_agreement(a.content, b.content),
        rarest_shared=rarest,
        shingles_shared=shared,
        shingles_only_a=len(a.shingles) - shared,
        shingles_only_b=len(b.shingles) - shared,
        signature_estimate=estimated_jaccard(a, b),
        signature_shared=signature_shared,
        num_hashes=params.num_hashes,
        bands_shared=bands,
        num_bands=params.bands,
        candidate=candidate,
        accepted=accepted,
        reason=reason,
        report_left_out=left_out,
    )


def _rarest_shared(
    a: Fingerprint, b: Fingerprint, params: FingerprintParams, frequencies: Frequencies
) -> tuple[tuple[str, int], ...]:
    """The shared shingles that the fewest stored records hold, as text, with that number."""
    both = np.intersect1d(a.shingles, b.shingles)
    held = frequencies.counts[np.searchsorted(frequencies.keys, both.view(np.int64))]
    texts = shingle_texts(a.content, params)
    order = sorted(range(len(both)), key=lambda i: (int(held[i]), texts[int(both[i])]))
    return tuple((texts[int(both[i])], int(held[i])) for i in order[:RAREST_SHOWN])


def _verdict(
    a: Fingerprint,
    b: Fingerprint,
    rules: MatchRules,
    shared_tokens: int,
    edit_distance: int,
    similarity: float,
) -> tuple[bool, bool, str]:
    """(a candidate?, accepted?, the rule that decided), in the order the searcher applies them."""
    if a.md5 == b.md5:
        return True, True, "exact duplicates: the same normalised content (MD5)"
    method = TokenField(rules.method)
    if rules.first_word and a.first_word != b.first_word:
        return (
            False,
            False,
            (
                f"not a candidate: the first-word filter is on and the first words differ "
                f"({a.first_word!r}, {b.first_word!r})"
            ),
        )
    noun = TOKEN_NOUNS[method]
    if not shared_tokens:
        return False, False, f"not a candidate: the two share no {noun} token"
    found = (
        f"a candidate: {counted(shared_tokens, f'shared {noun} token')} (the query keeps the "
        f"{counted(rules.candidates, 'record')} that share most)"
    )
    if rules.threshold is not None and similarity < rules.threshold:
        return (
            True,
            False,
            (
                f"{found}, rejected: {rules.similarity} similarity {similarity:.3f} is below "
                f"the threshold {rules.threshold:g}"
            ),
        )
    if rules.max_edit_distance is not None and edit_distance > rules.max_edit_distance:
        return (
            True,
            False,
            (
                f"{found}, rejected: {edit_distance} word edits, over the maximum "
                f"{rules.max_edit_distance}"
            ),
        )
    passed = (
        [f"{rules.similarity} similarity {similarity:.3f} >= {rules.threshold:g}"]
        if rules.threshold
        else []
    )
    if rules.max_edit_distance is not None:
        passed.append(f"{edit_distance} word edits <= {rules.max_edit_distance}")
    return True, True, f"{found}, accepted" + (f": {', '.join(passed)}" if passed else "")
