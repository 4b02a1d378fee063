r"""Which reader draws which source, and which run of a pass it reads: ShardedMixtureDataset's grid.

*Readers* are ranks × workers: ``W`` ranks, ``n`` readers a rank (the loader's ``num_workers``,
at least 1), ``R = W·n``. Step ``s`` of rank ``r`` is read by its reader ``ρ = s mod n`` (worker
``w`` of a loader yields every ``n``-th step), reader ``q = r·n + ρ``.

Which source: every reader reads a window of the weight tree (``mixing/tree.py``). Reader ``q``
reads, at its ``m``-th own step of a tree's stretch, tree positions ``[(m + o_q)·b, (m + o_q +
1)·b)`` with ``o_q = ρ·W + r``. So

- a reader's reads are the tree's window ``[o_q·b, o_q·b + M)``: on every prefix each source is
  within ``β_k < 4`` of its share (``mixing/tree.py``), whatever ``W``, ``b``, ``n`` and the
  weights' periods; its count of source ``k`` after ``m`` own steps is the closed form
  ``c_k((m + o_q)·b) - c_k(o_q·b)``, ``O(depth)``, at any step;
- the readers' spread (``max - min`` of their counts of ``k`` at a step) is less than
  ``⌈b·w_k⌉ + 2·β_k`` a stretch (their own steps differ by one at most), at any step: it does
  not grow with the steps;
- step ``s``'s ``W`` micro-batches are the tree's windows ``m + ρ·W + r``, ``r < W``: consecutive,
  so every global batch is within ``β_k`` of ``B·w_k``;
- with one reader a rank (``n = 1``), rank ``r`` at step ``s`` reads window ``s + r``:
  ``MixtureSampler(..., layout="per_rank")``'s sources, position by position.

A schedule ``[(0, w), (s1, w1), ...]`` starts a new tree at step ``s1`` (each reader at its own
step 0 of the new stretch), as does a new grid (an elastic resume) at its first step.

Which sample: pass ``P`` of source ``k`` (``T`` samples, shards in an order drawn from ``(seed,
k, P)``) is cut into ``R`` contiguous segments; reader ``q`` reads segment ``(q + P) mod R``.
Its ``c``-th draw of ``k`` is the virtual position ``x = ⌊T·q/R⌋ + c`` of the passes laid end to
end (after its part of what an earlier grid left unread, the *lead*)::

    v = ⌈(x + 1)·R / T⌉ - 1,   pass P = v - q,   offset ⌊T·(v mod R)/R⌋ + x - ⌊T·v/R⌋

A reader thus reads one run of consecutive samples a pass (one open shard a source).

The overlap at a pass boundary, bounded. Reader ``q`` has finished pass ``P`` once its count
``c_q >= E_q(P) = ⌊T(q+P+1)/R⌋ - ⌊Tq/R⌋`` (``|E_q(P) - (P+1)·T/R| < 1``). While some reader
``q0`` has not, any reader ``q`` has read ``c_q - E_q(P) <= c_q - c_q0`` samples past ``P``: at
most the spread ``D``. So while a pass is unfinished, at most ``(R - 1)·D`` samples of later
passes are read, ``D < ⌈b·w_k⌉ + 2·β_k`` (a stretch): bounded at every step, whatever ``W``,
``b``, ``n`` and the weights.

References:
    distsampling/mixing/tree.py (the weight tree: c_k, its inverse, its bound)
    distsampling/mixing/layout.py (the per-rank layout: every rank a window of the tree)
"""

from __future__ import annotations

import hashlib
from bisect import bisect_right
from collections.abc import Sequence
from fractions import Fraction
from itertools import accumulate
from typing import Any

import numpy as np
import torch

from ..mixing.tree import _count, _counts, _integer_mix, _route

__all__: list[str] = []


def schedule_trees(schedule: Sequence[tuple[int, Sequence[Fraction]]]) -> list[tuple[int, Any]]:
    """``[(step, tree)]`` of a schedule of exact shares (``MixtureSampler.schedule``): the
    weight tree of each entry, as the mixture builds it (the same integer weights)."""
    out = []
    for step, shares in schedule:
        mix = (tuple(x.numerator for x in shares), tuple(x.denominator for x in shares))
        out.append((step, _integer_mix(mix)[1]))
    return out


def own_steps(lo: Any, s: Any, rho: Any, n: int) -> Any:
    """How many steps ``t`` in ``[lo, s)`` reader ``ρ`` of ``n`` reads (``t ≡ ρ mod n``): ints
    or arrays, ``s >= lo``. ``⌈(s - ρ)/n⌉ - ⌈(lo - ρ)/n⌉``."""
    return (s - rho + n - 1) // n - (lo - rho + n - 1) // n


class ReaderGrid:
    r"""One grid's readers from its first step ``start``: which source each reader draws at
    each step, and how many of each it drew before any step, in closed form.

    Args:
        trees: ``[(step, tree)]`` of the schedule (:func:`schedule_trees`).
        start: the grid's first training step (0, or the step of an elastic resume).
        num_replicas: ``W``; batch_size: ``b``; readers: ``n`` readers a rank.
        K: the number of sources.

    Examples:
        >>> from fractions import Fraction as F
        >>> g = ReaderGrid(schedule_trees([(0, [F(1, 2), F(1, 2)])]), 0, 2, 2, 1, 2)
        >>> g.sources(0, range(3)).tolist(), g.sources(1, range(3)).tolist()
        ([[0, 1], [0, 1], [0, 1]], [[0, 1], [0, 1], [0, 1]])
        >>> g.counts(3, [0, 1]).tolist()  # (readers, K) before step 3
        [[3, 3], [3, 3]]
    """

    def __init__(self, trees: list[tuple[int, Any]], start: int, num_replicas: int,
                 batch_size: int, readers: int, K: int) -> None:  # fmt: skip
        self.W, self.b, self.n, self.K, self.start = num_replicas, batch_size, readers, K, start
        first = max(i for i, (s, _) in enumerate(trees) if s <= start)
        # the stretches (lo, hi, tree) from the grid's first step: a tree each
        los = [start] + [s for s, _ in trees[first + 1 :]]
        his = los[1:] + [None]
        self.pieces = [(lo, hi, t) for lo, hi, (_, t) in zip(los, his, trees[first:])]
        self._bases: dict[int, np.ndarray] = {}  # stretch -> every reader's c(o·b), (R, K)

    def _piece(self, step: int) -> int:
        """The stretch holding ``step`` (the last that starts at or before it)."""
        return max(i for i, (lo, _, _) in enumerate(self.pieces) if lo <= step)

    def offsets(self, readers: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(ρ, o_q)`` of readers ``q = r·n + ρ``: each one's window offset ``o_q = ρ·W + r``."""
        rho = readers % self.n
        return rho, rho * self.W + readers // self.n

    def counts(self, step: int, readers: Sequence[int] | np.ndarray) -> np.ndarray:
        """``(len(readers), K)``: each reader's draws of every source before ``step``, a
        stretch at a time: ``c((m + o)·b) - c(o·b)``, ``m`` its own steps in the stretch."""
        q = np.asarray(readers, np.int64).reshape(-1)
        rho, o = self.offsets(q)  # (Q,) each
        out = np.zeros((len(q), self.K), np.int64)
        every = len(q) == self.W * self.n and bool((q == np.arange(len(q))).all())
        for p, (lo, hi, tree) in enumerate(self.pieces):
            if lo >= step:
                break
            m = own_steps(lo, step if hi is None else min(step, hi), rho, self.n)  # (Q,)
            if every and p not in self._bases:  # every reader's c(o·b): made once a stretch
                self._bases[p] = self._at(tree, o)
            out += self._at(tree, m + o) - (self._bases[p] if every else self._at(tree, o))
        return out

    def _at(self, tree: Any, t: np.ndarray) -> np.ndarray:
        """``c(t·b)``, ``(len(t), K)``: each source's count before grid points ``t``. Points
        that span a range of about their number (a step's readers: consecutive windows) are
        counted by routing the range's positions once and summing window by window; others
        down the tree, all sources at each point."""
        if len(t) < 64:  # a few: each down the tree
            return _counts(tree, t * self.b, self.K)
        lo, hi = int(t.min()), int(t.max())
        if hi - lo > 4 * len(t):
            return _counts(tree, t * self.b, self.K)
        ks = _route(tree, np.arange(lo * self.b, hi * self.b, dtype=np.int64))[0]  # (span·b,)
        window = np.arange(len(ks)) // self.b  # (span·b,) each position's window, from lo
        per = np.bincount(window * self.K + ks, minlength=(hi - lo) * self.K)  # (span·K,)
        cum = np.zeros((hi - lo + 1, self.K), np.int64)
        np.cumsum(per.reshape(hi - lo, self.K), 0, out=cum[1:])  # (span + 1, K)
        return cum[t - lo] + _counts(tree, np.array([lo * self.b]), self.K)  # (len(t), K)

    def step_sources(self, step: int) -> np.ndarray:
        """``(W, b)``: every rank's sources at ``step``, routed at once (the step's windows are
        consecutive: ``m + ρ·W + r``, ``r < W``)."""
        piece, u = self.positions(0, [step])  # rank 0's window; rank r's is r further
        u = (u[0, 0] + np.arange(self.W * self.b, dtype=np.int64)).reshape(self.W, self.b)
        return _route(self.pieces[int(piece[0])][2], u.reshape(-1))[0].reshape(self.W, self.b)

    def total(self, k: int, step: int) -> int:
        """``C_k(step)``: every reader's draws of source ``k`` before ``step``, down its path."""
        q = np.arange(self.W * self.n, dtype=np.int64)
        rho, o = self.offsets(q)
        out = 0
        for lo, hi, tree in self.pieces:
            if lo >= step:
                break
            m = own_steps(lo, step if hi is None else min(step, hi), rho, self.n)
            out += int((_count(tree, k, (m + o) * self.b) - _count(tree, k, o * self.b)).sum())
        return out

    def weighs(self, k: int, step: int) -> bool:
        """Whether source ``k`` is drawn at all from ``step`` on (a positive weight after it)."""
        return any(k in t.paths for lo, hi, t in self.pieces if hi is None or hi > step)

    def positions(self, rank: int, steps: Sequence[int] | np.ndarray) -> tuple[list, np.ndarray]:
        """Tree positions ``rank`` reads at each of ``steps`` (increasing), ``(steps, b)``, and
        the stretch of each step."""
        s = np.asarray(steps, np.int64).reshape(-1)
        los = np.array([lo for lo, _, _ in self.pieces], np.int64)
        piece = np.searchsorted(los, s, side="right") - 1  # (S,)
        rho = s % self.n
        m = own_steps(los[piece], s, rho, self.n)  # (S,) its own steps in the stretch before s
        t = m + rho * self.W + rank  # (S,) the window
        return piece, t[:, None] * self.b + np.arange(self.b)  # (S,) (S, b)

    def sources(self, rank: int, steps: Sequence[int] | np.ndarray) -> np.ndarray:
        """``(len(steps), b)``: the source of each slot ``rank`` reads at each of ``steps``."""
        piece, u = self.positions(rank, steps)
        out = np.empty(u.shape, np.int64)
        for p in np.unique(piece).tolist():
            at = piece == p
            out[at] = _route(self.pieces[p][2], u[at].reshape(-1))[0].reshape(-1, self.b)
        return out


class _Runs:
    """Which run of which pass a reader's draws read: the dataset's ``sources``, ``totals``,
    ``seed``, ``shuffle``, its generation (``_gen``: the leftovers ``lead`` of an earlier grid
    and the first fresh pass ``first``, per source; ``_lead_starts``) and a cache ``_layouts``."""

    def _layout(self, k: int, pass_: int) -> tuple[list[int], list[int]]:
        """Pass ``pass_`` of source ``k``: its shards in order, and where each starts."""
        if (k, pass_) not in self._layouts:
            n = len(self.sources[k][0])
            if self.shuffle:
                key = int(hashlib.sha256(f"{self.seed}/{k}/{pass_}".encode()).hexdigest()[:15], 16)
                order = torch.randperm(n, generator=torch.Generator().manual_seed(key)).tolist()
            else:
                order = list(range(n))
            sizes = self.sources[k][1]
            if len(self._layouts) > 4 * len(self.sources):
                self._layouts.pop(next(iter(self._layouts)))
            self._layouts[k, pass_] = order, list(accumulate((sizes[i] for i in order), initial=0))
        return self._layouts[k, pass_]

    def _draw(self, k: int, q: int, R: int, c: int) -> tuple[int, int, int]:
        """``(pass, offset in it, n)`` of reader ``q`` of ``R``'s ``c``-th draw of source ``k``:
        first its part of the passes left over by an earlier topology, then its segments. Its
        draws ``c .. c + n - 1`` are that pass's offsets from there on, one after another."""
        T, starts = self.totals[k], self._lead_starts[k]
        L = int(starts[-1])
        lo, hi = L * q // R, L * (q + 1) // R
        if c < hi - lo:
            i = int(np.searchsorted(starts, lo + c, "right")) - 1
            p, a, _ = self._gen["lead"][k][i].tolist()
            s0, s1 = int(starts[i]), int(starts[i + 1])
            return p, a + lo + c - s0, min(hi, s1) - lo - c  # to the piece's end
        x = T * q // R + c - (hi - lo)  # its virtual position in the passes laid end to end
        v = ((x + 1) * R + T - 1) // T - 1  # the segment holding it: pass v - q
        return (
            self._gen["first"][k] + v - q,
            T * (v % R) // R + x - T * v // R,
            T * (v + 1) // R - x,
        )

    def _where(self, k: int, pass_: int, offset: int) -> tuple[int, int]:
        """``(shard index, offset in the shard)`` of a pass's ``offset``."""
        order, starts = self._layout(k, pass_)
        j = bisect_right(starts, offset) - 1
        return order[j], offset - starts[j]
