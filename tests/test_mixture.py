"""Properties of MixtureSampler: the stream equals a reference written from the module docstring
(a Huffman tree of divisor merges, in Fractions, one position at a time); every prefix and
window keeps each source within the proven bound; each pass of a source is a permutation; ranks
split every step; schedules lose and repeat nothing; resume, elastic too, reads every position
once; batch_at, iteration and when_read agree; bad input is named."""

from __future__ import annotations

import heapq
import json
import math
import random
import re
from fractions import Fraction
from functools import partial
from itertools import islice, pairwise, product

import numpy as np
import pytest
import torch
from hypothesis import example, given
from hypothesis import strategies as st

from distsampling.mixing.sampler import LAYOUTS, MixtureSampler, Read
from distsampling.mixing.tree import _count, _counts, _integer_mix, _route
from distsampling.mixing.weights import _weights
from distsampling.scale.index_shuffle import epoch_key, index_shuffle
from strategies import (
    elastic_world_sizes,
    mixture_batch_sizes,
    mixture_schedules,
    mixture_sources,
    seeds,
    small_unit_weights,
)

# --- the reference: the divisor merge by time, in Fractions, from the module docstring --------


def exact(w: object) -> Fraction:
    return Fraction(repr(float(w))) if isinstance(w, float) else Fraction(w)


def reference_tree(weights: list[object]) -> object:
    """The Huffman tree of the positive weights: (weight, id, leaf k or (left, right)), ties to
    the smaller id (the older node)."""
    heap = [(exact(w), k, k) for k, w in enumerate(weights) if exact(w) > 0]
    heapq.heapify(heap)
    made = len(weights)
    while len(heap) > 1:
        a, b = heapq.heappop(heap), heapq.heappop(heap)
        heapq.heappush(heap, (a[0] + b[0], made, (a, b)))
        made += 1
    return heap[0]


def reference_sources(node: tuple, n: int) -> list[int]:
    """The first n sources of a node's stream: its left child's j-th item at time
    (j + 1/2) / w_left, its right's i-th at (i + 1/2) / w_right, merged by time, ties left."""
    _, _, tree = node
    if not isinstance(tree, tuple):
        return [tree] * n
    left, right = tree
    times = [(Fraction(2 * j + 1, 2) / left[0], 0) for j in range(n)]
    times += [(Fraction(2 * i + 1, 2) / right[0], 1) for i in range(n)]
    sides = [side for _, side in sorted(times)[:n]]
    lefts = iter(reference_sources(left, sides.count(0)))
    rights = iter(reference_sources(right, sides.count(1)))
    return [next(lefts) if side == 0 else next(rights) for side in sides]


def reference_betas(node: tuple, path: tuple[Fraction, ...] = ()) -> dict[int, Fraction]:
    """β_k = Σ w_k / w_v over the nodes from k's leaf up to (not including) the root."""
    weight, _, tree = node
    if not isinstance(tree, tuple):
        return {tree: sum((weight / w for w in path), Fraction(0))}
    return {**reference_betas(tree[0], (*path, tree[0][0])),
            **reference_betas(tree[1], (*path, tree[1][0]))}  # fmt: skip


def reference_reads(
    sizes: list[int], plan: list, grids: list[tuple[int, int, int]], layout: str = "per_rank"
) -> list:
    """(source, item number) of every read, laid out step by step, rank by rank: grids
    ``(W, b, steps)`` one after another. Per rank: each rank reads its own stream, ``b``
    positions a step (:class:`ReferenceStream`, in the tree of the grid's first weights): at the
    grid's first step rank r's stream is that tree's from position r·b on (a fresh tree that
    skipped r·b positions), and at each change of ``plan`` every node of every rank carries its
    phase; a source's reads are numbered step by step, rank by rank. Global: one stream,
    whatever the grids, each change of ``plan`` carrying every node's phase
    (:func:`reference_global`); step t reads the stream's next B = W·b positions, rank r its
    micro-batch (r + t) mod W; a source's reads are numbered in the stream's order."""
    if layout == "global":
        return reference_global(sizes, plan, grids)
    units = [MixtureSampler(sizes, w, 1, 1, 0).units[0] for _, w in plan]
    counts, out, step = [0] * len(sizes), [], 0
    for W, b, n in grids:
        piece = max(i for i, (first, _) in enumerate(plan) if first <= step)
        ranks = [ReferenceStream(units, piece) for _ in range(W)]
        for r, rank in enumerate(ranks):  # rank r from the fresh tree's position r·b on
            for _ in range(r * b):
                rank.source()
        for t in range(step, step + n):
            g = max(i for i, (first, _) in enumerate(plan) if first <= t)
            for rank in ranks if g != piece else []:  # a change: each node's phase carried
                rank.enter(g)
            piece = g
            for rank in ranks:
                for _ in range(b):
                    k = rank.source()
                    out.append((k, counts[k]))
                    counts[k] += 1
        step += n
    return out


class ReferenceStream:
    """One stream of a tree shape, each node's phase carried across changes, simulated
    position by position in Python ints: the tree of ``units[g]`` (its Huffman tree; the
    sources of weight 0 there paired, round after round, under a node beside it), fresh at
    piece ``g`` (every node's residual φ = 1/2). In a piece a node gives its left child
    ``ℓ(m) = ⌊(2m·a + θ)/2s⌋`` of its first ``m`` positions (``a``, ``s`` its children's
    weights scaled up to about 2**30); at a change its residual ``((2m·a + θ) mod 2s)/2s``
    becomes the next piece's ``θ/2s``, rounded to the nearest (a node of weight 0 waits)."""

    def __init__(self, units: list[list[int]], g: int) -> None:
        self.units, root = units, reference_tree(units[g])
        zeros = [(0, k, k) for k in range(len(units[g])) if units[g][k] == 0]
        while len(zeros) > 1:
            odd = zeros[len(zeros) - len(zeros) % 2 :]
            zeros = [(0, -1, (x, y)) for x, y in zip(zeros[::2], zeros[1::2])] + odd
        self.root = (0, -1, (root, zeros[0])) if zeros else root
        self.inner, todo = [], [self.root]
        while todo:
            v = todo.pop()
            if isinstance(v[2], tuple):
                self.inner.append(v)
                todo += list(v[2])
        self.state = {id(v): [Fraction(1, 2), 0, None] for v in self.inner}  # φ, m, (a, s, θ)
        self.enter(g)

    def weight(self, v: tuple, g: int) -> int:
        u = self.units[g]
        return u[v[2]] if not isinstance(v[2], tuple) else sum(self.weight(c, g) for c in v[2])

    def enter(self, g: int) -> None:
        for v in self.inner:
            st = self.state[id(v)]
            if st[2] is not None:  # its φ at the last piece's end
                a2, s2, th = st[2]
                st[0] = Fraction((2 * st[1] * a2 + th) % (2 * s2), 2 * s2)
            a, s = self.weight(v[2][0], g), self.weight(v[2][0], g) + self.weight(v[2][1], g)
            M = max(1, 2**30 // max(s, 1))
            theta = min(math.floor(st[0] * 2 * s * M + Fraction(1, 2)), 2 * s * M - 1)
            st[1], st[2] = 0, ((a * M, s * M, theta) if s else None)

    def source(self) -> int:
        v = self.root
        while isinstance(v[2], tuple):
            st = self.state[id(v)]
            (a2, s2, th), m = st[2], st[1]
            st[1] += 1
            left = (2 * (m + 1) * a2 + th) // (2 * s2) > (2 * m * a2 + th) // (2 * s2)
            v = v[2][0] if left else v[2][1]
        return v[2]


def reference_global(sizes: list[int], plan: list, grids: list[tuple[int, int, int]]) -> list:
    """:func:`reference_reads` of the global layout, simulated position by position: one tree
    shape for the whole schedule (the first weights' Huffman tree; the sources of weight 0 there
    paired, round after round, under a node beside it). In a piece of the schedule a node gives
    its left child ``ℓ(m) = ⌊(2m·a + θ)/2s⌋`` of its first ``m`` positions (``a``, ``s`` its
    children's weights scaled up to about 2**30); at a change its residual ``((2m·a + θ) mod
    2s)/2s`` becomes the next piece's ``θ/2s``, rounded (a fresh node: ``θ = s``)."""
    units = [MixtureSampler(sizes, w, 1, 1, 0).units[0] for _, w in plan]
    root = reference_tree(units[0])  # (weight, id, k or (left, right))
    zeros = [(0, k, k) for k in range(len(sizes)) if units[0][k] == 0]
    while len(zeros) > 1:
        odd = zeros[len(zeros) - len(zeros) % 2 :]
        zeros = [(0, -1, (x, y)) for x, y in zip(zeros[::2], zeros[1::2])] + odd
    root = (0, -1, (root, zeros[0])) if zeros else root
    inner, todo = [], [root]
    while todo:
        v = todo.pop()
        if isinstance(v[2], tuple):
            inner.append(v)
            todo += list(v[2])

    def weight(v: tuple, u: list[int]) -> int:
        return u[v[2]] if not isinstance(v[2], tuple) else weight(v[2][0], u) + weight(v[2][1], u)

    state = {id(v): [(1, 2), 0, None] for v in inner}  # φ, positions in the piece, (a, s, θ)

    def enter(g: int) -> None:  # each node's piece g: its φ from the last piece's end
        for v in inner:
            st = state[id(v)]
            if st[2] is not None:
                a2, s2, th = st[2]
                st[0] = ((2 * st[1] * a2 + th) % (2 * s2), 2 * s2)
            a, s = weight(v[2][0], units[g]), weight(v[2][0], units[g]) + weight(v[2][1], units[g])
            M, (R, D) = max(1, 2**30 // max(s, 1)), st[0]
            theta = min((4 * R * s * M + D) // (2 * D), 2 * s * M - 1)
            st[1], st[2] = 0, (a * M, s * M, theta) if s else None

    def source() -> int:  # the next position, down the nodes
        v = root
        while isinstance(v[2], tuple):
            st = state[id(v)]
            (a2, s2, th), m = st[2], st[1]
            left = (2 * (m + 1) * a2 + th) // (2 * s2) > (2 * m * a2 + th) // (2 * s2)
            st[1] += 1
            v = v[2][0] if left else v[2][1]
        return v[2]

    counts, out, step, piece = [0] * len(sizes), [], 0, None
    for W, b, steps in grids:
        for t in range(step, step + steps):
            g = max(i for i, (first, _) in enumerate(plan) if first <= t)
            if g != piece:
                enter(g)
                piece = g
            items = []
            for _ in range(W * b):  # the global batch, numbered in the stream's order
                k = source()
                items.append((k, counts[k]))
                counts[k] += 1
            for r in range(W):  # rank r: micro-batch (r + t) mod W
                m = (r + t) % W
                out += items[m * b : (m + 1) * b]
        step += steps
    return out


def read_at(s: MixtureSampler, position: int) -> Read:
    """The step, rank and slot that read ``position`` of a fresh grid, from ``positions()``."""
    step = position // (s.batch_size * s.num_replicas)
    for r in range(s.num_replicas):
        at = s.positions(step, r).tolist()
        if position in at:
            return Read(position, step, r, at.index(position))
    raise AssertionError(position)


def decoded(s: MixtureSampler, reads: list[tuple[int, int]]) -> list[int]:
    """The indices of (source, item number) reads without shuffle."""
    return [s.offsets[k] + j % s.sizes[k] for k, j in reads]


def laid_out(reads: list[list[int]], b: int) -> list[int]:
    """The ranks' reads step by step, rank by rank."""
    return [i for t in range(len(reads[0]) // b) for r in reads for i in r[t * b : (t + 1) * b]]


def stream(s: MixtureSampler, n: int) -> tuple[list[int], list[int]]:
    """Sources and item numbers of the first n global positions."""
    ks, js = s._sources(np.arange(n, dtype=np.int64))
    return ks.tolist(), js.tolist()


def source_of(s: MixtureSampler, index: int) -> tuple[int, int]:
    k = max(k for k, offset in enumerate(s.offsets) if offset <= index and s.sizes[k])
    return k, index - s.offsets[k]


PerRank = partial(MixtureSampler, layout="per_rank")  # each rank a window of the tree


def roundtrip(state: dict) -> dict:
    return json.loads(json.dumps(state))


# --- the stream and its bounds ------------------------------------------------------------------


@given(sources=mixture_sources())
@example(sources=([9, 9, 9, 9], [1, 1, 2, 2]))  # merged and unmerged nodes of equal weight
@example(sources=([9] * 6, [3, 3, 3, 3, 3, 3]))  # ties among merged nodes
@example(sources=([9] * 6, [1, 1, 1, 1, 2, 2]))  # merged nodes tie with leaves and each other
@example(sources=([9] * 12, [1] * 8 + [2] * 4))  # wider: ties on three levels
def test_the_stream_is_the_divisor_merge_of_the_docstring_at_every_node(sources):
    """Invariant: the closed form ⌊n·a/(a+b) + 1/2⌋ at every node of the tree of the integer
    weights in use gives, position for position, the merge by time of the reference; each
    source's items come numbered 0, 1, 2, ..."""
    sizes, weights = sources
    s = MixtureSampler(sizes, weights, 1, 1, 0)
    ks, js = stream(s, 120)
    assert ks == reference_sources(reference_tree(s.units[0]), 120)
    for k in set(ks):
        assert [j for kk, j in zip(ks, js) if kk == k] == list(range(ks.count(k)))


@given(sources=mixture_sources(), n=st.integers(0, 200))
@example(sources=([9, 0, 9], [1, 0, 2]), n=7)  # a source of weight 0: no path in the tree
def test_a_sources_count_down_its_path_is_its_count_in_the_stream_and_0_at_weight_0(sources, n):
    """Invariant: ``_count(tree, k, n)``, source ``k``'s count before tree position ``n`` walked
    down its own path, is the number of ``k``'s among the stream's first ``n`` positions and the
    level-by-level count's column, for an int and an array of positions; a source of weight 0
    has no path and counts 0 before any position (an int 0, or an array of zeros)."""
    sizes, weights = sources
    units, tree = _integer_mix(_weights("weights", weights, sizes))
    ks = _route(tree, np.arange(n, dtype=np.int64))[0]  # (n,) the stream's sources
    upto = np.arange(n + 1, dtype=np.int64)  # (n + 1,) every prefix's end
    table = _counts(tree, upto, len(sizes))  # (n + 1, K)
    for k, unit in enumerate(units):
        assert _count(tree, k, n) == np.count_nonzero(ks == k)
        assert _count(tree, k, upto).tolist() == table[:, k].tolist()
        if unit == 0:
            assert _count(tree, k, n) == 0 and type(_count(tree, k, n)) is int
            assert _count(tree, k, upto).tolist() == [0] * (n + 1)


@given(sources=mixture_sources(most=12))
@example(sources=([9, 9, 9], [1 / 3, 1 / 3, 1 / 3]))
@example(sources=([9, 9, 9], [1e-12, 0.7, 0.3]))  # below one unit of 2**31: kept at one
def test_weights_are_their_exact_integers_or_rounded_to_2_to_the_31_within_one_unit(sources):
    """Invariant: the integer weights in use are the smallest integers of the exact shares if
    they sum to at most 2**31; else they sum to 2**31 and each share moves by less than
    (1 + m) 2**-31, m the positive weights below 2**-31 of the sum (each kept at one unit); a
    positive weight stays positive, a zero one zero."""
    sizes, weights = sources
    given = [exact(w) for w in weights]
    units = MixtureSampler(sizes, weights, 1, 1, 0).units[0]
    assert [u > 0 for u in units] == [w > 0 for w in given]
    scale = math.lcm(*(w.denominator for w in given))
    ints = [int(w * scale) for w in given]
    ints = [n // math.gcd(*ints) for n in ints]
    if sum(ints) <= 2**31:
        assert units == ints
    else:
        assert sum(units) == 2**31
        tiny = sum(0 < w / sum(given) < Fraction(1, 2**31) for w in given)  # kept at one unit
        for u, w in zip(units, given):
            assert abs(Fraction(u, 2**31) - w / sum(given)) < Fraction(1 + tiny, 2**31)


@given(ints=small_unit_weights)
@example(ints=[1, 3, 11, 33])  # 3 of 48 is one unit of 16 exactly: not below it
@example(ints=[1, 4, 15, 45])  # 4 of 65 is just below one unit: kept at one
@example(ints=[31, 1])  # the lightest is the heaviest weight below one unit: kept at one
@example(ints=[8, 8])  # a total of 16 exactly: the integers themselves
def test_rounding_is_largest_remainder_with_weights_below_one_unit_kept_at_one(ints):
    """Invariant (at 16 units in all, where every boundary is reachable): integer weights whose
    smallest integers sum past the units are rounded to them by largest remainder (ties to the
    lower source), each weight below one unit of the sum (``n * units < total``) kept at one and
    the units left apportioned among the others; at most the units, they are kept."""
    from distsampling.mixing import weights

    units, given = 16, tuple(ints)
    ints = [n // math.gcd(*ints) for n in ints]  # the smallest integers of the shares
    total = sum(ints)
    expected = list(ints)
    if total > units:
        tiny = [k for k, n in enumerate(ints) if 0 < n and n * units < total]
        seats, pool = units - len(tiny), total - sum(ints[k] for k in tiny)
        quota = {k: Fraction(n * seats, pool) for k, n in enumerate(ints) if k not in tiny}
        expected = [1 if k in tiny else math.floor(quota[k]) for k in range(len(ints))]
        ahead = sorted(quota, key=lambda k: (math.floor(quota[k]) - quota[k], k))
        for k in ahead[: units - sum(expected)]:
            expected[k] += 1
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(weights, "UNITS", units)
        assert weights._units((given, (1,) * len(given))) == expected


@given(
    weights=st.lists(
        st.one_of(st.floats(0.0, 1e6), st.sampled_from([1e-05, 2.5e-07, 1e22, 3.0, 0.1])),
        min_size=1,
        max_size=12,
    ).filter(any)
)
@example(weights=[0.5, 0.25, 0.125])  # fractions of different lengths: over one denominator
@example(weights=[1e-05, 0.3, 12.5])  # an exponent among them: each read alone
def test_float_weights_are_the_decimals_they_print_as_in_any_form(weights):
    """Invariant: a list of floats is read as the exact decimals their reprs print (0.1 is 1/10,
    1e-05 is 1/100000, 12.5 is 25/2), whatever their forms, lengths and mix; a float32 array
    as the decimals float32 prints."""
    s = MixtureSampler([5] * len(weights), weights, 1, 1, 0)
    assert s.schedule == [(0, [Fraction(repr(w)) for w in weights])]
    w32 = np.array(weights, dtype=np.float32)
    if np.isfinite(w32).all() and w32.any():
        s32 = MixtureSampler([5] * len(weights), w32, 1, 1, 0)
        assert s32.schedule == [(0, [Fraction(str(x)) for x in w32])]


def test_float_weights_as_users_compute_them_are_rounded_and_stated():
    """Example: 100 sources weighted n_tokens / total: the exact decimals need far more than
    int64; their shares in use differ from the given floats by less than 2**-31 each."""
    sizes = [int(10**6 / (k + 1) ** 1.3) + 1 for k in range(100)]
    weights = [n / sum(sizes) for n in sizes]
    s = MixtureSampler(sizes, weights, 4, 8, 0)
    assert sum(s.units[0]) == 2**31 and max(s.units[0]) < 2**31
    gap = max(abs(Fraction(u, 2**31) - exact(w) / sum(map(exact, weights)))
              for u, w in zip(s.units[0], weights))  # fmt: skip
    assert 0 < gap < Fraction(1, 2**31)


@given(sources=mixture_sources(most=12), window=st.integers(1, 64))
def test_every_prefix_and_window_keeps_each_source_within_the_proven_bound(sources, window):
    """Invariant: |c_k(n) - w_k n| <= β_k / 2 <= bound() < 2 on every prefix and < β_k on every
    window; with up to 3 sources every prefix is within 1, with 2 every window too."""
    sizes, weights = sources
    s = MixtureSampler(sizes, weights, 1, 1, 0)
    weights = s.units[0]  # the integer weights in use (the same shares, or within 2**-31)
    total = sum(exact(w) for w in weights)
    betas = reference_betas(reference_tree(weights))
    assert s.bound() == max(betas.values()) / 2 < 2 and isinstance(s.bound(), Fraction)
    ks, _ = stream(s, 400)
    counts = np.zeros((401, len(weights)), dtype=np.int64)  # (n + 1, K) counts of each prefix
    counts[1:][np.arange(400), ks] = 1
    counts = counts.cumsum(axis=0)
    positive = len(betas)
    for k, beta in betas.items():
        share = exact(weights[k]) / total
        dev = [c - share * n for n, c in enumerate(counts[:, k].tolist())]
        assert max(map(abs, dev)) <= beta / 2
        windows = [dev[n + window] - dev[n] for n in range(len(dev) - window)]
        assert max(map(abs, windows)) < max(beta, Fraction(1, 10**9))
        if positive <= 3:
            assert max(map(abs, dev)) < 1
        if positive == 2:
            assert max(map(abs, windows)) < 1


def figures(
    sizes: list[int], weights: list[float], W: int, b: int, steps: int, layout: str = "per_rank"
) -> tuple:
    """(prefix, batch, rank) of benchmarks/bench_mixture.py: the largest |count_k - w_k n| on
    every prefix of the global positions (per rank: step by step, rank by rank; global: the
    stream), in every global batch, over each rank's whole share."""
    s = MixtureSampler(sizes, weights, b, W, 0, shuffle=False, layout=layout)
    ks = s.sources(np.arange(steps * W * b))[0]
    share = np.array(weights, dtype=np.float64) / sum(weights)
    onehot = np.eye(len(sizes))[ks]  # (n, K)
    prefix = np.abs(onehot.cumsum(0) - np.outer(np.arange(1, len(ks) + 1), share)).max()
    batch = np.abs(onehot.reshape(steps, W * b, -1).sum(1) - W * b * share).max()
    first = np.array([s.positions(t, r)[0] for t in range(steps) for r in range(W)])  # (S W,)
    mine = np.eye(len(sizes))[s.sources((first[:, None] + np.arange(b)).ravel())[0]]  # (S W b, K)
    ranks = mine.reshape(steps, W, b, -1).sum((0, 2))  # (W, K)
    rank = np.abs(ranks - steps * b * share).max()
    return round(prefix, 6), round(batch, 6), round(rank, 6)


def test_the_issues_task_is_mixed_within_one_sample_on_every_batch_and_rank():
    """Example: 60,000 / 6,000 / 600 samples at 0.5 / 0.3 / 0.2 on 8 ranks of micro-batch 8,
    937 steps: batch 0.8 and rank 0.8 (Megatron's layout: 0.8, 1.2); the run's prefix 0.7 on
    the global stream, 1.2 per rank (the sum of 8 ranks')."""
    assert figures([60000, 6000, 600], [0.5, 0.3, 0.2], 8, 8, 937, "global") == (0.7, 0.8, 0.8)
    assert figures([60000, 6000, 600], [0.5, 0.3, 0.2], 8, 8, 937) == (1.2, 0.8, 0.8)
    assert MixtureSampler([9] * 3, [0.5, 0.3, 0.2], 1, 1, 0).bound() == Fraction(4, 5)


def test_five_sources_halving_are_read_by_every_rank_at_their_share():
    """Example: weights .5/.25/.125/.0625/.0625 on 8 ranks of micro-batch 8, 500 steps: every
    rank reads exactly its share of each source (Megatron's layout: ranks 0, 2, 4, 6 never read
    source 4, a rank deviation of 250); every global batch exact."""
    for layout in LAYOUTS:
        w = [0.5, 0.25, 0.125, 0.0625, 0.0625]
        _, batch, rank = figures([10**6] * 5, w, 8, 8, 500, layout)
        assert (batch, rank) == (0.0, 0.0)


def test_a_source_of_one_in_64_is_read_by_every_rank_in_turn():
    """Example: weights [1, 63] on 8 ranks of micro-batch 8: each rank reads source 0 once
    every 8 steps, at its share (Megatron's layout: rank 3 reads all of it, always in one
    slot)."""
    s = PerRank([100, 6300], [1, 63], 8, 8, 0, shuffle=False)
    reads = [[(t, slot) for t in range(64) for slot, i in enumerate(s.batch_at(t)[r]) if i < 100]
             for r in range(8)]  # fmt: skip
    assert [len(x) for x in reads] == [8] * 8
    assert all(t2 - t1 == 8 for x in reads for (t1, _), (t2, _) in pairwise(x))


@given(sources=mixture_sources(), world=elastic_world_sizes, b=mixture_batch_sizes)
@example(sources=([9, 9], [1, 63]), world=8, b=8)
@example(sources=([9] * 5, [8, 4, 2, 1, 1]), world=8, b=8)
def test_every_rank_and_every_global_batch_keep_each_source_within_its_beta(sources, world, b):
    """Invariant: rank r's reads are the tree's positions [r*b, r*b + m): on every prefix of
    them each source is within β_k of its share, and so is every global batch (the tree's
    window [s*b, s*b + B)); β_k <= 2 * bound()."""
    sizes, weights = sources
    s = PerRank(sizes, weights, b, world, 0, shuffle=False)
    betas = reference_betas(reference_tree(s.units[0]))
    share = {k: Fraction(s.units[0][k], sum(s.units[0])) for k in betas}
    steps = 12
    ks = np.array(s.sources(np.arange(steps * world * b))[0]).reshape(steps, world, b)
    for k, beta in betas.items():
        assert beta <= 2 * s.bound()
        mine = (ks == k).astype(np.int64)  # (steps, W, b)
        for r in range(world):
            counts = np.cumsum(mine[:, r].ravel()).tolist()  # every prefix of rank r's reads
            assert all(abs(c - share[k] * (m + 1)) < max(beta, Fraction(1, 10**9))
                       for m, c in enumerate(counts))  # fmt: skip
        for batch in mine.sum((1, 2)).tolist():
            assert abs(batch - share[k] * world * b) < max(beta, Fraction(1, 10**9))


@given(sources=mixture_sources(), seed=seeds, shuffle=st.booleans())
def test_each_pass_of_a_source_is_a_permutation_and_without_shuffle_the_samples_in_order(
    sources, seed, shuffle
):
    """Invariant: a source's samples are all read once per pass before any twice; its pass p is
    index_shuffle keyed by (seed, k, p), or 0, 1, ..., size - 1 without shuffle."""
    sizes, weights = sources
    s = MixtureSampler(sizes, weights, 1, 1, 0, seed=seed, shuffle=shuffle)
    read = [source_of(s, i) for i in s._indices(*s._sources(np.arange(150))).tolist()]
    for k, size in enumerate(sizes):
        if size == 0:
            continue
        mine = [i for kk, i in read if kk == k]
        for p in range(len(mine) // size):
            one = mine[p * size : (p + 1) * size]
            key = epoch_key(epoch_key(seed, k), p)
            expected = (
                index_shuffle(range(size), size, key).tolist() if shuffle else list(range(size))
            )
            assert one == expected


# --- ranks, steps, iteration, the inverse ----------------------------------------------------


@given(sources=mixture_sources(), world=elastic_world_sizes, b=mixture_batch_sizes, seed=seeds)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_ranks_split_every_step_and_iteration_yields_what_batch_at_says(
    layout, sources, world, b, seed
):
    """Invariant: at step t rank r reads the tree's positions [(t + r)b, (t + r + 1)b), each
    source's reads numbered step by step, rank by rank (the reference); each rank's iter() is its
    micro-batches of the epoch's steps, len() of them."""
    M = partial(MixtureSampler, layout=layout)
    sizes, weights = sources
    ranks = [M(sizes, weights, b, world, r, seed=seed, epoch_length=37)
             for r in range(world)]  # fmt: skip
    steps = -(-37 // (b * world))
    plain = M(sizes, weights, b, world, 0, shuffle=False)
    flat = [i for t in range(steps) for batch in plain.batch_at(t) for i in batch]
    assert flat == decoded(
        plain, reference_reads(sizes, [(0, weights)], [(world, b, steps)], layout)
    )
    for r, sampler in enumerate(ranks):
        assert len(sampler) == steps * b
        assert list(sampler) == [i for t in range(steps) for i in sampler.batch_at(t)[r]]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_world_of_two_to_the_fourteen_ranks_reads_the_reference_at_every_step(layout):
    """Invariant: at W = 2**14 ranks (a step's W grid points fill a whole batch of the counts'
    grid) every step's reads are still the reference's."""
    M = partial(MixtureSampler, layout=layout)
    sizes, weights, world = [50, 30], [3, 1], 1 << 14
    plain = M(sizes, weights, 1, world, 0, shuffle=False)
    flat = [i for t in range(3) for batch in plain.batch_at(t) for i in batch]
    assert flat == decoded(plain, reference_reads(sizes, [(0, weights)], [(world, 1, 3)], layout))


@given(sources=mixture_sources(), world=elastic_world_sizes, b=mixture_batch_sizes, seed=seeds)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_positions_and_sources_name_the_source_and_item_each_rank_reads_at_each_step(
    layout, sources, world, b, seed
):
    """Invariant: ``sources(positions(s, r))`` is what rank r reads at step s, decoded: without
    shuffle, item j of source k is sample ``j % sizes[k]`` of it, the index batch_at gives."""
    M = partial(MixtureSampler, layout=layout)
    sizes, weights = sources
    sampler = M(sizes, weights, b, world, 0, seed=seed, shuffle=False)
    for s in range(3):
        for r in range(world):
            ks, js = sampler.sources(sampler.positions(s, r))
            got = [sampler.offsets[k] + j % sizes[k] for k, j in zip(ks.tolist(), js.tolist())]
            assert got == sampler.batch_at(s)[r]


@given(sources=mixture_sources(), world=elastic_world_sizes, b=mixture_batch_sizes, seed=seeds,
       shuffle=st.booleans(), position=st.integers(0, 200))  # fmt: skip
@pytest.mark.parametrize("layout", LAYOUTS)
def test_when_read_finds_the_position_that_reads_a_sample(
    layout, sources, world, b, seed, shuffle, position
):
    """Invariant: when_read(k, i, p) of the sample read at a position is that position, with
    its step, rank and slot; a source of weight 0 is never read (None)."""
    M = partial(MixtureSampler, layout=layout)
    sizes, weights = sources
    s = M(sizes, weights, b, world, 0, seed=seed, shuffle=shuffle)
    B = b * world
    step, at = divmod(position, B)
    rank = (at // b - step * (layout == "global")) % world  # global: micro-batch m's rank m - s
    index = s.batch_at(step)[rank][at % b]
    k, i = source_of(s, index)
    j = stream(s, position + 1)[1][position]
    assert s.when_read(k, i, j // sizes[k]) == Read(position, step, rank, at % b)
    for k, w in enumerate(weights):
        if w == 0 and sizes[k]:
            assert s.when_read(k, 0) is None


# --- schedules ---------------------------------------------------------------------------------


@given(schedule=mixture_schedules(), seed=seeds)
def test_a_schedule_loses_and_repeats_nothing_and_every_prefix_keeps_the_schedules_bound(
    schedule, seed
):
    """Invariant: across weight changes each source goes on from its count (items 0, 1, 2, ...,
    so each pass is still a permutation); every prefix of the stream is within ``bound()`` of
    the schedule's cumulative share (each change carries the tree's phases); a source that joins
    later starts at its sample of pass 0."""
    sizes, plan = schedule
    s = MixtureSampler(sizes, plan, 1, 1, 0, seed=seed)
    ks, js = stream(s, 200)
    for k in set(ks):
        assert [j for kk, j in zip(ks, js) if kk == k] == list(range(ks.count(k)))
    firsts = [start for start, _ in plan]
    share, count = [Fraction(0)] * len(sizes), [0] * len(sizes)
    for n, k in enumerate(ks):
        units = s.units[max(i for i, first in enumerate(firsts) if first <= n)]
        share = [x + Fraction(u, sum(units)) for x, u in zip(share, units)]
        count[k] += 1
        assert max(abs(c - x) for c, x in zip(count, share)) <= s.bound()


@given(schedule=mixture_schedules(), world=elastic_world_sizes, b=mixture_batch_sizes)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_when_read_and_bound_follow_a_schedule(layout, schedule, world, b):
    """Invariant: under a schedule, when_read of the sample read at each position is that
    position (or None for a source whose weight ends at 0 after its last read); bound() of a
    single entry is its tree's; per rank, a schedule's is the global stream's (the phases
    carried; the prefix property of ``test_under_a_schedule_...``)."""
    M = partial(MixtureSampler, layout=layout)
    sizes, plan = schedule
    s = M(sizes, plan, b, world, 0, shuffle=False)
    ks, js = stream(s, 150)
    for p, (k, j) in enumerate(zip(ks, js)):
        read = s.when_read(k, j % sizes[k], j // sizes[k])
        step, m = p // (b * world), p % (b * world) // b
        assert read == Read(p, step, (m - step * (layout == "global")) % world, p % b)
    last = plan[-1][1]
    for k, w in enumerate(last):
        if w == 0:  # its first item not read before its weight fell to 0, and any later one
            j = (s._table.heads if layout == "global" else s._bases)[-1][k]
            assert s.when_read(k, j % sizes[k], j // sizes[k]) is None
            assert s.when_read(k, sizes[k] - 1, 10**6) is None
    bounds = [M(sizes, weights, 1, 1, 0).bound() for _, weights in plan]
    if len(plan) == 1:
        assert s.bound() == max(bounds)
    if layout == "per_rank":  # the schedule's phase bound: each rank's reads within twice it
        assert s.bound() == MixtureSampler(sizes, plan, b, world, 0).bound()


@given(schedule=mixture_schedules(), world=elastic_world_sizes, world2=elastic_world_sizes,
       b=mixture_batch_sizes, b2=mixture_batch_sizes, steps=st.integers(1, 30))  # fmt: skip
@pytest.mark.parametrize("layout", LAYOUTS)
def test_when_read_follows_a_schedule_on_a_grid_resumed_elastically(
    layout, schedule, world, world2, b, b2, steps
):
    """Invariant: under a schedule, after an elastic resume at a step boundary (another
    num_replicas and batch_size), when_read of the sample read at each position of the new
    grid is that position, with its step, rank and slot on the new grid: each source's count at
    the resume (read before it) is where its reads on the new grid go on from."""
    sizes, plan = schedule
    M = partial(MixtureSampler, layout=layout, shuffle=False, epoch_length=600)
    old = M(sizes, plan, b, world, 0)
    steps = min(steps, 300 // (world * b))  # within the first half of the epoch
    list(islice(iter(old), steps * b))  # this rank's first `steps` micro-batches
    new = M(sizes, plan, b2, world2, 0)
    new.load_state_dict(roundtrip(old.state_dict()))
    origin, B = steps * world * b, world2 * b2
    ks, js = new.sources(range(origin, origin + 8 * B))
    for p, k, j in zip(range(origin, origin + 8 * B), ks.tolist(), js.tolist()):
        step, (m, slot) = steps + (p - origin) // B, divmod((p - origin) % B, b2)
        rank = (m - step * (layout == "global")) % world2
        assert new.when_read(k, j % sizes[k], j // sizes[k]) == Read(p, step, rank, slot)


@given(sources=mixture_sources(), world=elastic_world_sizes, world2=elastic_world_sizes,
       b=mixture_batch_sizes, b2=mixture_batch_sizes, steps=st.integers(1, 30),
       rank=st.integers(0, 7))  # fmt: skip
@pytest.mark.parametrize("layout", LAYOUTS)
def test_after_an_elastic_resume_each_epoch_reads_the_batches_of_its_steps(
    layout, sources, world, world2, b, b2, steps, rank
):
    """Invariant: after an elastic resume at a step boundary (another num_replicas and
    batch_size), a rank of the new grid reads the rest of the epoch, and the whole next one,
    as ``batch_at`` gives its micro-batch at each of their training steps (the new grid's,
    from the resume's step on)."""
    sizes, weights = sources
    L = 240  # the epoch's length, in samples
    M = partial(MixtureSampler, layout=layout, epoch_length=L)
    old = M(sizes, weights, b, world, 0)
    steps = min(steps, L // 2 // (world * b))  # within the first half of the epoch
    list(islice(iter(old), steps * b))  # this rank's first `steps` micro-batches
    rank %= world2
    new = M(sizes, weights, b2, world2, rank)
    new.load_state_dict(roundtrip(old.state_dict()))
    origin, B = steps * world * b, world2 * b2
    for epoch in (0, 1):
        new.set_epoch(epoch)
        # the grid steps that start in the epoch's positions [epoch·L, (epoch + 1)·L)
        first = max(0, -(-(epoch * L - origin) // B))
        stop = max(first, -(-((epoch + 1) * L - origin) // B))
        assert list(new) == [i for g in range(first, stop) for i in new.batch_at(steps + g)[rank]]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_when_read_answers_in_ints(layout):
    """Invariant: every field of when_read's answer is an int (a log or a CLI prints it as one),
    far into the stream too, where the step is searched for."""
    M = partial(MixtureSampler, layout=layout)
    s = M([7, 5], [2, 1], 2, 3, 0)
    for k, size in enumerate(s.sizes):
        for j in (0, size - 1, 5 * size + 1):
            read = s.when_read(k, j % size, j // size)
            assert {type(x) for x in read} == {int}, read


def test_a_dataset_added_mid_training_joins_at_its_weight_from_its_first_sample():
    """Example: source 1 (weight 0) joins at step 3 (position 6, a global batch of 2) at half
    the stream."""
    s = MixtureSampler([10, 4], [(0, [1, 0]), (3, [1, 1])], 2, 1, 0, shuffle=False)
    assert [i for step in range(5) for i in s.batch_at(step)[0]] == [0, 1, 2, 3, 4, 5, 6, 10, 7, 11]


# --- epochs, resume, elastic -----------------------------------------------------------------


def test_set_epoch_after_iter_leaves_the_running_iterator_on_its_epoch():
    """Invariant: iter() reads its epoch when called: a later set_epoch changes the next one."""
    s = MixtureSampler([5, 7], [1, 2], 2, 2, 1, epoch_length=12)
    epoch0, epoch1 = list(s), (s.set_epoch(1), list(s))[1]
    s.set_epoch(0)
    it = iter(s)
    s.set_epoch(1)
    assert list(it) == epoch0 and list(s) == epoch1 and len(s) == len(epoch1)


@given(sources=mixture_sources(), world=elastic_world_sizes, b=mixture_batch_sizes,
       seed=seeds, stop=st.integers(0, 30), epoch=st.integers(0, 2))  # fmt: skip
@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_resumed_rank_reads_what_the_uninterrupted_one_reads(
    layout, sources, world, b, seed, stop, epoch
):
    """Invariant: state_dict after k indices (mid-micro-batch too), loaded on the same grid,
    yields the rest of the epoch and then the next epoch, as the uninterrupted run."""
    M = partial(MixtureSampler, layout=layout)
    sizes, weights = sources
    rank = world - 1

    def make() -> MixtureSampler:
        return M(sizes, weights, b, world, rank, seed=seed, epoch_length=23)

    whole = make()
    whole.set_epoch(epoch)
    expected = list(whole)
    whole.set_epoch(epoch + 1)
    following = list(whole)
    first = make()
    first.set_epoch(epoch)
    head = list(islice(iter(first), min(stop, len(expected))))
    resumed = make()
    resumed.load_state_dict(roundtrip(first.state_dict()))
    assert len(resumed) == len(expected)  # len() is the whole epoch's, before and after a resume
    assert head + list(resumed) + list(resumed) == expected + expected[len(head) :]
    resumed.set_epoch(epoch + 1)
    assert list(resumed) == following


@given(schedule=mixture_schedules(gap=4), w1=elastic_world_sizes, w2=elastic_world_sizes,
       b1=mixture_batch_sizes, b2=mixture_batch_sizes, steps=st.integers(0, 6))  # fmt: skip
@pytest.mark.parametrize("layout", LAYOUTS)
def test_an_elastic_resume_reads_every_position_of_the_stream_once(
    layout, schedule, w1, w2, b1, b2, steps
):
    """Invariant: W1 ranks of micro-batch b1 read some steps; their state loaded on W2 ranks of
    micro-batch b2, the new grid starts its tree at that step, each source going on from its
    count: the reference's reads over both grids; the schedule's changes at their steps."""
    M = partial(MixtureSampler, layout=layout)
    sizes, weights = schedule
    length = 50
    old = [M(sizes, weights, b1, w1, r, shuffle=False, epoch_length=length)
           for r in range(w1)]  # fmt: skip
    steps = min(steps, len(old[0]) // b1)
    reads = [list(islice(iter(s), steps * b1)) for s in old]
    state = roundtrip(old[0].state_dict())
    plain = [M(sizes, weights, b2, w2, r, shuffle=False, epoch_length=length)
             for r in range(w2)]  # fmt: skip
    for s in plain:
        s.load_state_dict(state)
    rest = [list(s) for s in plain]
    more = len(rest[0]) // b2
    flat = laid_out(reads, b1) + laid_out(rest, b2)
    grids = [(w1, b1, steps), (w2, b2, more)] if (w1, b1) != (w2, b2) else [(w1, b1, steps + more)]
    assert flat == decoded(plain[0], reference_reads(sizes, weights, grids, layout))
    assert rest == [[i for t in range(steps, steps + more) for i in plain[0].batch_at(t)[r]]
                    for r in range(w2)]  # fmt: skip
    assert steps * w1 * b1 + more * w2 * b2 >= length  # the epoch read to its end


def test_an_elastic_resume_mid_micro_batch_is_refused_with_the_position():
    s = MixtureSampler([9, 9], [1, 1], 4, 2, 0)
    next(iter(s))
    message = ("position should be at a step boundary (a multiple of batch_size=4) to resume on "
               "another grid, but got position=1")  # fmt: skip
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        MixtureSampler([9, 9], [1, 1], 4, 3, 0).load_state_dict(s.state_dict())


@pytest.mark.parametrize("workers", [0, 2])
def test_a_stateful_dataloader_resumes_with_exactly_the_remaining_batches(workers):
    """Invariant: torchdata's StatefulDataLoader saves the sampler's state with each batch
    (workers prefetch ahead): a new loader loaded with it yields the batches left, then the
    next epoch."""
    from torchdata.stateful_dataloader import StatefulDataLoader

    def loader() -> StatefulDataLoader:
        sampler = MixtureSampler([40, 12, 5], [0.5, 0.3, 0.2], 3, 2, 1, seed=3, epoch_length=60)
        return StatefulDataLoader(range(57), batch_size=3, sampler=sampler, num_workers=workers)

    whole = loader()
    expected = [b.tolist() for b in whole]
    whole.sampler.set_epoch(1)
    following = [b.tolist() for b in whole]
    first = loader()
    it = iter(first)
    head = [next(it).tolist() for _ in range(4)]
    state = first.state_dict()
    del it
    resumed = loader()
    resumed.load_state_dict(state)
    assert head + [b.tolist() for b in resumed] == expected
    resumed.sampler.set_epoch(1)
    assert [b.tolist() for b in resumed] == following


def test_the_plain_dataloader_resumes_at_the_loops_batch_with_consumed():
    """Invariant: a plain DataLoader with 2 workers reads ahead; state_dict(consumed=...) saves
    where the loop is, not where the workers are."""
    from torch.utils.data import DataLoader

    def sampler() -> MixtureSampler:
        return MixtureSampler([40, 12], [2, 1], 4, 2, 0, epoch_length=48)

    s = sampler()
    expected = [b.tolist() for b in DataLoader(range(52), batch_size=4, sampler=s, num_workers=2)]
    head = []
    for batch in DataLoader(range(52), batch_size=4, sampler=s, num_workers=2):
        head.append(batch.tolist())
        if len(head) == 2:
            state = s.state_dict(consumed=8)
            break
    resumed = sampler()
    resumed.load_state_dict(roundtrip(state))
    loader = DataLoader(range(52), batch_size=4, sampler=resumed, num_workers=2)
    assert head + [b.tolist() for b in loader] == expected


def test_a_state_of_another_configuration_is_refused_naming_the_field():
    """Invariant: a state of other sizes, seed, shuffle or epoch length is refused, naming the
    field; a field out of range too. The state holds what was read, in words: each source's
    count at the grid's first step, and the schedule's past as exact shares (0.5 and 1/2 are
    one mix)."""
    s = MixtureSampler([9, 9], [1, 1], 2, 1, 0)
    list(islice(iter(s), 10))  # 5 steps
    state = s.state_dict()
    assert state == {"kind": "MixtureSampler", "version": 5, "sizes": [9, 9], "seed": 0,
                     "shuffle": True, "epoch_length": 18, "layout": "global", "epoch": 0,
                     "num_replicas": 1, "batch_size": 2, "origin": 0, "step": 0, "read": [0, 0],
                     "phase": [[1, 2]], "past": [[0, ["1/2", "1/2"]]], "position": 10, "before": 0,
                     "steps_before": 0}  # fmt: skip
    MixtureSampler([9, 9], [0.5, Fraction(1, 2)], 2, 1, 0).load_state_dict(state)
    MixtureSampler([9, 9], [1, 2], 2, 1, 0).load_state_dict(  # nothing read: any mix
        MixtureSampler([9, 9], [1, 1], 2, 1, 0).state_dict()
    )
    refused = [
        ({}, [9, 9], [1, 2], {}, "weights should agree with the mix read before step 5, where "
         "this state was saved, but from step 0 it read shares 0.5, 0.5 and these weights give "
         "0.3333333333, 0.6666666667; change the mix at step 5 or later"),
        ({}, [9, 8], [1, 1], {}, "state does not match this sampler: sizes was [9, 9] when saved, "
         "but is [9, 8] now"),
        ({}, [9, 9], [1, 1], {"seed": 1}, "state does not match this sampler: seed was 0 when "
         "saved, but is 1 now"),
        ({}, [9, 9], [1, 1], {"shuffle": False}, "state does not match this sampler: shuffle was "
         "True when saved, but is False now"),
        ({}, [9, 9], [1, 1], {"epoch_length": 17}, "state does not match this sampler: "
         "epoch_length was 18 when saved, but is 17 now"),
        ({}, [9, 9], [1, 1], {"layout": "per_rank"}, "state does not match this sampler: "
         "layout was 'global' when saved, but is 'per_rank' now"),
        ({"phase": -1}, [9, 9], [1, 1], {}, "phase should be 1 [numerator, denominator] pairs, "
         "0 <= numerator < denominator, one a node of the weight tree, but got phase=-1"),
        ({"phase": [[2, 2]]}, [9, 9], [1, 1], {}, "phase should be 1 [numerator, denominator] "
         "pairs, 0 <= numerator < denominator, one a node of the weight tree, but got "
         "phase=[[2, 2]]"),
        ({"steps_before": -1}, [9, 9], [1, 1], {}, "steps_before should be >= 0, but got "
         "steps_before=-1"),
        ({"position": 99}, [9, 9], [1, 1], {}, "position should be in the interval [0, 18], but "
         "got position=99"),
        ({"origin": -1}, [9, 9], [1, 1], {}, "origin should be >= 0, but got origin=-1"),
        ({"epoch": -1}, [9, 9], [1, 1], {}, "epoch should be >= 0, but got epoch=-1"),
        ({"num_replicas": 0}, [9, 9], [1, 1], {}, "num_replicas should be >= 1, but got "
         "num_replicas=0"),
        ({"batch_size": 0}, [9, 9], [1, 1], {}, "batch_size should be >= 1, but got batch_size=0"),
        ({"step": -1}, [9, 9], [1, 1], {}, "step should be >= 0, but got step=-1"),
        ({"read": [0]}, [9, 9], [1, 1], {}, "read should be a list of 2 counts, one per source, "
         "but got read=[0]"),
        ({"read": 0}, [9, 9], [1, 1], {}, "read should be a list of 2 counts, one per source, "
         "but got read=0"),
        ({"read": [0, -1]}, [9, 9], [1, 1], {}, "read[1] should be >= 0, but got read[1]=-1"),
        ({"past": "x"}, [9, 9], [1, 1], {}, "past should be the [step, shares] of a "
         "MixtureSampler state, but got past='x'"),
        ({"before": -1}, [9, 9], [1, 1], {}, "before should be >= 0, but got before=-1"),
    ]  # fmt: skip
    for change, sizes, weights, kwargs, message in refused:
        sampler = MixtureSampler(sizes, weights, 2, 1, 0, **kwargs)
        with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
            sampler.load_state_dict({**state, **change})


def test_a_per_rank_state_saves_phase_0_and_refuses_another_naming_it():
    """Invariant: a per-rank state's ``phase`` is 0 (each rank's stream from its own start), a
    state with 0 loads and goes on, and any other phase is refused naming ``phase`` and its
    value: a negative one, a positive one, a global state's pairs, a string."""
    s = MixtureSampler([9, 9], [1, 1], 2, 2, 0, layout="per_rank")
    it = iter(s)
    list(islice(it, 4))  # 2 steps
    state = s.state_dict()
    assert state["phase"] == 0
    again = MixtureSampler([9, 9], [1, 1], 2, 2, 0, layout="per_rank")
    again.load_state_dict(state)
    assert list(again) == list(it)
    refused = [
        (-1, ValueError, "phase should be 0 in a per_rank state (each rank's stream starts at its "
         "own position r·b), but got phase=-1"),
        (1, ValueError, "phase should be 0 in a per_rank state (each rank's stream starts at its "
         "own position r·b), but got phase=1"),
        ([[1, 2]], TypeError, "phase should be an integer, but got phase=[[1, 2]] of type list"),
        ("0", TypeError, "phase should be an integer, but got phase='0' of type str"),
    ]  # fmt: skip
    for phase, error, message in refused:
        fresh = MixtureSampler([9, 9], [1, 1], 2, 2, 0, layout="per_rank")
        with pytest.raises(error, match=f"^{re.escape(message)}$"):
            fresh.load_state_dict({**state, "phase": phase})


# --- bad input ---------------------------------------------------------------------------------


BAD_INPUT = [
    ([3, 3], [0, 0], ValueError, "weights should have a positive sum, but got weights=[0, 0]"),
    ([3, 3], [1, -1], ValueError, "weights[1] should be finite and >= 0, but got weights[1]=-1"),
    ([3, 3], [1, math.nan], ValueError, "weights[1] should be finite and >= 0, but got weights[1]=nan"),
    ([3, 3], [1, math.inf], ValueError, "weights[1] should be finite and >= 0, but got weights[1]=inf"),
    ([3, 3], [1, True], TypeError, "weights[1] should be a real number, but got weights[1]=True"),
    ([3, 3], [1], ValueError, "weights should hold one weight per source (2), but got weights=[1]"),
    ([3, 3], "11", TypeError, "weights should be a sequence of 2 numbers, but got weights='11'"),
    ([3, 3], 5, TypeError, "weights should be a sequence of 2 numbers, but got weights=5"),
    ([3, 0], [1, 0.5], ValueError, "weights[1]=0.5 should be 0 for a source of length 0: sizes[1]=0"),
    # floats only: the weights users compute, checked all at once, refused in the same words
    ([3, 3], [0.0, 0.0], ValueError, "weights should have a positive sum, but got weights=[0.0, 0.0]"),
    ([3, 3], [1.0, -1.0], ValueError, "weights[1] should be finite and >= 0, but got weights[1]=-1.0"),
    ([3, 3], [1.0, math.nan], ValueError, "weights[1] should be finite and >= 0, but got weights[1]=nan"),
    ([3, 3], [1.0, math.inf], ValueError, "weights[1] should be finite and >= 0, but got weights[1]=inf"),
    ([3, 3], [math.inf, -math.inf], ValueError,
     "weights[0] should be finite and >= 0, but got weights[0]=inf"),
    ([3, 0], [1.0, 0.5], ValueError, "weights[1]=0.5 should be 0 for a source of length 0: sizes[1]=0"),
    ([3, True], [1, 1], TypeError, "sizes[1] should be an integer, but got sizes[1]=True of type bool"),
    ([3, -1], [1, 1], ValueError, "sizes[1] should be >= 0, but got sizes[1]=-1"),
    ([], [], TypeError, "sizes should be a non-empty sequence of lengths, but got sizes=[]"),
    ("ab", [1], TypeError, "sizes should be a non-empty sequence of lengths, but got sizes='ab'"),
    ([3, 3], [(1, [1, 1])], ValueError,
     "weights[0][0] should be 0 (a schedule starts at 0), but got weights[0][0]=1"),
    ([3, 3], [(0, [1, 1]), (5, [1, 0]), (5, [0, 1])], ValueError,
     "weights[2][0] should be > 5 (in increasing order), but got weights[2][0]=5"),
    ([3, 3], [(0, [1, 1]), (4, [0, 0])], ValueError,
     "weights[1][1] should have a positive sum, but got weights[1][1]=[0, 0]"),
    ([3, 3], [(0, [1, 1]), [4]], TypeError,
     "weights[1] should be a (step, weights) pair, but got weights[1]=[4]"),
    ([3, 3], [(0, [1, 1]), (4, 5)], TypeError,
     "weights[1][1] should be a sequence of 2 numbers, but got weights[1][1]=5"),
    ([3, 3], [(0, [1, 1]), (-4, [1, 1])], ValueError,
     "weights[1][0] should be >= 0, but got weights[1][0]=-4"),
]  # fmt: skip


@pytest.mark.parametrize(("sizes", "weights", "error", "message"), BAD_INPUT)
def test_bad_input_is_refused_naming_the_argument_and_value(sizes, weights, error, message):
    with pytest.raises(error, match=f"^{re.escape(message)}$"):
        MixtureSampler(sizes, weights, 2, 1, 0)


def test_bad_arguments_of_the_methods_are_named():
    s = MixtureSampler([3, 3], [1, 1], 2, 1, 0)
    calls = [
        (lambda: MixtureSampler([3, 3], [1, 1], 0, 1, 0), "batch_size should be >= 1, but got batch_size=0"),
        (lambda: MixtureSampler([3, 3], [1, 1], 1, 1, 0, epoch_length=0),
         "epoch_length should be >= 1, but got epoch_length=0"),
        (lambda: s.when_read(2, 0), "source should be in the interval [0, 1], but got source=2"),
        (lambda: s.when_read(0, 3), "sample should be in the interval [0, 2], but got sample=3"),
        (lambda: s.when_read(0, 0, -1), "pass_ should be >= 0, but got pass_=-1"),
        (lambda: s.batch_at(-1), "step should be >= 0, but got step=-1"),
        (lambda: s.set_epoch(-1), "epoch should be >= 0, but got epoch=-1"),
        (lambda: s.state_dict(consumed=1), "consumed should be <= 0 (samples handed out): the "
         "latest iter() handed out 0, but got consumed=1"),
        (lambda: s.state_dict(consumed=-1), "consumed should be >= 0, but got consumed=-1"),
        (lambda: s.positions(-1), "step should be >= 0, but got step=-1"),
        (lambda: s.positions(0, rank=1), "rank should be in the interval [0, 0], but got rank=1"),
        (lambda: s.positions(0, rank=-1), "rank should be in the interval [0, 0], but got rank=-1"),
        # past int64: the last step is 2**62 - 1 (2 global positions a step), epoch_length
        # at most the steps that fit, and the last epoch whose positions fit (1 of 2**62)
        (lambda: s.positions(2**62), f"step should be <= {2**62 - 1}, the last step whose global "
         f"positions fit in int64 (< 2**63), but got step={2**62}"),
        (lambda: s.batch_at(2**64), f"step should be <= {2**62 - 1}, the last step whose global "
         f"positions fit in int64 (< 2**63), but got step={2**64}"),
        (lambda: MixtureSampler([3, 3], [1, 1], 3, 1, 0, epoch_length=2**63 - 1),
         f"epoch_length should be <= {2**63 - 2}, so that its steps' global positions "
         "(batch_size * num_replicas = 3 a step) fit in int64 (< 2**63), but got "
         f"epoch_length={2**63 - 1}"),
        (lambda: MixtureSampler([3, 3], [1, 1], 1, 1, 0, epoch_length=2**63),
         f"epoch_length should be < 2**63 (stored as int64), but got epoch_length={2**63}"),
        (lambda: MixtureSampler([3, 3], [1, 1], 2, 1, 0, epoch_length=2**62).set_epoch(2),
         "epoch should be <= 1, the last epoch whose global positions fit in int64 (< 2**63; "
         f"epoch_length={2**62}), but got epoch=2"),
    ]  # fmt: skip
    for call, message in calls:
        with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
            call()
    # at the edge: the last step's positions end at 2**63 - 1, and the last epoch is read
    assert s.positions(2**62 - 1).tolist() == [2**63 - 2, 2**63 - 1]
    assert len(s.batch_at(2**62 - 1)[0]) == 2
    last = MixtureSampler([3, 3], [1, 1], 2, 1, 0, epoch_length=2**62)
    last.set_epoch(1)
    assert len(list(islice(last, 4))) == 4 and len(last) == 2**62
    # the longest epoch that fits is built, and it is the only epoch: epoch 1 is refused
    longest = MixtureSampler([3, 3], [1, 1], 3, 1, 0, epoch_length=2**63 - 2)
    assert len(longest) == 2**63 - 2 and len(longest.batch_at(2**63 // 3 - 1)[0]) == 3
    with pytest.raises(ValueError, match=r"^epoch should be <= 0, the last epoch whose "):
        longest.set_epoch(1)


@given(world=elastic_world_sizes, b=mixture_batch_sizes,
       length=st.one_of(st.integers(1, 50), st.integers(1, 2**62)))  # fmt: skip
def test_the_last_epoch_whose_positions_fit_in_int64_is_set_and_the_next_refused(world, b, length):
    """Invariant: ``set_epoch`` takes the last epoch whose global positions all fit in int64
    (its steps end at ``stop·B <= 2**63``; the next epoch's would end past it) and refuses the
    next, naming the last; that epoch's last step answers ``batch_at``."""
    s = MixtureSampler([9, 9], [1, 1], b, world, 0, epoch_length=length)
    B, steps_end = world * b, lambda e: -(-((e + 1) * length) // B)  # an epoch's steps' stop
    last = (2**63 // B * B) // length - 1
    assert steps_end(last) * B <= 2**63 < steps_end(last + 1) * B
    s.set_epoch(last)
    assert len(s.batch_at(steps_end(last) - 1)[0]) == b
    with pytest.raises(ValueError, match=rf"^epoch should be <= {last}, the last epoch whose "):
        s.set_epoch(last + 1)


def test_after_an_elastic_resume_the_last_step_and_epoch_that_fit_count_from_its_origin():
    """Invariant: on a grid resumed 3 steps into epoch 1 (of 2**61 positions; at position
    2**61 + 6, step 2**60 + 3, 3 positions a step from there), the last step whose positions fit
    in int64 is the grid's first step + ``(2**63 - origin) // 3 - 1`` (its last position below
    2**63) and the last epoch is the last whose steps end at or below 2**63: the next of each is
    refused, naming them."""
    L = 2**61
    old = MixtureSampler([9, 9], [1, 1], 2, 1, 0, epoch_length=L)
    old.set_epoch(1)
    list(islice(iter(old), 6))  # 3 steps of 2
    new = MixtureSampler([9, 9], [1, 1], 3, 1, 0, epoch_length=L)
    new.load_state_dict(old.state_dict())
    origin, step0 = L + 6, L // 2 + 3
    last = step0 + (2**63 - origin) // 3 - 1
    assert int(new.positions(last)[-1]) <= 2**63 - 1
    with pytest.raises(ValueError, match=rf"^step should be <= {last}, the last step whose "):
        new.positions(last + 1)
    # each epoch's steps' end on this grid: the first step boundary at or past (e + 1)·L
    ends = [origin + -(-((e + 1) * L - origin) // 3) * 3 for e in range(1, 6)]
    epoch = max(e for e, end in enumerate(ends, 1) if end <= 2**63)
    new.set_epoch(epoch)
    with pytest.raises(ValueError, match=rf"^epoch should be <= {epoch}, the last epoch whose "):
        new.set_epoch(epoch + 1)


def test_positions_default_to_this_rank_and_start_at_the_first_step_of_the_grid():
    """Invariant: positions(step) is this sampler's rank's; the last rank is a rank; after an
    elastic load, the grid starts at the saved step: an earlier step is refused, naming it."""
    s = MixtureSampler([6, 4], [1, 1], 2, 2, 1, layout="per_rank")
    assert s.positions(1).tolist() == s.positions(1, rank=1).tolist() == [6, 7]
    assert s.positions(1, rank=0).tolist() == [4, 5]
    s = MixtureSampler([6, 4], [1, 1], 2, 2, 1)  # global: rank r reads micro-batch (r + s) mod W
    assert s.positions(1).tolist() == s.positions(1, rank=1).tolist() == [4, 5]
    assert s.positions(1, rank=0).tolist() == [6, 7]
    assert s.positions(2).tolist() == [10, 11]
    first = MixtureSampler([6, 4], [1, 1], 2, 2, 0)
    it = iter(first)
    [next(it) for _ in range(4)]  # two steps of rank 0: eight positions of the world
    resumed = MixtureSampler([6, 4], [1, 1], 2, 1, 0)
    resumed.load_state_dict(roundtrip(first.state_dict()))
    assert resumed.positions(2).tolist() == [8, 9]
    with pytest.raises(ValueError, match=r"^step should be >= 2, but got step=1$"):
        resumed.positions(1)


def test_consumed_may_be_everything_the_latest_iter_handed_out():
    """Invariant: state_dict(consumed=n) after n samples is the state with nothing unread."""
    s = MixtureSampler([6, 4], [1, 1], 2, 2, 1)
    n = len(list(s))
    assert s.state_dict(consumed=n) == s.state_dict()


def test_the_first_indices_read_fast_are_batch_ats_for_sources_one_past_a_power_of_two():
    """Invariant: the first micro-batch, read down one tree path an index (the quick start), is
    batch_at's, also where the cipher needs one more bit than size - 1 has below the top (sources
    of 2**k + 1 samples), in a later epoch too."""
    for sizes in ([65], [129, 3], [257, 65]):
        for seed, epoch in product(range(3), (0, 1)):
            s = MixtureSampler(sizes, [1] * len(sizes), 8, 2, 1, seed=seed)
            s.set_epoch(epoch)
            step = s._steps(epoch).start
            assert list(islice(iter(s), 8)) == s.batch_at(step)[1]


def test_every_index_is_a_python_int_as_torchs_samplers_yield():
    """Invariant: iteration yields ints (not tensors or numpy scalars), in the quick start and in
    the blocks after it, as torch's samplers do: a dataset may index with them as it likes."""
    s = MixtureSampler([300, 200], [1, 1], 4, 2, 0)
    assert {type(i) for i in s} == {int}


def test_weights_as_a_tensor_an_array_or_fractions_give_the_same_mixture():
    """Invariant: a float is read as the decimal it prints (0.1 is 1/10, not its binary value);
    a Fraction is exact; a schedule may be a tuple of tuples; the default epoch is sum(sizes)."""
    import torch

    expected = MixtureSampler([5, 5], [0.25, 0.75], 2, 1, 0).batch_at(3)
    for weights in (torch.tensor([0.25, 0.75]), np.array([1, 3]), [Fraction(1, 4), Fraction(3, 4)]):
        assert MixtureSampler([5, 5], weights, 2, 1, 0).batch_at(3) == expected
    scalars = [np.float64(0.25), np.float64(0.75)]  # Reals but not floats: read one by one
    assert MixtureSampler([5, 5], scalars, 2, 1, 0).batch_at(3) == expected
    # a float32 array read one weight at a time (a source of length 0): as float32 prints them
    w32 = np.array([0.3, 0.0, 0.7], dtype=np.float32)
    assert MixtureSampler([5, 0, 5], w32, 2, 1, 0).schedule == [
        (0, [Fraction(3, 10), Fraction(0), Fraction(7, 10)])
    ]
    digits = [0.123456789012345, 0.3]  # float64's decimals, which float32 would cut
    assert MixtureSampler([5, 5], torch.tensor(digits, dtype=torch.float64), 2, 1, 0).schedule == (
        MixtureSampler([5, 5], digits, 2, 1, 0).schedule
    )
    thirds = MixtureSampler([9, 9], [Fraction(1, 3), Fraction(2, 3)], 1, 1, 0)
    assert thirds.bound() == MixtureSampler([9, 9], [1, 2], 1, 1, 0).bound() == Fraction(1, 2)
    assert stream(thirds, 30) == stream(MixtureSampler([9, 9], [1, 2], 1, 1, 0), 30)
    assert MixtureSampler([9, 9], [Fraction(1, 3), Fraction(1, 2)], 1, 1, 0).bound() == (
        MixtureSampler([9, 9], [2, 3], 1, 1, 0).bound()
    )
    sixths = [Fraction(1, 3), Fraction(1, 2), Fraction(1, 6)]  # not the floats 0.333..., 0.1666...
    assert MixtureSampler([9] * 3, sixths, 1, 1, 0).bound() == (
        MixtureSampler([9] * 3, [2, 3, 1], 1, 1, 0).bound()
    )
    tenths = MixtureSampler([9, 9, 9], [0.1, 0.2, 0.7], 1, 1, 0)
    assert stream(tenths, 40) == stream(MixtureSampler([9, 9, 9], [1, 2, 7], 1, 1, 0), 40)
    as_tuples = MixtureSampler([9, 9], ((0, (1, 0)), (3, (1, 1))), 1, 1, 0)
    assert stream(as_tuples, 20) == stream(
        MixtureSampler([9, 9], [(0, [1, 0]), (3, [1, 1])], 1, 1, 0), 20
    )
    assert len(MixtureSampler([6, 4], [1, 1], 2, 2, 0)) == 6  # 10 positions: steps at 0, 4, 8
    with pytest.raises(
        TypeError, match=r"^shuffle should be a boolean value, but got shuffle='no'$"
    ):
        MixtureSampler([9, 9], [1, 1], 1, 1, 0, shuffle="no")
    with pytest.raises(
        ValueError, match=r"^seed should be in the interval \[-9223372036854775808, "
    ):
        MixtureSampler([9, 9], [1, 1], 1, 1, 0, seed=2**64)


def test_positions_past_int64_products_are_routed_with_exact_python_ints():
    """Invariant: weights of 16 digits (1/3 as a float) at positions near 10**12: the products
    pass 2**63, so the routing runs on Python ints, and agrees with the inverse."""
    s = MixtureSampler([10**9] * 3, [1 / 3, 1 / 3, 1 / 3], 4, 2, 1)
    step = 10**11
    batches = s.batch_at(step)
    index = batches[1][2]
    k, i = source_of(s, index)
    position = step * 8 + 6
    j = s._sources(np.array([position], dtype=np.int64))[1][0]
    assert s.when_read(k, i, int(j) // 10**9) == Read(position, step, 1, 2)


def test_epochs_are_consecutive_stretches_of_one_stream():
    """Invariant: epoch e reads the steps that start in [e*L, (e+1)*L): a rank's epochs laid end
    to end are its micro-batches of every step, and each epoch's len() is its steps."""
    s = MixtureSampler([7, 5], [2, 1], 3, 2, 1, epoch_length=10)  # steps of 6: 0, 6 | 12, 18 | 24
    epochs = []
    for e in range(4):
        s.set_epoch(e)
        epochs.append(list(s))
        assert len(s) == len(epochs[-1])
    assert [len(x) // 3 for x in epochs] == [2, 2, 1, 2]  # ... | 30, 36
    assert [i for x in epochs for i in x] == [i for t in range(7) for i in s.batch_at(t)[1]]


def test_positions_near_2_to_the_60_are_exact_through_batch_at_and_iteration():
    """Invariant: past 2**53 nothing goes through a float: with weights 1:1 tree position u is
    source u % 2, c_0(n) = ⌈n/2⌉, c_1(n) = ⌊n/2⌋; rank r at step t reads u = (t + r)b + i,
    item C_k(t) + c_k(u) - c_k(tb), C_k(t) = Σ_{x<W} c_k((t+x)b) - c_k(xb) (no shuffle)."""
    size, b, W = 2**61, 3, 2
    s = PerRank([size, size], [1, 1], b, W, 1, shuffle=False, epoch_length=2**60)

    def c(k: int, n: int) -> int:
        return (n + 1) // 2 if k == 0 else n // 2

    def index(t: int, r: int, i: int) -> int:
        u = (t + r) * b + i
        k = u % 2
        before = sum(c(k, (t + x) * b) - c(k, x * b) for x in range(W))
        return k * size + before + c(k, u) - c(k, t * b)

    step = 2**60 // (b * W)
    assert s.batch_at(step) == [[index(step, r, i) for i in range(b)] for r in range(W)]
    s.set_epoch(1)  # starts at step ceil(2**60 / 6)
    first = -(-(2**60) // (b * W))
    mine = list(islice(iter(s), 10 * b))
    assert mine == [index(t, 1, i) for t in range(first, first + 10) for i in range(b)]


def test_when_read_defaults_to_the_first_pass_and_counts_steps_on_the_resumed_grid():
    """Invariant: when_read(k, i) is pass 0; after an elastic resume at step 3 (position 12) the
    training steps go on from 3, each of the new grid's global batch; a step or a read before the
    new grid is refused, naming the first step the sampler can answer for."""
    s = MixtureSampler([5, 5], [1, 1], 1, 1, 0, shuffle=False)
    assert s.when_read(1, 2) == s.when_read(1, 2, 0) == Read(5, 5, 0, 0)
    old = MixtureSampler([50, 50], [1, 3], 2, 2, 0, epoch_length=40)
    list(islice(iter(old), 6))  # 3 steps of 4: position 12 next
    new = MixtureSampler([50, 50], [1, 3], 3, 1, 0, epoch_length=40)
    new.load_state_dict(old.state_dict())
    ks, js = new.sources([12, 13, 14, 15, 16, 17])
    for p, k, j in zip(range(12, 18), ks.tolist(), js.tolist()):
        i = index_unshuffle_of(new, k, j)
        assert new.when_read(k, i, j // 50) == Read(p, 3 + (p - 12) // 3, 0, (p - 12) % 3)
    assert new.batch_at(4)[0] == [stream_index(new, p) for p in (15, 16, 17)]
    message = ("step should be >= 3, the first step of this grid (num_replicas=1, batch_size=3); "
               "the earlier ones were read on another grid, but got step=2")  # fmt: skip
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        new.batch_at(2)
    k, j = (int(x[0]) for x in old.sources([0]))
    i = index_unshuffle_of(new, k, j)
    message = (
        f"sample {i} of source {k} in its pass 0 was read before step 3 (position 12), the "
        "first of this grid: ask a sampler of the grid it was read on"
    )
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        new.when_read(k, i)
    with pytest.raises(ValueError, match=r"^positions should be >= 12, the first of this grid, "):
        new.sources([11])


def stream_index(s: MixtureSampler, position: int) -> int:
    """The index a mixture reads at a global position, from its routing and its passes."""
    return int(s._indices(*s._sources(np.array([position], dtype=np.int64)))[0])


def index_unshuffle_of(s: MixtureSampler, k: int, j: int) -> int:
    """The sample of source k's j-th item overall."""
    size = s.sizes[k]
    return index_shuffle([j % size], size, epoch_key(epoch_key(s.seed, k), j // size)).item()


def test_a_state_without_a_field_is_refused_naming_it():
    state = MixtureSampler([9, 9], [1, 1], 2, 1, 0).state_dict()
    del state["origin"]
    with pytest.raises(KeyError, match="state has no 'origin': it is not a MixtureSampler"):
        MixtureSampler([9, 9], [1, 1], 2, 1, 0).load_state_dict(state)


@given(schedule=mixture_schedules(gap=6), worlds=st.lists(st.tuples(elastic_world_sizes,
       mixture_batch_sizes, st.integers(0, 3)), min_size=2, max_size=3))  # fmt: skip
@pytest.mark.parametrize("layout", LAYOUTS)
def test_resumes_chained_over_several_grids_in_a_later_epoch_read_every_position_once(
    layout, schedule, worlds
):
    """Invariant: in epoch 1, runs on grids (W, b) one after another, each loading the last
    one's state after some steps, read the reference's reads of those grids (a grid goes on
    with its trees when the state comes from its own grid), and the epoch ends with the first
    step that starts at or after its end."""
    M = partial(MixtureSampler, layout=layout)
    sizes, weights = schedule
    length = 40
    laid, state, grids, last_step = [], None, [], 0
    for k, (world, b, steps) in enumerate(worlds):
        ranks = [M(sizes, weights, b, world, r, shuffle=False, epoch_length=length)
                 for r in range(world)]  # fmt: skip
        for s in ranks:
            s.set_epoch(1)
            if state is not None:
                s.load_state_dict(state)
        left = len(ranks[0]) - ranks[0]._before  # len() counts the epoch's earlier grids too
        steps = left // b if k == len(worlds) - 1 else min(steps, left // b)
        reads = [list(islice(iter(s), steps * b)) for s in ranks]
        laid, steps = laid + laid_out(reads, b), len(reads[0]) // b  # (a resumed grid: fewer)
        state = roundtrip(ranks[0].state_dict())
        last_step = world * b if steps else last_step
        if grids and grids[-1][:2] == (world, b):  # its own grid's state: the same grid
            grids[-1] = (world, b, grids[-1][2] + steps)
        else:
            grids.append((world, b, steps))
    first = -(-length // (worlds[0][0] * worlds[0][1]))  # epoch 1's first step
    grids[0] = (*grids[0][:2], first + grids[0][2])
    whole = decoded(ranks[0], reference_reads(sizes, weights, grids, layout))
    skip = first * worlds[0][0] * worlds[0][1]
    assert laid == whole[skip:]
    assert skip + len(laid) >= 2 * length > skip + len(laid) - last_step


def test_a_long_epoch_is_read_whole_in_growing_blocks():
    """Invariant: past the largest block (2**14 indices) the blocks stay whole steps: one source
    without shuffle yields the positions themselves, 0, 1, 2, ... to the epoch's end."""
    s = MixtureSampler([10**9], [1], 3, 1, 0, shuffle=False, epoch_length=3 * 20000)
    assert list(s) == list(range(60000))


@pytest.mark.parametrize("epoch", [0, 1])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_many_sources_over_many_growing_blocks_iterate_as_batch_at_says(layout, epoch):
    """Invariant: a block's item numbers come from each source's counts in a window of the tree
    searched by source; over blocks growing from one step to 64, 40 sources of uneven weight,
    a schedule change (the blocks start again there), and an epoch that starts past step 0 (its
    counts before it computed), every rank's iteration is batch_at's micro-batches of its
    steps, laid end to end."""
    M = partial(MixtureSampler, layout=layout)
    rng = random.Random(5)
    sizes = [rng.randint(1, 400) for _ in range(40)]
    weights = [rng.choice([0, 1e-3, 0.5, 1, 3, 10]) for _ in range(40)]
    schedule = [(0, weights), (150, weights[::-1])]
    world, b, steps = 16, 3, 200  # steps an epoch; blocks of 1, 2, 4, ..., 64, then 23 to 150

    def make(rank: int) -> MixtureSampler:
        return M(sizes, schedule, b, world, rank, seed=3, epoch_length=world * b * steps)

    batches = [make(0).batch_at(t) for t in range(epoch * steps, (epoch + 1) * steps)]
    for r in (0, 7, 15):
        s = make(r)
        s.set_epoch(epoch)
        assert list(s) == [i for batch in batches for i in batch[r]]


@pytest.mark.parametrize("skip", [0, 3, 16, 20, 39, 40, 41])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_micro_batch_longer_than_the_first_few_reads_its_head_then_arrays_seamlessly(
    layout, skip
):
    """Invariant: the first 16 indices come from Python ints, the rest of the step and the
    steps after from arrays: with a micro-batch of 40, resumed at any point of it, iteration
    is batch_at's micro-batches laid end to end, nothing repeated or skipped at the seam."""
    M = partial(MixtureSampler, layout=layout)
    make = lambda: M([300, 90, 30], [5, 3, 2], 40, 3, 1, seed=7)  # noqa: E731
    whole = [i for t in range(len(make()) // 40) for i in make().batch_at(t)[1]]
    first = make()
    list(islice(iter(first), skip))
    resumed = make()
    resumed.load_state_dict(first.state_dict())
    assert list(resumed) == whole[skip:]
    assert list(make()) == whole


# --- changing the mix on resume ------------------------------------------------------------------


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_state_saved_at_step_20_loads_into_a_schedule_that_changes_at_step_30(layout):
    """Example (the request Megatron users make): saved at step 20 with weights w, loaded into
    [(0, w), (30, w2)] on the same grid and on another: each continues as that schedule's
    uninterrupted run on those grids."""
    M = partial(MixtureSampler, layout=layout)
    sizes, w, w2 = [40, 30, 20], [0.5, 0.3, 0.2], [0.2, 0.3, 0.5]
    plan = [(0, w), (30, w2)]
    for W2, b2 in [(2, 3), (3, 2)]:
        old = [M(sizes, w, 3, 2, r, shuffle=False, epoch_length=10**6)
               for r in range(2)]  # fmt: skip
        reads = [list(islice(iter(s), 20 * 3)) for s in old]
        new = [M(sizes, plan, b2, W2, r, shuffle=False, epoch_length=10**6)
               for r in range(W2)]  # fmt: skip
        for s in new:
            s.load_state_dict(roundtrip(old[0].state_dict()))
        more = [list(islice(iter(s), 20 * b2)) for s in new]
        grids = [(2, 3, 40)] if (W2, b2) == (2, 3) else [(2, 3, 20), (W2, b2, 20)]
        whole = decoded(new[0], reference_reads(sizes, plan, grids, layout))
        assert laid_out(reads, 3) + laid_out(more, b2) == whole
        if (W2, b2) == (2, 3):  # the same grid: the schedule's own run, no resume at all
            fresh = [M(sizes, plan, 3, 2, r, shuffle=False, epoch_length=10**6)
                     for r in range(2)]  # fmt: skip
            assert laid_out([list(islice(iter(s), 40 * 3)) for s in fresh], 3) == whole


@given(schedule=mixture_schedules(gap=4), change=st.integers(0, 3), weights=st.lists(
       st.integers(0, 5), min_size=4, max_size=4), w1=elastic_world_sizes, w2=elastic_world_sizes,
       b1=mixture_batch_sizes, b2=mixture_batch_sizes, steps=st.integers(0, 6), extra=st.integers(0, 4))  # fmt: skip
@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_schedule_that_agrees_with_the_past_continues_as_its_own_uninterrupted_run(
    layout, schedule, change, weights, w1, w2, b1, b2, steps, extra
):
    """Invariant: saved after some steps (and, on the same grid, part of a step) under one
    schedule, loaded into another that agrees with it before the step reached and changes at it
    or later: the reads are the reference's for the new schedule on those grids, each source's
    items numbered on (every pass intact); one that changes before it is refused, naming the
    step of the change and the step reached."""
    M = partial(MixtureSampler, layout=layout)
    sizes, plan = schedule
    new_weights = weights[: len(sizes)] if any(weights[: len(sizes)]) else [1] * len(sizes)
    old = [M(sizes, plan, b1, w1, r, shuffle=False, epoch_length=10**6)
           for r in range(w1)]  # fmt: skip
    extra = extra % b1 if (w1, b1) == (w2, b2) else 0  # mid-step: the same grid only
    reads = [list(islice(iter(s), steps * b1 + extra)) for s in old]
    state = roundtrip(old[0].state_dict())
    reached = steps + (extra > 0)  # a step begun is read
    at = reached + change
    later = [(step, w) for step, w in plan if step < at] + [(at, new_weights)]
    new = [M(sizes, later, b2, w2, r, shuffle=False, epoch_length=10**6)
           for r in range(w2)]  # fmt: skip
    for s in new:
        s.load_state_dict(state)
    more = [list(islice(iter(s), 6 * b2 - extra)) for s in new]
    for r in range(w2 if extra else 0):  # mid-step: each rank ends its micro-batch, goes on
        reads[r], more[r] = reads[r] + more[r][: (b1 - extra) % b1], more[r][(b1 - extra) % b1 :]
    same = (w1, b1) == (w2, b2)
    grids = [(w1, b1, reached + 6 - (extra > 0))] if same else [(w1, b1, steps), (w2, b2, 6)]
    got = laid_out(reads, b1) + laid_out(more, b2)
    assert got == decoded(new[0], reference_reads(sizes, later, grids, layout))

    def shares(w: list) -> list[Fraction]:
        units = M(sizes, w, 1, 1, 0).units[0]
        return [Fraction(u, sum(units)) for u in units]

    x = reached - 1  # a change at the last step read rewrites it
    if reached and shares([w for step, w in plan if step <= x][-1]) != shares(new_weights):
        bad = [(step, w) for step, w in plan if step < x] + [(x, new_weights)]
        with pytest.raises(
            ValueError,
            match=(
                f"through step {reached - 1}, inside which this state was saved"
                if extra
                else f"before step {reached}, where this state was saved"
            )
            + f", but from step {x} it read shares ",
        ):
            M(sizes, bad, b2, w2, 0, shuffle=False,
                           epoch_length=10**6).load_state_dict(state)  # fmt: skip


def test_a_change_before_the_saved_step_is_refused_naming_both_steps():
    """Example: saved at step 10; a change at step 7 rewrites what steps 7 to 9 read; a change
    at step 10 is the future. A step begun (mid micro-batch) is read: a change at it is refused
    too."""
    s = MixtureSampler([50, 50], [1, 1], 2, 2, 0)
    it = iter(s)
    list(islice(it, 20))  # 10 steps of a micro-batch of 2
    state = s.state_dict()
    MixtureSampler([50, 50], [(0, [1, 1]), (10, [3, 1])], 2, 2, 0).load_state_dict(state)
    message = ("weights should agree with the mix read before step 10, where this state was "
               "saved, but from step 7 it read shares 0.5, 0.5 and these weights give 0.75, "
               "0.25; change the mix at step 10 or later")  # fmt: skip
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        MixtureSampler([50, 50], [(0, [1, 1]), (7, [3, 1])], 2, 2, 0).load_state_dict(state)
    message = ("weights should agree with the mix read before step 10, where this state was "
               "saved, but from step 4 it read shares 0.5, 0.5 and these weights give 0.5, 0.5 "
               "(a change of the mix there); change the mix at step 10 or later")  # fmt: skip
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        MixtureSampler([50, 50], [(0, [1, 1]), (4, [1, 1])], 2, 2, 0).load_state_dict(state)
    next(it)  # step 10 begun
    with pytest.raises(
        ValueError,
        match=re.escape(
            "through step 10, inside which this state was saved, but from step 10 it read "
            "shares 0.5, 0.5 and these weights give 0.75, 0.25"
        ),
    ):
        MixtureSampler([50, 50], [(0, [1, 1]), (10, [3, 1])], 2, 2, 0).load_state_dict(
            s.state_dict()
        )


def test_weights_as_a_float32_tensor_are_the_mix_they_print_as_or_refused_in_words():
    """Invariant: a float32 tensor of 0.5, 0.3, 0.2 is read as the decimals it prints, the mix
    of the list [0.5, 0.3, 0.2]: a state of one loads into the other and goes on alike. Weights
    computed in float32 (n / total) differ from the float64 list past 2**-31: refused, the shares
    in words."""
    import torch

    sizes = [40, 30, 20]
    listed = MixtureSampler(sizes, [0.5, 0.3, 0.2], 2, 2, 0)
    list(islice(iter(listed), 8))
    tensor = MixtureSampler(sizes, torch.tensor([0.5, 0.3, 0.2]), 2, 2, 0)
    tensor.load_state_dict(listed.state_dict())
    assert tensor.units == listed.units and list(tensor) == list(listed)[8:]
    assert MixtureSampler(sizes, torch.tensor([0.5, 0.3, 0.2], dtype=torch.bfloat16), 1, 1, 0)
    computed = [n / sum(sizes) for n in sizes]
    listed = MixtureSampler(sizes, computed, 2, 2, 0)
    list(islice(iter(listed), 8))
    with pytest.raises(
        ValueError,
        match=r"^weights should agree with the mix read before step 4"
        r", where this state was saved, but from step 0 it read shares "
        r"0\.4444444444, 0\.3333333333, 0\.2222222222 and these weights give ",
    ):
        MixtureSampler(sizes, torch.tensor(computed), 2, 2, 0).load_state_dict(listed.state_dict())


def test_a_weight_of_a_float_subclass_is_the_decimal_it_prints_as_a_float():
    """Invariant: a weight whose type subclasses ``float`` (not a numpy scalar) is read as the
    float it holds, the decimal its repr prints: the same mix as the plain floats, never its
    binary fraction and never an error."""

    class Share(float):
        pass

    plain = MixtureSampler([5, 5, 0], [0.3, 0.7, 0.0], 2, 1, 0)
    shares = MixtureSampler([5, 5, 0], [Share(0.3), Share(0.7), 0.0], 2, 1, 0)
    assert shares.schedule == plain.schedule == [(0, [Fraction(3, 10), Fraction(7, 10), 0])]
    assert list(shares) == list(plain)


def test_weights_one_by_one_as_tensors_or_numpy_scalars_are_the_numbers_they_hold():
    """Invariant: a list of weights given one by one (0-d tensors of any dtype, bfloat16 too,
    one-element arrays, numpy scalars) is the mix of the numbers they hold, each float the
    decimal its dtype prints; a Python float is its own repr; a numpy bool or a tensor of two
    elements is refused by name."""
    import torch

    from distsampling.mixing.weights import _scalars

    got, texts = _scalars("weights", [torch.tensor(0.5, dtype=torch.bfloat16),
                                      torch.tensor(0.3), np.array([2]), np.float32(0.2),
                                      np.int64(3), 0.1, 7, torch.tensor(4)])  # fmt: skip
    assert got == [0.5, float(np.float32(0.3)), 2, float(np.float32(0.2)), 3, 0.1, 7, 4]
    assert texts == ["0.5", "0.3", None, "0.2", None, "0.1", None, None]
    assert [type(x) for x in got] == [float, float, int, float, int, float, int, int]
    flags, _ = _scalars("weights", [np.bool_(True), True])
    assert flags == [True, True] and all(type(x) is bool for x in flags)
    listed = MixtureSampler([9] * 3, [0.5, 0.3, 0.2], 1, 1, 0)
    one_by_one = MixtureSampler(
        [9] * 3, [torch.tensor(0.5, dtype=torch.bfloat16), torch.tensor(0.3), np.float32(0.2)],
        1, 1, 0,
    )  # fmt: skip
    assert one_by_one.units == listed.units
    with pytest.raises(TypeError, match=r"^weights\[1\] should be a real number, but got "
                       r"weights\[1\]=True$"):  # fmt: skip
        MixtureSampler([9, 9], [1, np.bool_(True)], 1, 1, 0)
    with pytest.raises(TypeError, match=r"^weights\[0\] should be a real number \(a tensor of "
                       r"one element\), but got weights\[0\]=tensor\(\[1\., 2\.\]\)$"):  # fmt: skip
        MixtureSampler([9, 9], [torch.tensor([1.0, 2.0]), 1], 1, 1, 0)


def test_a_mixture_is_one_ranks_share_that_lightnings_check_leaves_alone():
    """Invariant: a MixtureSampler is a torch ``DistributedSampler`` (one rank's share), so
    Lightning's own check in a distributed Trainer with its default setting does not wrap it,
    and Lightning's epoch call reaches it: epoch 1's indices after the call."""
    from types import SimpleNamespace

    import torch.utils.data
    from lightning_fabric.utilities.data import _set_sampler_epoch
    from pytorch_lightning.trainer.connectors.data_connector import _DataConnector

    sampler = MixtureSampler([5, 5, 3], [0.5, 0.3, 0.2], 2, num_replicas=2, rank=1, seed=5)
    assert isinstance(sampler, torch.utils.data.DistributedSampler)
    loader = torch.utils.data.DataLoader(range(13), batch_size=2, sampler=sampler)
    settings = SimpleNamespace(use_distributed_sampler=True, is_distributed=True)
    connector = _DataConnector(SimpleNamespace(_accelerator_connector=settings))
    assert not connector._requires_distributed_sampler(loader)
    _set_sampler_epoch(loader, 1)
    again = MixtureSampler([5, 5, 3], [0.5, 0.3, 0.2], 2, num_replicas=2, rank=1, seed=5)
    again.set_epoch(1)
    assert (sampler.epoch, list(sampler)) == (1, list(again))


# --- small things -------------------------------------------------------------------------------


def test_an_epoch_shorter_than_a_global_batch_holds_a_step_or_none():
    """Invariant (documented): an epoch is the steps that start in [e*L, (e+1)*L); with L = 3
    below a global batch of 7 (steps at 0, 7, 14, 21), epochs 1, 3, 5, 6 hold no step (len() 0,
    nothing yielded), and the epochs laid end to end are still every step once."""
    s = MixtureSampler([3], [1], 1, 7, 0, shuffle=False)
    got = []
    for epoch in range(8):
        s.set_epoch(epoch)
        got.append(list(s))
        assert len(s) == len(got[-1])
    assert [len(x) for x in got] == [1, 0, 1, 0, 1, 0, 0, 1]
    assert [i for x in got for i in x] == [s.batch_at(t)[0][0] for t in range(4)]


def test_sizes_as_a_numpy_array_or_a_tensor_and_the_repr():
    """Invariant: sizes may be a numpy array or a tensor, as weights may; the repr names every
    argument, the weights as the decimals they are."""
    import torch

    expected = MixtureSampler([5, 7], [1, 2], 2, 2, 1).batch_at(3)
    for sizes in (np.array([5, 7]), torch.tensor([5, 7])):
        assert MixtureSampler(sizes, [1, 2], 2, 2, 1).batch_at(3) == expected
    assert repr(MixtureSampler([5, 7], [0.3, 0.7], 2, 2, 1)) == (
        "MixtureSampler(sizes=[5, 7], weights=[0.3, 0.7], batch_size=2, num_replicas=2, rank=1, "
        "seed=0, shuffle=True, epoch_length=12)"
    )
    assert repr(MixtureSampler([5, 7], [(0, [1, 0]), (4, [1, 1])], 2, 2, 1)).startswith(
        "MixtureSampler(sizes=[5, 7], weights=[(0, [1.0, 0.0]), (4, [1.0, 1.0])], batch_size=2"
    )


def test_the_batch_sampler_yields_each_steps_micro_batch_and_resumes():
    """Invariant: MixtureBatchSampler yields batch_at's micro-batch of each step of the epoch;
    a DataLoader(batch_sampler=) of it gets each step whole (batch_size has no say); its
    state_dict(consumed=n) after the n samples of some batches (the sampler's unit) resumes at
    the next step, mid-step too; a count inside a batch is refused, naming the batch ends."""
    from torch.utils.data import DataLoader

    from distsampling.mixing.sampler import MixtureBatchSampler

    make = lambda: MixtureBatchSampler(MixtureSampler([40, 12], [2, 1], 4, 2, 1))  # noqa: E731
    whole = list(make())
    assert whole == [make().sampler.batch_at(t)[1] for t in range(len(whole))] and len(make()) == 7
    loader = DataLoader(range(52), batch_sampler=make(), num_workers=2)
    assert [b.tolist() for b in loader] == whole
    first = make()
    it = iter(first)
    head = [next(it) for _ in range(3)]
    resumed = make()
    resumed.load_state_dict(roundtrip(first.state_dict(consumed=8)))  # 2 batches of 4
    assert head[:2] + list(resumed) == whole
    message = "consumed should be the samples of whole batches (a batch is a step: 4 or 8 here)"
    with pytest.raises(ValueError, match=f"^{re.escape(message)}, but got consumed=6$"):
        first.state_dict(consumed=6)
    sampler = MixtureSampler([40, 12], [2, 1], 4, 2, 1)
    list(islice(iter(sampler), 6))  # a step and a half
    mid = MixtureBatchSampler(MixtureSampler([40, 12], [2, 1], 4, 2, 1))
    mid.load_state_dict(sampler.state_dict())
    assert list(mid) == [whole[1][2:], *whole[2:]]
    with pytest.raises(ValueError, match=r"^consumed should be <= 12 \(samples handed out\)"):
        first.state_dict(consumed=13)
    with pytest.raises(TypeError, match=r"^sampler should be a MixtureSampler, but got"):
        MixtureBatchSampler(range(3))


def test_a_state_saved_mid_step_counts_that_step_as_read():
    """Invariant: a state saved inside step 2 has read step 2: a schedule changing there is
    refused, naming step 3; one changing at step 3 is taken."""
    s = MixtureSampler([9, 9], [1, 1], 2, 1, 0)
    list(islice(iter(s), 5))  # steps 0 and 1, and one sample of step 2
    state = s.state_dict()
    message = ("weights should agree with the mix read through step 2, inside which this state "
               "was saved, but from step 2 it read shares 0.5, 0.5 and these weights give 0.25, "
               "0.75; change the mix at step 3 or later")  # fmt: skip
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        MixtureSampler([9, 9], [(0, [1, 1]), (2, [1, 3])], 2, 1, 0).load_state_dict(state)
    MixtureSampler([9, 9], [(0, [1, 1]), (3, [1, 3])], 2, 1, 0).load_state_dict(state)


def test_a_foreign_or_old_state_is_refused_by_its_kind_or_version_before_any_field():
    """Invariant: what is not a dict, another sampler's state, or an older format is refused in
    words, before a missing MixtureSampler field is named."""
    s = MixtureSampler([9, 9], [1, 1], 2, 1, 0)
    refused = [
        ([1], TypeError, "state should be a dict from state_dict(), but got state=[1] of type list"),
        ({"kind": "ResumableDistributedSampler", "version": 1}, ValueError, "state comes from "
         "another sampler: kind was 'ResumableDistributedSampler' when saved, but this is a "
         "MixtureSampler"),
        ({"kind": "MixtureSampler", "version": 2}, ValueError, "state has format version=2, but "
         "this MixtureSampler reads version=5"),
    ]  # fmt: skip
    for state, error, message in refused:
        with pytest.raises(error, match=f"^{re.escape(message)}$"):
            s.load_state_dict(state)


def test_a_doctored_past_is_refused_in_words():
    """Invariant: a state whose past holds no mix where the schedule has one, or a negative or
    malformed step, is refused in words; sources() of a 2-d array reads it flat; the batch
    sampler's consumed is named with what the latest iter() handed out."""
    s = MixtureSampler([9, 9], [1, 1], 2, 1, 0)
    list(islice(iter(s), 4))
    state = s.state_dict()
    message = ("weights should agree with the mix read before step 2, where this state was "
               "saved, but from step 0 it read shares none and these weights give 0.5, 0.5; "
               "change the mix at step 2 or later")  # fmt: skip
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        MixtureSampler([9, 9], [1, 1], 2, 1, 0).load_state_dict({**state, "past": []})
    for past in ([[-1, ["1/2", "1/2"]]], [[0, ["x"]]], [[0, ["1/0"]]]):
        with pytest.raises(ValueError, match=r"^past should be the \[step, shares\] of a "):
            MixtureSampler([9, 9], [1, 1], 2, 1, 0).load_state_dict({**state, "past": past})
    # a state saved before anything was read has no past: one that claims a mix is refused
    fresh = MixtureSampler([9, 9], [1, 1], 2, 1, 0).state_dict()
    message = ("weights should agree with the mix read before step 0, where this state was "
               "saved, but from step 0 it read shares 0.5, 0.5 and these weights give none; "
               "change the mix at step 0 or later")  # fmt: skip
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        MixtureSampler([9, 9], [1, 1], 2, 1, 0).load_state_dict(
            {**fresh, "past": [[0, ["1/2", "1/2"]]]}
        )
    flat = [a.tolist() for a in s.sources(np.arange(4).reshape(2, 2))]
    assert flat == [a.tolist() for a in s.sources(range(4))]
    from distsampling.mixing.sampler import MixtureBatchSampler

    batches = MixtureBatchSampler(MixtureSampler([9, 9], [1, 1], 2, 1, 0))
    next(iter(batches))
    message = ("consumed should be <= 2 (samples handed out): the latest iter() handed out 2, "
               "but got consumed=3")  # fmt: skip
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        batches.state_dict(consumed=3)


def test_a_batch_samplers_state_counts_the_samples_of_whole_batches_from_0():
    """Invariant: ``MixtureBatchSampler.state_dict(consumed=n)`` counts samples, as the
    sampler's does: at each batch's end (0 before the first) it is the sampler's state at ``n``;
    between two ends it is refused, naming both; ``bound()`` is exact and prints as a decimal
    of six digits."""
    from distsampling.mixing.sampler import MixtureBatchSampler

    batches = MixtureBatchSampler(MixtureSampler([9, 9], [1, 1], 2, 1, 0))
    it = iter(batches)
    for _ in range(3):
        next(it)
    for n in (0, 2, 4, 6):
        assert batches.state_dict(consumed=n) == batches.sampler.state_dict(consumed=n)
    message = "consumed should be the samples of whole batches (a batch is a step: 2 or 4 here), "
    with pytest.raises(ValueError, match=f"^{re.escape(message)}but got consumed=3$"):
        batches.state_dict(consumed=3)
    bound = MixtureSampler([9] * 3, [1, 2, 4], 1, 1, 0).bound()
    assert bound == Fraction(5, 6) and repr(bound) == str(bound) == "0.833333"


def test_an_elastic_resume_that_changes_the_micro_batch_keeps_the_batch_samplers_len():
    """Invariant: 8 ranks of 4 read 10 steps, then 6 ranks of 3 the rest of the epoch: the
    batch sampler's len() is the epoch's steps, the 10 read and those left, whatever the
    micro-batch of each (the sampler's len() counts its indices)."""
    from distsampling.mixing.sampler import MixtureBatchSampler

    for layout in LAYOUTS:
        old = MixtureSampler([600, 300], [2, 1], 4, 8, 0, layout=layout)
        list(islice(iter(old), 10 * 4))
        new = MixtureSampler([600, 300], [2, 1], 3, 6, 0, layout=layout)
        new.load_state_dict(roundtrip(old.state_dict()))
        batches = MixtureBatchSampler(new)
        rest = list(batches)
        assert len(batches) == 10 + len(rest) == 10 + -(-(900 - 10 * 32) // 18)
        assert len(new) == 10 * 4 + len(rest) * 3
        batches.set_epoch(1)  # a whole epoch on the new grid: none of its steps read before
        assert len(batches) == len(list(batches)) and len(new) == 3 * len(batches)


def test_sizes_past_int64_and_weights_as_0_d_tensors_or_numpy_scalars():
    """Invariant: sizes summing past 2**63 - 1 are refused naming sizes; weights given one by
    one as 0-d tensors or numpy scalars are the numbers they hold, a float32 the decimal it
    prints, as in an array; a tensor of several numbers is refused naming its place."""
    message = "sizes should sum to at most 2**63 - 1 (the indices are int64), but got sum(sizes)="
    with pytest.raises(ValueError, match=f"^{re.escape(message)}{2**63}$"):
        MixtureSampler([2**62, 2**62], [1, 1], 1, 1, 0)
    w32 = np.array([0.3, 0.7, 2], np.float32)
    expected = MixtureSampler([5] * 3, w32, 1, 1, 0).schedule
    assert expected[0][1] == [Fraction(3, 10), Fraction(7, 10), 2]
    for weights in (list(torch.from_numpy(w32)), list(w32), [w32[0], np.float64(0.7), np.int64(2)]):
        assert MixtureSampler([5] * 3, weights, 1, 1, 0).schedule == expected
    message = "weights[1] should be a real number (a tensor of one element), but got weights[1]="
    with pytest.raises(TypeError, match=f"^{re.escape(message)}"):
        MixtureSampler([5] * 2, [1, torch.ones(2)], 1, 1, 0)


def test_float32_weights_given_as_python_floats_on_resume_are_refused_with_a_hint():
    """Example: a state saved under a float32 array of weights (0.3 is 3/10) loaded into the
    array's .tolist() (0.30000001192092896): another mix, refused, the message saying that
    the shares agree within 1e-6 and how to give them."""
    w32 = np.array([0.3, 0.7], np.float32)
    s = MixtureSampler([9, 9], w32, 2, 1, 0)
    list(islice(iter(s), 3))  # inside step 1
    with pytest.raises(ValueError) as err:
        MixtureSampler([9, 9], w32.tolist(), 2, 1, 0).load_state_dict(s.state_dict())
    assert str(err.value).startswith(
        "weights should agree with the mix read through step 1, inside which this state was "
        "saved, but from step 0 it read shares 0.3, 0.7 and these weights give 0.3000000119, "
        "0.6999999881 (shares within 1e-6: float32 weights given once as an array and once as "
        "Python floats? give both the same form); change the mix at step 2 or later"
    )
    MixtureSampler([9, 9], list(w32), 2, 1, 0).load_state_dict(s.state_dict())  # its scalars
    # the hint only where the shares are within 1e-6 (strictly): 8e-7 apart, not 1e-6 or more
    s = MixtureSampler([9, 9], [0.5, 0.5], 2, 1, 0)
    list(islice(iter(s), 3))
    for weights, hint in (([0.5000008, 0.4999992], True), ([0.500001, 0.499999], False),
                          ([0.5000015, 0.4999985], False), ([0.50001, 0.49999], False)):  # fmt: skip
        with pytest.raises(ValueError) as err:
            MixtureSampler([9, 9], weights, 2, 1, 0).load_state_dict(s.state_dict())
        assert ("(shares within 1e-6: float32 weights" in str(err.value)) == hint, weights


@given(seed=seeds, k=st.integers(0, 40), passes=st.lists(st.integers(0, 2**62), min_size=1))
def test_every_reads_round_keys_are_its_passes_made_at_once(seed, k, passes):
    """Invariant: the round keys made for a block at once in uint64 arithmetic are, read by
    read, the cipher's round keys of epoch_key(epoch_key(seed, k), pass)."""
    from distsampling.scale.cipher import _round_keys

    s = MixtureSampler([3] * 41, [1] * 41, 1, 1, 0, seed=seed)
    got = s._keys_of(np.full(len(passes), k), np.array(passes, np.int64))  # (8, P)
    for i, p in enumerate(passes):
        assert got[:, i].tolist() == list(_round_keys(epoch_key(epoch_key(seed, k), p)))


def test_a_tiny_source_far_into_the_run_is_batch_at_and_iteration_alike():
    """Example: sources of 1000 and 5 samples at 1/2 each, step 10**9 of 8 ranks of 4 (the
    small one in its pass 4 * 10**8 and more); batch_at and iteration from there agree, and
    each pass of the small source holds its 5 samples once."""
    for layout in LAYOUTS:
        s = MixtureSampler([1000, 5], [0.5, 0.5], 4, 8, 0, layout=layout, epoch_length=2**62)
        step = 10**9
        batch = s.batch_at(step)
        assert all(0 <= i < 1005 for b in batch for i in b)
        B = 32
        s.set_epoch(step * B // s.epoch_length)  # epoch 0: iterate from the step's position
        ks, js = s.sources(np.arange(step * B, step * B + 40 * B))
        small = js[ks == 1]
        assert np.all(np.diff(small) == 1)  # the small source's items run on, pass after pass
