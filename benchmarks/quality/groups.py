"""Do large groups of reposted Kijiji ads come out complete with --preset documents?

    python benchmarks/quality/groups.py ADS.tsv PAIRS.tsv

The true groups are the connected components of the brute-force pairs with Jaccard >= 0.85; each
must lie inside one reported cluster, and every pair inside a group of 10 or more is counted.
"""

from __future__ import annotations

from common import reported_pairs
from kijiji import load_from_arguments

from neardup.report import Pair, clusters
from neardup.settings import PRESETS


def groups(pairs) -> list[list[str]]:
    return clusters([Pair(a, b, 0, 1.0, 0, "near") for a, b in pairs])


def main() -> None:
    records, truth = load_from_arguments(__doc__.splitlines()[0])
    preset = PRESETS["documents"]
    found, _ = reported_pairs(records, preset.params, preset.rules)
    cluster_of = {member: n for n, group in enumerate(groups(found)) for member in group}
    true_groups = groups(p for p, similarity in truth.items() if similarity >= 0.85)
    split = [g for g in true_groups if len({cluster_of.get(m) for m in g}) != 1]
    large = [g for g in true_groups if len(g) >= 10]
    inside = [(a, b) for g in large for i, a in enumerate(g) for b in g[i + 1 :]]
    print(f"true groups (J >= 0.85): {len(true_groups)}, largest {max(map(len, true_groups))}")
    print(f"groups split across reported clusters or missing: {len(split)}")
    print(
        f"pairs inside the {len(large)} groups of 10 or more: {len(inside)}, "
        f"reported: {sum(p in found for p in inside)}"
    )


if __name__ == "__main__":
    main()
