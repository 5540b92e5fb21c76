"""One name per token field, from the CLI flag to the engine schema; stores made with the
recipe's old field names (content_ng, content_sg, content_lsh) are still read and written."""

from __future__ import annotations

import xml.etree.ElementTree as ElementTree

import pytest

from neardup.cli import _parser
from neardup.fingerprint import TOKEN_FIELDS, TokenField
from neardup.stores import open_store
from neardup.stores.schema import (
    LEGACY_FIELD_NAMES,
    SOLR_CONFIGSET,
    elasticsearch_mapping,
    field_names,
)
from tests.test_store_contract import PARAMS, answer, documents, random_corpus, tokens_of


def test_one_name_per_token_field() -> None:
    assert TOKEN_FIELDS == tuple(f.value for f in TokenField) == ("shingles", "signature", "bands")
    lookup = _parser().parse_args(["lookup", "--id", "1", "--method", "bands"])
    assert lookup.method == "bands"
    methods = next(
        a.choices
        for a in _parser()._subparsers._group_actions[0].choices["lookup"]._actions
        if a.dest == "method"
    )
    assert tuple(methods) == TOKEN_FIELDS
    assert set(TOKEN_FIELDS) <= set(elasticsearch_mapping()["properties"])
    assert elasticsearch_mapping()["_source"]["excludes"] == list(TOKEN_FIELDS)  # not stored
    solr_fields = {
        f.get("name")
        for f in ElementTree.parse(SOLR_CONFIGSET / "managed-schema.xml").getroot().iter("field")
    }
    assert set(TOKEN_FIELDS) <= solr_fields
    assert field_names({"layout": 2}) == {f: f.value for f in TokenField}
    assert field_names({}) == field_names(None) == {f: f.value for f in TokenField}
    assert field_names({"num_hashes": 16}) == LEGACY_FIELD_NAMES  # settings of a 0.1 store


def _add_legacy_fields(kind: str, store) -> None:
    if kind == "solr":
        fields = [{"name": n, "type": "tokens", "indexed": True, "stored": False} for n in LEGACY]
        store._core("POST", "schema", json={"add-field": fields})
    else:
        keyword = {"type": "keyword", "doc_values": False, "index_options": "docs", "norms": False}
        store.es.indices.put_mapping(index=store.index, properties=dict.fromkeys(LEGACY, keyword))


def _documents_with(kind: str, store, name: str) -> int:
    if kind == "solr":
        return store._search(q=f"{name}:[* TO *]", rows=0)["response"]["numFound"]
    return store.es.count(index=store.index, query={"exists": {"field": name}})["count"]


LEGACY = list(LEGACY_FIELD_NAMES.values())


@pytest.mark.parametrize("kind", ["solr", "elasticsearch"])
def test_a_store_with_the_old_field_names_is_read_and_written(request, kind: str) -> None:
    server = request.getfixturevalue(f"{kind}_server")
    try:
        with open_store(server.new_store_url()) as store:
            store.apply_schema()
            _add_legacy_fields(kind, store)
            store.write_settings(PARAMS.to_dict())  # as neardup 0.1 wrote them: no layout
            docs = documents(random_corpus(seed=5, size=40))
            store.upsert(docs)
            store.flush()
            assert _documents_with(kind, store, "content_lsh") == len(docs)
            assert _documents_with(kind, store, "bands") == 0
            for query in documents(random_corpus(seed=6, size=5)):
                for field in TokenField:
                    fp = query.fingerprint
                    answer(store, docs, tokens_of(field, fp, 10))
    finally:
        server.drop_made()
