"""Engines with security switched on, as people run them: Solr with its BasicAuth plugin over
HTTPS, and Elasticsearch 8 as it ships (HTTPS, a password for the elastic user), each with a CA
made for the run. Credentials and the CA come from the environment, as the README says."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from neardup import api
from neardup.service import create_app
from tests.corpora import corpus
from tests.runner import neardup
from tests.servers import SearchServer

ENGINES = {
    "solr": ("solr_secure_server", "SOLR"),
    "elasticsearch": ("elasticsearch_secure_server", "ES"),
}


@pytest.fixture(params=list(ENGINES), scope="module")
def secured(request: pytest.FixtureRequest) -> SearchServer:
    return request.getfixturevalue(ENGINES[request.param][0])


def _bare(server: SearchServer) -> tuple[str, dict[str, str]]:
    """A new store's URL with no credentials in it, and the environment that secures it."""
    url = server.new_store_url()
    scheme, rest = url.split("://", 1)
    bare = f"{scheme}://{rest.rsplit('@', 1)[-1]}"  # the one in server.made is removed after
    engine = "SOLR" if scheme.startswith("solr") else "ES"
    assert server.auth and server.ca
    env = {
        f"NEARDUP_{engine}_USER": server.auth[0],
        f"NEARDUP_{engine}_PASSWORD": server.auth[1],
        f"NEARDUP_{engine}_CA_CERTS": str(server.ca),
    }
    return bare, env


def test_index_lookup_report_and_serve_over_tls(
    secured: SearchServer, sqlite_url: str, tmp_path: Path, monkeypatch
) -> None:
    url, env = _bare(secured)
    assert url.split("://")[0].endswith("+https")
    records = corpus(tmp_path / "records.txt")
    try:
        assert neardup("index", str(records), "--store", url, env=env).returncode == 0
        api.index([records], sqlite_url)
        reported = neardup("report", "--store", url, env=env)
        assert reported.returncode == 0
        assert reported.stdout == neardup("report", "--store", sqlite_url).stdout
        looked_up = neardup("lookup", "--store", url, "--id", "1", "--json", env=env)
        assert (
            looked_up.stdout
            == neardup("lookup", "--store", sqlite_url, "--id", "1", "--json").stdout
        )
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        with TestClient(create_app(url)) as client:
            answer = client.post("/lookup", json={"id": "1"})
            assert answer.status_code == 200
            assert [m["id"] for m in answer.json()["matches"]] == [
                m.id for m in api.lookup(sqlite_url, id="1")
            ]
    finally:
        secured.drop_made()


def test_a_wrong_password_a_missing_ca_and_plain_http_are_one_line_each(
    secured: SearchServer,
) -> None:
    url, env = _bare(secured)
    engine = "solr" if url.startswith("solr") else "elasticsearch"
    password = next(name for name in env if name.endswith("_PASSWORD"))
    ca = next(name for name in env if name.endswith("_CA_CERTS"))
    plain = url.replace(f"{engine}+https://", f"{engine}://")
    cases = [
        (url, {**env, password: "wrong"}, "refused the credentials (HTTP 401)"),
        (
            url,
            {name: v for name, v in env.items() if name != ca},
            "its TLS certificate is not trusted here",
        ),
        (plain, env, f"the URL is {engine}+https://"),
    ]
    try:
        for store, environment, said in cases:
            result = neardup("stats", "--store", store, env=environment)
            assert result.returncode == 2, result
            lines = result.stderr.strip().splitlines()
            assert len(lines) == 1 and said in lines[0], result.stderr
            assert secured.auth and secured.auth[1] not in result.stderr
    finally:
        secured.drop_made()
