"""Properties of ShardedMixtureDataset's readers (``streaming/mixture_readers.py``) computed at once.

A stretch's counts come from its tree's period (a table) where the table is small, else down
the tree; a step's draws are placed many at once (``_draws``, ``_segment_of``). Each shortcut is
held here to the plain way, draw by draw, point by point.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from distsampling import ShardedMixtureDataset
from distsampling.mixing.tree import _count
from strategies import (
    light_among_heavy_weights,
    mixture_batch_sizes,
    mixture_worker_counts,
    sharded_mixtures,
)
from test_sharded_mixture import draw_by_draw


def sources_of(shards: list[list[int]]) -> list[tuple]:
    return [(list(range(len(s))), s, lambda shard, start=0: iter(range(9))) for s in shards]


#: a grid: the sources and weights (a schedule or not), micro-batch, ranks, readers a rank
grids = st.fixed_dictionaries(
    {
        "mix": sharded_mixtures(),
        "b": mixture_batch_sizes,
        "world": st.integers(1, 4),
        "workers": mixture_worker_counts,
    }
)


def make(a: dict, **kwargs) -> ShardedMixtureDataset:
    shards, weights = a["mix"]
    return ShardedMixtureDataset(sources_of(shards), weights, a["b"], num_replicas=a["world"],
                                 rank=0, num_workers=max(1, a["workers"]), epoch_length=10**6,
                                 **kwargs)  # fmt: skip


@given(grids, st.integers(0, 80), st.integers(0, 400))
def test_counts_by_a_trees_period_are_the_counts_down_the_tree(a, step, G):
    """Invariant: ``c_k(n + S) = c_k(n) + c_k(S)`` (``S`` a tree's total weight): every count a
    grid makes from its stretches' tables (each reader's before a step, all sources' or one's,
    a stretch's at one step or several, and ``reach``) is the count down the tree, point by
    point."""
    with_table, down = make(a)._grid, make(a)._grid
    down.table = 0  # no table: every count down the tree
    assert all(down._period(p) is None for p in range(len(down.pieces)))
    R = with_table.W * with_table.n
    assert (with_table.counts(step, np.arange(R)) == down.counts(step, np.arange(R))).all()
    for p, (_, _, tree) in enumerate(with_table.pieces):
        # many points at once (64 or more), consecutive (the range routed once) or spread
        # wide (each down the tree): each point's counts as the point alone
        for t in (step + np.arange(70), step + 9 * np.arange(70)):
            alone = np.concatenate([down._at(p, t[i : i + 7]) for i in range(0, len(t), 7)])
            assert down._at(p, t).tolist() == alone.tolist()
        period = with_table._period(p)
        n = np.arange(0, 3 * period[0] + 2, max(1, period[0] // 300)) if period else None
        for k in range(with_table.K):
            if n is not None:  # three periods and past them
                assert with_table._count_in(p, k, n).tolist() == _count(tree, k, n).tolist()
            assert (with_table.in_stretch(k, p, step) == down.in_stretch(k, p, step)).all()
            several = with_table.in_stretch(k, p, [step, step + 3])  # (2, R): each step's
            assert several.tolist() == [down.in_stretch(k, p, s).tolist() for s in (step, step + 3)]
            assert (with_table.reach(k, p, G) == down.reach(k, p, G)).all()
    for k in range(with_table.K):
        assert (with_table.reader_counts(k, step) == down.reader_counts(k, step)).all()


@given(grids)
def test_a_table_is_made_exactly_where_it_holds_at_most_table_entries(a):
    """Invariant: stretch ``p``'s table holds ``K·S`` counts (``S`` its total weight): it is
    made where that is at most ``table``, not where it is one more."""
    grid = make(a)._grid
    tree = grid.pieces[0][2]
    S = tree.nodes[0][tree.root] + tree.nodes[1][tree.root]  # the sum of its integer weights
    assert (grid._period(0) is None) == (S * grid.K > grid.table)
    if S * grid.K <= grid.table:
        assert grid._period(0)[0] == S and grid._period(0)[1].shape == (S + 1, grid.K)
        at, over = make(a)._grid, make(a)._grid
        at.table, over.table = S * grid.K, S * grid.K - 1
        assert at._period(0) is not None and over._period(0) is None


@given(grids, st.integers(0, 60), st.data())
def test_many_draws_placed_at_once_are_each_one_placed_alone(a, step, data):
    """Invariant: the pass, offset and run of readers' draws of a source placed at once
    (``_draws``: by stretch, by segment, each one's segment checked against the first's) are
    each draw's placed alone, in any order and with repeats; past a reader's draws in a stretch
    (or of a source it never draws) an ``IndexError``."""
    ds = make(a)
    grid = ds._grid
    R = grid.W * grid.n
    counts = grid.counts(step, np.arange(R))  # (R, K) every reader's draws before the step
    for k in range(grid.K):
        if not grid.weighs(k, 10**9):  # not in the last stretch: each reader's draws of k end
            q0 = data.draw(st.integers(0, R - 1))
            total = int(ds._before(k, len(grid.pieces) - 1)[q0])
            with pytest.raises(
                IndexError, match=f"reader {q0} never draws source {k} a {total + 1}-th"
            ):
                ds._draws(k, np.array([q0], np.int64), np.array([total], np.int64))
        drawn = [(q, c) for q in range(R) for c in range(int(counts[q, k]))]
        if not drawn:
            continue
        picked = data.draw(st.lists(st.sampled_from(drawn), min_size=1, max_size=12))
        q, c = (np.array(x, np.int64) for x in zip(*picked, strict=True))
        together = ds._draws(k, q, c)
        alone = [ds._draw(k, int(qi), int(ci)) for qi, ci in zip(q, c, strict=True)]
        assert [tuple(int(x[i]) for x in together) for i in range(len(q))] == alone


@given(grids, st.data())
def test_the_segments_of_many_draws_at_once_are_each_ones_searched_alone(a, data):
    """Invariant: ``_segment_of`` (the first draw's segment searched, the others checked
    against its edges, those outside searched alone) is each draw's :meth:`_segment`: the
    leftovers (``-1``) or the pass its reader's draw of the stretch falls in; draws anywhere,
    and draws on either side of an edge (a reader's last draw of the leftovers or of a pass,
    its first of the next pass), beside other readers' draws."""
    ds = make(a)
    grid = ds._grid
    R = grid.W * grid.n
    for p, (_, _, tree) in enumerate(grid.pieces):
        for k in sorted(tree.paths):
            q = data.draw(st.lists(st.integers(0, R - 1), min_size=1, max_size=8))
            # each reader's edges below 120: the draws on either side of a change of segment
            edges = {x: [z for y in range(1, 120) if ds._segment(k, p, x, y - 1)
                         != ds._segment(k, p, x, y) for z in (y - 1, y)] for x in set(q)}  # fmt: skip
            near = [st.sampled_from(edges[x][:2]) | st.sampled_from(edges[x]) if edges[x]
                    else st.nothing() for x in q]  # the first edge most often: the leftovers'  # fmt: skip
            c = [data.draw(near[i] | st.integers(0, 300)) for i in range(len(q))]
            got = ds._segment_of(k, p, np.array(q, np.int64), np.array(c, np.int64))
            assert got.tolist() == [ds._segment(k, p, x, y) for x, y in zip(q, c, strict=True)]


@given(grids, st.integers(0, 60))
def test_a_step_placed_at_once_is_every_slot_placed_one_by_one(a, step):
    """Invariant: ``batch_at(step)`` (every slot's count from its rank's counts and its earlier
    slots of the same source, placed source by source at once) is each rank's slots placed one
    by one: slot ``i`` of source ``k`` is its reader's draw ``counts[k]``, then ``counts[k]``
    goes up by one; each ``(source, shard, offset)`` of Python ints (as printed, and as JSON
    writes them)."""
    ds = make(a)
    grid, nw = ds._grid, ds._readers()
    counts = ds.counts_at(step)  # (W, nw, K)
    want = []
    for r, ks in enumerate(grid.step_sources(step).tolist()):
        c, row = counts[r, step % nw].tolist(), []
        for k in ks:
            p, o, _ = ds._draw(k, r * nw + step % nw, c[k])
            row.append((k, *ds._where(k, p, o)))
            c[k] += 1
        want.append(row)
    got = ds.batch_at(step)
    assert got == want
    assert all(type(x) is int for row in got for slot in row for x in slot)


@given(grids, st.integers(0, 60), st.data())
def test_the_counts_of_any_readers_are_their_rows_of_every_readers_counts(a, step, data):
    """Invariant: a grid's counts for any readers (a prefix ``0 .. k - 1``, any other list, all
    of them in order or turned), asked in any order on one grid, are those readers' rows of
    every reader's counts on a fresh grid: what a call keeps for later (every reader's base)
    never leaks into another's."""
    R = make(a)._grid.W * make(a)._grid.n
    every = make(a)._grid.counts(step, np.arange(R))  # (R, K)
    grid = make(a)._grid
    asks = data.draw(st.lists(st.one_of(st.integers(1, R).map(lambda k: list(range(k))),
                                        st.lists(st.integers(0, R - 1), min_size=1, max_size=6)),
                              min_size=2, max_size=5))  # fmt: skip
    turned = [[(q + s) % R for q in range(R)] for s in (1, 2)]  # every reader, none in place
    for readers in [*asks, list(range(R)), *turned, *asks]:
        assert grid.counts(step, readers).tolist() == every[readers].tolist(), readers


@given(
    light_among_heavy_weights(),
    st.integers(1, 16),
    mixture_batch_sizes,
    st.sampled_from([4, 16, 64]),
    st.integers(0, 60),
    st.sampled_from([1, 5, 64, 300, 1 << 16]),
)
@example(([1, 2, 1, 3, 1000, 1000], 3), 8, 3, 16, 5, 1 << 16)  # on forward past the first scan
@example(([3, 1, 3, 997, 2], 0), 5, 1, 16, 33, 1 << 16)  # on back past the first scan
@example(([1000, 1], 1), 1, 5, 16, 44, 5)  # probes back, one at draw G, then a bisection
def test_reach_of_a_light_source_among_many_readers_is_its_draw_by_draw_count(
    mix, world, b, workers, G, near
):
    """Invariant: where the guess of the step holding draw ``G`` (the line of the source's
    share) misses by more than the first scan about it (a light source among heavy ones, read
    by many readers, whose departures from the share add up), the scan goes on, forward or
    back, and still ends at that step: ``reach`` is the draw-by-draw count."""
    weights, k = mix
    ds = ShardedMixtureDataset(sources_of([[1]] * len(weights)), weights, b, num_replicas=world,
                               rank=0, num_workers=workers, epoch_length=10**6)  # fmt: skip
    grid = ds._grid
    grid.near = near  # the steps scanned one by one, at most
    assert grid.reach(k, 0, G).tolist() == draw_by_draw(grid, k, 0, G).tolist()
