"""Named settings for the two kinds of data neardup meets, chosen from the measurements in
benchmarks/README.md. A preset fills the settings a user does not give; given flags win."""

from __future__ import annotations

from dataclasses import dataclass

from .errors import NeardupError
from .fingerprint import FingerprintParams
from .searcher import MatchRules


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
            MatchRules(method="lsh", threshold=0.3),
        ),
        # Articles, ads, tickets: character 5-grams, Jaccard >= 0.8, bands tuned for 0.8
        # (16 of 8 rows). Kijiji ads: recall 1.000 of pairs >= 0.85, precision 1.000.
        Preset(
            "documents",
            "long texts: articles, ads, tickets",
            FingerprintParams("char", 5, 128, 16, fields=("bands",)),
            MatchRules(method="lsh", threshold=0.8),
        ),
    ]
}


def preset(name: str) -> Preset:
    try:
        return PRESETS[name]
    except KeyError:
        raise NeardupError(f"unknown preset {name!r}: use one of {', '.join(PRESETS)}") from None
