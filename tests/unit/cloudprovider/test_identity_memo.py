"""IdentityMemo: what was made from a tuple, found again only for that very tuple."""

from __future__ import annotations

from kccm.cloudprovider.backends import IdentityMemo


def test_the_same_object_is_made_once_an_equal_one_again() -> None:
    made: list[tuple[int, ...]] = []
    memo: IdentityMemo[tuple[int, ...], int] = IdentityMemo(2)

    def make(key: tuple[int, ...]) -> int:
        made.append(key)
        return sum(key)

    key = tuple(range(3))
    assert memo.get(key, make) == 3
    assert memo.get(key, make) == 3
    equal = tuple(range(3))
    assert equal == key
    assert equal is not key
    assert memo.get(equal, make) == 3
    assert [m is key for m in made] == [True, False]


def test_only_the_last_size_keys_are_remembered() -> None:
    memo: IdentityMemo[tuple[int, ...], int] = IdentityMemo(2)
    keys = [tuple(range(n)) for n in (1, 2, 3)]
    calls = 0

    def make(key: tuple[int, ...]) -> int:
        nonlocal calls
        calls += 1
        return len(key)

    for key in keys:
        memo.get(key, make)
    memo.get(keys[2], make)
    memo.get(keys[1], make)
    assert calls == 3
    memo.get(keys[0], make)
    assert calls == 4, "the oldest key was forgotten"
