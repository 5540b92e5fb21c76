"""Fixtures: one ``store`` fixture parametrised over every store kind.

The embedded store needs nothing. Server stores join the list in their own plugin modules, which
start one server per test session and give each test a fresh core or index.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from neardup.stores import Store, open_store

pytest_plugins = ["tests.servers"]

STORE_KINDS = ["sqlite", "solr", "elasticsearch"]

StoreFactory = Callable[[], Store]


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'store.db'}"


@pytest.fixture(params=STORE_KINDS)
def store_url_factory(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[Callable[[], str]]:
    """Makes URLs of fresh, empty stores of one kind."""
    if request.param == "sqlite":
        yield lambda: f"sqlite:///{tmp_path / f'{uuid.uuid4().hex}.db'}"
        return
    server = request.getfixturevalue(f"{request.param}_server")
    yield server.new_store_url
    server.drop_made()


@pytest.fixture
def store_factory(store_url_factory: Callable[[], str]) -> Iterator[StoreFactory]:
    opened: list[Store] = []

    def make() -> Store:
        store = open_store(store_url_factory())
        opened.append(store)
        return store

    yield make
    for store in opened:
        store.close()


@pytest.fixture
def store(store_factory: StoreFactory) -> Store:
    return store_factory()
