"""What only the Solr store does: schema management through the Schema API, server errors."""

from __future__ import annotations

import pytest
import requests

from neardup import api
from neardup.errors import NeardupError, StoreUnavailable
from neardup.stores import open_store


def fields(base: str, name: str) -> set[str]:
    body = requests.get(f"{base}/{name}/schema/fields", timeout=30).json()
    return {f["name"] for f in body["fields"]}


def test_schema_apply_adds_missing_fields(solr_server) -> None:
    url = solr_server.new_store_url()
    name = url.rsplit("/", 1)[-1]
    api.apply_schema(url)
    requests.post(
        f"{solr_server.base}/{name}/schema",
        json={"delete-field": {"name": "content_lsh"}},
        timeout=30,
    ).raise_for_status()
    assert "content_lsh" not in fields(solr_server.base, name)
    api.apply_schema(url)
    assert "content_lsh" in fields(solr_server.base, name)


def test_a_missing_core_is_a_clear_error_for_readers(solr_server) -> None:
    with pytest.raises(StoreUnavailable, match="no Solr core or collection 'absent'"):
        open_store(f"solr://{solr_server.base.split('://')[1]}/absent", create=False)


def test_an_unreachable_server_is_a_clear_error() -> None:
    with pytest.raises(StoreUnavailable, match="not reachable"):
        open_store("solr://127.0.0.1:9/solr/x", create=False)


@pytest.mark.parametrize(
    "url", ["solr://127.0.0.1:8983/", "solr://127.0.0.1:8983/solr", "solr://h/x"]
)
def test_malformed_urls(url: str) -> None:
    with pytest.raises(NeardupError, match="solr://host:port/solr/NAME"):
        open_store(url)
