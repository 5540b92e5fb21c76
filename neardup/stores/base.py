"""The one small interface every store implements.

A store holds, per record: the id, the normalised content, its MD5, the first word, the number of
words, and three multi-valued token fields (shingles, signature, bands). The indexer and the
searcher talk to nothing else, so every engine gives the same answers.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from itertools import islice

import numpy as np

from ..errors import ParameterMismatch
from ..fingerprint import TOKEN_FIELDS, Fingerprint, FingerprintParams

ParamsRequest = FingerprintParams | Mapping[str, object] | None


class TokenField(StrEnum):
    """The multi-valued token fields a candidate query can OR over."""

    SHINGLES = "shingles"
    SIGNATURE = "signature"
    BANDS = "bands"

    def tokens(self, fp: Fingerprint) -> list[str]:
        if self is TokenField.SHINGLES:
            return fp.shingle_tokens()
        if self is TokenField.SIGNATURE:
            return fp.signature_tokens()
        return fp.band_tokens()

    def keys(self, fp: Fingerprint) -> np.ndarray:
        """The tokens as 64-bit integers (int64, as SQLite stores them), one per token string:
        a signature token is its position and value, a band or shingle token its hash."""
        if self is TokenField.SIGNATURE:
            positions = np.arange(len(fp.signature), dtype=np.uint64) << np.uint64(32)
            keys = positions | fp.signature.astype(np.uint64)
        else:
            keys = fp.shingles if self is TokenField.SHINGLES else fp.bands
        return keys.view(np.int64)

    def size(self, fp: Fingerprint) -> int:
        """How many tokens ``fp`` has in this field: the score of an exact duplicate."""
        if self is TokenField.SHINGLES:
            return len(fp.shingles)
        return len(fp.signature if self is TokenField.SIGNATURE else fp.bands)


@dataclass(frozen=True)
class Document:
    """One record ready to store: its id, its fingerprint and the token fields to index
    (the store's ``FingerprintParams.fields``)."""

    id: str
    fingerprint: Fingerprint
    fields: tuple[str, ...] = TOKEN_FIELDS

    def indexed(self, field: TokenField) -> bool:
        return field.value in self.fields


@dataclass(frozen=True)
class StoredRecord:
    id: str
    content: str
    md5: str
    first_word: str
    num_words: int


@dataclass(frozen=True)
class Candidate:
    id: str
    score: int  # how many of the query's tokens the record shares
    md5: str


@dataclass(frozen=True)
class CandidateQuery:
    """One OR-query over a token field: see :meth:`Store.candidates`."""

    field: TokenField
    tokens: Sequence[str]
    rows: int
    first_word: str | None = None
    exclude_md5: Sequence[str] = ()


def sort_candidates(candidates: list[Candidate]) -> list[Candidate]:
    """The order every store returns: score descending, then id ascending (UTF-8 byte order)."""
    return sorted(candidates, key=lambda c: (-c.score, c.id.encode("utf-8")))


class Store(ABC):
    """A place that keeps fingerprinted records and answers token queries over them."""

    url: str

    def ensure_params(self, params: ParamsRequest = None) -> FingerprintParams:
        """Create the schema if needed and return the store's fingerprint parameters.

        ``params`` is complete parameters, or a mapping of the settings a user gave, applied over
        the store's own (or the defaults, for a new store). A new store takes the result; an
        existing one refuses anything that differs from what it holds, naming both.
        """
        stored = self.read_params()
        if isinstance(params, Mapping):
            params = replace(stored or FingerprintParams(), **params)
        if stored is None:
            chosen = params or FingerprintParams()
            self.write_params(chosen)
            return chosen
        if params is not None and params != stored:
            raise ParameterMismatch(
                f"{self.url} was indexed with {stored.describe()}; "
                f"this run asks for {params.describe()}"
            )
        return stored

    @abstractmethod
    def apply_schema(self) -> None:
        """Create the store's schema (tables, core, collection or index), or add what it lacks."""

    @abstractmethod
    def read_params(self) -> FingerprintParams | None:
        """The stored parameters, or None for a store with no schema yet."""

    @abstractmethod
    def write_params(self, params: FingerprintParams) -> None:
        """Create the schema and record the parameters."""

    @abstractmethod
    def upsert(self, documents: Sequence[Document]) -> None:
        """Insert or replace a batch by id, all or nothing."""

    @abstractmethod
    def get(self, ids: Sequence[str]) -> dict[str, StoredRecord]:
        """The stored records among ``ids``; missing ids are absent from the result."""

    @abstractmethod
    def ids_by_md5(self, md5s: Sequence[str]) -> dict[str, list[str]]:
        """For each MD5, every id whose content has it, in id order: the complete
        exact-duplicate groups, in one round trip ([] for an MD5 no record has)."""

    @abstractmethod
    def candidates_many(self, queries: Sequence[CandidateQuery]) -> list[list[Candidate]]:
        """The answer to each candidate query, together (engines batch them): the top
        ``rows`` records sharing at least one of its tokens, by :func:`sort_candidates` order.

        Only records whose first word is the query's ``first_word`` (when given) and whose MD5
        is not in its ``exclude_md5`` count.
        """

    def candidates(
        self,
        field: TokenField,
        tokens: Sequence[str],
        *,
        rows: int,
        first_word: str | None = None,
        exclude_md5: Sequence[str] = (),
    ) -> list[Candidate]:
        """One candidate query (see :meth:`candidates_many`)."""
        query = CandidateQuery(field, tokens, rows, first_word, exclude_md5)
        return self.candidates_many([query])[0]

    @abstractmethod
    def iter_ids(self) -> Iterator[str]:
        """Every id, in id order (UTF-8 byte order)."""

    def iter_records(self, batch_size: int = 1000) -> Iterator[list[StoredRecord]]:
        """Every record, in id order, ``batch_size`` at a time (one fetch per batch)."""
        ids = self.iter_ids()
        while batch := list(islice(ids, batch_size)):
            records = self.get(batch)
            yield [records[i] for i in batch if i in records]

    @abstractmethod
    def count(self) -> int: ...

    @abstractmethod
    def delete(self, ids: Sequence[str]) -> int:
        """Delete these ids; returns how many existed."""

    def flush(self) -> None:  # noqa: B027 - most stores write through; engines override to commit
        """Make everything upserted so far visible to queries."""

    @abstractmethod
    def close(self) -> None: ...

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
