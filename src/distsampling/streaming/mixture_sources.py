r"""ShardedMixtureDataset's sources: each ``(shards, sizes, read)`` checked, and named in a state.

A state names each source by a fingerprint, ``O(1)`` a source: its shard count, digests of its
shards' names (in order, and as a set) and of its sizes, and its first shard's name, so that a
resume on other shards is refused, saying which source and what differs (another order, other
names, other sizes). The leftovers of the passes in flight that an elastic resume hands on are
``[pass, from, to]`` intervals, merged here.

References:
    distsampling/streaming/sharded.py (sources as (shards, sizes, read))
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from .._checks import check_int64

__all__: list[str] = []

Source = tuple[Sequence[Any], Sequence[int], Callable[..., Iterable[Any]]]


def _digest(value: object) -> str:
    return hashlib.sha256(repr(value).encode()).hexdigest()[:16]


def _fingerprint(
    k: int, shards: list[Any], sizes: list[int], key: Callable[[Any], str] | None
) -> dict[str, Any]:
    """``sources[k]`` in a state, ``O(1)``: its shard count, its shards' names in order and as a
    set, its sizes (digests), and its first shard's name (shown where the names differ).

    A shard's name is ``key(shard)``; else its path as text (``Path("a")`` and ``"a"`` alike), a
    NumPy integer as an ``int``, anything else itself (its ``repr``), refused where that
    ``repr`` holds an address (new in every process)."""
    if key is not None:
        names = [key(shard) for shard in shards]
        for i, name in enumerate(names):
            if not isinstance(name, str):
                raise TypeError(
                    f"key(shard) should return a str, but got key(sources[{k}] shards[{i}])="
                    f"{name!r} of type {type(name).__name__}"
                )
    elif not set(map(type, shards)) <= {str, int}:  # texts and ints name themselves
        names = [os.fspath(s) if isinstance(s, os.PathLike) else s.item()
                 if isinstance(s, np.generic) else s for s in shards]  # fmt: skip
    else:
        names = shards
    text = repr(names)
    if key is None and " at 0x" in text:  # object.__repr__ somewhere: find the shard, name it
        for i, name in enumerate(names):
            if not isinstance(name, str) and " at 0x" in repr(name):
                raise ValueError(
                    f"sources[{k}] shards[{i}] should have a repr that is the same in every "
                    f"process (a saved state names the shards by it), but got {name!r}: pass "
                    "key=, a function that names a shard (key=lambda shard: shard.path), or "
                    "stable names (paths, URLs, ids)"
                )
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    try:
        ordered = sorted(names)
    except TypeError:  # names that do not compare (mixed types): by their text
        ordered = sorted(map(repr, names))
    return {"shards": len(names), "names": digest,
            "set": digest if ordered == names else _digest(ordered), "sizes": _digest(sizes),
            "first": repr(names[0])[:200] if names else None}  # fmt: skip


def _mismatch(saved: object, now: list[dict[str, Any]]) -> str | None:
    """Why the sources of a saved state are not these (``None`` if they are), in words."""
    if not isinstance(saved, list):
        return f"sources was {saved!r} when saved, not a list of each source's fingerprint"
    if len(saved) != len(now):
        return f"sources held {len(saved)} sources when saved, but holds {len(now)} now"
    for k, (was, fp) in enumerate(zip(saved, now, strict=True)):
        if was == fp:
            continue
        if not isinstance(was, dict) or was.keys() != fp.keys():
            return f"sources[{k}] was {was!r} when saved"
        if was["shards"] != fp["shards"]:
            return f"sources[{k}] had {was['shards']} shards when saved, but has {fp['shards']} now"
        if was["names"] != fp["names"] and was["set"] == fp["set"]:
            return (
                f"sources[{k}] lists the same shards as when saved, in another order: list them "
                "in one order in every run (e.g. sorted(glob(...)), not a directory's order)"
            )
        if was["names"] != fp["names"]:
            first = (f" (shards[0] was {was['first']} when saved, but is {fp['first']} now)"
                     if was["first"] != fp["first"] else "")  # fmt: skip
            return (
                f"sources[{k}] shards are not the ones saved{first}: if they are the same "
                "shards, name them alike in every run with key=, e.g. key=lambda shard: "
                "os.path.basename(shard)"
            )
        return f"sources[{k}] sizes are not the ones saved, for the same shards"
    return None


def _source(k: int, source: object) -> tuple[list[Any], list[int], Callable[..., Iterable[Any]]]:
    """``sources[k]`` checked: a ``(shards, sizes, read)`` triple, one size >= 0 per shard."""
    if not isinstance(source, (tuple, list)) or len(source) != 3:
        raise TypeError(
            f"sources[{k}] should be a (shards, sizes, read) triple, but got sources[{k}]={source!r}"
        )
    shards, sizes, read = source
    for name, value in (("shards", shards), ("sizes", sizes)):
        if not hasattr(value, "__len__") or isinstance(value, (str, bytes)):
            raise TypeError(
                f"sources[{k}] {name} should be a sequence, but got {name}={value!r} of type "
                f"{type(value).__name__}"
            )
    if len(sizes) != len(shards):
        raise ValueError(
            f"sources[{k}] should hold one size per shard (len(shards)={len(shards)}), but got "
            f"len(sizes)={len(sizes)}"
        )
    if not callable(read):
        raise TypeError(
            f"sources[{k}] read should be a callable, read(shard) -> samples, but got read={read!r}"
        )
    sizes = list(sizes.tolist() if hasattr(sizes, "tolist") else sizes)
    if not all(type(n) is int and 0 <= n < 2**63 for n in sizes):  # a fast pass, then by name
        sizes = [check_int64(f"sources[{k}] sizes[{i}]", n, low=0) for i, n in enumerate(sizes)]
    return list(shards), sizes, read


def _entries(weights: object) -> list[tuple[Any, Any]]:
    """``weights`` as ``[(step, weights)]``: one entry unless it is a schedule."""
    items = list(weights) if isinstance(weights, (list, tuple)) else None
    if items and all(isinstance(e, (tuple, list)) and len(e) == 2 and
                     isinstance(e[1], (list, tuple)) for e in items):  # fmt: skip
        return [(e[0], e[1]) for e in items]
    return [(0, weights)]


def _merge(pieces: Any) -> np.ndarray:
    """``[pass, a, b]`` intervals (a list or an ``(N, 3)`` array), sorted, empty ones dropped,
    touching ones joined, ``(M, 3)`` int64: at once, a sort and a cumulative sum."""
    p, a, b = np.asarray(pieces, np.int64).reshape(-1, 3).T  # (N,) each
    keep = np.flatnonzero(b > a)
    keep = keep[np.lexsort((a[keep], p[keep]))]  # by pass, then start
    p, a, b = p[keep], a[keep], b[keep]
    if not len(p):
        return np.zeros((0, 3), np.int64)
    # an interval begins a run unless it starts where the one before (of its pass) ends
    begins = np.ones(len(p), bool)
    begins[1:] = (p[1:] != p[:-1]) | (a[1:] != b[:-1])
    heads = np.flatnonzero(begins)
    ends = np.append(heads[1:], len(p)) - 1  # each run's last interval
    return np.stack([p[heads], a[heads], b[ends]], 1)


def _lead_pieces(lead: np.ndarray, starts: np.ndarray, a: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """``(N, 3)`` ``[pass, from, to]``: ranges ``[a, hi)`` of leftovers ``lead`` (``(I, 3)``
    intervals, each starting at ``starts``, ``(I + 1,)``) (disjoint, increasing) mapped
    through the intervals, each range cut where an interval ends."""
    if len(starts) == 1 or not len(a):
        return np.zeros((0, 3), np.int64)
    i0 = np.searchsorted(starts, a, "right") - 1  # (N,) the interval each range starts in
    n = np.searchsorted(starts, hi, "left") - i0  # (N,) the intervals it covers
    first = np.repeat(np.cumsum(n) - n, n)
    i = np.repeat(i0, n) + np.arange(int(n.sum())) - first  # (M,) each piece's interval
    s0, s1 = starts[i], starts[i + 1]
    lo, up = np.maximum(np.repeat(a, n), s0), np.minimum(np.repeat(hi, n), s1)
    return np.stack([lead[i, 0], lead[i, 1] + lo - s0, lead[i, 1] + up - s0], 1)
