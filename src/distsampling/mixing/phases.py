r"""A schedule's stream in one tree shape, each node's phase carried across the changes.

A weight tree (``tree.py``) splits each node's positions between its children as the divisor
merge of two: of a node's first ``m`` positions, the left child (weight ``a`` of ``s = a + b``)
gets ``ℓ(m) = ⌊(2m·a + θ) / 2s⌋``, with ``θ = s`` (the tree's own phase). A schedule changes the
weights at some steps. Starting a new tree at each change adds up to a tree's window error per
change; under a ramp changing every step that error walks away (tens of samples in 1,000 steps).
Here the tree's *shape* stays (the first weights' Huffman tree; a source of weight 0 there waits
under a node of weight 0), and at a change each node keeps its rounding: its residual
``φ = ((2m·a + θ) mod 2s) / 2s`` at the end of a piece is the next piece's ``θ / 2s``. So a node's
left count stays within ``(-1/2, 1/2]`` of ``Σ a/s`` over its positions, whatever the changes
(``θ`` is rounded to ``1/2s``: ``s`` scaled up to about ``2**30``, ``< 2**-30`` a change).

Each node's split errs by at most 1/2 of its own target; a child's target follows its parent's
count with the changing share ``p = a/s``, so source ``k`` (path ``v_1 .. v_d = k``) stays within

    E_k = Σ_i 1/2 · Π_{j > i} (max p_j + TV(p_j)),   TV: the total change of p_j over the pieces

of the schedule's cumulative share (summation by parts over the pieces). With fixed weights this
is the tree's ``β_k / 2``; a ramp adds its small total change; a schedule that swings shares back
and forth pays in proportion to the swing.

Per piece and node the table holds ``(a, s, θ)`` scaled, and each source's count at the piece's
head: ``O(pieces × K)``, made once, in order (each piece's ``θ`` follows the last one's end).
A position then descends in O(depth) int64 steps, and an item climbs back by the inverse.

References:
    distsampling/mixing/tree.py (the weight tree, the divisor merge of two, its bound)
    R. Tijdeman, "The chairman assignment problem", Discrete Math. 1980
"""

from __future__ import annotations

from fractions import Fraction
from itertools import pairwise

import numpy as np

from .tree import _tree

__all__: list[str] = []

SCALE = 2**30  # each node's (a, s) scaled up to about this: θ kept to 2**-31 at a change


class _Shape:
    """The tree shape of a schedule: the Huffman tree of its first weights (``tree.py``'s, the
    same nodes), then the sources of weight 0 there, merged in pairs, under one node beside it.
    Internal node ``K + i`` has children ``left[i]``, ``right[i]``; made children first."""

    def __init__(self, units: list[int]) -> None:
        K = self.K = len(units)
        tree = _tree(units)
        made = [v for v in range(K, 2 * K) if tree.nodes[2][v] != v]  # its merged nodes
        self.left = [tree.nodes[2][v] for v in made]
        self.right = [tree.nodes[3][v] for v in made]
        top, todo = tree.root, [k for k in range(K) if units[k] == 0]
        while len(todo) > 1:  # the zero-weight sources in pairs, round after round
            nxt = []
            for x, y in zip(todo[::2], todo[1::2]):
                self.left.append(x), self.right.append(y), nxt.append(K + len(self.left) - 1)
            todo = nxt + todo[len(todo) - len(todo) % 2 :]
        if todo:  # under one node beside the weighted tree: weight 0 until a change
            self.left.append(top), self.right.append(todo[0])
            top = K + len(self.left) - 1
        self.root, self.inner = top, len(self.left)  # K - 1 internal nodes
        self.parent = {c: K + i for i, pair in enumerate(zip(self.left, self.right)) for c in pair}

    def weights(self, units: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each internal node's ``(a, b)``, its children's weights, ``(P, K - 1)`` each, of the
        pieces' integer weights ``units`` ``(P, K)``."""
        w = np.zeros((len(units), self.K + self.inner), np.int64)
        w[:, : self.K] = units
        for i, (x, y) in enumerate(zip(self.left, self.right)):  # children before parents
            w[:, self.K + i] = w[:, x] + w[:, y]
        return w[:, self.left], w[:, self.right]


class _Phases:
    """The table of a schedule's pieces (``P``): per internal node ``(a, s, θ)`` scaled, ``(P,
    K - 1)`` each, its carried residual ``φ`` at the piece's head, and each source's count there,
    ``(P, K)``. Piece ``p`` holds the ``lengths[p]`` root positions after its head (the last
    one: all the rest); ``counts`` and ``phases``: each source's count and each node's ``φ`` as
    ``(numerator, denominator)`` at the first head (a fresh stream: zeros and ``(1, 2)``)."""

    def __init__(self, shape: _Shape, units: np.ndarray, lengths: list[int],
                 counts: list[int], phases: list[tuple[int, int]] | None = None) -> None:  # fmt: skip
        P, K, n_in = len(units), shape.K, shape.inner
        self.shape, self.P = shape, P
        wa, wb = shape.weights(np.asarray(units, np.int64))  # (P, K - 1) each
        s = wa + wb
        M = np.maximum(1, SCALE // np.maximum(s, 1))  # (P, K - 1) each node's scale
        self.a = np.where(s > 0, wa * M, 0)  # a node of weight 0 in a piece: no position
        self.s = np.where(s > 0, s * M, 1)  # comes to it (a = 0, s = 1, θ = 0)
        present = (s > 0).tolist()
        a2s, s2s = self.a.tolist(), self.s.tolist()  # Python ints: the loop below is scalar
        thetas = [[0] * n_in for _ in range(P)]
        heads = []  # (P, K) each source's count at a head
        self.carried: list[list[tuple[int, int]]] = []  # (P, K - 1) each node's φ at a head
        n = list(counts)  # each source's count at the current head
        phi = list(phases) if phases is not None else [(1, 2)] * n_in
        order = list(reversed(range(n_in)))  # parents before children
        for p in range(P):
            heads.append(n)
            self.carried.append(list(phi))
            theta, a2, s2 = thetas[p], a2s[p], s2s[p]
            for i in range(n_in):  # each node's phase in this piece: θ/2s' = φ, to the nearest
                if present[p][i]:  # 1/2s', below 2s'
                    R, D = phi[i]
                    theta[i] = min((4 * R * s2[i] + D) // (2 * D), 2 * s2[i] - 1)
            if p + 1 == P:
                break
            m = [0] * (K + n_in)  # each node's positions in this piece, root first
            m[shape.root] = lengths[p]
            for i in order:
                if not present[p][i]:  # no position came: its phase waits
                    continue
                left, r = divmod(2 * m[K + i] * a2[i] + theta[i], 2 * s2[i])
                m[shape.left[i]], m[shape.right[i]] = left, m[K + i] - left
                phi[i] = (r, 2 * s2[i])
            n = [x + y for x, y in zip(n, m)]  # (K,) the leaves' counts on
        self.theta = np.array(thetas, np.int64).reshape(P, n_in)  # (P, K - 1)
        self.heads = np.array(heads, np.int64).reshape(P, K)  # (P, K)

    def route(self, piece: np.ndarray, m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(source, its item number)`` of the positions ``m`` after the heads of their
        ``piece``, ``(N,)`` each: every position down its piece's node table at once."""
        K, left, right = self.shape.K, np.array(self.shape.left), np.array(self.shape.right)
        node = np.full(len(m), self.shape.root, np.int64)
        m = np.asarray(m, np.int64).copy()
        at = np.flatnonzero(node >= K)  # (N',) those still above a leaf
        while len(at):
            g, i, x = piece[at], node[at] - K, m[at]
            a, s, th = self.a[g, i], self.s[g, i], self.theta[g, i]
            q, rho = np.divmod(x, s)  # 2ρa + θ < 2**63: s <= 2**31
            left_n, r = np.divmod(2 * rho * a + th, 2 * s)  # ℓ(x) = q·a + left_n
            left_n += q * a
            is_left = r + 2 * a >= 2 * s  # ℓ(x + 1) > ℓ(x): position x is the left's
            node[at] = np.where(is_left, left[i], right[i])
            m[at] = np.where(is_left, left_n, x - left_n)
            at = at[node[at] >= K]
        return node, self.heads[piece, node] + m

    def route_one(self, p: int, m: int) -> tuple[int, int]:
        """:meth:`route` of one position, on Python ints (the first index at once)."""
        K, v = self.shape.K, self.shape.root
        while v >= K:
            i = v - K
            a, s, th = int(self.a[p, i]), int(self.s[p, i]), int(self.theta[p, i])
            left, r = divmod(2 * m * a + th, 2 * s)
            v, m = (
                (self.shape.left[i], left)
                if r + 2 * a >= 2 * s
                else (self.shape.right[i], m - left)
            )
        return v, int(self.heads[p, v]) + m

    def counts(self, p: int, m: np.ndarray) -> np.ndarray:
        """Each source's count at ``m`` positions after piece ``p``'s head, ``(N, K)``."""
        K, n_in = self.shape.K, self.shape.inner
        m = np.asarray(m, np.int64)
        cnt = np.zeros((K + n_in, len(m)), np.int64)
        cnt[self.shape.root] = m
        for i in reversed(range(n_in)):  # parents before children
            a, s, th = self.a[p, i], self.s[p, i], self.theta[p, i]
            q, rho = np.divmod(cnt[K + i], s)
            left = q * a + (2 * rho * a + th) // (2 * s)
            cnt[self.shape.left[i]], cnt[self.shape.right[i]] = left, cnt[K + i] - left
        return (cnt[:K] + self.heads[p, :, None]).T

    def state(self, p: int, m: int) -> list[tuple[int, int]]:
        """Each node's residual ``φ`` as ``(numerator, denominator)`` at ``m`` positions after
        piece ``p``'s head: where a new grid starting there goes on."""
        K, n_in = self.shape.K, self.shape.inner
        n, out = {self.shape.root: m}, list(self.carried[p])
        for i in reversed(range(n_in)):
            a, s, th = int(self.a[p, i]), int(self.s[p, i]), int(self.theta[p, i])
            x = n.get(K + i, 0)
            if a == 0 and s == 1:  # weight 0 in this piece: its phase waits
                n[self.shape.left[i]], n[self.shape.right[i]] = 0, x
                continue
            left, r = divmod(2 * x * a + th, 2 * s)
            n[self.shape.left[i]], n[self.shape.right[i]] = left, x - left
            out[i] = (r, 2 * s)
        return out

    def position(self, p: int, k: int, j: int) -> int:
        """The position after piece ``p``'s head of source ``k``'s item ``j`` (overall): up its
        path by the inverse of ``ℓ``: the ``j``-th left is at ``⌈(2s(j+1) - θ)/2a⌉ - 1``, the
        ``j``-th right at ``⌊(2s·j + θ)/2b⌋``."""
        return _climb(
            self.shape, (self.a[p], self.s[p], self.theta[p]), k, j - int(self.heads[p, k])
        )


def _climb(shape: _Shape, table: tuple[np.ndarray, ...], k: int, j: int) -> int:
    """The position of source ``k``'s ``j``-th item in a piece: up its path from the leaf,
    each node's ``(a, s, θ)`` from ``table`` (three ``(K - 1,)`` rows), by the inverse of ``ℓ``."""
    a_row, s_row, theta_row = table
    v = k
    while v != shape.root:
        up = shape.parent[v]
        i = up - shape.K
        a, s, th = int(a_row[i]), int(s_row[i]), int(theta_row[i])
        if shape.left[i] == v:
            j = -((th - 2 * s * (j + 1)) // (2 * a)) - 1
        else:
            j = (2 * s * j + th) // (2 * (s - a))
        v = up
    return j


def _bound(shape: _Shape, units: np.ndarray, pieces: int) -> Fraction:
    """``max_k E_k``: the schedule's bound of each source's count from its cumulative share
    (module docstring), plus ``2**-30`` a change and level for the phases' rounding."""
    a, b = shape.weights(np.asarray(units, np.int64))  # (P, K - 1) each
    s = a + b
    out, K = Fraction(0), shape.K
    for k in range(K):
        if not units[:, k].any():
            continue
        e, v = Fraction(0), k
        path = []
        while v != shape.root:
            up = shape.parent[v]
            path.append((up - K, shape.left[up - K] == v))
            v = up
        for i, is_left in reversed(path):  # root first
            child = a[:, i] if is_left else b[:, i]
            shares = [Fraction(int(c), int(t)) if t else None for c, t in zip(child, s[:, i])]
            shares = [x for x in shares if x is not None]
            swing = sum((abs(x - y) for x, y in pairwise(shares)), Fraction(0))
            split = any(0 < x < 1 for x in shares)  # else its count is its parent's or 0: exact
            e = Fraction(split, 2) + e * (max(shares) + swing) + Fraction(pieces - 1, 2**30)
        out = max(out, e)
    return out
