"""Counts in words, and summaries' lines, as every summary neardup prints says them."""


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """``1 pair``, ``2 pairs``, ``12,000 pairs``; ``plural`` where it is not ``noun`` + s."""
    return f"{count:,} {noun if count == 1 else plural or noun + 's'}"


def leading_lines(lines: list[str]) -> str:
    """The lines a summary says before its last (how files were read, what was checked), each
    ended by a line break; empty ones left out."""
    return "".join(f"{line}\n" for line in lines if line)
