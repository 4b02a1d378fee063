r"""MixtureSampler: datasets mixed by weight across ranks, exact on every prefix, with no index.

``sizes`` are the lengths of ``K`` datasets in the order of a ``ConcatDataset``; ``weights`` their
shares. One global stream of positions is read by every rank (rank ``r`` reads positions
``[s*B + r*b, s*B + (r+1)*b)`` of step ``s``, ``B = b * num_replicas``: Megatron's layout), and
position ``n``'s source and sample are computed from ``n`` alone: no index, no replay.

Which source: a weight tree. The positive weights (exact rationals: a float is the decimal it
prints as, ``0.3`` is ``3/10``) are merged as Huffman merges, the two lightest first, so a leaf's
ancestors at least double in weight every two levels. A node of children ``L``, ``R`` (integer
weights ``a``, ``b``) gives ``L`` as many of its first ``n`` positions as

    c_L(n) = ⌊n·a/(a+b) + 1/2⌋     (position n is L's iff c_L(n+1) > c_L(n))

and ``R`` the rest: the divisor (Sainte-Laguë/Webster) merge of two, ``L``'s ``j``-th item at time
``(j + 1/2)/a``, ``R``'s at ``(i + 1/2)/b``, ties to ``L``. A position descends the tree in
O(depth) integer steps (numpy, int64, or Python ints where a product could pass 2**63), and an
item climbs back up by the inverse, ``⌈(2j+1)(a+b)/2a⌉ - 1`` on the left, ``⌊(2j+1)(a+b)/2b⌋``
on the right.

The bound, proven. ``c_L(n) - n·a/(a+b)`` lies in ``(-1/2, 1/2]`` (a rounding), so on any window
of consecutive positions in ``(-1, 1)``. Source ``k`` under the nodes ``v_1, ..., v_d = k`` (root
excluded) has ``c_k(n) = w_k·n + Σ_i (w_k / w_{v_i})·e_i``, ``e_i`` the rounding error of ``v_i``
at its parent's count, so

    |c_k(n) - w_k·n| <= β_k / 2,   β_k = Σ_i w_k / w_{v_i}  (< 4: the ratios halve every 2 levels)

on every prefix, and ``< β_k`` on every window (a global batch). With up to 3 sources ``β_k < 2``:
every prefix within 1; with 2, every window within 1. ``bound()`` gives ``max β_k / 2``. A flat
divisor merge of all ``K`` promises only ``1/2 + (K-2)·w_k/2`` (it reads one heavy source many
times while ``K - 1`` light ones wait for the same instant); Tijdeman's chairman assignment
reaches ``1 - 1/(2K-2)`` but only sequentially, as Megatron's greedy does (its index is built).

Which sample: source ``k``'s ``j``-th item overall (counted across schedule changes and epochs)
is sample ``index_shuffle(j % size_k, size_k, key)`` of its pass ``j // size_k``, the key drawn
from ``(seed, k, pass)``: all of a source once, in a new order, before any of it twice.

A weight of 0 leaves the source out of the tree; a tiny weight (below ``1/B``) is read less than
once a batch, at the rate it asks. A schedule ``[(0, w), (s1, w1), ...]`` changes the weights at
the training steps ``s1, ...``, step ``s`` starting at position ``s*B``: each segment is merged
afresh, each source goes on from its count, so nothing is lost or read twice within its pass.
After an elastic resume (another ``B``), the changes already passed stay where they were read and
the later ones fall at their step on the new grid (the state carries both).

References:
    megatron/core/datasets/helpers.cpp (build_blending_indices: the greedy, sequential)
    R. Tijdeman, "The chairman assignment problem", Discrete Math. 1980
    M. Balinski, H. P. Young, "Fair Representation" (divisor methods; Sainte-Laguë/Webster)
"""

from __future__ import annotations

import bisect
import hashlib
import heapq
import math
import numbers
from collections.abc import Iterator, Sequence
from fractions import Fraction
from itertools import pairwise
from typing import Any, NamedTuple

import numpy as np
import torch
from torch.utils.data import DistributedSampler

from ._validate import check_bool, check_int, check_seed, resolve_world
from .index_shuffle import epoch_key, index_shuffle, index_unshuffle
from .resume import CountingIterator, check_consumed, check_state

__all__ = ["MixtureSampler", "Read"]

Node = Any  # a leaf: the source k (int); a node: (a_L, a_R, L, R), integer weights


class Read(NamedTuple):
    """Where a sample is read: its global ``position``, the ``step``, the ``rank`` and its ``slot``."""

    position: int
    step: int
    rank: int
    slot: int


def _weights(name: str, weights: object, sizes: list[int]) -> list[Fraction]:
    if hasattr(weights, "tolist"):  # a tensor or a numpy array
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
    out = []
    for k, w in enumerate(weights):
        if isinstance(w, bool) or not isinstance(w, numbers.Real):
            raise TypeError(f"{name}[{k}] should be a real number, but got {name}[{k}]={w!r}")
        if not math.isfinite(w) or w < 0:
            raise ValueError(f"{name}[{k}] should be finite and >= 0, but got {name}[{k}]={w!r}")
        if w > 0 and sizes[k] == 0:
            raise ValueError(
                f"{name}[{k}]={w!r} should be 0 for a source of length 0: sizes[{k}]=0"
            )
        out.append(Fraction(w) if isinstance(w, numbers.Rational) else Fraction(repr(float(w))))
    if not any(out):
        raise ValueError(f"{name} should have a positive sum, but got {name}={weights!r}")
    return out


def _tree(weights: list[Fraction]) -> Node:
    """The Huffman tree of the positive weights, as integers (the lightest two merged first)."""
    scale = math.lcm(*(w.denominator for w in weights))
    heap = [(int(w * scale), k, k) for k, w in enumerate(weights) if w > 0]
    heapq.heapify(heap)
    made = len(weights)
    while len(heap) > 1:
        (a, _, left), (b, _, right) = heapq.heappop(heap), heapq.heappop(heap)
        heapq.heappush(heap, (a + b, made, (a, b, left, right)))
        made += 1
    return heap[0][2]


def _left(a: int, b: int, n: Any) -> Any:
    """How many of a node's first ``n`` items are its left child's: ``⌊n·a/(a+b) + 1/2⌋``."""
    return (2 * n * a + a + b) // (2 * (a + b))


def _route(node: Node, n: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(source, its item number)`` at the node's positions ``n`` (any order), each ``(P,)``."""
    if not isinstance(node, tuple):
        return np.full(len(n), node, np.int64), n.astype(np.int64)
    a, b, left, right = node
    c = _left(a, b, n)  # (P,) left items before each position
    is_left = (_left(a, b, n + 1) > c).astype(bool)  # (P,) position n is the left's c-th item
    ks, js = np.empty(len(n), np.int64), np.empty(len(n), np.int64)
    ks[is_left], js[is_left] = _route(left, c[is_left])
    ks[~is_left], js[~is_left] = _route(right, (n - c)[~is_left])
    return ks, js


def _pick(node: Node, n: int) -> tuple[int, int]:
    """:func:`_route` of one position on Python ints: no array's fixed cost for a first step."""
    while isinstance(node, tuple):
        a, b, left, right = node
        c = _left(a, b, n)
        node, n = (left, c) if _left(a, b, n + 1) > c else (right, n - c)
    return node, n


def _count(node: Node, k: int, n: int) -> int:
    """How many of the node's first ``n`` items are source ``k``'s."""
    while isinstance(node, tuple):
        a, b, left, right = node
        c = _left(a, b, n)
        node, n = (left, c) if _has(left, k) else (right, n - c)
    return n if node == k else 0


def _has(node: Node, k: int) -> bool:
    return node == k if not isinstance(node, tuple) else _has(node[2], k) or _has(node[3], k)


def _position(node: Node, k: int, j: int) -> int | None:
    """The node position of source ``k``'s ``j``-th item (None if ``k`` is not under it): the
    first ``n`` whose count passes ``j``, ``⌈(2j+1)(a+b)/2a⌉ - 1`` on the left, ``⌊(2j+1)(a+b)/2b⌋``
    on the right."""
    if not isinstance(node, tuple):
        return j if node == k else None
    a, b, left, right = node
    if (at := _position(left, k, j)) is not None:
        return ((2 * at + 1) * (a + b) + 2 * a - 1) // (2 * a) - 1
    at = _position(right, k, j)
    return None if at is None else (2 * at + 1) * (a + b) // (2 * b)


def _beta(node: Node, out: dict[int, Fraction], path: tuple[int, ...] = ()) -> None:
    if not isinstance(node, tuple):
        out[node] = sum((Fraction(path[-1], w) for w in path), Fraction(0)) if path else Fraction(0)
        return
    a, b, left, right = node
    _beta(left, out, (*path, a))
    _beta(right, out, (*path, b))


class MixtureSampler(DistributedSampler):
    r"""Yield this rank's indices into ``ConcatDataset(datasets)``: ``K`` sources mixed by weight.

    One rank's share, so a torch ``DistributedSampler`` (torch's ``__init__`` is not run: the
    split is this class's): Lightning's default leaves it alone and calls its ``set_epoch``.

    Rank ``r`` reads ``batch_size`` consecutive positions of every step's global batch of
    ``B = batch_size * num_replicas``; an epoch is the steps that start in global positions
    ``[e*L, (e+1)*L)``, ``L = epoch_length``, and the next epoch goes on with the stream.

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
        if isinstance(sizes, (str, bytes)) or not isinstance(sizes, Sequence) or not sizes:
            raise TypeError(
                f"sizes should be a non-empty sequence of lengths, but got sizes={sizes!r}"
            )
        self.sizes = [check_int(f"sizes[{k}]", n, low=0) for k, n in enumerate(sizes)]
        self.offsets = [sum(self.sizes[:k]) for k in range(len(self.sizes))]
        self.schedule = self._schedule(weights)  # [(start, weights)], starts increasing from 0
        self.batch_size = check_int("batch_size", batch_size, low=1)
        self.num_replicas, self.rank = resolve_world(num_replicas, rank)
        self.seed, self.shuffle = check_seed(seed), check_bool("shuffle", shuffle)
        length = sum(self.sizes) if epoch_length is None else epoch_length
        self.epoch_length = check_int("epoch_length", length, low=1)
        self._trees = [_tree(w) for _, w in self.schedule]
        self._totals = [t[0] + t[1] if isinstance(t, tuple) else 1 for t in self._trees]
        self.epoch, self._skip = 0, 0
        self._origin, self._step0 = 0, 0  # the grid starts at position _origin, step _step0
        self._before = 0  # indices this rank read of the epoch on an earlier grid (a resume)
        self._counter: CountingIterator | None = None
        self._place(self._resolve(0, 0, []))

    def _resolve(self, origin: int, step0: int, passed: list[int]) -> list[int]:
        """Each change's global position on a grid that starts at ``origin``, step ``step0``:
        ``passed`` (where earlier grids read it) for the steps before, ``origin + (step -
        step0) * B`` for the others."""
        B = self.batch_size * self.num_replicas
        return [passed[g] if step < step0 else origin + (step - step0) * B
                for g, (step, _) in enumerate(self.schedule)]  # fmt: skip

    def _place(self, starts: list[int]) -> None:
        """The changes at ``starts``; each source's count at each segment's start."""
        self._starts = starts
        self._bases = [[0] * len(self.sizes)]
        for g, start in enumerate(self._starts[1:]):
            n = start - self._starts[g]
            self._bases.append(
                [c + _count(self._trees[g], k, n) for k, c in enumerate(self._bases[g])]
            )

    def _schedule(self, weights: object) -> list[tuple[int, list[Fraction]]]:
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

    # --- the stream -----------------------------------------------------------------------

    def _sources(self, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(source, item number overall)`` at global ``positions`` (int64), each ``(P,)``."""
        starts = self._starts
        segment = np.searchsorted(starts, positions, side="right") - 1  # (P,)
        ks, js = np.empty(len(positions), np.int64), np.empty(len(positions), np.int64)
        for g in np.flatnonzero(np.bincount(segment)).tolist():  # (np.unique imports numpy.ma)
            at = segment == g
            local = positions[at] - starts[g]  # (P_g,) positions within the segment
            tree, base = self._trees[g], np.array(self._bases[g], np.int64)
            if 2 * (int(local.max()) + 2) * self._totals[g] >= 2**63:  # Python ints, exact
                local = local.astype(object)
            k, j = _route(tree, local)
            ks[at], js[at] = k, base[k] + j
        return ks, js

    def _key(self, k: int, pass_: int) -> int:
        return epoch_key(epoch_key(self.seed, k), pass_)

    def _indices(self, ks: np.ndarray, js: np.ndarray) -> np.ndarray:
        """Indices into the ConcatDataset of sources ``ks``'s items ``js``, each ``(P,)``."""
        sizes = np.array(self.sizes, np.int64)[ks]  # (P,)
        passes, local = js // np.maximum(sizes, 1), js % np.maximum(sizes, 1)  # (P,) (P,)
        out = np.array(self.offsets, np.int64)[ks] + local  # (P,) without shuffle
        if self.shuffle:  # one call per source and pass
            for k in np.flatnonzero(np.bincount(ks)).tolist():
                of_k = np.flatnonzero(ks == k)  # (P_k,)
                first = int(passes[of_k].min())  # a block spans few passes of a source
                for pass_ in (np.flatnonzero(np.bincount(passes[of_k] - first)) + first).tolist():
                    at = of_k[passes[of_k] == pass_]
                    shuffled = index_shuffle(local[at], self.sizes[k], self._key(k, pass_))
                    out[at] = self.offsets[k] + shuffled.numpy()
        return out

    def _few(self, positions: list[int]) -> list[int]:
        """``_indices(*_sources(positions))`` on Python ints: a first step costs microseconds."""
        out = []
        for p in positions:
            g = bisect.bisect_right(self._starts, p) - 1
            k, j = _pick(self._trees[g], p - self._starts[g])
            pass_, i = divmod(self._bases[g][k] + j, self.sizes[k])
            if self.shuffle:
                i = int(index_shuffle(i, self.sizes[k], self._key(k, pass_)))
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
        r"""``(source, item number overall)`` at global ``positions``, each ``(P,)`` int64: item
        ``j`` of source ``k`` is in its pass ``j // sizes[k]``, at ``j % sizes[k]`` of that pass.

        Examples:
            >>> s = MixtureSampler([6, 4], [1, 1], batch_size=2, num_replicas=2, rank=0)
            >>> [a.tolist() for a in s.sources(range(4))]
            [[0, 1, 0, 1], [0, 0, 1, 1]]
        """
        return self._sources(np.asarray(positions, dtype=np.int64).reshape(-1))

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
        for g in reversed(range(len(self.schedule))):
            if self._bases[g][k] <= j and self.schedule[g][1][k] > 0:
                n = self._starts[g] + _position(self._trees[g], k, j - self._bases[g][k])
                if g + 1 == len(self.schedule) or n < self._starts[g + 1]:
                    if n < self._origin:
                        raise ValueError(
                            f"sample {i} of source {k} in its pass {pass_} was read at position "
                            f"{n}, before step {self._step0} (position {self._origin}), the first "
                            "of this grid: ask a sampler of the grid it was read on"
                        )
                    step, at = divmod(n - self._origin, self.batch_size * self.num_replicas)
                    return Read(n, self._step0 + step, *divmod(at, self.batch_size))
        return None

    def bound(self) -> Fraction:
        r"""The prefix bound this mixture promises: ``max_k β_k / 2`` over the schedule's segments."""
        betas: dict[int, Fraction] = {}
        for tree in self._trees:
            seg: dict[int, Fraction] = {}
            _beta(tree, seg)
            for k, v in seg.items():
                betas[k] = max(betas.get(k, Fraction(0)), v)
        return max(betas.values()) / 2

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

    def _blocks(self, steps: range, skip: int) -> Iterator[torch.Tensor]:
        """This rank's indices of ``steps`` less the first ``skip``: a few on Python ints first
        (the first index at once), then blocks of steps doubling up to about 2**14 indices."""
        b, B, size = self.batch_size, self.batch_size * self.num_replicas, 1
        s = steps.start + skip // b
        first = self._origin + s * B + self.rank * b + skip % b  # the first position to read
        if s < steps.stop:  # up to 16 of the first step: no array's fixed cost
            head = range(first, min(first + 16, self._origin + s * B + (self.rank + 1) * b))
            yield torch.tensor(self._few(list(head)), dtype=torch.int64)
            first = head.stop  # the rest of the step, and those after, in arrays
        while s < steps.stop:
            t = np.arange(s, min(steps.stop, s + size), dtype=np.int64)  # (T,) steps
            mine = (self._origin + t * B + self.rank * b)[:, None] + np.arange(b)  # (T, b)
            positions = mine.ravel()
            positions = positions[positions >= first]
            yield torch.from_numpy(self._indices(*self._sources(positions)))
            s, size = s + size, min(2 * size, max(1, (1 << 14) // b))

    def __iter__(self) -> Iterator[int]:
        steps, skip = self._steps(self.epoch), self._skip  # read now: a later set_epoch waits
        self._counter = CountingIterator(lambda: self._blocks(steps, skip))
        return self._counter.ints

    # --- resume ---------------------------------------------------------------------------

    def _identity(self) -> dict[str, Any]:
        shares = [(n, [w / sum(ws) for w in ws]) for n, ws in self.schedule]  # 1:1 is 0.5:0.5
        mix = repr([(n, [(w.numerator, w.denominator) for w in ws]) for n, ws in shares])
        return {"sizes": list(self.sizes), "weights": hashlib.sha1(mix.encode()).hexdigest()[:16],
                "seed": self.seed, "shuffle": self.shuffle, "epoch_length": self.epoch_length}  # fmt: skip

    def state_dict(self, consumed: int | None = None) -> dict[str, Any]:
        r"""Where this rank is: the grid's first position (``origin``) and training step
        (``step``), the indices of the epoch read since (``position``; ``before``: read on
        earlier grids), and where the schedule's changes fell (``changes``); ``consumed``: what
        the loop used of the latest ``iter()`` (a plain DataLoader with workers reads ahead;
        StatefulDataLoader needs none)."""
        handed_out = 0 if self._counter is None else self._counter.yielded
        if consumed is not None:
            handed_out = check_consumed(
                consumed, handed_out, f"the latest iter() handed out {handed_out}"
            )
        return {"kind": type(self).__name__, "version": 2, **self._identity(), "epoch": self.epoch,
                "num_replicas": self.num_replicas, "batch_size": self.batch_size,
                "origin": self._origin, "step": self._step0, "changes": list(self._starts),
                "position": self._skip + handed_out, "before": self._before}  # fmt: skip

    def load_state_dict(self, state: dict[str, Any]) -> None:
        r"""Resume at ``state``. With another ``num_replicas`` or ``batch_size`` the state must be
        at a step boundary: the rest of the stream from there is read once on this grid, and the
        schedule's later changes fall at their steps on it."""
        fields = ("epoch", "num_replicas", "batch_size", "origin", "step", "changes", "position",
                  "before")  # fmt: skip
        state = check_state(state, type(self).__name__, 2, self._identity(), required=fields)
        epoch, origin, step0 = (
            check_int("epoch", state["epoch"], low=0),
            check_int("origin", state["origin"], low=0),
            check_int("step", state["step"], low=0),
        )
        W, b = (
            check_int("num_replicas", state["num_replicas"], low=1),
            check_int("batch_size", state["batch_size"], low=1),
        )
        changes = state["changes"]
        if not isinstance(changes, (list, tuple)) or len(changes) != len(self.schedule):
            raise ValueError(
                f"changes should be a list of {len(self.schedule)} positions, one per entry of "
                f"the schedule, but got changes={changes!r}"
            )
        changes = [check_int(f"changes[{g}]", n, low=0) for g, n in enumerate(changes)]
        saved = MixtureSampler.__new__(MixtureSampler)
        saved.__dict__.update(self.__dict__, num_replicas=W, batch_size=b, _origin=origin, _skip=0)
        steps = saved._steps(epoch)
        position = check_int("position", state["position"], low=0, high=len(steps) * b)
        before = check_int("before", state["before"], low=0)
        if (W, b) == (self.num_replicas, self.batch_size):
            skip = position
        elif position % b:
            raise ValueError(
                f"position should be at a step boundary (a multiple of batch_size={b}) to resume on another grid, but got position={position}"
            )
        else:  # the new grid starts at the next step: its step number and position go on
            done, skip, before = steps.start + position // b, 0, before + position
            origin, step0 = origin + done * W * b, step0 + done
        starts = self._resolve(origin, step0, changes)
        if starts[0] != 0 or any(x >= y for x, y in pairwise(starts)):
            raise ValueError(
                f"changes should be positions increasing from 0 that a sampler of this schedule "
                f"saved, but got changes={changes} at step={step0}"
            )
        self.epoch, self._counter, self._skip, self._before = epoch, None, skip, before
        self._origin, self._step0 = origin, step0
        self._place(starts)
