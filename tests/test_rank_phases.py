"""Every rank's own stream of the weight tree, each node's phase carried across a schedule's
changes (``mixing/rank_phases.py``): each rank's table against the one-stream rule started
``r·b`` positions in, its counts and its inverse."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from distsampling.mixing.phases import _Phases, _Shape
from distsampling.mixing.rank_phases import NEAR, _RankPhases, _rescale
from strategies import (
    changing_weights,
    elastic_world_sizes,
    large_changing_weights,
    mixture_batch_sizes,
    rank_table_budgets,
)
from test_phases import one_by_one


@given(
    changing_weights() | large_changing_weights(), elastic_world_sizes, mixture_batch_sizes,
    rank_table_budgets,
)  # fmt: skip
def test_each_ranks_stream_is_the_one_stream_rule_started_r_b_positions_in(weighted, W, b, budget):
    """Invariant: rank ``r``'s stream in the table (pieces of ``steps`` steps, ``b`` positions a
    step) is, source for source, the one-stream rule (``phases.py``, position by position, in
    Python ints) whose first piece is ``r·b`` positions longer, from its position ``r·b`` on; its
    count before each read, and ``counts`` at every position up to a piece's end, are the running
    counts of those sources, in int64; ``position`` finds each read back. Weights up to ``2**31``
    a node too (scale 1: every product within int64)."""
    units, steps = weighted
    K, shape = len(units[0]), _Shape(units[0])
    table = _RankPhases(shape, np.array(units, np.int64), steps[:-1], W, b, budget)
    piece = np.repeat(np.arange(len(steps)), np.array(steps) * b)  # (N,) each rank position's
    heads = np.concatenate([[0], np.cumsum(steps)[:-1]]) * b
    m = np.arange(sum(steps) * b) - heads[piece]  # (N,) its position after its piece's head
    for r in range(W):
        lengths = [(steps[0] + r) * b] + [x * b for x in steps[1:]]
        want = one_by_one(shape, units, lengths)[r * b :]
        ranks = np.full(len(m), r, np.int64)
        ks, cs = table.route(piece, ranks, m)
        assert ks.tolist() == want and cs.dtype == np.int64
        running = np.zeros(K, np.int64)
        for n, (k, c) in enumerate(zip(ks.tolist(), cs.tolist())):
            assert c == running[k]
            at = table.counts(piece[n : n + 1], ranks[:1], m[n : n + 1])
            assert at[0].tolist() == running.tolist() and at.dtype == np.int64
            assert table.position(int(piece[n]), r, k, c) == m[n]
            running[k] += 1
            if n + 1 == len(m) or piece[n + 1] != piece[n]:  # a piece's end: the next head
                end = table.counts(piece[n : n + 1], ranks[:1], m[n : n + 1] + 1)[0]
                assert end.tolist() == running.tolist()


@given(st.integers(1, 2**31), st.integers(1, 2**31), st.data())
def test_a_residual_is_rescaled_to_the_nearest_step_of_the_new_scale_in_int64(half, S, data):
    """Invariant: ``_rescale`` (int64, its product split in two) is ``min(⌊(4R·S + D)/2D⌋,
    2S - 1)`` in Python ints for every residual ``R < D`` (``D`` even, up to 2**32) and scale
    ``S`` up to 2**31."""
    D = 2 * half
    R = data.draw(st.integers(0, D - 1) | st.sampled_from([0, D - 1]))
    want = min((4 * R * S + D) // (2 * D), 2 * S - 1)
    got = _rescale(np.array([R], np.int64), np.array([D], np.int64), np.array([S], np.int64))
    assert got.tolist() == [want]


@given(
    changing_weights() | large_changing_weights(), elastic_world_sizes, mixture_batch_sizes,
    rank_table_budgets,
)  # fmt: skip
def test_each_ranks_table_is_the_global_streams_started_r_b_positions_in(weighted, W, b, budget):
    """Invariant: the table holds, in int64, the global stream's scaled weights (``phases.py``)
    and its pieces' lengths, and, from the first change on, rank ``r``'s node phases and counts are those of the global
    stream whose first piece is ``r·b`` positions longer, less its counts at ``r·b`` (a node of
    weight 0 in a piece: no phase to compare); ``sums`` adds the ranks' counts."""
    units, steps = weighted
    K, shape = len(units[0]), _Shape(units[0])
    table = _RankPhases(shape, np.array(units, np.int64), steps[:-1], W, b, budget)
    pieces, total = np.arange(len(units)), 0
    for r in range(W):
        theta, heads = table.state(pieces, np.full(len(units), r))  # (P, K - 1), (P, K)
        dtypes = {x.dtype for x in (table.a, table.s, table.lengths, theta, heads)}
        assert dtypes == {np.dtype(np.int64)}
        total = total + heads
        lengths = [(steps[0] + r) * b] + [x * b for x in steps[1:-1]]
        one = _Phases(shape, np.array(units, np.int64), lengths, [0] * K)
        assert table.a.tolist() == one.a.tolist() and table.s.tolist() == one.s.tolist()
        on = table.s[1:] > 1  # (P - 1, K - 1) the nodes of positive weight after the first piece
        assert theta[1:][on].tolist() == one.theta[1:][on].tolist()
        skipped = one.counts(0, np.array([r * b]))[0]  # (K,) the global stream's first r·b
        assert (heads[1:] + skipped).tolist() == one.heads[1:, :K].tolist()
    assert table.sums.tolist() == total.tolist()


@given(
    changing_weights() | large_changing_weights(), elastic_world_sizes, mixture_batch_sizes,
    st.integers(0, 2**50), rank_table_budgets,
)  # fmt: skip
def test_far_into_a_piece_a_position_reads_the_source_whose_count_rises(
    weighted, W, b, far, budget
):
    """Invariant: at any position of a piece, far past a node's scaled weights (``m = q·s + ρ``,
    ``q > 0``), ``route`` names the one source whose ``counts`` rise from ``m`` to ``m + 1``, its
    count before the read the one at ``m``; the counts add up to the head's plus ``m``."""
    units, steps = weighted
    K = len(units[0])
    table = _RankPhases(_Shape(units[0]), np.array(units, np.int64), steps[:-1], W, b, budget)
    for p in range(len(units)):
        for r in range(W):
            piece, rank = np.array([p, p]), np.array([r, r])
            before, after = table.counts(piece, rank, np.array([far, far + 1]))
            k, c = table.route(piece[:1], rank[:1], np.array([far]))
            assert (after - before).tolist() == np.eye(K, dtype=np.int64)[k[0]].tolist()
            head = table.state(piece[:1], rank[:1])[1][0]
            assert c.tolist() == [before[k[0]]] and before.sum() == head.sum() + far


@given(
    changing_weights(), elastic_world_sizes, mixture_batch_sizes, st.integers(2**53, 2**55),
    rank_table_budgets,
)  # fmt: skip
def test_changes_far_apart_keep_every_count_at_a_head_exact(weighted, W, b, far, budget):
    """Invariant: with pieces of more than ``2**53`` steps (no float holds such counts exactly),
    each rank's counts at a piece's head are its counts at the last piece's end, to the sample,
    and add up to every position read before it."""
    units, steps = weighted
    steps = [far + x for x in steps]
    table = _RankPhases(_Shape(units[0]), np.array(units, np.int64), steps[:-1], W, b, budget)
    for p in range(len(units) - 1):
        for r in range(W):
            end = table.counts(np.array([p]), np.array([r]), np.array([steps[p] * b]))[0]
            head = table.state(np.array([p + 1]), np.array([r]))[1][0]
            assert head.tolist() == end.tolist()
            assert int(head.sum()) == sum(steps[: p + 1]) * b


@given(
    changing_weights() | large_changing_weights(), elastic_world_sizes, mixture_batch_sizes,
    rank_table_budgets,
)  # fmt: skip
def test_a_table_keeps_every_piece_while_they_fit_else_stays_within_its_budget(
    weighted, W, b, budget
):
    """Invariant: every rank's phases and counts at every piece (``W·(2K - 1)`` int64 a piece)
    are kept exactly when they fit in ``budget`` bytes; past it the kept pieces (every
    ``every``-th, with their residuals) take at most ``budget`` bytes and one piece more,
    whatever ``W``, and the summed counts stay one row a piece."""
    units, steps = weighted
    P, K = len(units), len(units[0])
    table = _RankPhases(_Shape(units[0]), np.array(units, np.int64), steps[:-1], W, b, budget)
    piece = W * (2 * K - 1) * 8
    for edge in (P * piece, P * piece - 1):  # just fits, one byte short
        short = _RankPhases(_Shape(units[0]), np.array(units, np.int64), steps[:-1], W, b, edge)
        assert (short.every == 1) == (edge == P * piece)
    kept = sum(x.nbytes for x in (table.theta, table.R, table.D, table.heads))
    assert (table.every == 1) == (P * piece <= budget)
    if table.every == 1:
        assert kept == P * piece and table.theta.shape[0] == P
    else:
        assert kept <= budget + piece + -(-P // table.every) * (K - 1) * 8
        assert table.heads.shape[0] == -(-P // table.every) < P or P == 1
    assert table.sums.shape == (P, K) and table.sums.dtype == np.int64


@given(changing_weights(), elastic_world_sizes, mixture_batch_sizes, st.data())
def test_a_read_makes_again_only_the_pieces_since_the_nearest_kept_or_lately_made(
    weighted, W, b, data
):
    """Invariant: past its budget (every ``C``-th piece kept, ``C`` from 2 up), reading piece
    ``p`` steps every rank's streams through exactly the pieces from the nearest piece before it
    that is kept or among the last ``NEAR`` made (read again: none); the streams it gives are
    the whole table's."""
    units, steps = weighted
    P, K = len(units), len(units[0])
    whole = P * W * (2 * K - 1) * 8
    C = data.draw(st.integers(2, max(2, P)), label="C")
    table = _RankPhases(_Shape(units[0]), np.array(units, np.int64), steps[:-1], W, b,
                        -(-whole // C))  # fmt: skip
    full = _RankPhases(_Shape(units[0]), np.array(units, np.int64), steps[:-1], W, b)
    C, made, stepped = table.every, [], []
    real = table._step
    table._step = lambda p, *rest: stepped.append(1) or real(p, *rest)
    # a few pieces forward, then back (each within the last NEAR made), then any order
    forward = list(range(1, min(P, NEAR + 1)))
    reads = forward + forward[::-1] + data.draw(st.lists(st.integers(0, P - 1), max_size=20))
    for p in reads:
        stepped.clear()
        theta, heads = table.state(np.full(W, p), np.arange(W))
        want_theta, want_heads = full.state(np.full(W, p), np.arange(W))
        assert theta.tolist() == want_theta.tolist() and heads.tolist() == want_heads.tolist()
        assert len(stepped) == p - max([p // C * C, *(q for q in made if q <= p)])
        if p not in made:  # the newest last, the oldest out past NEAR
            made = (made + [p])[-NEAR:]
