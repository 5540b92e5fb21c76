"""The engines' schema files (schema/solr/conf, schema/elasticsearch), as the stores use them.

The files live at the top of the repository, where people read them; ``neardup/schema`` links to
them so that they also ship inside the package.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ElementTree
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from .base import NAMED_FIELDS_LAYOUT, Document, TokenField

SCHEMA_DIR = Path(__file__).resolve().parents[1] / "schema"
SOLR_CONFIGSET = SCHEMA_DIR / "solr" / "conf"
ELASTICSEARCH_MAPPING = SCHEMA_DIR / "elasticsearch" / "mapping.json"

# Each token field is an engine field of the same name. Stores made before that (no "layout" in
# their settings) use the recipe's names, and keep them.
LEGACY_FIELD_NAMES = {
    TokenField.SHINGLES: "content_ng",
    TokenField.SIGNATURE: "content_sg",
    TokenField.BANDS: "content_lsh",
}


def field_names(settings: Mapping[str, Any] | None) -> dict[TokenField, str]:
    """The engine field of each token field, for a store with these settings."""
    if settings and settings.get("layout", 1) < NAMED_FIELDS_LAYOUT:
        return LEGACY_FIELD_NAMES
    return {field: field.value for field in TokenField}


def engine_document(
    document: Document, names: Mapping[TokenField, str], counted: bool = False
) -> dict[str, object]:
    """A record as a Solr or Elasticsearch document. In a store that ``counted`` its shingles'
    document frequencies, the shingles field is always indexed: the engine counts it."""
    fp = document.fingerprint
    return {
        "id": document.id,
        "content": fp.content,
        "md5_hash": fp.md5,
        "first_word": fp.first_word,
        "num_words": fp.num_words,
        **{
            names[field]: field.tokens(fp)
            for field in TokenField
            if document.indexed(field) or (counted and field is TokenField.SHINGLES)
        },
    }


# Records per page of an engine's walk that reads them whole, in one request a page where ids
# and then each thousand's records by id took two: a million people from Elasticsearch 14.6 s,
# against 23.2 s (17.3 s in pages of 1,000).
RECORD_PAGE = 5_000
# Shingles per frequency request: each is one query (Solr) or filter (Elasticsearch) counting
# the records that hold it.
FREQUENCY_REQUEST_KEYS = 1000
# (the engine field, its tokens) -> (records in the store, how many hold each token)
CountRequest = Callable[[str, list[str]], tuple[int, list[int]]]


def engine_frequencies(
    settings: Mapping[str, Any] | None, keys: np.ndarray, count: CountRequest
) -> tuple[int, np.ndarray]:
    """What an engine store's ``_frequencies`` answers: the shingle ``keys`` as the engine's
    tokens, asked ``FREQUENCY_REQUEST_KEYS`` at a time (at least one request, for the number
    of records)."""
    name = field_names(settings)[TokenField.SHINGLES]
    tokens = TokenField.SHINGLES.strings(keys)
    counts: list[int] = []
    records = 0
    for start in range(0, max(len(tokens), 1), FREQUENCY_REQUEST_KEYS):
        records, held = count(name, tokens[start : start + FREQUENCY_REQUEST_KEYS])
        counts += held
    return records, np.array(counts, dtype=np.int64)


# Band tokens listed per bucket request, about: an engine lists a field's shared tokens a prefix
# at a time, with the query held to the records that have a token of that prefix, so that each
# request reads a slice of the field rather than all of it.
TOKENS_PER_REQUEST = 100_000


def band_prefixes(bands: int, records: int) -> list[str]:
    """Prefixes that split the band tokens (``3_9f2c…``) into requests of at most about
    TOKENS_PER_REQUEST tokens: each band, then the first hex digits of its hash."""
    digits = 0
    while records > TOKENS_PER_REQUEST * 16**digits:
        digits += 1
    return [f"{band}_{tail}" for band in range(bands) for tail in hex_tails(digits)]


def hex_tails(digits: int) -> list[str]:
    """Every string of ``digits`` hex digits, in order."""
    return [""] if digits == 0 else [f"{n:0{digits}x}" for n in range(16**digits)]


def solr_schema() -> tuple[list[dict[str, object]], list[dict[str, object]]]:
    """(field types, fields) of managed-schema.xml, in the Schema API's JSON form."""
    root = ElementTree.parse(SOLR_CONFIGSET / "managed-schema.xml").getroot()

    def as_json(element: ElementTree.Element) -> dict[str, object]:
        values: dict[str, object] = {}
        for key, value in element.attrib.items():
            values[key] = value == "true" if value in ("true", "false") else value
        return values

    return [as_json(e) for e in root.iter("fieldType")], [as_json(e) for e in root.iter("field")]


def elasticsearch_mapping() -> dict[str, object]:
    return json.loads(ELASTICSEARCH_MAPPING.read_text(encoding="utf-8"))
