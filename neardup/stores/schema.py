"""The engines' schema files (schema/solr/conf, schema/elasticsearch), as the stores use them.

The files live at the top of the repository, where people read them; ``neardup/schema`` links to
them so that they also ship inside the package.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ElementTree
from pathlib import Path

SCHEMA_DIR = Path(__file__).resolve().parents[1] / "schema"
SOLR_CONFIGSET = SCHEMA_DIR / "solr" / "conf"
ELASTICSEARCH_MAPPING = SCHEMA_DIR / "elasticsearch" / "mapping.json"


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
