r"""MixtureSampler: datasets mixed by weight across ranks, every batch and every rank at its
share, with no index.

``sizes`` are the lengths of ``K`` datasets in the order of a ``ConcatDataset``; ``weights`` their
shares. Reads are numbered step by step, rank by rank (global position ``s*B + r*b + i`` is rank
``r``'s slot ``i`` of step ``s``, ``B = b * num_replicas``), and each read's source and sample are
computed from its position alone: no index, no replay.

Which source: a weight tree. The positive weights (exact rationals: a float is the decimal it
prints as, ``0.3`` is ``3/10``; a float32 array's, the decimal float32 prints) become integers
(over their common denominator; past ``2**31`` in all, rounded to a sum of ``2**31`` by largest
remainder, so each share moves by less than ``2**-31`` (``(1 + m)·2**-31`` with ``m`` positive
weights below ``2**-31`` of the sum, each kept at one unit), and all arithmetic stays in int64). They are merged as Huffman merges, the two lightest first (ties to
the older node), so a leaf's ancestors at least double in weight every two levels. A node of
children ``L``, ``R`` (weights ``a``, ``b``) gives ``L`` as many of its first ``n`` positions as

    c_L(n) = ⌊n·a/(a+b) + 1/2⌋ = q·a + ⌊(2ρa + a + b) / 2(a+b)⌋,   n = q(a+b) + ρ

(position n is L's iff ``c_L(n+1) > c_L(n)``) and ``R`` the rest: the divisor (Sainte-Laguë)
merge of two, ``L``'s ``j``-th item at time ``(j + 1/2)/a``, ``R``'s at ``(i + 1/2)/b``, ties to
``L``. A tree position descends in O(depth) int64 steps; an item climbs back up by the inverse,
``⌈(2j+1)(a+b)/2a⌉ - 1`` on the left, ``⌊(2j+1)(a+b)/2b⌋`` on the right.

The tree's bound. ``c_L(n) - n·a/(a+b)`` lies in ``(-1/2, 1/2]``. Source ``k`` under the nodes
``v_1, ..., v_d = k`` (root excluded) has ``c_k(n) = w_k·n + Σ_i (w_k / w_{v_i})·e_i``, so
``|c_k(n) - w_k·n| <= β_k / 2`` with ``β_k = Σ_i w_k / w_{v_i} < 4`` (the ratios halve every two
levels), and any window of the tree's positions is within ``< β_k``. ``bound()`` is
``max β_k / 2``; with up to 3 sources ``β_k < 2``.

The layout: every rank reads a window of the tree. Rank ``r`` at step ``s`` reads tree positions
``[(s + r)·b, (s + r + 1)·b)``. So

- rank ``r``'s reads are the tree's window ``[r·b, r·b + m)``: on every prefix, each source is
  within ``β_k`` of its share (``< 2·bound()``), whatever ``W``, ``b`` and the weights' periods;
- step ``s``'s ``W`` micro-batches are the tree's window ``[s·b, s·b + B)``: every global batch
  within ``β_k`` of ``B·w_k``, as with Megatron's layout;
- the run's count after ``S`` steps is the sum of its ranks', within ``W·β_k`` (a light source,
  below one a micro-batch, is read by the ranks in turn, on ``W`` consecutive steps).

Megatron's layout (rank ``r`` at ``[s·B + r·b, ...)`` of one stream) aliases: with weights
``[1, 63]`` and ``b = 8``, one rank reads every sample of source 0.

Which sample: source ``k``'s reads are numbered ``j = 0, 1, 2, ...`` step by step, rank by rank
(item ``j`` is in the steps before ``s`` iff ``j < C_k(s) = Σ_{x<W} c_k((s+x)·b) - c_k(x·b)``);
item ``j`` is sample ``index_shuffle(j % size_k, size_k, key)`` of its pass ``j // size_k``,
the key drawn from ``(seed, k, pass)``: all of a source once, in a new order, before any twice.

Schedules and resume. ``[(0, w), (s1, w1), ...]`` changes the weights at training steps: from
step ``s1`` a new tree starts at its position 0, each source going on from its count, so nothing
is lost or read twice within its pass (each stretch keeps its bounds; a rank's error adds up
over the stretches). A ``state_dict`` holds what was read: the grid (``W``, ``b``) and its first
step, each source's count there, and the schedule up to the saved step, as shares. It loads into
any schedule that agrees with that past: a change at the saved step or later continues exactly
as that schedule's uninterrupted run; on another grid (an elastic resume, at a step boundary)
the new grid starts its trees at that step.

References:
    megatron/core/datasets/helpers.cpp (build_blending_indices: the greedy, sequential)
    R. Tijdeman, "The chairman assignment problem", Discrete Math. 1980
    M. Balinski, H. P. Young, "Fair Representation" (divisor methods; Sainte-Laguë/Webster)
"""

from __future__ import annotations

import bisect
import math
import numbers
from collections.abc import Iterable, Iterator, Sequence
from fractions import Fraction
from functools import cached_property, lru_cache
from itertools import accumulate, chain, pairwise
from operator import length_hint
from typing import Any, NamedTuple

import numpy as np
import torch
from torch.utils.data import DistributedSampler, Sampler

from .._checks import check_bool, check_int, check_seed, resolve_world
from ..guards import refuse_split_again
from ..scale.cipher import (
    _MIN_BITS,
    _ROUNDS,
    _feistel,
    _feistel_int,
    _round_keys,
    epoch_key,
    index_unshuffle,
)

__all__ = ["MixtureBatchSampler", "MixtureSampler", "Read"]

UNITS = 2**31  # integer weights past this sum are rounded to it: every product fits int64
_WALK = 8  # cycle walks left to _cipher's arrays past this many; as few, one Python int each


class Read(NamedTuple):
    """Where a sample is read: its global ``position``, the ``step``, the ``rank`` and its ``slot``."""

    position: int
    step: int
    rank: int
    slot: int


def _decimal(text: str) -> tuple[int, int]:
    """The exact ``(numerator, denominator)`` of a decimal as a float prints it: ``"0.3"``,
    ``"1e-05"``, ``"1.5e+20"`` (not reduced: ``"0.5"`` is ``(5, 10)``)."""
    digits, e, exp = text.partition("e")
    whole, _, frac = digits.partition(".")
    if not e:  # most: no exponent
        return int(whole + frac), 10 ** len(frac)
    num, e = int(whole + frac), int(exp) - len(frac)
    return (num * 10**e, 1) if e >= 0 else (num, 10**-e)


Mix = tuple[tuple[int, ...], tuple[int, ...]]  # exact weights: numerators, denominators


def _exact(pairs: Iterable[tuple[int, int]]) -> Mix:
    """``(numerators, denominators)`` of ``(n, d)`` pairs."""
    nums, dens = zip(*pairs)
    return nums, dens


def _decimals(weights: list[float]) -> Mix:
    """:func:`_decimal` of each float, over one denominator: their texts made by one ``repr`` of
    the list and, where none has an exponent (most weights), cut at ``", "`` and ``"."`` into
    whole and fraction, each fraction padded to the longest (``0.5, 0.25`` is ``50, 25`` over
    ``100``)."""
    text = repr(weights)[1:-1]
    if "e" in text:
        return _exact(map(_decimal, text.split(", ")))
    parts = text.replace(", ", ".").split(".")  # (2K,) whole, fraction, whole, fraction, ...
    wholes, fractions = parts[0::2], parts[1::2]
    places = max(map(len, fractions))
    nums = tuple([int(w + f.ljust(places, "0")) for w, f in zip(wholes, fractions)])
    return nums, (10**places,) * len(nums)


def _weights(name: str, weights: object, sizes: list[int]) -> Mix:
    """The weights as exact ``(numerators, denominators)``: a float the decimal it prints as."""
    texts = None
    if isinstance(weights, torch.Tensor):  # bfloat16 has no numpy twin: float32 holds it exactly
        weights = weights.detach().cpu()
        weights = (weights.float() if weights.dtype == torch.bfloat16 else weights).numpy()
    if isinstance(weights, np.ndarray):  # a float32 0.3 is "0.3", as float32 prints it
        texts = [str(x) for x in weights.reshape(-1)] if weights.dtype.kind == "f" else None
        weights = weights.tolist()
    if isinstance(weights, (str, bytes)) or not isinstance(weights, Sequence):
        raise TypeError(
            f"{name} should be a sequence of {len(sizes)} numbers, but got {name}={weights!r}"
        )
    weights = list(weights)
    if len(weights) != len(sizes):
        raise ValueError(
            f"{name} should hold one weight per source ({len(sizes)}), but got {name}={weights!r}"
        )
    floats = set(map(type, weights)) == {float}  # most weights: checked at once (a NaN sums to NaN)
    if floats and min(weights) >= 0 and sum(weights) < math.inf and all(sizes):
        out = _exact(map(_decimal, texts)) if texts else _decimals(weights)  # checked at once
    else:  # each weight checked in turn, the first bad one named
        out = []
        for k, w in enumerate(weights):
            real = type(w) is float
            if not real and (isinstance(w, bool) or not isinstance(w, numbers.Real)):
                raise TypeError(f"{name}[{k}] should be a real number, but got {name}[{k}]={w!r}")
            if not math.isfinite(w) or w < 0:
                raise ValueError(
                    f"{name}[{k}] should be finite and >= 0, but got {name}[{k}]={w!r}"
                )
            if w > 0 and sizes[k] == 0:
                raise ValueError(
                    f"{name}[{k}]={w!r} should be 0 for a source of length 0: sizes[{k}]=0"
                )
            if not real and isinstance(w, numbers.Rational):
                out.append((int(w.numerator), int(w.denominator)))
            else:  # the decimal it prints as
                out.append(_decimal(texts[k] if texts else repr(float(w))))
        out = _exact(out)
    if not any(out[0]):
        raise ValueError(f"{name} should have a positive sum, but got {name}={weights!r}")
    return out


def _units(weights: Mix) -> list[int]:
    """The integer weights the tree uses: exact up to ``UNITS`` in all, else rounded to ``UNITS``
    by largest remainder, a weight below one unit kept at one: each share within
    ``(1 + m) * 2**-31`` of the given one, ``m`` the weights below one unit (usually none)."""
    nums, dens = weights
    if len(set(dens)) == 1:  # one denominator (floats' decimals): the numerators are the integers
        ints = list(nums)
    else:
        scale = math.lcm(*set(dens))
        ints = [n * (scale // d) for n, d in zip(nums, dens)]
    common = math.gcd(*ints)  # the smallest integers of these shares: 1/3, 1/3, 1/3 is 1, 1, 1
    if common > 1:
        ints = [n // common for n in ints]
    total = sum(ints)
    if total <= UNITS:
        return ints
    small = (total - 1) // UNITS  # n * UNITS < total: below one unit, kept at one
    tiny = (
        [k for k, n in enumerate(ints) if 0 < n <= small]
        if min(filter(None, ints)) <= small
        else []
    )
    rest, left = UNITS - len(tiny), total - sum(ints[k] for k in tiny)
    out, rems = zip(*[divmod(n * rest, left) for n in ints])  # (K,) n * rest = out * left + rems
    out, rems = list(out), list(rems)
    for k in tiny:  # one unit each, never one more
        out[k], rems[k] = 1, -1
    ahead = sorted(range(len(ints)), key=rems.__getitem__, reverse=True)  # ties: smaller k first
    for k in ahead[: UNITS - sum(out)]:  # the largest remainders: one more
        out[k] += 1
    return out


def _cipher(x: np.ndarray, keys: np.ndarray, bits: np.ndarray, n: np.ndarray) -> np.ndarray:
    """:func:`index_shuffle` of values ``x`` in ``[0, n)``, each its own ``n``, ``bits`` and round
    ``keys`` (``(8, P)`` uint32): the cipher's rounds (its ``_feistel``), and cycle walking."""
    out = _feistel(x, keys, bits, False)
    todo = np.flatnonzero(out >= n)  # encrypt again those that land at n or past it
    while len(todo) > _WALK:
        out[todo] = _feistel(out[todo], keys[:, todo], bits[todo], False)
        todo = todo[out[todo] >= n[todo]]
    for i in todo.tolist():  # the last few walks (a small source's are long): one int each
        v, size, key, w = int(out[i]), int(n[i]), keys[:, i].tolist(), int(bits[i])
        while v >= size:
            v = _feistel_int(v, key, w, False)
        out[i] = v
    return out


class _Tree:
    """A Huffman tree over nodes (leaf ``k`` is node ``k``: ``a = 1, b = 0``, its own children;
    ``nodes``: Python lists); as arrays, its internal nodes level by level and each source's
    path from the root, made when first asked for (the first index needs none of them)."""

    def __init__(self, a: list[int], b: list[int], left: list[int], right: list[int], root: int):
        self.nodes, self.root, self.K = (a, b, left, right), root, len(a) // 2

    @cached_property
    def arrays(self) -> np.ndarray:
        """``nodes`` as one ``(4, 2K)`` int64 array: ``a, b, left, right = tree.arrays``."""
        return np.array(self.nodes, np.int64)

    @cached_property
    def levels(self) -> list[np.ndarray]:
        """Each level's internal nodes, root first (made once: :meth:`_levels`)."""
        return self._levels()

    def _levels(self) -> list[np.ndarray]:
        out, todo = [], [self.root]
        while todo := [v for v in todo if v >= self.K]:
            out.append(np.array(todo, np.int64))
            todo = [c for v in todo for c in (self.nodes[2][v], self.nodes[3][v])]
        return out

    @cached_property
    def paths(self) -> dict[int, list[tuple[int, int, bool]]]:
        """``k: [(a, b, k is under the left child)]`` from the root, for each positive source
        (made once: :meth:`_paths`)."""
        return self._paths()

    def _paths(self) -> dict[int, list[tuple[int, int, bool]]]:
        (a, b, left, right), out, todo = self.nodes, {}, [(self.root, [])]
        while todo:
            v, path = todo.pop()
            if v < self.K:
                out[v] = path
            else:
                todo += [(left[v], [*path, (a[v], b[v], True)]),
                         (right[v], [*path, (a[v], b[v], False)])]  # fmt: skip
        return out


def _tree(units: list[int]) -> _Tree:
    """The Huffman tree of the positive weights (the lightest two merged first, ties to the
    older node: the smaller id). Two queues: the leaves sorted, the merged nodes in the order
    made, node ``K + j`` the ``j``-th (their weights never decrease): the lightest is at the head
    of one of them, of the leaves on a tie (they are older). Each queue ends in weights heavier
    than any node (the merged: those not made yet), so a head is always there to compare."""
    K = len(units)
    leaves = [k for k in sorted(range(K), key=units.__getitem__) if units[k]]  # ties: smaller k
    L = len(leaves)
    weights = [units[k] for k in leaves] + [UNITS + 1]  # (L + 1,)
    made = [UNITS + 1] * L  # (L,) node K + j weighs made[j], once made
    # (2K,) each: every node a fixed point (a = 1, b = 0, its own children) until it is made
    a, b, left, right = [1] * (2 * K), [0] * (2 * K), list(range(2 * K)), list(range(2 * K))
    i = j = 0  # the heads of the two queues
    for v in range(K, K + L - 1):  # each merge makes node v: the lightest head, then the next
        if made[j] < weights[i]:
            x, cx, j = made[j], K + j, j + 1
        else:
            x, cx, i = weights[i], leaves[i], i + 1
        if made[j] < weights[i]:
            y, cy, j = made[j], K + j, j + 1
        else:
            y, cy, i = weights[i], leaves[i], i + 1
        a[v], b[v], left[v], right[v], made[v - K] = x, y, cx, cy, x + y
    return _Tree(a, b, left, right, K + L - 2 if L > 1 else leaves[0])


def _integer_mix_uncached(weights: Mix) -> tuple[tuple[int, ...], _Tree]:
    """The integer weights in use and their tree."""
    units = _units(weights)
    return tuple(units), _tree(units)


# once per distinct weights: the same weights again are a schedule's, another rank's, epoch's
_integer_mix = lru_cache(maxsize=16)(_integer_mix_uncached)


def _split(a: Any, b: Any, n: Any) -> tuple[Any, Any]:
    """``(c_L(n), position n is the left's)`` in int64: ``n = q(a+b) + ρ``, ``2ρa < 2**63``."""
    s = a + b
    q, rho = divmod(n, s)
    c, z = divmod(2 * rho * a + s, 2 * s)
    return q * a + c, z >= 2 * b


def _route(t: _Tree, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(source, its count before)`` at tree positions ``u`` (any order), each ``(P,)``: all
    positions down the tree together, a level a step. A leaf is a fixed point of a step (``a =
    1, b = 0``: left, ``n`` kept), so those at their leaf are set aside only once they are half."""
    ks, js = np.empty(len(u), np.int64), np.empty(len(u), np.int64)
    at, node, n = np.arange(len(u)), np.full(len(u), t.root, np.int64), u  # (P',) still going
    a, b, left, right = t.arrays  # (2K,) each
    while len(at):
        c, is_left = _split(a[node], b[node], n)  # (P',) (P',)
        node = np.where(is_left, left[node], right[node])
        n = np.where(is_left, c, n - c)
        leaf = node < t.K
        if 2 * np.count_nonzero(leaf) >= len(at):
            ks[at[leaf]], js[at[leaf]] = node[leaf], n[leaf]
            at, node, n = at[~leaf], node[~leaf], n[~leaf]
    return ks, js


def _counts(t: _Tree, n: np.ndarray, K: int) -> np.ndarray:
    """Each source's count in tree positions ``[0, n)``, ``(G, K)``, level by level."""
    a, b, left, right = t.arrays  # (2K,) each
    cnt = np.zeros((len(a), len(n)), np.int64)
    cnt[t.root] = n
    for ids in t.levels:
        m = cnt[ids]  # (m, G)
        c, _ = _split(a[ids, None], b[ids, None], m)
        cnt[left[ids]], cnt[right[ids]] = c, m - c
    return cnt[:K].T


class _Window:
    """A block's window of routed tree positions (their sources ``ks``, ``(P,)``), sorted by
    source and grid point ``y = position // b``: each source's count below a grid point, and
    the sum of their ``y``, by a search (``key``: increasing; ``ys``: sums of ``y`` over it)."""

    def __init__(self, ks: np.ndarray, b: int, W: int, K: int) -> None:
        # (P,) by source, then position: a stable sort of the smallest ints that hold K (radix)
        order = np.argsort(ks.astype(np.min_scalar_type(K)), kind="stable")
        y = order // b
        self.W, self.span = W, len(ks) // b + 1  # the grid points y, and one past them
        self.key = ks[order] * self.span + y  # (P,) increasing
        self.ys = np.zeros(len(ks) + 1, np.int64)
        np.cumsum(y, out=self.ys[1:])  # (P + 1,)
        self.seg = np.searchsorted(self.key, np.arange(K) * self.span)  # (K,) where each starts

    def counts(self, k: np.ndarray, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(n_k(t), Σ_{x<W} n_k(t + x))``, ``n_k(m)`` source ``k``'s count at ``y < m``: a
        ``y`` below ``t`` counts ``W`` times, one in ``[t, t + W - 1)`` ``t + W - 1 - y`` times.
        Sorted ``(k, t)`` pairs make the searches fast."""
        W, key, ys = self.W, self.key, self.ys
        i1 = np.searchsorted(key, k * self.span + t)
        i2 = np.searchsorted(key, k * self.span + t + W - 1)
        n = i1 - self.seg[k]
        return n, W * n + (t + W - 1) * (i2 - i1) - (ys[i2] - ys[i1])


def _count(t: _Tree, k: int, n: Any) -> Any:
    """Source ``k``'s count in tree positions ``[0, n)`` (an int or an array): down its path."""
    if k not in t.paths:
        return n * 0
    for a, b, is_left in t.paths[k]:
        c, _ = _split(a, b, n)
        n = c if is_left else n - c
    return n


def _position(t: _Tree, k: int, j: int) -> int:
    """The tree position of source ``k``'s ``j``-th item: up its path by the inverse."""
    for a, b, is_left in reversed(t.paths[k]):
        j = ((2 * j + 1) * (a + b) + 2 * a - 1) // (2 * a) - 1 if is_left else (
            (2 * j + 1) * (a + b) // (2 * b))  # fmt: skip
    return j


class _Counting:
    """One ``iter()``'s ints at C speed (``ints``) and how many it has handed out: finished
    blocks, plus the current block's length less what its list iterator has left (resume.py's
    ``CountingIterator``, here so that this file copies with two helpers)."""

    def __init__(self, blocks: Iterator[torch.Tensor | list[int]]) -> None:
        self._done, self._len, self._it = 0, 0, iter(())
        self.ints: Iterator[int] = chain.from_iterable(self._lists(blocks))

    def _lists(self, blocks: Iterator[torch.Tensor | list[int]]) -> Iterator[Iterator[int]]:
        for part in blocks:
            self._done += self._len
            self._it, self._len = iter(part if isinstance(part, list) else part.tolist()), len(part)
            yield self._it
        self._done, self._len = self._done + self._len, 0

    @property
    def yielded(self) -> int:
        return self._yielded()

    def _yielded(self) -> int:
        return self._done + self._len - length_hint(self._it)


def _consumed(consumed: object, handed_out: int, unit: str) -> int:
    """``consumed`` in ``[0, handed_out]``: a loop cannot have used more than it got."""
    consumed = check_int("consumed", consumed, low=0)
    if consumed > handed_out:
        raise ValueError(
            f"consumed should be <= {handed_out} ({unit} handed out): the latest iter() handed "
            f"out {handed_out}, but got consumed={consumed}"
        )
    return consumed


def _state(state: object, version: int, identity: dict[str, Any], fields: Sequence[str]) -> dict:
    """``state`` if it is a MixtureSampler state of ``version`` with ``identity`` and
    ``fields``; else the error resume.py's ``check_state`` gives, naming the field."""
    if not isinstance(state, dict):
        raise TypeError(
            f"state should be a dict from state_dict(), but got state={state!r} "
            f"of type {type(state).__name__}"
        )
    for keys in (("kind", "version"), (*identity, *fields)):  # the class and format first
        for key in keys:
            if key not in state:
                raise KeyError(f"state has no {key!r}: it is not a MixtureSampler state_dict() "
                               f"(got {state!r})")  # fmt: skip
        if keys[0] == "kind" and state["kind"] != "MixtureSampler":
            raise ValueError(
                f"state comes from another sampler: kind was {state['kind']!r} when saved, "
                "but this is a MixtureSampler"
            )
        if keys[0] == "kind" and state["version"] != version:
            raise ValueError(f"state has format version={state['version']!r}, but this "
                             f"MixtureSampler reads version={version}")  # fmt: skip
    for key, now in identity.items():
        if state[key] != now:
            raise ValueError(
                f"state does not match this sampler: {key} was {state[key]!r} when saved, "
                f"but is {now!r} now"
            )
    return state


def _text(shares: Sequence[Fraction]) -> str:
    return ", ".join(f"{float(x):.10g}" for x in shares)


class MixtureSampler(DistributedSampler):
    r"""Yield this rank's indices into ``ConcatDataset(datasets)``: ``K`` sources mixed by weight.

    One rank's share, so a torch ``DistributedSampler`` (torch's ``__init__`` is not run: the
    split is this class's): Lightning's default leaves it alone and calls its ``set_epoch``.

    Rank ``r`` reads ``batch_size`` indices a step, every rank a window of one weight tree (the
    module docstring): each global batch and each rank's reads keep every source within
    ``2 * bound()`` of its share. An epoch is the steps that start in global positions
    ``[e*L, (e+1)*L)``, ``L = epoch_length``; with ``L`` below the global batch some epochs hold
    no step (``len()`` 0). With a ``DataLoader``, give ``batch_size=batch_size`` (one step a
    batch) or use :class:`MixtureBatchSampler`.

    Args:
        sizes: the sources' lengths, in ``ConcatDataset`` order (sample ``i`` of source ``k`` is
            index ``sum(sizes[:k]) + i``).
        weights: ``K`` non-negative numbers (a positive sum; shares are ``w_k / sum(w)``), or a
            schedule ``[(0, weights), (s1, weights), ...]`` changing them at training steps.
        batch_size: a rank's micro-batch ``b``.
        num_replicas: number of ranks; defaults to the world size of the default process group.
        rank: this rank in ``[0, num_replicas)``; defaults to the rank in the default group.
        seed: base seed of every source's passes; the same on every rank.
        shuffle: each pass of a source in a shuffled order (else ``0, 1, ..., size - 1``).
        epoch_length: global positions per epoch (default ``sum(sizes)``).

    Examples:
        >>> s = MixtureSampler([6, 4], [0.5, 0.5], batch_size=2, num_replicas=2, rank=0)
        >>> s.batch_at(0)  # step 0: rank 0's micro-batch, rank 1's (source 1 is 6..9)
        [[3, 6], [5, 9]]
        >>> s.when_read(1, 3)  # sample 3 of source 1 (index 9) in its pass 0
        Read(position=3, step=0, rank=1, slot=1)
        >>> len(s), list(s), s.bound()  # 10 positions an epoch: 3 steps of 4
        (6, [3, 6, 1, 7, 0, 9], Fraction(1, 2))
    """

    def __init__(
        self,
        sizes: Sequence[int],
        weights: Sequence[float] | Sequence[tuple[int, Sequence[float]]],
        batch_size: int,
        num_replicas: int | None = None,
        rank: int | None = None,
        seed: int = 0,
        shuffle: bool = True,
        epoch_length: int | None = None,
    ) -> None:
        if isinstance(sizes, (np.ndarray, torch.Tensor)):
            sizes = sizes.tolist()
        if isinstance(sizes, (str, bytes)) or not isinstance(sizes, Sequence) or not sizes:
            raise TypeError(
                f"sizes should be a non-empty sequence of lengths, but got sizes={sizes!r}"
            )
        if set(map(type, sizes)) == {int} and min(sizes) >= 0:  # most: checked at once
            self.sizes = list(sizes)
        else:  # each checked in turn, the first bad one named
            self.sizes = [check_int(f"sizes[{k}]", n, low=0) for k, n in enumerate(sizes)]
        self.offsets = [0, *accumulate(self.sizes[:-1])]
        self._plan = self._schedule(weights)  # [(step, weights)], steps increasing from 0
        self.batch_size = check_int("batch_size", batch_size, low=1)
        self.num_replicas, self.rank = resolve_world(num_replicas, rank)
        self.seed, self.shuffle = check_seed(seed), check_bool("shuffle", shuffle)
        length = sum(self.sizes) if epoch_length is None else epoch_length
        self.epoch_length = check_int("epoch_length", length, low=1)
        mixes = [_integer_mix(w) for _, w in self._plan]  # once per distinct weights
        self.units = [list(units) for units, _ in mixes]  # the integer weights in use
        self._trees = [tree for _, tree in mixes]
        self.epoch, self._skip, self._before = 0, 0, 0
        self._origin, self._step0 = 0, 0  # this grid's first position and training step
        self._read0 = [0] * len(self.sizes)  # each source's count at the grid's first step
        self._counter: _Counting | None = None
        self._keys: dict[tuple[int, int], tuple[int, ...]] = {}  # (source, pass): round keys
        self._place()

    def __repr__(self) -> str:
        plan = [(s, [float(x) for x in w]) for s, w in self.schedule]
        w = plan[0][1] if len(plan) == 1 else plan
        return (f"MixtureSampler(sizes={self.sizes}, weights={w}, batch_size={self.batch_size}, "
                f"num_replicas={self.num_replicas}, rank={self.rank}, seed={self.seed}, "
                f"shuffle={self.shuffle}, epoch_length={self.epoch_length})")  # fmt: skip

    @property
    def schedule(self) -> list[tuple[int, list[Fraction]]]:
        """``[(step, weights)]``, each weight exact (a float: the decimal it prints as)."""
        return self._exact_schedule()

    def _exact_schedule(self) -> list[tuple[int, list[Fraction]]]:
        return [(s, [Fraction(n, d) for n, d in zip(*w)]) for s, w in self._plan]

    def _schedule(self, weights: object) -> list[tuple[int, Mix]]:
        items = list(weights) if isinstance(weights, Sequence) else weights
        if not (isinstance(items, list) and items and isinstance(items[0], (tuple, list))):
            return [(0, _weights("weights", weights, self.sizes))]
        out, last = [], -1
        for g, entry in enumerate(items):
            if not isinstance(entry, (tuple, list)) or len(entry) != 2:
                raise TypeError(
                    f"weights[{g}] should be a (step, weights) pair, but got weights[{g}]={entry!r}"
                )
            start = check_int(f"weights[{g}][0]", entry[0], low=0)
            if (g == 0 and start != 0) or start <= last:
                why = "0 (a schedule starts at 0)" if g == 0 else f"> {last} (in increasing order)"
                raise ValueError(
                    f"weights[{g}][0] should be {why}, but got weights[{g}][0]={start}"
                )
            out.append((start, _weights(f"weights[{g}][1]", entry[1], self.sizes)))
            last = start
        return out

    # --- the pieces of this grid: a tree each, from a step on ------------------------------

    def _place(self) -> None:
        """The pieces ``(first step, tree)`` from the grid's first step on; their ``_bases``
        are made again when next asked for."""
        g0 = max(g for g, (step, _) in enumerate(self._plan) if step <= self._step0)
        later = [(step, g) for g, (step, _) in enumerate(self._plan) if step > self._step0]
        self._pieces = [(self._step0, g0), *later]
        self._firsts = [s for s, _ in self._pieces]
        self.__dict__.pop("_bases", None)

    @cached_property
    def _bases(self) -> list[np.ndarray]:
        """Each source's count at each piece's first step, ``(K,)`` a piece (the first piece's
        is ``_read0``: the first index reads that list, with no array made): made once."""
        return self._make_bases()

    def _make_bases(self) -> list[np.ndarray]:
        out = [np.array(self._read0, np.int64)]
        for (s, g), (s2, _) in pairwise(self._pieces):
            out.append(out[-1] + self._before_step(g, [s2 - s])[0])
        return out

    def _before_step(self, g: int, taus: Sequence[int]) -> np.ndarray:
        """``C(τ)``: each source's reads in tree ``g``'s first ``τ`` steps, ``(T, K)``:
        ``Σ_{x<W} c((τ+x)·b) - c(x·b)``. Steps less than ``W`` apart share their grid points: the
        counts at ``[τ_first, τ_last + W)·b``, summed by a cumulative sum, once for them all."""
        W, b, K, tree = self.num_replicas, self.batch_size, len(self.sizes), self._trees[g]
        zero = _counts(tree, np.arange(W, dtype=np.int64) * b, K).sum(0)  # (K,)
        taus = np.asarray(taus, np.int64).reshape(-1)
        order = np.argsort(taus, kind="stable")
        out, ts, most = np.empty((len(taus), K), np.int64), taus[order], max(W, 1 << 14)
        first, tl = 0, ts.tolist()
        while first < len(ts):  # a batch of runs of about ``most`` grid points at most
            runs, points, i = [], 0, first  # runs: (first τ's index, last τ's index + 1)
            while i < len(ts) and points + W <= most:
                start = i  # a run: the next τ within W of the last, and within ``most``
                while i + 1 < len(ts) and tl[i + 1] - tl[i] < W and tl[i + 1] - tl[start] < most:
                    i += 1
                runs.append((start, i + 1))
                points, i = points + tl[i] - tl[start] + W, i + 1
            lo = np.array([tl[a] for a, _ in runs], np.int64)  # (R,) each run's first step
            size = np.array([tl[z - 1] - tl[a] + W for a, z in runs], np.int64)  # (R,) its points
            at = np.concatenate([[0], np.cumsum(size)[:-1]])  # (R,) where its grid starts
            grid = (np.repeat(lo - at, size) + np.arange(int(size.sum()))) * b  # (G,)
            sums = np.zeros((len(grid) + 1, K), np.int64)
            np.cumsum(_counts(tree, grid, K), 0, out=sums[1:])  # (G + 1, K)
            run = np.repeat(np.arange(len(runs)), [z - a for a, z in runs])  # (T',) τ's run
            x = at[run] + ts[first:i] - lo[run]  # (T',) τ's grid point
            out[order[first:i]] = sums[x + W] - sums[x] - zero
            first = i
        return out

    def _locate(self, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(piece, τ: its step, u: its tree position)`` of global positions, each ``(P,)``."""
        b, B = self.batch_size, self.batch_size * self.num_replicas
        t, within = np.divmod(positions - self._origin, B)  # within = r*b + i
        steps = self._step0 + t
        piece = np.searchsorted(np.array(self._firsts), steps, side="right") - 1
        tau = steps - np.array(self._firsts)[piece]
        return piece, tau, tau * b + within

    # --- the stream -----------------------------------------------------------------------

    def _sources(self, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(source, item number overall)`` at global ``positions`` (int64), each ``(P,)``."""
        ks, js = np.empty(len(positions), np.int64), np.empty(len(positions), np.int64)
        piece, tau, u = self._locate(positions)
        for p in np.flatnonzero(np.bincount(piece)).tolist():
            at = np.flatnonzero(piece == p)
            g, b = self._pieces[p][1], self.batch_size
            k, c = _route(self._trees[g], u[at])
            steps, which = np.unique(tau[at], return_inverse=True)
            before = self._before_step(g, steps.tolist())  # (T, K)
            start = _counts(self._trees[g], steps * b, len(self.sizes))  # (T, K)
            which = which.reshape(-1)
            ks[at] = k
            js[at] = self._bases[p][k] + before[which, k] + c - start[which, k]
        return ks, js

    def _key(self, k: int, pass_: int) -> int:
        return epoch_key(epoch_key(self.seed, k), pass_)

    def _round_keys(self, k: int, pass_: int) -> tuple[int, ...]:
        """The round keys of source ``k``'s pass ``pass_``, kept: each pass is asked again and
        again (and more of them than the cipher's own cache holds)."""
        keys = self._keys.get((k, pass_))
        if keys is None:
            keys = self._keys[k, pass_] = _round_keys(self._key(k, pass_))
        return keys

    @cached_property
    def _by_source(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Each source's size, offset and cipher width in bits, ``(K,)`` each: for the blocks,
        made when first asked for (the first index needs none of them)."""
        return self._make_by_source()

    def _make_by_source(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        bits = [max(_MIN_BITS, (n - 1).bit_length()) for n in self.sizes]
        return tuple(np.array(x, np.int64) for x in (self.sizes, self.offsets, bits))

    def _indices(self, ks: np.ndarray, js: np.ndarray) -> np.ndarray:
        """Indices into the ConcatDataset of sources ``ks``'s items ``js``, each ``(P,)``: every
        source and pass in one cipher call (:func:`index_shuffle`'s, a key per value)."""
        size_of, offset_of, bits_of = self._by_source
        sizes = size_of[ks]  # (P,)
        passes, local = np.divmod(js, np.maximum(sizes, 1))  # (P,) (P,)
        if self.shuffle and len(ks):
            low, span = int(passes.min()), int(passes.max() - passes.min()) + 1  # a few passes
            group = ks * span + passes - low  # (P,) each (source, pass)
            present = np.flatnonzero(np.bincount(group, minlength=len(self.sizes) * span))
            keys = np.zeros((_ROUNDS, len(self.sizes) * span), np.uint32)  # (8, G)
            keys[:, present] = np.array(
                [self._round_keys(g // span, g % span + low) for g in present.tolist()], np.uint32
            ).T.reshape(_ROUNDS, -1)
            local = _cipher(local, keys[:, group], bits_of[ks], sizes)
        return offset_of[ks] + local

    def _few(self, positions: list[int]) -> list[int]:
        """``_indices(*_sources(positions))`` of a few positions of one step, down one path
        each, on Python ints: the first index at once."""
        out, W, b, B = [], self.num_replicas, self.batch_size, self.batch_size * self.num_replicas
        for n in positions:
            step, within = divmod(n - self._origin, B)
            step += self._step0
            p = bisect.bisect_right(self._firsts, step) - 1
            tau, tree = step - self._firsts[p], self._trees[self._pieces[p][1]]
            (a, b_, left, right), node, c = tree.nodes, tree.root, tau * b + within
            while node >= len(self.sizes):  # down the tree
                n_left, is_left = _split(a[node], b_[node], c)
                node, c = (left[node], n_left) if is_left else (right[node], c - n_left)
            k = node
            j = (self._read0[k] if p == 0 else int(self._bases[p][k])) + c
            if tau:  # C(τ) + c_k(u) - c_k(τb)
                x = np.arange(W, dtype=np.int64) * b
                j += int((_count(tree, k, x + tau * b) - _count(tree, k, x)).sum())
                j -= _count(tree, k, tau * b)
            size = self.sizes[k]
            pass_, i = divmod(j, size)
            if self.shuffle:  # index_shuffle's cipher and cycle walking, on one int
                keys, bits = self._round_keys(k, pass_), max(_MIN_BITS, (size - 1).bit_length())
                i = _feistel_int(i, keys, bits, False)
                while i >= size:
                    i = _feistel_int(i, keys, bits, False)
            out.append(self.offsets[k] + i)
        return out

    def positions(self, step: int, rank: int | None = None) -> np.ndarray:
        r"""The global positions ``rank`` (default: this sampler's) reads at training ``step`` of
        this grid, ``(batch_size,)`` int64: the layout in one place, for readers of the stream
        (a streaming mixture asks it which positions each rank's micro-batch holds).

        Examples:
            >>> MixtureSampler([6, 4], [1, 1], batch_size=2, num_replicas=2, rank=1).positions(1)
            array([6, 7])
        """
        step = check_int("step", step, low=self._step0)
        r = (
            self.rank
            if rank is None
            else check_int("rank", rank, low=0, high=self.num_replicas - 1)
        )
        b = self.batch_size
        first = self._origin + (step - self._step0) * b * self.num_replicas + r * b
        return np.arange(first, first + b, dtype=np.int64)

    def sources(self, positions: Sequence[int] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        r"""``(source, item number overall)`` at global ``positions`` of this grid, each ``(P,)``
        int64: item ``j`` of source ``k`` is in its pass ``j // sizes[k]``, at ``j % sizes[k]``
        of that pass.

        Examples:
            >>> s = MixtureSampler([6, 4], [1, 1], batch_size=2, num_replicas=2, rank=0)
            >>> [a.tolist() for a in s.sources(range(4))]
            [[0, 1, 0, 1], [0, 0, 1, 1]]
        """
        positions = np.asarray(positions, dtype=np.int64).reshape(-1)
        if len(positions) and int(positions.min()) < self._origin:
            raise ValueError(
                f"positions should be >= {self._origin}, the first of this grid, but got "
                f"{int(positions.min())}"
            )
        return self._sources(positions)

    def batch_at(self, step: int) -> list[list[int]]:
        r"""The ``num_replicas`` micro-batches of training step ``step``, rank by rank."""
        step, b = check_int("step", step, low=0), self.batch_size
        if step < self._step0:
            raise ValueError(
                f"step should be >= {self._step0}, the first step of this grid (num_replicas="
                f"{self.num_replicas}, batch_size={b}); the earlier ones were read on another "
                f"grid, but got step={step}"
            )
        p = self._origin + (step - self._step0) * b * self.num_replicas
        flat = self._indices(*self._sources(np.arange(p, p + b * self.num_replicas))).tolist()
        return [flat[r * b : (r + 1) * b] for r in range(self.num_replicas)]

    def when_read(self, source: int, sample: int, pass_: int = 0) -> Read | None:
        r"""Where sample ``sample`` of source ``source`` is read in its pass ``pass_``: the global
        position, training step, rank and slot; ``None`` if its weight stays 0."""
        k = check_int("source", source, low=0, high=len(self.sizes) - 1)
        size = self.sizes[k]
        i = check_int("sample", sample, low=0, high=size - 1)
        pass_ = check_int("pass_", pass_, low=0)
        local = index_unshuffle([i], size, self._key(k, pass_)).item() if self.shuffle else i
        j = pass_ * size + local
        if j < self._read0[k]:
            raise ValueError(
                f"sample {i} of source {k} in its pass {pass_} was read before step {self._step0} "
                f"(position {self._origin}), the first of this grid: ask a sampler of the grid it "
                "was read on"
            )
        p = max(p for p in range(len(self._pieces)) if self._bases[p][k] <= j)
        g = self._pieces[p][1]
        if self.units[g][k] == 0:
            return None
        j -= int(self._bases[p][k])
        b, tree = self.batch_size, self._trees[g]
        x = np.arange(self.num_replicas, dtype=np.int64) * b  # (W,) the ranks' first positions
        zero = int(_count(tree, k, x).sum())

        def before(taus: list[int]) -> list[int]:  # C(τ) of each τ, down source k's path only
            at = np.array(taus, np.int64)[:, None] * b + x  # (T, W)
            return (_count(tree, k, at).sum(1) - zero).tolist()

        # the step: the last τ with C(τ) <= j (C never falls; C(0) = 0), searched by steps of
        # x16, then by sixteenths of the interval [lo, hi), 15 points of it in one call
        lo, hi = 0, 1
        while before([hi])[0] <= j:
            lo, hi = hi, 16 * hi
        while hi - lo > 1:
            taus = sorted({lo + (hi - lo) * i // 16 for i in range(1, 16)} - {lo})
            counts = before(taus)
            lo = max([t for t, c in zip(taus, counts) if c <= j], default=lo)
            hi = min([t for t, c in zip(taus, counts) if c > j], default=hi)
        u = _position(tree, k, int(_count(tree, k, lo * b)) + j - before([lo])[0])
        step = self._firsts[p] + lo
        n = self._origin + (step - self._step0) * b * self.num_replicas + u - lo * b
        return Read(n, step, *divmod(u - lo * b, b))

    def bound(self) -> Fraction:
        r"""The tree's prefix bound ``max_k β_k / 2`` over the schedule's segments: every global
        batch and every rank's reads keep each source within twice it of its share."""
        out = Fraction(0)
        for tree in self._trees:
            for path in tree.paths.values():
                if path:
                    w = path[-1][0] if path[-1][2] else path[-1][1]
                    out = max(out, sum((Fraction(w, a if left else b) for a, b, left in path),
                                       Fraction(0)) / 2)  # fmt: skip
        return out

    # --- epochs: DistributedSampler's contract --------------------------------------------

    def _steps(self, epoch: int) -> range:
        """The grid steps of ``epoch``: those that start in ``[epoch*L, (epoch+1)*L)``."""
        B, L = self.batch_size * self.num_replicas, self.epoch_length
        first = max(0, -(-(epoch * L - self._origin) // B))
        return range(first, max(first, -(-((epoch + 1) * L - self._origin) // B)))

    def set_epoch(self, epoch: int) -> None:
        r"""Set the epoch (the same on every rank); a position loaded for another one is dropped."""
        epoch = check_int("epoch", epoch, low=0)
        if epoch != self.epoch:
            self.epoch, self._skip, self._counter, self._before = epoch, 0, None, 0

    def __len__(self) -> int:
        # the whole epoch's count, before and after a resume: read on an earlier grid, then here
        return self._before + len(self._steps(self.epoch)) * self.batch_size

    def _blocks(self, steps: range, skip: int) -> Iterator[torch.Tensor | list[int]]:
        """This rank's indices of ``steps`` (of the grid) less the first ``skip``: a few down
        their paths first (the first index alone, at once), then blocks of steps doubling up to
        about 2**14 indices. A block of ``T`` steps from ``τ`` routes the window of tree positions
        its ranks read, ``[τ·b, (τ + T + W - 1)·b)``, once each, and sorts it by source and grid
        point: a read's item number needs its source's count at two grid points, searched for."""
        W, b, K = self.num_replicas, self.batch_size, len(self.sizes)
        s = steps.start + skip // b
        first = self._origin + s * (W * b) + self.rank * b + skip % b  # the first to read
        if s < steps.stop:  # the first index alone, then up to 15 more of its step: lists
            head = range(first, min(first + 16, self._origin + s * W * b + (self.rank + 1) * b))
            yield self._few([first])
            if len(head) > 1:
                yield self._few(list(head[1:]))
            first = head.stop
        s, stop = s + self._step0, steps.stop + self._step0
        every = np.arange(K)
        for p, (start, g) in enumerate(self._pieces):
            end = self._firsts[p + 1] if p + 1 < len(self._pieces) else stop
            if end <= s or start >= stop:
                continue
            tree, base = self._trees[g], self._bases[p]
            tau, tau_end = max(s, start) - start, min(stop, end) - start
            done = self._before_step(g, [tau])[0] if tau else np.zeros(K, np.int64)  # C(τ)
            at = _counts(tree, np.array([tau * b]), K)[0]  # (K,) each source's count before τ·b
            ks, cs = np.zeros(0, np.int64), np.zeros(0, np.int64)  # routed from τ·b on
            size = 1
            while tau < tau_end:
                T = min(size, tau_end - tau)
                P = (T + W - 1) * b  # the window's positions
                if len(ks) < P:  # route on to the window's end
                    k, c = _route(tree, np.arange(tau * b + len(ks), tau * b + P, dtype=np.int64))
                    ks, cs = np.concatenate([ks, k]), np.concatenate([cs, c])
                window = _Window(ks[:P], b, W, K)
                at_T, win_T = window.counts(every, np.full(K, T))  # (K,) (K,) at the next τ
                win_0 = window.counts(every, np.zeros(K, np.int64))[1]  # (K,)
                # this rank's reads, (T b,): window positions (row + rank)·b + i, by source
                mine = ((np.arange(T) + self.rank) * b)[:, None] + np.arange(b)  # (T, b)
                k, c = ks[mine.ravel()], cs[mine.ravel()]
                by = np.argsort(k.astype(np.min_scalar_type(K)), kind="stable")
                kb, row = k[by], by // b  # (T b,) by source, then step: the searches' order
                n, win = window.counts(kb, row)
                # C(τ + row) = C(τ) + Σ_{x<W} c((τ + row + x)·b) - c((τ + x)·b), plus the count
                # before the read since its step's first tree position: c - at_k - n_k(row)
                j = np.empty(T * b, np.int64)
                j[by] = (base + done - win_0 - at)[kb] + win + c[by] - n
                done, at = done + win_T - win_0, at + at_T
                pos = (
                    self._origin
                    + (start + tau + np.arange(T) - self._step0)[:, None] * W * b
                    + self.rank * b
                    + np.arange(b)
                ).ravel()  # (T b,) their global positions
                keep = pos >= first
                yield torch.from_numpy(self._indices(k[keep], j[keep]))
                ks, cs = ks[T * b :], cs[T * b :]  # what the next block no longer needs
                tau, size = tau + T, min(2 * size, max(1, (1 << 14) // b))

    def __iter__(self) -> Iterator[int]:
        refuse_split_again(self)  # accelerate's prepare(loader) would split this share again
        steps, skip = self._steps(self.epoch), self._skip  # read now: a later set_epoch waits
        self._counter = _Counting(self._blocks(steps, skip))
        return self._counter.ints

    # --- resume ---------------------------------------------------------------------------

    def _identity(self) -> dict[str, Any]:
        return {"sizes": list(self.sizes), "seed": self.seed, "shuffle": self.shuffle,
                "epoch_length": self.epoch_length}  # fmt: skip

    def _past(self, step: int, begun: bool) -> list[list[Any]]:
        """The schedule's entries read before ``step`` (and at it, ``begun``): ``[step, shares]``,
        the shares of the integer weights in use, as exact fractions in text."""
        return [[s, [str(Fraction(u, sum(units))) for u in units]]
                for (s, _), units in zip(self._plan, self.units)
                if s < step or (begun and s == step)]  # fmt: skip

    def state_dict(self, consumed: int | None = None) -> dict[str, Any]:
        r"""What this rank has read: the grid (``num_replicas``, ``batch_size``) and its first
        position and step (``origin``, ``step``), each source's count there (``read``), the
        indices of the epoch read since (``position``; ``before``: on earlier grids), and the
        schedule up to the step reached (``past``: ``[step, shares]``); ``consumed``: what the
        loop used of the latest ``iter()`` (a plain DataLoader with workers reads ahead;
        StatefulDataLoader needs none)."""
        handed_out = 0 if self._counter is None else self._counter.yielded
        if consumed is not None:
            handed_out = _consumed(consumed, handed_out, "samples")
        position, b = self._skip + handed_out, self.batch_size
        reached = self._step0 + self._steps(self.epoch).start + position // b
        return {"kind": type(self).__name__, "version": 3, **self._identity(), "epoch": self.epoch,
                "num_replicas": self.num_replicas, "batch_size": b, "origin": self._origin,
                "step": self._step0, "read": [int(n) for n in self._read0],
                "past": self._past(reached, position % b > 0), "position": position,
                "before": self._before}  # fmt: skip

    def load_state_dict(self, state: dict[str, Any]) -> None:
        r"""Resume at ``state``, with this sampler's schedule from the step reached on (it must
        agree with the one read before it). With another ``num_replicas`` or ``batch_size`` the
        state must be at a step boundary: the rest is read on this grid from that step."""
        fields = ("epoch", "num_replicas", "batch_size", "origin", "step", "read", "past",
                  "position", "before")  # fmt: skip
        state = _state(state, 3, self._identity(), fields)
        epoch, origin, step0 = (
            check_int("epoch", state["epoch"], low=0),
            check_int("origin", state["origin"], low=0),
            check_int("step", state["step"], low=0),
        )
        W, b = (
            check_int("num_replicas", state["num_replicas"], low=1),
            check_int("batch_size", state["batch_size"], low=1),
        )
        read = state["read"]
        if not isinstance(read, (list, tuple)) or len(read) != len(self.sizes):
            raise ValueError(
                f"read should be a list of {len(self.sizes)} counts, one per source, but got "
                f"read={read!r}"
            )
        read = [check_int(f"read[{k}]", n, low=0) for k, n in enumerate(read)]
        saved = MixtureSampler.__new__(MixtureSampler)
        saved.__dict__.update(self.__dict__, num_replicas=W, batch_size=b, _origin=origin,
                              _step0=step0, _read0=read, _skip=0)  # fmt: skip
        steps = saved._steps(epoch)
        position = check_int("position", state["position"], low=0, high=len(steps) * b)
        before = check_int("before", state["before"], low=0)
        reached = step0 + steps.start + position // b
        self._check_past(state["past"], reached, position % b > 0)
        if (W, b) == (self.num_replicas, self.batch_size):
            skip = position
        elif position % b:
            raise ValueError(
                f"position should be at a step boundary (a multiple of batch_size={b}) to resume on another grid, but got position={position}"
            )
        else:  # the new grid starts at the step reached, each source at its count there
            saved._place()
            p = bisect.bisect_right(saved._firsts, reached) - 1
            tau = reached - saved._firsts[p]
            at = saved._bases[p] + (saved._before_step(saved._pieces[p][1], [tau])[0] if tau else 0)
            skip, before, read = 0, before + position, [int(n) for n in at]
            origin, step0 = origin + (reached - step0) * W * b, reached
        self.epoch, self._counter, self._skip, self._before = epoch, None, skip, before
        self._origin, self._step0, self._read0 = origin, step0, read
        self._place()

    def _check_past(self, past: object, step: int, begun: bool) -> None:
        """Refuse a schedule that rewrites what was read before ``step``, in words."""
        ours = [(s, [Fraction(x) for x in w]) for s, w in self._past(step, begun)]
        try:
            theirs = [(check_int("step", s, low=0), [Fraction(x) for x in w]) for s, w in past]
        except (TypeError, ValueError, ZeroDivisionError):
            raise ValueError(
                f"past should be the [step, shares] of a MixtureSampler state, but got past={past!r}"
            ) from None
        if theirs == ours:
            return
        differ = (
            [a for a, b in zip(theirs, ours) if a != b] + theirs[len(ours) :] + ours[len(theirs) :]
        )
        x = min(s for s, _ in differ)
        before = next((w for s, w in reversed(theirs) if s <= x), None)
        now = next((w for s, w in reversed(ours) if s <= x), None)
        raise ValueError(
            f"weights should agree with the mix read before step {step + begun}, where this state was "
            f"saved, but from step {x} it read shares {_text(before) if before else 'none'} "
            f"and these weights give {_text(now) if now else 'none'}"
            + (" (a change of the mix there)" if before == now else "")
            + f"; change the mix at step {step + begun} or later"
        )


class MixtureBatchSampler(Sampler[list[int]]):
    r"""Each step's micro-batch of a :class:`MixtureSampler`, for ``DataLoader(batch_sampler=)``:
    a batch is one training step, whatever the loader's settings (Megatron's form). It resumes
    as the sampler does; ``state_dict(consumed=...)`` counts batches.

    Args:
        sampler: the rank's :class:`MixtureSampler`.

    Examples:
        >>> s = MixtureSampler([6, 4], [0.5, 0.5], batch_size=2, num_replicas=2, rank=0)
        >>> list(MixtureBatchSampler(s))
        [[3, 6], [1, 7], [0, 9]]
    """

    def __init__(self, sampler: MixtureSampler) -> None:
        if not isinstance(sampler, MixtureSampler):
            raise TypeError(f"sampler should be a MixtureSampler, but got sampler={sampler!r}")
        self.sampler, self._sizes = sampler, []  # the latest iter()'s batches: their lengths

    def __iter__(self) -> Iterator[list[int]]:
        s = self.sampler
        it, b, sizes = iter(s), s.batch_size, []
        self._sizes = sizes
        first = b - s._skip % b  # a resume mid-step: the rest of that micro-batch first
        while batch := [i for _, i in zip(range(first), it)]:
            sizes.append(len(batch))
            yield batch
            first = b

    def __len__(self) -> int:
        return -(-len(self.sampler) // self.sampler.batch_size)

    def set_epoch(self, epoch: int) -> None:
        r"""The sampler's epoch."""
        self.sampler.set_epoch(epoch)

    def state_dict(self, consumed: int | None = None) -> dict[str, Any]:
        r"""The sampler's state; ``consumed``: the batches the loop used of the latest
        ``iter()`` (a plain DataLoader with workers reads ahead)."""
        if consumed is None:
            return self.sampler.state_dict()
        n = len(self._sizes)
        consumed = _consumed(consumed, n, "batches")
        return self.sampler.state_dict(sum(self._sizes[:consumed]))

    def load_state_dict(self, state: dict[str, Any]) -> None:
        r"""Resume the sampler at ``state``."""
        self.sampler.load_state_dict(state)
