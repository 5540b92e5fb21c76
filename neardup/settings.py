"""What a run asks for, turned into fingerprint parameters and match rules.

A setting comes from, last one winning: the defaults, what the store remembers from the run that
indexed it, a preset, and the settings given. The presets are named settings for the two kinds
of data neardup meets, chosen from the measurements in benchmarks/README.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from .errors import InvalidParameter
from .fingerprint import FingerprintParams, TokenField, parse_shingle
from .searcher import MatchRules
from .stores.base import ParamsRequest
from .tuning import recommend_bands

RulesRequest = MatchRules | Mapping[str, Any] | None
RULE_NAMES = tuple(f.name for f in fields(MatchRules))
# The default method: the first of these the store indexes.
_METHOD_ORDER = (TokenField.SIGNATURE, TokenField.BANDS, TokenField.SHINGLES)


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
        # Person, address and product records: character 4-grams survive typos; a low Jaccard
        # threshold suits short texts, where one typo changes a large share of the shingles;
        # 64 bands of 2 rows catch pairs down to that threshold. Febrl 1 and 3: F1 1.000 and
        # 0.995, precision 1.000.
        Preset(
            "records",
            "short name, address or product records",
            FingerprintParams("char", 4, 128, 64, fields=("bands",)),
            MatchRules(method="bands", threshold=0.3),
        ),
        # Articles, ads, tickets: character 5-grams, Jaccard >= 0.8, bands tuned for 0.8
        # (16 of 8 rows). Kijiji ads: recall 1.000 of pairs >= 0.85, precision 1.000.
        Preset(
            "documents",
            "long texts: articles, ads, tickets",
            FingerprintParams("char", 5, 128, 16, fields=("bands",)),
            MatchRules(method="bands", threshold=0.8),
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


def default_bands(num_hashes: int) -> int:
    """Bands for K hashes when nothing else decides: 4 rows per band where K allows it, else one
    row each (a band per hash)."""
    return num_hashes // 4 if num_hashes % 4 == 0 else num_hashes


def params_request(
    params: ParamsRequest = None, *, preset_name: str | None = None, threshold: float | None = None
) -> ParamsRequest:
    """The fingerprint settings a run asks for: the preset's, then ``params`` (complete
    parameters, or a mapping of the settings given; ``shingle`` may be ``"char:5"``).

    Bands that are not given follow from the rest: tuned for ``threshold`` when there is one
    (see :mod:`neardup.tuning`), else :func:`default_bands` of a given number of hashes.
    """
    if isinstance(params, FingerprintParams):
        return params
    given = dict(params or {})
    if "shingle" in given:
        given["shingle_kind"], given["shingle_size"] = parse_shingle(str(given.pop("shingle")))
    if isinstance(given.get("fields"), str):
        given["fields"] = tuple(f.strip() for f in given["fields"].split(","))
    asked = (preset(preset_name).params.to_dict() if preset_name else {}) | given
    if "bands" not in given:
        num_hashes = int(asked.get("num_hashes", FingerprintParams().num_hashes))
        if threshold:
            asked["num_hashes"] = num_hashes
            asked["bands"] = recommend_bands(check_threshold(threshold), num_hashes).bands
        elif "num_hashes" in given:
            asked["bands"] = default_bands(num_hashes)
    _check(asked)
    return asked or None


def _check(asked: Mapping[str, Any]) -> None:
    """Refuse a setting out of its range now, before any store is opened or created. (Whether
    bands divide the hashes of an existing store is checked against that store.)"""
    probe = FingerprintParams().to_dict() | dict(asked)
    if "bands" in asked and "num_hashes" not in asked:
        probe["num_hashes"] = max(int(asked["bands"]), 1)
    FingerprintParams.from_dict(probe)


def check_threshold(threshold: float) -> float:
    if not 0.0 < threshold < 1.0:  # also refuses nan
        raise InvalidParameter(f"a threshold for tuning must be between 0 and 1, not {threshold}")
    return threshold


def match_rules(
    params: FingerprintParams,
    remembered: Mapping[str, Any] | None = None,
    rules: RulesRequest = None,
    *,
    preset_name: str | None = None,
) -> MatchRules:
    """The rules of a lookup or report on a store with ``params``: the defaults, what the store
    ``remembered``, the preset's, then ``rules`` (complete, or a mapping of the rules given).

    The default method is the first of signature, bands and shingles the store indexes, so a
    store indexed with fewer fields is queried the way it can answer.
    """
    if isinstance(rules, MatchRules):
        return rules
    base = MatchRules(method=next(f for f in _METHOD_ORDER if f in params.fields))
    if preset_name:
        base = preset(preset_name).rules
    elif remembered:
        base = replace(base, **remembered)
    given = dict(rules or {})
    if given.get("threshold") == 0:
        given["threshold"] = None  # 0 turns the threshold off
    return replace(base, **given)


def remembered_rules(rules: MatchRules) -> dict[str, Any]:
    """What a store keeps of the rules it was indexed for (see :func:`match_rules`)."""
    return {name: getattr(rules, name) for name in RULE_NAMES}
