"""Properties of MixtureSampler's global layout (the default): one stream of the weight tree,
whatever the number of ranks and the micro-batch, its global batches Megatron's; an elastic
resume goes on with the same stream; Megatron-LM's own test of a change of data-parallel size,
ported."""

from __future__ import annotations

import bisect
import json
from collections import Counter
from fractions import Fraction
from itertools import islice, pairwise

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from distsampling import MixtureSampler
from strategies import elastic_world_sizes, mixture_batch_sizes, mixture_sources, seeds


def roundtrip(state: dict) -> dict:
    return json.loads(json.dumps(state))


def global_batches(sizes, weights, grids, seed=0, length=None) -> list[list[int]]:
    """Each step's global batch, sorted, read by every rank's iteration over ``grids``
    ``(W, b, steps)`` one after another, each loading the last one's state (rank 0's)."""
    out, state = [], None
    for W, b, steps in grids:
        ranks = [MixtureSampler(sizes, weights, b, W, r, seed=seed, epoch_length=length)
                 for r in range(W)]  # fmt: skip
        for s in ranks:
            if state is not None:
                s.load_state_dict(state)
        its = [iter(s) for s in ranks]
        for _ in range(steps):
            out.append(sorted(i for it in its for _, i in zip(range(b), it)))
        state = roundtrip(ranks[0].state_dict())
    return out


@given(sources=mixture_sources(), world=elastic_world_sizes, b=mixture_batch_sizes, seed=seeds)
def test_the_stream_is_the_one_of_a_single_rank_whatever_the_grid(sources, world, b, seed):
    """Invariant: the source and item number at every stream position are the same for any
    ``num_replicas`` and ``batch_size``; step s's global batch is the stream's positions
    [s·B, (s+1)·B), the indices a single rank of micro-batch B reads at step s."""
    sizes, weights = sources
    s = MixtureSampler(sizes, weights, b, world, 0, seed=seed)
    one = MixtureSampler(sizes, weights, world * b, 1, 0, seed=seed)
    n = 6 * world * b
    assert [a.tolist() for a in s.sources(np.arange(n))] == [
        a.tolist() for a in one.sources(np.arange(n))
    ]
    for step in range(6):
        assert sorted(i for mb in s.batch_at(step) for i in mb) == sorted(one.batch_at(step)[0])


@given(sources=mixture_sources(), world=elastic_world_sizes, b=mixture_batch_sizes)
def test_every_prefix_of_the_stream_keeps_the_single_rank_bound_at_any_scale(sources, world, b):
    """Invariant: on any grid each source's count in every prefix of the stream is within
    bound() (max β_k / 2) of its share, and in every global batch within 2·bound(); rank r reads
    micro-batch (r + s) mod W of step s."""
    sizes, weights = sources
    s = MixtureSampler(sizes, weights, b, world, 0, shuffle=False)
    units, B, steps = s.units[0], world * b, 8
    ks = s.sources(np.arange(steps * B))[0]
    for k, u in enumerate(units):
        share = Fraction(u, sum(units))
        counts = np.cumsum(ks == k).tolist()
        assert all(abs(c - share * (n + 1)) <= s.bound() for n, c in enumerate(counts))
        for t in range(steps):
            assert abs(int((ks[t * B : (t + 1) * B] == k).sum()) - share * B) <= 2 * s.bound()
    for t in range(steps):
        for r in range(world):
            m = (r + t) % world
            assert s.positions(t, r).tolist() == list(range(t * B + m * b, t * B + (m + 1) * b))


@given(sources=mixture_sources(), w1=elastic_world_sizes, w2=elastic_world_sizes,
       w3=elastic_world_sizes, b1=mixture_batch_sizes, b2=mixture_batch_sizes,
       b3=mixture_batch_sizes, steps=st.integers(0, 5), steps2=st.integers(0, 5), seed=seeds)  # fmt: skip
def test_an_elastic_resume_reads_the_stream_the_uninterrupted_run_reads(
    sources, w1, w2, w3, b1, b2, b3, steps, steps2, seed
):
    """Invariant: after ``steps`` steps on W1 × b1, a resume on W2 × b2 reads the stream on, and
    after ``steps2`` more a resume of that on W3 × b3 (from a grid whose first position is not
    the stream's: each node's phase there carried in the state): the run's indices, in stream
    order, are those a single rank reads of the same stream."""
    sizes, weights = sources
    grids = [(w1, b1, steps), (w2, b2, steps2), (w3, b3, 4)]
    before = global_batches(sizes, weights, grids, seed, 10**9)
    flat = [i for batch in before for i in batch]
    one = MixtureSampler(sizes, weights, 1, 1, 0, seed=seed, epoch_length=10**9)
    n = steps * w1 * b1 + steps2 * w2 * b2 + 4 * w3 * b3
    stream = one._indices(*one.sources(np.arange(n))).tolist()
    cuts = [w1 * b1] * steps + [w2 * b2] * steps2 + [w3 * b3] * 4
    at = np.cumsum([0, *cuts]).tolist()
    assert [sorted(stream[a:z]) for a, z in pairwise(at)] == before
    assert sorted(flat) == sorted(stream)


@pytest.mark.parametrize(
    ("dp_before", "dp_after", "resume_step"), [(1, 8, 15), (8, 1, 15), (1, 2, 7)]
)
def test_a_change_of_data_parallel_size_keeps_the_samples_megatrons_test(
    dp_before, dp_after, resume_step
):
    """Example (Megatron-LM's test_cyclic_sampler_no_sharding_preserves_samples_after_dp_change,
    ported): a dataset of 250, a global batch of 16, 32 steps; the data-parallel size changes
    mid-run (1 → 8 and 8 → 1 after 15 steps, 1 → 2 after 7), the micro-batch 16 / dp. The
    samples drawn (two passes of the dataset and more) are the multiset the unchanged run
    draws, and here each global batch too; a mixture of two sources (100 and 150 at 0.4 / 0.6) the same."""
    for sizes, weights in (([250], [1]), ([100, 150], [0.4, 0.6])):
        grid = lambda dp, steps: (dp, 16 // dp, steps)  # noqa: E731
        grids = [grid(dp_before, resume_step), grid(dp_after, 32 - resume_step)]
        reference = global_batches(sizes, weights, [grid(dp_before, 32)], length=32 * 16)
        resumed = global_batches(sizes, weights, grids, length=32 * 16)  # the run is one epoch
        assert [len(b) for b in resumed] == [16] * 32
        assert Counter(i for b in resumed for i in b) == Counter(i for b in reference for i in b)
        assert resumed == reference


@given(weights=st.lists(st.lists(st.integers(0, 5), min_size=3, max_size=3).filter(any),
                        min_size=10, max_size=30), world=elastic_world_sizes, b=mixture_batch_sizes)  # fmt: skip
def test_a_schedule_changing_every_step_routes_every_tree_at_once_as_one_by_one(weights, world, b):
    """Invariant: positions spanning many changes (routed through every tree at once) get the
    sources and item numbers each one gets alone (routed through its own tree); item numbers
    run 0, 1, 2, ... for each source (nothing lost or read twice across the changes)."""
    plan = [(t, w) for t, w in enumerate(weights)]
    s = MixtureSampler([7, 5, 3], plan, b, world, 0)
    n = len(plan) * world * b
    ks, js = s.sources(np.arange(n))
    one = [s.sources([p]) for p in range(n)]  # a piece at a time
    assert ks.tolist() == [int(k[0]) for k, _ in one] and js.tolist() == [int(j[0]) for _, j in one]
    for k in range(3):
        assert js[ks == k].tolist() == list(range(int((ks == k).sum())))


@given(
    weights=st.lists(st.lists(st.integers(0, 6), min_size=3, max_size=3).filter(any),
                     min_size=1, max_size=12),
    gap=st.integers(1, 4), world=elastic_world_sizes, b=mixture_batch_sizes,
)  # fmt: skip
@pytest.mark.parametrize("layout", ["global", "per_rank"])
def test_under_a_schedule_the_stream_keeps_its_bound_and_each_rank_twice_it(
    layout, weights, gap, world, b
):
    """Invariant: with changes every ``gap`` steps, the global stream's count of each source on
    every prefix is within ``bound()`` of the schedule's cumulative share (every node's phase
    carried across the changes: however many); per rank, each rank's reads on every prefix
    within ``2·bound()`` of the schedule's share of them (each rank's phases carried)."""
    plan = [(g * gap, w) for g, w in enumerate(weights)]
    s = MixtureSampler([9] * 3, plan, b, world, 0, layout=layout)
    B, steps = world * b, len(plan) * gap + 2
    units = [np.array(u, dtype=object) for u in s.units]
    share = [[Fraction(int(x), int(sum(u))) for x in u] for u in units]  # each entry's shares
    at = [max(g for g, (first, _) in enumerate(plan) if first <= t) for t in range(steps)]
    two = 2 * s.bound()
    if layout == "global":
        ks = s.sources(np.arange(steps * B))[0].tolist()
        counts, target = [0] * 3, [Fraction(0)] * 3
        for n, k in enumerate(ks):
            g = at[n // B]
            counts[k] += 1
            target = [t + share[g][j] for j, t in enumerate(target)]
            assert all(abs(c - t) <= s.bound() for c, t in zip(counts, target))
    else:
        for r in range(world):
            counts, target = [0] * 3, [Fraction(0)] * 3
            for t in range(steps):
                g = at[t]
                for k in s.sources(s.positions(t, r))[0].tolist():
                    counts[k] += 1
                    target = [x + share[g][j] for j, x in enumerate(target)]
                    assert all(abs(c - x) <= two for c, x in zip(counts, target))


def test_a_layout_is_named_when_wrong_and_kept_by_repr_pickle_and_state():
    """Invariant: an unknown layout is refused naming it; layout is keyword-only; the per-rank
    sampler is a MixtureSampler whose repr, pickle and state say its layout."""
    import pickle
    import re

    message = "layout should be one of ('global', 'per_rank'), but got layout='rank'"
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        MixtureSampler([3, 3], [1, 1], 1, 1, 0, layout="rank")
    with pytest.raises(TypeError):
        MixtureSampler([3, 3], [1, 1], 1, 1, 0, 0, True, None, "per_rank")
    s = MixtureSampler([3, 3], [1, 2], 2, 2, 1, layout="per_rank")
    assert isinstance(s, MixtureSampler) and s.layout == "per_rank"
    assert repr(s).endswith("epoch_length=6, layout='per_rank')")
    assert repr(MixtureSampler([3, 3], [1, 2], 2, 2, 1)).endswith("epoch_length=6)")
    copy = pickle.loads(pickle.dumps(s))
    assert list(copy) == list(s) and copy.state_dict() == s.state_dict()
    assert s.state_dict()["kind"] == "MixtureSampler" and s.state_dict()["layout"] == "per_rank"


def test_the_first_index_far_into_a_schedule_is_read_in_ints_as_batch_at():
    """Invariant: the first index of an epoch that starts at step 2**55 + 1, where the weights
    change, comes from the integer path (its step found in ints: a float would round it back
    to 2**55, under the old weights) and is what batch_at says."""
    from itertools import islice

    step = 2**55 + 1
    plan = [(0, [1, 0]), (step, [0, 1])]
    s = MixtureSampler([5, 5], plan, 1, 1, 0, epoch_length=step)
    s.set_epoch(1)  # the epoch of positions [step, 2 * step): its first step is `step`
    assert list(islice(iter(s), 1)) == s.batch_at(step)[0][:1] and s.batch_at(step)[0][0] >= 5


def test_an_epoch_past_2_to_the_60_is_read_in_ints_through_growing_blocks():
    """Invariant: from step 2**60 on, iteration (the head, then blocks of growing size) is
    batch_at's micro-batches: every step number stays an exact int (a float past 2**53 would
    round steps together)."""
    from itertools import islice

    s = MixtureSampler([2**61, 2**61], [1, 3], 1, 1, 0, shuffle=False, epoch_length=2**60)
    s.set_epoch(1)
    got = list(islice(iter(s), 80))
    assert got == [s.batch_at(2**60 + t)[0][0] for t in range(80)]


@given(
    start=st.lists(st.integers(0, 9), min_size=2, max_size=5).filter(any),
    end=st.lists(st.integers(0, 9), min_size=5, max_size=5),
    steps=st.integers(2, 60), world=elastic_world_sizes, b=mixture_batch_sizes,
)  # fmt: skip
def test_a_ramp_changing_every_step_keeps_every_prefix_of_the_stream_within_bound(
    start, end, steps, world, b
):
    """Invariant: weights moved linearly from ``start`` to ``end``, a change at every step, keep
    every prefix of the global stream within ``bound()`` of the schedule's cumulative share
    (every node's phase carried across the changes), and ``bound()`` of a ramp is at most the
    fixed weights' bound of its shape plus what the shares' total change adds (it stays below 3
    for the ramps of a mixture's tutorial)."""
    K = len(start)
    end = end[:K] if any(end[:K]) else start
    plan = [(t, [Fraction(a * (steps - t) + z * t, steps) for a, z in zip(start, end)])
            for t in range(steps)]  # fmt: skip
    plan = [(t, w) for t, w in plan if any(w)]
    s = MixtureSampler([10**6] * K, plan, b, world, 0)
    B = world * b
    ks = s.sources(np.arange((steps + 1) * B))[0].tolist()
    counts, target = [0] * K, [Fraction(0)] * K
    firsts = [t for t, _ in plan]
    for n, k in enumerate(ks):
        units = s.units[bisect.bisect_right(firsts, n // B) - 1]
        target = [x + Fraction(u, sum(units)) for x, u in zip(target, units)]
        counts[k] += 1
        assert max(abs(c - x) for c, x in zip(counts, target)) <= s.bound()


def test_the_tutorials_ramp_keeps_the_stream_within_3_and_its_state_continues_it():
    """Invariant: 4 sources from .6/.25/.1/.05 to .3/.3/.2/.2, a change every step for 1,000
    steps: ``bound()`` is below 3, and a state saved at step 1,100 (its node phases with it)
    loads into a grid of other ranks and micro-batch that reads the same stream on."""
    a, z = np.array([0.6, 0.25, 0.1, 0.05]), np.array([0.3, 0.3, 0.2, 0.2])
    plan = [(t, [round(float(x), 6) for x in a + (z - a) * t / 1000]) for t in range(1000)]
    s = MixtureSampler([10**6] * 4, plan, 4, 8, 0, epoch_length=10**9)
    assert s.bound() < 3
    it = iter(s)
    for _ in range(4 * 1100):  # rank 0's 1,100 steps
        next(it)
    state = s.state_dict()
    other = MixtureSampler([10**6] * 4, plan, 2, 4, 0, epoch_length=10**9)
    other.load_state_dict(state)
    assert other.state_dict()["phase"] != s.state_dict()["phase"]  # carried: not the fresh one
    ks_one = s.sources(np.arange(1100 * 32, 1120 * 32))[0].tolist()
    ks_two = other.sources(np.arange(1100 * 32, 1120 * 32))[0].tolist()
    assert ks_one == ks_two


@given(
    weights=st.lists(st.lists(st.integers(0, 6), min_size=3, max_size=3).filter(any),
                     min_size=2, max_size=10),
    gap=st.integers(1, 4), world=elastic_world_sizes, b=mixture_batch_sizes,
)  # fmt: skip
def test_per_rank_under_a_schedule_a_micro_batch_is_within_twice_the_bound_a_global_batch_w_times(
    weights, gap, world, b
):
    """Invariant: per rank, under a schedule, every micro-batch (a stretch of its rank's phased
    stream) is within ``2·bound()`` of ``b·w(t)`` and every global batch (the ranks' micro-batches,
    their phases not one window's) within ``2·W·bound()`` of ``B·w(t)``."""
    plan = [(g * gap, w) for g, w in enumerate(weights)]
    s = MixtureSampler([9] * 3, plan, b, world, 0, layout="per_rank")
    B, steps, two = world * b, len(plan) * gap + 2, 2 * s.bound()
    ks = s.sources(np.arange(steps * B))[0].reshape(steps, world, b)
    for t in range(steps):
        u = s.units[max(g for g, (first, _) in enumerate(plan) if first <= t)]
        for k in range(3):
            share = Fraction(u[k], sum(u))
            assert all(abs(int(c) - b * share) <= two for c in (ks[t] == k).sum(1))
            assert abs(int((ks[t] == k).sum()) - B * share) <= world * two


@given(
    weights=st.lists(st.integers(0, 6), min_size=3, max_size=3).filter(any),
    firsts=st.lists(st.integers(1, 30), min_size=1, max_size=4, unique=True),
    world=elastic_world_sizes, b=mixture_batch_sizes,
)  # fmt: skip
def test_per_rank_a_schedule_of_equal_entries_reads_the_fixed_weights_windows(
    weights, firsts, world, b
):
    """Invariant: per rank, a schedule whose entries all give the same weights (each rank's
    phases carried through them: the same tree going on) reads, step by step and rank by rank,
    the fixed weights' windows of one tree: sources, item numbers, batch_at, iteration and
    when_read alike."""
    plan = [(0, weights)] + [(f, weights) for f in sorted(firsts)]
    steps = max(firsts) + 3
    for r in range(world):
        fixed = MixtureSampler([7] * 3, weights, b, world, r, layout="per_rank", shuffle=False,
                               epoch_length=steps * world * b)  # fmt: skip
        s = MixtureSampler([7] * 3, plan, b, world, r, layout="per_rank", shuffle=False,
                           epoch_length=steps * world * b)  # fmt: skip
        n = np.arange(steps * world * b)
        assert [x.tolist() for x in s.sources(n)] == [x.tolist() for x in fixed.sources(n)]
        assert list(s) == list(fixed)
        assert s.batch_at(steps - 1) == fixed.batch_at(steps - 1)
        for k in range(3):
            for i in range(7):
                assert s.when_read(k, i, 1) == fixed.when_read(k, i, 1)


def test_a_state_whose_grid_starts_at_a_phase_of_0_loads_and_goes_on():
    """Invariant: a node's phase may be 0 (``[1, 1]`` after one position: its rounding at a
    whole sample): a state of a grid that started there, after an elastic resume, loads into
    another sampler and reads on as the first grid's sampler does."""
    s = MixtureSampler([9, 9], [1, 1], 1, 1, 0)
    next(iter(s))
    wide = MixtureSampler([9, 9], [1, 1], 2, 1, 0)
    wide.load_state_dict(s.state_dict())  # another micro-batch at step 1: a new grid
    state = wide.state_dict()
    assert state["phase"][0][0] == 0
    again = MixtureSampler([9, 9], [1, 1], 2, 1, 0)
    again.load_state_dict(state)
    assert list(again) == list(wide)


@given(
    weights=st.lists(st.lists(st.integers(0, 6), min_size=3, max_size=3).filter(any),
                     min_size=2, max_size=5),
    gap=st.integers(1, 4), world=elastic_world_sizes, b=mixture_batch_sizes,
)  # fmt: skip
def test_per_rank_under_a_schedule_reads_alike_whatever_the_chunks_of_its_steps(
    weights, gap, world, b
):
    """Invariant: per rank, under a schedule, each position's source and item number are the
    same whether the steps' ends are counted all at once or one step a chunk (``ENDS``: the
    counts a chunk holds), positions given in any order."""
    from distsampling.mixing import layout

    plan = [(g * gap, w) for g, w in enumerate(weights)]
    s = MixtureSampler([9] * 3, plan, b, world, 0, layout="per_rank")
    n = np.random.default_rng(len(plan) * world + b).permutation((len(plan) * gap + 2) * world * b)
    whole = [x.tolist() for x in s.sources(n)]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(layout, "ENDS", 1)  # one step a chunk
        assert [x.tolist() for x in s.sources(n)] == whole


@pytest.mark.parametrize(
    ("layout", "plan", "W", "b", "epoch"),
    [("global", [(0, [1, 2]), (5, [3, 1])], 2, 3, 0),
     ("per_rank", [(0, [1, 2]), (5, [3, 1])], 2, 3, 0),
     ("per_rank", [(0, [1, 2])], 2, 3, 0),
     ("per_rank", [(0, [1, 2]), (5, [3, 1])], 33, 1, 1)],
)  # fmt: skip
def test_a_long_read_reads_its_positions_whatever_its_blocks(layout, plan, W, b, epoch):
    """Invariant: iterating reads steps in blocks that double up to about 2**14 indices (fewer
    with many ranks under a schedule); over 40,000 steps, enough to reach blocks of that most
    (b = 3 does not divide it), from step 0 or from an epoch past step 2**53 (where a float
    loses steps), the indices read are, in order, those of the rank's positions' sources and
    item numbers, computed at once."""
    sizes, rank, n = [7, 5], 1, 40000
    s = MixtureSampler(sizes, plan, b, W, rank, shuffle=False, layout=layout,
                       epoch_length=2**59 if epoch else n * W * b)  # fmt: skip
    s.set_epoch(epoch)
    first = -(-(2**59) // (W * b)) * epoch  # the epoch's first step
    steps = first + np.arange(n, dtype=np.int64)[:, None]
    batch = (rank + steps * (layout == "global")) % W  # the micro-batch the rank reads (rotated)
    positions = (steps * (W * b) + batch * b + np.arange(b)).ravel()  # (n b,) the rank's
    ks, js = s.sources(positions)
    offsets = np.array([0, sizes[0]], np.int64)
    assert list(islice(s, n * b)) == (offsets[ks] + js % np.array(sizes)[ks]).tolist()
