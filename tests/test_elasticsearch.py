"""What only the Elasticsearch store does: mapping and _meta, bulk failures, server errors."""

from __future__ import annotations

import pytest
import requests

from neardup import api
from neardup.errors import NeardupError, StoreUnavailable
from neardup.fingerprint import FingerprintParams, fingerprint
from neardup.stores import Document, open_store


def test_parameters_live_in_the_mapping_meta(elasticsearch_server) -> None:
    url = elasticsearch_server.new_store_url()
    params = FingerprintParams("word", 2, 32, 8)
    with open_store(url) as store:
        store.ensure_params(params)
    index = url.rsplit("/", 1)[-1]
    mapping = requests.get(f"{elasticsearch_server.base}/{index}/_mapping", timeout=30).json()
    meta = mapping[index]["mappings"]["_meta"]
    assert meta["neardup_params"] == params.to_dict()
    assert mapping[index]["mappings"]["properties"]["content_sg"]["type"] == "keyword"
    with open_store(url) as store:
        assert store.read_params() == params
    elasticsearch_server.drop_made()


def test_bulk_failures_name_the_record(elasticsearch_server) -> None:
    url = elasticsearch_server.new_store_url()
    with open_store(url) as store:
        params = store.ensure_params(None)
        fine = fingerprint("some words here", params)
        immense = fingerprint("x" * 40_000 + " more", params)  # a term over Lucene's 32 KB limit
        with pytest.raises(
            NeardupError, match=r"rejected 1 records; first: 'huge-one': .*field \[first_word\]"
        ):
            store.upsert([Document("fine", fine), Document("huge-one", immense)])
        store.flush()
        assert list(store.get(["fine", "huge-one"])) == ["fine"]
    elasticsearch_server.drop_made()


def test_schema_apply_creates_the_index(elasticsearch_server) -> None:
    url = elasticsearch_server.new_store_url()
    api.apply_schema(url)
    index = url.rsplit("/", 1)[-1]
    assert requests.head(f"{elasticsearch_server.base}/{index}", timeout=30).status_code == 200
    api.apply_schema(url)  # applying again is harmless
    elasticsearch_server.drop_made()


def test_a_missing_index_is_a_clear_error_for_readers(elasticsearch_server) -> None:
    with pytest.raises(StoreUnavailable, match="no Elasticsearch index 'absent'"):
        open_store(
            f"elasticsearch://{elasticsearch_server.base.split('://')[1]}/absent", create=False
        )


def test_an_unreachable_server_is_a_clear_error() -> None:
    with pytest.raises(StoreUnavailable, match="not reachable"):
        open_store("elasticsearch://127.0.0.1:9/x", create=False)


@pytest.mark.parametrize("url", ["elasticsearch://127.0.0.1:9200/", "elasticsearch://h:1/a/b"])
def test_malformed_urls(url: str) -> None:
    with pytest.raises(NeardupError, match="elasticsearch://host:port/INDEX"):
        open_store(url)
