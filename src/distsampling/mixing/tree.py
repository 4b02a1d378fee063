r"""The weight tree: which source each position of a tree's stream reads, in O(depth) int64 steps.

The positive integer weights are merged as Huffman merges, the two lightest first (ties to the
older node), so a leaf's ancestors at least double in weight every two levels. A node of
children ``L``, ``R`` (weights ``a``, ``b``) gives ``L`` as many of its first ``n`` positions as

    c_L(n) = ⌊n·a/(a+b) + 1/2⌋ = q·a + ⌊(2ρa + a + b) / 2(a+b)⌋,   n = q(a+b) + ρ

(position n is L's iff ``c_L(n+1) > c_L(n)``) and ``R`` the rest: the divisor (Sainte-Laguë)
merge of two, ``L``'s ``j``-th item at time ``(j + 1/2)/a``, ``R``'s at ``(i + 1/2)/b``, ties to
``L``. A tree position descends in O(depth) int64 steps; an item climbs back up by the inverse,
``⌈(2j+1)(a+b)/2a⌉ - 1`` on the left, ``⌊(2j+1)(a+b)/2b⌋`` on the right.

The tree's bound. ``c_L(n) - n·a/(a+b)`` lies in ``(-1/2, 1/2]``. Source ``k`` under the nodes
``v_1, ..., v_d = k`` (root excluded) has ``c_k(n) = w_k·n + Σ_i (w_k / w_{v_i})·e_i``, so
``|c_k(n) - w_k·n| <= β_k / 2`` with ``β_k = Σ_i w_k / w_{v_i} < 4`` (the ratios halve every two
levels), and any window of the tree's positions is within ``< β_k``. With up to 3 sources
``β_k < 2``.

References:
    R. Tijdeman, "The chairman assignment problem", Discrete Math. 1980
    M. Balinski, H. P. Young, "Fair Representation" (divisor methods; Sainte-Laguë/Webster)
"""

from __future__ import annotations

from functools import cached_property, lru_cache
from typing import Any

import numpy as np

from .weights import UNITS, Mix, _units

__all__: list[str] = []


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
