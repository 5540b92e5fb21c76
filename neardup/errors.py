"""Errors a user can cause and fix. The CLI prints them as one line and exits non-zero."""


class NeardupError(Exception):
    """A user-facing error: bad input, a store that cannot be used, a wrong parameter."""


class ParameterMismatch(NeardupError):
    """The store was built with other fingerprint parameters than the ones asked for."""


class StoreUnavailable(NeardupError):
    """The store cannot be reached or opened."""


class StoreFull(StoreUnavailable):
    """A write the store's disk has no room for: the store holds what it held before it."""


class NoStore(StoreUnavailable):
    """A store that does not exist: nothing was indexed into it yet."""

    def __init__(self, missing: str, hint: str = "index some records into it first") -> None:
        super().__init__(f"{missing}: {hint}")
        self.missing = missing


class StoreChanged(NeardupError):
    """A report's reads that could not be of one state of the store: another process deleted
    or rewrote records it read meanwhile, which a store's snapshot cannot show as they were
    (Solr's, :meth:`neardup.stores.solr.SolrStore.snapshot`)."""

    def __init__(
        self, what: str = "", reading: str = "the report read it", again: str = "run the report"
    ) -> None:
        self.what = what
        said = f" ({what})" if what else ""
        super().__init__(f"the store changed while {reading}{said}: {again} again")


class UnknownRecord(NeardupError):
    """An id that the store does not hold."""


class InvalidText(NeardupError, ValueError):
    """A text that is not Unicode: it holds half of a surrogate pair, which no encoding writes."""


class InvalidParameter(NeardupError, ValueError):
    """A setting outside its range, such as bands that do not divide the number of hashes."""


class TooManyPairs(NeardupError):
    """A report whose token buckets of two contents alone make more candidate pairs than it
    may sort: leaving out larger buckets would not bring them within its budget."""

    def __init__(self, pairs: int, field: str = "bands") -> None:
        why = (
            "the bands have too few rows for this many records (most pairs share a band by "
            "chance). Index into a new store with fewer bands of more rows each (--bands 32 "
            "or 16 of 128 hashes)"
            if field == "bands"
            else f"{field} tokens are shared by too many records. Report with --method bands"
        )
        super().__init__(
            f"the {field} buckets make {pairs:,} candidate pairs, more than a report sorts "
            f"even without its largest buckets: {why}"
        )
        self.pairs = pairs
