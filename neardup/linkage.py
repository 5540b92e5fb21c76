"""Linking two sources one to one: each record of a file with the stored record it is most
like, when that stored record is most like it too (a mutual best match). Pure functions.

Two sources of the same things (two shops' listings, two ledgers, two libraries) hold each
thing once or not at all, so a record has at most one counterpart in the other source. Where
a report lists every pair at or above a threshold, a record of one shop pairs with every
listing of the other that shares its words, and the threshold that serves one pair of sources
fails the next; the mutual best match needs none: a record and its counterpart are each
other's nearest, and two unrelated records rarely are (benchmarks/README.md, "Linking two
sources").
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence

from .searcher import Match, by_id


class MutualBest:
    """The mutual best matches of a file's records, their matches added a record at a time:
    it holds each record's best match and each stored record's best similarity, not every
    match, so that a file of a million records links in the memory of its records. A stored
    record's best is two numbers in arrays, not a tuple made each time a better one comes,
    and an id's natural key is made only to break a tie: small objects kept from each batch
    among its many matches keep the memory they are spread over from being given back."""

    def __init__(self) -> None:
        self._best_stored: dict[int, Match] = {}
        self._slot: dict[str, int] = {}  # each stored id's place in the two arrays
        self._best_similarity = array("d")
        self._best_record = array("q")

    def add(self, place: int, matches: Sequence[Match]) -> None:
        """The stored records that matched the record at ``place`` in the file (once for each
        place, in increasing order). Most similar first; of equals, the stored id first in
        natural order, or the record first in the file."""
        if matches:
            top = max(match.similarity for match in matches)
            tied = [match for match in matches if match.similarity == top]
            self._best_stored[place] = by_id(tied)[0]
        for match in matches:
            slot = self._slot.setdefault(match.id, len(self._slot))
            if slot == len(self._best_record):
                self._best_similarity.append(match.similarity)
                self._best_record.append(place)
            elif match.similarity > self._best_similarity[slot]:  # of equals, the earlier place
                self._best_similarity[slot] = match.similarity
                self._best_record[slot] = place

    def links(self) -> list[tuple[int, Match]]:
        """Each record whose best stored record has it as its best record, by place, with that
        match: one pair at most for every record of either side."""
        return [
            (place, match)
            for place, match in sorted(self._best_stored.items())
            if self._best_record[self._slot[match.id]] == place
        ]
