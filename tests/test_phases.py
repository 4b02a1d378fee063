"""A schedule's stream in one tree shape, every node's phase carried (``mixing/phases.py``):
its table against the position-by-position rule, its inverse, its counts, its resume state and
its bound."""

from __future__ import annotations

from fractions import Fraction
from itertools import pairwise

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from distsampling.mixing.phases import _bound, _Phases, _Shape
from distsampling.mixing.tree import _tree
from strategies import changing_weights


def one_by_one(shape: _Shape, units: list[list[int]], lengths: list[int]) -> list[int]:
    """The stream's sources, position by position: each node's left child gets ``ℓ(m) = ⌊(2m·a
    + θ)/2s⌋`` of its first ``m`` positions of a piece (``a``, ``s`` scaled up to 2**30; a fresh
    node ``θ = s``), and at a change the residual ``((2m·a + θ) mod 2s)/2s`` is the next
    ``θ/2s``, to the nearest ``1/2s`` below ``2s``; a node of weight 0 keeps its residual."""
    K, phi, out = shape.K, [(1, 2)] * shape.inner, []
    for u, n in zip(units, lengths):
        w = list(u) + [0] * shape.inner
        for i, (x, y) in enumerate(zip(shape.left, shape.right)):
            w[K + i] = w[x] + w[y]
        table, m = {}, [0] * shape.inner
        for i, x in enumerate(shape.left):
            a, s = w[x], w[K + i]
            if s:
                M, (R, D) = max(1, 2**30 // s), phi[i]
                table[i] = (a * M, s * M, min((4 * R * s * M + D) // (2 * D), 2 * s * M - 1))
        for _ in range(n):
            v = shape.root
            while v >= K:
                i = v - K
                a, s, th = table[i]
                left = (2 * (m[i] + 1) * a + th) // (2 * s) > (2 * m[i] * a + th) // (2 * s)
                m[i] += 1
                v = shape.left[i] if left else shape.right[i]
            out.append(v)
        for i, (a, s, th) in table.items():
            phi[i] = ((2 * m[i] * a + th) % (2 * s), 2 * s)
    return out


def table_of(units: list[list[int]], lengths: list[int]) -> tuple[_Shape, _Phases]:
    shape = _Shape(units[0])
    return shape, _Phases(shape, np.array(units), lengths[:-1], [0] * len(units[0]))


def positions_of(lengths: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """``(piece, position after its head)`` of every stream position, ``(N,)`` each."""
    piece = np.repeat(np.arange(len(lengths)), lengths)
    heads = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    return piece, np.arange(sum(lengths)) - heads[piece]


@given(changing_weights())
@example(([[1, 0]], [4]))  # a node of weight 1: all its positions to its one weighted child
def test_the_table_routes_every_position_as_the_one_by_one_rule_and_numbers_items_in_order(
    case,
):
    """Invariant: the table's route of every position (all at once, vectorised, and one on
    Python ints) is the source of the position-by-position rule, and each source's items are
    numbered 0, 1, 2, ... in stream order."""
    units, lengths = case
    shape, table = table_of(units, lengths)
    piece, m = positions_of(lengths)
    ks, js = table.route(piece, m)
    assert ks.tolist() == one_by_one(shape, units, lengths)
    assert [table.route_one(int(p), int(x)) for p, x in zip(piece, m)] == list(
        zip(ks.tolist(), js.tolist())
    )
    for k in range(len(units[0])):
        assert js[ks == k].tolist() == list(range(int((ks == k).sum())))


@given(changing_weights())
def test_counts_at_any_position_are_the_routes_counts_and_position_inverts_the_route(case):
    """Invariant: ``counts(p, m)`` is each source's count of the stream before that position,
    and ``position(p, k, j)`` is where item ``j`` of source ``k`` was routed."""
    units, lengths = case
    _, table = table_of(units, lengths)
    piece, m = positions_of(lengths)
    ks, js = table.route(piece, m)
    K = len(units[0])
    before = np.zeros(K, np.int64)
    for n, (p, x, k, j) in enumerate(zip(piece.tolist(), m.tolist(), ks.tolist(), js.tolist())):
        assert table.counts(p, np.array([x]))[0].tolist() == before.tolist(), n
        assert table.position(p, k, j) == x
        before[k] += 1


@given(changing_weights(), st.data())
def test_a_table_started_from_the_state_at_any_position_goes_on_with_the_same_stream(case, data):
    """Invariant: the counts and node phases at any position (``state``) start a table that
    routes the rest of the stream as the uninterrupted one (an elastic resume's continuation)."""
    units, lengths = case
    shape, table = table_of(units, lengths)
    piece, m = positions_of(lengths)
    cut = data.draw(st.integers(0, len(piece) - 1))
    p, x = int(piece[cut]), int(m[cut])
    rest = [lengths[p] - x, *lengths[p + 1 :]]
    again = _Phases(shape, np.array(units[p:]), rest[:-1],
                    table.counts(p, np.array([x]))[0].tolist(), table.state(p, x))  # fmt: skip
    ks, js = table.route(piece[cut:], m[cut:])
    piece2, m2 = positions_of(rest)
    ks2, js2 = again.route(piece2, m2)
    assert ks2.tolist() == ks.tolist() and js2.tolist() == js.tolist()


@given(changing_weights())
def test_every_prefix_of_the_stream_is_within_the_bound_of_its_cumulative_share(case):
    """Invariant: every source's count on every prefix is within ``_bound`` of the sum of its
    shares over the positions so far, however often the weights change; with one piece the
    bound is the tree's ``max β_k / 2``."""
    units, lengths = case
    shape, table = table_of(units, lengths)
    ks = table.route(*positions_of(lengths))[0].tolist()
    bound = _bound(shape, np.array(units), len(units))
    K, shares = len(units[0]), [[Fraction(x, sum(u)) for x in u] for u in units]
    count, target, n = [0] * K, [Fraction(0)] * K, 0
    for p, length in enumerate(lengths):
        for _ in range(length):
            target = [t + x for t, x in zip(target, shares[p])]
            count[ks[n]] += 1
            n += 1
            assert max(abs(c - t) for c, t in zip(count, target)) <= bound
    if len(units) == 1:
        tree, beta = _tree(units[0]), Fraction(0)
        for k, path in tree.paths.items():
            w = units[0][k]
            beta = max(
                beta, sum((Fraction(w, a if left else b) for a, b, left in path), Fraction(0)) / 2
            )
        assert bound == beta


@given(st.lists(st.integers(0, 9), min_size=1, max_size=8).filter(any))
def test_the_shape_is_the_weight_trees_with_the_zero_sources_under_a_node_beside_it(units):
    """Invariant: the shape's nodes over the positive sources are the weight tree's (the same
    children, the same order); every source is a leaf, once; there are K - 1 internal nodes."""
    shape, tree = _Shape(units), _tree(units)
    K = len(units)
    ours = {(x, y) for x, y in zip(shape.left, shape.right)}
    theirs = {
        (tree.nodes[2][v], tree.nodes[3][v]) for v in range(K, 2 * K) if tree.nodes[2][v] != v
    }
    assert theirs <= ours
    leaves = [c for c in shape.left + shape.right if c < K]
    assert sorted(leaves) == list(range(K)) if K > 1 else leaves == []
    assert shape.inner == K - 1


@given(changing_weights())
@example(([[1, 0], [0, 1]], [3, 3]))  # a node that never splits: all, then none, to a child
def test_the_bound_is_each_sources_sum_down_its_path_of_half_a_split_times_the_shares_swing(
    case,
):
    """Invariant: ``_bound`` is ``max_k E_k``, ``E`` summed from the root down source ``k``'s
    path: at a node that splits in some piece, ``E_child = 1/2 + E_parent·(max share + total
    change of the share) + (pieces - 1)·2**-30``; one that never splits adds no 1/2 (its child
    gets all or none of its positions)."""
    units, _ = case
    shape = _Shape(units[0])
    K, P = len(units[0]), len(units)

    def weight(v: int, u: list[int]) -> int:
        if v < K:
            return u[v]
        return weight(shape.left[v - K], u) + weight(shape.right[v - K], u)

    want = Fraction(0)
    for k in range(K):
        if not any(u[k] for u in units):
            continue
        path, v = [], k
        while v != shape.root:
            path.append(v)
            v = shape.parent[v]
        e, up = Fraction(0), shape.root
        for v in reversed(path):  # from the root's child down to k
            shares = [Fraction(weight(v, u), weight(up, u)) for u in units if weight(up, u)]
            swing = sum((abs(x - y) for x, y in pairwise(shares)), Fraction(0))
            half = Fraction(1, 2) if any(0 < x < 1 for x in shares) else Fraction(0)
            e = half + e * (max(shares) + swing) + Fraction(P - 1, 2**30)
            up = v
        want = max(want, e)
    assert _bound(shape, np.array(units), P) == want


@given(changing_weights(), st.integers(0, 2**40), st.data())
def test_far_into_a_piece_the_route_is_where_the_counts_step_and_position_inverts_it(
    case, far, data
):
    """Invariant: at any position of a piece, however far past its head (past the scaled
    weights' ``2**30``), the route's source is the one whose count steps there, its item number
    is that count, and ``position`` finds it again."""
    units, lengths = case
    _, table = table_of(units, lengths)
    p = data.draw(st.integers(0, len(units) - 1))
    at = table.counts(p, np.array([far, far + 1]))  # (2, K)
    assert at.dtype == np.int64  # exact at any count: no float on the way
    k, j = table.route(np.array([p]), np.array([far]))
    (k, j) = (int(k[0]), int(j[0]))
    assert (at[1] - at[0]).tolist() == [int(x == k) for x in range(len(units[0]))]
    assert j == at[0][k] and table.route_one(p, far) == (k, j)
    assert table.position(p, k, j) == far


def test_a_residual_just_below_a_whole_sample_rounds_below_it_never_to_the_next():
    """Invariant: a node whose residual ends a piece at ``(D - 1)/D``, carried into weights whose
    scaled ``2s`` is under ``D/2``, starts the next piece at ``θ = 2s - 1`` (the nearest below a
    whole sample): its count at the piece's head is its count there, not one more."""
    s = 2**31 - 1  # one node: 1 and 2**31 - 2, scaled by 1
    units = [[1, s - 1], [1, 2]]
    table = _Phases(_Shape(units[0]), np.array(units), [(s - 1) // 2], [0, 0])
    assert table.carried[1] == [(2 * s - 1, 2 * s)]  # (2L·a + s) mod 2s, L = (s - 1)/2
    assert int(table.theta[1, 0]) == 2 * int(table.s[1, 0]) - 1
    assert table.counts(1, np.array([0]))[0].tolist() == table.heads[1].tolist()


def test_the_table_and_every_answer_are_int64():
    """Invariant: the table's weights, phases and counts, a route's sources and item numbers
    and the counts are int64: exact at any count (no float on the way)."""
    units = [[3, 0, 5], [2**28, 7, 1], [0, 4, 4]]
    shape, table = table_of(units, [5, 9, 3])
    assert shape.weights(np.array(units))[0].dtype == np.int64
    for array in (table.a, table.s, table.theta, table.heads):
        assert array.dtype == np.int64
    ks, js = table.route(np.array([0, 1, 2]), np.array([1, 2**40, 3]))
    assert ks.dtype == js.dtype == np.int64
    assert table.counts(1, np.array([2**40])).dtype == np.int64


@pytest.mark.parametrize(
    ("units", "lengths"),
    [
        ([[1, 1, 1], [0, 0, 1], [1, 2, 1]], [1, 2, 7]),  # the waiting node below the root
        ([[1, 1, 1, 1], [1, 1, 0, 0], [1, 2, 3, 1]], [3, 3, 6]),  # a node after it goes on
    ],
)
def test_a_node_of_weight_0_in_a_piece_keeps_its_phase_for_the_piece_it_returns_in(units, lengths):
    """Invariant: a node whose sources all weigh 0 in a piece gets no position there and keeps
    the phase it had (the node over the sources of weight 0 in the second piece reads a
    position or three in the first, so its phase is not the fresh 1/2, then waits a piece),
    while the nodes beside it go on: the table routes as the one-by-one rule, numbers each
    source's items in order, and a state taken inside the waiting piece goes on as the
    uninterrupted stream, the waiting phase with it."""
    shape, table = table_of(units, lengths)
    piece, m = positions_of(lengths)
    ks, js = table.route(piece, m)
    assert ks.tolist() == one_by_one(shape, units, lengths)
    for k in range(3):
        assert js[ks == k].tolist() == list(range(int((ks == k).sum())))
    waiting = shape.parent[units[1].index(0)] - shape.K  # over the sources of weight 0
    assert table.carried[1][waiting] == table.carried[2][waiting] != (1, 2)
    state = table.state(1, 1)
    assert state[waiting] == table.carried[1][waiting]
    rest = [lengths[1] - 1, lengths[2]]
    again = _Phases(shape, np.array(units[1:]), rest[:1],
                    table.counts(1, np.array([1]))[0].tolist(), state)  # fmt: skip
    rest_ks, rest_js = again.route(*positions_of(rest))
    cut = lengths[0] + 1
    assert rest_ks.tolist() == ks[cut:].tolist() and rest_js.tolist() == js[cut:].tolist()
