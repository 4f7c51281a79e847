"""Rendezvous ranking seen from Python: ``_core.rendezvous_ranks`` and ``_core.rendezvous_candidates``.

The scores are checked against a pure-Python implementation of the formula
documented in ``rust-core/anarchon-core/src/rendezvous.rs``: every build of a
fleet must rank the same way, so the hash is part of the contract.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from anarchon import InvalidJobError, _core
from hypothesis import given
from hypothesis import strategies as st

MASK = (1 << 64) - 1


def fnv1a64(data: bytes) -> int:
    """64-bit FNV-1a."""
    h = 0xCBF29CE484222325
    for byte in data:
        h ^= byte
        h = (h * 0x100000001B3) & MASK
    return h


def fmix64(k: int) -> int:
    """MurmurHash3's 64-bit finalizer."""
    k ^= k >> 33
    k = (k * 0xFF51AFD7ED558CCD) & MASK
    k ^= k >> 33
    k = (k * 0xC4CEB9FE1A85EC53) & MASK
    return k ^ (k >> 33)


def string_hash(tag: bytes, s: str) -> int:
    data = s.encode()
    return fmix64(fnv1a64(tag + len(data).to_bytes(8, "little") + data))


def score(member: str, key: str) -> int:
    return fmix64(string_hash(b"m", member) ^ string_hash(b"k", key))


def reference_candidates(members: list[str], key: str) -> list[str]:
    """Every distinct member of ``key``, rank 0 first (higher score, then smaller id)."""
    return sorted(set(members), key=lambda m: (-score(m, key), m.encode()))


def test_known_answers() -> None:
    assert score("web-1", "nightly-report") == 0x166EC5EEFFE11D56
    assert _core.rendezvous_candidates(["a", "b", "c", "d", "e"], "job", 5) == [
        "c",
        "a",
        "b",
        "d",
        "e",
    ]
    assert _core.rendezvous_candidates(["a", "b", "c", "d", "e"], "job", 2) == ["c", "a"]


names = st.text(alphabet=st.characters(exclude_categories=["Cs"]), max_size=12)


@given(
    members=st.lists(names, min_size=1, max_size=12),
    keys=st.lists(names, min_size=1, max_size=20),
    k=st.integers(1, 15),
)
def test_matches_the_documented_hash(members: list[str], keys: list[str], k: int) -> None:
    for key in keys:
        assert (
            _core.rendezvous_candidates(members, key, k) == reference_candidates(members, key)[:k]
        )
    for me in set(members):
        want = []
        for key in keys:
            rank = reference_candidates(members, key).index(me)
            want.append(rank if rank < k else None)
        assert _core.rendezvous_ranks(members, me, keys, k) == want


def test_each_rank_below_k_is_held_once() -> None:
    members = [f"instance-{n}" for n in range(7)]
    keys = [f"job-{n}" for n in range(500)]
    by_member = [_core.rendezvous_ranks(members, me, keys, 3) for me in members]
    for i in range(len(keys)):
        assert sorted(rank for r in by_member if (rank := r[i]) is not None) == [0, 1, 2]


def test_balanced_over_members() -> None:
    members = [f"instance-{n}" for n in range(10)]
    keys = [f"job-{n}" for n in range(20_000)]
    for me in members:
        first = _core.rendezvous_ranks(members, me, keys, 1).count(0)
        assert 1_800 < first < 2_200, (me, first)


def test_removing_a_member_moves_only_its_keys() -> None:
    members = [f"web-{n}" for n in range(8)]
    rest = [m for m in members if m != "web-5"]
    keys = [f"job-{n}" for n in range(2_000)]
    before = [_core.rendezvous_candidates(members, key, 1)[0] for key in keys]
    after = [_core.rendezvous_candidates(rest, key, 1)[0] for key in keys]
    moved = [i for i, (b, a) in enumerate(zip(before, after, strict=True)) if b != a]
    assert moved
    assert all(before[i] == "web-5" for i in moved)
    assert before.count("web-5") == len(moved)


def test_edges() -> None:
    keys = ["x", "y"]
    assert _core.rendezvous_ranks([], "a", keys, 3) == [None, None]
    assert _core.rendezvous_candidates([], "x", 3) == []
    assert _core.rendezvous_ranks(["b", "c"], "a", keys, 3) == [None, None]  # not a member
    assert _core.rendezvous_ranks(["a", "b"], "a", [], 1) == []
    assert _core.rendezvous_ranks(["a"], "a", keys, 1) == [0, 0]
    # k at or above the member count: everyone ranks; duplicates count once
    assert all(r is not None for r in _core.rendezvous_ranks(["a", "b", "a"], "b", keys, 1024))
    assert sorted(_core.rendezvous_candidates(["a", "b", "a", "b"], "x", 5)) == ["a", "b"]
    assert _core.rendezvous_ranks(("a", "b"), "a", ("x",), 2) == _core.rendezvous_ranks(
        ["b", "a", "b"], "a", ["x"], 2
    )


@pytest.mark.parametrize("k", [0, -1, 1025, 2**64])
def test_k_out_of_range_raises_invalid_job(k: int) -> None:
    for call in (
        lambda: _core.rendezvous_ranks(["a"], "a", ["x"], k),
        lambda: _core.rendezvous_candidates(["a"], "x", k),
    ):
        with pytest.raises(InvalidJobError) as info:
            call()
        assert info.value.code == "ANARCHON_INVALID_JOB"
        assert info.value.field == "k"


def test_strings_without_utf8_raise_invalid_job() -> None:
    lone = "a\ud800"
    calls: dict[str, Callable[[], object]] = {
        "members": lambda: _core.rendezvous_ranks([lone], "a", ["x"], 1),
        "me": lambda: _core.rendezvous_ranks(["a"], lone, ["x"], 1),
        "keys": lambda: _core.rendezvous_ranks(["a"], "a", [lone], 1),
        "key": lambda: _core.rendezvous_candidates(["a"], lone, 1),
    }
    for field, call in calls.items():
        with pytest.raises(InvalidJobError) as info:
            call()
        assert info.value.field == field


def test_a_str_is_not_a_sequence_of_members() -> None:
    with pytest.raises(TypeError):
        _core.rendezvous_ranks("ab", "a", ["x"], 1)  # a str is a Sequence[str] to mypy
    with pytest.raises(TypeError):
        _core.rendezvous_candidates([1], "x", 1)  # type: ignore[list-item]
