"""What a run asks for, turned into fingerprint parameters and match rules.

A setting comes from, last one winning: the defaults, what the store remembers from the run that
indexed it, a preset, and the settings given. The presets are named settings for the two kinds
of data neardup meets, chosen from the measurements in benchmarks/README.md.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

import numpy as np

from .errors import InvalidParameter
from .fingerprint import FingerprintParams, TokenField, fingerprint_batch, parse_shingle
from .searcher import MatchRules
from .stores.base import ParamsRequest
from .tuning import bucket_pairs_per_pair, recommend_bands

RulesRequest = MatchRules | Mapping[str, Any] | None
RULE_NAMES = tuple(f.name for f in fields(MatchRules))
AUTO = "auto"  # the threshold read from the data
# The threshold while no report has chosen one, and when the similarities show no valley.
FALLBACK_THRESHOLD = 0.5
# The default method: the first of these the store indexes.
_METHOD_ORDER = (TokenField.BANDS, TokenField.SIGNATURE, TokenField.SHINGLES)


@dataclass(frozen=True)
class Preset:
    name: str
    purpose: str
    params: FingerprintParams
    rules: MatchRules


PRESETS = {
    preset.name: preset
    for preset in [
        # Both presets look up by LSH bands, so they index the band tokens alone: 16 or 64
        # rows per record instead of ~550, which makes indexing several times faster.
        # Person, address and product records: character 4-grams survive typos; 64 bands of 2
        # rows make pairs down to a similarity of ~0.2 candidates, and the threshold is read
        # from the valley of their weighted similarities: a fixed low threshold (Jaccard 0.3
        # once) also accepts different places that share a street and a city. Febrl 1, 3, 4:
        # F1 0.999, 0.997, 0.999 (benchmarks/README.md).
        Preset(
            "records",
            "short name, address or product records",
            FingerprintParams("char", 4, 128, 64, fields=("bands",)),
            MatchRules(method="bands", auto_threshold=True),
        ),
        # Articles, ads, tickets: character 5-grams, Jaccard >= 0.8, bands tuned for 0.8
        # (16 of 8 rows). Kijiji ads: recall 1.000 of pairs >= 0.85, precision 1.000.
        Preset(
            "documents",
            "long texts: articles, ads, tickets",
            FingerprintParams("char", 5, 128, 16, fields=("bands",)),
            MatchRules(method="bands", threshold=0.8, similarity="jaccard"),
        ),
    ]
}


def preset(name: str) -> Preset:
    try:
        return PRESETS[name]
    except KeyError:
        raise InvalidParameter(
            f"unknown preset {name!r}: use one of {', '.join(PRESETS)}"
        ) from None


# The mean normalised length, in characters, from which records count as long texts.
LONG_TEXT = 200
BAND_SAMPLE = 1000  # the first records a new store's bands are chosen for
# Long texts are templated where the 2-row bands of their first records, of the store's own
# shingles, put this many pairs of records in one bucket, or more, per pair of them: 16,000
# such records would make a report's budget of bucket pairs (selfjoin.PAIR_BUDGET). A thousand
# ads of a few agencies, or documents spliced from them, 0.87-1.17 (0.48 of 5-grams); a
# thousand discs' track lists 0.03, shop products' descriptions 0.19 (benchmarks/README.md).
TEMPLATED = 0.3


def default_bands(
    num_hashes: int, mean_length: float | None = None, bucket_pairs: float | None = None
) -> int:
    """Bands for K hashes when nothing else decides. Records get 2 rows per band: one typo
    changes a large share of a short record's shingles, and 2-row bands make pairs down to a
    similarity of ~0.2 candidates, below any valley the threshold is read from. Templated long
    texts get 4 (``mean_length`` of LONG_TEXT characters or more, and ``bucket_pairs``, the
    2-row buckets' pairs per pair of their first records, of TEMPLATED or more, or unmeasured):
    their near-duplicates keep most of their shingles, and the many low-similarity pairs of a
    template would make 2-row buckets so large that a report could not join them. Other long
    texts keep 2 rows, as 4 would miss the pairs whose rare shared words lift their similarity
    far above their plain Jaccard (a quarter of those of a disc's track lists). One row per
    band when K is not divisible."""
    templated = bucket_pairs is None or bucket_pairs >= TEMPLATED
    rows = 4 if _long(mean_length) and templated else 2
    return num_hashes // rows if num_hashes % rows == 0 else num_hashes


def measured_sample(
    asked: Mapping[str, Any] | None, normalized: Sequence[str]
) -> tuple[float | None, float | None]:
    """What :func:`default_bands` reads of a new store's first records (:func:`band_sample` of
    the ``normalized`` texts): their mean length, and for long texts
    :func:`two_row_bucket_pairs` (None where not measured)."""
    sample = band_sample(normalized)
    mean = sum(map(len, sample)) / len(sample) if sample else None
    return mean, two_row_bucket_pairs(asked, sample) if _long(mean) else None


def band_sample(normalized: Sequence[str]) -> list[str]:
    """The first BAND_SAMPLE of the ``normalized`` texts with words. Records with no words are
    skipped, never stored: their empty contents would count as short texts, and as a template
    shared by every pair of them."""
    return [text for text in normalized if text][:BAND_SAMPLE]


def two_row_bucket_pairs(asked: Mapping[str, Any] | None, sample: Sequence[str]) -> float | None:
    """How many pairs of the ``sample`` 2-row bands of the shingles ``asked`` put in one bucket,
    per pair of them (:func:`neardup.tuning.bucket_pairs_per_pair`)."""
    bands = default_bands(asked_num_hashes(asked))
    two_rows = replace(FingerprintParams(), **{**(asked or {}), "bands": bands})
    sketched = fingerprint_batch(sample, two_rows, normalized=True, shingles=False)
    return bucket_pairs_per_pair(np.stack([fp.bands for fp in sketched]))


def asked_num_hashes(asked: Mapping[str, Any] | None) -> int:
    """The hashes the settings ``asked`` for, else the default."""
    return int((asked or {}).get("num_hashes", FingerprintParams().num_hashes))


def _long(mean_length: float | None) -> bool:
    return mean_length is not None and mean_length >= LONG_TEXT


def params_request(
    params: ParamsRequest = None,
    *,
    preset_name: str | None = None,
    threshold: float | str | None = None,
) -> ParamsRequest:
    """The fingerprint settings a run asks for: the preset's, then ``params`` (complete
    parameters, or a mapping of the settings given; ``shingle`` may be ``"char:5"``).

    Bands that are not given are tuned for ``threshold`` when there is one (see
    :mod:`neardup.tuning`; ``"auto"`` tunes nothing); else a new store takes
    :func:`default_bands` for its records (see :func:`neardup.api.index`).
    """
    if isinstance(params, FingerprintParams):
        return params
    given = dict(params or {})
    if "shingle" in given:
        given["shingle_kind"], given["shingle_size"] = parse_shingle(str(given.pop("shingle")))
    if isinstance(given.get("fields"), str):
        given["fields"] = tuple(f.strip() for f in given["fields"].split(","))
    asked = (_preset_settings(preset_name) if preset_name else {}) | given
    if "bands" not in given:
        num_hashes = asked_num_hashes(asked)
        if threshold and threshold != AUTO:
            asked["num_hashes"] = num_hashes
            asked["bands"] = recommend_bands(check_threshold(float(threshold)), num_hashes).bands
    _check(asked)
    return asked or None


def _preset_settings(name: str) -> dict[str, Any]:
    """What a preset sets: its shingles, hashes, bands and fields; not the normalisation,
    which is a store's own (one made before the second keeps the first)."""
    settings = preset(name).params.to_dict()
    del settings["normalization"]
    return settings


def _check(asked: Mapping[str, Any]) -> None:
    """Refuse a setting out of its range now, before any store is opened or created. (Whether
    bands divide the hashes of an existing store is checked against that store.)"""
    probe = FingerprintParams().to_dict() | dict(asked)
    if "bands" in asked and "num_hashes" not in asked:
        probe["num_hashes"] = max(int(asked["bands"]), 1)
    if "num_hashes" in asked and "bands" not in asked:
        probe["bands"] = default_bands(int(asked["num_hashes"]))
    FingerprintParams.from_dict(probe)


def check_threshold(threshold: float) -> float:
    if not 0.0 < threshold < 1.0:  # also refuses nan
        raise InvalidParameter(f"a threshold for tuning must be between 0 and 1, not {threshold}")
    return threshold


def match_rules(
    params: FingerprintParams,
    settings: Mapping[str, Any] | None = None,
    rules: RulesRequest = None,
    *,
    preset_name: str | None = None,
) -> MatchRules:
    """The rules of a lookup or report on a store with ``params`` and ``settings``: the
    defaults, the rules the store remembers, the preset's, then ``rules`` (complete, or a
    mapping of the rules given).

    The default method is the first of bands, signature and shingles the store indexes, so a
    store indexed with fewer fields is queried the way it can answer. A ``threshold`` of
    ``"auto"`` (the default) stands for the one the store chose from its records for the same
    candidates and similarity (:func:`threshold_choice`), else None: not chosen yet (see
    :func:`neardup.api.rules_for`); 0 turns the threshold off.
    """
    if isinstance(rules, MatchRules):
        return rules
    base = MatchRules(
        method=next(f for f in _METHOD_ORDER if f in params.fields), auto_threshold=True
    )
    if preset_name:
        base = preset(preset_name).rules
    elif remembered := (settings or {}).get("rules"):
        base = replace(base, **_renamed(remembered))
    given = dict(rules or {})
    if "threshold" in given:
        threshold = given["threshold"]
        given["auto_threshold"] = threshold == AUTO
        given["threshold"] = None if threshold in (0, AUTO) else threshold
    asked = replace(base, **given)
    if not asked.auto_threshold:
        return asked
    choice = threshold_choice(settings, asked)
    return replace(asked, threshold=None if choice is None else choice["threshold"])


def choice_key(rules: MatchRules) -> str:
    """What an automatic threshold is chosen for: the candidates (method, first word) and the
    similarity measured on them. A choice for other candidates or another similarity does not
    hold."""
    return f"{rules.method} {rules.similarity}" + (" first-word" if rules.first_word else "")


def threshold_choice(settings: Mapping[str, Any] | None, rules: MatchRules) -> dict | None:
    """The automatic threshold the store chose for ``rules`` ({"threshold", "how", "for"}),
    or None: the store's records changed since, or nothing has needed it yet."""
    choice = (settings or {}).get("threshold_choice")
    return choice if choice and choice.get("for") == choice_key(rules) else None


def rule_sources(
    settings: Mapping[str, Any] | None, rules: MatchRules, records: int | None = None
) -> dict[str, str]:
    """Where each rule of ``rules`` (:func:`match_rules` with no rules given) comes from on a
    store with ``settings`` (holding ``records``, where known): the index run that remembered
    it, the pairs a person judged (a threshold ``tune --labels`` remembered), the store's
    records (an automatic threshold), or the default."""
    remembered = _renamed((settings or {}).get("rules") or {})
    sources = {name: "index" if name in remembered else "default" for name in RULE_NAMES}
    if judged := from_judged_pairs(settings, rules, records):
        sources["threshold"] = judged
    if rules.auto_threshold:
        choice = threshold_choice(settings, rules)
        sources["threshold"] = (
            f"auto: {choice['how']}"
            if choice
            else "auto: read from the records by the next command that needs it"
        )
    return sources


def from_judged_pairs(
    settings: Mapping[str, Any] | None, rules: MatchRules, records: int | None = None
) -> str | None:
    """Where ``rules``' threshold comes from when ``tune --labels`` remembered it and nothing
    has given the store another one since; else None. Where the store now holds ``records``,
    twice those it held when the pairs were judged or more, or half or fewer, it says so: the
    pairs were drawn from other records, as an automatic threshold is read again then."""
    judged = (settings or {}).get("judged")
    if not judged or rules.auto_threshold or rules.threshold != judged["threshold"]:
        return None
    how = f"read from {judged['same']:,} pairs judged the same and {judged['different']:,} not"
    then = judged.get("records")
    if records is not None and then and doubled_or_halved(then, records):
        how += (
            f", when the store held {then:,} records (it holds {records:,}: judge a new sample "
            "of them)"
        )
    return how


def doubled_or_halved(then: int, now: int) -> bool:
    """Whether a store that held ``then`` records, and holds ``now``, holds twice as many or
    more, or half or fewer: what was read from its records then speaks for others now."""
    return now >= 2 * then or 2 * now <= then


def _renamed(remembered: Mapping[str, Any]) -> dict[str, Any]:
    """Rules a store remembers under their names of now: stores made before lookups' candidates
    had their own name remember them as ``rows``."""
    rules = dict(remembered)
    if "rows" in rules:
        rules["candidates"] = rules.pop("rows")
    return rules


def remembered_rules(rules: MatchRules) -> dict[str, Any]:
    """What a store keeps of the rules it was indexed for (see :func:`match_rules`)."""
    return {name: getattr(rules, name) for name in RULE_NAMES}
