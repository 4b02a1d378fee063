r"""The per-rank layout: every rank reads its own stream of the weight tree.

Reads are numbered step by step, rank by rank (global position ``s*B + r*b + i`` is rank ``r``'s
slot ``i`` of step ``s``, ``B = b * num_replicas``). With fixed weights rank ``r`` at step ``s``
reads tree positions ``[(s + r)·b, (s + r + 1)·b)``. So

- rank ``r``'s reads are the tree's window ``[r·b, r·b + m)``: on every prefix, each source is
  within ``β_k`` of its share (``2·bound()``), whatever ``W``, ``b`` and the weights' periods;
- step ``s``'s ``W`` micro-batches are the tree's window ``[s·b, s·b + B)``: every global batch
  within ``β_k`` of ``B·w_k``, as with Megatron's layout;
- the run's count after ``S`` steps is the sum of its ranks', within ``W·β_k`` (a light source,
  below one a micro-batch, is read by the ranks in turn, on ``W`` consecutive steps).

Source ``k``'s reads are numbered ``j = 0, 1, 2, ...`` step by step, rank by rank (item ``j`` is
in the steps before ``s`` iff ``j < C_k(s) = Σ_{x<W} c_k((s+x)·b) - c_k(x·b)``): a block of steps
routes the window of tree positions its ranks read once (``_Window``).

Under a schedule (a grid of several pieces) each rank's stream goes on in phase: rank ``r``'s
stream is the tree's from position ``r·b`` on, in the tree shape of the grid's first weights, and
at each change every node of every rank carries its rounding (``rank_phases.py``). So each rank's
reads stay within ``2·bound()`` of the schedule's cumulative share over its steps, however many
changes (``bound()``: the global stream's phase bound, ``phases.py``); a global batch, the ranks'
micro-batches of phases no longer one window, within ``2·W·bound()``; the run's count within
``2·W·bound()``. The table is every rank's phases and counts at each change while they fit in
64 MiB, else at every ``C``-th change (a read makes the streams again from the one kept before):
``O(changes × K)`` in memory whatever ``W``; a read is numbered from the ranks' counts at its
step's ends, ``O(W·K)`` a step. An elastic
resume (another grid) starts the new grid's ranks afresh at its first step, each source going on
from its count.

References:
    distsampling/mixing/tree.py (the weight tree and its bound)
    distsampling/mixing/rank_phases.py (each rank's phases carried across a schedule's changes)
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Sequence
from fractions import Fraction
from functools import cached_property
from itertools import pairwise

import numpy as np
import torch

from .._checks import check_int
from .phases import _bound as _phase_bound
from .phases import _Shape
from .rank_phases import _RankPhases
from .state import Read
from .tree import _count, _counts, _position, _route, _split

__all__: list[str] = []

ENDS = 1 << 19  # the ranks' counts one chunk of steps' ends may hold (``_rank_sources``)


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


class _PerRankLayout:
    """The grid's pieces (from a step on, the schedule's weights in use) and where each rank
    reads: with one piece, windows of its tree; with several, each rank's own stream, phases
    carried (``_ranks``, ``rank_phases.py``). The sampler's attributes (``num_replicas``,
    ``batch_size``, ``rank``, ``_plan``, ``units``, ``_trees``, ``_origin``, ``_step0``,
    ``_read0``) and its ``_indices``."""

    def _place(self) -> None:
        """The pieces ``(first step, weights)`` from the grid's first step on; under a
        schedule every rank's table over them, in the tree shape of the grid's first weights,
        each rank starting at its position ``r·b`` (made now, not at a read); their ``_bases``
        made again when next asked for."""
        g0 = max(g for g, (step, _) in enumerate(self._plan) if step <= self._step0)
        later = [(step, g) for g, (step, _) in enumerate(self._plan) if step > self._step0]
        self._pieces = [(self._step0, g0), *later]
        self._firsts = [s for s, _ in self._pieces]
        self.__dict__.pop("_bases", None)
        self._firsts_array = np.array(self._firsts, np.int64)  # (P,)
        self._ranks: _RankPhases | None = None  # one piece: the tree's windows (below)
        if len(self._pieces) > 1:
            units = np.array([self.units[g] for _, g in self._pieces], np.int64)  # (P, K)
            steps = [b - a for a, b in pairwise(self._firsts)]
            self._ranks = _RankPhases(_Shape(self.units[g0]), units, steps,
                                      self.num_replicas, self.batch_size)  # fmt: skip
            self._bases  # noqa: B018

    @cached_property
    def _bases(self) -> list[np.ndarray]:
        """Each source's count at each piece's first step, ``(K,)`` a piece: ``_read0`` and
        the ranks' counts there (``rank_phases.py``), made once."""
        return self._make_bases()

    def _make_bases(self) -> list[np.ndarray]:
        read0 = np.array(self._read0, np.int64)  # (K,)
        return [read0] if self._ranks is None else list(read0 + self._ranks.sums)

    def _bound(self) -> Fraction:
        """The grid's schedule's phase bound (``phases.py``, the tree of its first weights): each
        rank's reads within twice it (``rank_phases.py``); with one weight, the tree's
        ``β_k / 2``."""
        units = np.array([self.units[g] for _, g in self._pieces], np.int64)  # (P, K)
        return _phase_bound(_Shape(self.units[self._pieces[0][1]]), units, len(units))

    def _phase_state(self) -> int:
        """The grid's first phase for a state: always 0 (each rank's window from its start)."""
        return 0

    def _check_phase(self, phase: object) -> int:
        """A per-rank state's phase: 0, the only one it saves (each rank's stream from its start
        ``r·b``); another is a state of another layout or of none."""
        if check_int("phase", phase) != 0:
            raise ValueError(
                f"phase should be 0 in a per_rank state (each rank's stream starts at its own "
                f"position r·b), but got phase={phase!r}"
            )
        return 0

    def _piece_of(self, k: int, j: int) -> int:
        """The last piece whose first step finds source ``k``'s count at ``j`` or below."""
        return max(p for p in range(len(self._pieces)) if self._bases[p][k] <= j)

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

    def _first_positions(self, steps: np.ndarray, rank: int | np.ndarray) -> np.ndarray:
        """The first global position ``rank`` reads at each of ``steps`` (of training), ``(T,)``:
        step ``s``'s ``rank``-th micro-batch, ``s·B + rank·b``."""
        W, b = self.num_replicas, self.batch_size
        return self._origin + (steps - self._step0) * (W * b) + rank * b

    def _resume_at(self, step: int) -> tuple[list[int], int]:
        """``(each source's count, the tree position 0)`` at ``step``: a new grid starts its
        trees there."""
        p = bisect.bisect_right(self._firsts, step) - 1
        tau = step - self._firsts[p]
        if self._ranks is not None:  # every rank's count at the step: their sum
            at = self._read0 + self._ends(np.array([step], np.int64))[0].sum(0)
        else:
            at = self._bases[p] + (self._before_step(self._pieces[p][1], [tau])[0] if tau else 0)
        return [int(n) for n in at], 0

    def _where(self, k: int, j: int, p: int) -> Read:
        """Where source ``k``'s item ``j`` is read, in piece ``p``: the last step ``τ`` with
        ``C(τ) <= j``, searched, then up its tree's path."""
        if self._ranks is not None:
            return self._rank_where(k, j, p)
        j -= int(self._bases[p][k])
        b, tree = self.batch_size, self._trees[self._pieces[p][1]]
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

    # --- the stream -----------------------------------------------------------------------

    def _sources(self, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(source, item number overall)`` at global ``positions`` (int64), each ``(P,)``."""
        if self._ranks is not None:
            return self._rank_sources(positions)
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

    def _few(self, positions: list[int]) -> list[int]:
        """``_indices(*_sources(positions))`` of a few positions of one step, down one path
        each, on Python ints: the first index at once."""
        if self._ranks is not None:  # a schedule: W counts down the table, as arrays
            return self._indices(*self._rank_sources(np.array(positions, np.int64))).tolist()
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
            out.append(self._item(k, j))  # type: ignore[attr-defined]
        return out

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
        if self._ranks is not None:  # a schedule: blocks of steps, every rank's counts each
            yield from self._rank_blocks(s, steps.stop, first)
            return
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

    # --- a schedule: every rank's own stream, phases carried (rank_phases.py) ---------------

    def _ends(self, steps: np.ndarray) -> np.ndarray:
        """Every rank's count of each source before training ``steps`` ``(T,)`` (their first
        positions), ``(T, W, K)``: ``W`` counts down the table a step (at a change: its head)."""
        W, b, T = self.num_replicas, self.batch_size, len(steps)
        piece = np.searchsorted(self._firsts_array, steps, side="right") - 1  # (T,)
        m = np.repeat((steps - self._firsts_array[piece]) * b, W)  # (T W,) rank by rank
        ranks = np.tile(np.arange(W, dtype=np.int64), T)
        return self._ranks.counts(np.repeat(piece, W), ranks, m).reshape(T, W, -1)

    def _rank_sources(self, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``_sources`` under a schedule: each position down its rank's table; its item number
        ``read0 + Σ_{r'<r} c_{r'}((τ+1)·b) + Σ_{r'>r} c_{r'}(τ·b)`` (the others' counts at its
        step's two ends) plus its rank's own count before it. The steps' ends in chunks of
        about ``ENDS`` counts."""
        W, b, K = self.num_replicas, self.batch_size, len(self.sizes)
        t, within = np.divmod(positions - self._origin, b * W)
        rank, slot = np.divmod(within, b)  # (P,) each
        steps = self._step0 + t
        piece = np.searchsorted(self._firsts_array, steps, side="right") - 1
        tau = steps - self._firsts_array[piece]
        ks, own = self._ranks.route(piece, rank, tau * b + slot)  # (P,) each
        uniq, which = np.unique(steps, return_inverse=True)  # (U,) the steps, (P,) each's
        js = own + np.array(self._read0, np.int64)[ks]
        chunk = max(1, ENDS // (2 * W * K))  # steps a chunk: their ends' counts
        for lo in range(0, len(uniq), chunk):  # steps lo .. lo + chunk: their ends at once
            u = uniq[lo : lo + chunk]
            at = slice(None) if len(u) == len(uniq) else (which >= lo) & (which < lo + len(u))
            ends = np.union1d(u, u + 1)  # (E,) the steps' first positions and the next's
            count = self._ends(ends)  # (E, W, K)
            start, end = count[np.searchsorted(ends, u)], count[np.searchsorted(ends, u + 1)]
            # the others before rank r: ranks below at the step's end, those above at its start
            below = np.cumsum(end, 1) - end  # (U, W, K)
            above = start.sum(1, keepdims=True) - np.cumsum(start, 1)  # (U, W, K)
            js[at] += (below + above)[which[at] - lo, rank[at], ks[at]]
        return ks, js

    def _rank_where(self, k: int, j: int, p: int) -> Read:
        """``_where`` under a schedule: the last step ``τ`` of piece ``p`` before which the
        ranks read at most ``j`` of source ``k`` (searched: by x16, then sixteenths, the ranks'
        counts at 15 steps a call), the rank whose reads of that step hold ``j``, then up its
        table's path."""
        W, b, first = self.num_replicas, self.batch_size, self._firsts[p]
        length = self._firsts[p + 1] - first if p + 1 < len(self._firsts) else None

        def before(taus: list[int]) -> list[int]:  # reads of k before step τ of piece p
            ends = self._ends(first + np.array(taus, np.int64))  # (T, W, K)
            return (ends[:, :, k].sum(1) + self._read0[k]).tolist()

        lo, hi = 0, 1  # the last τ with before(τ) <= j (before(length) > j: the next piece's)
        while (length is None or hi < length) and before([hi])[0] <= j:
            lo, hi = hi, 16 * hi if length is None else min(16 * hi, length)
        while hi - lo > 1:
            taus = sorted({lo + (hi - lo) * i // 16 for i in range(1, 16)} - {lo})
            counts = before(taus)
            lo = max([x for x, c in zip(taus, counts) if c <= j], default=lo)
            hi = min([x for x, c in zip(taus, counts) if c > j], default=hi)
        start, end = self._ends(first + np.array([lo, lo + 1]))[:, :, k]  # (W,) each
        # reads of k before rank r's at step τ: ranks below at its end, the rest at its start
        ahead = self._read0[k] + np.cumsum(end) - end + start.sum() - np.cumsum(start) + start
        r = int(np.flatnonzero(ahead <= j)[-1])
        m = self._ranks.position(p, r, k, int(start[r]) + j - int(ahead[r]))
        step = first + lo
        n = self._origin + (step - self._step0) * b * W + r * b + m - lo * b
        return Read(n, step, r, m - lo * b)

    def _rank_blocks(self, s: int, stop: int, first: int) -> Iterator[torch.Tensor]:
        """``_blocks`` under a schedule from grid step ``s`` (global positions from ``first``):
        blocks of steps doubling up to about 2**14 indices (and 2**18 counts of the ranks)."""
        W, b, K = self.num_replicas, self.batch_size, len(self.sizes)
        most = max(1, min((1 << 14) // b, (1 << 18) // (W * K)))
        size = 1
        while s < stop:
            T = min(size, stop - s)
            pos = (
                self._origin
                + np.arange(s, s + T, dtype=np.int64)[:, None] * (W * b)
                + self.rank * b
                + np.arange(b)
            ).ravel()  # (T b,) this rank's global positions
            pos = pos[pos >= first]
            yield torch.from_numpy(self._indices(*self._rank_sources(pos)))
            s, size = s + T, min(2 * size, most)
