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

The table, per piece of the grid: each node's ``(a, s)`` scaled, ``(P, K - 1)``, and each
source's count summed over the ranks at each head, ``(P, K)``. Each rank's own phases and counts
are ``W·(2K - 1)`` int64 a piece (1.6 MB at ``W = 1024``, ``K = 100``): kept for every piece
while all of them fit in ``budget`` bytes (64 MiB: 20,000 changes at ``W = 8``, ``K = 4`` take
9 MB), else only every ``C``-th piece's, ``C`` the fewest pieces apart that fit, with each node's
residual ``R / D``. A read in another piece makes its rank's stream again from the piece kept
before it, at most ``C - 1`` pieces: the table stays ``O(pieces × K)`` in memory whatever ``W``
(at most ``budget`` besides), and a read costs ``C - 1`` pieces' steps more. The table is made
once, in order, every rank at once. A rank's read is numbered by the ranks' counts at its step's
two ends (``Σ_{r'<r} c_{r'}((τ+1)·b) + Σ_{r'>r} c_{r'}(τ·b)`` of the others, reads numbered step
by step, rank by rank): ``W`` counts down the table, ``O(W·K)``.

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


BUDGET = 1 << 26  # bytes: every rank's phases and counts at every piece, while they fit
NEAR = 8  # pieces made again kept for the next reads (every rank's streams at each)


class _RankPhases:
    """The grid's pieces (``P``, their steps ``steps``: all but the last) in one tree
    ``shape`` (the grid's first weights'), every rank's stream over them: ``a``, ``s``
    ``(P, K - 1)`` (a node of weight 0 in a piece: ``a = 0, s = 1``), the ranks' counts at each
    head summed ``sums`` ``(P, K)``; each rank's node phases and counts at every ``every``-th
    head (module docstring), ``state`` at any head."""

    def __init__(self, shape: _Shape, units: np.ndarray, steps: list[int], W: int, b: int,
                 budget: int = BUDGET):  # fmt: skip
        P, K, n_in = len(units), shape.K, shape.inner
        self.shape, self.W, self.K = shape, W, K
        self.left, self.right = np.array(shape.left), np.array(shape.right)  # (K - 1,) each
        wa, wb = shape.weights(units)  # (P, K - 1) each
        self.on = wa + wb > 0  # (P, K - 1) the nodes some position comes to
        M = np.maximum(1, SCALE // np.maximum(wa + wb, 1))  # (P, K - 1) scaled to ~2**30
        self.a, self.s = wa * M, np.where(self.on, (wa + wb) * M, 1)  # weight 0: a = 0, s = 1
        self.lengths = np.array(steps, np.int64) * b  # (P - 1,) a rank's positions a piece
        # every piece's phases and counts while they fit; else every C-th's, with R and D
        whole = P * W * (2 * K - 1) * 8
        self.every = C = -(-whole // budget)  # 1 while they fit
        kept = -(-P // C)
        self.theta = np.zeros((kept, W, n_in) if C == 1 else (0, W, n_in), np.int64)
        self.R = np.zeros((0, W, n_in) if C == 1 else (kept, W, n_in), np.int64)
        self.D = np.zeros((0, n_in) if C == 1 else (kept, n_in), np.int64)
        self.heads = np.zeros((kept, W, K), np.int64)
        self.sums = np.zeros((P, K), np.int64)
        # each rank's start: the fresh tree (θ = s) of the first piece after r·b positions. Its
        # residual R there is its θ in that piece, its φ = R / D (weight 0: R = 1 of D = 2)
        ranks = np.zeros(W, np.int64)  # (W,) every rank in piece p
        _, R = self._advance(ranks, np.arange(W) * b, np.broadcast_to(self.s[0], (W, n_in)))
        D, n = np.broadcast_to(2 * self.s[0], (W, n_in)), np.zeros((W, K), np.int64)
        for p in range(P):
            self.sums[p] = n.sum(0)
            theta = _rescale(R, D, self.s[p])  # (W, K - 1) each rank's phases in piece p
            if p % C == 0:  # a piece kept: its phases (every piece) or residuals (every C-th)
                self.heads[p // C] = n
                if C == 1:
                    self.theta[p] = theta
                else:
                    self.R[p // C], self.D[p // C] = R, D[0]
            if p + 1 < P:
                n, R, D = self._step(ranks + p, n, R, D, theta)
        self._near: dict[int, tuple] = {}  # pieces made again lately (``state``), oldest first

    def _advance(self, p: np.ndarray, m: np.ndarray, theta: np.ndarray) -> tuple[np.ndarray, ...]:
        """``(each source's count, each node's residual numerator over 2s)`` after ``m``
        positions of pieces ``p`` ``(N,)`` from phases ``theta`` ``(N, K - 1)``: ``(N, K)``,
        ``(N, K - 1)``."""
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
        return cnt[:K].T, R.T

    def _step(self, p: np.ndarray, n: np.ndarray, R: np.ndarray, D: np.ndarray,
              theta: np.ndarray) -> tuple[np.ndarray, ...]:  # fmt: skip
        """Streams at the heads of pieces ``p`` ``(N,)`` (counts ``n`` ``(N, K)``, each node's
        residual ``R / D`` and phase there ``theta`` ``(N, K - 1)``) at the next heads: a node
        of weight 0 in its piece keeps its residual (its phase waits), the others take their
        new one over ``2s``."""
        counts, r = self._advance(p, self.lengths[p], theta)
        on = self.on[p]  # (N, K - 1)
        return n + counts, np.where(on, r, R), np.where(on, 2 * self.s[p], D)

    def state(self, piece: np.ndarray, rank: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each node's ``θ`` and each source's count at the head of ``piece`` in ``rank``'s
        stream, ``(N, K - 1)`` and ``(N, K)``: the table's, or every rank's stream made again
        from the piece kept before, or from a piece made lately if nearer (``_near``: the last
        ``NEAR`` pieces' streams, every rank's), the distinct pieces in order."""
        C, W = self.every, self.W
        if C == 1:
            return self.theta[piece, rank], self.heads[piece, rank]
        pieces, which = np.unique(piece, return_inverse=True)  # (U,), (N,)
        theta = np.empty((len(pieces), W, self.shape.inner), np.int64)  # (U, W, K - 1)
        heads = np.empty((len(pieces), W, self.K), np.int64)  # (U, W, K)
        for u, p in enumerate(pieces.tolist()):
            at = max([p // C * C, *(q for q in self._near if q <= p)])  # the nearest before
            if at in self._near:  # a piece made lately, nearer than the one kept
                n, R, D, th = self._near[at]
            else:
                n, R = self.heads[at // C], self.R[at // C]
                D = np.broadcast_to(self.D[at // C], R.shape)  # (W, K - 1) alike for all
                th = _rescale(R, D, self.s[at])
            while at < p:
                n, R, D = self._step(np.full(W, at), n, R, D, th)
                at += 1
                th = _rescale(R, D, self.s[at])
            self._near[p] = (n, R, D, th)  # the newest last; the oldest out past NEAR
            if len(self._near) > NEAR:
                del self._near[next(iter(self._near))]
            theta[u], heads[u] = th, n
        return theta[which, rank], heads[which, rank]

    def route(self, piece: np.ndarray, rank: np.ndarray, m: np.ndarray) -> tuple[np.ndarray, ...]:
        """``(source, rank's count of it before)`` at position ``m`` after the head of ``piece``
        of ``rank``'s stream, ``(N,)`` each: every position down its own phases at once (those
        of each distinct head made once, ``which`` of them each position's)."""
        K = self.K
        heads, which = np.unique(piece * self.W + rank, return_inverse=True)  # (U,), (N,)
        theta, counts = self.state(heads // self.W, heads % self.W)  # (U, K - 1), (U, K)
        node = np.full(len(m), self.shape.root, np.int64)
        m = np.asarray(m, np.int64).copy()
        at = np.flatnonzero(node >= K)  # (N',) those still above a leaf
        while len(at):
            i, x, row = node[at] - K, m[at], piece[at]
            a, s, th = self.a[row, i], self.s[row, i], theta[which[at], i]
            q, rho = np.divmod(x, s)
            left_n, r = np.divmod(2 * rho * a + th, 2 * s)
            left_n += q * a
            is_left = r + 2 * a >= 2 * s  # ℓ(x + 1) > ℓ(x): position x is the left's
            node[at] = down = np.where(is_left, self.left[i], self.right[i])
            m[at] = np.where(is_left, left_n, x - left_n)
            at = at[down >= K]
        return node, counts[which, node] + m

    def counts(self, piece: np.ndarray, rank: np.ndarray, m: np.ndarray) -> np.ndarray:
        """Each source's count in ``rank``'s stream at ``m`` positions after ``piece``'s head,
        ``(N, K)`` (``m`` up to the piece's length: the next head); at a head (``m = 0``) the
        head's counts, the others down the nodes."""
        K, n_in = self.K, self.shape.inner
        theta, out = self.state(piece, rank)  # (N, K - 1), (N, K) copies
        live = np.flatnonzero(m)
        if not len(live):
            return out
        cnt = np.zeros((K + n_in, len(live)), np.int64)
        cnt[self.shape.root] = m[live]
        for i in reversed(range(n_in)):  # parents before children
            a, s, th = self.a[piece[live], i], self.s[piece[live], i], theta[live, i]
            q, rho = np.divmod(cnt[K + i], s)
            left = q * a + (2 * rho * a + th) // (2 * s)
            cnt[self.left[i]], cnt[self.right[i]] = left, cnt[K + i] - left
        out[live] += cnt[:K].T
        return out

    def position(self, p: int, r: int, k: int, c: int) -> int:
        """The position after piece ``p``'s head in rank ``r``'s stream of its ``c``-th read of
        source ``k`` (counted from the grid's start): up its path by the inverse of ``ℓ``."""
        theta, heads = self.state(np.array([p]), np.array([r]))
        return _climb(self.shape, (self.a[p], self.s[p], theta[0]), k, c - int(heads[0, k]))
