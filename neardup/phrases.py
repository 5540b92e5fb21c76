"""Counts in words, as every summary neardup prints says them."""


def counted(count: int, noun: str) -> str:
    """``1 pair``, ``2 pairs``, ``12,000 pairs``."""
    return f"{count:,} {noun}{'' if count == 1 else 's'}"
