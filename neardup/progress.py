"""Progress bars on stderr: tqdm's when one is shown, a counter otherwise.

Importing tqdm takes ~50 ms (it reads the installed packages' metadata for its own version), a
sixth of a command's start, and most runs show no bar: output to a file or a pipe, the API,
the service.
"""

from __future__ import annotations

from typing import Any, Protocol


class Bar(Protocol):
    n: float

    def update(self, n: float = 1) -> Any: ...


class _Hidden:
    """A bar nobody sees: it only counts, as callers read ``n`` back."""

    def __init__(self) -> None:
        self.n: float = 0

    def update(self, n: float = 1) -> None:
        self.n += n

    def __enter__(self) -> _Hidden:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


def progress_bar(shown: bool, **options: Any) -> Any:
    """A context manager giving a :class:`Bar`: tqdm's (with ``options``) when ``shown``."""
    if not shown:
        return _Hidden()
    from tqdm import tqdm

    return tqdm(leave=False, **options)
