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
- with one reader a rank (``n = 1``), rank ``r`` at step ``s`` reads window ``s + r``: with fixed
  weights, ``MixtureSampler(..., layout="per_rank")``'s sources, position by position.

A schedule ``[(0, w), (s1, w1), ...]`` starts a new tree at step ``s1`` (each reader at its own
step 0 of the new stretch), as does a new grid (an elastic resume) at its first step: a change
may add up to ``2·β_k`` to a reader. (``MixtureSampler`` instead carries each node's phase across
a change, ``mixing/phases.py``, one table a rank; one a reader would be ``O(readers × changes ×
K)``: so under a schedule the readers' sources are not the sampler's.)

Which sample: the draws of source ``k`` in a stretch (a schedule's entry, from the grid's first
step) have a *global order*: step by step, a step's ranks in order, a rank's slots in order. The
stretch's first ``L`` draws of ``k`` read its *lead* (what was left unread when it began: by an
earlier stretch, or an earlier grid; ``L = 0`` at the start of a run), its draws ``[L + j·T, L +
(j + 1)·T)`` pass ``first + j`` (``T`` samples, shards in an order drawn from ``(seed, k, P)``):
segment ``j`` of the stretch (``-1`` the lead). Reader ``q``'s part of segment ``j`` is its own
draws among those, ``a_q = n_q(B_j)`` to ``z_q = n_q(B_{j+1})`` with ``n_q(G)`` its draws among
the stretch's first ``G`` (:meth:`ReaderGrid.reach`, the stretch's tree taken on past its end,
so nothing of a later mix places what is read before it). The readers' parts are laid end to
end in the pass in reader order rotated by ``j`` (a reader's starts at ``at_q``, the sum of the
parts before it): each reader reads one run of consecutive samples a pass (one open shard a
source), and the parts tile the pass, each sample once. Where the next stretch begins, the
unread rest of the segment in flight (``[at_q + c_q - a_q, at_q + z_q - a_q)`` a reader) is its
lead, as at an elastic resume.

``n_q(G)``: the step ``σ`` holding draw ``G`` is the last with ``C(σ) <= G`` (``C`` every
reader's draws in the stretch before a step, a sum of closed forms, ``O(R·depth)``). One count at
``s0`` on the line ``lo + G/(w_k·W·b)`` is within ``R·β_k`` draws of ``G``; the steps' draws about
it (``O(depth)`` a step, a doubling stretch of them, closed-form probes and a bisection where
they are many) find ``σ``; then every reader's count at ``σ`` and step ``σ``'s ranks before
``G``. A few ``O(R·depth)`` counts a pass edge, at any step.

Counts by the period: a tree of integer weights summing to ``S`` has ``c_k(n + S) = c_k(n) +
c_k(S)`` (the root gives its left child ``a`` of every ``S`` positions, each node its children
their weights of every run of its own), so where ``K·S`` is at most ``2**20`` a stretch keeps
every source's count over one period, and a count is a division and a look-up instead of
``depth`` of them. A step's draws of a source are placed at once (:meth:`_Runs._draws`).

No overlap at a pass boundary. At a step boundary ``s`` the readers have drawn the first
``C = C_k(s)`` draws of the global order (every step before ``s``, whole), so with ``B_j <= C <
B_{j+1}`` each reader has ``n_q(B_j) <= c_q <= n_q(B_{j+1})``: it has read its part of every
segment before ``j`` whole and none after ``j``. Every sample of the passes before is read once
each, those of the pass in flight once more or not: ``Σ max(0, reads - P - 1) = 0`` at every
step, whatever ``W``, ``b``, ``n``, the weights and the schedule: at most ``readers × b``,
whatever the readers' spread (above) is. An elastic resume at a step
boundary hands the unread rest of segment ``j`` to the new grid as its lead, read first, in the
new grid's global order: the bound holds across it.

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
from .mixture_sources import _lead_pieces, _merge

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
        self._every = self.offsets(np.arange(self.W * self.n, dtype=np.int64))  # (ρ, o), (R,) each
        self._starts = (self._every[1] * self.b).reshape(self.W, self.n)  # (W, n) each o·b
        self.near = 1 << 16  # reach: the steps about a pass's edge counted one by one, at most
        self.table = 1 << 20  # a stretch's counts over one period tabulated if K·S is at most this
        self._tables: dict[int, tuple[int, np.ndarray] | None] = {}  # stretch -> (S, counts)
        self._columns: dict[tuple[int, int], np.ndarray] = {}  # (stretch, k) -> c_k, (S + 1,)
        self._base_columns: dict[tuple[int, int], np.ndarray] = {}  # (stretch, k) -> (R,)

    def _period(self, p: int) -> tuple[int, np.ndarray] | None:
        """``(S, c)`` of stretch ``p``'s tree, ``S`` the sum of its integer weights and ``c`` every
        source's count before each position of one period, ``(S + 1, K)``: the root gives its
        left child ``a`` of every ``S`` positions, and each node its children's weights of
        every run of its own weight, so ``c_k(n + S) = c_k(n) + c_k(S)``. ``None`` where the
        table would exceed ``table`` entries (then counts go down the tree)."""
        if p not in self._tables:
            tree = self.pieces[p][2]
            S = tree.nodes[0][tree.root] + tree.nodes[1][tree.root]  # a leaf root: 1 + 0
            fits = S * self.K <= self.table
            self._tables[p] = (S, _counts(tree, np.arange(S + 1), self.K)) if fits else None
        return self._tables[p]

    def _count_in(self, p: int, k: int, n: Any) -> Any:
        """``c_k(n)``, source ``k``'s count before tree positions ``n`` (an array) in stretch
        ``p``'s tree: by its period's table (a division and a look-up), else down its path."""
        period = self._period(p)
        if period is None:
            return _count(self.pieces[p][2], k, n)
        S, c = period
        if (p, k) not in self._columns:  # source k's counts over a period, side by side
            self._columns[p, k] = np.ascontiguousarray(c[:, k])
        c = self._columns[p, k]  # (S + 1,)
        q = n // S  # whole periods before n
        return q * c[S] + c[n - q * S]

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
        for p, (lo, hi, _) in enumerate(self.pieces):
            if lo >= step:
                break
            m = own_steps(lo, step if hi is None else min(step, hi), rho, self.n)  # (Q,)
            if every and p not in self._bases:  # every reader's c(o·b): made once a stretch
                self._bases[p] = self._at(p, o)
            out += self._at(p, m + o) - (self._bases[p] if every else self._at(p, o))
        return out

    def _at(self, p: int, t: np.ndarray) -> np.ndarray:
        """``c(t·b)``, ``(len(t), K)``: each source's count before grid points ``t`` in stretch
        ``p``'s tree: by its period's table where it has one; else points that span a range of
        about their number (a step's readers: consecutive windows) by routing the range's
        positions once and summing window by window, others down the tree."""
        tree, period = self.pieces[p][2], self._period(p)
        if period is not None:
            S, c = period
            q = t * self.b // S  # (len(t),) whole periods before each point
            return q[:, None] * c[S] + c[t * self.b - q * S]
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

    def _base(self, p: int, k: int) -> np.ndarray:
        """``(R,)``: every reader's ``c_k(o·b)`` in stretch ``p`` (where its windows start),
        made once a stretch and source."""
        if (p, k) not in self._base_columns:
            self._base_columns[p, k] = self._count_in(p, k, self._starts.reshape(-1))
        return self._base_columns[p, k]

    def reader_counts(self, k: int, step: int) -> np.ndarray:
        """``(R,)``: every reader's draws of source ``k`` before ``step``, ``O(R·depth)`` a
        stretch (readers ``q = r·n + ρ``)."""
        out = np.zeros(self.W * self.n, np.int64)
        for p, (lo, hi, _) in enumerate(self.pieces):
            if lo >= step:
                break
            at = self._points(lo, step if hi is None else min(step, hi))  # (R,)
            out += self._count_in(p, k, at) - self._base(p, k)
        return out

    def _points(self, lo: int, steps: Any) -> np.ndarray:
        """``(..., R)``: every reader's tree position ``(m + o)·b`` before each of ``steps`` in
        a stretch from step ``lo`` (its own steps ``m`` there counted once a ``ρ``)."""
        rho = np.arange(self.n)
        m = own_steps(lo, np.asarray(steps, np.int64)[..., None], rho, self.n)  # (..., n)
        return (m[..., None, :] * self.b + self._starts).reshape(*m.shape[:-1], -1)  # (W, n)

    def in_stretch(self, k: int, p: int, steps: Any) -> np.ndarray:
        """``(..., R)``: every reader's draws of source ``k`` in stretch ``p`` before each of
        ``steps``, the stretch's tree taken on past its end (as if the mix did not change)."""
        return self._count_in(p, k, self._points(self.pieces[p][0], steps)) - self._base(p, k)

    def _edges(self, k: int, p: int, steps: np.ndarray, ranks: Any) -> np.ndarray:
        """``(S, len(ranks))``: source ``k``'s count in stretch ``p``'s tree before the window
        of each of ``ranks`` at each step (a step's windows are consecutive: rank ``r``'s from
        edge ``r``, ``r = W`` the step's end)."""
        rho = steps % self.n
        m = own_steps(self.pieces[p][0], steps, rho, self.n)  # (S,) its readers' own steps
        first = (m + rho * self.W) * self.b  # (S,) rank 0's window
        return self._count_in(p, k, first[:, None] + np.asarray(ranks) * self.b)

    def _step_draws(self, k: int, p: int, a: int, z: int) -> np.ndarray:
        """``(z - a,)``: every rank's draws of source ``k`` at each step of ``[a, z)`` in
        stretch ``p`` (its tree taken on): the count across each step's ``W`` windows."""
        return np.diff(self._edges(k, p, np.arange(a, z, dtype=np.int64), [0, self.W]))[:, 0]

    def reach(self, k: int, p: int, G: int) -> np.ndarray:
        r"""``(R,)``: how many of stretch ``p``'s first ``G`` draws of source ``k`` each reader
        makes (its tree taken on past its end), the draws in the *global order*: step by step,
        a step's ranks in order, a rank's slots in order.

        The step ``σ`` holding draw ``G`` is the last with ``C(σ) <= G`` (``C`` every reader's
        draws from the stretch's start, a sum of closed forms): a count at ``s0``, on the line
        ``lo + G/(w·W·b)`` (each reader within ``β_k < 4`` of its share ``w``, so ``C(s0)`` is
        within ``R·β_k`` of ``G``), then the steps' draws from there, a doubling stretch of them
        (closed-form probes and a bisection past ``near`` steps); then every reader's count at
        ``σ`` and the ranks of step ``σ`` before draw ``G``.

        Examples:
            >>> from fractions import Fraction as F
            >>> g = ReaderGrid(schedule_trees([(0, [F(1, 2), F(1, 2)])]), 0, 2, 2, 1, 2)
            >>> g.reach(0, 0, 3).tolist()  # 3 draws of 0: rank 0 at step 0, rank 1, rank 0 at 1
            [2, 1]
        """
        lo, _, tree = self.pieces[p]
        if k not in tree.paths:  # no weight: no draw
            return np.zeros(self.W * self.n, np.int64)
        path = tree.paths[k]
        w = (
            (path[-1][0] if path[-1][2] else path[-1][1]) / (path[0][0] + path[0][1])
            if path
            else 1.0
        )
        rate = w * self.W * self.b  # draws of k a step, on average
        s0 = lo + int(G / rate)  # on the line: C(s0) is within R·β_k of G
        at = self.in_stretch(k, p, s0)  # (R,) every reader's count there
        c0 = int(at.sum())
        width = abs(int((G - c0) / rate)) + 64  # the steps between, about
        C = lambda s: int(self.in_stretch(k, p, s).sum())  # noqa: E731 (closed form, O(R))
        near = self.near  # steps counted one by one (their draws, O(depth) a step) up to this
        a, ca, z, cz = s0, c0, s0, c0  # forward: C(a) = ca <= G; back: C(z) = cz > G
        while True:  # a stretch of steps about s0 that doubles, until it holds sigma
            if c0 <= G and width <= near:  # the first step t from a with C(t + 1) > G
                d = self._step_draws(k, p, a, a + width)  # (width,)
                past = np.cumsum(d) + ca > G
                if past.any():
                    sigma = a + int(past.argmax())
                    break
                a, ca = a + width, ca + int(d.sum())
            elif c0 > G and min(width, z - lo) <= near:  # the last t before z with C(t) <= G
                a = max(lo, z - width)
                d = self._step_draws(k, p, a, z)  # (z - a,)
                fits = cz - np.cumsum(d[::-1])[::-1] <= G  # (z - a,) C(t) <= G, t = a ..
                if fits.any():
                    sigma = a + int(np.count_nonzero(fits)) - 1
                    break
                z, cz = a, cz - int(d.sum())
            else:  # far (a light source): closed-form probes, then a bisection
                t = a + width if c0 <= G else max(lo, z - width)
                ct = C(t)
                if (ct <= G) == (c0 <= G):  # not there yet
                    a, ca, z, cz = (t, ct, z, cz) if ct <= G else (a, ca, t, ct)
                else:
                    a, ca, z = (a, ca, t) if ct > G else (t, ct, z)
                    while z - a > near:  # C(a) <= G < C(z)
                        mid = (a + z) // 2
                        cm = C(mid)
                        a, ca, z = (mid, cm, z) if cm <= G else (a, ca, mid)
                    past = np.cumsum(self._step_draws(k, p, a, z)) + ca > G  # (z - a,)
                    sigma = a + int(past.argmax())
                    break
            width *= 2
        out = at if sigma == s0 else self.in_stretch(k, p, sigma)
        left = G - int(out.sum())  # draws of step sigma before G: its first ranks', in order
        if left > 0:
            x = np.diff(self._edges(k, p, np.array([sigma]), np.arange(self.W + 1))[0])  # (W,)
            out[np.arange(self.W) * self.n + sigma % self.n] += np.clip(
                left - np.cumsum(x) + x, 0, x
            )
        return out

    def step_sources(self, step: int) -> np.ndarray:
        """``(W, b)``: every rank's sources at ``step``, routed at once (the step's windows are
        consecutive: ``m + ρ·W + r``, ``r < W``)."""
        piece, u = self.positions(0, [step])  # rank 0's window; rank r's is r further
        u = (u[0, 0] + np.arange(self.W * self.b, dtype=np.int64)).reshape(self.W, self.b)
        return _route(self.pieces[int(piece[0])][2], u.reshape(-1))[0].reshape(self.W, self.b)

    def total(self, k: int, step: int) -> int:
        """``C_k(step)``: every reader's draws of source ``k`` before ``step``, down its path."""
        return int(self.reader_counts(k, step).sum())

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
    ``seed``, ``shuffle``, its grid (``_grid``), its generation (``_gen``: the leftovers
    ``lead`` of an earlier grid and the first fresh pass ``first``, per source) and its caches
    (``_layouts``: a pass's shards; ``_plans``: a stretch's leftovers; ``_segs``: a segment's
    parts; ``_reaches``: the readers' counts at a draw of the global order)."""

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
            starts = list(accumulate(map(sizes.__getitem__, order), initial=0))
            self._layouts[k, pass_] = order, starts
        return self._layouts[k, pass_]

    def _before(self, k: int, p: int) -> np.ndarray:
        """``(R,)``: every reader's draws of source ``k`` before stretch ``p`` (kept)."""
        key = (self._grid.n, k, "before", p)
        if key not in self._plans:
            self._plans[key] = self._grid.reader_counts(k, self._grid.pieces[p][0])
        return self._plans[key]

    def _plan(self, k: int, p: int) -> tuple[np.ndarray, np.ndarray, int]:
        """``(lead, starts, first)`` of source ``k`` at stretch ``p``'s first step: the
        leftovers ``[pass, from, to]`` (``(N, 3)``), where each starts among them (``(N + 1,)``)
        and the first fresh pass. Stretch 0's are the grid's; each next one's, the unread rest
        of the segment the last one left in flight (:meth:`_rest`), as an elastic resume's."""
        done = max([p0 for p0 in range(p + 1) if (self._grid.n, k, p0) in self._plans] or [-1])
        for p0 in range(done + 1, p + 1):
            if p0 == 0:
                lead, first = self._gen["lead"][k], self._gen["first"][k]
            else:
                lead, first = self._rest(k, p0 - 1, self._before(k, p0) - self._before(k, p0 - 1))
            starts = np.concatenate([[0], np.cumsum(lead[:, 2] - lead[:, 1])])
            self._plans[self._grid.n, k, p0] = lead, starts, first
        return self._plans[self._grid.n, k, p]

    def _rest(self, k: int, p: int, c: np.ndarray) -> tuple[np.ndarray, int]:
        """``(lead, first)`` once the readers drew ``c`` (``(R,)``) of source ``k`` in stretch
        ``p``: the first ``C = Σ c`` of its global order, so every reader is within the segment
        ``j`` that holds draw ``C``; its unread rest ``[at + c - a, at + z - a)`` a reader, and
        what no reader draws (a stretch that does not weigh ``k``), are the leftovers."""
        lead, starts, first = self._plan(k, p)
        L, T, C = int(starts[-1]), self.totals[k], int(c.sum())
        if T == 0 or (C >= L and (C - L) % T == 0):  # no segment begun and unfinished
            return np.zeros((0, 3), np.int64), first + max(0, C - L) // max(T, 1)
        j = -1 if C < L else (C - L) // T  # the segment in flight: every reader is in it
        a, z, at = self._segments(k, p, j)  # (R,) each
        turn = max(j, 0)  # the readers' parts in their order in the pass: sorted already
        x = np.append(np.roll(at + c - a, turn), (z - a).sum())  # (R + 1,) from: parts, the rest
        y = np.append(np.roll(at + z - a, turn), L if j < 0 else T)  # (R + 1,) to
        if j < 0:  # within the leftovers: their unread rest, then every fresh pass
            return _merge(_lead_pieces(lead, starts, x[x < y], y[x < y])), first
        return _merge(np.stack([np.full(len(x), first + j), x, y], 1)), first + j + 1

    def _segments(self, k: int, p: int, j: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(a, z, at)``, ``(R,)`` each: segment ``j`` of source ``k`` in stretch ``p`` (``-1``:
        its leftovers, ``j >= 0``: pass ``first + j``) holds the stretch's global draws ``[B_j,
        B_{j+1})``; reader ``q`` reads its draws ``a[q] .. z[q] - 1`` of ``k`` (counted from
        the stretch's start) there, from ``at[q]`` on in it: the readers' parts laid end to
        end, in reader order rotated by ``j``."""
        key = (self._grid.n, k, p, j)
        if key not in self._segs:
            L, T = int(self._plan(k, p)[1][-1]), self.totals[k]
            a, z = (self._reach(k, p, G) for G in ((0, L) if j < 0 else (L + j * T, L + j * T + T)))
            R = len(a)
            lens = np.roll(z - a, max(j, 0))  # (R,) by place: reader (place - j) mod R
            at = np.concatenate([[0], np.cumsum(lens)])[(np.arange(R) + max(j, 0)) % R]
            if len(self._segs) > 4 * len(self.sources) + 8:
                self._segs.pop(next(iter(self._segs)))
            self._segs[key] = a, z, at
        return self._segs[key]

    def _reach(self, k: int, p: int, G: int) -> np.ndarray:
        """:meth:`ReaderGrid.reach` of this grid, kept: each pass's edge serves two passes."""
        key = (self._grid.n, k, p, G)
        if key not in self._reaches:
            if len(self._reaches) > 4 * len(self.sources) + 8:
                self._reaches.pop(next(iter(self._reaches)))
            self._reaches[key] = self._grid.reach(k, p, G)
        return self._reaches[key]

    def _segment(self, k: int, p: int, q: int, c: int) -> int:
        """The segment of stretch ``p`` holding reader ``q``'s ``c``-th draw of source ``k`` in
        it: the leftovers (``-1``) while ``c`` is short of its part of them, else the first
        pass ``j`` whose end it has not reached; from ``c·R`` (the readers draw alike) by a
        gallop, then a bisection."""
        L, T = int(self._plan(k, p)[1][-1]), self.totals[k]
        if L and c < self._reach(k, p, L)[q]:
            return -1
        ends = lambda j: c < self._reach(k, p, L + (j + 1) * T)[q]  # noqa: E731
        j = max(0, (c * self._grid.W * self._grid.n - L) // T)  # about: the readers draw alike
        if j == 0 or not ends(j - 1):  # at or after the guess (its edges first: most are)
            lo, hi, step = j - 1, j, 1  # lo = -1: the leftovers, or a pass it is past
            while not ends(hi):
                lo, hi, step = hi, hi + step, 2 * step
        else:  # before it
            lo, hi, step = j - 2, j - 1, 1
            while lo >= 0 and ends(lo):
                lo, hi, step = max(-1, lo - step), lo, 2 * step
        while hi - lo > 1:  # ends(hi), not ends(lo) (or lo = -1)
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if ends(mid) else (mid, hi)
        return hi

    def _segment_of(self, k: int, p: int, q: np.ndarray, c: np.ndarray) -> np.ndarray:
        """``(N,)``: :meth:`_segment` of each of readers ``q``'s draws ``c`` (``(N,)`` each): the
        first one's searched, each checked to lie between its edges (a step's readers draw
        alike: most are in one), the others searched one by one."""
        L, T = int(self._plan(k, p)[1][-1]), self.totals[k]
        j = np.full(len(q), self._segment(k, p, int(q[0]), int(c[0])), np.int64)
        edge = lambda j: self._reach(k, p, L + j * T)[q]  # noqa: E731 (each one's B_j, j >= 0)
        wrong = np.flatnonzero((c < edge(j[0])) | (c >= edge(j[0] + 1)) if j[0] >= 0 else
                               c >= edge(0))  # fmt: skip
        for i in wrong.tolist():
            j[i] = self._segment(k, p, int(q[i]), int(c[i]))
        return j

    def _draws(self, k: int, q: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, ...]:
        """``(pass, offset in it, n)``, ``(N,)`` each, of readers ``q``'s ``c``-th draws of source
        ``k`` (``(N,)`` each): in the stretch each is drawn in, first its reader's part of the
        leftovers, then its part of each pass. A reader's draws ``c .. c + n - 1`` are that
        pass's offsets from there on, one after another."""
        pieces, N = self._grid.pieces, len(q)
        p = np.full(N, -1, np.int64)  # the last stretch that weighs k and begins by draw c
        for i in range(len(pieces)):
            if k in pieces[i][2].paths:
                p[self._before(k, i)[q] <= c] = i
        end = np.full(N, np.iinfo(np.int64).max, np.int64)  # the reader's draws before the next
        for i in range(len(pieces) - 1):
            end[p == i] = self._before(k, i + 1)[q[p == i]]
        bad = np.flatnonzero((p < 0) | (c >= end))
        if len(bad):
            i = int(bad[0])
            raise IndexError(f"reader {int(q[i])} never draws source {k} a {int(c[i]) + 1}-th time")
        pass_, o, n = np.empty(N, np.int64), np.empty(N, np.int64), np.empty(N, np.int64)
        for i in np.unique(p).tolist():  # each stretch, then each segment in it
            at = np.flatnonzero(p == i)
            c0 = c[at] - self._before(k, i)[q[at]]  # their draws in the stretch before these
            j = self._segment_of(k, i, q[at], c0)
            lead, starts, first = self._plan(k, i)
            for jj in np.unique(j).tolist():
                x, qx, cx = at[j == jj], q[at[j == jj]], c0[j == jj]
                a, z, start = self._segments(k, i, jj)
                ox = start[qx] + cx - a[qx]  # (X,) its place in the segment
                n[x] = np.minimum(z[qx] - cx, end[x] - c[x])  # the run left, in the stretch
                if jj >= 0:
                    pass_[x], o[x] = first + jj, ox
                    continue
                h = np.searchsorted(starts, ox, "right") - 1  # (X,) the leftover it is in
                pass_[x], o[x] = lead[h, 0], lead[h, 1] + ox - starts[h]
                n[x] = np.minimum(n[x], starts[h + 1] - ox)
        return pass_, o, n

    def _draw(self, k: int, q: int, c: int) -> tuple[int, int, int]:
        """:meth:`_draws` of one draw: ``(pass, offset in it, n)``, Python ints."""
        pass_, o, n = self._draws(k, np.array([q], np.int64), np.array([c], np.int64))
        return int(pass_[0]), int(o[0]), int(n[0])

    def _reads(self, ks: np.ndarray, q: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, ...]:
        """``(shard index, offset in the shard)``, ``(N,)`` each, of readers ``q``'s ``c``-th
        draws of sources ``ks`` (``(N,)`` each): source by source, pass by pass."""
        shard, offset = np.empty(len(ks), np.int64), np.empty(len(ks), np.int64)
        for k in np.unique(ks).tolist():
            at = np.flatnonzero(ks == k)
            pass_, o, _ = self._draws(k, q[at], c[at])
            for P in np.unique(pass_).tolist():
                x = pass_ == P
                order, starts = (np.asarray(v) for v in self._layout(k, P))
                j = np.searchsorted(starts, o[x], "right") - 1  # (X,) the shard each is in
                shard[at[x]], offset[at[x]] = order[j], o[x] - starts[j]
        return shard, offset

    def _where(self, k: int, pass_: int, offset: int) -> tuple[int, int]:
        """``(shard index, offset in the shard)`` of a pass's ``offset``."""
        order, starts = self._layout(k, pass_)
        j = bisect_right(starts, offset) - 1
        return order[j], offset - starts[j]
