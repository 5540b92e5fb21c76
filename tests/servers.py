"""Real search servers for the tests, one per kind per test session.

Where a server comes from, in order: an already running one named by NEARDUP_TEST_SOLR_URL
(``http://127.0.0.1:8983/solr``) or NEARDUP_TEST_ES_URL (``http://127.0.0.1:9200``); the
project's own launcher (servers/launch.py: Java and Maven, no Docker); testcontainers, where a
Docker engine answers. A server that cannot be had fails the tests that need it when CI is set,
and skips them with the reason otherwise. Cluster fixtures live only as long as their module.
"""

from __future__ import annotations

import os
import shutil
import socket
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import quote

import pytest
import requests

from neardup.stores import open_store
from servers import launch


@dataclass
class SearchServer:
    """A running search server: makes URLs of new, empty stores and removes them afterwards."""

    base: str  # the server's base URL
    shards: int = 1
    stop: Callable[[], None] = lambda: None
    auth: tuple[str, str] | None = None  # the server requires these credentials
    ca: Path | None = None  # the CA that signed its certificate, when it serves HTTPS
    made: list[str] = field(default_factory=list)
    scheme: ClassVar[str]
    path: ClassVar[str]  # between host:port and the store's name

    @property
    def host_port(self) -> str:
        return self.base.split("://", 1)[1].split("/", 1)[0]

    def new_store_url(self) -> str:
        name = f"t{uuid.uuid4().hex[:12]}"
        query = f"?shards={self.shards}" if self.shards > 1 else ""
        user = (
            f"{quote(self.auth[0], safe='')}:{quote(self.auth[1], safe='')}@" if self.auth else ""
        )
        scheme = f"{self.scheme}+https" if self.base.startswith("https:") else self.scheme
        url = f"{scheme}://{user}{self.host_port}{self.path}/{name}{query}"
        self.made.append(url)
        return url

    def request(self, method: str, path: str, **kwargs: Any) -> requests.Response:
        verify = str(self.ca) if self.ca else True
        return requests.request(
            method, f"{self.base}/{path}", auth=self.auth, timeout=60, verify=verify, **kwargs
        )

    def drop_made(self) -> None:
        """Remove every store made so far (fixtures call this in their teardown)."""
        with _trusting(self):
            for url in self.made:
                with open_store(url) as store:
                    store.drop()
        self.made.clear()


@contextmanager
def _trusting(server: SearchServer) -> Iterator[None]:
    """The server's CA in the environment, as a user of a secured cluster sets it."""
    names = ("NEARDUP_SOLR_CA_CERTS", "NEARDUP_ES_CA_CERTS")
    before = {name: os.environ.get(name) for name in names}
    if server.ca:
        os.environ.update(dict.fromkeys(names, str(server.ca)))
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@dataclass
class SolrServer(SearchServer):
    """Cores on standalone Solr, collections on SolrCloud."""

    cloud: bool = False
    zookeeper: str | None = None  # SolrCloud's ZooKeeper, HOST:PORT/CHROOT
    scheme: ClassVar[str] = "solr"
    path: ClassVar[str] = "/solr"

    def new_zookeeper_url(self) -> str:
        """A new collection's URL through ZooKeeper (solr+zk://), which follows live nodes."""
        assert self.zookeeper, "a SolrCloud server"
        name = self.new_store_url().split("?")[0].rsplit("/", 1)[1]
        return f"solr+zk://{self.zookeeper}/{name}?shards={self.shards}"


def _unavailable(what: str, reason: str) -> None:
    message = f"{what} is not available: {reason}"
    if os.environ.get("CI"):
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


def _docker_available() -> bool:
    if not shutil.which("docker"):
        return False
    try:
        import docker

        docker.from_env().ping()
        return True
    except Exception:
        return False


def _solr_from_docker() -> SolrServer:
    from testcontainers.core.container import DockerContainer
    from testcontainers.core.waiting_utils import wait_for_logs

    configset = Path(launch.SOLR_CONFIGSET)
    container = (
        DockerContainer("solr:9.10")
        .with_volume_mapping(str(configset), "/opt/solr/server/solr/configsets/neardup/conf", "ro")
        .with_env("SOLR_OPTS", "-Dsolr.max.booleanClauses=16384")
        .with_env("SOLR_HEAP", "512m")
        .with_exposed_ports(8983)
    )
    container.start()
    wait_for_logs(container, "Started Solr server", timeout=180)
    port = container.get_exposed_port(8983)
    return SolrServer(f"http://127.0.0.1:{port}/solr", stop=container.stop)


# The standalone test Solr requires basic auth, so every Solr test goes through credentials, as
# does a secured Elasticsearch node; the password has characters that must be escaped in a URL.
TEST_CREDENTIALS = ("neardup", "s3cret:/@pass")


def _start_solr(cloud: bool, tls: bool = False) -> SolrServer:
    what = "SolrCloud" if cloud else "Solr over TLS" if tls else "Solr"
    if not cloud and not tls and os.environ.get("NEARDUP_TEST_SOLR_URL"):
        return SolrServer(os.environ["NEARDUP_TEST_SOLR_URL"].rstrip("/"))
    reasons = []
    if shutil.which("java") and shutil.which("mvn"):
        credentials = None if cloud else TEST_CREDENTIALS
        try:
            server = launch.start_solr(
                cloud=cloud,
                port=None if cloud else launch.free_port(),
                heap="768m" if cloud else "512m",
                work=launch.STATE / f"test-{what.lower().replace(' ', '-')}",
                credentials=credentials,
                tls=tls,
            )
            return SolrServer(
                server.urls[0],
                cloud=cloud,
                zookeeper=server.zookeeper,
                shards=2 if cloud else 1,
                stop=lambda: server.stop(grace=0),  # throwaway data: no need for a clean shutdown
                auth=credentials,
                ca=server.log.parent / "certs" / "ca.crt" if tls else None,
            )
        except RuntimeError as exc:
            reasons.append(str(exc).splitlines()[0])
    else:
        reasons.append("java and mvn are not both on PATH")
    if not cloud and not tls and _docker_available():
        return _solr_from_docker()
    _unavailable(what, "; ".join(reasons) + "; no Docker engine either")
    raise AssertionError("unreachable")


@pytest.fixture(scope="session")
def solr_server() -> Iterator[SolrServer]:
    server = _start_solr(cloud=False)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def solr_secure_server() -> Iterator[SolrServer]:
    """Standalone Solr as a secured one runs: the BasicAuth plugin and HTTPS, with a CA made for
    the run. Only for its module."""
    server = _start_solr(cloud=False, tls=True)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def solr_cloud_server() -> Iterator[SolrServer]:
    server = _start_solr(cloud=True)
    yield server
    server.stop()


@dataclass
class ElasticsearchServer(SearchServer):
    """Indices on Elasticsearch."""

    scheme: ClassVar[str] = "elasticsearch"
    path: ClassVar[str] = ""


def _elasticsearch_from_docker() -> ElasticsearchServer:
    from testcontainers.elasticsearch import ElasticSearchContainer

    container = ElasticSearchContainer(
        f"docker.elastic.co/elasticsearch/elasticsearch:{launch.ES_VERSION}", mem_limit="1g"
    ).with_env("xpack.security.enabled", "false")
    container.start()
    return ElasticsearchServer(container.get_url(), stop=container.stop)


def _consecutive_free_ports(count: int) -> int:
    while True:
        first = launch.free_port()
        try:
            for port in range(first, first + count):
                with socket.socket() as probe:
                    probe.bind(("127.0.0.1", port))
            return first
        except OSError:
            continue


def _start_elasticsearch(nodes: int, secure: bool = False) -> ElasticsearchServer:
    what = f"a {nodes}-node Elasticsearch cluster" if nodes > 1 else "Elasticsearch"
    if nodes == 1 and not secure and os.environ.get("NEARDUP_TEST_ES_URL"):
        return ElasticsearchServer(os.environ["NEARDUP_TEST_ES_URL"].rstrip("/"))
    reasons = []
    if shutil.which("java") and shutil.which("mvn"):
        # Secured as Elasticsearch 8 ships: HTTPS, and a password for the elastic user.
        credentials = ("elastic", TEST_CREDENTIALS[1]) if secure else None
        work = launch.STATE / f"test-elasticsearch-{nodes}{'-secure' if secure else ''}"
        try:
            servers = launch.start_elasticsearch(
                port=_consecutive_free_ports(nodes),
                nodes=nodes,
                heap="512m",
                work=work,
                credentials=credentials,
                tls=secure,
            )

            def stop() -> None:
                for server in servers:
                    server.stop(grace=0)  # throwaway data: no need for a clean shutdown

            ca = work / "node-1" / "config" / "certs" / "ca.crt" if secure else None
            return ElasticsearchServer(
                servers[0].urls[0], shards=nodes, stop=stop, auth=credentials, ca=ca
            )
        except RuntimeError as exc:
            reasons.append(str(exc).splitlines()[0])
    else:
        reasons.append("java and mvn are not both on PATH")
    if nodes == 1 and _docker_available():
        return _elasticsearch_from_docker()
    _unavailable(what, "; ".join(reasons) + "; no Docker engine either")
    raise AssertionError("unreachable")


@pytest.fixture(scope="session")
def elasticsearch_server() -> Iterator[ElasticsearchServer]:
    server = _start_elasticsearch(nodes=1)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def elasticsearch_secure_server() -> Iterator[ElasticsearchServer]:
    """A node secured as Elasticsearch 8 ships (HTTPS with a CA made for the run, a password for
    the elastic user), for the tests of credentials and TLS. Only for its module: with security
    on, this minimal distribution keeps failing to write its built-in roles to the .security
    index (it lacks the analysis-common module), which loads the node."""
    server = _start_elasticsearch(nodes=1, secure=True)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def elasticsearch_cluster_server() -> Iterator[ElasticsearchServer]:
    server = _start_elasticsearch(nodes=2)
    yield server
    server.stop()


@pytest.fixture
def solr_url(solr_server: SolrServer) -> Iterator[str]:
    """A new core's URL; the core is removed after the test, whether it passed or not."""
    yield solr_server.new_store_url()
    solr_server.drop_made()


@pytest.fixture
def elasticsearch_url(elasticsearch_server: ElasticsearchServer) -> Iterator[str]:
    """A new index's URL; the index is removed after the test, whether it passed or not."""
    yield elasticsearch_server.new_store_url()
    elasticsearch_server.drop_made()


def when_a_report_reads(
    monkeypatch: pytest.MonkeyPatch, engine: type, happen: Callable[[Any], None]
) -> None:
    """``happen(store)`` while a report of an ``engine`` store reads (a lookup's threshold
    read too): once it has its first page of the records it joins, before it asks for the
    next; and before each request for its shingles' counts (a report from buckets, once it has
    read its records; a lookup). ``happen`` chooses when to act."""
    pages, counts = engine.iter_records, engine._frequencies

    def between_pages(store, *args, **kwargs):
        for page in pages(store, *args, **kwargs):
            yield page
            happen(store)

    def before_counts(store, keys):
        happen(store)
        return counts(store, keys)

    monkeypatch.setattr(engine, "iter_records", between_pages)
    monkeypatch.setattr(engine, "_frequencies", before_counts)
