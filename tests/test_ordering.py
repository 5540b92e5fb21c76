import numpy as np
import pytest

from neardup.ordering import lexsort


def _keys(rng: np.random.Generator, count: int, kind: str) -> np.ndarray:
    if kind == "small":  # many ties
        return rng.integers(0, 4, count)
    if kind == "negative":
        return -rng.integers(1, 200, count)
    if kind == "int32":
        return rng.integers(0, 1 << 20, count).astype(np.int32)
    if kind == "bool":
        return rng.random(count) < 0.5
    if kind == "uint64 high":  # past int64, in a narrow range
        return np.uint64(1 << 63) + rng.integers(0, 1000, count).astype(np.uint64)
    if kind == "wide":  # 63 bits: packed alone, too wide beside another key
        return rng.integers(-(1 << 62), 1 << 62, count)
    return rng.random(count)  # floats are never packed


KINDS = ["small", "negative", "int32", "bool", "uint64 high", "wide", "float"]


@pytest.mark.parametrize("first", KINDS)
@pytest.mark.parametrize("second", KINDS)
def test_lexsort_gives_numpys_order_packed_or_not(first: str, second: str) -> None:
    rng = np.random.default_rng(len(first) * 31 + len(second))
    for count in (0, 1, 7, 2_000):
        keys = [_keys(rng, count, first), _keys(rng, count, second), _keys(rng, count, "small")]
        assert lexsort(keys).tolist() == np.lexsort(keys).tolist()
        assert lexsort(keys[:1]).tolist() == np.lexsort(keys[:1]).tolist()


def test_lexsort_packs_keys_up_to_63_bits_and_no_more(monkeypatch: pytest.MonkeyPatch) -> None:
    low = np.array([0, (1 << 40) - 1, 5, 5], dtype=np.int64)
    high = np.array([(1 << 23) - 1, 0, 3, 3], dtype=np.int64)  # 40 + 23 bits
    wider = np.where(high > 3, 1 << 23, high)  # 40 + 24 bits
    expected = [np.lexsort([low, h]).tolist() for h in (high, wider)]
    assert expected == [[1, 2, 3, 0], [1, 2, 3, 0]]
    sorted_by_numpy = []
    monkeypatch.setattr(
        np, "lexsort", lambda keys: sorted_by_numpy.append(keys) or np.array(expected[1])
    )
    assert lexsort([low, high]).tolist() == expected[0]
    assert not sorted_by_numpy  # packed
    assert lexsort([low, wider]).tolist() == expected[1]
    assert len(sorted_by_numpy) == 1  # too wide to pack
