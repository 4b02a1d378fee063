r"""Every rank's own stream of the weight tree, each node's phase carried across a schedule's
changes: the per-rank layout's table.

In the per-rank layout rank ``r`` reads its own stream, ``b`` positions a step (its position
``u = τ·b + i`` at step ``τ``, slot ``i``). With fixed weights that stream is the tree's positions
from ``r·b`` on: rank ``r`` at step ``τ`` reads tree positions ``[(τ + r)·b, (τ + r + 1)·b)``. Seen
from a node, a stream that starts ``m`` of the node's positions into the tree is the node's own
divisor merge with the residual ``φ = ((2m·a + s) mod 2s) / 2s`` (``a`` of ``s = a + b``, the
children's weights): ``ℓ(m') = ⌊(2m'·a + θ) / 2s⌋`` with ``θ = 2s·φ``. So each rank starts as a
phase-carrying stream (``phases.py``) whose every node holds the tree's residual at position
``r·b``, and at each change of the weights each of its nodes keeps its residual (rounded to
``1/2s'`` of the new weights, ``s'`` scaled to about ``2**30``), as the global stream's do.

The bound. A rank's node splits its positions within ``(-1, 1)`` of its share of them: the
difference of the tree's errors, each in ``(-1/2, 1/2]``, at the rank's start and now (a
phase-carrying stream from position 0 that reads ``r·b`` positions first). Down a source's path
the errors add as in ``phases.py``: each rank's count of source ``k`` is within

    2·E_k = Σ_i Π_{j > i} (max p_j + TV(p_j))

of the schedule's cumulative share over its own reads, ``b·Σ_t w_k(t)``: twice the global
stream's bound (with fixed weights, ``β_k``: a window of the tree). Any stretch of a rank's
reads is such a difference too, so a micro-batch is within ``2·E_k`` and a step's global batch,
the ranks' micro-batches, within ``2W·E_k`` (the ranks' phases are not one window's: after a
change that all ranks entered alike, each micro-batch errs alike); with one weight it is a
window of the one tree, within ``β_k``.

The table, per piece of the grid: each node's ``(a, s)`` scaled, ``(P, K - 1)``, and per rank
each node's ``θ`` and each source's count at the piece's head, ``(P, W, K - 1)`` and ``(P, W,
K)``: ``O(W × pieces × K)``, not the global stream's ``O(pieces × K)`` (``W·(2K - 1)`` int64
a change: about 9 MB for ``W = 8``, ``K = 4`` and 20,000 changes, 1.6 MB a change at ``W =
1024``, ``K = 100``), made once, in order, every rank at once. A rank's read is numbered by the
ranks' counts at its step's two ends (``Σ_{r'<r} c_{r'}((τ+1)·b) + Σ_{r'>r} c_{r'}(τ·b)`` of the
others, reads numbered step by step, rank by rank): ``W`` counts down the table, ``O(W·K)``.

References:
    distsampling/mixing/phases.py (one stream's carried phases, its bound)
    distsampling/mixing/tree.py (the weight tree, the divisor merge of two)
"""

from __future__ import annotations

import numpy as np

from .phases import SCALE, _climb, _Shape

__all__: list[str] = []


def _rescale(R: np.ndarray, D: np.ndarray, S: np.ndarray) -> np.ndarray:
    """``min(⌊(4R·S + D) / 2D⌋, 2S - 1)``: the residual ``R / D`` to the nearest ``1/2S``, in
    int64 (``R < D <= 2**32``, ``S <= 2**31``: ``R`` split at 2**20 keeps each product below
    2**54). ``D`` is even, so this is ``⌊(2R·S + D/2) / D⌋``."""
    hi, lo = R >> 20, R & ((1 << 20) - 1)
    q, rest = np.divmod(2 * hi * S, D)
    out = (q << 20) + ((rest << 20) + 2 * lo * S + (D >> 1)) // D
    return np.minimum(out, 2 * S - 1)


class _RankPhases:
    """The grid's pieces (``P``, their steps ``steps``: all but the last) in one tree
    ``shape`` (the grid's first weights'), every rank's stream over them: ``a``, ``s``
    ``(P, K - 1)`` (a node of weight 0 in a piece: ``a = 0, s = 1``), ``theta`` ``(P, W, K - 1)``
    and each rank's counts at each piece's head ``heads`` ``(P, W, K)`` (from the grid's first
    step, each rank's own), their sum over the ranks ``sums`` ``(P, K)``."""

    def __init__(self, shape: _Shape, units: np.ndarray, steps: list[int], W: int, b: int):
        P, K, n_in = len(units), shape.K, shape.inner
        self.shape, self.W, self.K = shape, W, K
        self.left, self.right = np.array(shape.left), np.array(shape.right)  # (K - 1,) each
        wa, wb = shape.weights(units)  # (P, K - 1) each
        on = wa + wb > 0  # (P, K - 1) the nodes some position comes to
        M = np.maximum(1, SCALE // np.where(on, wa + wb, 1))  # (P, K - 1) scaled to ~2**30
        self.a, self.s = wa * M, np.where(on, (wa + wb) * M, 1)  # weight 0: a = 0, s = 1
        self.theta = np.zeros((P, W, n_in), np.int64)
        self.heads = np.zeros((P, W, K), np.int64)
        # each rank's start: the fresh tree (θ = s) of the first piece after r·b positions. Its
        # residual R there is its θ in that piece, its φ = R / 2s (weight 0: R = 1 of 2, φ = 1/2)
        _, R = self._advance(0, np.arange(W) * b, np.broadcast_to(self.s[0], (W, n_in)))
        D = 2 * self.s[0][:, None]  # (K - 1, 1) each node's φ = R / D
        theta, n = R.T, np.zeros((W, K), np.int64)  # (W, K - 1), (W, K)
        for p in range(P):
            self.theta[p], self.heads[p] = theta, n
            if p + 1 == P:
                break
            counts, r = self._advance(p, np.full(W, steps[p] * b), theta)
            n = n + counts.T  # (W, K)
            R = np.where(on[p][:, None], r, R)  # a node of weight 0 here: its phase waits
            D = np.where(on[p][:, None], 2 * self.s[p][:, None], D)
            theta = _rescale(R, D, self.s[p + 1][:, None]).T  # (W, K - 1) in the next scale
        self.sums = self.heads.sum(1)  # (P, K)

    def _advance(self, p: int, m: np.ndarray, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(each source's count, each node's residual numerator over 2s)`` after ``m``
        positions of piece ``p`` from phases ``theta`` ``(W, K - 1)``: ``(K, W)``, ``(K - 1, W)``."""
        K, n_in = self.K, self.shape.inner
        cnt = np.zeros((K + n_in, len(m)), np.int64)
        cnt[self.shape.root] = m
        R = np.zeros((n_in, len(m)), np.int64)
        for i in reversed(range(n_in)):  # parents before children
            a, s, x = self.a[p, i], self.s[p, i], cnt[K + i]
            q, rho = np.divmod(x, s)
            left, R[i] = np.divmod(2 * rho * a + theta[:, i], 2 * s)
            left += q * a
            cnt[self.left[i]], cnt[self.right[i]] = left, x - left
        return cnt[:K], R

    def route(self, piece: np.ndarray, rank: np.ndarray, m: np.ndarray) -> tuple[np.ndarray, ...]:
        """``(source, rank's count of it before)`` at position ``m`` after the head of ``piece``
        of ``rank``'s stream, ``(N,)`` each: every position down its own table at once (the
        tables flat: a node's row ``piece·(K-1)``, its phase's ``(piece·W + rank)·(K-1)``)."""
        K, n_in = self.K, self.shape.inner
        A, S, TH = self.a.ravel(), self.s.ravel(), self.theta.ravel()
        row, th_row = piece * n_in, (piece * self.W + rank) * n_in  # (N,) each
        node = np.full(len(m), self.shape.root, np.int64)
        m = np.asarray(m, np.int64).copy()
        at = np.flatnonzero(node >= K)  # (N',) those still above a leaf
        while len(at):
            i, x = node[at] - K, m[at]
            a, s, th = A[row[at] + i], S[row[at] + i], TH[th_row[at] + i]
            q, rho = np.divmod(x, s)
            left_n, r = np.divmod(2 * rho * a + th, 2 * s)
            left_n += q * a
            is_left = r + 2 * a >= 2 * s  # ℓ(x + 1) > ℓ(x): position x is the left's
            node[at] = down = np.where(is_left, self.left[i], self.right[i])
            m[at] = np.where(is_left, left_n, x - left_n)
            at = at[down >= K]
        return node, self.heads[piece, rank, node] + m

    def counts(self, piece: np.ndarray, rank: np.ndarray, m: np.ndarray) -> np.ndarray:
        """Each source's count in ``rank``'s stream at ``m`` positions after ``piece``'s head,
        ``(N, K)`` (``m`` up to the piece's length: the next head); at a head (``m = 0``) the
        table's counts, the others down the nodes."""
        K, n_in = self.K, self.shape.inner
        out = self.heads[piece, rank]  # (N, K) a copy
        live = np.flatnonzero(m)
        if not len(live):
            return out
        piece, rank = piece[live], rank[live]
        cnt = np.zeros((K + n_in, len(live)), np.int64)
        cnt[self.shape.root] = m[live]
        A, S, TH = self.a.ravel(), self.s.ravel(), self.theta.ravel()
        row, th_row = piece * n_in, (piece * self.W + rank) * n_in  # (N',) each
        for i in reversed(range(n_in)):  # parents before children
            a, s, th = A[row + i], S[row + i], TH[th_row + i]
            q, rho = np.divmod(cnt[K + i], s)
            left = q * a + (2 * rho * a + th) // (2 * s)
            cnt[self.left[i]], cnt[self.right[i]] = left, cnt[K + i] - left
        out[live] += cnt[:K].T
        return out

    def position(self, p: int, r: int, k: int, c: int) -> int:
        """The position after piece ``p``'s head in rank ``r``'s stream of its ``c``-th read of
        source ``k`` (counted from the grid's start): up its path by the inverse of ``ℓ``."""
        row = (self.a[p], self.s[p], self.theta[p, r])
        return _climb(self.shape, row, k, c - int(self.heads[p, r, k]))
